"""Online remaining-time prediction on recorded runs: how the error of the total-time estimate falls with the
number of steps seen.

For each bundled run with at least --min-steps timed steps (per-step times from data/runs_cpu.csv.steps.jsonl),
the prior is the physics model's prediction from a fit that has never seen that run's model (leave-one-model-out,
so the prior is as good as it would be for a new model); the job is "the run's timed steps", its true total the
sum of their times. After k steps the OnlineEstimator predicts the total; we report median APE and 90% interval
coverage of the total for each k.

Usage: python benchmarks/online_remaining.py [--min-steps 20]
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

KS = (0, 1, 2, 3, 5, 10, 20)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--min-steps", type=int, default=20)
    ap.add_argument("--method", default="physics")
    args = ap.parse_args(argv)
    path = bundled_runs_path()
    runs = perfmodel.load_runs(path)
    steps = {}
    with open(str(path) + ".steps.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            steps[rec["run_id"]] = rec["step_times_s"]
    runs = runs[runs["run_id"].isin(steps)]
    rows = []
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
            truth = float(np.sum(times))
            for k in KS:
                if k > len(times) - 1:
                    continue
                est = OnlineEstimator.from_prediction(pred)
                for t in times[:k]:
                    est.update(t)
                e = est.estimate()
                rows.append({"k": k, "run_id": run["run_id"], "ape": abs(e["total"] / truth - 1) * 100,
                             "covered": e["total_lower"] <= truth <= e["total_upper"],
                             "rel_width": (e["total_upper"] - e["total_lower"]) / e["total"]})
    df = pd.DataFrame(rows)
    table = df.groupby("k").agg(runs=("ape", "size"), median_ape=("ape", "median"), mape=("ape", "mean"),
                                coverage_90=("covered", "mean"), rel_width=("rel_width", "median"))
    print(f"online total-time estimate on {df['run_id'].nunique()} bundled runs with >= {args.min_steps} timed "
          f"steps; prior: {args.method} fit without the run's model (leave-one-model-out)")
    print(table.to_string(float_format=lambda v: f"{v:.3g}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
