"""Cross-hardware accuracy: predict a device the history has never seen, and calibrate from a few own runs.

Usage::

    python benchmarks/cross_hardware.py            # full (several minutes on 2 cores)
    python benchmarks/cross_hardware.py --quick    # roofline only (no auto: its nested model selection is the
                                                   # slow part), one calibration trial

What it prints (all on the same splits of the same runs, 90% intervals):

1. **Leave-one-device-type-out** on the bundled MLPerf per-step table (``data/mlperf_steps.csv``): every run of
   one accelerator type is held out and predicted from the other types plus the spec table. perfmodel's
   methods beside the baselines — ``peak-ratio`` (the nearest run of the same benchmark on another device,
   scaled by FLOPs and by the ratio of dense peaks), ``6ND-util0.4`` (FLOPs / (peak × 0.4)), ``6ND-fitted-util``
   and ``seed-linear`` — with median APE, MAPE and interval coverage; and perfmodel against peak-ratio on the
   rows where peak-ratio has a reference.
2. **Every split** (new batch size, new device count, new model, new device) for ``auto`` and ``roofline``:
   the interval coverage each prints must lie in 0.85–0.95.
3. **Calibration**: one benchmark at a time is treated as "your model": the history is the table without it
   plus k = 0, 1, 2, 5 of its runs on one device (drawn at random), and its runs on the *other* devices are
   predicted. Error and coverage against k.
4. **Your own stack** (when ``data/runs_h200.csv`` exists: plain-PyTorch runs perfmodel measured on an H200):
   each own model predicted from the public history plus k own runs of *other* models, and leave-one-model-out
   within the own runs.

Results go to ``benchmarks/results/cross_hardware.md`` (and ``_quick.md``) and a JSON beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import perfmodel
from perfmodel.datasets import bundled_runs_path
from perfmodel.evaluate import coverage, evaluate
from perfmodel.fitting import fit_history

RESULTS = Path(__file__).resolve().parent / "results"
TARGETS = {"lodo_median_ape": 12.0, "coverage": (0.85, 0.95)}


def _ape(pred, y):
    return np.abs(np.asarray(pred, float) / np.asarray(y, float) - 1) * 100


def _fmt_table(table: pd.DataFrame) -> str:
    cols = ["split", "method", "folds", "n", "median_ape", "mape", "r2_log", "coverage", "rel_width"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in table[cols].iterrows():
        cells = []
        for c in cols:
            v = r[c]
            if isinstance(v, float):
                cells.append("—" if not np.isfinite(v) else (f"{v:.1f}" if c in ("median_ape", "mape") else f"{v:.3f}"))
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def device_bootstrap(inside: np.ndarray, devices: np.ndarray, reps: int = 2000, seed: int = 0) -> tuple[float, float]:
    """90% interval of a coverage over resamples of the held-out device types (a benchmark's runs on one device
    type err together: the units are the device types, not the runs). Any held-out groups serve as ``devices``
    (benchmarks/accuracy.py resamples the held-out models, batch sizes or counts)."""
    codes, dev = np.unique(devices, return_inverse=True)
    hits = np.bincount(dev, weights=inside.astype(float), minlength=len(codes))
    sizes = np.bincount(dev, minlength=len(codes)).astype(float)
    draw = np.random.default_rng(seed).integers(0, len(codes), size=(reps, len(codes)))
    cov = hits[draw].sum(axis=1) / sizes[draw].sum(axis=1)
    return float(np.quantile(cov, 0.05)), float(np.quantile(cov, 0.95))


#: Fewest held-out device types for which the bootstrap interval is read at all (with fewer, a percentile
#: bootstrap over the types is degenerate or far too narrow).
MIN_BOOTSTRAP_UNITS = 8


def coverage_verdict(coverage: float, lo: float, hi: float, units: int, unit: str = "device types") -> str:
    """'ok' inside 0.85-0.95; outside it, 'miss' when the device bootstrap interval excludes 0.90 (miscalibrated
    beyond what resampling the device types explains), 'outside, within sampling' when it does not, and
    'outside, too few device types' below :data:`MIN_BOOTSTRAP_UNITS` (``unit`` names the resampled units)."""
    if 0.85 <= coverage <= 0.95:
        return "ok"
    if units < MIN_BOOTSTRAP_UNITS:
        return f"outside, too few {unit}"
    return "miss" if not (lo <= 0.90 <= hi) else "outside, within sampling"


def lodo(runs: pd.DataFrame, methods, n_jobs: int) -> tuple[pd.DataFrame, dict]:
    ev = evaluate(runs, methods=methods, splits=("leave-one-gpu-type-out",), baselines=True, n_jobs=n_jobs)
    preds = ev.predictions
    pr = preds[preds["method"] == "peak-ratio"].set_index("row")["pred"]
    pr = pr[np.isfinite(pr)]
    paired = {}
    for m in methods:
        p = preds[preds["method"] == m].set_index("row")
        rows = p.index.intersection(pr.index)
        paired[m] = {"rows": int(len(rows)), "median_ape": float(np.median(_ape(p.loc[rows, "pred"], p.loc[rows, "y"]))),
                     "peak_ratio_median_ape": float(np.median(_ape(pr.loc[rows], p.loc[rows, "y"])))}
    answered = preds[preds["method"].isin(methods) & np.isfinite(preds["pred"].to_numpy(dtype=float))]
    per_device = (answered
                  .assign(ape=lambda d: _ape(d["pred"], d["y"]),
                          inside=lambda d: (d["step_lower"] <= d["y"]) & (d["y"] <= d["step_upper"]))
                  .groupby(["method", "held_out"]).agg(n=("ape", "size"), median_ape=("ape", "median"),
                                                      coverage=("inside", "mean")).reset_index())
    # conditional coverage: a user asks about one workload, so each benchmark's own coverage matters
    scored = answered.assign(benchmark=lambda d: runs["model"].to_numpy()[d["row"].to_numpy(dtype=int)],
                             ape=lambda d: _ape(d["pred"], d["y"]),
                             inside=lambda d: (d["step_lower"] <= d["y"]) & (d["y"] <= d["step_upper"]),
                             rel_width=lambda d: (d["step_upper"] - d["step_lower"]) / d["pred"])
    per_benchmark = (scored.groupby(["method", "benchmark"])
                     .agg(n=("ape", "size"), device_types=("held_out", "nunique"), median_ape=("ape", "median"),
                          coverage=("inside", "mean"), rel_width=("rel_width", "median")).reset_index())
    ci = {key: device_bootstrap(g["inside"].to_numpy(), g["held_out"].to_numpy())
          for key, g in scored.groupby(["method", "benchmark"])}
    per_benchmark["coverage_ci90"] = [f"{ci[k][0]:.2f}-{ci[k][1]:.2f}"
                                      for k in zip(per_benchmark["method"], per_benchmark["benchmark"])]
    per_benchmark["verdict"] = [coverage_verdict(c, *ci[k], u) for c, u, k in
                                zip(per_benchmark["coverage"], per_benchmark["device_types"],
                                    zip(per_benchmark["method"], per_benchmark["benchmark"]))]
    return ev.table, {"paired_with_peak_ratio": paired, "per_device": per_device.to_dict("records"),
                      "per_benchmark": per_benchmark}


def all_splits(runs: pd.DataFrame, methods, n_jobs: int, lodo_table: pd.DataFrame) -> pd.DataFrame:
    """Every split; the leave-one-device-type-out rows are section 1's (the same folds, not refitted)."""
    splits = ("leave-one-model-out", "leave-one-batch-size-out", "leave-one-gpu-count-out")
    table = evaluate(runs, methods=methods, splits=splits, baselines=False, n_jobs=n_jobs).table
    lodo_rows = lodo_table[lodo_table["method"].isin(methods)]
    return pd.concat([table, lodo_rows], ignore_index=True)


def calibration(runs: pd.DataFrame, ks=(0, 1, 2, 5), trials: int = 3, seed: int = 0,
                method: str = "roofline") -> pd.DataFrame:
    """Per benchmark b and k: history = runs without b + k runs of b on one device; predict b elsewhere."""
    rng = np.random.default_rng(seed)
    out = []
    for b in sorted(runs["model"].unique()):
        rb = runs[runs["model"] == b]
        devices = [d for d, g in rb.groupby("gpu_type") if len(g) >= max(ks)]
        if len(rb["gpu_type"].unique()) < 2 or not devices:
            continue
        rest = runs[runs["model"] != b]
        for t in range(trials):
            dev = devices[rng.integers(len(devices))]
            own = rb[rb["gpu_type"] == dev].sample(frac=1.0, random_state=int(rng.integers(1 << 30)))
            target = rb[rb["gpu_type"] != dev]
            for k in ks:
                hist = pd.concat([rest, own.iloc[:k]], ignore_index=True) if k else rest
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    kind = "new_model" if k == 0 else "seen"
                    fitted = fit_history(hist.reset_index(drop=True), method, kind=kind)
                    pi = fitted.predict_interval(target.reset_index(drop=True))
                y = target["step_time_s"].to_numpy()
                out.append({"model": b, "trial": t, "k": k, "device": dev, "n": len(target),
                            "median_ape": float(np.median(_ape(pi["step_time_s"], y))),
                            "coverage": coverage(y, pi["step_lower"].to_numpy(), pi["step_upper"].to_numpy())})
    return pd.DataFrame(out)


def own_stack(public: pd.DataFrame, own: pd.DataFrame, ks=(0, 1, 2, 5), seed: int = 0) -> pd.DataFrame:
    """Each own model predicted from the public history + k random own runs of the other own models."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in sorted(own["model"].unique()):
        target = own[own["model"] == m]
        others = own[own["model"] != m].sample(frac=1.0, random_state=int(rng.integers(1 << 30)))
        for k in ks:
            hist = pd.concat([public, others.iloc[:k]], ignore_index=True) if k else public
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    fitted = fit_history(hist.reset_index(drop=True), "roofline", kind="new_model")
                    pi = fitted.predict_interval(target.reset_index(drop=True))
                except ValueError as exc:  # e.g. a precision the history lacks without own runs
                    rows.append({"model": m, "k": k, "n": len(target), "median_ape": np.nan, "coverage": np.nan,
                                 "note": str(exc)[:80]})
                    continue
            y = target["step_time_s"].to_numpy()
            rows.append({"model": m, "k": k, "n": len(target), "median_ape": float(np.median(_ape(pi["step_time_s"], y))),
                         "coverage": coverage(y, pi["step_lower"].to_numpy(), pi["step_upper"].to_numpy()), "note": ""})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n-jobs", type=int, default=2)
    args = ap.parse_args(argv)
    t0 = time.time()
    runs = perfmodel.load_runs(bundled_runs_path("mlperf_steps.csv"))
    methods = ("roofline",) if args.quick else ("roofline", "physics", "loglinear", "gbm", "ops", "auto")
    lines = [f"# Cross-hardware benchmark{' (quick)' if args.quick else ''}", "",
             f"Run {time.strftime('%Y-%m-%d')}; bundled MLPerf per-step table: {len(runs)} runs, "
             f"{runs['model'].nunique()} benchmarks, {runs['gpu_type'].nunique()} accelerator types. "
             "90% prediction intervals.", ""]
    result: dict = {"n_runs": len(runs)}

    table, extra = lodo(runs, methods, args.n_jobs)
    result["lodo"] = json.loads(table.to_json(orient="records"))
    per_benchmark = extra.pop("per_benchmark")
    extra["per_benchmark"] = per_benchmark.to_dict("records")
    result["lodo_extra"] = extra
    lines += ["## 1. Leave-one-device-type-out (MLPerf per-step table)", "", _fmt_table(table), ""]
    print("\n".join(lines), flush=True)
    for m, p in extra["paired_with_peak_ratio"].items():
        lines.append(f"- {m} vs peak-ratio on the {p['rows']} rows where peak-ratio has a reference: median APE "
                     f"{p['median_ape']:.1f}% vs {p['peak_ratio_median_ape']:.1f}%")
    lines += ["", "Per benchmark (conditional coverage of the new-device intervals; coverage_ci90: 90% interval "
              "over resamples of the held-out device types, the units whose runs err together; verdict: 'ok' in "
              "0.85-0.95, 'miss' where that interval excludes 0.90, else 'outside, within sampling', or "
              "'outside, too few device types' below 8):", "",
              per_benchmark.to_string(index=False, float_format=lambda v: f"{v:.3g}"), ""]

    sp = all_splits(runs, ("roofline",) if args.quick else ("roofline", "auto"), args.n_jobs, table)
    result["splits"] = json.loads(sp.to_json(orient="records"))
    lines += ["## 2. Every split (MLPerf per-step table)", "", _fmt_table(sp), ""]
    print("\n".join(lines[-4:]), flush=True)

    cal = calibration(runs, trials=1 if args.quick else 3)
    result["calibration"] = cal.to_dict("records")
    if len(cal):
        agg = cal.groupby("k").agg(cases=("n", "size"), runs=("n", "sum"), median_ape=("median_ape", "median"),
                                   coverage=("coverage", "mean")).reset_index()
        lines += ["## 3. Calibration: a new benchmark from k of its runs on one device, predicted on the others", "",
                  agg.to_string(index=False, float_format=lambda v: f"{v:.3g}"), ""]

    try:
        own = perfmodel.load_runs(bundled_runs_path("runs_h200.csv"))
    except FileNotFoundError:
        own = None
    if own is not None:
        os_ = own_stack(runs, own)
        result["own_stack"] = os_.to_dict("records")
        agg = os_.groupby("k").agg(models=("model", "size"), median_ape=("median_ape", "median"),
                                   coverage=("coverage", "mean")).reset_index()
        lines += ["## 4. Own plain-PyTorch H200 runs: each model from the public table + k own runs of other models",
                  "", agg.to_string(index=False), ""]
        ev = evaluate(own, methods=("roofline", "physics", "auto"), splits=("leave-one-model-out",),
                      baselines=False, n_jobs=args.n_jobs)
        lines += ["Within the own H200 runs alone, leave-one-model-out:", "", _fmt_table(ev.table), ""]

    lines.append(f"Wall time {time.time() - t0:.0f} s.")
    text = "\n".join(lines)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    suffix = "_quick" if args.quick else ""
    (RESULTS / f"cross_hardware{suffix}.md").write_text(text + "\n")
    (RESULTS / f"cross_hardware{suffix}.json").write_text(json.dumps(result, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
