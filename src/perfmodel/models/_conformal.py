"""Prediction intervals: one score book per fitted model, one refit loop, and the few rules that read it.

Every method's interval is split-conformal on the log scale: ``pred · exp(±q)`` with ``q`` the conformal
quantile of *conformity scores*, the absolute log errors of refits that did not see the runs they predicted.
Which refits depends on the kind of query (:mod:`perfmodel.kinds`): a query on a device type the runs lack is
scored by refits that each held out one device type, a new model by refits that held out one model, and so on.

The score book of a fitted model holds, per kind it was calibrated for (``TrainingTimeModel(held_out=...)``)::

    {"scores": sorted |log errors|, "groups": held-out groups they came from, "split": "leave-one-model-out",
     "by_model": {model: its own sorted scores}}   # by_model: new_device / new_pair only

The rules (:func:`half_widths`: 1–3; :meth:`perfmodel.models.TrainingTimeModel.predict_interval` applies
the others with this module's functions), each named in the prediction's ``interval_rule``:

1. **Kind.** A row takes the scores of its own kind. A kind whose scores come from fewer than
   :data:`MIN_GROUPS` held-out groups (or that the model was not calibrated for) takes the next more demanding
   kind that has enough; failing that, the widest set the book has. Never narrower than the ``seen`` scores, nor
   than its own kind's scores from 2 or more groups (too few to stand alone, not too few to bound it below).
2. **The model's own transfer.** On a new device type (or a known device type it never ran on), a known model
   whose own runs were scored on at least :data:`MODEL_MIN_DEVICES` held-out device types takes its own
   scores: how well one workload's speed carries across devices differs between workloads.
3. **Both new.** A new model on a new device type adds the two kinds' quantiles in quadrature.
4. **Distance.** Beyond :data:`EXTRAPOLATION_D0` (distance to the nearest run,
   :func:`perfmodel.models._domain.domain_distance`) the half-width grows by ``1 + EXTRAPOLATION_C·(d − d0)``.
5. **Sources.** A history whose runs come from :data:`SOURCE_MIN_SOURCES` or more sources (its ``source``
   column: other publishers, clusters or recorders, at least :data:`SOURCE_MIN_RUNS` runs each) is also scored by
   refits that each held one whole source out (:func:`source_splits`: not a source larger than all the others
   together), when two or more such refits succeed. A query of a transfer kind (a model, device type or pair the runs
   lack) is never narrower than those scores: it may come from a set like none of them, and a model held out of
   one set is predicted from runs of the same publisher, framework and cluster, which a new one's are not.
6. **Peak.** No step time, nor an interval's lower end, may imply more than the device's peak at the precision
   the run used (:func:`clip_at_peak`): both are raised to ``FLOPs per device-step / peak`` (the step at 100%
   of peak) where that is known (a datasheet peak and counted, not imputed, FLOPs).

Scores of group kinds are *balanced*: every held-out group weighs the same (:func:`balanced_scores`), since a
query is one draw of a group (one new model, one new device type), not one draw of a run.
"""

from __future__ import annotations

import math

import numpy as np

from ..kinds import KIND_NAMES, get_kind

__all__ = ["MIN_GROUPS", "MAX_FOLDS", "MODEL_MIN_DEVICES", "EXTRAPOLATION_D0", "EXTRAPOLATION_C",
           "BALANCED_QUANTILES", "SOURCE_COLUMN", "SOURCE_MIN_RUNS", "SOURCE_MIN_SOURCES",
           "conformal_quantile", "balanced_scores", "folds",
           "source_splits", "score_set", "half_widths", "widening", "clip_at_peak"]

#: A kind's scores are used only when they come from at least this many held-out groups (fewer: rule 1's
#: fallback). With fewer, the errors of one or two unusual groups would set the interval alone.
MIN_GROUPS = 5
#: The most refits of any leave-group-out loop (groups beyond are held out several per fold).
MAX_FOLDS = 10
#: Rule 2: a model takes its own new-device scores once they span this many held-out device types (9: the
#: fewest units whose 90% conformal quantile is finite, ceil(0.9 (g + 1)) <= g).
MODEL_MIN_DEVICES = 9
#: Rule 4: distance to the runs beyond which intervals widen, and how fast (per unit of distance). Calibrated on
#: the bundled CPU runs' leave-one-group-out splits by ``benchmarks/extrapolation.py``.
EXTRAPOLATION_D0 = 0.5
EXTRAPOLATION_C = 0.25
#: Quantiles each held-out group contributes to balanced scores.
BALANCED_QUANTILES = 200
#: Rule 5: the run column that names where a run came from (:mod:`perfmodel.schema`), and the fewest runs a source
#: needs to be held out as one (the transfer book's ``MIN_SET_ROWS``: every source weighs the same, so a source of
#: three runs would weigh as much as one of two hundred).
SOURCE_COLUMN = "source"
SOURCE_MIN_RUNS = 10
#: Rule 5 needs this many such sources, so that each held-out one is predicted from a pooled history of two or
#: more (with two, each refit learns from one set: how one set carries to another, and a user's dozen runs beside
#: the bundled thousands would be scored on predicting the thousands from the dozen).
SOURCE_MIN_SOURCES = 3


def conformal_quantile(scores: np.ndarray, confidence: float) -> float:
    """The split-conformal quantile: the ceil((n+1)·confidence)-th smallest score (inf if that exceeds n).

    Parameters
    ----------
    scores : array-like of shape (n,)
        Conformity scores (any order).
    confidence : float
        The interval level, in (0, 1).

    Returns
    -------
    float
        The quantile; ``inf`` when ``n`` scores are too few for ``confidence`` (``n < confidence / (1 -
        confidence)``) or there are none.

    Examples
    --------
    >>> conformal_quantile([3.0, 1.0, 2.0, 4.0], 0.5)  # ceil(5 * 0.5) = 3rd smallest
    3.0
    """
    scores = np.sort(np.asarray(scores, dtype=float))
    n = len(scores)
    k = math.ceil((n + 1) * confidence)
    if n == 0 or k > n:
        return math.inf
    return float(scores[k - 1])


def balanced_scores(scores: np.ndarray, groups: np.ndarray, n: int = BALANCED_QUANTILES) -> np.ndarray:
    """Conformity scores in which every group weighs the same: ``n`` quantiles of each group's scores, sorted.

    For queries that are one draw of a *group* (a new model is one model, however many runs its benchmark has):
    pooled row scores would let the groups with most runs set the interval.

    Parameters
    ----------
    scores : array-like of shape (n_runs,)
        Each run's conformity score.
    groups : array-like of shape (n_runs,)
        The held-out group each score came from.
    n : int, default=BALANCED_QUANTILES
        Quantiles taken of each group's scores.

    Returns
    -------
    ndarray of shape (n * n_groups,)
        The balanced scores, sorted.
    """
    scores, groups = np.asarray(scores, dtype=float), np.asarray(groups)
    probs = (np.arange(n) + 0.5) / n
    return np.sort(np.concatenate([np.quantile(scores[groups == g], probs) for g in np.unique(groups)]))


def folds(groups: np.ndarray | None, n: int, *, cv: int = 5, random_state: int | None = 0) -> list:
    """The refits of one kind: ``(train, test)`` index pairs.

    Parameters
    ----------
    groups : array-like of shape (n,) or None
        Each run's group (e.g. its model); None: random folds.
    n : int
        The number of runs.
    cv : int, default=5
        Folds of the random split (at least 2, at most ``n``).
    random_state : int or None, default=0
        Seed of the random split's shuffle.

    Returns
    -------
    list of (ndarray, ndarray)
        ``(train, test)`` index arrays: with ``groups``, one group held out per fold, up to :data:`MAX_FOLDS`
        folds (more groups share folds); empty when there is only one group.
    """
    from sklearn.model_selection import GroupKFold, KFold  # to fit only: not imported to predict

    if groups is None:
        k = max(2, min(int(cv), n))
        return list(KFold(k, shuffle=True, random_state=random_state).split(np.zeros(n)))
    n_groups = len(np.unique(groups))
    if n_groups < 2:
        return []
    return list(GroupKFold(min(n_groups, MAX_FOLDS)).split(np.zeros(n), groups=groups))


def source_splits(sources) -> tuple[list, np.ndarray | None]:
    """Rule 5's refits: each source of at least :data:`SOURCE_MIN_RUNS` runs, and of no more runs than the others
    hold together, held out once, when :data:`SOURCE_MIN_SOURCES` or more sources have that many runs.

    A source larger than all the rest (the bundled thousands beside a team's runs) is not held out: a refit that
    learns from a few runs to predict thousands says how little a few runs know, not how far a new set lies; its
    runs stay in every other refit's history.

    Parameters
    ----------
    sources : array-like of shape (n_runs,)
        Each run's source (missing or blank, however written: one source, ``""``, held out like any other).

    Returns
    -------
    splits : list of (ndarray, ndarray)
        ``(train, test)`` index pairs: ``test`` one source's runs, ``train`` every other run (those of small
        sources included). Empty when fewer than :data:`SOURCE_MIN_SOURCES` sources have enough runs, or fewer
        than two of them can be held out.
    groups : ndarray of shape (n_runs,) or None
        Each run's source (None when ``splits`` is empty).

    Examples
    --------
    >>> splits, groups = source_splits(["a"] * 10 + ["b"] * 12 + ["c"] * 11 + ["d"] * 2)
    >>> [len(te) for _, te in splits], [len(tr) for tr, _ in splits]
    ([10, 12, 11], [25, 23, 24])
    >>> source_splits(["a"] * 10 + ["b"] * 12 + ["c"] * 2)[0]  # two sources of enough runs: no refits
    []
    >>> [len(te) for _, te in source_splits(["a"] * 10 + ["b"] * 12 + ["big"] * 500)[0]]  # "big" stays in
    [10, 12]
    """
    import pandas as pd  # loaded wherever a history is; not needed to predict

    values = pd.Series(list(sources), dtype=object)
    src = np.where(values.isna(), "", values.astype(str).str.strip()).astype(object)
    names, counts = np.unique(src, return_counts=True)
    enough = counts >= SOURCE_MIN_RUNS
    if enough.sum() < SOURCE_MIN_SOURCES:
        return [], None
    held = names[enough & (counts <= len(src) - counts)]
    if len(held) < 2:
        return [], None
    idx = np.arange(len(src))
    return [(idx[src != name], idx[src == name]) for name in held], src


def score_set(abs_log_errors: np.ndarray, groups: np.ndarray | None, *, split: str,
              models: np.ndarray | None = None, devices: np.ndarray | None = None) -> dict:
    """The score book entry of one kind from out-of-fold absolute log errors (NaN where a fold failed).

    Parameters
    ----------
    abs_log_errors : array-like of shape (n_runs,)
        ``|log y − log oof|`` of each run (NaN where its refit failed: left out).
    groups : array-like of shape (n_runs,) or None
        The held-out group of each run; None: K-fold (every run its own unit, scores as they are). Otherwise
        the scores are balanced over the groups (:func:`balanced_scores`).
    split : str
        The split's name, for ``interval_rule`` (e.g. ``"leave-one-model-out"``).
    models, devices : array-like of shape (n_runs,), optional
        Each run's model and device type (new_device / new_pair): each model whose runs were scored on at least
        :data:`MODEL_MIN_DEVICES` device types also keeps its own scores (rule 2).

    Returns
    -------
    dict
        ``{"scores": sorted scores, "groups": number of units, "split": split, "by_model": {model: its own
        sorted scores}}``.
    """
    err = np.asarray(abs_log_errors, dtype=float)
    ok = np.isfinite(err)
    if groups is None:
        return {"scores": np.sort(err[ok]), "groups": int(ok.sum()), "split": split, "by_model": {}}
    g = np.asarray(groups)[ok]
    out: dict = {"scores": balanced_scores(err[ok], g) if ok.any() else np.empty(0),
                 "groups": int(len(np.unique(g))), "split": split, "by_model": {}}
    if models is not None and devices is not None and ok.any():
        m, d, e = np.asarray(models)[ok], np.asarray(devices)[ok], err[ok]
        for name in np.unique(m):
            own = m == name
            if len(np.unique(d[own])) >= MODEL_MIN_DEVICES:
                out["by_model"][str(name)] = np.sort(e[own])
    return out


def _usable(entry: dict | None) -> bool:
    return entry is not None and entry["groups"] >= MIN_GROUPS and len(entry["scores"]) > 0


def half_widths(book: dict, kinds: np.ndarray, confidence: float, *, models: np.ndarray | None = None,
                new_model: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the log half-width of its interval and the rule that set it (rules 1–3 of the module docstring).

    Parameters
    ----------
    book : dict
        The score book, ``{kind: score_set(...)}``.
    kinds : array-like of shape (n_rows,)
        Each row's kind (:func:`perfmodel.kinds.classify`).
    confidence : float
        The interval level, in (0, 1).
    models : array-like of shape (n_rows,), optional
        Each row's model name (rule 2).
    new_model : array-like of bool, shape (n_rows,), optional
        Rows whose model the runs lack (rule 3, for new-device rows).

    Returns
    -------
    half : ndarray of shape (n_rows,)
        Log half-widths (``inf`` where no scores are enough for ``confidence``).
    rule : ndarray of object, shape (n_rows,)
        The rule that set each, for ``interval_rule``.
    """
    kinds = np.asarray(kinds, dtype=object)
    q_of = {k: conformal_quantile(e["scores"], confidence) for k, e in book.items() if _usable(e)}
    q_seen = q_of.get("seen", 0.0)

    def pick(kind: str) -> tuple[str | None, float]:
        for k in KIND_NAMES[KIND_NAMES.index(kind):]:
            if k in q_of:
                return k, q_of[k]
        if not q_of:
            return None, math.inf
        widest = max(q_of, key=lambda k: q_of[k])
        return widest, q_of[widest]

    half = np.empty(len(kinds))
    rule = np.empty(len(kinds), dtype=object)
    for kind in np.unique(kinds):
        rows = kinds == kind
        used, q = pick(kind)
        half[rows] = max(q, q_seen)
        if used is None:
            rule[rows] = "no conformity scores"
            continue
        entry = book[used]
        text = f"{get_kind(used).split if used != 'seen' else entry['split']} ({entry['groups']} " \
               f"{'runs' if used == 'seen' else 'groups'})"
        rule[rows] = text if used == kind else f"{text}: {kind} scores too few"
        thin = book.get(kind)
        if used != kind and thin is not None and thin["groups"] >= 2 and len(thin["scores"]):
            # the query's own kind, scored on too few groups to stand alone, still bounds it from below: a
            # fallback narrower than what those groups showed would be known to be too narrow
            q_thin = conformal_quantile(thin["scores"], confidence)
            if np.isfinite(q_thin) and q_thin > half[rows][0]:
                half[rows] = q_thin
                rule[rows] = f"{get_kind(kind).split} ({thin['groups']} groups, too few to stand alone: at least " \
                             f"their quantile, above the {text})"
        if used in ("new_device", "new_pair") and models is not None and entry["by_model"]:
            names = np.asarray(models, dtype=object).astype(str)
            for name in set(names[rows].tolist()) & set(entry["by_model"]):
                own = rows & (names == name)
                q_own = conformal_quantile(entry["by_model"][name], confidence)
                if np.isfinite(q_own):
                    half[own] = max(q_own, q_seen)
                    rule[own] = f"{get_kind(used).split}, the model's own ({len(entry['by_model'][name])} runs)"
    if new_model is not None and "new_model" in q_of:
        both = (kinds == "new_device") & np.asarray(new_model, dtype=bool)
        if both.any():
            half[both] = np.hypot(half[both], q_of["new_model"])
            rule[both] = np.char.add(rule[both].astype(str), " + leave-one-model-out in quadrature").astype(object)
    return half, rule


def widening(distance: np.ndarray, d0: float = EXTRAPOLATION_D0, c: float = EXTRAPOLATION_C) -> np.ndarray:
    """Rule 4: the factor on the log half-width at each distance to the runs.

    Parameters
    ----------
    distance : array-like
        Distance of each query to the nearest run (:func:`perfmodel.models._domain.domain_distance`).
    d0 : float, default=EXTRAPOLATION_D0
        Distance up to which intervals keep their width.
    c : float, default=EXTRAPOLATION_C
        Growth of the factor per unit of distance beyond ``d0``.

    Returns
    -------
    ndarray
        ``1 + c · max(distance − d0, 0)``.
    """
    return 1.0 + c * np.maximum(np.asarray(distance, dtype=float) - d0, 0.0)


def clip_at_peak(pred: np.ndarray, lower: np.ndarray, upper: np.ndarray, floor: np.ndarray):
    """Rule 6: the point and lower end raised to ``floor``; a raised point keeps its upper half-width
    (``upper / pred``), so the interval stays an interval.

    Parameters
    ----------
    pred, lower, upper : array-like of shape (n_rows,)
        Point predictions and interval ends, in seconds.
    floor : array-like of shape (n_rows,)
        The step time at 100% of the device's peak (NaN where unknown: no clip).

    Returns
    -------
    pred, lower, upper : ndarray of shape (n_rows,)
        The clipped arrays (copies).
    moved : ndarray of bool, shape (n_rows,)
        Rows whose point or lower end moved.

    Examples
    --------
    >>> import numpy as np
    >>> p, lo, hi, moved = clip_at_peak(np.array([1.0, 1.0]), np.array([0.5, 0.9]), np.array([2.0, 1.1]),
    ...                                 np.array([0.8, np.nan]))
    >>> lo.tolist(), moved.tolist()
    ([0.8, 0.9], [True, False])
    """
    pred, lower, upper = (np.asarray(a, dtype=float).copy() for a in (pred, lower, upper))
    floor = np.asarray(floor, dtype=float)
    known = np.isfinite(floor) & (floor > 0)
    f = np.where(known, floor, -np.inf)
    moved = known & ((lower < f) | (pred < f))
    new_pred = np.maximum(pred, f)
    # a point raised to the floor keeps its upper half-width (ratio), so the interval never collapses to a point
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(pred > 0, upper / pred, 1.0)
    new_upper = np.where(new_pred > pred, np.maximum(upper, new_pred * ratio), np.maximum(upper, f))
    return new_pred, np.maximum(lower, f), new_upper, moved
