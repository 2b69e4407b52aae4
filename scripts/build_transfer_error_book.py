"""Build src/perfmodel/data/transfer_error_book.json: what the bundled GPU runs' fits miss on a set they never saw.

The bundled GPU history (:data:`perfmodel.history.BUNDLED_HISTORIES` ``"gpu"``) is MLPerf Training: a handful of
benchmark models, tuned by their submitters. A user's job is a model of their own, on their own framework and
cluster: a new *set*. Its errors are larger than the MLPerf runs' own cross-validation says (their scores hold out
a device type or a model *within* MLPerf's tuned submissions), so the interval of such an answer is at least
what the same fits missed on whole public sets of other publishers:

* every public set bundled with the package that the GPU history does not hold (NeuSight, LLM Foundry,
  Megatron-Bridge, torchtitan, BigScience: ``BOOK_SETS``), each row asked of the ``gpu`` history with the
  columns its publisher states (model, family, parameters, FLOPs per sample, batch, device count and type,
  precision) and its model named as one the runs lack (``unseen/<model>``): the answer a user gets out of the box;
* the absolute log error of each answer kept under its kind of query (:mod:`perfmodel.kinds`: ``new_model``, or
  ``new_device`` for a device type or a precision the runs lack), every set weighing the same
  (:func:`perfmodel.models.balanced_scores`); a set enters a kind with at least ``MIN_SET_ROWS`` rows of it, and a
  kind has an entry of its own with at least two sets (else the book's kinds pooled: every row of them);
* the scales of a stack shift (``shift``: the variance of the sets' own shifts and of their rows around them),
  the prior of :class:`perfmodel.models.StackShift`, which shifts the bundled answer by a caller's own runs.

:func:`perfmodel.models.transfer_floor` gives these entries to every fit whose runs include the bundled MLPerf
runs (``applies_to``); such a fit's interval for a model its runs lack is then at least the book's quantile for
the row's kind (its own conformity scores may widen it). ``benchmarks/transfer_intervals.py`` measures what that
does, each set held out of the book in turn. Rebuild after changing the GPU fits, the sets or the kinds::

    python scripts/build_transfer_error_book.py [--check]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "perfmodel" / "data" / "transfer_error_book.json"
#: The public sets whose errors make the book: bundled with the package, not part of the ``gpu`` history.
BOOK_SETS = ("public_neusight.csv", "public_llmfoundry.csv", "public_megatron_bridge.csv", "public_torchtitan.csv",
             "public_bigscience.csv")
#: What each query states: the columns a publisher's table gives for a job (where the set has them).
QUERY_COLUMNS = ("model", "family", "params", "flops_per_sample", "batch_size", "grad_accum", "gpu_count", "gpu_type",
                 "precision", "fp32_mode")
#: The kinds the book has entries for: a model the bundled runs lack, on a device type (or at a precision) they
#: have or lack.
BOOK_KINDS = ("new_model", "new_device")
#: The fewest rows of a kind a set needs to enter that kind's entry (every set weighs the same, so a set of three
#: rows would weigh as much as one of two hundred).
MIN_SET_ROWS = 10
#: The runs the book is about: fits on histories holding them get its floor.
APPLIES_TO = ("bundled:mlperf_steps.csv",)


def queries(runs: pd.DataFrame, columns=QUERY_COLUMNS) -> pd.DataFrame:
    """A set's runs as the queries a user would ask: the stated ``columns`` (where the set has them), a whole
    per-device batch, the model named as one the bundled runs lack; beside them the measured ``step_time_s``."""
    runs = runs.loc[np.isclose(runs["batch_size"], np.round(runs["batch_size"]))].reset_index(drop=True)
    q = runs[[c for c in columns if c in runs.columns]].copy()
    q["model"] = "unseen/" + q["model"].astype(str)
    q["steps"] = 1
    q["step_time_s"] = runs["step_time_s"].to_numpy(dtype=float)  # the measured time, dropped before asking
    return q


def set_errors(files=BOOK_SETS, history="gpu") -> pd.DataFrame:
    """Every row of ``files`` asked of ``history`` (method ``auto``): one row per query with ``set``,
    ``query_kind``, the answer, its 90% interval (as the package gives it now) and ``log_error`` =
    log(predicted / measured)."""
    import perfmodel
    from perfmodel.datasets import bundled_runs_path
    from perfmodel.io import load_runs

    out = []
    for file in files:
        path = Path(file) if Path(file).is_file() else bundled_runs_path(file)
        q = queries(load_runs(path))
        y = q.pop("step_time_s").to_numpy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = perfmodel.predict_many(q, history=history)
        out.append(pd.DataFrame({"set": Path(file).name, "model": q["model"].to_numpy(), "query_kind": p["query_kind"],
                                 "measured": y, "predicted": p["step_time_s"].to_numpy(),
                                 "lower": p["step_lower"].to_numpy(), "upper": p["step_upper"].to_numpy(),
                                 "interval_rule": p["interval_rule"].to_numpy()}))
    frame = pd.concat(out, ignore_index=True)
    frame["log_error"] = np.log(frame["predicted"] / frame["measured"])
    return frame


def book_from(errors: pd.DataFrame, sets) -> dict:
    """The book's ``entries`` and ``summary`` from the errors of ``sets`` (their names in ``errors["set"]``)."""
    from perfmodel.models import balanced_scores

    errors = errors.loc[errors["set"].isin(list(sets))]
    entries, summary = {}, {}
    for name, part in errors.groupby("set", sort=True):
        summary[name] = {"rows": int(len(part)),
                         "median_ape": round(float(np.median(np.abs(np.expm1(part["log_error"])))) * 100, 2),
                         "median_log_error": round(float(np.median(part["log_error"])), 4),
                         "kinds": {k: int(v) for k, v in part["query_kind"].value_counts().sort_index().items()}}
    def entry(part: pd.DataFrame, label: str) -> dict | None:
        counts = part["set"].value_counts()
        used = sorted(counts.index[counts >= MIN_SET_ROWS])
        if len(used) < 2:
            return None
        part = part.loc[part["set"].isin(used)]
        scores = balanced_scores(part["log_error"].abs().to_numpy(), part["set"].to_numpy())
        return {"name": f"the transfer book's {label} band (errors on {len(used)} unseen public sets; "
                        "data/transfer_error_book.json)",
                "sets": used, "scores": [round(float(v), 6) for v in np.sort(scores)]}

    # the scales of a stack shift (perfmodel.models.StackShift): how far whole sets sit from the answers
    # (between: the mean square of each set's median log error) and how far a set's rows scatter around its own
    # (within: the mean of each set's squared 1.4826 MAD), each set weighing the same
    sized = [part["log_error"].to_numpy() for _, part in errors.groupby("set", sort=True) if len(part) >= MIN_SET_ROWS]
    shift = None
    if len(sized) >= 2:
        shift = {"between_var": round(float(np.mean([np.median(e) ** 2 for e in sized])), 6),
                 "within_var": round(float(np.mean([(1.4826 * np.median(np.abs(e - np.median(e)))) ** 2
                                                    for e in sized])), 6),
                 "sets": len(sized)}
    pooled = entry(errors.loc[errors["query_kind"].isin(BOOK_KINDS)], "pooled")
    for kind in BOOK_KINDS:
        # a kind with too few sets of its own takes the errors of every kind pooled (each set weighing the same)
        own = entry(errors.loc[errors["query_kind"] == kind], kind.replace("_", "-"))
        if own is not None or pooled is not None:
            entries[kind] = own if own is not None else pooled
    return {"entries": entries, "summary": summary, **({"shift": shift} if shift is not None else {})}


def build() -> dict:
    import perfmodel
    from perfmodel.fitting import DEFAULT_METHOD

    errors = set_errors()
    book = {"format": 1, "method": DEFAULT_METHOD, "history": "gpu", "perfmodel": perfmodel.__version__,
            "applies_to": list(APPLIES_TO), "sets": list(BOOK_SETS), "min_set_rows": MIN_SET_ROWS}
    book.update(book_from(errors, BOOK_SETS))
    return book


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed book differs; write nothing")
    args = ap.parse_args(argv)
    book = build()
    for name, s in book["summary"].items():
        print(f"{name}: {s['rows']} rows {s['kinds']}, median APE {s['median_ape']:.1f}%, "
              f"median log(pred/measured) {s['median_log_error']:+.2f}")
    from perfmodel.models import conformal_quantile

    for key, entry in book["entries"].items():
        scores = np.asarray(entry["scores"])
        print(f"{key}: from {', '.join(entry['sets'])}; 90% half-width x{np.exp(conformal_quantile(scores, 0.9)):.2f} "
              f"(median |log error| {np.median(scores):.3f})")
    from build_layout_error_book import write_or_check  # scripts/, beside this one

    return write_or_check(book, OUT, args.check)


if __name__ == "__main__":
    sys.exit(main())
