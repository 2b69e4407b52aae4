"""Calibration to a new CPU host: what a few minutes of ``perfmodel measure --calibrate`` buys.

Usage::

    python benchmarks/calibration_cpu.py --bundled data/runs_cpu.csv --calibration calibration_cpu.csv
    python benchmarks/calibration_cpu.py --demo-split data/runs_cpu.csv     # try it on one history split in two
    python benchmarks/calibration_cpu.py ... --methods physics,ops --save   # results to benchmarks/results/

``--bundled`` is the history shipped with perfmodel (measured on one host); ``--calibration`` the runs of
``perfmodel measure --calibrate`` on the host to predict (the user's). Both are CPU histories (``gpu_type``
``cpu``): the model cannot tell the two hosts apart by device name, so whatever it learns from the calibration
runs it learns by pooling them with the bundled ones. Every number is out of sample:

1. **Host shift** (the calibration runs are the truth): each calibration model's runs predicted from
   (a) the bundled history alone, (b) the bundled history plus the *other* calibration models' runs
   (leave-one-calibration-model-out), (c) the other calibration models' runs alone.
2. **A new architecture after calibration** (leave-one-family-out): every family of the calibration runs is held
   out together — all its models, from both histories — and its calibration runs are predicted from
   (a) the bundled history without the family, (b) that plus the calibration runs of the other families.

Methods by name: ``auto`` (chosen for new-model queries), ``physics`` and ``ops`` where
``perfmodel.models.METHODS`` has it; ``--methods`` picks. Median APE, MAPE and coverage of the
``--confidence`` prediction interval, per step time.

``--demo-split PATH`` splits one history in two so the script can run before a second host's runs exist: one
model per family (the smallest) at its one-worker repeat-0 runs becomes "calibration", everything else "bundled".
Both halves come from one host, so the host shift it shows is nil by construction: it checks the machinery, not
the claim.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from perfmodel.fitting import fit_history
from perfmodel.history import read_history
from perfmodel.metrics import coverage, mape, median_ape
from perfmodel.models import METHODS

RESULTS = Path(__file__).resolve().parent / "results"


def default_methods() -> list[str]:
    return ["auto", "physics"] + (["ops"] if "ops" in METHODS else [])


def _fit_predict(method: str, train: pd.DataFrame, test: pd.DataFrame, confidence: float, cv: int) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        model = fit_history(train.reset_index(drop=True), method, kind="new_model", cv=cv)
        pi = model.predict_interval(test.reset_index(drop=True), confidence)
    return pd.DataFrame({"y": test["step_time_s"].to_numpy(float), "pred": pi["step_time_s"].to_numpy(float),
                         "lower": pi["step_lower"].to_numpy(float), "upper": pi["step_upper"].to_numpy(float),
                         "chosen": model.method})


def _score(rows: list[pd.DataFrame]) -> dict:
    if not rows:
        return {"n": 0}
    p = pd.concat(rows, ignore_index=True)
    return {"n": len(p), "median_ape": median_ape(p["y"], p["pred"]), "mape": mape(p["y"], p["pred"]),
            "coverage": coverage(p["y"], p["lower"], p["upper"]),
            "chosen": ",".join(sorted(set(p["chosen"])))}


def host_shift(runs: pd.DataFrame, methods, confidence: float, cv: int) -> list[dict]:
    bundled, calib = runs[runs["part"] == "bundled"], runs[runs["part"] == "calibration"]
    out = []
    for method in methods:
        alone = [_fit_predict(method, bundled, calib, confidence, cv)]
        pooled, own = [], []
        for model in sorted(set(calib["model"])):
            test = calib[calib["model"] == model]
            others = calib[calib["model"] != model]
            pooled.append(_fit_predict(method, pd.concat([bundled, others]), test, confidence, cv))
            if others["model"].nunique() >= 2:
                own.append(_fit_predict(method, others, test, confidence, cv))
        for name, rows in (("bundled only", alone), ("bundled + calibration (LOMO)", pooled),
                           ("calibration only (LOMO)", own)):
            out.append({"part": "host shift", "training": name, "method": method, **_score(rows)})
            _progress(out[-1])
    return out


def new_architecture(runs: pd.DataFrame, methods, confidence: float, cv: int) -> list[dict]:
    calib = runs[runs["part"] == "calibration"]
    out = []
    for method in methods:
        without, with_calib = [], []
        for family in sorted(set(calib["family"].astype(str))):
            rest = runs[runs["family"].astype(str) != family]
            test = calib[calib["family"].astype(str) == family]
            if rest["model"].nunique() < 2:
                continue
            without.append(_fit_predict(method, rest[rest["part"] == "bundled"], test, confidence, cv))
            with_calib.append(_fit_predict(method, rest, test, confidence, cv))
        for name, rows in (("bundled minus family", without), ("bundled + calibration minus family", with_calib)):
            out.append({"part": "new architecture (LOFO)", "training": name, "method": method, **_score(rows)})
            _progress(out[-1])
    return out


def _progress(row: dict) -> None:
    print(f"  {row['part']:<24} {row['training']:<36} {row['method']:<8} n={row['n']:<4} "
          f"median APE {row.get('median_ape', float('nan')):6.1f}%  coverage {row.get('coverage', float('nan')):.2f}",
          file=sys.stderr, flush=True)


def demo_split(path: str, folder: Path) -> tuple[Path, Path]:
    """Split one history: the smallest model of each family, one worker, repeat 0 -> calibration; rest bundled."""
    runs = read_history(path).runs
    smallest = runs.sort_values("params").groupby(runs["family"].astype(str))["model"].first()
    is_calib = runs["model"].isin(set(smallest)) & (runs["gpu_count"] == 1)
    if "repeat" in runs.columns:
        is_calib &= runs["repeat"].fillna(0) == 0
    runs = runs.drop(columns=["history_source"])
    bundled, calib = folder / "bundled.csv", folder / "calibration.csv"
    runs[~is_calib].to_csv(bundled, index=False)
    runs[is_calib].to_csv(calib, index=False)
    return bundled, calib


def load(bundled: str, calibration: str) -> pd.DataFrame:
    loaded = read_history([bundled, calibration])
    runs, labels = loaded.runs, loaded.labels
    if "family" not in runs.columns or runs["family"].isna().any():
        raise SystemExit("calibration_cpu: every run needs a 'family' (zoo runs record it).")
    runs["part"] = np.where(runs["history_source"] == labels[0], "bundled", "calibration")
    if labels[0] == labels[1]:
        raise SystemExit("calibration_cpu: --bundled and --calibration are the same file.")
    return runs


def format_table(rows: list[dict]) -> str:
    cols = ["part", "training", "method", "n", "median_ape", "mape", "coverage", "chosen"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c, "")
            cells.append(f"{v:.3g}" if isinstance(v, float) else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--bundled", help="the bundled (other host's) CPU history")
    src.add_argument("--demo-split", metavar="HISTORY", help="split one history into bundled + calibration")
    ap.add_argument("--calibration", help="the calibration history (perfmodel measure --calibrate)")
    ap.add_argument("--methods", default=",".join(default_methods()))
    ap.add_argument("--confidence", type=float, default=0.9)
    ap.add_argument("--cv", type=int, default=5, help="folds of each fit's conformal calibration (default 5)")
    ap.add_argument("--save", action="store_true", help="write benchmarks/results/calibration_cpu.{md,json}")
    args = ap.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in (*METHODS, "auto")]
    if unknown:
        ap.error(f"unknown method(s) {', '.join(unknown)}; known: auto, {', '.join(METHODS)}")
    with tempfile.TemporaryDirectory() as tmp:
        if args.demo_split:
            bundled, calibration = demo_split(args.demo_split, Path(tmp))
        else:
            if not args.calibration:
                ap.error("--bundled needs --calibration")
            bundled, calibration = args.bundled, args.calibration
        runs = load(str(bundled), str(calibration))
    n_b, n_c = int((runs["part"] == "bundled").sum()), int((runs["part"] == "calibration").sum())
    print(f"bundled: {n_b} runs of {runs.loc[runs.part == 'bundled', 'model'].nunique()} models; calibration: "
          f"{n_c} runs of {runs.loc[runs.part == 'calibration', 'model'].nunique()} models in "
          f"{runs.loc[runs.part == 'calibration', 'family'].nunique()} families; methods {', '.join(methods)}",
          file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    rows = host_shift(runs, methods, args.confidence, args.cv) + new_architecture(runs, methods, args.confidence,
                                                                                  args.cv)
    table = format_table(rows)
    print(table)
    print(f"({time.perf_counter() - t0:.0f} s; {args.confidence:.0%} intervals; per-step time)")
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        source = f"demo split of {args.demo_split}" if args.demo_split else f"{args.bundled} + {args.calibration}"
        (RESULTS / "calibration_cpu.md").write_text(f"# Calibration to a new CPU host\n\nHistories: {source}\n\n"
                                                    f"{table}\n", encoding="utf-8")
        (RESULTS / "calibration_cpu.json").write_text(json.dumps({"source": source, "confidence": args.confidence,
                                                                  "rows": rows}, indent=1, default=float),
                                                      encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
