"""After ``perfmodel measure --calibrate``: are architectures the calibration did not measure predicted no worse
than without it? (issue 36, item 5)

The issue's case: a few architectures held out of the bundled CPU history, then the calibration sweep's runs given
beside the bundled history, as its message advises (``history=['calibration_cpu.csv', 'cpu']``). Here, offline,
on the bundled CPU history (one host): each *family* of models the calibration sweep
(:func:`perfmodel.measure.calibration_configs`) does not measure is held out in turn, from the bundled runs and from
the calibration runs, and its runs are predicted, through :class:`perfmodel.Predictor` as a user gets them, from

* ``bundled only``         -- the bundled history without the family (its file in ``$PERFMODEL_DATA``, so it is
  still perfmodel's bundled data to the Predictor);
* ``calibration + bundled`` -- the calibration runs (repeat 0 of the sweep's configurations, as measured on
  2026-11-30) beside it;
* ``calibration only``     -- the calibration runs alone.

Both come from one host a day apart, so the host shift is small: this measures whether giving the calibration
runs can *hurt* a model they do not cover, which is what the issue measured (23.5% -> 63.7%).

Usage::

    python benchmarks/calibration_prior.py [--output benchmarks/results/calibration_prior.txt]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import perfmodel
from perfmodel.datasets import bundled_runs_path
from perfmodel.measure import calibration_configs
from perfmodel.metrics import coverage, median_ape

sys.path.insert(0, str(Path(__file__).resolve().parent))
from own_runs import QUERY_COLUMNS  # noqa: E402

CALIBRATION_DAY = "2026-11-30"


def calibration_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The bundled runs of the calibration sweep's configurations: repeat 0, measured on the zoo sweep's day."""
    keys = {(c.model, c.batch_size, c.gpu_count) for c in calibration_configs("cpu")}
    at = [(m, int(b), int(g)) in keys for m, b, g in zip(runs["model"], runs["batch_size"], runs["gpu_count"])]
    day = runs["timestamp"].astype(str).str.startswith(CALIBRATION_DAY)
    return runs.loc[np.asarray(at) & day & (runs["repeat"] == 0)]


def ask(history, test: pd.DataFrame) -> pd.DataFrame:
    q = test[[c for c in QUERY_COLUMNS if c in test.columns]].assign(steps=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = perfmodel.Predictor(history).predict_many(q)
        except (ValueError, TypeError) as exc:
            return pd.DataFrame({"y": test["step_time_s"].to_numpy(float), "pred": np.nan, "lo": np.nan,
                                 "hi": np.nan, "rule": f"refused: {exc}"[:80]})
    return pd.DataFrame({"y": test["step_time_s"].to_numpy(float), "pred": out["step_time_s"].to_numpy(float),
                         "lo": out["step_lower"].to_numpy(float), "hi": out["step_upper"].to_numpy(float),
                         "rule": out["interval_rule"].astype(str).str.slice(0, 40).to_numpy()})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", default=None)
    args = ap.parse_args(argv)
    t0 = time.time()
    path = bundled_runs_path("runs_cpu.csv")
    runs = perfmodel.load_runs(path)
    calib = calibration_runs(runs)
    covered = set(calib["family"].astype(str))
    families = sorted(set(runs["family"].astype(str)) - covered)
    parts: dict[str, list] = {"bundled only": [], "calibration + bundled": [], "calibration only": []}
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PERFMODEL_DATA"] = tmp
        target = Path(tmp, "runs_cpu.csv")
        for fam in families:
            held = runs["family"].astype(str) == fam
            raw = pd.read_csv(path)
            raw.loc[~(raw["family"].astype(str) == fam).to_numpy()].to_csv(target, index=False)
            test = runs.loc[held].reset_index(drop=True)
            own = calib.loc[calib["family"].astype(str) != fam].reset_index(drop=True)
            got = {"bundled only": ask(str(target), test), "calibration + bundled": ask([own, str(target)], test),
                   "calibration only": ask(own, test)}
            for k, v in got.items():
                parts[k].append(v)
                ok = np.isfinite(v["pred"])
                lines.append(f"  {fam:<20} {k:<22} n={int(ok.sum()):<3} median APE "
                             f"{median_ape(v['y'][ok], v['pred'][ok]) if ok.any() else np.nan:6.1f}%  "
                             f"{v['rule'].iloc[0]}")
                print(lines[-1], flush=True)
        del os.environ["PERFMODEL_DATA"]
    summary = []
    for k, rows in parts.items():
        r = pd.concat(rows, ignore_index=True)
        ok = np.isfinite(r["pred"])
        summary.append(f"{k:<22} n={int(ok.sum()):<4} median APE {median_ape(r['y'][ok], r['pred'][ok]):5.1f}%  "
                       f"coverage {coverage(r['y'][ok], r['lo'][ok], r['hi'][ok]):.2f}  "
                       f"width x{float(np.exp(np.mean(np.log(r['hi'][ok] / r['lo'][ok])))):.2f}  "
                       f"refused {int((~ok).sum())}")
    text = (f"# python benchmarks/calibration_prior.py   ({time.time() - t0:.0f} s)\n"
            f"# calibration runs: {len(calib)} of {calib['model'].nunique()} models; families held out in turn: "
            f"{', '.join(families)}\n" + "\n".join(summary) + "\n# per family\n" + "\n".join(lines) + "\n")
    print(text)
    if args.output:
        Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
