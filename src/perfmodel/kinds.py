"""Kinds of query: what a prediction asks of the runs it learns from. The one place the concept is defined.

A query (a configuration to predict) is compared with the runs a model learned from, and put in the first of
these kinds, from the most demanding down:

=============  ==================================================================  ==============================
kind           the query                                                           scored by refits holding out
=============  ==================================================================  ==============================
``new_device`` runs on a device type no run used, or at a precision no run used     each device type
``new_model``  is a model no run trained                                           each model
``new_pair``   a model and a device type the runs both have, never together        each (model, device type) pair
``new_count``  a known (model, device type) at a device count it has not run       each device count
``new_batch``  a known (model, device type) at a per-device batch it has not run   each batch size
``seen``       a configuration the runs have (model, device type, batch and count)  random K-fold
=============  ==================================================================  ==============================

A precision no run used (fp32 asked of a history of fp16 and bf16 runs) is a ``new_device`` query: like a device
the runs lack, it can only be carried through the datasheet (the device's peak at that precision), and the methods
and intervals chosen for device transfer answer it. A model and device type the runs have only at another
precision are a ``new_pair`` (the pair, for a query, is model, device type and precision; the refits that score
``new_pair`` hold out a model and device type at every precision together).

Model selection (``method="auto"``, :mod:`perfmodel.fitting`), prediction intervals
(:mod:`perfmodel.models._conformal`), prediction (:mod:`perfmodel.predict`) and evaluation
(:mod:`perfmodel.evaluate`) all ask this module; none defines kinds of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .hardware import resolve_gpu_type

__all__ = ["QueryKind", "KINDS", "KIND_NAMES", "TRANSFER_KINDS", "get_kind", "classify", "group_keys", "most_demanding",
           "canonical_devices", "split_name"]


@dataclass(frozen=True)
class QueryKind:
    """One kind of query.

    Parameters
    ----------
    name : str
        ``seen``, ``new_batch``, ``new_count``, ``new_pair``, ``new_model`` or ``new_device``.
    column : str or None
        What a refit holds out, one group at a time, to score this kind: a run column, ``"pair"`` (model and
        device type together), or None for random K-fold.
    description : str
        One line for documentation and messages.
    """

    name: str
    column: str | None
    description: str

    @property
    def split(self) -> str:
        """The cross-validation split that scores this kind, e.g. ``leave-one-gpu-type-out``."""
        return split_name(self.column)

    @property
    def order(self) -> int:
        """0 for ``seen`` up to 5 for ``new_device``: how much the query asks beyond the runs."""
        return KIND_NAMES.index(self.name)


def split_name(column: str | None) -> str:
    """The name of the cross-validation split that holds out ``column``.

    Parameters
    ----------
    column : str or None
        A run column (or ``"pair"``), or None for random K-fold.

    Returns
    -------
    str
        ``leave-one-<column>-out`` (underscores as hyphens: ``leave-one-gpu-type-out``), or ``random K-fold``.
    """
    return "random K-fold" if column is None else f"leave-one-{column.replace('_', '-')}-out"


#: Every kind, from the least to the most demanding.
KINDS: tuple[QueryKind, ...] = (
    QueryKind("seen", None, "a configuration the runs have: this model on this device type at this batch and count"),
    QueryKind("new_batch", "batch_size", "a known model on a known device type at a per-device batch it has not run"),
    QueryKind("new_count", "gpu_count", "a known model on a known device type at a device count it has not run"),
    QueryKind("new_pair", "pair", "a model and a device type the runs both have, but never together"),
    QueryKind("new_model", "model", "a model no run trained"),
    QueryKind("new_device", "gpu_type", "a device type no run used"),
)
KIND_NAMES: tuple[str, ...] = tuple(k.name for k in KINDS)
#: The kinds whose query transfers to a device type or a model the runs lack, or a pair they never ran: their
#: held-out groups (device types, models, pairs) are the units a method's errors come in.
TRANSFER_KINDS: tuple[str, ...] = ("new_pair", "new_model", "new_device")
_BY_NAME = {k.name: k for k in KINDS}


def get_kind(name: str) -> QueryKind:
    """The :class:`QueryKind` called ``name``.

    Parameters
    ----------
    name : str
        One of :data:`KIND_NAMES`.

    Returns
    -------
    QueryKind
        The kind of that name.

    Raises
    ------
    ValueError
        For any other name (the message lists the kinds).
    """
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(f"Unknown kind of query {name!r}; choose from {', '.join(KIND_NAMES)}.") from None


def most_demanding(kinds) -> str:
    """The most demanding of some kinds of query.

    Parameters
    ----------
    kinds : array-like of str
        Kind names (from :data:`KIND_NAMES`); repeats are fine.

    Returns
    -------
    str
        The one furthest down :data:`KIND_NAMES`; ``seen`` when ``kinds`` is empty.
    """
    names = set(np.asarray(kinds, dtype=object).tolist())
    return max(names, key=KIND_NAMES.index) if names else "seen"


def canonical_devices(values) -> np.ndarray:
    """Device names as the spec table spells them (one lookup per distinct name).

    Parameters
    ----------
    values : array-like
        Device names as written in runs or queries (read as text).

    Returns
    -------
    numpy.ndarray of object, same length as values
        The canonical name of each (:func:`perfmodel.hardware.resolve_gpu_type`); a name the spec table does
        not know stays as given (a device no run has, however it is spelled).
    """
    codes, uniq = pd.factorize(pd.Series(np.asarray(values, dtype=object)).astype(str))
    names = []
    for u in uniq:
        try:
            names.append(resolve_gpu_type(u))
        except (ValueError, TypeError):
            names.append(u)
    return np.asarray(names, dtype=object)[codes] if len(codes) else np.empty(0, dtype=object)


def _numeric_keys(values) -> np.ndarray:
    """Numbers as comparable text (2 and 2.0 devices are one group; text that is no number stays text)."""
    s = pd.Series(np.asarray(values, dtype=object))
    num = pd.to_numeric(s, errors="coerce")
    return np.where(num.notna(), num.astype(float).map(repr), s.astype(str)).astype(object)


def _text(frame: pd.DataFrame, column: str) -> np.ndarray:
    if column not in frame.columns:
        return np.full(len(frame), "\x00missing", dtype=object)
    return frame[column].astype(str).to_numpy(dtype=object)


def group_keys(runs: pd.DataFrame, kind: str | QueryKind) -> np.ndarray:
    """The group of each run that a refit scoring ``kind`` holds out together.

    ``seen`` has no groups (random K-fold): each run is its own. ``new_pair`` groups by model and device type;
    device types are compared by canonical name, batch sizes and device counts as numbers (2 and 2.0 are one).

    Parameters
    ----------
    runs : pandas.DataFrame
        The runs; needs ``gpu_type`` and the column the kind holds out (``model`` may be absent: every run
        then counts as the same model).
    kind : str or QueryKind
        The kind being scored (a name from :data:`KIND_NAMES` or the kind itself).

    Returns
    -------
    numpy.ndarray of object, shape (len(runs),)
        One group key per run.
    """
    kind = kind if isinstance(kind, QueryKind) else get_kind(kind)
    if kind.column is None:
        return np.arange(len(runs)).astype(str).astype(object)
    if kind.column == "gpu_type":
        return canonical_devices(runs["gpu_type"])
    if kind.column == "pair":
        return _pair(runs)
    if kind.column in ("batch_size", "gpu_count"):
        return _numeric_keys(runs[kind.column])
    return _text(runs, kind.column)


def _pair(frame: pd.DataFrame) -> np.ndarray:
    return np.char.add(np.char.add(_text(frame, "model").astype(str), "\x1f"),
                       canonical_devices(frame["gpu_type"]).astype(str)).astype(object)


def classify(runs: pd.DataFrame, query: pd.DataFrame) -> np.ndarray:
    """The kind of each row of ``query`` with respect to ``runs``.

    Device types are compared by their canonical names, models by name (a query without a ``model`` column asks
    for a new model), batch sizes and device counts within the query's (model, device type) pair. Where both
    frames have a ``precision`` column, a query at a precision no run used is ``new_device`` (module docstring),
    and the pair is (model, device type, precision): a model and device the runs have only at another precision
    are a ``new_pair``.

    Parameters
    ----------
    runs : pandas.DataFrame
        The runs a model learned from (``gpu_type``, and ``model``, ``batch_size``, ``gpu_count`` where
        known).
    query : pandas.DataFrame
        The configurations to predict, same columns.

    Returns
    -------
    numpy.ndarray of object, shape (len(query),)
        The name of each row's kind (from :data:`KIND_NAMES`): the first that applies from ``new_device``
        down.
    """
    if len(query) == 0:
        return np.empty(0, dtype=object)
    q_dev, r_dev = canonical_devices(query["gpu_type"]), canonical_devices(runs["gpu_type"])
    new_device = ~np.isin(q_dev, np.unique(r_dev))
    if "precision" in query.columns and "precision" in runs.columns:
        q_prec = query["precision"].astype(str).str.lower().to_numpy(dtype=object)
        r_prec = runs["precision"].astype(str).str.lower().to_numpy(dtype=object)
        new_device |= ~np.isin(q_prec, np.unique(r_prec))
        # a model and device the runs have at another precision only: a pair they never ran
        q_dev = np.char.add(np.char.add(q_dev.astype(str), "\x1f"), q_prec.astype(str)).astype(object)
        r_dev = np.char.add(np.char.add(r_dev.astype(str), "\x1f"), r_prec.astype(str)).astype(object)
    if "model" in query.columns:
        new_model = ~np.isin(_text(query, "model"), np.unique(_text(runs, "model")))
    else:
        new_model = np.ones(len(query), dtype=bool)
    q_pair = np.char.add(np.char.add(_text(query, "model").astype(str), "\x1f"), q_dev.astype(str)).astype(object)
    r_pair = np.char.add(np.char.add(_text(runs, "model").astype(str), "\x1f"), r_dev.astype(str)).astype(object)
    new_pair = ~np.isin(q_pair, np.unique(r_pair))

    def within_pair(column: str) -> np.ndarray:
        if column not in query.columns:
            return np.zeros(len(query), dtype=bool)
        known = np.unique(np.char.add(r_pair.astype(str), np.char.add("\x1f", _numeric_keys(runs[column])
                                                                           .astype(str))))
        keys = np.char.add(q_pair.astype(str), np.char.add("\x1f", _numeric_keys(query[column]).astype(str)))
        return ~np.isin(keys, known)

    code = np.select([new_device, new_model, new_pair, within_pair("gpu_count"), within_pair("batch_size")],
                     [5, 4, 3, 2, 1], 0)
    return np.asarray(KIND_NAMES, dtype=object)[code]
