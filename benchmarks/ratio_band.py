"""How wide a band of references the ``ratio`` rule pools (``RATIO_BAND``), chosen on the development sets.

``ratio`` predicts a run from the nearest runs of the same model (:mod:`perfmodel.models._baselines`). With
``band=0`` only the nearest (and runs tied with it) count: one run that happens to be nearest in batch sets the
answer alone. On MLPerf that is how BERT queries on 8 H100s at a batch no run had were answered from one 8-GPU
MI300X run of another stack (tinygrad), 14x too slow (``benchmarks/results/ratio_band.txt`` shows the tails). A band pools every reference within ``band`` of the nearest distance and takes their median.

The band is chosen here, on the development sets only (MLPerf, LLM Foundry, NeuSight; never the confirmation set):
the point predictions of ``ratio`` alone (no intervals, no ``auto``) on

* a new device type: the device types held out as in ``benchmarks/generalisation.py`` (at most 10 refits);
* a new batch size and a new device count: each held out from the whole history (at most 10 refits).

Printed per band and split: the median and the 90th percentile of the absolute percentage error (the tail is
what a single odd reference costs). Candidates: 0 (the rule before), 0.1, 0.3, 0.5 (one mismatch,
``RATIO_MISMATCH_COST``: a same-device run would then be pooled with other devices' at the same batch).

Usage::

    python benchmarks/ratio_band.py [--output benchmarks/results/ratio_band.txt]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generalisation as G  # noqa: E402  (the same sets and device-type folds)

from perfmodel.features import RunFeaturizer  # noqa: E402
from perfmodel.models import RATIO_BAND, RatioRegressor  # noqa: E402

BANDS = (0.0, 0.1, 0.3, 0.5)
MAX_FOLDS = 10


def ratio_ape(runs: pd.DataFrame, folds, band: float) -> np.ndarray:
    """Absolute percentage errors of ``ratio`` with ``band`` on the held-out rows of ``folds``."""
    y = runs["step_time_s"].to_numpy(dtype=float)
    out = []
    for train, test in folds:
        tr, te = runs.iloc[train].reset_index(drop=True), runs.iloc[test].reset_index(drop=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            feat = RunFeaturizer(kind="baseline").fit(tr)
            reg = RatioRegressor(band=band).fit(feat.transform(tr), y[train])
            pred = reg.predict(feat.transform(te))
        out.append(100 * np.abs(pred / y[test] - 1))
    return np.concatenate(out)


def grouped_folds(runs: pd.DataFrame, column: str) -> list:
    groups = pd.to_numeric(runs[column], errors="coerce").to_numpy(dtype=float)
    k = min(MAX_FOLDS, len(np.unique(groups)))
    return list(GroupKFold(k).split(np.zeros(len(runs)), groups=groups)) if k >= 2 else []


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", type=Path, default=None, help="also write the table here")
    args = ap.parse_args(argv)
    t0 = time.time()
    sets = {s["name"]: s for s in G.load_sets(None, quick=False)}  # development sets only
    cases = []
    for name in ("mlperf_steps", "public_llmfoundry", "public_neusight"):
        runs = sets[name]["runs"]
        cases.append((name, "new device type", runs, G.split_folds(runs, "new device type", MAX_FOLDS)[1]))
    for name in ("mlperf_steps", "public_llmfoundry"):
        runs = sets[name]["runs"]
        cases.append((name, "new batch size", runs, grouped_folds(runs, "batch_size")))
        cases.append((name, "new device count", runs, grouped_folds(runs, "gpu_count")))
    rows = []
    for name, split, runs, folds in cases:
        if not folds:
            continue
        for band in BANDS:
            ape = ratio_ape(runs, folds, band)
            rows.append({"set": name, "split": split, "band": band, "n": len(ape),
                         "median_ape": round(float(np.median(ape)), 1),
                         "p90_ape": round(float(np.percentile(ape, 90)), 1)})
    table = pd.DataFrame(rows)
    lines = [f"# python benchmarks/ratio_band.py  (development sets only; ratio point predictions; "
             f"shipped RATIO_BAND = {RATIO_BAND}; {time.time() - t0:.0f} s)",
             table.to_string(index=False), "",
             "Per band, the mean over the splits of the median APE and of the p90 APE"]
    summary = table.groupby("band")[["median_ape", "p90_ape"]].mean().round(1)
    lines.append(summary.to_string())
    text = "\n".join(lines)
    print(text)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
