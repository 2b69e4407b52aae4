"""Online remaining-time prediction on recorded runs: how the error of the total-time estimate falls with the
number of steps seen, and whether its 90% interval covers.

For each bundled run with at least --min-steps timed steps (per-step times from data/runs_cpu.csv.steps.jsonl),
the prior is the physics model's prediction from a fit that has never seen that run's model (leave-one-model-out,
so the prior is as good as it would be for a new model); the job is "the run's timed steps", its true total the
sum of their times. After k steps the OnlineEstimator predicts the total; the error of a run is
|estimate / truth - 1|, and each table gives, per k, the median over the runs of that error (median_ape, %), its
mean (mape), the share of runs whose 90% interval holds the truth (coverage_90) and the median relative width.
k is a count of steps (0, 1, 2, ...) or a share of each run's own steps (5% = ceil(0.05 N), at least 1).

Two views of the estimator's constants (``drift``, ``drift_steps``):
1. the library defaults, on all runs (the defaults were chosen on these same runs: an in-sample figure);
2. cross-fitted: the runs are split by model into two folds; the constants are chosen on one fold (grid
   --drift x --drift-steps, criterion: coverage within 0.85-0.95 at every count k, then median error after 5%)
   and reported on the other. The pooled held-out table is the honest figure.

The checks: coverage within 0.85-0.95 at every count k, and median total-time error <= 3% after 5% of the steps.
For how far the latter is from what these runs allow, see benchmarks/online_noise_floor.py.

Usage: python benchmarks/online_remaining.py [--min-steps 20] [--drift 0.06,0.075,0.09,0.12,0.15] [--drift-steps 10,40,160]
"""

from __future__ import annotations

import argparse
import json
import math
import warnings

import numpy as np
import pandas as pd

import perfmodel
from perfmodel.datasets import bundled_runs_path
from perfmodel.plan import OnlineEstimator
from perfmodel.plan._online import DEFAULT_DRIFT, DEFAULT_DRIFT_STEPS

KS = (0, 1, 2, 3, 5, 10, 20)
FRACTIONS = (0.05, 0.10, 0.25, 0.50)
ORDER = [str(k) for k in KS] + [f"{f:.0%}" for f in FRACTIONS]


def load_cases(min_steps: int = 20, method: str = "physics") -> list[dict]:
    """One dict per bundled run with >= min_steps timed steps: its step times and the leave-one-model-out prior."""
    path = bundled_runs_path()
    runs = perfmodel.load_runs(path)
    steps = {}
    with open(str(path) + ".steps.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            steps[rec["run_id"]] = rec["step_times_s"]
    runs = runs[runs["run_id"].isin(steps)]
    cases = []
    for model_name in sorted(runs["model"].unique()):
        train = runs[runs["model"] != model_name]
        test = runs[(runs["model"] == model_name)]
        fitted = perfmodel.fit(train, method=method)
        for _, run in test.iterrows():
            times = steps[run["run_id"]]
            if len(times) < min_steps:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pred = perfmodel.predict_training_time(
                    {"params": float(run["params"]), "flops_per_sample": float(run["flops_per_sample"]),
                     "name": model_name}, batch_size=int(run["batch_size"]), gpu_count=int(run["gpu_count"]),
                    gpu_type="cpu", steps=len(times), history=fitted)
            cases.append({"run_id": run["run_id"], "model": model_name, "times": times, "pred": pred})
    return cases


def seen_counts(n: int) -> list[tuple[str, int]]:
    """(label, steps seen) for a run of n steps: the counts KS below n, then the shares FRACTIONS."""
    return ([(str(k), k) for k in KS if k <= n - 1]
            + [(f"{f:.0%}", max(1, int(math.ceil(f * n)))) for f in FRACTIONS])


def evaluate(cases: list[dict], drift: float, drift_steps: float, **options) -> pd.DataFrame:
    """Per run and count k: error, coverage and width of the estimate (``options``: more estimator arguments)."""
    rows = []
    for case in cases:
        times = case["times"]
        truth = float(np.sum(times))
        for label, k in seen_counts(len(times)):
            est = OnlineEstimator.from_prediction(case["pred"], drift=drift, drift_steps=drift_steps, **options)
            for t in times[:k]:
                est.update(t)
            e = est.estimate()
            rows.append({"k": label, "run_id": case["run_id"], "ape": abs(e.total / truth - 1) * 100,
                         "covered": e.total_lower <= truth <= e.total_upper,
                         "rel_width": (e.total_upper - e.total_lower) / e.total})
    return pd.DataFrame(rows)


def table(df: pd.DataFrame) -> pd.DataFrame:
    t = df.groupby("k").agg(runs=("ape", "size"), median_ape=("ape", "median"), mape=("ape", "mean"),
                            coverage_90=("covered", "mean"), rel_width=("rel_width", "median"))
    return t.reindex([o for o in ORDER if o in t.index])


def checks(t: pd.DataFrame) -> str:
    from scipy.stats import binomtest

    counted = t.loc[[str(k) for k in KS if str(k) in t.index]]
    cov = counted["coverage_90"]
    e5 = t.loc["5%", "median_ape"]
    # with a few dozen runs one run moves coverage by ~0.025: say whether each k is consistent with 90% at all
    pvals = [binomtest(int(round(c * n)), int(n), 0.9).pvalue for c, n in zip(cov, counted["runs"])]
    return (f"check: 90% coverage in [0.85, 0.95] at every k: {'PASS' if cov.between(0.85, 0.95).all() else 'FAIL'} "
            f"(min {cov.min():.3f}, max {cov.max():.3f}); sampling: smallest two-sided binomial p against 0.90 "
            f"over k is {min(pvals):.2f} ({'consistent' if min(pvals) > 0.05 else 'not consistent'} with 90% "
            f"at every k, {int(counted['runs'].min())}-{int(counted['runs'].max())} runs per k)\n"
            f"check: median total-time error after 5% of the steps <= 3%: {'PASS' if e5 <= 3 else 'FAIL'} ({e5:.1f}%)")


def _score(t: pd.DataFrame) -> tuple:
    """Lower is better: the worst miss of [0.85, 0.95] over the counts k, then |mean coverage - 0.9|, then the
    median error after 5% of the steps."""
    cov = t.loc[[str(k) for k in KS if str(k) in t.index], "coverage_90"]
    miss = float(np.maximum(0.85 - cov, cov - 0.95).clip(lower=0).max())
    return round(miss, 6), round(abs(float(cov.mean()) - 0.9), 6), float(t.loc["5%", "median_ape"])


def cross_fit(cases: list[dict], options: list[dict], label) -> pd.DataFrame:
    """Estimator constants chosen on one fold of the cases (by :func:`_score`), reported on the other, for each
    fold in turn; prints one line per fold, then the pooled held-out table and its checks, and returns that table.
    The two folds alternate over the sorted ``"model"`` keys of the cases. ``options``: the candidate keyword
    sets of :func:`evaluate` (``drift``, ``drift_steps``, ...); ``label(fold, tune, test)`` describes a fold."""
    keys = sorted({c["model"] for c in cases})
    folds = [set(keys[0::2]), set(keys[1::2])]
    held = []
    for i, fold in enumerate(folds):
        tune = [c for c in cases if c["model"] not in fold]
        test = [c for c in cases if c["model"] in fold]
        best = min(options, key=lambda o: _score(table(evaluate(tune, **o))))
        df = evaluate(test, **best)
        held.append(df)
        tt = table(df)
        print(f"fold {i + 1}: chose {', '.join(f'{k}={v:g}' for k, v in best.items())} on "
              f"{label(fold, tune, test)}: coverage {', '.join(f'{v:.2f}' for v in tt['coverage_90'])} "
              f"(k = {', '.join(tt.index)}); 5% error {tt.loc['5%', 'median_ape']:.1f}%")
    t = table(pd.concat(held))
    print("pooled held-out:")
    print(t.to_string(float_format=lambda v: f"{v:.3g}"))
    print(checks(t))
    return t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--min-steps", type=int, default=20)
    ap.add_argument("--method", default="physics")
    ap.add_argument("--drift", default="0.06,0.075,0.09,0.12,0.15", help="comma-separated drift grid (cross-fitting)")
    ap.add_argument("--drift-steps", default="10,40,160", help="comma-separated drift_steps grid (cross-fitting)")
    args = ap.parse_args(argv)
    cases = load_cases(args.min_steps, args.method)
    fmt = {"float_format": lambda v: f"{v:.3g}"}
    head = (f"online total-time estimate on {len(cases)} bundled runs with >= {args.min_steps} timed steps; prior: "
            f"{args.method} fit without the run's model (leave-one-model-out)")

    print(f"{head}\n[1] library defaults drift={DEFAULT_DRIFT:g}, drift_steps={DEFAULT_DRIFT_STEPS:g} "
          "(chosen on these same runs: in-sample)")
    t = table(evaluate(cases, DEFAULT_DRIFT, DEFAULT_DRIFT_STEPS))
    print(t.to_string(**fmt))
    print(checks(t))

    grid = [{"drift": float(d), "drift_steps": float(s)} for d in args.drift.split(",")
            for s in args.drift_steps.split(",")]
    models = sorted({c["model"] for c in cases})
    print("\n[2] cross-fitted: constants chosen on one fold of models, reported on the other")
    cross_fit(cases, grid, lambda fold, tune, test: (
        f"{len(tune)} runs of {', '.join(sorted(set(models) - fold))}; held-out {len(test)} runs of "
        f"{', '.join(sorted(fold))}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
