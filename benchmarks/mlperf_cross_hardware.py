"""Cross-hardware validation on public MLPerf Training results (v4.0 and v5.0, closed division).

Reads ../shared/datasets/mlperf/mlperf_training_v4.0_v5.0_summary.csv (never copied into this project; the script
says "skipped" and exits 0 when the folder is absent). Each row is one (system, benchmark): time to train a fixed
workload to its target quality on ``gpu_count`` accelerators of one type (mean of successful runs after dropping
the fastest and slowest — not the official score).

Protocol: leave-one-accelerator-type-out. For each accelerator type in perfmodel's spec table, fit on every other
type and predict the held-out type's rows (benchmarks the training types do not cover are counted and skipped):

* ``perfmodel``: OLS on log time with a per-benchmark workload term, log accelerator count, and the spec table's
  log dense bf16 peak and log memory bandwidth (MLPerf runs are mixed precision; the source records none) —
  perfmodel's hardware-feature approach; the 90% prediction interval comes from the OLS fit.
* ``peak-ratio``: the naive scaling of the calculators and of Habitat-style wave scaling's compute bound: the
  same benchmark at the same accelerator count on other types, times peak_other / peak_target (geometric mean
  over the types that ran it).

Also reports how time scales with accelerator count (fitted exponent of ``T ∝ n^b``, overall and per benchmark).
Usage: python benchmarks/mlperf_cross_hardware.py [--data PATH]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf

from perfmodel.exceptions import UnknownHardwareError
from perfmodel.hardware import get_spec, resolve_gpu_type

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "mlperf" / "mlperf_training_v4.0_v5.0_summary.csv"


def load(path: Path) -> tuple[pd.DataFrame, dict]:
    df = pd.read_csv(path)
    df = df[(df["metric"] == "time_to_train") & df["value"].gt(0) & df["gpu_count"].gt(0)].copy()
    canon, unknown = {}, {}
    for name in df["gpu_type"].unique():
        try:
            canon[name] = resolve_gpu_type(name)
        except UnknownHardwareError:
            unknown[name] = int((df["gpu_type"] == name).sum())
    df = df[df["gpu_type"].isin(canon)].copy()
    df["accel"] = df["gpu_type"].map(canon)
    specs = {a: get_spec(a) for a in df["accel"].unique()}
    df["peak"] = df["accel"].map(lambda a: specs[a].peak_tflops("bf16"))
    df["bw"] = df["accel"].map(lambda a: specs[a].memory_bandwidth_gbps)
    df["log_t"] = np.log(df["value"])
    df["log_n"] = np.log(df["gpu_count"])
    df["log_peak"] = np.log(df["peak"])
    df["log_bw"] = np.log(df["bw"])
    return df.reset_index(drop=True), unknown


def leave_one_type_out(df: pd.DataFrame, confidence: float = 0.9) -> pd.DataFrame:
    rows = []
    for accel in sorted(df["accel"].unique()):
        train, test = df[df["accel"] != accel], df[df["accel"] == accel]
        covered = test["model"].isin(set(train["model"]))
        test = test[covered]
        if len(test) == 0 or train["accel"].nunique() < 3:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = smf.ols("log_t ~ C(model) + log_n + log_peak + log_bw", data=train).fit()
            frame = fit.get_prediction(test).summary_frame(alpha=1 - confidence)
        pred = np.exp(frame["mean"].to_numpy())
        lo, hi = np.exp(frame["obs_ci_lower"].to_numpy()), np.exp(frame["obs_ci_upper"].to_numpy())
        y = test["value"].to_numpy()
        # peak-ratio baseline
        base = []
        for _, r in test.iterrows():
            ref = train[(train["model"] == r["model"]) & (train["gpu_count"] == r["gpu_count"])]
            base.append(np.exp(np.mean(np.log(ref["value"] * ref["peak"] / r["peak"]))) if len(ref) else np.nan)
        base = np.asarray(base)
        for i in range(len(test)):
            rows.append({"held_out": accel, "benchmark": test["model"].iloc[i], "gpu_count": test["gpu_count"].iloc[i],
                         "y": y[i], "perfmodel": pred[i], "lower": lo[i], "upper": hi[i], "peak_ratio": base[i],
                         "uncovered": int((~covered).sum())})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT)
    args = ap.parse_args(argv)
    if not args.data.exists():
        print(f"skipped: {args.data} not found (the public MLPerf data lives in ../shared, outside the project)")
        return 0
    df, unknown = load(args.data)
    print(f"MLPerf Training v4.0+v5.0 summary: {len(df)} (system, benchmark) rows on {df['accel'].nunique()} "
          f"accelerator types in the spec table; left out (not in the table): "
          f"{', '.join(f'{k} ({v})' for k, v in unknown.items())}")
    res = leave_one_type_out(df)
    res["ape_perfmodel"] = np.abs(res["perfmodel"] / res["y"] - 1) * 100
    res["ape_peak_ratio"] = np.abs(res["peak_ratio"] / res["y"] - 1) * 100
    res["covered"] = (res["y"] >= res["lower"]) & (res["y"] <= res["upper"])
    per = res.groupby("held_out").agg(
        rows=("y", "size"), perfmodel_median_ape=("ape_perfmodel", "median"), perfmodel_mape=("ape_perfmodel", "mean"),
        pi90_coverage=("covered", "mean"), peak_ratio_rows=("ape_peak_ratio", "count"),
        peak_ratio_median_ape=("ape_peak_ratio", "median"))
    with pd.option_context("display.width", 160):
        print("\nleave-one-accelerator-type-out (time to train):")
        print(per.to_string(float_format=lambda v: f"{v:.3g}"))
    both = res.dropna(subset=["ape_peak_ratio"])
    print(f"\nall held-out rows: perfmodel median APE {res['ape_perfmodel'].median():.1f}%, MAPE "
          f"{res['ape_perfmodel'].mean():.1f}%, 90% PI coverage {res['covered'].mean():.3f} ({len(res)} rows); "
          f"mean over types of per-type MAPE {per['perfmodel_mape'].mean():.1f}%")
    print(f"rows where the peak-ratio baseline has a reference ({len(both)}): perfmodel median APE "
          f"{both['ape_perfmodel'].median():.1f}% vs peak-ratio {both['ape_peak_ratio'].median():.1f}%")
    print("anchors (different protocols, per-iteration time): Habitat 11.8% average, NeuSight 7.3% mean")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = smf.ols("log_t ~ C(model) + C(accel) + log_n", data=df).fit()
    b, (lo, hi) = fit.params["log_n"], fit.conf_int().loc["log_n"]
    print(f"\nscaling with accelerator count: T ∝ n^{b:.3f} (95% CI {lo:.3f} – {hi:.3f}); ideal is n^-1")
    for bench, g in df.groupby("model"):
        if g["gpu_count"].nunique() >= 3 and g["accel"].nunique() >= 1:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                f = smf.ols("log_t ~ C(accel) + log_n", data=g).fit() if g["accel"].nunique() > 1 else \
                    smf.ols("log_t ~ log_n", data=g).fit()
            print(f"  {bench:<18} n from {g['gpu_count'].min():>5} to {g['gpu_count'].max():>6}: "
                  f"T ∝ n^{f.params['log_n']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
