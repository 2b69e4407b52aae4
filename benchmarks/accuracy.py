"""Accuracy benchmark: perfmodel's methods beside the baselines, on the same grouped splits of the same runs.

Usage:
    python benchmarks/accuracy.py                 # full: every method and split (about 5 minutes on 2 cores)
    python benchmarks/accuracy.py --quick         # reduced (CI): physics + baselines, leave-one-batch-size-out

Baselines: (a) ``seed-linear`` — the seed design's OLS T = b0 + b1*Params + b2*BatchSize + b3*GPU_Count;
(b) ``6ND-util0.4`` — FLOPs per device-step / (peak × 0.4), the calculators' assumption, and ``6ND-fitted-util``
— the same with the utilisation fitted as one constant on the training split. For CPU runs the "peak" is this
host's measured fp32 matmul FLOP/s (printed; ``--host-peak-gflops`` to give it), split over the worker processes.

Prints the metric table with the noise floor beside every error, the target checks, and writes JSON and a
Markdown table under benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
from cross_hardware import coverage_verdict, device_bootstrap  # noqa: E402  (run as a script from the repository root)

import perfmodel
from perfmodel.datasets import bundled_runs_path
from perfmodel.evaluate import EVALUATION_BASELINES, SPLITS, evaluate

PERFMODEL_METHODS = ("loglinear", "gbm", "physics", "auto")
INTERPOLATION = ("leave-one-batch-size-out", "leave-one-gpu-count-out")


def _shown(path) -> str:
    """A data path as committed results show it: relative to the repository (no machine's absolute path)."""
    root = Path(__file__).resolve().parents[1]
    try:
        return str(Path(path).resolve().relative_to(root))
    except ValueError:
        return Path(path).name


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default=None, help="run history (default: the bundled data/runs_cpu.csv)")
    ap.add_argument("--quick", action="store_true", help="reduced mode for CI")
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--confidence", type=float, default=0.9)
    ap.add_argument("--host-peak-gflops", type=float, default=None)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args(argv)

    runs_path = args.runs or str(bundled_runs_path())
    runs = perfmodel.load_runs(runs_path)
    if args.host_peak_gflops is not None:
        host_peak = args.host_peak_gflops * 1e9
    elif (runs["gpu_type"] == "cpu").any():
        from perfmodel.measure.flops import host_peak_flops

        host_peak = host_peak_flops()
    else:
        host_peak = None
    methods = ("physics",) if args.quick else PERFMODEL_METHODS  # "linear" is baseline (a), scored as seed-linear
    splits = ("leave-one-batch-size-out",) if args.quick else tuple(SPLITS)
    t0 = time.perf_counter()
    ev = evaluate(runs, methods=methods, splits=splits, confidence=args.confidence, n_jobs=args.n_jobs,
                  host_peak_flops=host_peak)
    elapsed = time.perf_counter() - t0
    floor = ev.noise.median_ape
    table = ev.table.copy()
    table["x_noise_floor"] = table["median_ape"] / floor
    table = table.join(coverage_sampling(ev.predictions), on=["split", "method"])
    table["groups"] = table["groups"].astype("Int64")

    header = (f"perfmodel {perfmodel.__version__} accuracy benchmark, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC\n"
              f"data: {_shown(runs_path)} ({len(runs)} runs, {runs['model'].nunique()} models, "
              f"device types {', '.join(sorted(set(runs['gpu_type'])))})\n"
              f"machine: {platform.machine()} {platform.processor() or ''} — host fp32 matmul peak used by "
              f"6ND baselines: {'n/a' if host_peak is None else f'{host_peak / 1e9:.1f} GFLOP/s'}\n"
              f"{ev.noise}\nconfidence {args.confidence:.0%}; {elapsed:.0f} s")
    print(header)
    print()
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print()

    checks = []
    for split, g in table.groupby("split", sort=False):
        ours = g[g["method"].isin(PERFMODEL_METHODS)]
        base = g[g["method"].isin(EVALUATION_BASELINES)]
        if len(ours) == 0:
            continue
        best = ours.loc[ours["median_ape"].idxmin()]
        base_ok = base["median_ape"].dropna()
        beats = bool((best["median_ape"] < base_ok).all() and (best["mape"] < base["mape"].dropna()).all())
        checks.append((split, f"best perfmodel method ({best['method']}, median APE {best['median_ape']:.1f}%, "
                              f"MAPE {best['mape']:.1f}%) beats every baseline on median APE and MAPE", beats))
        if split in INTERPOLATION:
            checks.append((split, f"median APE {best['median_ape']:.1f}% <= 1.5 x noise floor ({1.5 * floor:.1f}%)",
                           bool(best["median_ape"] <= 1.5 * floor)))
        if split == "leave-one-model-out":
            checks.append((split, f"median APE {best['median_ape']:.1f}% <= 15%", bool(best["median_ape"] <= 15)))
        checks.append((split, f"{args.confidence:.0%} PI coverage of {best['method']} {best['coverage']:.3f} in "
                              f"[0.85, 0.95] (mean relative width {best['rel_width']:.2f})",
                       bool(0.85 <= best["coverage"] <= 0.95)))
    for split, text, ok in checks:
        print(f"[{'PASS' if ok else 'MISS'}] {split}: {text}")
    ours = table[table["method"].isin(PERFMODEL_METHODS) & table["verdict"].notna()]
    outside = ours[ours["verdict"] != "ok"]
    print(f"\nperfmodel intervals (every method, every split): {len(ours) - len(outside)} of {len(ours)} cover "
          f"0.85-0.95" + (":" if len(outside) else ""))
    for _, r in outside.iterrows():
        print(f"  {r['split']} {r['method']}: {r['coverage']:.3f} over {int(r['groups'])} held-out groups "
              f"(90% interval over resamples of them {r['coverage_ci90']}): {r['verdict']}")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "accuracy_quick" if args.quick else "accuracy"
    (out / f"{stem}.json").write_text(json.dumps({
        "header": header, "noise_floor": ev.noise.__dict__, "table": json.loads(table.to_json(orient="records")),
        "checks": [{"split": s, "check": t, "pass": ok} for s, t, ok in checks],
    }, indent=2))
    md = (table.to_markdown(index=False, floatfmt=".3g") if _has_tabulate()
          else table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    (out / f"{stem}.md").write_text(f"```\n{header}\n```\n\n{md}\n")
    return 0


def coverage_sampling(preds) -> pd.DataFrame:
    """Per (split, method): the held-out groups, a 90% interval of the coverage over resamples of those groups
    (the runs of one held-out model, batch size or count err together: the groups are the units, not the runs),
    and the verdict of benchmarks/cross_hardware.py ('ok' in 0.85-0.95; else 'miss' where the interval excludes
    0.90, 'outside, within sampling', or 'outside, too few held-out groups' below 8)."""

    out = {}
    for (split, method), g in preds.groupby(["split", "method"], sort=False):
        lo, hi = g["step_lower"].to_numpy(dtype=float), g["step_upper"].to_numpy(dtype=float)
        if not (np.isfinite(lo) & np.isfinite(hi)).any():
            continue  # a method without intervals
        y = g["y"].to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            inside = (lo <= y) & (y <= hi)  # as evaluate counts it: a row without an interval is a miss
        groups = g["held_out"].astype(str).to_numpy()
        c_lo, c_hi = device_bootstrap(inside, groups)
        units = len(np.unique(groups))
        out[split, method] = {"groups": units, "coverage_ci90": f"{c_lo:.2f}-{c_hi:.2f}",
                              "verdict": coverage_verdict(float(inside.mean()), c_lo, c_hi, units,
                                                          unit="held-out groups")}
    index = pd.MultiIndex.from_tuples(list(out), names=["split", "method"]) if out else \
        pd.MultiIndex.from_tuples([], names=["split", "method"])
    return pd.DataFrame(list(out.values()), index=index, columns=["groups", "coverage_ci90", "verdict"])


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401

        return True
    except ImportError:
        return False


if __name__ == "__main__":
    raise SystemExit(main())
