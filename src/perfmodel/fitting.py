"""The fitting policy: which method answers which kind of query, fitted once per history and kind.

``method="auto"`` (the default everywhere, :data:`DEFAULT_METHOD`) chooses by cross-validation on the split that
matches the kind of query (:mod:`perfmodel.kinds`): a device type the history lacks is scored
leave-one-device-type-out, a new model leave-one-model-out, and so on; a seen configuration by random K-fold. The
candidate with the lowest median absolute percentage error on that split wins, and the out-of-fold predictions
that chose it become the conformity scores of its intervals for that kind (no second round of refits). Every
candidate is scored on the same folds; nothing falls back silently: the choice and the scores are kept on the
fitted model (``auto_scores_``, ``auto_split_``, ``auto_kind_``).

Fitted models are cached on disk by the history's content digest, the method and the kind
(:mod:`perfmodel.cache`).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ._validation import check_choice
from .history import LoadedHistory, read_history
from .kinds import KIND_NAMES, get_kind, group_keys
from .metrics import median_ape
from .models import METHODS, TrainingTimeModel
from .models._conformal import folds
from .schema import validate_runs

__all__ = ["DEFAULT_METHOD", "AUTO_CANDIDATES", "fit_history", "choose_method", "fit_cached", "Choice"]

#: The default ``method`` of every public entry point.
DEFAULT_METHOD = "auto"
#: Methods ``auto`` chooses among.
AUTO_CANDIDATES = ("physics", "roofline", "loglinear", "gbm", "ops")
#: Methods ``auto`` may choose when the history holds a single device count and the query asks another: only
#: forms that carry the change physically (a communication term with a prior).
_ONE_GROUP_CANDIDATES = {"new_count": ("physics", "roofline")}
_MAX_CV_ROWS = 2000  # model selection on a random subsample of larger histories (speed; the choice is stable)


class Choice(dict):
    """What ``auto`` found: ``best``, ``scores`` ({method: median APE %}), ``split`` and, when model selection
    saw every run, ``oof`` (the winner's out-of-fold predictions, aligned with the runs)."""


def choose_method(runs: pd.DataFrame, kind: str = "seen", *, cv: int = 5, candidates=AUTO_CANDIDATES,
                  random_state: int = 0) -> Choice:
    """Score each candidate method on the split matching ``kind``; returns a :class:`Choice`."""
    k = get_kind(kind)
    data = runs
    subsampled = len(data) > _MAX_CV_ROWS
    if subsampled:
        data = data.sample(_MAX_CV_ROWS, random_state=random_state).reset_index(drop=True)
    groups = None if k.column is None else group_keys(data, k)
    splits = folds(groups, len(data), cv=cv, random_state=random_state)
    split = k.split if groups is not None else f"random {max(2, min(cv, len(data)))}-fold"
    # the winner's out-of-fold predictions are its conformity scores for this kind when they came from exactly
    # the refits that score it (every run, the kind's own folds)
    reusable = not subsampled and bool(splits)
    if not splits:  # one group: the kind's refits are impossible, score on random folds
        splits = folds(None, len(data), cv=cv, random_state=random_state)
        split = f"random {max(2, min(cv, len(data)))}-fold"
        if kind in _ONE_GROUP_CANDIDATES:
            # the history has one value of what the query changes: no split can score that extrapolation, so
            # only the forms that carry it physically (a communication term with a prior, datasheet peaks) compete
            candidates = tuple(m for m in candidates if m in _ONE_GROUP_CANDIDATES[kind]) or tuple(candidates)
            split += f" (one {k.column} in the history: candidates {', '.join(candidates)})"
    y = data["step_time_s"].to_numpy(dtype=float)
    scores, oofs = {}, {}
    for method in candidates:
        point = TrainingTimeModel(method=method, conformal=False)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                point.fit(data, y)
                oof = point.out_of_fold_splits(data, y, splits)
        except (ValueError, np.linalg.LinAlgError):
            scores[method] = float("nan")  # cannot be fitted on these folds (e.g. too few runs)
            continue
        ok = np.isfinite(oof) & (oof > 0)
        scores[method] = median_ape(y[ok], oof[ok]) if ok.all() else float("inf")
        oofs[method] = oof
    finite = {m: s for m, s in scores.items() if np.isfinite(s)}
    if not finite:
        raise ValueError(f"method='auto': no method could be fitted and scored on this history ({len(runs)} "
                         "runs); give more runs or choose a method.")
    best = min(finite, key=finite.get)
    out = Choice(best=best, scores=scores, split=split)
    if reusable:
        out["oof"] = oofs[best]
    return out


def fit_history(history, method: str = DEFAULT_METHOD, *, kind: str = "seen", cv: int | None = 5,
                random_state: int = 0) -> TrainingTimeModel:
    """Fit ``method`` on a history (a :class:`~perfmodel.history.LoadedHistory`, or runs to validate) for queries
    of ``kind``; ``auto`` chooses by the split matching ``kind`` (module docstring)."""
    check_choice(method, "method", "fit", (*METHODS, "auto"))
    get_kind(kind)
    if isinstance(history, LoadedHistory):
        runs, labels = history.runs, history.labels
    elif isinstance(history, pd.DataFrame):
        runs, labels = validate_runs(history), None
    else:
        loaded = read_history(history)
        runs, labels = loaded.runs, loaded.labels
    held_out = () if kind == "seen" else (kind,)
    if method != "auto":
        model = TrainingTimeModel(method=method, held_out=held_out, cv=cv, random_state=random_state).fit(runs)
    else:
        choice = choose_method(runs, kind, cv=cv or 5, random_state=random_state)
        model = TrainingTimeModel(method=choice["best"], held_out=held_out, cv=cv, random_state=random_state)
        model.fit(runs, oof={kind: choice["oof"]} if "oof" in choice else None)
        model.auto_scores_ = dict(choice["scores"])
        model.auto_split_ = choice["split"]
        model.auto_kind_ = kind
    if labels is not None:
        model.provenance_ = list(labels)
    return model


def fit_cached(loaded: LoadedHistory, method: str, kind: str) -> TrainingTimeModel:
    """:func:`fit_history` on a loaded history, through the disk cache (:mod:`perfmodel.cache`) keyed by the
    history's content digest, the method and the kind."""
    from . import cache

    key = cache.cache_key(loaded.digest, method, kind)
    model = cache.load_cached(key)
    if model is not None:
        return model
    model = fit_history(loaded, method, kind=kind)
    cache.store(key, model)
    return model


assert set(_ONE_GROUP_CANDIDATES) <= set(KIND_NAMES)
