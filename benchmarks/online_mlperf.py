"""The online estimator on real GPU runs: MLPerf Training ResNet-50 and Mask R-CNN runs, epoch by epoch.

``data/mlperf_epochs.csv.gz`` (derived by ``scripts/derive_mlperf_epochs.py`` from the public MLPerf Training
logs, Apache-2.0; see data/README.md) holds the training time of every epoch of 1,832 runs; the 1,760 of them
with a row in ``data/mlperf_steps.csv`` (16 accelerator types) are used. Each run is a job whose "steps" are its epochs, in order; its true total is the sum of their times
(evaluations are logged outside the epochs and are not in it). The number of epochs is taken as known in
advance, as a user's step budget is.

The prior is what a user planning on that device would have: the ``roofline`` fit of the bundled MLPerf per-step
table *without that device type* (a new-device query), its step time and 90% interval times the steps of one
epoch (samples per epoch / global batch). The run's own row never informs its prior.

After k epochs (k = 0, 1, 2, 3, 5, 10, 20, and 5%/10%/25%/50% of the run) the ``OnlineEstimator`` predicts the
total; the tables give, per k, the median and mean absolute error (%), the 90% interval coverage and the median
relative width.

The estimator's constants describe the environment: how noisy a step (here: an epoch) is, how far a run's level
drifts, whether the first step carries one-off costs (here the first epoch fills data caches and compiles:
``warmup_steps=1``). They are cross-fitted: the runs are split by device type into two folds, the constants are
chosen on one (grid below; criterion as benchmarks/online_remaining.py: coverage within 0.85-0.95 at every count
k, then the median error after 5%) and reported on the other. The pooled held-out table is the figure.

What is not held out: the roofline's prior scales (``tau_*``) were chosen on the whole MLPerf table,
``warmup_steps=1`` and the grid were set after looking at these runs' first epochs, and the number of epochs
(which in MLPerf depends on when a run converged) is treated as known.

Usage: python benchmarks/online_mlperf.py [--max-runs N]
"""

from __future__ import annotations

import argparse
import math
import warnings
from itertools import product
from types import SimpleNamespace

import numpy as np
import pandas as pd
from online_remaining import cross_fit  # noqa: E402  (run from the repository root)

import perfmodel
from perfmodel.datasets import bundled_runs_path
from perfmodel.fitting import fit_history
from perfmodel.importers.mlperf import BENCHMARKS

#: Training samples per epoch: ImageNet-1k's 1,281,167 training images (the ``train_samples`` the MLPerf
#: ResNet reference logs); COCO 2017's 117,266 training images with annotations (the Mask R-CNN reference).
SAMPLES_PER_EPOCH = {"resnet": 1_281_167, "maskrcnn": BENCHMARKS["maskrcnn"].samples_per_epoch}
GRID = {"step_noise": (0.005, 0.02, 0.05), "drift": (0.005, 0.01, 0.02, 0.04), "drift_steps": (2.0, 10.0)}
WARMUP_STEPS = 1


def load_cases(max_runs: int | None = None, seed: int = 0) -> list[dict]:
    steps = perfmodel.load_runs(bundled_runs_path("mlperf_steps.csv"))
    epochs = pd.read_csv(bundled_runs_path("mlperf_epochs.csv.gz"))
    ids = sorted(set(epochs["run_id"]) & set(steps["run_id"]))
    if max_runs is not None and len(ids) > max_runs:
        ids = sorted(np.random.default_rng(seed).choice(ids, max_runs, replace=False))
    rows = steps.set_index("run_id").loc[ids].reset_index()
    times = {rid: g.sort_values("epoch")["seconds"].to_numpy(dtype=float) for rid, g in
             epochs[epochs["run_id"].isin(ids)].groupby("run_id")}
    cases = []
    for device in sorted(rows["gpu_type"].unique()):
        test = rows[rows["gpu_type"] == device].reset_index(drop=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = fit_history(steps[steps["gpu_type"] != device].reset_index(drop=True), "roofline",
                                 kind="new_device")
            pi = fitted.predict_interval(test, 0.9)
        for i, r in test.iterrows():
            per_epoch = math.ceil(SAMPLES_PER_EPOCH[r["benchmark"]] / float(r["global_batch_size"]))
            t = times[r["run_id"]]
            pred = SimpleNamespace(step_seconds=float(pi["step_time_s"].iloc[i]) * per_epoch,
                                   step_lower=float(pi["step_lower"].iloc[i]) * per_epoch,
                                   step_upper=float(pi["step_upper"].iloc[i]) * per_epoch,
                                   steps=len(t), confidence=0.9)
            cases.append({"run_id": r["run_id"], "model": device, "benchmark": r["benchmark"], "times": list(t),
                          "pred": pred})
    return cases


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-runs", type=int, default=None, help="a random subset of the runs (speed)")
    args = ap.parse_args(argv)
    cases = load_cases(args.max_runs)
    bench = pd.Series([c["benchmark"] for c in cases]).value_counts().to_dict()
    print(f"online total-time estimate on {len(cases)} MLPerf runs ({bench}) on "
          f"{len({c['model'] for c in cases})} device types; steps = epochs; prior: roofline fit without the "
          f"run's device type; warmup_steps={WARMUP_STEPS}")
    options = [dict(zip(GRID, values), warmup_steps=WARMUP_STEPS) for values in product(*GRID.values())]
    cross_fit(cases, options, lambda fold, tune, test: (
        f"{len(tune)} runs; held-out {len(test)} runs on {len(fold)} device types"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
