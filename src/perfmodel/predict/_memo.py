"""The Predictors kept in this process: one per history content, method and device table
(:func:`shared_predictor`), so that repeated calls neither re-read nor refit an unchanged history."""

from __future__ import annotations

import copy
import os
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

import pandas as pd

from .._methods import METHOD_CHOICES
from .._validation import check_choice, check_confidence
from ..hardware import table_digest
from ..history import BUNDLED_PREFIX, frame_digest, history_parts, part_digest, part_label
from ..models import TrainingTimeModel
from ..store import HistoryStore

P = TypeVar("P")

#: Predictors kept in this process, by (history content digest, method), most recently used last.
_PREDICTORS: OrderedDict[tuple, Any] = OrderedDict()
_PREDICTORS_MAX = 8


def check_history_type(history, where: str) -> None:
    """Refuse a ``history`` that is none of the kinds a Predictor reads (``where``: the caller, for the message)."""
    if not isinstance(history, (type(None), str, os.PathLike, pd.DataFrame, list, tuple, TrainingTimeModel,
                                HistoryStore)):
        raise TypeError(
            f"The 'history' parameter of {where} must be None, a path or store, a DataFrame, a bundled history name, a "
            f"list of these, or a fitted TrainingTimeModel. Got {type(history).__name__} instead."
        )


def _history_key(history) -> tuple | None:
    """What identifies a history's content without parsing it: file bytes', stores' and frames' digests (None:
    cannot)."""
    if history is None:
        return ("bundled-default",)
    key: list[object] = []
    for part in history_parts(history):
        if isinstance(part, pd.DataFrame):
            key.append(frame_digest(part))
        else:
            try:
                # a bundled name and a copy of its file hold the same bytes, but only the one is perfmodel's data
                # (its fits' provenance, and with it the error books' floor: perfmodel.models.floor_for)
                key.append((part_digest(part), part_label(part).startswith(BUNDLED_PREFIX)))
            except (OSError, ValueError):
                return None  # a missing file or store: read_history says what is wrong
    return tuple(key)


def shared_predictor(make: Callable[[Any, str, float], P], history, method: str, confidence: float, where: str) -> P:
    """A Predictor for ``history`` and ``method``, shared in this process while the history's content is unchanged
    (a rewritten file, however its size and modification time look, is another key). The arguments are checked
    here, once, in the words of ``where`` (the caller); ``make`` makes a Predictor of checked arguments
    (:func:`~perfmodel.predict._base.checked_predictor`)."""
    check_history_type(history, where)
    check_choice(method, "method", where, METHOD_CHOICES)
    return kept_predictor(make, history, method, check_confidence(confidence, where))


def kept_predictor(make: Callable[[Any, str, float], P], history, method: str, confidence: float) -> P:
    """:func:`shared_predictor` of arguments already checked (a Predictor's prior, of the Predictor's own)."""
    if isinstance(history, TrainingTimeModel):
        return make(history, method, confidence)
    content = _history_key(history)
    if content is None:
        return make(history, method, confidence)
    key = (content, method, table_digest())  # a device registered or replaced meanwhile is another answer
    cached: Any = _PREDICTORS.get(key)  # made by make: a P
    if cached is None:
        cached = _PREDICTORS[key] = make(history, method, 0.9)
        while len(_PREDICTORS) > _PREDICTORS_MAX:
            _PREDICTORS.popitem(last=False)
    _PREDICTORS.move_to_end(key)
    if cached.confidence == confidence:
        return cached
    view = copy.copy(cached)  # the same fits at another level (a shallow copy shares them)
    view.confidence = confidence
    return view
