"""Own runs beside the bundled prior: are the caller's own configurations predicted at least as well as from the
own runs alone, with honest intervals? (issue 23, "own runs win")

A public set from another publisher stands in for "your own runs" (another stack, other models, measured by
someone else): its runs are split into K folds (by configuration); each fold's runs are predicted, through
:class:`perfmodel.Predictor` exactly as a user gets them, from

* ``own only``      — the other folds' runs alone (``history=own_train``),
* ``own + bundled`` — the other folds' runs beside perfmodel's bundled GPU history (``history=[own_train, "gpu"]``),
* ``bundled only``  — the bundled GPU history alone (no own runs: what a user gets before measuring anything),

and each line prints the median APE, the 90% interval coverage and mean width (upper/lower), and the kinds of
query the held-out runs were. Rows the own runs cannot answer alone (a device or model they lack) are where the
bundled prior can help; rows they can (a known model on a known device) must come out the same as ``own only``.

Usage::

    python benchmarks/own_runs.py                      # auto and roofline, every set
    python benchmarks/own_runs.py --methods roofline   # quicker
    python benchmarks/own_runs.py --output benchmarks/results/own_runs.txt
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import perfmodel
from perfmodel.datasets import bundled_runs_path
from perfmodel.metrics import coverage, median_ape
from perfmodel.schema import LAYOUT_COLUMNS, OP_TRACED_CLASSES, SHAPE_COLUMNS

#: (name, bundled file, row filter) of the sets that stand in for a user's own runs.
SETS = {
    "neusight": ("public_neusight.csv", None),
    "llmfoundry-a100-40gb": ("public_llmfoundry.csv", ("gpu_type", "A100-SXM4-40GB")),
    "llmfoundry": ("public_llmfoundry.csv", None),
    "megatron-bridge": ("public_megatron_bridge.csv", None),
    "torchtitan": ("public_torchtitan.csv", None),
}
#: ``--columns basic``: the own runs as a table that records only what every publisher states (the transfer error
#: book's query columns, scripts/build_transfer_error_book.py): no shape or layout, so they are ordinary runs, not
#: transformer jobs with a layout (which ``auto`` answers through the layout model calibrated on them).
BASIC_COLUMNS = ("model", "family", "params", "flops_per_sample", "batch_size", "grad_accum", "gpu_count", "gpu_type",
                 "precision", "fp32_mode", "step_time_s")


#: What a user states of a job when asking for it (its size, FLOPs, shape, layout — the schema's shape and layout
#: columns — and precision), never what was
#: measured. The FLOPs per op class go too where the runs give them (a user's own model has them). Here they change
#: nothing: ``own_set`` names a workload per sequence length, so no model has two attention shares and the ``mfu``
#: rule fits no attention split on these sets.
QUERY_COLUMNS = ("model", "family", "params", "flops_per_sample", "batch_size", "gpu_count", "gpu_type", "precision",
                 "fp32_mode", "grad_accum", "seq_len", "nodes", *(f"op_{c}_flops" for c in OP_TRACED_CLASSES),
                 *(c.name for c in SHAPE_COLUMNS + LAYOUT_COLUMNS))


def own_set(name: str, columns: str = "all") -> pd.DataFrame:
    file, keep = SETS[name]
    runs = perfmodel.load_runs(Path(file) if Path(file).is_file() else bundled_runs_path(file))
    if keep is not None:
        runs = runs[runs[keep[0]] == keep[1]]
    if "seq_len" in runs.columns and runs["seq_len"].notna().any():  # another sequence length, another workload
        stated = runs["seq_len"].notna()
        runs.loc[stated, "model"] = (runs.loc[stated, "model"].astype(str) + "@"
                                     + runs.loc[stated, "seq_len"].astype("Int64").astype(str))
    if columns == "basic":
        runs = runs[[c for c in BASIC_COLUMNS if c in runs.columns]]
        runs = runs.loc[np.isclose(runs["batch_size"], np.round(runs["batch_size"]))]  # a whole per-device batch
    return runs.reset_index(drop=True)


def config_folds(runs: pd.DataFrame, k: int, seed: int = 0) -> np.ndarray:
    """A fold number per run; the runs of one configuration (model, device, batch, count) share a fold."""
    key = runs[["model", "gpu_type", "batch_size", "gpu_count"]].astype(str).agg("|".join, axis=1)
    uniq = key.unique()
    rng = np.random.default_rng(seed)
    fold_of = dict(zip(uniq, rng.permutation(len(uniq)) % k))
    return key.map(fold_of).to_numpy()


def predict(history, test: pd.DataFrame, method: str) -> pd.DataFrame:
    q = test[[c for c in QUERY_COLUMNS if c in test.columns]].copy()
    q["steps"] = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = perfmodel.Predictor(history, method=method).predict_many(q)
        except (ValueError, TypeError) as exc:  # the history cannot answer these rows (e.g. a precision it lacks)
            return pd.DataFrame({"y": test["step_time_s"].to_numpy(float), "pred": np.nan, "lo": np.nan,
                                 "hi": np.nan, "kind": f"refused: {type(exc).__name__}"})
    return pd.DataFrame({"y": test["step_time_s"].to_numpy(float), "pred": out["step_time_s"].to_numpy(float),
                         "lo": out["step_lower"].to_numpy(float), "hi": out["step_upper"].to_numpy(float),
                         "kind": out["query_kind"].astype(str).to_numpy()})


def score(rows: pd.DataFrame) -> dict:
    ok = np.isfinite(rows["pred"].to_numpy(float))
    r = rows[ok]
    kinds = rows["kind"].value_counts().to_dict()
    if r.empty:
        return {"n": 0, "median_ape": np.nan, "coverage": np.nan, "width": np.nan, "kinds": kinds}
    return {"n": int(len(r)), "median_ape": median_ape(r["y"], r["pred"]),
            "coverage": coverage(r["y"], r["lo"], r["hi"]),
            "width": float(np.exp(np.mean(np.log(r["hi"] / r["lo"])))), "kinds": kinds}


def run(name: str, methods, k: int) -> list[dict]:
    own = own_set(name, COLUMNS[0])
    folds = config_folds(own, k)
    out = []
    for method in methods:
        parts: dict[str, list] = {"own only": [], "own + bundled": [], "bundled only": []}
        for f in range(k):
            train, test = own[folds != f].reset_index(drop=True), own[folds == f].reset_index(drop=True)
            if test.empty:
                continue
            parts["own only"].append(predict(train, test, method))
            parts["own + bundled"].append(predict([train, "gpu"], test, method))
            parts["bundled only"].append(predict("gpu", test, method))
        for training, rows in parts.items():
            s = score(pd.concat(rows, ignore_index=True))
            out.append({"set": name, "own_runs": len(own), "training": training, "method": method, **s})
            print(f"  {name:<22} {training:<14} {method:<9} n={s['n']:<4} median APE {s['median_ape']:6.1f}%  "
                  f"coverage {s['coverage']:.2f}  width x{s['width']:.2f}  kinds {s['kinds']}", flush=True)
    return out


def few_runs(name: str, methods, counts, repeats: int) -> list[dict]:
    """Section 2: ``n`` own runs (``counts``), each of another configuration, drawn ``repeats`` times; every run of
    the other configurations predicted from them alone, beside the bundled runs, and from the bundled runs alone."""
    own = own_set(name, COLUMNS[0])
    key = own[["model", "gpu_type", "batch_size", "gpu_count"]].astype(str).agg("|".join, axis=1).to_numpy()
    uniq = pd.unique(key)
    out = []
    for method in methods:
        bundled = predict("gpu", own, method)
        for n in counts:
            parts: dict[str, list] = {"own only": [], "own + bundled": [], "bundled only": []}
            for rep in range(repeats):
                rng = np.random.default_rng(1000 * n + rep)
                chosen = rng.choice(len(uniq), size=min(n, len(uniq) - 1), replace=False)
                picked = np.isin(key, uniq[chosen])
                first = np.flatnonzero(picked)[np.unique(key[picked], return_index=True)[1]]  # one run per config
                train = own.iloc[first].reset_index(drop=True)
                test_at = np.flatnonzero(~picked)
                test = own.iloc[test_at].reset_index(drop=True)
                if len(train) >= 3:  # a fit of one's own needs at least three runs
                    parts["own only"].append(predict(train, test, method))
                parts["own + bundled"].append(predict([train, "gpu"], test, method))
                parts["bundled only"].append(bundled.iloc[test_at].reset_index(drop=True))
            for training, rows in parts.items():
                s = score(pd.concat(rows, ignore_index=True)) if rows else score(pd.DataFrame(
                    {"y": [], "pred": [], "lo": [], "hi": [], "kind": []}))
                out.append({"set": name, "own_runs": n, "training": training, "method": method, **s})
                print(f"  {name:<22} n={n:<3} {training:<14} {method:<9} median APE {s['median_ape']:6.1f}%  "
                      f"coverage {s['coverage']:.2f}  width x{s['width']:.2f}", flush=True)
    return out


COLUMNS = ["all"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="auto,roofline")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--counts", default="",
                    help="also section 2: these numbers of own runs (e.g. 1,3,9), each drawn --repeats times")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--columns", choices=["all", "basic"], default="all",
                    help="what the own runs record: every column the set has, or the basic ones (BASIC_COLUMNS)")
    ap.add_argument("--skip-folds", action="store_true", help="section 2 only")
    ap.add_argument("--lambda", dest="lam", default=None,
                    help="Lambda's runs (scripts/derive_public_lambda.py output) as one more set, 'lambda' (not "
                         "bundled: its licence does not allow it); a confirmation set, not used to choose the rule")
    ap.add_argument("--output", default=None)
    args = ap.parse_args(argv)
    t0 = time.time()
    rows = []
    COLUMNS[0] = args.columns
    if args.lam:
        SETS["lambda"] = (str(Path(args.lam).resolve()), None)
    for name in ([] if args.skip_folds else args.sets.split(",")):
        rows += run(name, args.methods.split(","), args.folds)
    few = []
    if args.counts:
        counts = [int(c) for c in args.counts.split(",")]
        for name in args.sets.split(","):
            few += few_runs(name, args.methods.split(","), counts, args.repeats)
    table = pd.DataFrame(rows)
    flags = (f" --counts {args.counts} --repeats {args.repeats}" if args.counts else "") + (
        f" --columns {args.columns}" if args.columns != "all" else "") + (" --skip-folds" if args.skip_folds else "") + (
        " --lambda PATH" if args.lam else "")
    text = (f"# python benchmarks/own_runs.py --methods {args.methods} --sets {args.sets} --folds {args.folds}{flags}\n"
            f"# {args.folds}-fold over each set's configurations; 90% intervals; per-step time; "
            f"{time.time() - t0:.0f} s\n")
    if rows:
        text += (table.drop(columns="kinds").to_string(index=False, float_format=lambda v: f"{v:.3g}") + "\n"
                 + "\n".join(f"{r['set']} / {r['training']} / {r['method']}: kinds {r['kinds']}" for r in rows) + "\n")
    if few:
        text += (f"\n# Section 2: {args.counts} own runs (one per configuration, drawn {args.repeats} times); every "
                 "run of the other configurations predicted\n"
                 + pd.DataFrame(few).drop(columns="kinds").to_string(index=False, float_format=lambda v: f"{v:.3g}")
                 + "\n")
    print(text)
    if args.output:
        Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
