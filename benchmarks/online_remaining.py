"""Online remaining-time prediction on recorded runs: how the error of the total-time estimate falls with the
number of steps seen.

For each bundled run with at least --min-steps timed steps (per-step times from data/runs_cpu.csv.steps.jsonl),
the prior is the physics model's prediction from a fit that has never seen that run's model (leave-one-model-out,
so the prior is as good as it would be for a new model); the job is "the run's timed steps", its true total the
sum of their times. After k steps the OnlineEstimator predicts the total; we report median APE and 90% interval
coverage of the total for each k, and the error after 5/10/25/50% of each run's steps. The checks: coverage
within 0.85-0.95 at every k, and median total-time error <= 3% after 5% of the steps.

Usage: python benchmarks/online_remaining.py [--min-steps 20] [--drift 0.06,0.08]
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import pandas as pd

import perfmodel
from perfmodel.datasets import bundled_runs_path
from perfmodel.plan import OnlineEstimator
from perfmodel.plan._online import DEFAULT_DRIFT, DEFAULT_DRIFT_STEPS

KS = (0, 1, 2, 3, 5, 10, 20)
FRACTIONS = (0.05, 0.10, 0.25, 0.50)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--min-steps", type=int, default=20)
    ap.add_argument("--method", default="physics")
    ap.add_argument("--drift", default=None, help="comma-separated drift values to compare (default: the default)")
    ap.add_argument("--drift-steps", default=None,
                    help="comma-separated drift_steps values to compare (default: the default)")
    args = ap.parse_args(argv)
    path = bundled_runs_path()
    runs = perfmodel.load_runs(path)
    steps = {}
    with open(str(path) + ".steps.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            steps[rec["run_id"]] = rec["step_times_s"]
    runs = runs[runs["run_id"].isin(steps)]
    drifts = [(float(d), float(L)) for d in (args.drift.split(",") if args.drift else [DEFAULT_DRIFT])
              for L in (args.drift_steps.split(",") if args.drift_steps else [DEFAULT_DRIFT_STEPS])]
    cases = []
    for model_name in sorted(runs["model"].unique()):
        train = runs[runs["model"] != model_name]
        test = runs[(runs["model"] == model_name)]
        fitted = perfmodel.fit(train, method=args.method)
        for _, run in test.iterrows():
            times = steps[run["run_id"]]
            if len(times) < args.min_steps:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pred = perfmodel.predict_training_time(
                    {"params": float(run["params"]), "flops_per_sample": float(run["flops_per_sample"]),
                     "name": model_name}, batch_size=int(run["batch_size"]), gpu_count=int(run["gpu_count"]),
                    gpu_type="cpu", steps=len(times), history=fitted)
            cases.append((run["run_id"], times, pred))
    for drift, drift_steps in drifts:
        rows = []
        for run_id, times, pred in cases:
            truth = float(np.sum(times))
            ks = [(str(k), k) for k in KS if k <= len(times) - 1]
            ks += [(f"{f:.0%}", max(1, int(np.ceil(f * len(times))))) for f in FRACTIONS]
            for label, k in ks:
                est = OnlineEstimator.from_prediction(pred, drift=drift, drift_steps=drift_steps)
                for t in times[:k]:
                    est.update(t)
                e = est.estimate()
                rows.append({"k": label, "run_id": run_id, "ape": abs(e.total / truth - 1) * 100,
                             "covered": e.total_lower <= truth <= e.total_upper,
                             "rel_width": (e.total_upper - e.total_lower) / e.total})
        df = pd.DataFrame(rows)
        order = [str(k) for k in KS] + [f"{f:.0%}" for f in FRACTIONS]
        table = df.groupby("k").agg(runs=("ape", "size"), median_ape=("ape", "median"), mape=("ape", "mean"),
                                    coverage_90=("covered", "mean"), rel_width=("rel_width", "median"))
        table = table.reindex([o for o in order if o in table.index])
        print(f"online total-time estimate on {df['run_id'].nunique()} bundled runs with >= {args.min_steps} timed "
              f"steps; prior: {args.method} fit without the run's model (leave-one-model-out); drift={drift:g}, drift_steps={drift_steps:g}")
        print(table.to_string(float_format=lambda v: f"{v:.3g}"))
        cov = table.loc[[str(k) for k in KS if str(k) in table.index], "coverage_90"]
        print(f"check: 90% coverage in [0.85, 0.95] at every k: {'PASS' if cov.between(0.85, 0.95).all() else 'FAIL'} "
              f"(min {cov.min():.3f}, max {cov.max():.3f})")
        e5 = table.loc["5%", "median_ape"]
        print(f"check: median total-time error after 5% of the steps <= 3%: {'PASS' if e5 <= 3 else 'FAIL'} "
              f"({e5:.1f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
