"""Intervals off the table (issue #36 item 1): what the transfer error book does to answers on sets never seen.

The bundled GPU history is MLPerf's tuned submissions of five benchmark models. A user's model, framework and
cluster are a set it never saw. ``scripts/build_transfer_error_book.py`` records what the fits on it missed on the
public sets bundled beside it (NeuSight, LLM Foundry, Megatron-Bridge, torchtitan, BigScience), per kind of query;
:func:`perfmodel.models.transfer_floor` makes that the least interval of an answer for a model those runs lack.

For each development set (the book's sets), its rows asked as a user would (the columns its publisher states, the
model named as one the runs lack; :func:`build_transfer_error_book.queries`), with 90% intervals:

* ``no book``: the intervals of the fits' own conformity scores (what the package gave before the book);
* ``book without this set``: leave-one-set-out, the book rebuilt from the other sets: the honest figure;
* ``shipped book``: the book as shipped, this set inside it (in-sample, for reference);
* baseline ``const-MFU``: the bundled GPU history's median model-FLOPs utilisation at each row's own peak (point
  only).

Section 1 asks the ``gpu`` history (every row a generic answer, which the transfer book is about). Mind two things:
only two sets have ``new_device`` rows (NeuSight, Megatron-Bridge), so with either held out that kind falls back to
the book's pooled entry (every kind's errors), which is wider than the shipped ``new_device`` entry; and three of the
four sets with ``new_model`` rows are decoders, which out of the box go to the layout model (section 2), so the
generic path out of the box serves mostly other models, and the Lambda confirmation (CNNs, BERT) is its check.

Section 2: decoders given by their size alone, out of the box, each LLM set left out of the bundled LLM history in
turn: the layout book's ``bundled`` entry alone (before) against its ``unstated_shape`` entry rebuilt without the set.

Section 4 (item 6's protocol, for a history of one's own): each set predicted from a history made of all the other
sets (a DataFrame, so no book floors it): what the runs' own scores give when the set is another publisher's.

Confirmation: Lambda's PyTorch throughputs (``--lambda PATH``, or built from ``$PERFMODEL_MIRRORS``, as in
``benchmarks/precision_transfer.py``; not committed, the source has no licence), with the shipped book; nothing was
chosen on it for this book (it was looked at in earlier work on precision transfer).

Usage::

    python benchmarks/transfer_intervals.py [--lambda PATH] [--out benchmarks/results/transfer_intervals]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
from _paths import ROOT, rel  # benchmarks/_paths.py (the scripts run from benchmarks/)

sys.path.insert(0, str(ROOT / "scripts"))
import build_layout_error_book as L  # noqa: E402  (scripts/, beside benchmarks/)
import build_transfer_error_book as B  # noqa: E402
from precision_transfer import const_mfu, lambda_runs  # noqa: E402

from perfmodel.evaluate import AnalyticBaseline  # noqa: E402

CONFIDENCE = 0.9


@contextmanager
def book(entries: dict | None, layout_entries: dict | None = None):
    """Answers read a transfer book with these ``entries`` ({} or None: no book), and the layout book with
    ``layout_entries`` (None: the shipped one), while the block runs (``$PERFMODEL_DATA`` names a folder holding
    them, searched before the package's data)."""
    before = os.environ.get("PERFMODEL_DATA")
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, B.OUT.name).write_text(json.dumps({**json.loads(B.OUT.read_text()), "entries": entries or {}}))
        if layout_entries is not None:
            Path(tmp, L.OUT.name).write_text(json.dumps({**json.loads(L.OUT.read_text()), "entries": layout_entries}))
        os.environ["PERFMODEL_DATA"] = tmp
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("PERFMODEL_DATA", None)
            else:
                os.environ["PERFMODEL_DATA"] = before


def cell(e: pd.DataFrame) -> dict:
    y, p, lo, hi = (e[c].to_numpy(dtype=float) for c in ("measured", "predicted", "lower", "upper"))
    return {"rows": int(len(e)), "median_ape": round(float(np.median(np.abs(p / y - 1)) * 100), 1),
            "coverage": round(float(np.mean((y >= lo) & (y <= hi))), 3),
            "half_width": round(float(np.median(hi / p)), 2),
            "kinds": {k: int(v) for k, v in e["query_kind"].value_counts().sort_index().items()}}


def one_set(file, history, shipped_entries: dict, errors_all: pd.DataFrame | None) -> dict:
    name = Path(file).name
    with book(None):
        base = B.set_errors([file], history)
    out = {"no book": cell(base)}
    if errors_all is not None:
        loso = B.book_from(errors_all, [s for s in B.BOOK_SETS if s != name])["entries"]
        with book(loso):
            out["book without this set"] = cell(B.set_errors([file], history))
    with book(shipped_entries):
        out["shipped book" + (" (in-sample)" if errors_all is not None else "")] = cell(B.set_errors([file], history))
    q = B.queries(pd.read_csv(file) if Path(file).is_file() else _bundled(file))
    y = q["step_time_s"].to_numpy(dtype=float)
    point = const_mfu(q.drop(columns="step_time_s"))
    ok = np.isfinite(point)
    out["baseline: const-MFU (point)"] = {"rows": int(ok.sum()),
                                         "median_ape": round(float(np.median(np.abs(point[ok] / y[ok] - 1)) * 100), 1)}
    return out


def shapeless() -> dict:
    """Decoders given by their size alone, out of the box, each LLM set left out of the bundled LLM history in
    turn: the layout book's ``bundled`` entry alone (before the ``unstated_shape`` entry) against the
    ``unstated_shape`` entry rebuilt without the set (leave-one-set-out)."""
    from perfmodel import history as hist
    from perfmodel.models import balanced_scores
    from perfmodel.predict import BasePredictor

    shipped = json.loads(L.OUT.read_text())["entries"]
    errors = L.unstated_shape_errors()
    full = hist.BUNDLED_HISTORIES["llm"]
    out = {}
    try:
        for name in full:
            if errors[name][1] == 0:
                continue
            others = [n for n in full if n != name and errors[n][1] >= L.MIN_SET_ROWS]
            e = np.concatenate([errors[n][0] for n in others])
            g = np.concatenate([[n] * len(errors[n][0]) for n in others])
            loso = {**shipped["bundled/unstated_shape"], "scores": np.sort(balanced_scores(e, g)).tolist()}
            hist.BUNDLED_HISTORIES["llm"] = tuple(f for f in full if f != name)
            q = B.queries(_bundled(name), L.UNSTATED_COLUMNS)
            measured = q.pop("step_time_s").to_numpy()
            cells = {}
            for label, entries in (("bundled entry alone (before)", {"bundled": shipped["bundled"]}),
                                   ("unstated-shape entry without this set", {"bundled": shipped["bundled"],
                                                                              "bundled/unstated_shape": loso})):
                with book(json.loads(B.OUT.read_text())["entries"], entries), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    p = BasePredictor(None, method="auto").predict_many(q)
                rows = (p["method"] == "layout").to_numpy()
                cells[label] = cell(_answers(measured, p).loc[rows])
            six = AnalyticBaseline(0.4).fit(q.iloc[:1], y=measured[:1]).predict_interval(q.loc[rows])["step_time_s"]
            cells["baseline: 6ND at 0.4 MFU (point)"] = {
                "rows": int(rows.sum()), "median_ape": round(float(np.median(np.abs(six / measured[rows] - 1)) * 100), 1)}
            out[name] = cells
    finally:
        hist.BUNDLED_HISTORIES["llm"] = full
    return out


def public_history(lambda_runs: pd.DataFrame | None) -> dict:
    """Leave-one-set-out with a history made of the other public sets (as a DataFrame: a history of one's own,
    which no book floors): each development set, and Lambda where given, predicted from all the other
    development sets' runs."""
    import perfmodel

    files = ("mlperf_steps.csv", *B.BOOK_SETS)
    sets = {f: _bundled(f) for f in files}
    out = {}
    targets = dict(sets) | ({"Lambda (confirmation)": lambda_runs} if lambda_runs is not None else {})
    for name, runs in targets.items():
        history = pd.concat([r for f, r in sets.items() if f != name], ignore_index=True, sort=False)
        q = B.queries(runs)
        measured = q.pop("step_time_s").to_numpy()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p = perfmodel.predict_many(q, history=history)
        except (ValueError, TypeError) as exc:
            out[name] = {"refused": " ".join(str(exc).split())[:240], "rows": int(len(q))}
            continue
        frame = _answers(measured, p)
        out[name] = {"history of the other sets (no book)": cell(frame)} | {
            f"  of which {k}": cell(part) for k, part in frame.groupby("query_kind")}
    return out


def _answers(measured: np.ndarray, p: pd.DataFrame) -> pd.DataFrame:
    """Measured times beside ``predict_many``'s answers, as :func:`cell` reads them."""
    return pd.DataFrame({"measured": measured, "predicted": p["step_time_s"].to_numpy(),
                         "lower": p["step_lower"].to_numpy(), "upper": p["step_upper"].to_numpy(),
                         "query_kind": p["query_kind"].to_numpy()})


def _bundled(file) -> pd.DataFrame:
    from perfmodel.datasets import bundled_runs_path
    from perfmodel.io import load_runs

    return load_runs(bundled_runs_path(file))


def table(title: str, res: dict) -> list[str]:
    lines = [f"## {title}", "", "| set | intervals | rows | median APE % | 90% coverage | median upper/point | kinds |",
             "|---|---|---|---|---|---|---|"]
    for name, cells in res.items():
        for label, c in cells.items():
            lines.append(f"| {name} | {label} | {c['rows']} | {c['median_ape']} | {c.get('coverage', '—')} | "
                         f"{'×' + str(c['half_width']) if 'half_width' in c else '—'} | "
                         f"{', '.join(f'{k} {v}' for k, v in c.get('kinds', {}).items()) or '—'} |")
    return lines + [""]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lambda", dest="lam", help="Lambda's runs (scripts/derive_public_lambda.py output)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "transfer_intervals"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    shipped = json.loads(B.OUT.read_text())
    with book(None):
        errors_all = B.set_errors(B.BOOK_SETS, "gpu")
    res = {file: one_set(file, "gpu", shipped["entries"], errors_all) for file in B.BOOK_SETS}
    unstated = shapeless()
    lam, how = lambda_runs(args.lam)
    public = public_history(lam)
    confirm = {}
    if lam is not None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, "public_lambda.csv")
            lam.to_csv(path, index=False)
            confirm["Lambda (out of the box)"] = one_set(str(path), None, shipped["entries"], None)
    lines = ["# Intervals off the table: the error books (benchmarks/transfer_intervals.py)", "",
             "90% intervals. median upper/point: the interval's upper end over the answer (the band is symmetric "
             "in log: the lower end is the answer over the same factor). Leave-one-set-out rows rebuild the book "
             "without the set they predict. Every row's model is named as one the runs lack. Only NeuSight and "
             "Megatron-Bridge have new-device rows: with either held out, that kind takes the book's pooled entry "
             "(wider than the shipped new-device one). Three of the four sets with new-model rows are decoders, "
             "which out of the box go to the layout model (section 2): the Lambda confirmation (CNNs, BERT) is the "
             "check of the generic path as users meet it.", ""]
    lines += table(f"1. Generic answers (the gpu history) and the transfer book ({rel(B.OUT)})", res)
    lines += table(f"2. Decoders given by their size alone, out of the box, the set left out of the bundled LLM "
                   f"history: the layout book's unstated-shape entry ({rel(L.OUT)})", unstated)
    if confirm:
        lines += table(f"3. Confirmation: Lambda ({how}), shipped books", confirm)
    else:
        lines += [f"3. Confirmation: Lambda {how}", ""]
    lines += table("4. Leave-one-set-out with a history of the other public sets (a DataFrame: a history of "
                   "one's own, not floored by any book; what its own scores give across sets)",
                   {k: v for k, v in public.items() if "refused" not in v})
    lines += [f"- {k}: {v['rows']} rows refused: {v['refused']}" for k, v in public.items() if "refused" in v]
    lines.append("")
    lines.append(f"Wall time {time.perf_counter() - t0:.0f} s.")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    Path(args.out + ".json").write_text(json.dumps({"development": res, "unstated_shape": unstated,
                                                    "public_history": public,
                                                    "confirmation": confirm,
                                                    "confirmation_source": how}, indent=1) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
