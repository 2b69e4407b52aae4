"""The error books: the least interval of an answer whose runs never saw the user's set. The one owner of the concept.

A fit's own conformity scores (:mod:`perfmodel.models._conformal`) hold out a device type or a model *within* the
runs it learned from. When those runs are perfmodel's bundled public sets, the user's job is a set they never saw
(another framework, another cluster, a model of one's own), and the answer misses by more than those scores say.
Two books, package data built by scripts in ``scripts/``, record what the same fits missed on whole public sets of
other publishers:

* the **layout book** (:data:`LAYOUT_BOOK`, ``scripts/build_layout_error_book.py``): the layout model's errors
  on a published LLM set it never saw, out of the box (``bundled``; a decoder given by its size alone:
  :data:`UNSTATED_SHAPE`) and calibrated on ``k`` of its runs (``calibrated/<k>``), and how far apart its errors
  on two layouts of one job lie (:data:`WITHIN_JOB`: :func:`layout_tie_factor`);
* the **transfer book** (:data:`TRANSFER_BOOK`, ``scripts/build_transfer_error_book.py``): the errors of the fits
  on the bundled GPU runs (MLPerf) on other publishers' sets, per kind of query, for models those runs lack.

:meth:`perfmodel.models.TrainingTimeModel.predict_interval` asks :func:`floor_for` which entries bound a fitted
model's answers. It decides from what the model is (its ``method``, ``provenance_`` — the labels of the runs it
learned from — and ``calibration_runs_``), at prediction time, so a saved model follows the installed books and
the same fit gives one answer whichever entry point asks. A history of the caller's own runs alone has no floor:
its scores are about its own set.
"""

from __future__ import annotations

import json

__all__ = ["LAYOUT_BOOK", "TRANSFER_BOOK", "UNSTATED_SHAPE", "WITHIN_JOB", "read_error_book", "layout_floor",
           "transfer_floor", "floor_for", "layout_tie_factor"]

#: The layout model's error book (scripts/build_layout_error_book.py).
LAYOUT_BOOK = "layout_error_book.json"
#: The layout book's entry for a query that states no shape (the standard shape of its size stands in).
UNSTATED_SHAPE = "bundled/unstated_shape"
#: The layout book's entry of the differences between the model's errors on two layouts of one job.
WITHIN_JOB = "within_job"
#: The transfer error book (scripts/build_transfer_error_book.py).
TRANSFER_BOOK = "transfer_error_book.json"
#: Label prefix of a history part that is perfmodel's bundled data (:data:`perfmodel.history.BUNDLED_PREFIX`).
_BUNDLED = "bundled:"
_BOOKS: dict = {}


def read_error_book(name: str) -> dict | None:
    """An error book shipped with the package, read once per file.

    Parameters
    ----------
    name : str
        Its file name in the bundled data folder: :data:`LAYOUT_BOOK` or :data:`TRANSFER_BOOK`.

    Returns
    -------
    dict or None
        The book (``entries``, ``sets``, ``summary`` and how it was built), or None when it is not installed or
        unreadable (answers then keep the intervals of their own scores).
    """
    from ..datasets import bundled_runs_path

    try:
        path = str(bundled_runs_path(name))
    except FileNotFoundError:
        return None
    if path not in _BOOKS:
        try:
            with open(path, encoding="utf-8") as fh:
                book = json.load(fh)
        except (OSError, ValueError):
            return None
        if not isinstance(book, dict) or not isinstance(book.get("entries"), dict):
            return None
        _BOOKS[path] = book
    return _BOOKS[path]


def layout_floor(own_runs: int | None) -> dict | None:
    """The least interval a layout answer gets: the errors of the layout model on an unseen published set.

    Parameters
    ----------
    own_runs : int or None
        How many of the caller's own runs (distinct jobs) calibrated the answer (None or 0: the bundled LLM
        history's fit).

    Returns
    -------
    dict or None
        ``{"name": ..., "scores": [...]}``: the book's ``bundled`` entry (with its ``unstated_shape`` entry, for
        rows that state no shape: a decoder given by its size alone), or the ``calibrated/<k>`` entry of the
        largest ``k <= own_runs``; None when the book is not installed.
    """
    book = read_error_book(LAYOUT_BOOK)
    if book is None:
        return None
    entries = book["entries"]
    if not own_runs:
        bundled = entries.get("bundled")
        if bundled is not None and entries.get(UNSTATED_SHAPE) is not None:
            bundled = {**bundled, "unstated_shape": entries[UNSTATED_SHAPE]}
        return bundled
    ks = sorted(int(k.split("/")[1]) for k in entries if k.startswith("calibrated/"))
    usable = [k for k in ks if k <= own_runs]
    return entries.get(f"calibrated/{usable[-1]}") if usable else entries.get("bundled")


def transfer_floor(provenance) -> dict | None:
    """The least interval a fit on the bundled GPU runs gives a model they lack: the transfer error book.

    Parameters
    ----------
    provenance : list of str
        The labels of the runs a fit learned from (``TrainingTimeModel.provenance_``).

    Returns
    -------
    dict or None
        ``{"by_kind": {kind: {"name": ..., "scores": [...]}}}`` for a fit on runs that include the book's bundled
        files (``applies_to``), else None. A row whose model the fit's runs lack takes the widest of its kind's
        entry and the ``new_model`` entry.
    """
    from ..kinds import KIND_NAMES

    book = read_error_book(TRANSFER_BOOK)
    if book is None or not set(map(str, provenance or ())) & set(book.get("applies_to", ())):
        return None
    entries = {k: v for k, v in book["entries"].items() if k in KIND_NAMES and v.get("scores")}
    return {"by_kind": entries} if entries else None


def floor_for(method: str, provenance, calibration_runs: int | None = None) -> dict | None:
    """Which book entries bound the answers of a fitted model (None: none).

    Parameters
    ----------
    method : str
        The fitted method (``layout`` for the layout model).
    provenance : list of str
        The labels of the runs it learned from (``bundled:<file>`` for perfmodel's data).
    calibration_runs : int, optional
        For a layout model calibrated on the caller's runs: how many distinct jobs.

    Returns
    -------
    dict or None
        A layout model calibrated on own runs: :func:`layout_floor` of their count; a layout model fitted on
        bundled runs only: :func:`layout_floor` ``(0)``; any other method but ``linear`` (whose scores are
        seconds, not log ratios): :func:`transfer_floor`; else None.
    """
    labels = [str(p) for p in (provenance or ())]
    if method == "layout":
        if calibration_runs:
            return layout_floor(int(calibration_runs))
        return layout_floor(0) if labels and all(p.startswith(_BUNDLED) for p in labels) else None
    if method == "linear":
        return None
    return transfer_floor(labels)


def layout_tie_factor(confidence: float = 0.9) -> float | None:
    """How close two layouts' predicted steps can be before the layout model cannot tell which is faster.

    From the layout book's :data:`WITHIN_JOB` entry: for two layouts of one job of a published set the model never
    saw, the ratio of their predicted steps is off from the ratio of their measured steps by at most this factor in
    ``confidence`` of the cases (a split-conformal quantile of ``|log error_i − log error_j|``). A layout predicted
    within this factor of the fastest may be the faster one.

    Parameters
    ----------
    confidence : float in (0, 1), default=0.9
        The share of the book's pairs the factor covers.

    Returns
    -------
    float or None
        The factor (>= 1; infinite where the book has too few pairs for ``confidence``), or None when the book or
        its entry is not installed.

    Examples
    --------
    >>> factor = layout_tie_factor()
    >>> factor is None or factor >= 1.0
    True
    """
    import math

    from ._conformal import conformal_quantile

    book = read_error_book(LAYOUT_BOOK)
    entry = None if book is None else book["entries"].get(WITHIN_JOB)
    if not entry or not entry.get("scores"):
        return None
    return math.exp(conformal_quantile(entry["scores"], confidence))
