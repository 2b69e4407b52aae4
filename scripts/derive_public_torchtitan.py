"""Build data/public_torchtitan.csv from the performance tables the PyTorch torchtitan repository publishes.

Source: https://github.com/pytorch/torchtitan (BSD-3-Clause), four markdown files with measured Llama training
throughput and their layouts:

* ``docs/performance.md`` at ``395a5262…`` (2024-04-18) and ``3faaa1a0…`` (2024-08-23): Llama 2 13B / 70B and
  Llama 3 8B / 70B with FSDP2 on 64 A100 80GB (tokens/s per GPU, "WPS", and MFU), and Llama 3.1 405B with FSDP2 +
  tensor parallelism on 128 H100 (94 GB). The later version is read; the earlier one only for the two Llama 2 70B
  configurations it reports as out of memory (the later version dropped them; status ``oom``).
* ``benchmarks/llama3_h100_202412_torchtitan.md`` (the torchtitan team, end of 2024; the same tables as
  ``docs/performance.md`` at ``d4c86e37…``): Llama 3.1 8B / 70B / 405B on 8 - 512 H100 (96 GB HBM2e, 500 W) with
  FSDP, TP, PP and CP, torch.compile and Float8: TPS/GPU and memory (GiB).
* ``benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md`` (the PyTorch team, June 2025): Llama 3.1 70B on 256
  and 8B on 64 H100 with FSDP + TP, vanilla or asynchronous TP, bf16 / float8 tensorwise / float8 rowwise.
* ``benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md`` (Trainy, June 2025): Llama 3.1 8B with FSDP on 32 and
  64 H200: TPS/GPU and memory.

The files are read from a git snapshot (no network): ``--git-dir`` a bare or non-bare clone (e.g. the one the
``fetch`` tool brings), at the commits named in ``SOURCES`` (the benchmarks files at ``--commit``, default the
pinned ``BENCHMARKS_COMMIT``), or ``--docs`` a directory holding copies named as in ``fixture_name``.

What a table row does not say is taken from its caption or text (transcribed in ``TABLES`` below; the builder
checks that each caption is in the file verbatim); what neither says is left empty, except:

* ``seq_len`` where neither states it: the default of the repository's train config of that model at the
  torchtitan commit the file names (``seq_len = 8192`` in every one; ``seq_len_source`` says so per row).
* ``precision``: bf16 where the run is not Float8 (torchtitan's FSDP2 default ``mixed_precision_param =
  bfloat16``; the A100 MFU is computed against the bf16 peak); ``fp8`` with Float8 linears.

Usage (CLONE: e.g. the clone the ``fetch`` tool brings)::

    PYTHONPATH=src python scripts/derive_public_torchtitan.py --git-dir CLONE --out data/public_torchtitan.csv

Derivations (stated once here, repeated in data/README.md):

* ``step_time_s = global_batch · seq / (TPS/GPU · GPUs)``: torchtitan's ``tps`` (``wps`` in 2024) is tokens per
  second per device: the tokens of a data-parallel rank over time x tensor/pipeline/context-parallel degree
  (``train.py``), so global tokens per second = TPS/GPU x GPUs.
* ``global_batch = local batch x data-parallel degree`` (FSDP degree; context-parallel ranks share a batch);
  ``batch_size = global_batch / GPUs``; ``micro_batch_size`` = the local batch where no pipeline runs (torchtitan
  had no gradient accumulation then), empty with pipeline parallelism (the micro-batch count is not stated).
* Layout: ``tp``, ``pp``, ``cp``, ``dp`` (= the FSDP degree) as stated; ``vp`` = 1 for a 1F1B pipeline, empty for
  "Interleaved 1F1B" (the stages per rank are not stated); ``zero_stage`` 3 (FSDP2 ``fully_shard`` reshards after
  forward), 2 with pipeline parallelism (torchtitan sets ``reshard_after_forward=False`` there); FSDP runs over the
  data- and context-parallel ranks together (``dp_shard_cp``); ``sequence_parallel`` 1 where TP > 1 (torchtitan's
  TP plan shards the norms' sequence: ``SequenceParallel()``); ``recompute`` ``full`` / ``none`` as stated, empty
  for torchtitan's selective modes (``ac_reported``): op-level SAC recomputes every second matmul and the
  element-wise ops, layer SAC every n-th layer in full -- neither is the schema's attention-core recomputation.
* ``flops_per_sample = seq · (6 · N' + 12 · n_layers · d_model · seq)`` with N' the parameters less the input
  embedding: torchtitan's own MFU numerator (``get_num_flop_per_token`` with ``exclude_embedding=True``), checked
  against the published MFU (``flops_check_ratio`` = our FLOPs x TPS / peak / MFU, with torchtitan's peaks: A100
  312, H100 989 TFLOP/s bf16, 1979 for the 2024 405B Float8 rows, whose MFU is against the FP8 peak; the April 2024
  A100 tables' MFU counted the input embedding too (train.py at 157a12c56), and so does the check there).
* ``params`` and the shape from torchtitan's ``ModelArgs`` of each flavour (``SHAPES``) and its SwiGLU width rule
  ``multiple_of · ceil(int(multiplier · int(8 · d / 3)) / multiple_of)``; vocabulary 128,256 for Llama 3 (the
  tiktoken tokenizer's 128,000 ranks + 256 reserved special tokens) and 32,000 for Llama 2 (Touvron et al. 2023).
* ``peak_mem_bytes = Memory(GiB) · 2**30`` (``mem_source=reported``), the maximum over GPUs (the tables' footnote).
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

SOURCE_REPO = "https://github.com/pytorch/torchtitan"
#: the commit the benchmarks/ files are read at (the snapshot's head when this builder was written)
BENCHMARKS_COMMIT = "b5bcd76c66d0acb1a08b176d9639425bc55e0b2a"
DOC_2024_04 = "395a526276eed4000c038a37d9b4859d0813af7c"
DOC_2024_08 = "3faaa1a0dee68ce028400e3dafd1735d152cb4f8"
H100_2412 = "benchmarks/llama3_h100_202412_torchtitan.md"
ASYNC_TP = "benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md"
TRAINY = "benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md"
#: (path, commit or None for --commit) of every file read
SOURCES = (("docs/performance.md", DOC_2024_04), ("docs/performance.md", DOC_2024_08), (H100_2412, None),
           (ASYNC_TP, None), (TRAINY, None))
SHAPE_PATH, SHAPE_COMMIT = "torchtitan/models/llama/__init__.py", DOC_2024_08

#: torchtitan ModelArgs per flavour (torchtitan/models/llama/__init__.py @ 3faaa1a0d; defaults: n_kv_heads =
#: n_heads, multiple_of 256, no ffn_dim_multiplier) and the vocabulary
SHAPES = {
    "llama2-13b": dict(dim=5120, n_layers=40, n_heads=40, vocab=32000),
    "llama2-70b": dict(dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_dim_multiplier=1.3, multiple_of=4096,
                       vocab=32000),
    "llama3-8b": dict(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_dim_multiplier=1.3, multiple_of=1024,
                      vocab=128256),
    "llama3-70b": dict(dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_dim_multiplier=1.3, multiple_of=4096,
                       vocab=128256),
    "llama3-405b": dict(dim=16384, n_layers=126, n_heads=128, n_kv_heads=8, ffn_dim_multiplier=1.2,
                        multiple_of=4096, vocab=128256),
}
#: model name in the data -> (torchtitan flavour, SHAPES key)
MODELS = {"llama2-13b": ("llama2", "13B", "llama2-13b"), "llama2-70b": ("llama2", "70B", "llama2-70b"),
          "llama3-8b": ("llama3", "8B", "llama3-8b"), "llama3-70b": ("llama3", "70B", "llama3-70b"),
          "llama3.1-8b": ("llama3", "8B", "llama3-8b"), "llama3.1-70b": ("llama3", "70B", "llama3-70b"),
          "llama3.1-405b": ("llama3", "405B", "llama3-405b")}
VOCAB_SOURCE = {32000: "Llama 2 tokenizer: 32k tokens (Touvron et al. 2023, arXiv:2307.09288, sec. 2.1)",
                128256: "Llama 3 tokenizer as torchtitan loads it: 128,000 BPE ranks + num_reserved_special_tokens "
                        "256 (torchtitan/datasets/tokenizer/tiktoken.py)"}
#: the MFU denominators: torchtitan's get_peak_flops (bf16 dense: A100 312, H100 SXM 989 TFLOP/s); the 2024 405B
#: Float8 rows' MFU is against twice that (H100's dense FP8 peak, 1979 TFLOP/s), as their figures imply
PEAK = {("A100", 0): 312e12, ("H100", 0): 989e12, ("H100", 1): 1979e12}

A100 = dict(gpu_type="A100-SXM4-80GB", gpu_name_reported="A100 (80GB)",
            gpu_type_assumed="SXM form factor assumed (the file says A100 80GB only)")
H100_94 = dict(gpu_type="H100-SXM5-80GB", gpu_name_reported="H100 (94GB memory); footnote: HBM2e based lower TDP "
               "SXM H100(95GB)", gpu_type_assumed="perfmodel has no 94/95/96 GB HBM2e lower-TDP H100: the SXM5 80GB "
               "part is the closest (same SXM form; lower clocks and bandwidth than it)")
H100_96 = dict(gpu_type="H100-SXM5-80GB", gpu_name_reported="H100 96GB HBM2e, 2.4 TB/s, 500 W power limit (Grand "
               "Teton, 8 per host, NVLink; 400 Gb/s RDMA per GPU)", gpu_type_assumed="perfmodel has no 96 GB HBM2e "
               "500 W H100: the SXM5 80GB part (3.35 TB/s, 700 W) is the closest; the files say its peak lies between "
               "SXM and NVL", gpus_per_node=8)
H200 = dict(gpu_type="H200-SXM-141GB", gpu_name_reported="NVIDIA H200 (8 per host, NVLink; 400 Gb/s CX-7 per GPU)",
            gpu_type_assumed="SXM form factor assumed (8 per host over NVLink)", gpus_per_node=8)

_TECH = {"FSDP": (0, 0, 0), "FSDP + torch.compile": (1, 0, 0), "FSDP + torch.compile + Float8": (1, 1, 0),
         "2D": (1, 1, 0), "2D + AsyncTP": (1, 1, 1)}


def _a100_tables(model_prefix: str, seq: int, seq_source: str, caption: str, section: str):
    def rows(cells: dict) -> dict:
        bs = int(re.sub(r"\[\^\d+\]", "", cells["Batch size"]))
        ac = cells.get("Activation checkpointing", cells.get("Activation checkpoiting"))
        # train.py of April 2024 (157a12c56) counted 6 x all parameters, the input embedding included, in MFU
        return dict(mfu_with_embedding=1, model=f"{model_prefix}-{cells['Model size'].lower()}", gpus=64, fsdp=64,
                    local_bs=bs,
                    seq=seq, seq_source=seq_source, ac=ac, compiled=None, float8=0, **A100,
                    tps=cells["WPS"], mfu=cells["MFU"], label=f"{cells['Model size']} bs{bs} {ac}")
    return dict(section=section, caption=caption, rows=rows)


def _spec_405b_2024(cells: dict) -> dict:
    opt = cells["Optimizations"]
    return dict(model="llama3.1-405b", gpus=128, fsdp=16, tp=8, local_bs=int(cells["Batch size"]), seq=8192,
                seq_source="train_configs/llama3_405b.toml @ 3faaa1a0d (not stated in the file)",
                ac=cells["Activation checkpointing"], compiled=None, float8=int("Float8" in opt),
                async_tp=int("Async TP" in opt), **H100_94, tps=cells["WPS"], mfu=cells["MFU"],
                label=f"405B {opt}")


_TOML_2412 = "the model's train_configs/*.toml @ 9dec370 (torchtitan version the file names; not stated in the table)"
_TOML_2506 = "torchtitan/models/llama3/train_configs/*.toml @ {c} (torchtitan version the file names; not stated)"

#: path -> table specs: the heading or caption each table follows (checked verbatim) and how a row's cells become
#: a configuration (what the caption states, transcribed)
TABLES = {
    "docs/performance.md": [
        _a100_tables("llama2", 4096, "stated: the default sequence length in Llama 2 is 4096 (text above the table)",
                     "Below are the WPS and MFU results which torchtitan achieves on Llama 2 models with FSDP2 on 64 "
                     "A100 (80GB) GPUs.", "## Llama 2 performance numbers"),
        _a100_tables("llama2", 4096, "stated in the later version of the file (Llama 2's default 4096)",
                     "Below is the WPS (word per second, or more accurately, token per second) and MFU (model FLOPS "
                     "utilization) results which torchtitan achieves with FSDP2 on 64 A100 (80GB) GPUs.", None),
        _a100_tables("llama3", 8192, "stated: Llama 2's 4096 is halved compared with Llama 3 (text of the file)",
                     "Below are the WPS and MFU results which torchtitan achieves on Llama 3 models with FSDP2 on 64 "
                     "A100 (80GB) GPUs.", "## Llama 3 performance numbers"),
        dict(section="## Llama 3.1 performance numbers", caption="Below are the WPS (word per second, or more "
             "accurately, token per second) and MFU (model FLOPS utilization) results which torchtitan achieves on "
             "the 405B model", rows=_spec_405b_2024,
             facts=["Here, we use local batch size 2 (global batch size = local batch size 2 * number of FSDP ranks "
                    "16 = 32).", "Llama 3.1 (405B) on 128 H100 (94GB memory)", "[^1]: We used HBM2e based lower "
                    "TDP SXM H100(95GB) for our test", "we only tested 2D parallelism (FSDP2 + Tensor Parallel)"]),
    ],
    H100_2412: [
        dict(caption="**Table 1** 1D Parallelism (FSDP). Llama 3.1 8B model. 8 GPUs. Local batch size 2, global "
             "batch size 16. Selective activation checkpointing.",
             rows=lambda c: dict(model="llama3.1-8b", gpus=8, fsdp=8, local_bs=2, seq=8192, seq_source=_TOML_2412,
                                 ac="selective", compiled=_TECH[c["Techniques"]][0], float8=_TECH[c["Techniques"]][1],
                                 **H100_96, tps=c["TPS/GPU"], mem=c["Memory(GiB)"], label=c["Techniques"])),
        dict(caption="**Table 2** FSDP + CP + torch.compile + Float8. Llama 3.1 8B model. 8 GPUs. Local batch size "
             "1. Full activation checkpointing.",
             rows=lambda c: dict(model="llama3.1-8b", gpus=8, **_fsdp_cp(c["Parallelism"]), local_bs=1,
                                 seq=int(c["Sequence Length"]), seq_source="stated", ac="full", compiled=1, float8=1,
                                 **H100_96, tps=c["TPS/GPU"], mem=c["Memory(GiB)"], label=c["Parallelism"])),
        dict(caption="**Table 3** 1D Parallelism (FSDP). Llama 3.1 8B model. 128 GPUs. Local batch size 2, global "
             "batch size 256. Selective activation checkpointing.",
             rows=lambda c: dict(model="llama3.1-8b", gpus=128, fsdp=128, local_bs=2, seq=8192,
                                 seq_source=_TOML_2412, ac="selective", compiled=_TECH[c["Techniques"]][0],
                                 float8=_TECH[c["Techniques"]][1], **H100_96, tps=c["TPS/GPU"],
                                 mem=c["Memory(GiB)"], label=c["Techniques"])),
        dict(caption="**Table 4** 2D parallelism (FSDP + TP) + torch.compile + Float8. Llama 3.1 70B model. 256 GPUs "
             "(FSDP 32, TP 8). Local batch size 16, global batch size 512. Full activation checkpointing.",
             rows=lambda c: dict(model="llama3.1-70b", gpus=256, fsdp=32, tp=8, local_bs=16, seq=8192,
                                 seq_source=_TOML_2412, ac="full", compiled=1, float8=1,
                                 async_tp=_TECH[c["Techniques"]][2], **H100_96, tps=c["TPS/GPU"],
                                 mem=c["Memory(GiB)"], label=c["Techniques"])),
        dict(caption="**Table 5** 3D parallelism (FSDP + TP + PP) + torch.compile + Float8 + AsyncTP. Llama 3.1 405B "
             "model. 512 GPUs (FSDP 8, TP 8, PP8). Local batch size 32, global batch size 256. Full activation "
             "checkpointing.",
             rows=lambda c: dict(model="llama3.1-405b", gpus=512, fsdp=8, tp=8, pp=8, local_bs=32, seq=8192,
                                 seq_source=_TOML_2412, ac="full", compiled=1, float8=1, async_tp=1,
                                 schedule=c["Schedule"], **H100_96, tps=c["TPS/GPU"], mem=c["Memory(GiB)"],
                                 label=c["Schedule"])),
        dict(caption="**Table 6** 4D parallelism (FSDP + TP + PP + CP) + torch.compile + Float8 + AsyncTP + 1F1B. "
             "Llama 3.1 405B model. 512 GPUs (TP 8, PP8). Local batch size 8. Full activation checkpointing.",
             rows=lambda c: dict(model="llama3.1-405b", gpus=512, **_fsdp_cp(c["Parallelism"]), tp=8, pp=8,
                                 local_bs=8, seq=int(c["Sequence Length"]), seq_source="stated", ac="full",
                                 compiled=1, float8=1, async_tp=1, schedule="1F1B", **H100_96, tps=c["TPS/GPU"],
                                 mem=c["Memory(GiB)"], label=c["Parallelism"])),
    ],
    ASYNC_TP: [
        dict(caption="#### Llama3 70b on 256 H100s with FSDP=32, TP=8, torch.compile, full AC,  local batch size 16",
             rows=lambda c: _async_rows(c, "llama3.1-70b", 256, 32, 16, "full")),
        dict(caption="#### Llama3 8b on 64 H100s with FSDP=8, TP=8, torch.compile, per op SAC, local batch size 12",
             rows=lambda c: _async_rows(c, "llama3.1-8b", 64, 8, 12, "selective op")),
    ],
    TRAINY: [
        dict(caption="Detailed performance results and training configurations can be found in the tables below "
             "along and can visualized in [this WandB report](https://api.wandb.ai/links/asaiacai/w4c46stp). `TPS` "
             "and `Memory(GiB)` are arbitrarily sampled at the 100th iteration:",
             rows=lambda c: dict(model="llama3.1-8b", gpus=8 * int(c["NUM_NODES"]), fsdp=8 * int(c["NUM_NODES"]),
                                 local_bs=2, seq=8192, seq_source=_TOML_2506.format(c="e7c0cae"),
                                 ac="selective op", compiled=1, float8=1, **H200, tps=c["TPS/GPU"],
                                 mem=c["Memory(GiB)"], label=f"{c['NUM_NODES']} nodes")),
    ],
}
#: text each file must contain for the facts transcribed above that are not in a caption
FACTS = {
    H100_2412: ["Each H100 GPU is equipped with 96GB HBM2e with 2.4 TB/sec peak memory bandwidth.",
                "[^1]: Different PP ranks can have different peak memory usages. We take the maximum across all GPUs.",
                "| torchtitan | [9dec370]"],
    ASYNC_TP: ["Each H100 GPU is equipped with 96GB HBM2e with 2.4 TB/sec peak memory bandwidth.",
               "| torchtitan | [820504e]"],
    TRAINY: ["--training.local_batch_size=2", "--training.compile", '--model.converters="quantize.linear.float8"',
             "torchtitan/models/llama3/train_configs/llama3_8b.toml", "| torchtitan | [e7c0cae]"],
}
_QUANT = {"None (bfloat16)": (0, ""), "float8 tensorwise": (1, "tensorwise"), "float8 rowwise": (1, "rowwise")}


def _fsdp_cp(cell: str) -> dict:
    m = re.fullmatch(r"FSDP (\d+), CP (\d+)", cell)
    return dict(fsdp=int(m.group(1)), cp=int(m.group(2)))


def _async_rows(c: dict, model: str, gpus: int, fsdp: int, local_bs: int, ac: str) -> list[dict]:
    f8, recipe = _QUANT[c["Quantization"]]
    base = dict(model=model, gpus=gpus, fsdp=fsdp, tp=8, local_bs=local_bs, seq=8192,
                seq_source=_TOML_2506.format(c="820504e"), ac=ac, compiled=1, float8=f8, float8_recipe=recipe,
                **H100_96, note="the table's tokens/sec read as torchtitan's logged tps (per GPU)")
    return [dict(base, async_tp=0, tps=c["Vanilla TP tokens/sec"], label=f"{c['Quantization']} vanilla TP"),
            dict(base, async_tp=1, tps=c["Async TP tokens/sec"], label=f"{c['Quantization']} async TP")]


COLUMNS = ["run_id", "status", "model", "family", "params", "flops_per_sample", "flops_method", "batch_size",
           "gpu_count", "gpu_type", "precision", "compiled", "seq_len", "step_time_s", "samples_per_s", "nodes",
           "source", "protocol", "global_batch_size", "micro_batch_size", "tp", "pp", "vp", "cp", "ep", "dp",
           "zero_stage", "sequence_parallel", "recompute", "gpus_per_node", "n_layers", "d_model", "n_heads",
           "n_kv_heads", "ffn_hidden", "vocab", "n_experts", "peak_mem_bytes", "mem_source", "local_batch_size",
           "throughput_tokens_per_s_per_gpu", "mfu_reported", "flops_check_ratio", "memory_gib_reported",
           "ac_reported", "float8", "float8_recipe", "async_tp", "pp_schedule", "row_label", "seq_len_source",
           "gpu_name_reported", "gpu_type_assumed", "publisher", "note", "shape_source", "source_repo",
           "source_path", "source_commit"]
PUBLISHER = {"docs/performance.md": "torchtitan team (PyTorch, Meta)", H100_2412: "torchtitan team (PyTorch, Meta)",
             ASYNC_TP: "PyTorch team (Meta)", TRAINY: "Trainy (on WhiteFiber)"}
PROTOCOL = {"docs/performance.md": "torchtitan train.py; WPS (tokens/s per GPU) and MFU as logged by train.py",
            H100_2412: "torchtitan train.py; TPS/GPU logged every 10 iterations, read at the 90th; memory stable",
            ASYNC_TP: "torchtitan train.py; tokens/s per GPU as published",
            TRAINY: "torchtitan train.py (Trainy platform); TPS and memory sampled at the 100th iteration"}


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True,
                          check=True).stdout


def ffn_hidden(shape: dict) -> int:
    """torchtitan's FeedForward width (torchtitan/models/llama/model.py): SwiGLU 2/3 of 4·dim, times the
    multiplier, rounded up to multiple_of."""
    hidden = int(2 * 4 * shape["dim"] / 3)
    if shape.get("ffn_dim_multiplier") is not None:
        hidden = int(shape["ffn_dim_multiplier"] * hidden)
    m = shape.get("multiple_of", 256)
    return m * ((hidden + m - 1) // m)


def param_count(shape: dict) -> tuple[int, int]:
    """(all parameters, parameters less the input embedding) of torchtitan's Llama Transformer: untied input
    embedding and output projection, per layer wq/wk/wv/wo, w1/w2/w3 and two RMSNorm weights, a final norm."""
    d, L, h, v = shape["dim"], shape["n_layers"], shape["n_heads"], shape["vocab"]
    kv, head = shape.get("n_kv_heads", h), d // h
    layer = d * h * head + 2 * d * kv * head + h * head * d + 3 * d * ffn_hidden(shape) + 2 * d
    total = 2 * v * d + L * layer + d
    return total, total - v * d


#: the train configs whose seq_len stands in where a file states none: (commit, path), each must say 8192
SEQ_CONFIGS = (
    ("3faaa1a0dee68ce028400e3dafd1735d152cb4f8", "train_configs/llama3_405b.toml"),
    *(("9dec370ad26b5f8e9a7333a0e36165018262644b", f"train_configs/llama3_{m}.toml") for m in ("8b", "70b", "405b")),
    *(("820504e20d1149fbf0b98c567af24c4b0433b22d", f"torchtitan/models/llama3/train_configs/llama3_{m}.toml")
      for m in ("8b", "70b")),
    ("e7c0cae934df78d6e9c2835f42ff1f757dc3fddc", "torchtitan/models/llama3/train_configs/llama3_8b.toml"),
)


def check_configs(git_dir: Path) -> None:
    """Every train config in SEQ_CONFIGS says seq_len = 8192 (raises ValueError otherwise)."""
    for commit, path in SEQ_CONFIGS:
        found = re.findall(r"^seq_len\s*=\s*(\d+)", _git(git_dir, "show", f"{commit}:{path}"), re.M)
        if found != ["8192"]:
            raise ValueError(f"{path}@{commit[:9]} says seq_len {found}, not 8192")


def check_shapes(git_dir: Path) -> None:
    """SHAPES agree with torchtitan's ModelArgs at SHAPE_COMMIT (raises ValueError otherwise)."""
    tree = ast.parse(_git(git_dir, "show", f"{SHAPE_COMMIT}:{SHAPE_PATH}"))
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            family = node.targets[0].id.removesuffix("_configs")
            for k, v in zip(node.value.keys, node.value.values):
                found[(family, k.value)] = {kw.arg: ast.literal_eval(kw.value) for kw in v.keywords}
    for family, flavour, key in MODELS.values():
        want = {k: v for k, v in SHAPES[key].items() if k not in ("vocab", "rope_theta")}
        got = {k: v for k, v in found[(family, flavour)].items() if k != "rope_theta"}
        if got != want:
            raise ValueError(f"{family} {flavour} at {SHAPE_COMMIT[:9]}: {got} != {want}")


def parse_tables(text: str) -> list[dict]:
    """Every markdown table: its header cells, rows (lists of cells), the last heading and the last text line
    (or heading) before it."""
    tables, section, caption, header, rows = [], None, None, None, None
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header, rows = cells, []
            elif not set("".join(cells)) <= set("-: "):
                rows.append(cells)
            continue
        if header is not None:
            tables.append(dict(section=section, caption=caption, header=header, rows=rows))
            header = None
        if line.startswith("#"):  # a heading is the section (## and deeper) and the caption of what follows
            section = caption = line.strip()
        elif line.strip():
            caption = line.strip()
    return tables


def _num(cell: str) -> float | None:
    cell = re.sub(r"\[\^\d+\]", "", cell).replace(",", "").replace("%", "").strip()
    return None if cell in ("", "OOM") else float(cell)


def build(texts: dict, commits: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """texts: {(path, commit): text}; commits: {(path, commit or None): resolved commit}. The run rows and the
    table rows left out with the reason."""
    out, dropped, seen = [], [], {}
    for (path, pinned), text in texts.items():
        commit = commits[(path, pinned)]
        for fact in FACTS.get(path, []):
            if fact not in text:
                raise ValueError(f"{path}@{commit[:9]}: no longer says {fact!r}")
        tables = parse_tables(text)
        for spec in TABLES[path]:
            match = [t for t in tables if (t["caption"] or "").startswith(spec["caption"])
                     and (spec.get("section") is None or t["section"] == spec["section"])]
            if not match:
                continue  # this version of the file has no such table
            for fact in spec.get("facts", []):
                if fact not in text:
                    raise ValueError(f"{path}@{commit[:9]}: no longer says {fact!r}")
            if len(match) > 1:
                raise ValueError(f"{path}@{commit[:9]}: two tables after {spec['caption'][:40]!r}")
            table = match[0]
            for cells in table["rows"]:
                if len(cells) != len(table["header"]):
                    raise ValueError(f"{path}@{commit[:9]}: a row of {len(cells)} cells under {table['header']}")
                made = spec["rows"](dict(zip(table["header"], cells)))
                for cfg in made if isinstance(made, list) else [made]:
                    row = _row(cfg, path, commit)
                    key = row["run_id"]
                    if key in seen:  # an earlier version's row: the later version's wins where both say it
                        old = seen[key]
                        if (old["throughput_tokens_per_s_per_gpu"], old["status"]) != (
                                row["throughput_tokens_per_s_per_gpu"], row["status"]):
                            dropped.append({"row": key, "source_commit": old["source_commit"],
                                            "reason": f"superseded by {commit[:9]} (another figure)"})
                        out.remove(old)
                    seen[key] = row
                    out.append(row)
    df = pd.DataFrame(out, columns=COLUMNS)
    for col in ("compiled", "global_batch_size", "micro_batch_size", "tp", "pp", "vp", "cp", "ep", "dp",
                "zero_stage", "sequence_parallel", "gpus_per_node", "n_layers", "d_model", "n_heads", "n_kv_heads",
                "ffn_hidden", "vocab", "n_experts", "local_batch_size", "float8", "async_tp", "nodes"):
        df[col] = df[col].astype("Int64")
    return df, pd.DataFrame(dropped, columns=["row", "source_commit", "reason"])


def _row(cfg: dict, path: str, commit: str) -> dict:
    family, flavour, key = MODELS[cfg["model"]]
    shape = SHAPES[key]
    params, params_noemb = param_count(shape)
    gpus, fsdp = cfg["gpus"], cfg["fsdp"]
    tp, pp, cp = cfg.get("tp", 1), cfg.get("pp", 1), cfg.get("cp", 1)
    if tp * pp * cp * fsdp != gpus:
        raise ValueError(f"{path}: {cfg['label']}: FSDP {fsdp} x TP {tp} x PP {pp} x CP {cp} != {gpus} GPUs")
    seq, gbs = cfg["seq"], cfg["local_bs"] * fsdp
    tps = _num(cfg["tps"])
    flops = seq * (6 * params_noemb + 12 * shape["n_layers"] * shape["dim"] * seq)
    mfu = _num(cfg.get("mfu", ""))
    device = "A100" if cfg["gpu_type"].startswith("A100") else "H100"
    mfu_flops = flops + 6 * (params - params_noemb) * seq * cfg.get("mfu_with_embedding", 0)
    check = (None if mfu is None or tps is None
             else round(mfu_flops / seq * tps / PEAK[(device, cfg["float8"])] / (mfu / 100), 4))
    mem = _num(cfg.get("mem", ""))
    schedule = cfg.get("schedule", "")
    ac = cfg["ac"]
    recompute = {"no": "none", "none": "none", "full": "full"}.get(ac)
    run_id = (f"torchtitan/{Path(path).stem}/{cfg['model']}/gpus{gpus}/fsdp{fsdp}-tp{tp}-pp{pp}-cp{cp}/lbs"
              f"{cfg['local_bs']}/seq{seq}/{ac.replace(' ', '-')}/" + re.sub(r"[^A-Za-z0-9.+-]+", "-",
                                                                              cfg["label"]).strip("-"))
    return {
        "run_id": run_id, "status": "ok" if tps is not None else "oom", "model": cfg["model"], "family": "decoder",
        "params": params, "flops_per_sample": float(flops), "flops_method": "analytic",
        "batch_size": gbs / gpus, "gpu_count": gpus, "gpu_type": cfg["gpu_type"],
        "precision": "fp8" if cfg["float8"] else "bf16", "compiled": cfg["compiled"], "seq_len": seq,
        "step_time_s": None if tps is None else gbs * seq / (tps * gpus),
        "samples_per_s": None if tps is None else tps * gpus / seq,
        "nodes": -(-gpus // cfg["gpus_per_node"]) if cfg.get("gpus_per_node") else None,
        "source": "torchtitan", "protocol": PROTOCOL[path], "global_batch_size": gbs,
        "micro_batch_size": None if pp > 1 else cfg["local_bs"], "tp": tp, "pp": pp,
        "vp": (1 if schedule in ("", "1F1B") else None), "cp": cp, "ep": 1, "dp": fsdp,
        "zero_stage": 2 if pp > 1 else 3, "sequence_parallel": int(tp > 1), "recompute": recompute,
        "gpus_per_node": cfg.get("gpus_per_node"), "n_layers": shape["n_layers"], "d_model": shape["dim"],
        "n_heads": shape["n_heads"], "n_kv_heads": shape.get("n_kv_heads", shape["n_heads"]),
        "ffn_hidden": ffn_hidden(shape), "vocab": shape["vocab"], "n_experts": 0,
        "peak_mem_bytes": None if mem is None else mem * 2**30, "mem_source": "" if mem is None else "reported",
        "local_batch_size": cfg["local_bs"], "throughput_tokens_per_s_per_gpu": tps, "mfu_reported": mfu,
        "flops_check_ratio": check, "memory_gib_reported": mem, "ac_reported": ac, "float8": cfg["float8"],
        "float8_recipe": cfg.get("float8_recipe", ""), "async_tp": cfg.get("async_tp", 0 if tp > 1 else None),
        "pp_schedule": schedule, "row_label": cfg["label"], "seq_len_source": cfg["seq_source"],
        "gpu_name_reported": cfg["gpu_name_reported"], "gpu_type_assumed": cfg["gpu_type_assumed"],
        "publisher": PUBLISHER[path], "note": cfg.get("note", ""),
        "shape_source": (f"torchtitan {SHAPE_PATH} @ {SHAPE_COMMIT}: {family}_configs[{flavour!r}] "
                         f"(ModelArgs); ffn width by torchtitan/models/llama/model.py FeedForward; vocabulary: "
                         f"{VOCAB_SOURCE[shape['vocab']]}"),
        "source_repo": SOURCE_REPO, "source_path": path, "source_commit": commit,
    }


def fixture_name(path: str, commit: str) -> str:
    """The file name of a copy of ``path`` at ``commit`` in a --docs directory."""
    return f"{Path(path).stem}@{commit[:9]}.md" if path == "docs/performance.md" else Path(path).name


def write(df: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False, lineterminator="\n", float_format="%.10g")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog=Path(__file__).name, description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--git-dir", type=Path, help="clone of pytorch/torchtitan (bare is fine)")
    src.add_argument("--docs", type=Path, help="a directory holding copies of the files (names: fixture_name)")
    ap.add_argument("--commit", default=BENCHMARKS_COMMIT, help="commit to read the benchmarks/ files at")
    ap.add_argument("--out", type=Path, default=Path("data/public_torchtitan.csv"))
    args = ap.parse_args(argv)
    try:
        if args.git_dir:
            bench = _git(args.git_dir, "rev-parse", args.commit).strip()
            commits = {(p, c): c or bench for p, c in SOURCES}
            texts = {(p, c): _git(args.git_dir, "show", f"{commits[(p, c)]}:{p}") for p, c in SOURCES}
            check_shapes(args.git_dir)
            check_configs(args.git_dir)
        else:
            if not re.fullmatch(r"[0-9a-f]{40}", args.commit):
                ap.error("--docs needs --commit <40-hex commit the benchmarks/ copies came from>")
            commits = {(p, c): c or args.commit for p, c in SOURCES}
            texts = {(p, c): (args.docs / fixture_name(p, commits[(p, c)])).read_text(encoding="utf-8")
                     for p, c in SOURCES}
        df, dropped = build(texts, commits)
    except subprocess.CalledProcessError as e:
        first = ((e.stderr or "").strip().splitlines() or ["failed"])[0]
        ap.exit(2, f"{ap.prog}: git {' '.join(e.cmd[3:])}: {first}\n")
    except (OSError, ValueError) as e:
        ap.exit(2, f"{ap.prog}: {e}\n")
    from perfmodel.io import load_runs

    tmp = args.out.with_name(args.out.stem + ".tmp.csv")
    write(df, tmp)
    try:
        runs = load_runs(str(tmp))
    except Exception:
        tmp.unlink()
        raise
    tmp.replace(args.out)
    print(f"wrote {len(df)} rows to {args.out} (load_runs: {len(runs)} ok rows) from {SOURCE_REPO}")
    print(df.groupby(["gpu_type", "precision", "status"]).size().to_string())
    print(df.groupby(["model", "gpu_count"]).size().to_string())
    ratio = df["flops_check_ratio"].dropna()
    print(f"flops_check_ratio (our FLOPs x TPS / torchtitan's peak / published MFU) on {len(ratio)} rows: "
          f"min {ratio.min()}, max {ratio.max()}")
    job = ["model", "seq_len", "global_batch_size", "gpu_count", "gpu_type", "precision"]
    ok = df[df["status"] == "ok"]
    for what, cols in (("layouts", ["tp", "pp", "cp", "dp", "vp", "zero_stage", "micro_batch_size", "ac_reported",
                                    "pp_schedule"]),
                       ("configurations (layout, compile, async TP, float8 recipe)",
                        ["tp", "pp", "cp", "dp", "vp", "zero_stage", "micro_batch_size", "ac_reported", "pp_schedule",
                         "compiled", "async_tp", "float8_recipe"])):
        n = ok.groupby(job, dropna=False)[cols].apply(lambda d: len(d.drop_duplicates()))
        print(f"{len(n)} jobs (model, seq, global batch, GPUs, device, precision): {(n >= 3).sum()} measured in 3 "
              f"or more {what}, {(n == 2).sum()} in 2")
    for _, d in dropped.iterrows():
        print(f"left out: {d['row']} @ {d['source_commit'][:9]}: {d['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
