"""The shifted prior: in a history that mixes the caller's own runs with perfmodel's bundled ones, the bundled
runs' answer shifted by how far the own runs sit from it (:class:`perfmodel.models.StackShift`), for the rows
the own runs' own fit does not answer better (:meth:`perfmodel.predict.BasePredictor.shift`).

The pieces here work on frames and fitted models; :class:`~perfmodel.predict.BasePredictor` decides which rows
they answer and asks its prior through them."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd

from ..history import BUNDLED_PREFIX
from ..models import StackShift, TrainingTimeModel

#: The key of the rows a history of own and bundled runs answers by the bundled answer shifted by the own runs.
SHIFTED = "shifted"


def prior_queries(frame: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Rows (own runs or queries) as the bundled prior is asked them: a model the mixed history calls
    ``bundled:<name>`` is the prior's ``<name>``; a model named as one of the prior's runs (``table``, the prior's
    model table) but of another size is the caller's own model, renamed ``own/<name>`` (the prior would refuse
    the clash)."""
    if "model" not in frame.columns:
        return frame
    names = frame["model"].astype(str)
    if names.str.startswith(BUNDLED_PREFIX).any():  # the mixed history's name for a bundled model: the prior's own
        frame = frame.assign(model=names.str.removeprefix(BUNDLED_PREFIX).to_numpy())
        names = frame["model"].astype(str)
    if "params" not in frame.columns:
        return frame
    ref = pd.to_numeric(table["params"], errors="coerce").reindex(names).to_numpy(dtype=float)
    given = pd.to_numeric(frame["params"], errors="coerce").to_numpy(dtype=float)
    clash = np.isfinite(ref) & np.isfinite(given) & ~np.isclose(given, ref, rtol=1e-3)
    if not clash.any():
        return frame
    out = frame.copy()
    out["model"] = np.where(clash, "own/" + names.to_numpy(), names.to_numpy())
    return out


def prior_steps(ask: Callable[[pd.DataFrame], pd.DataFrame], asked: pd.DataFrame) -> np.ndarray:
    """The prior's per-step answer for each row (the caller's own runs, or queries to shift), nan where it cannot
    answer one (a precision or device it has no way to price); ``ask`` is the prior's ``predict_many``. A refused
    batch is asked per (precision, device type, device count), what pricing turns on, so one refused row does not
    hide what the others say; a group whose first row is refused too is taken as refused, and only a group whose
    first row is answered is asked row by row."""
    def steps(part: pd.DataFrame) -> np.ndarray | None:
        try:
            return ask(part)["step_time_s"].to_numpy(dtype=float)
        except (ValueError, TypeError):
            return None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = steps(asked)
        if whole is not None:
            return whole
        out = np.full(len(asked), np.nan)
        cols = [c for c in ("precision", "gpu_type", "gpu_count") if c in asked.columns]
        keys = asked[cols].astype(str).agg("|".join, axis=1).to_numpy() if cols else np.zeros(len(asked), dtype=str)
        for key in pd.unique(keys):
            at = np.flatnonzero(keys == key)
            group = steps(asked.iloc[at])
            if group is not None:
                out[at] = group
            elif len(at) > 1 and steps(asked.iloc[at[:1]]) is not None:
                for i in at:
                    one = steps(asked.iloc[[i]])
                    out[i] = np.nan if one is None else one[0]
        return out


def own_scores(own_fit: TrainingTimeModel, frame: pd.DataFrame, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the own fit's record for it (the log half-width of its 50% interval; nan where it cannot answer
    the row) and whether its interval at ``confidence`` is bounded. A batch the fit refuses is asked row by row,
    so one row does not decide the others. The record is of the own runs' within-set scores (no rule 5 of
    :mod:`perfmodel.models._conformal`), as the shifted prior's record is of its own runs held out model by model:
    like for like."""
    def ask(part: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        band = own_fit.predict_interval(part, 0.5, source_floor=False)
        upper = own_fit.predict_interval(part, confidence)["step_upper"].to_numpy(dtype=float)
        score = np.log(band["step_upper"].to_numpy(dtype=float) / band["step_time_s"].to_numpy(dtype=float))
        return score, np.isfinite(upper)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ask(frame)
        except (ValueError, TypeError):
            pass
        score, bounded = np.full(len(frame), np.nan), np.zeros(len(frame), dtype=bool)
        for i in range(len(frame)):
            try:
                one = ask(frame.iloc[[i]])
            except (ValueError, TypeError):
                continue
            score[i], bounded[i] = one[0][0], one[1][0]
        return score, bounded


def shifted_answers(p: pd.DataFrame, q: pd.DataFrame, shift: StackShift, confidence: float,
                    startup: float | None) -> pd.DataFrame:
    """:data:`~perfmodel.predict.PREDICTION_COLUMNS` of rows the shifted prior answers, from the prior's answers
    ``p`` to the queries ``q``: the prior's answer times the own runs' ``shift``, the interval from
    :meth:`perfmodel.models.StackShift.half_width` at ``confidence``, the whole run started up in ``startup``
    seconds (the own runs' median; None where they do not record it: the prior's)."""
    devices = q["gpu_type"].astype(str).to_numpy()
    models = q["model"].astype(str).to_numpy() if "model" in q.columns else None
    factor = np.exp(shift.offset(devices, models))
    half = shift.half_width(devices, confidence)
    step = p["step_time_s"].to_numpy(dtype=float) * factor
    steps = p["steps"].to_numpy(dtype=float)
    start: float | np.ndarray | None = startup
    if start is None:  # the own runs do not record it: the prior's
        start = p["seconds"].to_numpy(dtype=float) - steps * p["step_time_s"].to_numpy(dtype=float)
    out = p.copy()
    out["step_time_s"] = step
    out["step_lower"] = step * np.exp(-half)
    out["step_upper"] = step * np.exp(half)
    out["seconds"] = start + steps * step
    out["lower"] = start + steps * out["step_lower"].to_numpy()
    out["upper"] = start + steps * out["step_upper"].to_numpy()
    out["interval_rule"] = f"{shift.describe()}; " + p["interval_rule"].astype(str)
    out.index = q.index
    return out
