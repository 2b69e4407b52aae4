"""The fitting policy: which runs to learn from, validated once, and which method answers which kind of query.

Everything that turns a ``history`` argument into a fitted model goes through here — ``predict``, ``evaluate``,
``plan``, ``report`` and the CLI — so they agree on defaults and choices.

``method="auto"`` (the default everywhere, :data:`DEFAULT_METHOD`) chooses by grouped cross-validation on the
split that matches the query: a device type the history lacks is scored leave-one-device-type-out, a new model
leave-one-model-out, a device count outside the history leave-one-count-out, a new batch size
leave-one-batch-size-out, and a seen configuration by random K-fold. The candidate with the lowest median
absolute percentage error on that split wins; its intervals then use the conformity scores of the same kind of
query. Any named method fitted for a kind of query does the same: a query row beyond the runs in the column
that kind varies gets its interval from that column's leave-group-out scores
(``TrainingTimeModel.fit(held_out=...)``). Every candidate is scored on the same folds; nothing falls back silently (the choice and the scores are
kept on the fitted model as ``auto_scores_`` and ``auto_split_``).
"""

from __future__ import annotations

import hashlib
import os
import warnings
import weakref
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold, KFold

from ._validation import check_choice
from .models import METHODS, TrainingTimeModel
from .metrics import median_ape

__all__ = ["DEFAULT_METHOD", "AUTO_CANDIDATES", "KIND_SPLITS", "fit_history", "choose_method", "load_history",
           "query_kind", "query_kinds", "KIND_ORDER", "BUNDLED_HISTORIES", "file_key", "LoadedHistory",
           "default_history", "history_runs", "fit_loaded", "resolve_history"]

#: The default ``method`` of every public entry point.
DEFAULT_METHOD = "auto"
#: Methods ``auto`` chooses among.
AUTO_CANDIDATES = ("physics", "roofline", "loglinear", "gbm", "ops")
#: Kind of query -> the history column whose groups are held out to score it (None: random K-fold).
KIND_SPLITS = {"seen": None, "new_batch": "batch_size", "new_count": "gpu_count", "new_model": "model",
               "new_device": "gpu_type"}
#: Names of the bundled histories accepted in ``history=`` (alone or in a list with your own runs).
#: ``gpu`` is the public MLPerf table plus every GPU history perfmodel measured itself (``data/runs_<device>.csv``).
BUNDLED_HISTORIES = {
    "cpu": ("runs_cpu.csv",),
    "mlperf": ("mlperf_steps.csv",),
    "gpu": ("mlperf_steps.csv", "runs_*.csv"),
}
#: Methods ``auto`` may choose when the history holds a single device count and the query asks another: only
#: forms that carry the change physically (a communication term with a prior). On the
#: bundled CPU history, leave-one-gpu-count-out (each fold fits one count): physics 16.1%, roofline 15.7%,
#: ops 35%, gbm 90% median APE.
_ONE_GROUP_CANDIDATES = {"new_count": ("physics", "roofline")}
_MAX_CV_ROWS = 2000  # model selection on a random subsample of larger histories (speed; the choice is stable)
_VALIDATED: "weakref.WeakValueDictionary[int, pd.DataFrame]" = weakref.WeakValueDictionary()  # load_history output


# ------------------------------------------------------------------------------------------------- history
def _bundled_paths(name: str) -> list[Path]:
    from .datasets import bundled_runs_path

    out = []
    for file in BUNDLED_HISTORIES[name]:
        if "*" in file:  # perfmodel's own measured GPU histories, beside the first file
            folder = bundled_runs_path(BUNDLED_HISTORIES[name][0]).parent
            out += sorted(p for p in folder.glob(file) if p.name != "runs_cpu.csv")
        else:
            out.append(bundled_runs_path(file))
    return out


def _parts(history) -> list:
    if isinstance(history, (list, tuple)):
        if not history:
            raise ValueError("history is an empty list; give at least one path, DataFrame or bundled name.")
        out = []
        for h in history:
            if isinstance(h, (list, tuple)):
                raise TypeError("history lists cannot be nested.")
            out += _parts(h)
        return out
    if isinstance(history, str) and history in BUNDLED_HISTORIES:
        return [str(p) for p in _bundled_paths(history)]
    if isinstance(history, (str, os.PathLike, pd.DataFrame)):
        return [history]
    raise TypeError(
        "history must be a path, a DataFrame, the name of a bundled history "
        f"({', '.join(map(repr, BUNDLED_HISTORIES))}) or a list of these. Got {type(history).__name__}."
    )


def _label(part) -> str:
    if isinstance(part, pd.DataFrame):
        return f"DataFrame ({len(part)} runs)"
    p = Path(part)
    try:
        from .datasets import bundled_runs_path

        if bundled_runs_path(p.name) == p.resolve():
            return f"bundled:{p.name}"
    except (FileNotFoundError, OSError):
        pass
    return str(part)


def load_history(history) -> tuple[pd.DataFrame, list[str]]:
    """Load and validate (once) one history or a list of them; returns the runs and where each part came from.

    A list concatenates its parts (e.g. ``["my_runs.csv", "gpu"]``: your own runs beside the bundled public GPU
    history); the column ``history_source`` says which part each run came from.
    """
    from .io import load_runs

    frames, labels = [], []
    for part in _parts(history):
        runs = load_runs(part)
        label = _label(part)
        frames.append(runs.assign(history_source=label))
        labels.append(label)
    runs = pd.concat(frames, ignore_index=True, sort=False) if len(frames) > 1 else frames[0]
    _VALIDATED[id(runs)] = runs
    return runs, labels


# --------------------------------------------------------------------------------------------- query kinds
#: Query kinds from the least to the most demanding (a row is the first that applies from the right).
KIND_ORDER = ("seen", "new_batch", "new_count", "new_model", "new_device")


def query_kinds(runs: pd.DataFrame, query: pd.DataFrame) -> np.ndarray:
    """Per row of ``query``: the kind of generalisation it asks of ``runs`` (see :data:`KIND_SPLITS`): a device
    type the runs lack, else a model they lack, else a device count, else a batch size, else ``seen``."""
    def isin(column, known) -> np.ndarray:
        return query[column].astype(str).isin(set(map(str, known))).to_numpy(dtype=bool)

    def isin_num(column) -> np.ndarray:
        return pd.to_numeric(query[column], errors="coerce").isin(
            set(pd.to_numeric(runs[column], errors="coerce").astype(float))).to_numpy(dtype=bool)

    new_device = ~isin("gpu_type", pd.unique(runs["gpu_type"]))
    new_model = (~isin("model", pd.unique(runs["model"])) if "model" in query.columns
                 else np.ones(len(query), dtype=bool))
    code = np.select([new_device, new_model, ~isin_num("gpu_count"), ~isin_num("batch_size")], [4, 3, 2, 1], 0)
    return np.asarray(KIND_ORDER, dtype=object)[code]


def query_kind(runs: pd.DataFrame, query: pd.DataFrame) -> str:
    """The most demanding kind of generalisation any row of ``query`` asks of ``runs`` (see :func:`query_kinds`)."""
    kinds = query_kinds(runs, query)
    return max(set(kinds.tolist()), key=KIND_ORDER.index) if len(kinds) else "seen"


# ------------------------------------------------------------------------------------------------- fitting
def _folds(runs: pd.DataFrame, kind: str, cv: int, seed: int):
    col = KIND_SPLITS.get(kind)
    if col is not None:
        groups = runs[col].astype(str).to_numpy()
        n_groups = len(np.unique(groups))
        if n_groups >= 2:  # two groups: fit on one, score on the other (the extrapolation the query asks)
            return list(GroupKFold(min(n_groups, 10)).split(runs, groups=groups)), f"leave-one-{col}-out"
    k = max(2, min(cv, len(runs)))
    return list(KFold(k, shuffle=True, random_state=seed).split(runs)), f"{k}-fold"


def _point_fit(method: str, runs: pd.DataFrame) -> TrainingTimeModel:
    model = TrainingTimeModel(method=method, cv=None)
    model._conformal = False  # point predictions only: model selection needs no intervals
    model._prevalidated = True  # rows of runs fit_history was given (validated): not again per fold
    return model.fit(runs)


def choose_method(runs: pd.DataFrame, kind: str = "seen", *, cv: int = 5,
                  candidates=AUTO_CANDIDATES, random_state: int = 0) -> tuple[str, dict, str]:
    """Score each candidate method on the split matching ``kind``; returns (best, {method: median APE %}, split)."""
    check_choice(kind, "kind", "choose_method", tuple(KIND_SPLITS))
    data = runs
    if len(data) > _MAX_CV_ROWS:
        data = data.sample(_MAX_CV_ROWS, random_state=random_state).reset_index(drop=True)
    folds, split = _folds(data, kind, cv, random_state)
    col = KIND_SPLITS.get(kind)
    if col is not None and data[col].astype(str).nunique() < 2 and kind in _ONE_GROUP_CANDIDATES:
        # the history has one value of what the query changes: no split can score that extrapolation, so
        # only the forms that carry it physically (a communication term with a prior, datasheet peaks) compete
        candidates = tuple(m for m in candidates if m in _ONE_GROUP_CANDIDATES[kind]) or tuple(candidates)
        split += f" (one {col} in the history: candidates {', '.join(candidates)})"
    y = data["step_time_s"].to_numpy(dtype=float)
    scores = {}
    for method in candidates:
        pred = np.full(len(data), np.nan)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for tr, te in folds:
                    fitted = _point_fit(method, data.iloc[tr].reset_index(drop=True))
                    # the point model itself: a fold may ask a count its training runs lack (scored, not refused)
                    pred[te] = fitted.pipeline_.predict(data.iloc[te].reset_index(drop=True))
        except (ValueError, np.linalg.LinAlgError):
            scores[method] = float("nan")  # cannot be fitted on these folds (e.g. too few runs)
            continue
        ok = np.isfinite(pred) & (pred > 0)
        scores[method] = median_ape(y[ok], pred[ok]) if ok.all() else float("inf")
    finite = {m: s for m, s in scores.items() if np.isfinite(s)}
    if not finite:
        raise ValueError(f"method='auto': no method could be fitted and scored on this history ({len(runs)} "
                         "runs); give more runs or choose a method.")
    best = min(finite, key=finite.get)
    return best, scores, split


def _validated_fit(model: TrainingTimeModel, runs: pd.DataFrame, kind: str = "seen") -> TrainingTimeModel:
    model._prevalidated = True
    try:
        # intervals for a query beyond the runs come from the matching leave-group-out scores
        return model.fit(runs, held_out=KIND_SPLITS.get(kind))
    finally:
        del model._prevalidated  # not part of the fitted state


def fit_history(runs: pd.DataFrame, method: str = DEFAULT_METHOD, *, kind: str = "seen", cv: int | None = 5,
                random_state: int = 0) -> TrainingTimeModel:
    """Fit ``method`` on validated ``runs``; ``auto`` chooses by the split matching ``kind`` (module docstring)."""
    check_choice(method, "method", "fit", (*METHODS, "auto"))
    if _VALIDATED.get(id(runs)) is not runs:  # load_history's result is validated already: not twice
        from .schema import validate_runs

        runs = validate_runs(runs)
    # the fits below (and auto's per-fold fits) reuse the validated runs
    if method != "auto":
        return _validated_fit(TrainingTimeModel(method=method, cv=cv, random_state=random_state), runs, kind)
    best, scores, split = choose_method(runs, kind, cv=cv or 5, random_state=random_state)
    model = _validated_fit(TrainingTimeModel(method=best, cv=cv, random_state=random_state), runs, kind)
    model.auto_scores_ = scores
    model.auto_split_ = split
    model.auto_kind_ = kind
    return model


@lru_cache(maxsize=16)
def _fit_cached(key: tuple, method: str, kind: str) -> TrainingTimeModel:
    from . import cache

    paths = [k[0] for k in key]
    disk_key = cache.cache_key(paths, method, kind)
    model = cache.load_cached(disk_key)
    if model is not None:
        return model
    loaded = _LOADED.get(key)  # the caller's already validated runs of these very files
    runs, labels = loaded if loaded is not None else load_history(paths if len(paths) > 1 else paths[0])
    model = fit_history(runs, method, kind=kind)
    model.provenance_ = labels
    cache.store(disk_key, model)
    return model


#: Runs a caller already loaded (and validated) from the files being fitted, by file key, while it fits them.
_LOADED: dict = {}


def file_key(paths) -> tuple:
    """What identifies the files' contents in this process: (path, modification time in ns, size) per file."""
    return tuple((str(p), st.st_mtime_ns, st.st_size) for p, st in ((p, os.stat(p)) for p in paths))


def fit_files(paths, method: str, kind: str, loaded: tuple | None = None) -> TrainingTimeModel:
    """Fit on history files. Cached in this process on (path, modification time, size), and on disk by content
    hash, perfmodel version, method and kind (:mod:`perfmodel.cache`), so repeated queries do not refit.
    ``loaded``: ``(runs, labels, file_key)`` the caller already has from :func:`load_history` of these files,
    with :func:`file_key` taken before it read them, so that a cache miss does not read and validate them
    again. If the files changed since, they are read again."""
    key = file_key(paths)
    if loaded is None or loaded[2] != key:
        return _fit_cached(key, method, kind)
    _LOADED[key] = loaded[:2]
    try:
        return _fit_cached(key, method, kind)
    finally:
        _LOADED.pop(key, None)


# ------------------------------------------------------------------------------------------- history policy
class LoadedHistory(NamedTuple):
    """A history read and validated once: its runs, where each part came from, and (for files) their paths and
    :func:`file_key` taken before reading."""

    runs: pd.DataFrame
    labels: list
    paths: list | None
    key: tuple | None


def default_history(query: pd.DataFrame) -> str:
    """The bundled history a query's devices are predicted from: ``cpu`` for CPU rows only, else ``gpu``."""
    return "cpu" if set(map(str, query["gpu_type"])) <= {"cpu"} else "gpu"


def history_runs(history) -> LoadedHistory:
    """Read and validate (once) a history that is not a fitted model: a path, bundled name, DataFrame or a list."""
    parts = history if isinstance(history, (list, tuple)) else [history]
    if all(isinstance(p, (str, os.PathLike)) for p in parts):
        paths = _parts(history)
        try:
            key = file_key(paths)  # before reading: a file rewritten meanwhile is not fitted from these runs
        except OSError:  # a missing or misnamed file: load_history says what is wrong with it
            key = None
        runs, labels = load_history(paths if len(paths) > 1 else paths[0])
        return LoadedHistory(runs, labels, paths, key)
    runs, labels = load_history(history)
    return LoadedHistory(runs, labels, None, None)


#: Models fitted on histories given as DataFrames, by content (files have their own cache, :mod:`perfmodel.cache`).
_FRAME_FITS: "OrderedDict[tuple, TrainingTimeModel]" = OrderedDict()
_FRAME_FITS_MAX = 8


def _fit_frame(runs: pd.DataFrame, labels, method: str, kind: str) -> TrainingTimeModel:
    """:func:`fit_history` on runs given as a DataFrame, kept in this process by a digest of their content, so
    that the fits for several kinds of query (``predict_many``, ``recommend``) or repeated calls do not refit."""
    try:
        digest = hashlib.sha256(pd.util.hash_pandas_object(runs, index=False).to_numpy().tobytes()
                                + repr([(str(c), str(t)) for c, t in runs.dtypes.items()]).encode()).hexdigest()
    except TypeError:  # cells pandas cannot hash: fit every time
        digest = None
    key = (digest, method, kind, tuple(labels or ()))
    if digest is not None and key in _FRAME_FITS:
        _FRAME_FITS.move_to_end(key)
        return _FRAME_FITS[key]
    model = fit_history(runs, method, kind=kind)
    model.provenance_ = labels
    if digest is not None:
        _FRAME_FITS[key] = model
        while len(_FRAME_FITS) > _FRAME_FITS_MAX:
            _FRAME_FITS.popitem(last=False)
    return model


def fit_loaded(loaded: LoadedHistory, method: str, kind: str) -> TrainingTimeModel:
    """The model for ``kind`` queries from a :func:`history_runs` history: files through the cache of
    :func:`fit_files` (not read again), DataFrames through a content-keyed one."""
    if loaded.paths is not None:
        return fit_files(loaded.paths, method, kind, loaded=(loaded.runs, loaded.labels, loaded.key))
    return _fit_frame(loaded.runs, loaded.labels, method, kind)


def resolve_history(history, method: str = DEFAULT_METHOD, query: pd.DataFrame | None = None,
                    where: str = "predict_training_time") -> TrainingTimeModel:
    """A fitted model from ``history`` (None: the bundled runs for the query's devices; a path, DataFrame,
    bundled name or list of these; a :class:`LoadedHistory` already read; or a fitted model), chosen for the kind
    of ``query`` when ``method="auto"``: the one policy :mod:`perfmodel.predict` and :mod:`perfmodel.plan`
    resolve a history by (read and validated once)."""
    check_choice(method, "method", where, (*METHODS, "auto"))
    if isinstance(history, TrainingTimeModel):
        history._check()
        if method not in ("auto", history.method):
            raise ValueError(
                f"The 'method' parameter of {where} is {method!r} but the fitted model given as history uses "
                f"{history.method!r}; pass method='auto' or refit."
            )
        return history
    if history is None:
        history = default_history(query) if query is not None else "cpu"
    if not isinstance(history, (str, os.PathLike, pd.DataFrame, list, tuple)):  # a LoadedHistory is a tuple
        raise TypeError(
            f"The 'history' parameter of {where} must be None, a path, a DataFrame, a bundled history name, a "
            f"list of these, or a fitted TrainingTimeModel. Got {type(history).__name__} instead."
        )
    loaded = history if isinstance(history, LoadedHistory) else history_runs(history)
    kind = query_kind(loaded.runs, query) if query is not None else "seen"
    return fit_loaded(loaded, method, kind)
