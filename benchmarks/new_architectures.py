"""New architectures: leave-one-family-out and leave-one-model-out on a run history, op-level model vs the rest.

Every run of one family (``leave-one-family-out``: e.g. all LSTMs) or of one model (``leave-one-model-out``) is held
out together; each method is fitted on the rest and predicts the held-out runs with a 90% interval (``auto`` chooses
on the new-model split, intervals use the new-model conformity scores). Prints, per split and method: median APE,
MAPE, coverage of the 90% interval and its mean relative width, side by side, for ``ops``, ``physics``,
``roofline``, ``loglinear``, ``auto`` and the baselines of :data:`perfmodel.evaluate.EVALUATION_BASELINES`.

A history without op-level columns (``op_*``) gets them backfilled into an in-memory copy first
(:func:`perfmodel.measure.add_op_features`, needs torch); rows that cannot be rebuilt keep the imputed fallback.

    PYTHONPATH=src python benchmarks/new_architectures.py [--history PATH] [--save] [--n-jobs 2]

``--save`` writes ``benchmarks/results/new_architectures.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
METHODS = ("ops", "physics", "roofline", "loglinear", "auto")
SPLITS = {"leave-one-family-out": "family", "leave-one-model-out": "model"}


def _load(history: str | None) -> tuple[pd.DataFrame, str]:
    from perfmodel.datasets import bundled_runs_path
    from perfmodel.io import load_runs
    from perfmodel.schema import OP_COLUMNS

    path = history or str(bundled_runs_path("runs_cpu.csv"))
    runs = load_runs(path).reset_index(drop=True)
    runs = runs[runs["status"] == "ok"].reset_index(drop=True) if "status" in runs.columns else runs
    names = [c.name for c in OP_COLUMNS]
    if not set(names) <= set(runs.columns) or runs[names].isna().any().any():
        from perfmodel.measure import add_op_features

        t0 = time.perf_counter()
        runs = add_op_features(runs)
        skipped = runs.attrs.get("op_features_skipped", {})
        print(f"op columns backfilled in memory ({time.perf_counter() - t0:.0f} s)"
              + (f"; left empty (imputed): {skipped}" if skipped else ""), flush=True)
    return runs, path


def run(runs: pd.DataFrame, methods, confidence: float, n_jobs: int) -> pd.DataFrame:
    from joblib import Parallel, delayed

    from perfmodel.evaluate import EVALUATION_BASELINES, fold_predictions, grouped_folds
    from perfmodel.metrics import coverage, mean_relative_width

    all_methods = list(methods) + list(EVALUATION_BASELINES)
    jobs = []
    for split, col in SPLITS.items():
        if col not in runs.columns or runs[col].nunique() < 3:
            print(f"{split}: skipped (fewer than 3 {col} groups)", flush=True)
            continue
        for held, tr, te in grouped_folds(runs, col):
            for m in all_methods:
                jobs.append((split, held, m, tr, te))

    def one(split, held, m, tr, te):
        try:
            out = fold_predictions(m, runs, tr, te, confidence, None, "new_model")
        except (ValueError, np.linalg.LinAlgError) as exc:  # a method that cannot fit this fold
            out = pd.DataFrame({"pred": np.nan, "step_lower": np.nan, "step_upper": np.nan,
                                "y": runs["step_time_s"].to_numpy(dtype=float)[te], "row": te, "method": m,
                                "chosen": f"failed: {exc}"})
        return out.assign(split=split, held_out=held)

    preds = pd.concat(Parallel(n_jobs=n_jobs)(delayed(one)(*j) for j in jobs), ignore_index=True)
    rows = []
    for (split, method), g in preds.groupby(["split", "method"], sort=False):
        n_all = len(g)
        g = g[np.isfinite(g["pred"].to_numpy(dtype=float))]
        if g.empty:
            continue
        ape = np.abs(g["pred"] / g["y"] - 1) * 100
        has_pi = g["step_lower"].notna().all()
        rows.append({"split": split, "method": method, "n": len(g), "n_failed": n_all - len(g),
                     "median_ape": float(ape.median()), "mape": float(ape.mean()),
                     "coverage": coverage(g["y"], g["step_lower"], g["step_upper"]) if has_pi else np.nan,
                     "rel_width": mean_relative_width(g["pred"], g["step_lower"], g["step_upper"]) if has_pi
                     else np.nan,
                     "chosen": ",".join(sorted(set(map(str, g["chosen"])))) if method == "auto" else ""})
    return pd.DataFrame(rows)


def to_text(table: pd.DataFrame) -> str:
    fmt = {"median_ape": "{:.1f}".format, "mape": "{:.1f}".format, "coverage": "{:.2f}".format,
           "rel_width": "{:.2f}".format}
    return table.to_string(index=False, formatters=fmt, na_rep="-")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history", default=None, help="run history (default: bundled data/runs_cpu.csv)")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated perfmodel methods")
    ap.add_argument("--confidence", type=float, default=0.9)
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--save", action="store_true", help="write benchmarks/results/new_architectures.{md,json}")
    args = ap.parse_args(argv)
    runs, path = _load(args.history)
    print(f"history {path}: {len(runs)} runs, {runs['model'].nunique()} models, "
          f"{runs['family'].nunique() if 'family' in runs.columns else 0} families", flush=True)
    t0 = time.perf_counter()
    table = run(runs, [m.strip() for m in args.methods.split(",") if m.strip()], args.confidence, args.n_jobs)
    text = to_text(table)
    print(text)
    print(f"({time.perf_counter() - t0:.0f} s)")
    if args.save:
        out = HERE / "results"
        out.mkdir(exist_ok=True)
        md = (f"# New architectures: leave-one-family-out and leave-one-model-out\n\nHistory: `{path}` "
              f"({len(runs)} runs). Command: `python benchmarks/new_architectures.py"
              f"{' --history ' + args.history if args.history else ''}`.\n\n```\n{text}\n```\n")
        (out / "new_architectures.md").write_text(md, encoding="utf-8")
        (out / "new_architectures.json").write_text(
            json.dumps({"history": path, "runs": len(runs), "confidence": args.confidence,
                        "table": json.loads(table.to_json(orient="records"))}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
