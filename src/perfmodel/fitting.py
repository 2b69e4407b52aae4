"""The fitting policy: which method answers which kind of query, fitted once per history and kind.

``method="auto"`` (the default everywhere, :data:`DEFAULT_METHOD`) chooses by cross-validation on the split that
matches the kind of query (:mod:`perfmodel.kinds`): a device type the history lacks is scored
leave-one-device-type-out, a new model leave-one-model-out, and so on; a seen configuration by random K-fold. The
baselines (``ratio``, then ``mfu``) are the reference: the best of them wins unless another candidate's median
absolute percentage error on that split is lower by more than half when the query transfers to a new device
type, model or pair (``perfmodel.kinds.TRANSFER_KINDS``) and the split has fewer than 9 held-out groups
(:func:`baseline_margin`: so few groups cannot tell methods apart; a history of one device type or model, scored on
random folds, counts as one group); otherwise the lowest wins. This rule was compared with paired sign and
bootstrap tests, per-group means and forecast averages on the development sets (``benchmarks/selection_rules.py``,
its output in benchmarks/results/selection_rules.txt) and has the lowest mean held-out median APE. The out-of-fold
predictions that chose it become the conformity scores of its intervals for that kind (no second round of refits). Every
candidate is scored on the same folds; nothing falls back silently: the choice and the scores are kept on the
fitted model (``auto_scores_``, ``auto_split_``, ``auto_kind_``).

**The cost of ``auto``, bounded.** With ``c`` candidates (:data:`AUTO_CANDIDATES`), ``auto`` makes at most
``c * (1 + f)`` fits on at most 2,000 runs (a larger history is scored on a random subsample of 2,000,
``_MAX_CV_ROWS``), where ``f`` is the number of folds: ``cv`` (5) for ``seen``, one per group up to
:data:`perfmodel.models._conformal.MAX_FOLDS` (10) for the other kinds; then the winner is fitted once on every
run, and, when the history was subsampled, refitted ``cv`` + ``f`` times on every run for its conformity scores
(otherwise the selection's out-of-fold predictions are reused). Every fit runs with one BLAS thread. Measured:
``auto`` on 5,000 runs in benchmarks/results/latency.txt (``python benchmarks/latency.py``).

Fitted models are cached on disk by the history's content digest, the method and the kind
(:mod:`perfmodel.cache`).

**Shipped defaults.** The models of the bundled histories (:data:`SHIPPED_HISTORIES`: ``auto`` for ``"cpu"`` and
``"gpu"``, the layout model for ``"llm"``), one per kind of query
they can answer, ship inside the package (``perfmodel/data/fitted/``, safe format, built by
``scripts/build_fitted_defaults.py``). :func:`fit_cached` looks there first, then in the disk cache, then fits. A
shipped model's key (:func:`shipped_key`) is the disk cache's key plus the version of what a fit computes
(:data:`FIT_FORMAT`), so a model fitted on other data, by another release or before a change of the fits is simply
not found. A test refits one model per shipped history and compares its predictions with the shipped one's, so a
change that alters fits without bumping :data:`FIT_FORMAT` cannot land unnoticed.

**Progress.** A fit still running after 2 s shows a progress bar (tqdm, on stderr; in Jupyter its widget) when
``PERFMODEL_PROGRESS=1`` (the CLI sets it when stderr is a terminal or ``--progress`` is given) or in a notebook;
``PERFMODEL_PROGRESS=0`` turns it off everywhere, and it is off under pytest.
"""

from __future__ import annotations

import hashlib
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from . import _methods
from ._methods import BASELINE_METHODS, METHOD_CHOICES
from ._validation import check_choice
from .history import LoadedHistory, read_history
from .kinds import KIND_NAMES, TRANSFER_KINDS, get_kind, group_keys
from .metrics import median_ape
from .models import FIT_FORMAT as _FIT_FORMAT
from .models import (  # the books' owner: perfmodel.models
    LAYOUT_BOOK,
    TrainingTimeModel,
    layout_floor,
)
from .models._conformal import folds
from .schema import validate_runs

__all__ = ["DEFAULT_METHOD", "AUTO_CANDIDATES", "BASELINES", "MAX_BASELINE_MARGIN", "SELECTION_MIN_GROUPS",
           "baseline_margin", "baseline_first", "fit_history", "choose_method", "fit_cached", "stored_fit", "Choice",
           "shipped_dir", "shipped_key", "FIT_FORMAT", "load_shipped", "SHIPPED_HISTORIES", "SHIPPED_EXTRA",
           "PRECISION_TRANSFER_METHOD", "layout_floor",
           "LAYOUT_BOOK"]


#: The default ``method`` of every public entry point.
DEFAULT_METHOD = "auto"
#: Methods ``auto`` chooses among (:data:`perfmodel._methods.AUTO_CANDIDATES`).
AUTO_CANDIDATES = _methods.AUTO_CANDIDATES
#: Methods ``auto`` may choose when the history holds a single device count and the query asks another: only
#: forms that carry the change physically (a communication term with a prior).
_ONE_GROUP_CANDIDATES = {"new_count": ("physics", "roofline")}
_MAX_CV_ROWS = 2000  # model selection on a random subsample of larger histories (speed; the choice is stable)
#: The one-line baselines ``auto`` keeps unless another candidate clearly beats them, most specific first: ``ratio``
#: (the same workload on other devices) before ``mfu`` (a pooled utilisation).
BASELINES = BASELINE_METHODS
#: The relative margin a candidate must win by over the baselines when the selection rests on few groups
#: (:func:`baseline_margin`).
MAX_BASELINE_MARGIN = 0.5
#: Held-out groups from which ``auto`` chooses the lowest score outright (:func:`baseline_margin`); the same count
#: of held-out devices from which the conformal layer trusts a model's own transfer scores.
SELECTION_MIN_GROUPS = 9


class Choice(dict):
    """What ``auto`` found (what :func:`choose_method` returns): a dict with the keys below.

    Attributes
    ----------
    best : str
        The chosen method: the best baseline unless another candidate beats it by the margin (module
        docstring, :func:`baseline_margin`), else the lowest median APE on the split.
    scores : dict of str to float
        Median APE (percent) of each candidate on the split; nan for one that could not be fitted, inf for one
        that predicted a non-positive or non-finite time.
    split : str
        The split that scored them (``leave-one-model-out``, ``random 5-fold``...).
    oof : numpy.ndarray of float
        Present only when model selection saw every run on the kind's own folds: the winner's out-of-fold
        predictions, aligned with the runs.
    evidence : dict
        What the choice rests on, aligned with the runs scored (the history, or its subsample of 2,000):
        ``y`` (their step times), ``groups`` (the held-out group of each, None for random folds) and ``oofs``
        (each scored candidate's out-of-fold predictions).
    """


def choose_method(runs: pd.DataFrame, kind: str = "seen", *, cv: int = 5, candidates=AUTO_CANDIDATES,
                  random_state: int = 0, progress=None) -> Choice:
    """Score each candidate method on the split matching ``kind``.

    A history of more than 2,000 runs is scored on a random subsample of 2,000. When the kind's split has one
    group only (e.g. one device count), the candidates are scored on random folds instead, and for ``new_count``
    only ``physics`` and ``roofline`` compete. Every fit runs with one BLAS thread.

    Parameters
    ----------
    runs : pandas.DataFrame
        Validated runs (:func:`perfmodel.schema.validate_runs`).
    kind : str, default="seen"
        The kind of query to choose for (:data:`perfmodel.kinds.KIND_NAMES`): it picks the split.
    cv : int, default=5
        Folds of the random K-fold split (kind ``seen``, or a split with one group).
    candidates : sequence of str, default=AUTO_CANDIDATES
        The methods compared.
    random_state : int, default=0
        Seed of the subsample and of the folds.
    progress : callable, optional
        Called with each candidate's name once it is scored (a progress bar's step).

    Returns
    -------
    Choice
        The winner, every candidate's score and the split.

    Raises
    ------
    ValueError
        If no candidate could be fitted and scored, or ``kind`` is unknown.
    """
    with _one_blas_thread():
        return _choose_method(runs, kind, cv=cv, candidates=candidates, random_state=random_state,
                              progress=progress)


def _one_blas_thread():
    """One BLAS thread for the many small solves of a fit: on a busy machine OpenBLAS's own threads make an
    SVD of a 2000x20 Jacobian ~100x slower (1 s instead of 10 ms, measured on 2 shared cores)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def _choose_method(runs, kind, *, cv, candidates, random_state, progress) -> Choice:
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
    scored_groups = groups if splits else None  # None: scored on random folds
    n_groups = len(data) if groups is None else len(pd.unique(pd.Series(groups)))
    if not splits:  # one group: the kind's refits are impossible, score on random folds
        splits = folds(None, len(data), cv=cv, random_state=random_state)
        # random folds say nothing about a transfer: one group of evidence; about a batch or count: the runs
        n_groups = 1 if kind in TRANSFER_KINDS else len(data)
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
        if progress is not None:
            progress(method)
    finite = {m: s for m, s in scores.items() if np.isfinite(s)}
    if not finite:
        raise ValueError(f"method='auto': no method could be fitted and scored on this history ({len(runs)} "
                         "runs); give more runs or choose a method.")
    # the margin guards a transfer to a whole new device type or model, whose held-out groups are the units the
    # errors come in; a held-out batch size or count spreads over many seen workloads
    best = baseline_first(finite, n_groups if kind in TRANSFER_KINDS else len(data))
    out = Choice(best=best, scores=scores, split=split,
                 evidence={"y": y, "groups": scored_groups, "oofs": oofs})
    if reusable:
        out["oof"] = oofs[best]
    return out


def baseline_margin(n_groups: int) -> float:
    """How much lower (relative) a candidate's cross-validated median APE must be than the best baseline's for
    ``auto`` to choose it, for a selection scored on ``n_groups`` held-out groups (device types, models, ...;
    runs for random folds): :data:`MAX_BASELINE_MARGIN` below :data:`SELECTION_MIN_GROUPS` groups, else 0.

    A median APE over a handful of held-out groups is too noisy to choose by (and, held out one group at a time,
    biased toward the method that fails on the group left out), so such a choice keeps the baseline unless
    another method halves its error. From :data:`SELECTION_MIN_GROUPS` groups on, the lowest score wins, as the
    conformal layer trusts a model's own transfer scores from that many devices
    (``perfmodel.models._conformal.MODEL_MIN_DEVICES``).

    Parameters
    ----------
    n_groups : int
        Held-out groups the candidates were scored on.

    Returns
    -------
    float
        The relative margin: :data:`MAX_BASELINE_MARGIN` or 0.
    """
    return MAX_BASELINE_MARGIN if int(n_groups) < SELECTION_MIN_GROUPS else 0.0


def baseline_first(scores: dict, n_groups: int) -> str:
    """The candidate ``auto`` chooses from finite cross-validated scores: the best baseline (:data:`BASELINES`:
    ``ratio`` unless ``mfu`` is lower by more than the margin), unless another candidate is lower than it by more
    than :func:`baseline_margin`; with no baseline scored, the lowest score.

    Parameters
    ----------
    scores : dict of str to float
        Finite median APEs of the candidates (:class:`Choice`'s ``scores`` without nan and inf).
    n_groups : int
        Held-out groups the scores rest on (:func:`baseline_margin`): for a transfer kind the groups of the split,
        else the runs.

    Returns
    -------
    str
        The chosen candidate.

    Raises
    ------
    ValueError
        If ``scores`` is empty or holds a score that is not a finite number.

    Examples
    --------
    >>> baseline_first({"gbm": 6.0, "ratio": 10.0, "mfu": 9.0}, 4)  # 6 is not below half of 10
    'ratio'
    >>> baseline_first({"gbm": 6.0, "ratio": 10.0, "mfu": 9.0}, 25)  # enough groups: the lowest
    'gbm'
    """
    bad = [m for m, s in scores.items() if not (isinstance(s, (int, float, np.number)) and np.isfinite(s))]
    if not scores or bad:
        raise ValueError("baseline_first needs finite scores for one candidate or more; "
                         + (f"not finite: {', '.join(map(str, bad))}." if bad else "got none."))
    m = baseline_margin(n_groups)
    lowest = min(scores, key=lambda name: scores[name])
    base = [b for b in BASELINES if b in scores]
    if not base:
        return lowest
    keep = base[0]
    for b in base[1:]:
        if scores[b] < (1 - m) * scores[keep]:
            keep = b
    return lowest if scores[lowest] < (1 - m) * scores[keep] else keep


def fit_history(history, method: str = DEFAULT_METHOD, *, kind: str = "seen", cv: int | None = 5,
                random_state: int = 0, regressor_params: dict | None = None) -> TrainingTimeModel:
    """Fit ``method`` on a history for queries of ``kind`` (no cache: see :func:`fit_cached`).

    Parameters
    ----------
    history : LoadedHistory, pandas.DataFrame, path, bundled name or list of these
        The runs to learn from: a :class:`~perfmodel.history.LoadedHistory` as it is, a DataFrame validated
        with :func:`perfmodel.schema.validate_runs`, anything else read with
        :func:`perfmodel.history.read_history`.
    method : str, default=DEFAULT_METHOD
        A method of :data:`perfmodel.models.METHODS`, or ``"auto"``: chosen by :func:`choose_method` on the
        split matching ``kind`` (module docstring).
    kind : str, default="seen"
        The kind of query the model is fitted for: its conformity scores are those of this kind (held out
        group by group) besides the random K-fold ones.
    cv : int or None, default=5
        Folds of the random K-fold scores (:class:`~perfmodel.models.TrainingTimeModel`'s ``cv``).
    random_state : int, default=0
        Seed of the folds (and of ``auto``'s subsample).
    regressor_params : dict, optional
        Parameters of the method's regressor (not with ``auto``), e.g. the layout model's ``prior``.

    Returns
    -------
    TrainingTimeModel
        The fitted model; ``provenance_`` holds the history's part labels when it was read from one, and an
        ``auto`` fit keeps ``auto_scores_``, ``auto_split_`` and ``auto_kind_``.

    Raises
    ------
    ValueError
        For an unknown ``method`` or ``kind``, or runs that fail validation.
    """
    check_choice(method, "method", "fit", METHOD_CHOICES)
    get_kind(kind)
    if isinstance(history, LoadedHistory):
        runs, labels = history.runs, history.labels
    elif isinstance(history, pd.DataFrame):
        runs, labels = validate_runs(history), None
    else:
        loaded = read_history(history)
        runs, labels = loaded.runs, loaded.labels
    if regressor_params and method == "auto":
        raise ValueError("fit_history: regressor_params need a method, not 'auto'.")
    with _one_blas_thread():
        model = _fit_runs(runs, method, kind, cv, random_state, regressor_params)
    if labels is not None:
        model.provenance_ = list(labels)
    return model


def _fit_runs(runs, method, kind, cv, random_state, regressor_params=None) -> TrainingTimeModel:
    held_out = () if kind == "seen" else (kind,)
    if method != "auto":
        model = TrainingTimeModel(method=method, held_out=held_out, cv=cv, random_state=random_state,
                                  regressor_params=regressor_params).fit(runs)
    else:
        bar = _Progress(len(AUTO_CANDIDATES) + 1, f"perfmodel: auto for {kind} queries, {len(runs)} runs")
        try:
            choice = choose_method(runs, kind, cv=cv or 5, random_state=random_state, progress=bar.step)
            model = TrainingTimeModel(method=choice["best"], held_out=held_out, cv=cv, random_state=random_state)
            model.fit(runs, oof={kind: choice["oof"]} if "oof" in choice else None)
            bar.step(f"fitted {choice['best']}")
        finally:
            bar.close()
        model.auto_scores_ = dict(choice["scores"])
        model.auto_split_ = choice["split"]
        model.auto_kind_ = kind
    return model


def fit_cached(loaded: LoadedHistory, method: str, kind: str) -> TrainingTimeModel:
    """:func:`fit_history` on a loaded history, through the shipped models and the disk cache.

    The shipped model for its key if there is one (:func:`load_shipped`), else the disk cache's
    (:mod:`perfmodel.cache`, keyed by the history's content digest, the method and the kind), else a fresh fit,
    which is then stored in the cache.

    Parameters
    ----------
    loaded : LoadedHistory
        The history (its ``digest`` is the key).
    method : str
        A method of :data:`perfmodel.models.METHODS`, or ``"auto"``.
    kind : str
        The kind of query to fit for (:data:`perfmodel.kinds.KIND_NAMES`).

    Returns
    -------
    TrainingTimeModel
        The fitted model.
    """
    from . import cache

    model = stored_fit(loaded.digest, method, kind)
    if model is not None:
        return model
    model = fit_history(loaded, method, kind=kind)
    cache.store(cache.cache_key(loaded.digest, method, kind, FIT_FORMAT), model)
    return model


def stored_fit(digest: str, method: str, kind: str) -> TrainingTimeModel | None:
    """The model :func:`fit_cached` gives runs of content ``digest`` when it need not fit: nothing is read but
    the model file.

    Parameters
    ----------
    digest : str
        The history's content digest (:attr:`perfmodel.history.LoadedHistory.digest`, or
        :func:`perfmodel.history.peek_history`'s).
    method : str
        A method of :data:`perfmodel.models.METHODS`, or ``"auto"``.
    kind : str
        The kind of query (:data:`perfmodel.kinds.KIND_NAMES`).

    Returns
    -------
    TrainingTimeModel or None
        The shipped model for that key (:func:`load_shipped`), else the disk cache's (:mod:`perfmodel.cache`);
        None when neither holds one.
    """
    from . import cache

    model = load_shipped(digest, method, kind)
    return model if model is not None else cache.load_cached(cache.cache_key(digest, method, kind, FIT_FORMAT))


# ------------------------------------------------------------------------------------------ shipped defaults
#: The bundled histories whose ``auto`` fits ship with the package (scripts/build_fitted_defaults.py).
#: The bundled histories whose models ship, and the method each ships with: ``auto`` for the CPU and GPU runs, the
#: layout model for the LLM pre-training sets (what answers transformer jobs).
SHIPPED_HISTORIES = {"cpu": "auto", "gpu": "auto", "llm": "layout"}
#: The method that answers, under ``method="auto"``, a query at a precision no run of the history used (fp32 asked
#: of fp16/bf16 runs, or back): the ``ratio`` rule, the same model's nearest runs scaled by the device's peak and
#: element-bandwidth ratios at the two precisions (:data:`perfmodel.hardware.ELEMENT_BYTES`). Chosen on the
#: development set's precision-transfer record (benchmarks/precision_transfer.py: Lambda's fp16 and fp32 runs),
#: where the forms ``auto`` picks for device transfer carry a precision change 2-4x worse.
PRECISION_TRANSFER_METHOD = "ratio"
#: Fits shipped besides the ``auto`` ones, as (bundled history, method, kind): the precision-transfer rule on the
#: bundled GPU runs (which hold no fp32), so that an fp32 or TF32 query out of the box answers without a fit.
SHIPPED_EXTRA = (("gpu", PRECISION_TRANSFER_METHOD, "new_device"),)
#: :data:`perfmodel.models.FIT_FORMAT`, the version of what a fit computes (owned by the models layer, which stamps it
#: on every fit): shipped models and the disk cache are keyed by it, and a saved model of another format is refused.
FIT_FORMAT = _FIT_FORMAT


def shipped_dir() -> Path:
    """The folder of the shipped fitted models.

    Returns
    -------
    pathlib.Path
        ``perfmodel/data/fitted`` inside the installed package.
    """
    from .datasets import bundled_data_dir

    return bundled_data_dir() / "fitted"


def shipped_key(digest: str, method: str, kind: str) -> str:
    """The name of the shipped model fitted on some runs with a method for a kind of query.

    Parameters
    ----------
    digest : str
        The history's content digest (:attr:`perfmodel.history.LoadedHistory.digest`).
    method : str
        The method.
    kind : str
        The kind of query.

    Returns
    -------
    str
        32 hex digits (the file name without ``.perfmodel``): a SHA-256 of :func:`perfmodel.cache.cache_key`
        (history digest, perfmodel version, method, kind, device table) and :data:`FIT_FORMAT`.
    """
    from . import cache

    base = cache.cache_key(digest, method, kind)
    return hashlib.sha256(f"shipped {base}\nformat {FIT_FORMAT}\n".encode()).hexdigest()[:32]


def load_shipped(digest: str, method: str, kind: str) -> TrainingTimeModel | None:
    """The shipped model for a history digest, method and kind.

    Parameters
    ----------
    digest : str
        The history's content digest (:attr:`perfmodel.history.LoadedHistory.digest`).
    method : str
        The method.
    kind : str
        The kind of query.

    Returns
    -------
    TrainingTimeModel or None
        The model, or None when none ships for that key (with this code) or its file is unreadable.
    """
    from .cache import load_if_readable

    # package data its tests load and predict with: not probed with a prediction (persistence.load_model)
    return load_if_readable(shipped_dir() / f"{shipped_key(digest, method, kind)}.perfmodel", "shipped",
                            probe=False)


# ------------------------------------------------------------------------------------------------ progress
def _progress_on() -> bool:
    """Whether long fits show a progress bar (module docstring)."""
    env = os.environ.get("PERFMODEL_PROGRESS", "").strip().lower()
    if env in ("0", "off", "false", "no"):
        return False
    if env in ("1", "on", "true", "yes"):
        return True
    if "PYTEST_CURRENT_TEST" in os.environ:
        return False
    ipython = sys.modules.get("IPython")  # a notebook has imported it already: never imported here
    try:
        shell = ipython.get_ipython() if ipython is not None else None
    except Exception:  # noqa: BLE001 - any IPython oddity means: no notebook
        shell = None
    return type(shell).__name__ == "ZMQInteractiveShell"


class _Progress:
    """A tqdm bar over ``total`` steps that appears only if the work is still running after ``delay`` seconds
    (tqdm imported on first use, never at import time); a no-op when progress is off."""

    def __init__(self, total: int, desc: str, delay: float = 2.0):
        self.bar = None
        if not _progress_on():
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # tqdm.auto's "IProgress not found" without ipywidgets
                from tqdm.auto import tqdm
        except ImportError:
            return
        self.bar = tqdm(total=total, desc=desc, delay=delay, leave=False, file=sys.stderr, unit="fit")

    def step(self, what: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(what, refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


assert set(_ONE_GROUP_CANDIDATES) <= set(KIND_NAMES)
