"""Calibrate (and check) how prediction intervals widen with the distance to the data.

Every method's interval goes through ``TrainingTimeModel.predict_interval``, which multiplies the log half-widths
by ``1 + c · max(0, d − d0)``, with ``d`` the query's ``nearest_run_distance``. This script fits a method
(``--method``, default ``physics``) on leave-one-group-out splits of a history (leave one model / batch size /
device count out) with the widening switched off, records each held-out run's distance, interval and truth, and
then, for each candidate ``d0``, finds the smallest ``c`` for which held-out runs beyond ``d0`` are covered at the
nominal level, with no distance band of >= ``MIN_BAND_GROUPS`` held-out groups below nominal - 0.05. It
prints coverage by distance band before and after, and the chosen constants (set in
``perfmodel/models/_training.py`` as ``EXTRAPOLATION_D0`` / ``EXTRAPOLATION_C``).

Usage: python benchmarks/extrapolation.py [RUNS] [--method physics] [--confidence 0.9]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd

import perfmodel
from perfmodel.datasets import bundled_runs_path
from perfmodel.metrics import coverage
from perfmodel.models import TrainingTimeModel
from perfmodel.models._training import EXTRAPOLATION_C, EXTRAPOLATION_D0

SPLITS = {"leave-one-model-out": "model", "leave-one-batch-size-out": "batch_size",
          "leave-one-gpu-count-out": "gpu_count"}
D0S = (0.25, 0.5, 0.75, 1.0)
CS = tuple(np.round(np.arange(0, 4.01, 0.25), 2))
#: A distance band constrains the constants only if its runs come from at least this many held-out groups: the
#: runs of one held-out model (or batch size, or count) err together, so a band of one or two groups is one or two
#: draws, not many.
MIN_BAND_GROUPS = 5


def held_out(runs: pd.DataFrame, method: str, confidence: float) -> pd.DataFrame:
    rows = []
    for split, col in SPLITS.items():
        for g in pd.unique(runs[col]):
            train, test = runs[runs[col] != g], runs[runs[col] == g]
            if len(train) < 10 or test.empty:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = TrainingTimeModel(method=method, cv=5).fit(train.reset_index(drop=True))
                m._widening = (0.0, 0.0)
                pi = m.predict_interval(test.reset_index(drop=True), confidence)
            rows.append(pd.DataFrame({"split": split, "group": f"{split}={g}",
                                      "y": test["step_time_s"].to_numpy(dtype=float),
                                      "pred": pi["step_time_s"].to_numpy(), "lo": pi["step_lower"].to_numpy(),
                                      "hi": pi["step_upper"].to_numpy(), "d": pi["nearest_run_distance"].to_numpy()}))
    return pd.concat(rows, ignore_index=True)


def widen(df: pd.DataFrame, d0: float, c: float):
    f = 1 + c * np.maximum(df["d"].to_numpy() - d0, 0)
    p = df["pred"].to_numpy()
    return p * (df["lo"].to_numpy() / p) ** f, p * (df["hi"].to_numpy() / p) ** f


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="?", default=None)
    ap.add_argument("--method", default="physics")
    ap.add_argument("--confidence", type=float, default=0.9)
    args = ap.parse_args(argv)
    runs = perfmodel.load_runs(args.runs or bundled_runs_path()).reset_index(drop=True)
    df = held_out(runs, args.method, args.confidence)
    bands = pd.cut(df["d"], [-0.01, 0.25, 0.5, 0.75, 1.0, 1.5, np.inf])
    print(f"{len(df)} held-out runs ({args.method}, {args.confidence:.0%} intervals); distance bands:")
    lo, hi = widen(df, EXTRAPOLATION_D0, EXTRAPOLATION_C)
    table = pd.DataFrame({"band": bands, "group": df["group"], "raw": (df["y"] >= df["lo"]) & (df["y"] <= df["hi"]),
                          "widened": (df["y"] >= lo) & (df["y"] <= hi)}).groupby("band", observed=True).agg(
        runs=("raw", "size"), held_out_groups=("group", "nunique"), coverage_raw=("raw", "mean"),
        coverage_widened=("widened", "mean"))
    print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    print(f"overall coverage: raw {coverage(df['y'], df['lo'], df['hi']):.3f}, widened with d0={EXTRAPOLATION_D0}, "
          f"c={EXTRAPOLATION_C}: {coverage(df['y'], lo, hi):.3f}")
    print("\ncalibration: smallest c with coverage >= nominal beyond d0, and >= nominal - 0.05 in every distance "
          f"band beyond d0 that holds runs of >= {MIN_BAND_GROUPS} held-out groups")
    for d0 in D0S:
        far = df["d"] > d0
        if far.sum() < 10:
            print(f"  d0={d0}: only {int(far.sum())} held-out runs beyond it")
            continue
        for c in CS:
            lo, hi = widen(df, d0, c)
            inside = (df["y"] >= lo) & (df["y"] <= hi)
            per_band = pd.DataFrame({"inside": inside[far], "group": df["group"][far]}).groupby(
                bands[far], observed=True).agg(mean=("inside", "mean"), groups=("group", "nunique"))
            ok_bands = (per_band.loc[per_band["groups"] >= MIN_BAND_GROUPS, "mean"] >= args.confidence - 0.05).all()
            if coverage(df["y"][far], lo[far], hi[far]) >= args.confidence and ok_bands:
                print(f"  d0={d0}: c={c} ({int(far.sum())} runs beyond; their coverage "
                      f"{coverage(df['y'][far], lo[far], hi[far]):.3f}; overall {coverage(df['y'], lo, hi):.3f})")
                break
        else:
            print(f"  d0={d0}: no c <= {CS[-1]} reaches it")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
