"""Build src/perfmodel/data/layout_error_book.json: the errors the layout model makes on a published set it never saw.

The bundled LLM history (:data:`perfmodel.history.BUNDLED_HISTORIES` ``"llm"``) is several public sets, each one
framework on one kind of cluster (NVIDIA Megatron-Bridge, MosaicML LLM Foundry, torchtitan, BigScience's
Megatron-DeepSpeed). A user's job runs on another framework and cluster: a new *set*. So the interval of an answer
from the bundled history is at least what the model missed when a whole set was held out:

* ``bundled``: each set held out in turn, the layout model fitted on the others exactly as the bundled fit is
  (:class:`perfmodel.models.TrainingTimeModel`, method ``layout``), and the held-out set's absolute log errors kept, every
  set weighing the same (:func:`perfmodel.models.balanced_scores`);
* ``bundled/unstated_shape``: the same, out of the box (``predict_many`` with no history, the set left out of the
  bundled LLM history), for its rows asked by the model's size alone (no shape, sequence or layout): the standard
  shape, the sequence its FLOPs imply and the default layout stand in for what was not said, and miss more;
* ``within_job``: for every two rows of one held-out job (model, sequence, global batch, devices, device type,
  precision, and where a set states them its release and precision recipe) whose layouts differ, every job
  weighing the same, the difference of their log errors under the same fits: how far apart the
  model's errors on two layouts of one job lie, so how close two predicted steps can be before the model cannot
  tell which is faster (:func:`perfmodel.models.layout_tie_factor`; the layout search marks such layouts);
* ``calibrated/<k>``: the same, after calibrating the fit on ``k`` runs of the held-out set (k = 1, 3, 9; the
  model's coefficients as the prior, :class:`perfmodel.models.LayoutRegressor`), predicting its other runs; the
  ``k`` runs drawn at random, ``--repeats`` times.

:class:`perfmodel.predict.BasePredictor` gives layout answers from the bundled history at least the ``bundled``
interval (``bundled/unstated_shape`` where the query states no shape), and answers calibrated on ``n`` own runs at
least the ``calibrated`` interval of the largest ``k <= n`` (their own conformity scores may widen it). Rebuild after changing the layout model or the LLM sets::

    python scripts/build_layout_error_book.py [--repeats 20] [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "perfmodel" / "data" / "layout_error_book.json"
KS = (1, 3, 9)
#: The entry for a decoder given by its size alone (no shape, sequence or layout stated), and what such a query
#: states.
UNSTATED = "bundled/unstated_shape"
#: The fewest such rows a set needs to enter that entry.
MIN_SET_ROWS = 10
#: The entry of the error differences between two layouts of one job (:func:`layout_pair_differences`), the
#: columns that make a job, and those that make its layout.
WITHIN_JOB = "within_job"
JOB_COLUMNS = ("model", "seq_len", "global_batch_size", "gpu_count", "gpu_type", "precision", "release",
               "precision_reported")  # the last two where a set has them: another release or recipe is not a layout
LAYOUT_KEYS = ("tp", "pp", "vp", "cp", "ep", "micro_batch_size", "zero_stage", "recompute", "sequence_parallel")
UNSTATED_COLUMNS = ("model", "family", "params", "flops_per_sample", "batch_size", "grad_accum", "gpu_count",
                    "gpu_type", "precision")


def build(repeats: int) -> dict:
    import perfmodel
    from perfmodel.datasets import bundled_runs_path
    from perfmodel.history import BUNDLED_HISTORIES
    from perfmodel.io import load_runs
    from perfmodel.layout import is_layout_job
    from perfmodel.models import CALIBRATION_PRIOR_WEIGHT, TrainingTimeModel, balanced_scores

    sets = {}
    for file in BUNDLED_HISTORIES["llm"]:
        runs = load_runs(bundled_runs_path(file))
        sets[file] = runs.loc[is_layout_job(runs)].reset_index(drop=True)
    rng = np.random.default_rng(0)
    errs = {"bundled": ([], []), WITHIN_JOB: ([], [])} | {f"calibrated/{k}": ([], []) for k in KS}
    summary = {}
    for name, test in sets.items():
        train = [r for n, r in sets.items() if n != name]
        import pandas as pd

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            base = TrainingTimeModel(method="layout", conformal=False).fit(
                pd.concat(train, ignore_index=True, sort=False))
        y = test["step_time_s"].to_numpy(dtype=float)
        ratio = base.predict(test) / y
        e = np.abs(np.log(ratio))
        errs["bundled"][0].extend(e)
        errs["bundled"][1].extend([name] * len(e))
        summary[name] = {"rows": int(len(test)), "bundled_median_ape": float(np.median(np.abs(ratio - 1)) * 100)}
        pairs, jobs = layout_pair_differences(test, np.log(ratio))
        summary[name]["within_job_pairs"] = int(len(pairs))
        summary[name]["within_job_jobs"] = int(len(np.unique(jobs)))
        if len(pairs) >= MIN_SET_ROWS:  # a few pairs would weigh as much as hundreds
            errs[WITHIN_JOB][0].extend(pairs)
            errs[WITHIN_JOB][1].extend(f"{name}|{j}" for j in jobs)  # every job weighs the same
        prior = dict(base.pipeline_.named_steps["regressor"].coef_)
        for k in KS:
            cal_errs = []
            for _ in range(repeats):
                pick = rng.choice(len(test), size=k, replace=False)
                rest = np.setdiff1d(np.arange(len(test)), pick)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    cal = TrainingTimeModel(method="layout", conformal=False, regressor_params={"prior": prior,
                                                                                  "prior_weight": CALIBRATION_PRIOR_WEIGHT})
                    cal.fit(test.iloc[pick].reset_index(drop=True))
                cal_errs.append(cal.predict(test.iloc[rest]) / y[rest])
            ratio = np.concatenate(cal_errs)
            e = np.abs(np.log(ratio))
            errs[f"calibrated/{k}"][0].extend(e)
            errs[f"calibrated/{k}"][1].extend([name] * len(e))
            summary[name][f"calibrated_{k}_median_ape"] = float(np.median(np.abs(ratio - 1)) * 100)
    errs[UNSTATED] = ([], [])
    for name, (e, n_rows, ape) in unstated_shape_errors().items():
        summary[name].update(unstated_shape_rows=n_rows, unstated_shape_median_ape=ape)
        if n_rows < MIN_SET_ROWS:  # every set weighs the same: a handful of rows would weigh as much as hundreds
            continue
        errs[UNSTATED][0].extend(e)
        errs[UNSTATED][1].extend([name] * len(e))
    book = {"format": 1, "method": "layout", "perfmodel": perfmodel.__version__, "sets": list(sets),
            "repeats": repeats, "summary": summary, "entries": {}}
    for key, (e, groups) in errs.items():
        scores = balanced_scores(np.asarray(e), np.asarray(groups))
        what = {"bundled": "bundled", UNSTATED: "bundled, the model given by its size alone"}.get(
            key, key.replace("/", " on ") + " own runs")
        name = (f"the layout model's errors on an unseen published set ({what}; data/layout_error_book.json)"
                if key != WITHIN_JOB else "the difference of the layout model's errors on two layouts of one job "
                "of an unseen published set (data/layout_error_book.json)")
        book["entries"][key] = {"name": name, "scores": [round(float(v), 6) for v in np.sort(scores)]}
    return book


def layout_pair_differences(runs, log_ratio) -> tuple[np.ndarray, np.ndarray]:
    """``|e_i − e_j|`` for every pair of rows of one job (:data:`JOB_COLUMNS` equal) whose layouts differ, ``e``
    the log of predicted over measured step time: how far apart two layouts' errors lie, the resolution of a
    ranking of layouts (a shared error, the framework's level, cancels); and each pair's job (a number), so that
    every job can weigh the same (its pairs grow with the square of its layouts)."""

    frame = runs.assign(_e=np.asarray(log_ratio, dtype=float))
    layout = [c for c in LAYOUT_KEYS if c in frame.columns]
    frame["_layout"] = frame[layout].apply(lambda c: c.map(str)).agg("|".join, axis=1)
    out, jobs = [], []
    for n, (_, g) in enumerate(frame.groupby([c for c in JOB_COLUMNS if c in frame.columns], dropna=False)):
        g = g[np.isfinite(g["_e"])]
        e, lay = g["_e"].to_numpy(), g["_layout"].to_numpy()
        i, j = np.triu_indices(len(g), 1)
        keep = lay[i] != lay[j]  # repeats of one layout measure the runs' noise, not the ranking
        out.append(np.abs(e[i] - e[j])[keep])
        jobs.append(np.full(int(keep.sum()), n))
    if not out:
        return np.array([]), np.array([], dtype=int)
    return np.concatenate(out), np.concatenate(jobs)


def unstated_shape_errors() -> dict:
    """Per set: the absolute log errors of the answers out of the box (``predict_many``, no history) with that set
    left out of the bundled LLM history, to its rows asked as a user who knows the model only by its size would
    (``UNSTATED_COLUMNS``: no shape, no sequence length, no layout; the model named as one the runs lack); only
    the rows the layout model answers (dense decoders: their sequence is implied by their FLOPs, their shape is
    the standard one for their size, their layout the default). Also the row count and median APE."""
    from build_transfer_error_book import queries  # scripts/, beside this one

    from perfmodel import history as hist
    from perfmodel.datasets import bundled_runs_path
    from perfmodel.io import load_runs
    from perfmodel.predict import BasePredictor

    full = hist.BUNDLED_HISTORIES["llm"]
    out = {}
    try:
        for name in full:
            hist.BUNDLED_HISTORIES["llm"] = tuple(f for f in full if f != name)  # the set unseen
            q = queries(load_runs(bundled_runs_path(name)), UNSTATED_COLUMNS)
            measured = q.pop("step_time_s").to_numpy()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p = BasePredictor(None, method="auto").predict_many(q)
            layout = (p["method"] == "layout").to_numpy()
            ratio = p["step_time_s"].to_numpy()[layout] / measured[layout]
            out[name] = (np.abs(np.log(ratio)), int(layout.sum()),
                         float(np.median(np.abs(ratio - 1)) * 100) if layout.any() else None)
    finally:
        hist.BUNDLED_HISTORIES["llm"] = full
    return out


def same_book(a, b, tol: float = 1e-4) -> bool:
    """The same book up to float noise of the last printed digit (fits differ by ~1e-9 across BLAS builds)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_book(a[k], b[k], tol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_book(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= tol * max(1, abs(a))
    return a == b


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20, help="random draws of the k calibration runs per set")
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed book differs; write nothing")
    args = ap.parse_args(argv)
    book = build(args.repeats)
    for name, s in book["summary"].items():
        print(f"{name}: " + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in s.items()))
    for key, entry in book["entries"].items():
        scores = np.asarray(entry["scores"])
        print(f"{key}: 90% half-width x{np.exp(np.quantile(scores, 0.9)):.2f} (median |log error| "
              f"{np.median(scores):.3f})")
    return write_or_check(book, OUT, args.check)


def write_or_check(book: dict, out: Path, check: bool) -> int:
    """Write ``book`` to ``out`` (sorted JSON), or with ``check`` only compare it with the committed one (up to float
    noise): the exit status of both builders."""
    text = json.dumps(book, indent=1, sort_keys=True) + "\n"
    if check:
        same = out.is_file() and same_book(json.loads(out.read_text()), json.loads(text))
        print("up to date" if same else f"{out.relative_to(ROOT)} is stale: rebuild it")
        return 0 if same else 1
    out.write_text(text)
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
