"""Build data/public_lambda.csv from Lambda's PyTorch GPU benchmark tables (NOT redistributable: see below).

Source: https://github.com/lambdal/deeplearning-benchmark, files ``pytorch/csv_v1_v2/pytorch-train-throughput-
{fp16,fp32}.csv`` (measured training throughput, samples/s over all GPUs, mean of 3 runs, rounded to an integer
by ``pytorch/scripts/compile_results_pytorch*.py``) and ``pytorch/csv_v1_v2/pytorch-train-bs-{fp16,fp32}.csv``
(the global batch of each run), one row per system (GPU type x 1-8 GPUs). The runs are NVIDIA
DeepLearningExamples models in NGC PyTorch containers on Lambda machines.

**Licence.** The repository has no LICENSE file (checked at the commit read, in every branch's history of
LICENSE*), so no licence grants redistribution: this script exists so anyone can build the file from their own
clone, but ``data/public_lambda.csv`` is not committed to perfmodel (keep it out of ``data/``, which ships as
package data, or delete it after use).

Read from a git snapshot (no network): ``--git-dir`` a clone (e.g. $MIRRORS/lambdal+deeplearning-benchmark
/repo made by the ``fetch`` tool) at ``--commit`` (default HEAD), or ``--csv-dir`` a directory holding the four
CSV files (then ``--commit`` names where they came from).

Usage::

    PYTHONPATH=src python scripts/derive_public_lambda.py \\
        --git-dir $MIRRORS/lambdal+deeplearning-benchmark/repo --out /tmp/public_lambda.csv

Derivations:

* Models: ``resnet50`` (images/s), ``bert_base_squad`` and ``bert_large_squad`` (sequences/s), the columns whose
  throughput counts the same samples as the batch. Not imported: ``ssd`` (no citable size for DeepLearningExamples'
  SSD300 with a ResNet-50 backbone), ``gnmt``, ``tacotron2``, ``waveglow`` (throughput in tokens / mel frames /
  audio samples per second, not per batch element). A zero throughput or batch (not run) gives no row.
* ``step_time_s = global_batch / throughput`` (both for all GPUs of the system); ``batch_size = global_batch /
  num_gpu`` (``benchmark_pytorch.sh`` writes GLOBAL_BATCH = per-GPU --batch-size x NUM_GPU).
* ``precision``: the fp16 tables are AMP (``--amp`` / ``fp16`` in the configs) -> ``fp16``; the fp32 tables ->
  ``fp32`` as the source says. ``fp32_mode`` records how fp32 most likely ran: on devices with TF32
  (Ampere and later, per perfmodel's spec table) ``tf32 (assumed)``: the NGC PyTorch containers set
  ``TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1`` (TF32 matmuls) and cuDNN's TF32 default is on (convolutions); on V100 and
  Quadro RTX 8000 ``fp32`` (no TF32 hardware).
* ``params`` / ``flops_per_sample`` (forward + backward):
  - ResNet-50 v1.5, 224x224: 25,557,032 parameters and 4.09 G multiply-accumulates per forward (torchvision
    ResNet50_Weights docs; DeepLearningExamples' resnet50 is v1.5) -> 2 x 3 x 4.09e9 = 2.454e10 (as
    data/mlperf_steps.csv).
  - BERT-base / BERT-large SQuAD fine-tuning at sequence length 384 (DeepLearningExamples ``run_squad.sh``'s
    ``--max_seq_length 384``; an assumption, the length is not in this repository): 110M / 340M parameters
    (Devlin et al. 2019), FLOPs ``6 * N * 384 + 12 * n_layers * d_model * 384**2`` (12 x 768 / 24 x 1024).
* ``gpu_type``: the system name without its "LambdaCloud" / "<n>x" prefixes, resolved by
  :func:`perfmodel.hardware.resolve_gpu_type` through the table below; "V100 16GB" (Lambda Cloud V100 instances)
  is taken as the SXM2 part -- an assumption, recorded in ``gpu_type_assumed``.
"""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

SOURCE_REPO = "https://github.com/lambdal/deeplearning-benchmark"
CSV_DIR = "pytorch/csv_v1_v2"
FILES = {(kind, prec): f"{CSV_DIR}/pytorch-train-{kind}-{prec}.csv"
         for kind in ("throughput", "bs") for prec in ("fp16", "fp32")}
GPU_TYPES = {"Quadro RTX 8000": "Quadro-RTX-8000", "V100 16GB": "V100-SXM2-16GB", "RTX 3090": "RTX-3090",
             "A10": "A10", "A100 40GB PCIe": "A100-PCIE-40GB", "A100 80GB PCIe": "A100-PCIE-80GB",
             "A100 80GB SXM4": "A100-SXM4-80GB", "RTX 6000 Ada": "RTX-6000-Ada", "RTX A6000": "RTX-A6000",
             "RTX 4090": "RTX-4090", "H100 80GB PCIe": "H100-PCIE-80GB", "H100 80GB SXM5": "H100-SXM5-80GB",
             "GH200 96GB": "GH200-96GB", "B200 192GB SXM5": "B200"}
ASSUMED = {"V100 16GB": "SXM2 form factor assumed (Lambda Cloud V100 instances; the name gives none)"}
#: model column -> (perfmodel model name, family, params, flops_per_sample, seq_len, sample unit, source)
MODELS = {
    "resnet50": ("resnet50-v1.5", "cnn", 25557032, 2 * 3 * 4.09e9, None, "images",
                 "torchvision ResNet50_Weights docs: 25,557,032 params, 4.09 GMAC per 224x224 forward; x2 x3"),
    "bert_base_squad": ("bert-base-squad", "encoder", 110_000_000,
                        6 * 110e6 * 384 + 12 * 12 * 768 * 384 ** 2, 384, "sequences",
                        "Devlin et al. 2019 (110M, 12 x 768); 6*N*seq + 12*L*d*seq^2 at seq 384"),
    "bert_large_squad": ("bert-large-squad", "encoder", 340_000_000,
                         6 * 340e6 * 384 + 12 * 24 * 1024 * 384 ** 2, 384, "sequences",
                         "Devlin et al. 2019 (340M, 24 x 1024); 6*N*seq + 12*L*d*seq^2 at seq 384"),
}
COLUMNS = ["run_id", "status", "model", "family", "params", "flops_per_sample", "flops_method", "batch_size",
           "gpu_count", "gpu_type", "precision", "fp32_mode", "seq_len", "step_time_s", "samples_per_s", "nodes",
           "source", "protocol", "system_name", "global_batch_size", "throughput_reported", "throughput_unit",
           "flops_source", "gpu_name_reported", "gpu_type_assumed", "source_repo", "source_path",
           "source_commit"]


def _device(system: str) -> str:
    name = re.sub(r"^LambdaCloud\s+", "", system.strip())
    return re.sub(r"^\d+x\s*", "", name)


def _has_tf32(gpu_type: str) -> bool:
    from perfmodel.hardware import get_spec
    tf32 = get_spec(gpu_type).tf32_tflops
    return tf32 is not None and tf32 == tf32


def build(tables: dict[tuple[str, str], str], commit: str) -> pd.DataFrame:
    out = []
    for prec in ("fp16", "fp32"):
        tput = pd.read_csv(io.StringIO(tables[("throughput", prec)]))
        bs = pd.read_csv(io.StringIO(tables[("bs", prec)]))
        if list(tput["name_gpu"]) != list(bs["name_gpu"]):
            raise ValueError(f"{prec}: the throughput and batch tables list different systems")
        for (_, t), (_, b) in zip(tput.iterrows(), bs.iterrows()):
            dev = _device(t["name_gpu"])
            gpu_type = GPU_TYPES[dev]
            gpus = int(t["num_gpu"])
            for col, (model, family, params, flops, seq, unit, fsrc) in MODELS.items():
                thr, gbs = float(t[col]), int(b[col])
                if thr <= 0 or gbs <= 0:
                    continue
                if gbs % gpus:
                    raise ValueError(f"{t['name_gpu']} {col}: global batch {gbs} over {gpus} GPUs")
                step = gbs / thr
                if prec == "fp32":
                    mode = ("tf32 (assumed: NGC PyTorch container sets TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1; cuDNN "
                            "TF32 default on)" if _has_tf32(gpu_type) else "fp32 (no TF32 on this device)")
                else:
                    mode = ""
                out.append({
                    "run_id": f"lambda/{t['name_gpu']}/{col}/{prec}", "status": "ok", "model": model,
                    "family": family, "params": params, "flops_per_sample": flops, "flops_method": "analytic",
                    "batch_size": gbs // gpus, "gpu_count": gpus, "gpu_type": gpu_type, "precision": prec,
                    "fp32_mode": mode, "seq_len": seq, "step_time_s": step, "samples_per_s": thr, "nodes": 1,
                    "source": "lambda-deeplearning-benchmark",
                    "protocol": ("NVIDIA DeepLearningExamples in an NGC PyTorch container; throughput = mean of 3 "
                                 "runs' last logged value, all GPUs; step_time_s = global batch / throughput"),
                    "system_name": t["name_gpu"], "global_batch_size": gbs, "throughput_reported": thr,
                    "throughput_unit": f"{unit}/s", "flops_source": fsrc, "gpu_name_reported": dev,
                    "gpu_type_assumed": ASSUMED.get(dev, ""), "source_repo": SOURCE_REPO,
                    "source_path": f"{FILES[('throughput', prec)]}; {FILES[('bs', prec)]}",
                    "source_commit": commit,
                })
    df = pd.DataFrame(out, columns=COLUMNS)
    dup = df["run_id"].duplicated(keep=False)
    if dup.any():
        raise ValueError(f"duplicate systems: {df.loc[dup, 'run_id'].tolist()}")
    return df


def write(df: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False, lineterminator="\n", float_format="%.10g")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--git-dir", type=Path, help="clone of lambdal/deeplearning-benchmark (bare is fine)")
    g.add_argument("--csv-dir", type=Path, help="a directory with the four pytorch-train-*.csv files")
    ap.add_argument("--commit", default="HEAD")
    ap.add_argument("--out", type=Path, default=Path("data/public_lambda.csv"))
    args = ap.parse_args(argv)
    if args.git_dir:
        def git(*a):
            return subprocess.run(["git", "--git-dir", str(args.git_dir), *a], capture_output=True, text=True,
                                  check=True).stdout
        commit = git("rev-parse", args.commit).strip()
        tables = {k: git("show", f"{commit}:{p}") for k, p in FILES.items()}
    else:
        commit = args.commit
        tables = {k: (args.csv_dir / Path(p).name).read_text(encoding="utf-8") for k, p in FILES.items()}
    df = build(tables, commit)
    from perfmodel.io import load_runs
    write(df, args.out)
    runs = load_runs(str(args.out))
    print(f"wrote {len(df)} rows to {args.out} (load_runs: {len(runs)} rows) from {SOURCE_REPO}@{commit}")
    print(df.pivot_table(index="gpu_type", columns=["model", "precision"], values="run_id", aggfunc="count",
                         fill_value=0).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
