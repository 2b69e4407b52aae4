"""Build data/public_llmfoundry.csv from MosaicML LLM Foundry's MPT training benchmark tables.

Source: https://github.com/mosaicml/llm-foundry (Apache-2.0), file ``scripts/train/benchmarking/README.md``:
markdown tables of measured MPT pre-training throughput (125M-70B parameters, 8-512 A100/H100 GPUs, bf16 and
fp8, FSDP) on the MosaicML platform, one table per hardware section. Each table row is one measured
configuration and becomes one run-history row in perfmodel's schema.

The script reads the file from a git snapshot (no network): ``--git-dir`` a bare or non-bare clone (e.g. the one
the ``fetch`` tool brings) at ``--commit`` (default HEAD), or
``--readme`` a copy of the file (then ``--commit`` must name the commit it came from). Model shapes (``n_layers``,
``d_model``) come from ``scripts/train/yamls/pretrain/mpt-<size>.yaml`` at the same commit, or from the built-in
table below (copied from those YAMLs) when only ``--readme`` is given.

Usage::

    PYTHONPATH=src python scripts/derive_public_llmfoundry.py \\
        --git-dir CLONE --out data/public_llmfoundry.csv

Derivations (stated once here, repeated in data/README.md):

* ``step_time_s = GlobalBatchSize(T) / Throughput(T/s)`` -- tokens per optimizer step over measured global tokens
  per second. (The tokens/s column has 4-8 significant digits; samples/s is rounded to an integer, 0 for some
  long-sequence rows, so it is not used.)
* ``batch_size = MicroBatchSize`` (per device), ``grad_accum = GradAccum``, so that one optimizer step covers
  ``batch_size * grad_accum * gpu_count = GlobalBatchSize`` sequences (checked for every row).
* ``flops_per_sample`` (one sequence, forward + backward) is MosaicML's own MFU numerator
  (``collect_results.py``): ``3 * (2 * NumParams * seq) + 3 * (4 * n_layers * d_model * seq**2)``, i.e.
  6·N·seq plus the attention score/value matmuls. Checked against the table's ``Model TFLOP`` (achieved model
  TFLOP/s per GPU) for every row. Its two terms are also written as the op-level split the ``mfu`` rule reads
  (:func:`perfmodel.features.attention_share`): ``op_matmul_flops = 6·N·seq`` (the dense GEMMs) and
  ``op_attention_flops = 12·n_layers·d_model·seq**2`` (QKᵀ and AV, forward + backward), analytic like
  ``flops_per_sample`` (no other op column is written: the rows carry no traced op features).
* ``precision``: ``amp_bf16`` / ``bf16`` -> ``bf16``; ``amp_fp8`` -> ``fp8`` (H100, Transformer Engine).
* The schema's layout columns: ``tp = pp = cp = 1`` and ``dp = gpu_count`` (FSDP data parallelism only),
  ``micro_batch_size = MicroBatchSize``, ``zero_stage`` from ``Sharding Strategy`` (FULL_SHARD 3, SHARD_GRAD_OP 2,
  NO_SHARD 0), ``recompute = full`` where ``Activation Checkpointing`` is True (MPT's
  ``activation_checkpointing_fn`` in ``llmfoundry/models/mpt/modeling_mpt.py`` checkpoints every ``MPTBlock``
  when the YAML sets no ``activation_checkpointing_target``, and these YAMLs set none), else ``none``;
  ``gpus_per_node = 8`` (the platform's 8-GPU nodes, as ``nodes``). Shape: ``n_heads`` from the YAMLs,
  ``n_kv_heads = n_heads`` (no ``attn_type`` in the YAMLs: MPT's default multi-head attention),
  ``ffn_hidden = expansion_ratio (4) x d_model``, ``vocab = 50368``; the table's ``NumParams`` equals the count of
  that shape exactly on every row (checked).
* ``gpu_type``: ``h100_80gb`` -> H100-SXM5-80GB, ``a100_80gb`` -> A100-SXM4-80GB, ``a100_40gb`` ->
  A100-SXM4-40GB. The table names neither form factor; the MosaicML platform's 8-GPU nodes with 1600 Gbps RoCE
  (and H100 peaks of 989 TFLOP/s bf16 in the MFU column) are SXM parts -- an assumption, recorded in
  ``gpu_type_assumed``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

SOURCE_REPO = "https://github.com/mosaicml/llm-foundry"
SOURCE_PATH = "scripts/train/benchmarking/README.md"
YAML_PATH = "scripts/train/yamls/pretrain/mpt-{size}.yaml"
SIZES = ("125m", "350m", "760m", "1b", "3b", "7b", "13b", "30b", "70b")
#: (n_layers, d_model) of the MPT configs, as in scripts/train/yamls/pretrain/mpt-<size>.yaml (used only when the
#: YAMLs are not readable; the git path reads them and checks they agree).
SHAPES = {"125m": (12, 768), "350m": (24, 1024), "760m": (24, 1536), "1b": (24, 2048), "3b": (32, 2560),
          "7b": (32, 4096), "13b": (40, 5120), "30b": (48, 7168), "70b": (80, 8192)}
#: n_heads of the MPT configs (same YAMLs; checked like SHAPES). The YAMLs set no attn_type, so attention is MPT's
#: default multi-head attention (llmfoundry/models/utils/config_defaults.py): n_kv_heads = n_heads. They set
#: expansion_ratio 4 (MLP width 4 x d_model) and vocab_size 50368.
HEADS = {"125m": 12, "350m": 16, "760m": 12, "1b": 16, "3b": 20, "7b": 32, "13b": 40, "30b": 56, "70b": 64}
EXPANSION_RATIO, VOCAB = 4, 50368
#: zero_stage of the FSDP sharding strategy: FULL_SHARD shards weights, gradients and optimizer state (ZeRO-3),
#: SHARD_GRAD_OP gradients and optimizer state (ZeRO-2), NO_SHARD nothing
ZERO_STAGE = {"FULL_SHARD": 3, "SHARD_GRAD_OP": 2, "NO_SHARD": 0}
GPUS_PER_NODE = 8
GPU_TYPES = {"h100_80gb": "H100-SXM5-80GB", "a100_80gb": "A100-SXM4-80GB", "a100_40gb": "A100-SXM4-40GB"}
PRECISIONS = {"amp_bf16": "bf16", "bf16": "bf16", "amp_fp8": "fp8"}
COLUMNS = ["run_id", "status", "model", "family", "params", "flops_per_sample", "flops_method", "op_matmul_flops",
           "op_attention_flops", "batch_size", "grad_accum", "gpu_count", "gpu_type", "precision", "fp32_mode",
           "seq_len", "activation_checkpointing", "step_time_s", "samples_per_s", "nodes", "source", "protocol", "table_section", "n_layers", "d_model",
           "global_batch_size", "global_batch_tokens", "throughput_tokens_per_s", "throughput_samples_per_s",
           "throughput_tokens_per_s_per_gpu", "mfu_reported", "hfu_reported", "model_tflops_reported",
           "flops_check_ratio", "mp_mode", "sharding_strategy", "activation_cpu_offload", "gpu_name_reported",
           "gpu_type_assumed", "precision_reported", "source_repo", "source_path", "source_commit",
           # the schema's layout and shape columns (added after the rest; every value above unchanged)
           "micro_batch_size", "tp", "pp", "cp", "dp", "zero_stage", "recompute", "gpus_per_node", "n_heads",
           "n_kv_heads", "ffn_hidden", "vocab"]


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True,
                          check=True).stdout


def read_shapes(git_dir: Path, commit: str) -> dict[str, tuple[int, int]]:
    shapes, heads = {}, {}
    for size in SIZES:
        text = _git(git_dir, "show", f"{commit}:{YAML_PATH.format(size=size)}")
        n_layers = int(re.search(r"^\s+n_layers:\s*(\d+)", text, re.M).group(1))
        d_model = int(re.search(r"^\s+d_model:\s*(\d+)", text, re.M).group(1))
        shapes[size] = (n_layers, d_model)
        heads[size] = int(re.search(r"^\s+n_heads:\s*(\d+)", text, re.M).group(1))
        if (int(re.search(r"^\s+expansion_ratio:\s*(\d+)", text, re.M).group(1)) != EXPANSION_RATIO
                or int(re.search(r"^\s+vocab_size:\s*(\d+)", text, re.M).group(1)) != VOCAB
                or re.search(r"^\s+(attn_type|kv_n_heads|ffn_hidden_size):", text, re.M)):
            raise SystemExit(f"mpt-{size} at {commit}: expansion_ratio, vocab_size or attention type differ from "
                             "the built-in values")
    if shapes != SHAPES or heads != HEADS:
        raise SystemExit(f"MPT shapes at {commit} differ from the built-in table: {shapes} {heads}")
    return shapes


def parse_tables(text: str) -> list[dict]:
    """Every data row of every markdown table, as {header: cell}, with the ``## `` section it sits under."""
    rows, section, header = [], None, None
    for line in text.splitlines():
        if line.startswith("## "):
            section, header = line[3:].strip(), None
            continue
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif set("".join(cells)) <= set("-: "):
            continue
        else:
            if len(cells) != len(header):
                raise ValueError(f"row with {len(cells)} cells under a {len(header)}-column header: {line!r}")
            rows.append({"table_section": section, **dict(zip(header, cells))})
    return rows


def build(text: str, commit: str, shapes: dict[str, tuple[int, int]] = SHAPES) -> pd.DataFrame:
    out = []
    for r in parse_tables(text):
        size = r["Model"]
        n_layers, d_model = shapes[size]
        seq, gpus = int(r["SeqLen (T)"]), int(r["# GPUs"])
        micro, accum, gbs = int(r["MicroBatchSize"]), int(r["GradAccum"]), int(r["GlobalBatchSize"])
        if micro * accum * gpus != gbs:
            raise ValueError(f"{size} seq {seq} on {gpus}: micro {micro} x accum {accum} x gpus != global {gbs}")
        gbt, tps = int(r["GlobalBatchSize (T)"]), float(r["Throughput (T/s)"])
        if gbt != gbs * seq:
            raise ValueError(f"{size} seq {seq} on {gpus}: global tokens {gbt} != {gbs} x {seq}")
        params = int(r["NumParams"])
        # the table's count is exactly that of this shape: 12·L·d² weights and 13·L·d biases and norm parameters,
        # the tied vocabulary, learned positions (seq·d) and the final norm: it confirms MLP width and vocabulary
        if params != 12 * n_layers * d_model**2 + 13 * n_layers * d_model + (VOCAB + seq + 2) * d_model:
            raise ValueError(f"{size} seq {seq}: NumParams {params} is not the count of the YAML's shape")
        dense, attention = 3 * (2 * params * seq), 3 * (4 * n_layers * d_model * seq ** 2)
        flops = dense + attention
        step = gbt / tps
        sps = gbs / step
        tflops = float(r["Model TFLOP"])
        check = flops * sps / gpus / 1e12 / tflops  # the table's Model TFLOP is int()-truncated
        prec_raw = r["Precision"]
        gpu_raw = r["GPU"]
        ac = {"True": 1, "False": 0}[r["Activation Checkpointing"]]
        run_id = (f"llmfoundry/{gpu_raw}/mpt-{size}/seq{seq}/gpus{gpus}/mb{micro}x{accum}/{prec_raw}/"
                  f"{r['Sharding Strategy']}/ac{ac}")
        out.append({
            "run_id": run_id, "status": "ok", "model": f"mpt-{size}", "family": "decoder", "params": params,
            "flops_per_sample": flops, "flops_method": "analytic", "op_matmul_flops": float(dense),
            "op_attention_flops": float(attention), "batch_size": micro,
            "grad_accum": accum, "gpu_count": gpus, "gpu_type": GPU_TYPES[gpu_raw],
            "precision": PRECISIONS[prec_raw], "fp32_mode": "", "seq_len": seq, "activation_checkpointing": ac,
            "step_time_s": step, "samples_per_s": sps, "nodes": max(1, gpus // 8), "source": "llm-foundry",
            "protocol": ("MosaicML platform benchmark run (Composer, FSDP); throughput as collected by "
                         "scripts/train/benchmarking/collect_results.py; step_time_s = global tokens / tokens per s"),
            "table_section": r["table_section"], "n_layers": n_layers, "d_model": d_model,
            "global_batch_size": gbs, "global_batch_tokens": gbt, "throughput_tokens_per_s": tps,
            "throughput_samples_per_s": float(r["Throughput (S/s)"]),
            "throughput_tokens_per_s_per_gpu": float(r["Throughput (T/s/GPU)"]), "mfu_reported": float(r["MFU"]),
            "hfu_reported": float(r["HFU"]), "model_tflops_reported": tflops, "flops_check_ratio": round(check, 4),
            "mp_mode": r["MP Mode"], "sharding_strategy": r["Sharding Strategy"],
            "activation_cpu_offload": {"True": 1, "False": 0}[r["Activation CPUOffload"]],
            "gpu_name_reported": gpu_raw, "gpu_type_assumed": "SXM form factor assumed (table names the GPU only)",
            "precision_reported": prec_raw, "source_repo": SOURCE_REPO, "source_path": SOURCE_PATH,
            "source_commit": commit,
            # FSDP data parallelism only: every device holds (a shard of) one whole replica
            "micro_batch_size": micro, "tp": 1, "pp": 1, "cp": 1, "dp": gpus,
            "zero_stage": ZERO_STAGE[r["Sharding Strategy"]], "recompute": "full" if ac else "none",
            "gpus_per_node": GPUS_PER_NODE, "n_heads": HEADS[size], "n_kv_heads": HEADS[size],
            "ffn_hidden": EXPANSION_RATIO * d_model, "vocab": VOCAB,
        })
    df = pd.DataFrame(out, columns=COLUMNS)
    dup = df["run_id"].duplicated(keep=False)
    if dup.any():
        raise ValueError(f"duplicate configurations: {df.loc[dup, 'run_id'].tolist()}")
    return df


def write(df: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False, lineterminator="\n", float_format="%.10g")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--git-dir", type=Path, help="clone of mosaicml/llm-foundry (bare is fine)")
    src.add_argument("--readme", type=Path, help="a copy of scripts/train/benchmarking/README.md")
    ap.add_argument("--commit", default="HEAD", help="commit to read (with --readme: the commit it came from)")
    ap.add_argument("--out", type=Path, default=Path("data/public_llmfoundry.csv"))
    args = ap.parse_args(argv)
    if args.git_dir:
        commit = _git(args.git_dir, "rev-parse", args.commit).strip()
        text = _git(args.git_dir, "show", f"{commit}:{SOURCE_PATH}")
        shapes = read_shapes(args.git_dir, commit)
    else:
        if not re.fullmatch(r"[0-9a-f]{40}", args.commit):
            ap.error("--readme needs --commit <40-hex commit the file came from>")
        commit, text, shapes = args.commit, args.readme.read_text(encoding="utf-8"), SHAPES
    df = build(text, commit, shapes)
    from perfmodel.io import load_runs
    write(df, args.out)
    runs = load_runs(str(args.out))
    print(f"wrote {len(df)} rows to {args.out} (load_runs: {len(runs)} rows) from {SOURCE_REPO}@{commit}")
    print(df.groupby(["gpu_type", "precision"]).size().to_string())
    print(f"flops_check_ratio (ours / table's Model TFLOP): min {df.flops_check_ratio.min()}, "
          f"max {df.flops_check_ratio.max()}")
    job = ["model", "seq_len", "global_batch_size", "gpu_count", "gpu_type", "precision"]
    layouts = df.groupby(job)[["micro_batch_size", "zero_stage", "recompute", "activation_cpu_offload"]].apply(
        lambda d: len(d.drop_duplicates()))
    print(f"{len(layouts)} jobs (model, seq, global batch, GPUs, device, precision); {(layouts >= 3).sum()} measured "
          f"in 3 or more layouts, {(layouts == 2).sum()} in 2")
    return 0


if __name__ == "__main__":
    sys.exit(main())
