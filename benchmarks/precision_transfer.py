"""Precision transfer (issue #36): a query at a precision no run of the history used — fp32/TF32 asked of fp16/bf16
runs, or back — answered, and how well.

Such a query is a ``new_device`` query (:mod:`perfmodel.kinds`): like a device the runs lack it can only be carried
through the datasheet. Under ``method="auto"`` it is answered by the ``ratio`` rule
(:data:`perfmodel.fitting.PRECISION_TRANSFER_METHOD`): the same model's nearest runs scaled by work and by the square
root of the peak ratio times the element-bandwidth ratio (:data:`perfmodel.hardware.ELEMENT_BYTES`: fp32 moves 4
bytes per element, 16-bit and fp8 training 2). Where the device has TF32 the two ratios are equal and the rule is
plain peak-ratio scaling of the nearest run; the baselines below show that.

Development set: Lambda's PyTorch training throughputs (ResNet-50, BERT-base and BERT-large SQuAD on 14 NVIDIA GPU
types, 1-8 GPUs, AMP fp16 and fp32 — TF32 on Ampere and later, full fp32 on V100/Quadro RTX 8000), built by
``scripts/derive_public_lambda.py`` from one's own clone (not committed: the source has no licence); pass
``--lambda PATH``, or set ``$PERFMODEL_MIRRORS`` to a folder holding ``lambdal+deeplearning-benchmark/repo`` and it
is built into a temporary file. Without it the development part is skipped (said in the output).

1. **Own history at one precision, queries at the other** (both directions): ``predict_many`` as shipped (``auto``),
   and each method fitted for ``new_device`` queries; the ``ratio`` rule without element sizes (an ablation: every
   precision moving 2 bytes per element); beside them the simple baselines ``same time`` (the same model, device
   type and count at the nearest batch, per-sample time unchanged) and ``peak ratio`` (that time scaled by the two
   precisions' peaks).
2. **Out of the box** (``history=None``, perfmodel's bundled GPU runs, which hold no fp32): the Lambda queries at
   each precision, refusals counted.

Confirmation (``--confirm``, run once): NeuSight's fp32 training passes (``data/public_neusight.csv``; A100/H100/V100/
T4/L4/P100/MI100/MI250) out of the box, where nothing was chosen; beside them ``const-MFU``, the bundled GPU history's
median model-FLOPs utilisation at the query's own peak.

Usage::

    python benchmarks/precision_transfer.py [--lambda PATH] [--confirm] [--out benchmarks/results/precision_transfer]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from _paths import ROOT, rel  # benchmarks/_paths.py (the scripts run from benchmarks/)

import perfmodel
from perfmodel.features import run_quantities
from perfmodel.fitting import FIT_FORMAT, fit_history
from perfmodel.history import read_history
from perfmodel.io import load_runs
from perfmodel.metrics import coverage, median_ape

CONFIDENCE = 0.9
METHODS = ("ratio", "mfu", "physics", "roofline", "loglinear", "gbm")
_QUERY = ["model", "family", "params", "flops_per_sample", "batch_size", "gpu_count", "gpu_type", "precision",
          "fp32_mode", "seq_len"]


def lambda_runs(path: str | None) -> tuple[pd.DataFrame | None, str]:
    """Lambda's runs, from ``path`` or built from the mirror named by $PERFMODEL_MIRRORS; None and the reason."""
    if path:
        return load_runs(path), f"--lambda {Path(path).name}"
    mirrors = os.environ.get("PERFMODEL_MIRRORS", "")
    git_dir = Path(mirrors) / "lambdal+deeplearning-benchmark" / "repo" if mirrors else None
    if git_dir is None or not git_dir.exists():
        return None, "skipped: no --lambda PATH and no $PERFMODEL_MIRRORS/lambdal+deeplearning-benchmark/repo"
    out = Path(tempfile.mkdtemp()) / "public_lambda.csv"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "derive_public_lambda.py"), "--git-dir", str(git_dir),
                    "--out", str(out)], check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    return load_runs(out), "built from the lambdal+deeplearning-benchmark mirror"


def _cell(y: np.ndarray, point: np.ndarray, lower=None, upper=None) -> dict:
    ok = np.isfinite(point) & (point > 0)
    out = {"rows": int(ok.sum()), "median_ape": round(float(median_ape(y[ok], point[ok])), 1) if ok.any() else None,
           "median_ratio": round(float(np.median(point[ok] / y[ok])), 3) if ok.any() else None}
    if lower is not None and ok.any():
        out["coverage"] = round(float(coverage(y[ok], lower[ok], upper[ok])), 3)
        with np.errstate(divide="ignore", invalid="ignore"):
            out["half_width"] = round(float(np.median(np.sqrt(upper[ok] / lower[ok])) - 1), 3)
    return out


def _same_config(src: pd.DataFrame, dst: pd.DataFrame, scale_by_peak: bool) -> np.ndarray:
    """Per ``dst`` row: the per-sample time of the same model, device type and count in ``src`` at the nearest
    batch, times the row's batch (and, with ``scale_by_peak``, the source peak over the row's)."""
    peak_src = run_quantities(src)["peak_tflops"].to_numpy(dtype=float)
    peak_dst = run_quantities(dst)["peak_tflops"].to_numpy(dtype=float)
    out = np.full(len(dst), np.nan)
    for i, row in enumerate(dst.itertuples(index=False)):
        m = ((src["model"] == row.model) & (src["gpu_type"] == row.gpu_type) & (src["gpu_count"] == row.gpu_count)
             ).to_numpy()
        if not m.any():
            continue
        j = np.flatnonzero(m)[np.argmin(np.abs(np.log(src["batch_size"].to_numpy(dtype=float)[m] / row.batch_size)))]
        t = src["step_time_s"].iloc[j] / src["batch_size"].iloc[j] * row.batch_size
        out[i] = t * (peak_src[j] / peak_dst[i] if scale_by_peak else 1.0)
    return out


def own_history(lam: pd.DataFrame) -> dict:
    """Fit on one precision's runs, predict the other's (both directions)."""
    res = {}
    for src_p, dst_p in (("fp16", "fp32"), ("fp32", "fp16")):
        src = lam[lam["precision"] == src_p].reset_index(drop=True)
        dst = lam[lam["precision"] == dst_p].reset_index(drop=True)
        y = dst["step_time_s"].to_numpy(dtype=float)
        cells = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = perfmodel.predict_many(dst[[c for c in _QUERY if c in dst]].assign(steps=1), history=src)
        cells["auto (shipped rule)"] = _cell(y, p["step_time_s"].to_numpy(), p["step_lower"].to_numpy(),
                                             p["step_upper"].to_numpy())
        cells["auto (shipped rule)"]["query_kinds"] = p["query_kind"].value_counts().to_dict()
        for method in METHODS:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m = fit_history(read_history(src), method, kind="new_device")
                    pi = m.predict_interval(dst, CONFIDENCE)
                cells[method] = _cell(y, pi["step_time_s"].to_numpy(), pi["step_lower"].to_numpy(),
                                      pi["step_upper"].to_numpy())
            except (ValueError, TypeError) as exc:
                cells[method] = {"error": " ".join(str(exc).split())[:200]}
        # ablation: the ratio rule with every precision moving 2 bytes per element (peaks alone carry the change)
        features = importlib.import_module("perfmodel.features")
        sizes = features.ELEMENT_BYTES
        features.ELEMENT_BYTES = dict.fromkeys(sizes, 2)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pi = fit_history(read_history(src), "ratio", kind="new_device").predict_interval(dst, CONFIDENCE)
            cells["ratio without element sizes (ablation)"] = _cell(
                y, pi["step_time_s"].to_numpy(), pi["step_lower"].to_numpy(), pi["step_upper"].to_numpy())
        finally:
            features.ELEMENT_BYTES = sizes
        cells["baseline: same time"] = _cell(y, _same_config(src, dst, False))
        cells["baseline: peak ratio"] = _cell(y, _same_config(src, dst, True))
        tf32 = dst["fp32_mode"].astype(str).str.startswith("tf32").to_numpy() if dst_p == "fp32" else None
        if tf32 is not None:
            cells["auto (shipped rule), TF32 devices"] = _cell(y[tf32], p["step_time_s"].to_numpy()[tf32],
                                                               p["step_lower"].to_numpy()[tf32],
                                                               p["step_upper"].to_numpy()[tf32])
            cells["auto (shipped rule), no-TF32 devices"] = _cell(y[~tf32], p["step_time_s"].to_numpy()[~tf32],
                                                                  p["step_lower"].to_numpy()[~tf32],
                                                                  p["step_upper"].to_numpy()[~tf32])
        res[f"{src_p} runs -> {dst_p} queries"] = cells
    return res


def out_of_box(queries: pd.DataFrame, label: str) -> dict:
    """``predict_many(history=None)`` on the queries, one precision at a time; refusals counted row by row."""
    res = {}
    for prec in sorted(queries["precision"].astype(str).unique()):
        q = queries[queries["precision"] == prec].reset_index(drop=True)
        y = q["step_time_s"].to_numpy(dtype=float)
        t = time.perf_counter()
        refused, reasons = 0, []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p = perfmodel.predict_many(q[[c for c in _QUERY if c in q]].assign(steps=1))
            cell = _cell(y, p["step_time_s"].to_numpy(), p["step_lower"].to_numpy(), p["step_upper"].to_numpy())
            cell["query_kinds"] = p["query_kind"].value_counts().to_dict()
        except (ValueError, TypeError) as exc:
            refused, reasons = len(q), [" ".join(str(exc).split())[:200]]
            cell = {"rows": 0}
        cell.update(queries=len(q), refused=refused, refusal_reasons=reasons,
                    seconds=round(time.perf_counter() - t, 1))
        res[f"{label} {prec}"] = cell
    return res


def const_mfu(queries: pd.DataFrame) -> np.ndarray:
    """The bundled GPU history's median model-FLOPs utilisation, at each query's own peak."""
    gpu = read_history("gpu").runs
    qg = run_quantities(gpu)
    ok = ~qg["flops_imputed"].to_numpy(dtype=bool)
    mfu = np.nanmedian((qg["flops_per_step_device"] / (qg["peak_tflops"] * 1e12)).to_numpy(dtype=float)[ok]
                       / gpu["step_time_s"].to_numpy(dtype=float)[ok])
    qq = run_quantities(queries)
    return qq["flops_per_step_device"].to_numpy(dtype=float) / (qq["peak_tflops"].to_numpy(dtype=float) * 1e12 * mfu)


def confirmation() -> dict:
    ns = load_runs(ROOT / "data" / "public_neusight.csv")
    res = out_of_box(ns, "NeuSight (out of the box)")
    y = ns["step_time_s"].to_numpy(dtype=float)
    res["const-MFU baseline"] = _cell(y, const_mfu(ns))
    return res


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _md(res: dict) -> str:
    lines = ["# Precision transfer (issue #36)", "", f"Lambda: {res['lambda']}", ""]
    if res.get("confirmation_note"):
        lines += [f"Confirmation: {res['confirmation_note']}.", ""]
    for part, title in (("own_history", "Own history at one precision, queries at the other (Lambda)"),
                        ("out_of_box", "Out of the box (bundled GPU history: no fp32 runs)"),
                        ("confirmation", "Confirmation, run once: NeuSight fp32 out of the box")):
        if part not in res:
            continue
        lines += [f"## {title}", ""]
        for split, cells in res[part].items():
            if part == "own_history":
                lines += [f"### {split}", "", "| method | rows | median APE % | pred/meas | coverage | half-width |",
                          "|---|---|---|---|---|---|"]
                for name, c in cells.items():
                    if "error" in c:
                        lines.append(f"| {name} | error: {c['error']} | | | | |")
                        continue
                    lines.append(f"| {name} | {c['rows']} | {c['median_ape']} | {c['median_ratio']} | "
                                 f"{c.get('coverage', '')} | {c.get('half_width', '')} |")
                lines.append("")
            else:
                lines.append(f"- **{split}**: " + ", ".join(f"{k} {v}" for k, v in cells.items()))
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lambda", dest="lambda_path", help="public_lambda.csv from scripts/derive_public_lambda.py")
    ap.add_argument("--confirm", action="store_true", help="also run the confirmation set (once)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "precision_transfer"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    prev = out.with_suffix(".json")
    res: dict = {"perfmodel": perfmodel.__version__, "confidence": CONFIDENCE}
    lam, how = lambda_runs(args.lambda_path)
    res["lambda"] = how if lam is None else f"{how}: {len(lam)} runs"
    print(f"Lambda: {res['lambda']}", flush=True)
    old = json.loads(prev.read_text()) if prev.is_file() else {}
    if lam is not None:
        res["own_history"] = own_history(lam)
        res["out_of_box"] = out_of_box(lam, "Lambda")
    elif "own_history" in old:  # no Lambda here: keep the development figures of the run that had it
        res["own_history"], res["out_of_box"] = old["own_history"], old.get("out_of_box", {})
        res["lambda"] = f"{how}; the development tables below are carried over from the run that had it"
    if args.confirm:
        res["confirmation"] = confirmation()
        res["confirmation_note"] = (f"run once, with --confirm; nothing was chosen on it (code at {_commit()}, "
                                    f"fit format {FIT_FORMAT})")
    elif "confirmation" in old:
        res["confirmation"] = old["confirmation"]
        res["confirmation_note"] = old.get("confirmation_note", "").replace("run once, with --confirm",
                                                                           "carried over from the --confirm run")
    text = _md(res)
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    out.with_suffix(".md").write_text(text + "\n")
    print(f"wrote {rel(out.with_suffix('.json'))} and {rel(out.with_suffix('.md'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
