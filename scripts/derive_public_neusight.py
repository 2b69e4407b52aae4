"""Build data/public_neusight.csv from the measured training latencies in the NeuSight artifact.

Source: https://github.com/sitar-lab/NeuSight (MIT licence, (c) 2025 Georgia Institute of Technology and Microsoft
Corporation), the ASPLOS'25 artifact of "Forecasting GPU Performance for Deep Learning Training and Inference"
(Lee et al.). Its ground-truth labels ``scripts/asplos/label/<device>/<model>-train-<seq>-<batch>.json`` hold
``e2e_latency`` (ms): one fp32 training iteration (forward, cross-entropy loss, backward) of a Hugging Face
transformer built from ``scripts/asplos/data/DLmodel_configs/<model>.json`` with random weights, on one GPU of
7 NVIDIA and AMD types; ``...-dp4.json`` holds 4-GPU data-parallel runs (Megatron-LM through accelerate).

Read from a git snapshot (no network): ``--git-dir`` a clone (e.g. $MIRRORS/sitar-lab+NeuSight/repo made by
the ``fetch`` tool) at ``--commit`` (default HEAD), or ``--tree`` a directory holding the same relative paths
(``scripts/asplos/label/...``, ``scripts/asplos/data/DLmodel_configs/...``; used by the tests), with ``--commit``.

Usage::

    PYTHONPATH=src python scripts/derive_public_neusight.py \\
        --git-dir $MIRRORS/sitar-lab+NeuSight/repo --out data/public_neusight.csv

Derivations:

* ``step_time_s = e2e_latency / 1000``. What the artifact timed (``neusight/Tracing/trace.py::measure_e2e``):
  25 iterations, CUDA events around ``model(input)`` and around ``loss.backward()``, the 5 fastest of each kept and
  averaged, e2e = forward + backward. **No optimizer step and no zero_grad are timed** (``optimizer=none``,
  ``timed_phases=forward+backward``; the loss is outside both windows). The dp4 runs
  (``collect_label_distributed.py``) time forward + backward of each rank-0 iteration, 10 fastest of 50, with
  AdamW stepped outside the window.
* ``batch_size``: the file name's batch (single GPU); for dp4 the file's batch is the global batch, so
  ``batch_size = global / 4``.
* ``precision=fp32``: models in PyTorch's default float32; the single-GPU harness sets
  ``torch.backends.cudnn.allow_tf32 = False`` and leaves ``torch.backends.cuda.matmul.allow_tf32`` at PyTorch's
  default (False since 1.12), so matmuls ran in full fp32 (``fp32_mode``); the dp4 harness launches with
  ``--mixed_precision=no`` and sets neither flag (PyTorch defaults: matmul TF32 off). AMD CDNA1/2 have no TF32.
* ``params``: parameters of the model built from the config (tied embeddings counted once), counted with
  ``transformers`` on the meta device (``PARAMS`` below; tests recount where transformers is installed).
* ``flops_per_sample`` (one sequence, forward + backward): ``6 * params * seq + 12 * n_layers * d_model * seq**2``
  (Kaplan et al. 2020's 2N per token forward, x3 for backward, plus the QK^T and AV matmuls, as MosaicML's MFU
  formula). Not derived for the Switch Transformer (``switchxl4``, mixture of experts: per-token work depends on
  routing and capacity), whose ``flops_per_sample`` is left empty.
* ``gpu_type``: ``NVIDIA_H100_80GB_HBM3`` -> H100-SXM5-80GB (HBM3 and the config's 132 SMs are the SXM5 part);
  ``AMD_Instinct_MI250`` -> MI250-GCD (PyTorch sees one graphics compute die; the artifact's device config gives
  104 CUs, 64 GB, 1.64 TB/s: one GCD of an MI250); the others by name.
* Tensor- and pipeline-parallel runs (``-tp4``, ``-pp4_1``) are not imported: ``gpu_count`` in perfmodel counts
  data-parallel devices only.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

SOURCE_REPO = "https://github.com/sitar-lab/NeuSight"
LABEL_DIR = "scripts/asplos/label"
CONFIG_DIR = "scripts/asplos/data/DLmodel_configs"
LABEL = re.compile(r"^scripts/asplos/label/([^/]+)/([a-z0-9_]+)-train-(\d+)-(\d+)(-dp(\d+))?\.json$")
GPU_TYPES = {"NVIDIA_H100_80GB_HBM3": "H100-SXM5-80GB", "NVIDIA_A100_80GB_PCIe": "A100-PCIE-80GB",
             "NVIDIA_A100-SXM4-40GB": "A100-SXM4-40GB", "NVIDIA_A100-PCIE-40GB": "A100-PCIE-40GB",
             "NVIDIA_L4": "L4", "Tesla_V100-PCIE-32GB": "V100-PCIE-32GB", "Tesla_T4": "T4",
             "Tesla_P100-PCIE-16GB": "P100-PCIE-16GB", "AMD_Instinct_MI100": "MI100",
             "AMD_Instinct_MI210": "MI210", "AMD_Instinct_MI250": "MI250-GCD"}
#: Parameters of each config's model as the harness builds it (BertForPreTraining, GPT2LMHeadModel,
#: OPTForCausalLM, SwitchTransformersForConditionalGeneration), counted once with
#: ``sum(p.numel() for p in AutoModelFor...from_config(AutoConfig.from_pretrained(cfg)).parameters())`` on the
#: meta device (transformers 5.24; tied weights counted once). gpt2_large matches GPT-2 large's published 774M.
PARAMS = {"bert_large": 336226108, "gpt2_large": 774030080, "gpt3_xl": 2879554560, "gpt3_27": 2651553280,
          "opt_13": 1315758080, "switchxl4": 5267615744}
#: The class the harness builds from each config (trace.py get_model: AutoModelForPreTraining for BERT,
#: AutoModelForCausalLM for GPT-2/OPT, AutoModelForSeq2SeqLM for Switch), not the config's "architectures" entry.
BUILT_AS = {"bert_large": "BertForPreTraining", "gpt2_large": "GPT2LMHeadModel", "gpt3_xl": "GPT2LMHeadModel",
            "gpt3_27": "GPT2LMHeadModel", "opt_13": "OPTForCausalLM",
            "switchxl4": "SwitchTransformersForConditionalGeneration"}
FAMILIES = {"bert_large": "encoder", "gpt2_large": "decoder", "gpt3_xl": "decoder", "gpt3_27": "decoder",
            "opt_13": "decoder", "switchxl4": "moe"}
COLUMNS = ["run_id", "status", "model", "family", "params", "flops_per_sample", "flops_method", "batch_size",
           "gpu_count", "gpu_type", "precision", "fp32_mode", "optimizer", "timed_phases", "seq_len",
           "step_time_s", "samples_per_s", "nodes", "source", "protocol", "n_layers", "d_model", "hf_class",
           "fw_latency_s", "bw_latency_s", "e2e_latency_ms", "global_batch_size", "parallelism", "device_dir",
           "source_repo", "source_path", "source_commit"]


def _shape(cfg: dict) -> tuple[int | None, int]:
    if "n_layer" in cfg:  # GPT-2 style
        return cfg["n_layer"], cfg["n_embd"]
    if "num_hidden_layers" in cfg:  # BERT, OPT
        return cfg["num_hidden_layers"], cfg["hidden_size"]
    return None, cfg["d_model"]  # Switch (encoder-decoder)


class _Git:
    def __init__(self, git_dir: Path, commit: str):
        self.git_dir = git_dir
        self.commit = self._run("rev-parse", commit).strip()

    def _run(self, *args: str) -> str:
        return subprocess.run(["git", "--git-dir", str(self.git_dir), *args], capture_output=True, text=True,
                              check=True).stdout

    def names(self) -> list[str]:
        return self._run("ls-tree", "-r", "--name-only", self.commit, LABEL_DIR).splitlines()

    def read(self, path: str) -> str:
        return self._run("show", f"{self.commit}:{path}")


class _Tree:
    def __init__(self, root: Path, commit: str):
        self.root, self.commit = root, commit

    def names(self) -> list[str]:
        return sorted(p.relative_to(self.root).as_posix() for p in (self.root / LABEL_DIR).rglob("*.json"))

    def read(self, path: str) -> str:
        return (self.root / path).read_text(encoding="utf-8")


def build(src) -> pd.DataFrame:
    out, configs = [], {}
    for name in sorted(src.names()):
        m = LABEL.match(name)
        if not m:
            continue  # inference labels, -fusion (torch.compile) labels, tp/pp runs
        dev, model, seq, batch, dp = m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), m.group(6)
        if model not in configs:
            configs[model] = json.loads(src.read(f"{CONFIG_DIR}/{model}.json"))
        cfg = configs[model]
        n_layers, d_model = _shape(cfg)
        rec = json.loads(src.read(name))
        gpus = int(dp) if dp else 1
        if batch % gpus:
            raise ValueError(f"{name}: global batch {batch} does not divide over {gpus} GPUs")
        step = rec["e2e_latency"] / 1000.0
        params = PARAMS[model]
        flops = None if n_layers is None else 6 * params * seq + 12 * n_layers * d_model * seq ** 2
        if dp:
            protocol = ("NeuSight collect_label_distributed.py: accelerate + Megatron-LM, data parallel, "
                        "--mixed_precision=no; CUDA events around forward+backward of rank 0, mean of the 10 "
                        "fastest of 50 iterations; AdamW step outside the timed window")
            fp32_mode = "fp32; TF32 flags not set by the harness (PyTorch defaults: matmul TF32 off)"
        else:
            protocol = ("NeuSight trace.py measure_e2e: Hugging Face model from config (random weights, eager "
                        "attention); CUDA events around forward and around loss.backward(), mean of the 5 "
                        "fastest of 25 iterations each; e2e = forward + backward; no optimizer step")
            fp32_mode = ("fp32 (ROCm; CDNA has no TF32)" if dev.startswith("AMD") else
                         "full fp32: matmul TF32 off (PyTorch default), cuDNN TF32 off (set by trace.py)")
        out.append({
            "run_id": f"neusight/{dev}/{model}/seq{seq}/b{batch}" + (f"/dp{dp}" if dp else ""),
            "status": "ok", "model": f"neusight-{model}", "family": FAMILIES[model], "params": params,
            "flops_per_sample": flops, "flops_method": "analytic" if flops is not None else "",
            "batch_size": batch // gpus, "gpu_count": gpus, "gpu_type": GPU_TYPES[dev], "precision": "fp32",
            "fp32_mode": fp32_mode, "optimizer": "none", "timed_phases": "forward+backward", "seq_len": seq,
            "step_time_s": step, "samples_per_s": batch / step, "nodes": 1, "source": "neusight",
            "protocol": protocol, "n_layers": n_layers, "d_model": d_model,
            "hf_class": BUILT_AS[model],
            "fw_latency_s": rec["fw_latency"] / 1000.0 if rec.get("fw_latency") else None,
            "bw_latency_s": rec["bwall_latency"] / 1000.0 if rec.get("bwall_latency") else None,
            "e2e_latency_ms": rec["e2e_latency"], "global_batch_size": batch,
            "parallelism": f"dp{dp}" if dp else "single", "device_dir": dev,
            "source_repo": SOURCE_REPO, "source_path": name, "source_commit": src.commit,
        })
    df = pd.DataFrame(out, columns=COLUMNS)
    df["n_layers"] = df["n_layers"].astype("Int64")
    df["flops_per_sample"] = df["flops_per_sample"].astype("Int64")
    return df


def write(df: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False, lineterminator="\n", float_format="%.10g")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--git-dir", type=Path, help="clone of sitar-lab/NeuSight (bare is fine)")
    g.add_argument("--tree", type=Path, help="a directory with the artifact's scripts/asplos/... files")
    ap.add_argument("--commit", default="HEAD")
    ap.add_argument("--out", type=Path, default=Path("data/public_neusight.csv"))
    args = ap.parse_args(argv)
    src = _Git(args.git_dir, args.commit) if args.git_dir else _Tree(args.tree, args.commit)
    df = build(src)
    from perfmodel.io import load_runs
    write(df, args.out)
    runs = load_runs(str(args.out))
    print(f"wrote {len(df)} rows to {args.out} (load_runs: {len(runs)} rows) from {SOURCE_REPO}@{src.commit}")
    print(df.pivot_table(index="model", columns="gpu_type", values="run_id", aggfunc="count",
                         fill_value=0).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
