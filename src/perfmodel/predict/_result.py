"""A prediction: :class:`TrainingTimePrediction` for one job, :data:`PREDICTION_COLUMNS` for many, and the
frame of whole-run predictions a fitted model gives (:func:`predict_frame`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._format import format_duration, to_plain
from .._validation import check_prediction_frame
from ..layout import is_layout_job
from ..models import TrainingTimeModel
from ._job import WHERE
from ._queries import fill_default_layouts
from ._support import check_support, outside

#: The columns :func:`predict_many` returns, in order.
PREDICTION_COLUMNS = ("step_time_s", "step_lower", "step_upper", "steps", "seconds", "lower", "upper",
                      "inside_domain", "nearest_run_distance", "query_kind", "interval_rule", "precision", "method")


@dataclass
class TrainingTimePrediction:
    """A predicted training time.

    Attributes
    ----------
    seconds : float
        Predicted wall-clock seconds: ``startup_seconds + steps * step_seconds``.
    lower, upper : float
        Prediction interval for one new run at ``confidence`` (not a CI of the mean).
    confidence : float
        The level of the intervals.
    step_seconds, step_lower, step_upper : float
        The same for one optimizer step (the run's mean step time).
    steps : int
        Optimizer steps of the job (given, or from ``epochs`` and ``dataset_size``).
    startup_seconds : float
        Time to first step, the median of the history's ``startup_s`` (0 when it has none).
    r2 : float
        In-sample R² of the fit on step time.
    r2_log : float
        In-sample R² of the fit on log step time.
    cv_mape : float
        The fit's k-fold cross-validated MAPE of step time, in percent.
    method : str
        The method that answered (what ``auto`` chose).
    n_runs : int
        Runs the answering model was fitted on.
    inside_domain : bool
        False when the query lies outside the range of the fitted runs (see ``warnings``).
    nearest_run_distance : float
        Distance to the nearest training run in training standard deviations of the log quantities
        (:meth:`TrainingTimeModel.domain_distance`); 0 for a configuration the fit has seen.
    query : dict
        The query as predicted: the model's ``params`` and ``flops_per_sample`` (and family, op counts of a
        named model), ``batch_size``, ``gpu_count``, ``gpu_type`` (canonical), ``precision`` and ``steps``.
    warnings : list of str
        What was assumed (e.g. the precision) and why the query is outside the fitted domain, if it is.
    provenance : list of str
        The histories the prediction learned from (``bundled:<file>`` for perfmodel's own, else the path).
    query_kind : str
        What the query asks of the runs that answered it (:mod:`perfmodel.kinds`): ``seen``, ``new_batch``,
        ``new_count``, ``new_pair`` (a known model on a known device type it has not run on), ``new_model`` or
        ``new_device``; its interval uses the conformity scores of that kind.
    interval_rule : str
        Which conformity scores set the interval's width, and any widening (:mod:`perfmodel.models._conformal`).
    peak_basis : str
        The peak the query's speed is measured against: its precision and, for fp32, how its matmuls and
        convolutions are assumed to run (:func:`perfmodel.features.peak_basis`).
    breakdown : dict
        Where the predicted step's time goes, seconds by part, for a method whose form has parts (the layout
        model: ``gemm``, ``attention``, ``memory``, ``layer_comm`` per micro-batch; ``pipeline``, ``bubble``,
        ``dp_exposed``, ``optimizer``, ``overhead``, ``sync``, ``total`` per step); empty otherwise.
    """

    seconds: float
    lower: float
    upper: float
    confidence: float
    step_seconds: float
    step_lower: float
    step_upper: float
    steps: int
    startup_seconds: float
    r2: float
    r2_log: float
    cv_mape: float
    method: str
    n_runs: int
    inside_domain: bool
    nearest_run_distance: float
    query: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)
    provenance: list = field(default_factory=list)
    query_kind: str = "seen"
    interval_rule: str = ""
    peak_basis: str = ""
    breakdown: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The fields in plain Python types.

        Returns
        -------
        dict
            One entry per field, ``json.dumps``-able; NaN and inf become None.
        """
        return to_plain(self)

    def __str__(self) -> str:
        pct = f"{self.confidence * 100:g}%"
        return (f"{format_duration(self.seconds)} ({pct} PI {format_duration(self.lower)} – "
                f"{format_duration(self.upper)}; {self.method}, R² {self.r2:.2f}, {self.n_runs} runs)")


def predict_frame(fitted: TrainingTimeModel, q: pd.DataFrame, confidence: float,
                  distinct: tuple | None = None, *, where: str = WHERE, numbers=None) -> pd.DataFrame:
    """Per-step and whole-run predictions of each query row; ``distinct`` = (rows, inverse) from
    :func:`~perfmodel.predict._queries.distinct_query_rows` predicts each distinct configuration once (the per-step prediction is row-wise).
    ``where`` and ``numbers`` (each row's 1-based number in the caller's queries) name a refused row."""
    if distinct is None:
        out = fitted.predict_interval(q, confidence)
    else:
        rows, inverse = distinct
        per = fitted.predict_interval(rows, confidence)
        out = pd.DataFrame({c: per[c].to_numpy()[inverse] for c in per.columns}, index=q.index)
    out["step_lower"] = out["step_lower"].clip(lower=0.0)  # a non-positive point is refused below
    steps = q["steps"].to_numpy(dtype=float)
    start = fitted.startup_s_
    out["steps"] = steps
    out["seconds"] = start + steps * out["step_time_s"].to_numpy()
    out["lower"] = start + steps * out["step_lower"].to_numpy()
    out["upper"] = start + steps * out["step_upper"].to_numpy()
    check_prediction_frame(out, confidence=confidence, n_runs=int(fitted.n_runs_), method=fitted.method, where=where,
                           numbers=numbers)
    return out


def breakdown_of(fitted: TrainingTimeModel, q: pd.DataFrame, factor: float = 1.0) -> dict:
    """Where the predicted step of a one-row query ``q`` goes, seconds by part (times ``factor``), for a method
    whose form has parts; empty otherwise (:attr:`TrainingTimePrediction.breakdown`)."""
    parts = fitted.breakdown(q)
    return {} if parts is None else {k: float(v) * factor for k, v in parts.iloc[0].items()}


def job_prediction(res: pd.Series, q: pd.DataFrame, fitted: TrainingTimeModel, *, confidence: float, steps: int,
                   startup: float, n_runs: int, inside_domain: bool, warnings: list, provenance: list,
                   breakdown: dict) -> TrainingTimePrediction:
    """The :class:`TrainingTimePrediction` of a one-row query ``q``: its :func:`predict_frame` row ``res``, the
    fit statistics of ``fitted`` (the model that answered) and the given fields."""
    return TrainingTimePrediction(
        seconds=float(res["seconds"]), lower=float(res["lower"]), upper=float(res["upper"]),
        confidence=confidence, step_seconds=float(res["step_time_s"]), step_lower=float(res["step_lower"]),
        step_upper=float(res["step_upper"]), steps=steps, startup_seconds=startup,
        r2=float(fitted.rsquared_), r2_log=float(fitted.rsquared_log_), cv_mape=float(fitted.cv_mape_),
        method=fitted.method, n_runs=n_runs, inside_domain=inside_domain,
        nearest_run_distance=float(res["nearest_run_distance"]),
        query={k: v for k, v in q.iloc[0].items()}, warnings=warnings,
        provenance=provenance, query_kind=str(res["query_kind"]), interval_rule=str(res["interval_rule"]),
        peak_basis=str(res.get("peak_basis", "")), breakdown=breakdown,
    )


def fit_answers(fitted: TrainingTimeModel, q: pd.DataFrame, rows: pd.DataFrame, *, at: np.ndarray, take: np.ndarray,
                first: np.ndarray, inverse: np.ndarray, positions: np.ndarray, confidence: float,
                default_layouts: bool) -> pd.DataFrame:
    """:func:`predict_frame` of the queries one fit answers, with ``inside_domain`` and ``method``: the query rows
    ``q.iloc[take]``, whose distinct rows are ``rows.iloc[at]`` (``first``: each distinct row's first query row;
    ``inverse``: each query row's distinct row), checked (:func:`~perfmodel.predict._support.check_support`) and
    named in messages by ``positions`` (each query row's 0-based place in the caller's queries). With
    ``default_layouts``, the transformer jobs' layouts are completed as one job is
    (:func:`~perfmodel.predict._queries.fill_default_layouts`)."""
    check_support(fitted, q.iloc[take], numbers=positions[take] + 1)
    pos = np.full(len(rows), -1)
    pos[at] = np.arange(len(at))
    sub = rows.iloc[at]
    if default_layouts:
        sub = sub.copy()
        fill_default_layouts(sub, is_layout_job(sub), positions[first[at]])
    part = predict_frame(fitted, q.iloc[take], confidence, distinct=(sub, pos[inverse[take]]),
                         where="predict_many", numbers=positions[take] + 1)
    masks = list(outside(fitted, sub).values())
    inside = ~np.logical_or.reduce(masks) if masks else np.ones(len(at), dtype=bool)
    part["inside_domain"] = inside[pos[inverse[take]]]
    part["method"] = fitted.method
    return part
