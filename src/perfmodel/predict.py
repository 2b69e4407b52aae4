"""Predicting training jobs: :class:`BasePredictor` (a history, validated once, fitted lazily per kind of query) and
the module functions :func:`predict_training_time`, :func:`predict_many` and :func:`fit` over it.

A :class:`BasePredictor` reads its history once (:func:`perfmodel.history.read_history`), and for each kind of query
its rows ask (:mod:`perfmodel.kinds`) fits the method once (``auto``: chosen for that kind, :mod:`perfmodel.fitting`),
through the disk cache. The module functions keep a few Predictors in this process, keyed by the content digest of
their history and the method, so that repeated calls neither re-read nor refit an unchanged history.
"""

from __future__ import annotations

import difflib
import hashlib
import math
import numbers
import os
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ._format import format_duration, to_plain
from ._rows import distinct_rows
from ._validation import (check_choice, check_confidence, check_nonnegative_float, check_positive_float,
                          check_positive_int, check_prediction_frame, row_label)
from .exceptions import DataQualityWarning, ExtrapolationWarning, SchemaError, UnsupportedQueryError
from .fitting import DEFAULT_METHOD, PRECISION_TRANSFER_METHOD, fit_cached, fit_history, stored_fit
from .hardware import PRECISIONS, check_precision, get_spec, resolve_gpu_type, table_digest
from .history import (BUNDLED_PREFIX, HistoryFiles, LoadedHistory, default_history, frame_digest, history_parts,
                      model_table, part_digest, part_label, peek_history, precision_by_device, read_history)
from .kinds import KIND_NAMES, classify
from .layout import LayoutError, check_layout, is_layout_job, job_layout
from .layout_features import shape_columns, shape_of
from .transformer import TransformerShape, sequence_for_flops, standard_shape, transformer_flops
from .models import CALIBRATION_PRIOR_WEIGHT, METHODS, StackShift, TrainingTimeModel
from .models._conformal import MIN_GROUPS
from .schema import SHAPE_COLUMNS, check_queries
from .store import HistoryStore

__all__ = ["BasePredictor", "predict_training_time", "predict_many", "fit", "TrainingTimePrediction", "resolve_history",
           "layout_columns", "SHAPE_NAMES", "LAYOUT_METHOD", "bundled_layout_model",
           "model_spec", "default_precision", "PREDICTION_COLUMNS"]

_WHERE = "predict_training_time"
#: The method that answers transformer training with a layout (:func:`perfmodel.layout.is_layout_job`) under
#: ``method="auto"``: :class:`perfmodel.models.LayoutRegressor`.
LAYOUT_METHOD = "layout"
#: In a history of the caller's own runs beside perfmodel's bundled ones, a query on a device type the caller's
#: runs have is answered from the caller's runs alone (a model they lack: when they hold enough models) once
#: there are at least this many of them
#: (9: the fewest whose 90% split-conformal quantile is finite, ceil(0.9 (n + 1)) <= n).
MIN_OWN_RUNS = 9
#: The key of the rows a history of own and bundled runs answers by the bundled answer shifted by the own runs.
_SHIFTED = "shifted"
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



# ----------------------------------------------------------------------------------------------- model
def _is_torch_module(obj) -> bool:
    return any(c.__module__.startswith("torch.nn") and c.__name__ == "Module" for c in type(obj).__mro__)


def _dense_part(attn: np.ndarray, fps: np.ndarray, where: str, numbers=None) -> np.ndarray:
    """``flops_per_sample − attention_flops_per_sample`` of each query (``numbers``: the rows' 1-based numbers in
    the caller's queries, to name a refused one): the dense part of its FLOPs, checked."""
    bad = np.flatnonzero(np.isnan(fps) | (attn > fps))
    if len(bad):
        i = int(bad[0])
        of = "" if numbers is None else f" ({row_label(i, numbers)})"
        if np.isnan(fps[i]):
            raise ValueError(f"The 'attention_flops_per_sample' of {where}{of} is a part of 'flops_per_sample', "
                             "which must be given with it.")
        raise ValueError(f"The 'attention_flops_per_sample' of {where}{of} exceeds its 'flops_per_sample', of which "
                         f"it is a part: {attn[i]:g} > {fps[i]:g}.")
    return fps - attn


def model_spec(model, example_input, fitted) -> dict:
    """The query's model as the columns of a query row.

    Parameters
    ----------
    model : str, dict or torch.nn.Module
        A model name in the history; a dict with ``params`` (and optionally ``flops_per_sample``, ``name``,
        ``family``: ``"cnn"`` for convolutions, ``"decoder"``, ``"encoder"``... for matmuls, and
        ``attention_flops_per_sample``: the part of ``flops_per_sample`` in attention's score and value
        products); or a ``torch.nn.Module`` (its parameters and FLOPs counted with
        :func:`perfmodel.measure.flops.count_module`).
    example_input : torch.Tensor or None
        One sample without the batch dimension; needed when ``model`` is a module, ignored otherwise.
    fitted : TrainingTimeModel or pandas.DataFrame
        Where a named model is looked up: a fitted model (its ``models_``) or a
        :func:`~perfmodel.history.model_table`.

    Returns
    -------
    dict
        ``model``, ``params``, ``flops_per_sample`` (None where unknown), and for a named model its family and
        op counts as its runs had them; for a dict, its ``family`` and, from ``attention_flops_per_sample``,
        ``op_attention_flops`` and ``op_matmul_flops`` (the rest of the FLOPs) where given.

    Raises
    ------
    UnsupportedQueryError
        For a name the history lacks (the message gives the closest).
    ValueError
        For a dict without ``params``, bad sizes, or a module without ``example_input``.
    TypeError
        For anything else.
    """
    table = fitted.models_ if isinstance(fitted, TrainingTimeModel) else fitted
    if isinstance(model, str):
        if model not in table.index:
            close = difflib.get_close_matches(model, list(table.index), n=3, cutoff=0.3)
            hint = f" Closest: {', '.join(close)}." if close else ""
            raise UnsupportedQueryError(
                f"The 'model' parameter of {_WHERE} names {model!r}, which is not in the history.{hint} Known: "
                f"{', '.join(map(str, table.index))}. For another model pass a dict "
                "{'params': ..., 'flops_per_sample': ...} or a torch.nn.Module with example_input."
            )
        row = table.loc[model]
        fps = row["flops_per_sample"]
        described = {c: row[c] for c in table.columns if c not in ("params", "flops_per_sample", "runs")
                     and not pd.isna(row[c])}  # the model's family and op counts, as its runs had them
        return {"model": model, "params": float(row["params"]),
                "flops_per_sample": None if pd.isna(fps) else float(fps), **described}
    if isinstance(model, Mapping):
        where = f"the model spec of {_WHERE}"
        model = dict(model)
        shape = model.pop("shape", None)
        if shape is not None:
            if not isinstance(shape, TransformerShape):
                raise TypeError(f"The 'shape' of {where} must be a perfmodel.transformer.TransformerShape. Got "
                                f"{type(shape).__name__}.")
            model = {**shape_columns(shape), **model}
            model.setdefault("params", float(shape.params()))
            model.setdefault("family", "moe" if shape.is_moe else "decoder")
        if "params" not in model:
            raise ValueError(f"A model spec given to {_WHERE} needs 'params' (and optionally 'flops_per_sample'), "
                             f"or a transformer 'shape'. Got keys {sorted(model)}.")
        params = check_positive_float(model["params"], "params", where)
        fps = check_positive_float(model.get("flops_per_sample"), "flops_per_sample", where, allow_none=True)
        spec = {"model": str(model.get("name", "custom")), "params": params, "flops_per_sample": fps}
        for name in SHAPE_NAMES:
            if model.get(name) is not None:
                spec[name] = (check_positive_float(model[name], name, where) if name == "active_params" else
                              _nonnegative_int(model[name], name, where))
        if fps is None and shape is not None and model.get("seq_len") is not None:
            seq = check_positive_int(model["seq_len"], "seq_len", where)
            spec["flops_per_sample"] = transformer_flops(shape, seq).model
            spec["op_attention_flops"] = transformer_flops(shape, seq).attention
            spec["op_matmul_flops"] = transformer_flops(shape, seq).dense
        family = model.get("family")
        if family is not None:  # what its FLOPs are (cnn: convolutions; decoder, encoder, ...: matmuls)
            if not isinstance(family, str) or not family.strip():
                raise TypeError(f"The 'family' of {where} must be a non-empty string such as 'cnn' or 'decoder'. "
                                f"Got {family!r}.")
            spec["family"] = family.strip().lower()
        if model.get("attention_flops_per_sample") is not None:  # the mfu rule prices it at its own utilisation
            attn = check_nonnegative_float(model["attention_flops_per_sample"], "attention_flops_per_sample", where)
            dense = _dense_part(np.array([attn]), np.array([np.nan if fps is None else fps]), where)[0]
            spec["op_attention_flops"], spec["op_matmul_flops"] = attn, float(dense)
        return spec
    if _is_torch_module(model):
        if example_input is None:
            raise ValueError(
                f"The 'example_input' parameter of {_WHERE} is required when model is a torch.nn.Module: pass "
                "one sample without the batch dimension, e.g. torch.randn(3, 224, 224)."
            )
        from .measure.flops import count_module

        params, fps = count_module(model, example_input)
        return {"model": type(model).__name__, "params": float(params), "flops_per_sample": fps}
    raise TypeError(
        f"The 'model' parameter of {_WHERE} must be a model name from the history, a dict with 'params', or a "
        f"torch.nn.Module. Got {type(model).__name__} instead."
    )


#: The transformer-shape fields a model spec may give (:data:`perfmodel.schema.SHAPE_COLUMNS`).
SHAPE_NAMES = tuple(c.name for c in SHAPE_COLUMNS)


_BUNDLED_LAYOUT: list = []


def bundled_layout_model() -> TrainingTimeModel:
    """The layout model of the bundled LLM history (shipped, or fitted once per process): the prior that an
    organisation's own runs calibrate.

    Returns
    -------
    TrainingTimeModel
        Method ``layout``, fitted on :data:`perfmodel.history.BUNDLED_HISTORIES` ``"llm"``.
    """
    if not _BUNDLED_LAYOUT:
        _BUNDLED_LAYOUT.append(BasePredictor(None, method=LAYOUT_METHOD).model("seen", "llm"))
    return _BUNDLED_LAYOUT[0]


def _calibrated_layout(loaded: LoadedHistory, kind: str) -> TrainingTimeModel:
    """The layout model on a history's transformer runs, the bundled LLM fit's coefficients as the prior
    (:meth:`perfmodel.models.LayoutRegressor.with_prior`): few runs move the coefficients as far as they show."""
    runs = loaded.runs.loc[is_layout_job(loaded.runs)].reset_index(drop=True)
    if not len(runs):
        raise UnsupportedQueryError("The history has no transformer runs with a sequence length and a shape or "
                                    "family (decoder, moe) to calibrate the layout model on; leave history out to "
                                    "answer from the bundled LLM history, or add such runs.")
    prior = dict(bundled_layout_model().pipeline_.named_steps["regressor"].coef_)
    sub = LoadedHistory(runs, loaded.labels, np.ones(len(runs), dtype=bool),
                        hashlib.sha256(f"layout runs of {loaded.digest}".encode()).hexdigest())
    fitted = fit_history(sub, LAYOUT_METHOD, kind=kind,
                          regressor_params={"prior": prior, "prior_weight": CALIBRATION_PRIOR_WEIGHT})
    # the error book is indexed by distinct jobs calibrated on: repeats of one configuration teach one job
    config = [c for c in ("model", "seq_len", "global_batch_size", "gpu_count", "gpu_type", "precision",
                          "micro_batch_size", "tp", "pp", "vp", "cp", "ep", "zero_stage", "recompute") if c in runs]
    fitted.calibration_runs_ = int(len(runs[config].astype(str).drop_duplicates()))
    return fitted


def layout_columns(row: dict, *, seq_len, global_batch: int, layout=None, gpus_per_node=None,
                   inter_node_gbps=None, where: str = _WHERE, names: dict | None = None) -> dict:
    """The run-schema columns of a transformer job's layout, checked against the frameworks' rules.

    Parameters
    ----------
    row : dict
        The query so far: the model's columns (``params``, shape columns, ``seq_len``) and ``gpu_count``.
    seq_len : int or None
        Tokens per sequence (else the row's).
    global_batch : int
        Sequences per optimizer step.
    layout : ParallelLayout or dict, optional
        Completed by :func:`perfmodel.layout.job_layout` (default: data parallel over every device, one sequence
        per pass, ZeRO-1).
    gpus_per_node : int, optional
        Devices per node (NVLink domain).
    inter_node_gbps : float, optional
        The network per device, GB/s one way.
    where : str
        The caller, for messages.
    names : dict, optional
        How to name each layout field in messages (a CLI's flags).

    Returns
    -------
    dict
        ``seq_len``, ``global_batch_size``, ``micro_batch_size``, ``tp``, ``pp``, ``vp``, ``cp``, ``ep``, ``dp``,
        ``zero_stage``, ``sequence_parallel``, ``recompute``, ``gpus_per_node`` and ``inter_node_gbps`` where
        given, and ``_assumed`` (sentences for the result's warnings).

    Raises
    ------
    LayoutError
        For a layout the frameworks would not run (the message names every broken rule).
    """
    devices = int(row["gpu_count"])
    lay, assumed = job_layout(layout, devices=devices, where=where)
    seq = seq_len if seq_len is not None else row.get("seq_len")
    if seq is None:
        raise ValueError(f"{where}: a transformer job's layout needs its sequence length (seq_len).")
    seq = check_positive_int(seq, "seq_len", where)
    try:
        shape = shape_of({**row, "seq_len": seq})
    except (TypeError, ValueError):
        shape = None
    check_layout(lay, devices=devices, global_batch=global_batch, shape=shape, seq_len=seq, names=names)
    out = {"seq_len": seq, "global_batch_size": global_batch, "micro_batch_size": lay.micro_batch, "tp": lay.tp,
           "pp": lay.pp, "vp": lay.vp, "cp": lay.cp, "ep": lay.ep, "dp": lay.dp, "zero_stage": lay.zero_stage,
           "sequence_parallel": int(lay.sequence_parallel), "recompute": lay.recompute, "_assumed": assumed}
    if gpus_per_node is not None:
        out["gpus_per_node"] = check_positive_int(gpus_per_node, "gpus_per_node", where)
    if inter_node_gbps is not None:
        out["inter_node_gbps"] = check_positive_float(inter_node_gbps, "inter_node_gbps", where)
    return out


def _nonnegative_int(value, name: str, where: str) -> int:
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and float(value) == 0:
        return 0
    return check_positive_int(value, name, where)


def _steps(steps, epochs, dataset_size, batch_size, gpu_count) -> int:
    if steps is not None and (epochs is not None or dataset_size is not None):
        raise ValueError(f"{_WHERE} takes either 'steps' or 'epochs' with 'dataset_size', not both. "
                         f"Got steps={steps!r}, epochs={epochs!r}, dataset_size={dataset_size!r}.")
    if steps is not None:
        return check_positive_int(steps, "steps", _WHERE)
    if epochs is None or dataset_size is None:
        raise ValueError(f"{_WHERE} needs the amount of work: 'steps', or 'epochs' and 'dataset_size'. "
                         f"Got steps=None, epochs={epochs!r}, dataset_size={dataset_size!r}.")
    epochs = check_positive_int(epochs, "epochs", _WHERE)
    dataset_size = check_positive_int(dataset_size, "dataset_size", _WHERE)
    return math.ceil(dataset_size / (batch_size * gpu_count)) * epochs


# ------------------------------------------------------------------------------------------- guarding
def _outside(fitted: TrainingTimeModel, q: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per checked column, a boolean mask of the queries outside the fitted [min, max]."""
    out = {}
    dom = fitted.domain_
    for col in ("params", "batch_size", "gpu_count", "flops_per_sample"):
        if col not in q.columns or col not in dom.index or pd.isna(dom.loc[col, "min"]):
            continue
        vals = pd.to_numeric(q[col], errors="coerce").to_numpy(dtype=float)
        out[col] = (vals < dom.loc[col, "min"]) | (vals > dom.loc[col, "max"])
    return out


def _domain_warnings(fitted: TrainingTimeModel, q: pd.DataFrame) -> list[list[str]]:
    out: list[list[str]] = [[] for _ in range(len(q))]
    dom = fitted.domain_
    for col, mask in _outside(fitted, q).items():
        vals = pd.to_numeric(q[col], errors="coerce").to_numpy(dtype=float)
        lo, hi = dom.loc[col, "min"], dom.loc[col, "max"]
        for i in np.flatnonzero(mask):
            out[i].append(f"{col}={vals[i]:g} is outside the fitted range [{lo:g}, {hi:g}]")
    return out


def _given(value) -> bool:
    """Whether a query cell holds a value (not None, NaN or pd.NA)."""
    try:
        return value is not None and not bool(pd.isna(value))
    except (TypeError, ValueError):  # an array-like cell: given
        return True


def _implied_sequence(model: Mapping) -> tuple[int | None, str | None]:
    """A dense decoder given by ``params``, ``flops_per_sample`` and ``family="decoder"`` but no ``seq_len`` and no
    shape: the sequence length its FLOPs imply for the standard shape of its size
    (:func:`~perfmodel.transformer.sequence_for_flops`), rounded to a multiple of 16 (so that tensor and context
    degrees up to 8 divide it), and the note saying so; ``(None, None)`` otherwise (a mixture of experts, a shape
    given, FLOPs no length between 128 and 2M tokens explains)."""
    family = model.get("family")
    if (not _given(family) or str(family).lower() != "decoder" or _given(model.get("seq_len"))
            or model.get("shape") is not None or any(_given(model.get(k)) for k in SHAPE_NAMES)
            or not _given(model.get("params")) or not _given(model.get("flops_per_sample"))):
        return None, None
    try:
        params = float(model["params"])
        fps = float(model["flops_per_sample"])
        seq = sequence_for_flops(standard_shape(params), fps)
    except (TypeError, ValueError, OverflowError):
        return None, None  # the query's own checks name what is wrong
    if seq is None:
        return None, None
    seq = max(128, 16 * round(seq / 16))
    return seq, (f"seq_len {seq:,}: what flops_per_sample={fps:.4g} implies for a dense decoder of {params:.3g} "
                 "parameters, to a multiple of 16 (FLOPs counted as 6·N·seq without attention imply a length "
                 "10-25% short; give seq_len= to say it)")


def _peaks_known(g: str) -> str:
    spec = get_spec(g)
    return ", ".join(x for x in PRECISIONS if spec.peak_tflops(x) is not None) or "none"


def _check_support(fitted: TrainingTimeModel, q: pd.DataFrame, numbers=None) -> list[str]:
    """Refuse what ``fitted`` cannot answer for the queries ``q`` (``numbers``: each row's 1-based number in the
    caller's queries, for messages); return notes on what it answers by carrying across devices."""
    notes = []
    if fitted.method == LAYOUT_METHOD:  # it prices a transformer's step, which needs the sequence length
        seq = pd.to_numeric(q["seq_len"], errors="coerce") if "seq_len" in q.columns else pd.Series(np.nan,
                                                                                                    index=q.index)
        if seq.isna().any():
            i = int(np.flatnonzero(seq.isna().to_numpy())[0])
            fam = q["family"].iloc[i] if "family" in q.columns else None
            which = "the query" if numbers is None else f"row {int(np.asarray(numbers)[i])} (counting from 1)"
            raise UnsupportedQueryError(
                f"The layout model answers this history's queries, from each transformer job's sequence length "
                f"(seq_len), and {which} gives none"
                f"{'' if fam is None or pd.isna(fam) else f' (family {fam!r})'}. Give the job's seq_len; a model "
                "that is not transformer training needs a history with runs of models like it.")
    feats = fitted.pipeline_.named_steps["features"]
    carries = bool(getattr(feats, "hardware_features_", False))
    configs = fitted.configs_
    ran = (set(zip(configs["gpu_type"].astype(str), configs["precision"].astype(str)))
           if "precision" in configs.columns else None)
    # a GPU device at a precision the runs never used on it is carried through its peak there: it must have one
    for (g, p), _ in q.groupby([q["gpu_type"].astype(str), q["precision"].astype(str)], observed=True):
        if g == "cpu" or (ran is not None and (g, p) in ran and fitted.method != LAYOUT_METHOD):
            continue
        if get_spec(g).peak_tflops(p) is None:
            how = ("the layout model prices GEMMs at the device's peak for the precision" if
                   fitted.method == LAYOUT_METHOD else "step times are carried to it through the device's peaks")
            raise UnsupportedQueryError(
                f"gpu_type {g!r} has no {p} peak in the spec table (it has: {_peaks_known(g)}) and the history has "
                f"no {p} runs on it: {how}. Query a precision the device has, or add runs at {p} on it."
            )
    for g in sorted(map(str, pd.unique(q["gpu_type"]))):
        if g not in fitted.gpu_types_:
            if not carries:
                raise UnsupportedQueryError(
                    f"The history has no runs on gpu_type {g!r} (it has: {', '.join(fitted.gpu_types_)}), and "
                    "with one device type (or devices whose datasheet figures are all the same) the fit cannot "
                    "carry step times across devices. Fit on a history with runs on that device, or on two or "
                    "more devices with known and different peaks."
                )
            notes.append(f"gpu_type {g!r} is not in the history; predicted through hardware peaks")
    for p in sorted(map(str, pd.unique(q["precision"]))):
        if p in fitted.precisions_:
            continue
        have = ", ".join(fitted.precisions_)
        if not carries:
            raise UnsupportedQueryError(
                f"The history has no runs at precision {p!r} (it has: {have}), and its fit does not carry step "
                "times through the devices' peaks (one device type, or devices whose datasheet figures are all "
                "the same). Add runs at that precision, or fit on two or more devices with known peaks."
            )
        how = (f"; gbm's trees do not extrapolate past the peaks of its runs (method='auto' answers it by the "
               f"{PRECISION_TRANSFER_METHOD} rule)" if fitted.method == "gbm" else "")
        notes.append(f"precision {p!r} is not in the history (it has: {have}): a new-device query, answered by "
                     f"{fitted.method} through the devices' peaks at {p}{how}")
    return notes


def default_precision(by_device: dict, gpu_type: str) -> tuple[str, str | None]:
    """The precision a query on ``gpu_type`` that names none is predicted at.

    Parameters
    ----------
    by_device : dict
        :func:`~perfmodel.history.precision_by_device` of the history, optionally with a ``"*gpu*"`` entry (the
        caller's own GPU runs' usual precision).
    gpu_type : str
        The query's device (canonical name).

    Returns
    -------
    precision : str
        What most runs on ``gpu_type`` used (fp8 only where all of them did:
        :func:`~perfmodel.history.precision_by_device`); on a device the history lacks, ``"*gpu*"``'s precision
        where given, else what most of the history's GPU device types used; else (CPU, or no GPU runs) ``fp32``.
    note : str or None
        What was assumed, for the prediction's warnings; None when every run on that device used that precision
        or nothing was assumed.
    """
    if gpu_type in by_device:
        p, unanimous = by_device[gpu_type]
        return p, None if unanimous else (f"precision not given: assumed {p!r}, what most runs on {gpu_type} used"
                                          " (fp8, an opt-in, only where all of them did)")
    if gpu_type != "cpu" and "*gpu*" in by_device:
        p = by_device["*gpu*"][0]
        return p, f"precision not given: assumed {p!r}, what most of your own GPU runs used"
    gpu = [p for g, (p, _) in by_device.items() if g not in ("cpu", "*gpu*")]
    if gpu_type != "cpu" and gpu:
        p = max(set(gpu), key=gpu.count)
        return p, f"precision not given: assumed {p!r}, what most of the history's GPU runs used"
    return "fp32", None


def _prior_note(provenance: list, q: pd.DataFrame, own_devices: set | None = None) -> list[str]:
    """A warning when a GPU prediction rests on the bundled public history: alone (no runs of the user's), or for
    a device type the user's own runs (``own_devices``) do not have."""
    if provenance and all(p.startswith(BUNDLED_PREFIX + "public_") for p in provenance):
        return ["learned from perfmodel's bundled public LLM pre-training history (published runs of tuned "
                "frameworks: NVIDIA Megatron-Bridge, MosaicML LLM Foundry, PyTorch torchtitan, BigScience; "
                "data/README.md); your stack and cluster may be slower. Calibrate with a few runs of your own: history=['my_llm_runs.csv', 'llm']"]
    if not provenance or "bundled:mlperf_steps.csv" not in provenance or set(map(str, q["gpu_type"])) <= {"cpu"}:
        return []
    if all(p.startswith("bundled:") for p in provenance):
        return ["learned from perfmodel's bundled public GPU history (MLPerf Training results: tuned vendor "
                "software, mostly bf16/fp8, plus perfmodel's own measured GPU runs); your stack may be slower. "
                "Calibrate with a few runs of your own: history=['my_runs.csv', 'gpu']"]
    new = sorted(set(map(str, q["gpu_type"])) - set(own_devices or ()) - {"cpu"})
    if not new:
        return []
    return [f"your own runs have no {', '.join(new)}: its speed comes from perfmodel's bundled public GPU history "
            "(tuned vendor software) fitted together with your runs; a run of your own there would settle it"]


def _check_model_sizes(q: pd.DataFrame, table: pd.DataFrame, positions: np.ndarray) -> None:
    """A row naming a model of the history gets that model's size, as :func:`predict_training_time` gives it: an
    empty ``params`` (and an empty ``flops_per_sample`` beside the model's own ``params``) is filled from the
    history; a different ``params`` is refused (it would predict the history's model, not that size). Text that
    is not a number is left for :func:`~perfmodel.schema.check_queries` to refuse."""
    names = q["model"].astype(str)
    known = names.isin(table.index).to_numpy()
    if not known.any():
        return
    hist = table.reindex(names)
    empty = q["params"].isna().to_numpy()
    given = pd.to_numeric(q["params"], errors="coerce").to_numpy(dtype=float)
    ref = hist["params"].to_numpy(dtype=float)
    clash = known & np.isfinite(given) & ~np.isclose(given, ref, rtol=1e-3)
    if clash.any():
        i = int(np.flatnonzero(clash)[0])
        n = int(clash.sum())
        raise ValueError(f"predict_many: row {int(positions[i]) + 1} (counting from 1) names model "
                         f"{names.iloc[i]!r}, which the history has with params {ref[i]:g}, but gives params "
                         f"{given[i]:g}. Leave 'params' empty to predict the history's model, or name the row "
                         f"something the history lacks to predict a model of that size ({n} "
                         f"row{'' if n == 1 else 's'} clash{'es' if n == 1 else ''}).")
    fill = known & empty
    own_size = known & (empty | (np.isfinite(given) & np.isclose(given, ref, rtol=1e-3)))
    if fill.any():  # only the empty cells: text that is not a number stays, for check_queries to name
        q["params"] = q["params"].mask(fill, ref)
    hist_fps = hist["flops_per_sample"].to_numpy(dtype=float)
    if "flops_per_sample" in q.columns:
        fps_empty = q["flops_per_sample"].isna().to_numpy()
        if (own_size & fps_empty).any():
            q["flops_per_sample"] = q["flops_per_sample"].mask(own_size & fps_empty, hist_fps)
    elif own_size.any():
        q["flops_per_sample"] = np.where(own_size, hist_fps, np.nan)
    # the model's family and op counts, as its runs had them, where the row does not give its own
    for col in (c for c in table.columns if c not in ("params", "flops_per_sample", "runs")):
        ref_col = hist[col].to_numpy()
        if col not in q.columns:
            if own_size.any() and pd.notna(ref_col[own_size]).any():
                q[col] = pd.Series(np.where(own_size, ref_col, None), index=q.index).astype(table[col].dtype)
            continue
        empty_cell = q[col].isna().to_numpy()
        if (own_size & empty_cell).any():
            q[col] = q[col].mask(own_size & empty_cell, pd.Series(ref_col, index=q.index))


# ------------------------------------------------------------------------------------------- predictor
def _check_history_type(history, where: str) -> None:
    if not isinstance(history, (type(None), str, os.PathLike, pd.DataFrame, list, tuple, TrainingTimeModel,
                                HistoryStore)):
        raise TypeError(
            f"The 'history' parameter of {where} must be None, a path or store, a DataFrame, a bundled history name, a "
            f"list of these, or a fitted TrainingTimeModel. Got {type(history).__name__} instead."
        )


class BasePredictor:
    """Predict training jobs from one history: read and validated once, fitted lazily for each kind of query.

    :class:`perfmodel.Predictor` is this plus planning and evaluation (``.recommend()``, ``.evaluate()``).

    Parameters
    ----------
    history : None, path, DataFrame, bundled name, list of these, or TrainingTimeModel, default=None
        The runs to learn from (:mod:`perfmodel.history`). None: perfmodel's bundled runs, CPU runs for CPU
        queries and the public GPU history for GPU queries. A fitted :class:`~perfmodel.models.TrainingTimeModel`
        answers every query itself.
    method : {"auto", "physics", "roofline", "loglinear", "gbm", "ops", "linear"}, default="auto"
        ``auto`` chooses, for each kind of query, by the cross-validation split that matches it
        (:mod:`perfmodel.fitting`).
    confidence : float in (0, 1), default=0.9
        Level of the prediction intervals.

    Examples
    --------
    >>> import perfmodel
    >>> p = perfmodel.Predictor("cpu")  # a BasePredictor with .recommend() and .evaluate()
    >>> r = p.predict("gpt-s", batch_size=16, gpu_count=2, gpu_type="cpu", steps=1000)
    >>> r.lower < r.seconds < r.upper
    True
    """

    def __init__(self, history=None, *, method: str = DEFAULT_METHOD, confidence: float = 0.9):
        _check_history_type(history, type(self).__name__)
        self.method = check_choice(method, "method", "Predictor", (*METHODS, "auto"))
        self.confidence = check_confidence(confidence, "Predictor")
        if isinstance(history, TrainingTimeModel):
            history._check()
            if method not in ("auto", history.method):
                raise ValueError(
                    f"The 'method' parameter of Predictor is {method!r} but the fitted model given as history uses "
                    f"{history.method!r}; pass method='auto' or refit.")
        self.history = history
        self._loaded: dict = {}
        self._fits: dict = {}

    # ------------------------------------------------------------------------------------------ history
    def runs(self, source: str | None = None) -> LoadedHistory:
        """The history, read and validated once.

        Parameters
        ----------
        source : {"cpu", "gpu"}, optional
            With ``history=None``, which bundled history; ignored otherwise.

        Returns
        -------
        LoadedHistory
            The runs and their provenance.

        Raises
        ------
        TypeError
            When this Predictor answers from a fitted model (it has no runs).
        """
        if isinstance(self.history, TrainingTimeModel):
            raise TypeError("This Predictor answers from a fitted model; it has no runs.")
        key = source if self.history is None else None
        if key not in self._loaded:
            self._loaded[key] = read_history(source if self.history is None else self.history)
        return self._loaded[key]

    def own(self, source: str | None = None) -> LoadedHistory | None:
        """The caller's own runs, when the history mixes them with perfmodel's bundled runs.

        Parameters
        ----------
        source : {"cpu", "gpu"}, optional
            As in :meth:`runs`.

        Returns
        -------
        LoadedHistory or None
            The caller's runs alone (:meth:`~perfmodel.history.LoadedHistory.own_runs`); None when the history
            does not mix them, is None or is a fitted model.
        """
        if isinstance(self.history, TrainingTimeModel) or self.history is None:
            return None
        files = self._files(source)
        if files is not None and not files.mixed:  # known from the file names, without reading the runs
            return None
        loaded = self.runs(source)
        if not loaded.mixed:
            return None
        if ("own", source) not in self._loaded:
            self._loaded[("own", source)] = loaded.own_runs()
        return self._loaded[("own", source)]

    def _own_layout_runs(self, source) -> int:
        """How many of the caller's own runs are transformer training with a layout (0 without own runs)."""
        own = self.own(source)
        return 0 if own is None else int(is_layout_job(own.runs).sum())

    def _answered_by_own(self, rows: pd.DataFrame, source) -> tuple[np.ndarray, np.ndarray | None]:
        """Per row: whether the caller's own runs answer it alone, and its kind with respect to them. They do when
        there are at least :data:`MIN_OWN_RUNS` and the row's device type is in them — the bundled runs inform only
        a device the caller has not run on — and, for a model they lack, when they hold enough models to score
        a new one (:data:`perfmodel.models._conformal.MIN_GROUPS`)."""
        own = self.own(source)
        if own is None:
            return np.zeros(len(rows), dtype=bool), None
        kinds = classify(own.runs, rows)
        models_enough = own.runs["model"].nunique() >= MIN_GROUPS
        answer = (kinds != "new_device") & ((kinds != "new_model") | models_enough)
        answer &= len(own.runs) >= MIN_OWN_RUNS
        if self.method == "auto" and self._own_layout_runs(source):
            # transformer training: the layout model calibrated on the own runs answers it, whatever their count
            # (the bundled LLM history's coefficients are the prior; the error book sizes the interval)
            layout_rows = is_layout_job(rows)
            answer = np.where(layout_rows, True, answer)
            if self._own_layout_runs(source) == len(own.runs):  # their fit is the layout model: only such jobs
                answer &= layout_rows
        return answer, kinds

    def model(self, kind: str = "seen", source: str | None = None, *, own: bool = False,
              method: str | None = None) -> TrainingTimeModel:
        """The model fitted for queries of ``kind``, fitted on first use (through the disk cache for files).

        Parameters
        ----------
        kind : str, default="seen"
            The kind of query (:data:`~perfmodel.kinds.KIND_NAMES`).
        source : {"cpu", "gpu"}, optional
            As in :meth:`runs`.
        own : bool, default=False
            Fit on the caller's own runs alone (a history that mixes them with bundled runs; ValueError
            otherwise).
        method : str, optional
            Fit this method on the whole history instead of the Predictor's (what answers a precision transfer
            under ``auto``: :data:`~perfmodel.fitting.PRECISION_TRANSFER_METHOD`).

        Returns
        -------
        TrainingTimeModel
            The fitted model (the given one, when this Predictor answers from a fitted model).
        """
        if isinstance(self.history, TrainingTimeModel):
            return self.history
        check_choice(kind, "kind", "Predictor.model", KIND_NAMES)
        if self.history is None and source is None:
            raise ValueError("Predictor.model: this Predictor has no history of its own (history=None): name the "
                             "bundled one to fit, source='cpu', 'gpu' or 'llm'.")
        if method is not None:
            check_choice(method, "method", "Predictor.model", METHODS)
            key = ("method", method, source if self.history is None else None, kind)
            files = self._files(key[2]) if key not in self._fits else None
            if files is not None and not files.mixed:  # shipped or in the disk cache: nothing parsed
                stored = stored_fit(files.digest, method, kind)
                if stored is not None:
                    stored.provenance_ = list(files.labels)
                    self._fits[key] = stored
            if key not in self._fits:
                loaded = self.runs(key[2])
                paths = all(isinstance(p, (str, os.PathLike)) for p in history_parts(
                    self.history if self.history is not None else source))
                fitted = fit_cached(loaded, method, kind) if paths else fit_history(loaded, method, kind=kind)
                fitted.provenance_ = list(loaded.labels)
                self._fits[key] = fitted
            return self._fits[key]
        key = (source if self.history is None else None, kind, bool(own))
        if key not in self._fits and not own:
            stored = self._stored(kind, key[0])
            if stored is not None:
                self._fits[key] = stored
        if key not in self._fits:
            loaded = self.runs(key[0])
            if own:
                if self.own(key[0]) is None:
                    raise ValueError("Predictor.model(own=True): the history does not mix own and bundled runs.")
                loaded = self.own(key[0])
            method = self._method(key[0], loaded)
            if method == LAYOUT_METHOD and self.history is not None:
                fitted = _calibrated_layout(loaded, kind)
            elif all(isinstance(p, (str, os.PathLike)) for p in history_parts(self.history if self.history
                                                                                is not None else source)):
                fitted = fit_cached(loaded, method, kind)
            else:
                fitted = fit_history(loaded, method, kind=kind)
            fitted.provenance_ = list(loaded.labels)
            self._fits[key] = fitted
        return self._fits[key]

    def _layout_history(self) -> bool:
        """Whether a history of the caller's own is answered by the layout model (a fitted layout model given as
        the history, ``method="layout"``, or under ``auto`` runs that are all transformer training with a layout;
        in a history that mixes them with bundled runs, the own runs): a decoder given by its size and FLOPs then
        gets the sequence its FLOPs imply, as out of the box. Worked out once (it reads the runs)."""
        if self.history is None:
            return False
        if isinstance(self.history, TrainingTimeModel):
            return self.history.method == LAYOUT_METHOD
        if self.method not in ("auto", LAYOUT_METHOD):
            return False
        if ("layout history",) not in self._loaded:
            files = self._files(None)
            stored = self._stored("seen", None) if files is not None and not files.mixed else None
            if stored is not None:  # a fit stored for these files says which method answers, with nothing parsed
                self._loaded[("layout history",)] = stored.method == LAYOUT_METHOD
                return self._loaded[("layout history",)]
            loaded = self.runs(None)
            own = self.own(None) if loaded.mixed else None
            self._loaded[("layout history",)] = (self._method(None, loaded) == LAYOUT_METHOD or (
                own is not None and len(own.runs) > 0 and bool(is_layout_job(own.runs).all())))
        return self._loaded[("layout history",)]

    def _method(self, source, loaded: LoadedHistory | None = None) -> str:
        """The method that answers: ``auto`` is the layout model (:data:`LAYOUT_METHOD`) for the bundled LLM
        history, and for a history whose runs are all transformer training with a layout
        (:func:`~perfmodel.layout.is_layout_job`); else the Predictor's method."""
        if self.method != "auto":
            return self.method
        if source == "llm" or (loaded is not None and len(loaded.runs) and bool(is_layout_job(loaded.runs).all())):
            return LAYOUT_METHOD
        return self.method

    def fit(self, kind: str = "seen") -> TrainingTimeModel:
        """The model for queries of ``kind`` on this history.

        Parameters
        ----------
        kind : str, default="seen"
            The kind of query (:data:`~perfmodel.kinds.KIND_NAMES`).

        Returns
        -------
        TrainingTimeModel
            :meth:`model` for that kind (``history=None``: on the bundled CPU runs).
        """
        return self.model(kind, "cpu" if self.history is None else None)

    # ------------------------------------------------------------------ answers without reading the runs
    def _files(self, source) -> HistoryFiles | None:
        """The history's labels and content digest from its files' bytes, taken once
        (:func:`~perfmodel.history.peek_history`); None when it is not made of files only."""
        key = ("files", source if self.history is None else None)
        if key not in self._loaded:
            self._loaded[key] = peek_history(source if self.history is None else self.history)
        return self._loaded[key]

    def _stored(self, kind: str, source) -> TrainingTimeModel | None:
        """The model :meth:`model` gives for ``kind`` when one is stored for these files, shipped or in the
        disk cache (:func:`~perfmodel.fitting.stored_fit`, by the files' digest: nothing parsed); None when
        none is, or when the history is not made of files only or mixes own and bundled runs (which
        :meth:`own` splits)."""
        files = self._files(source)
        if files is None or files.mixed:
            return None
        fitted = stored_fit(files.digest, self._method(source if self.history is None else None), kind)
        if fitted is not None:
            fitted.provenance_ = list(files.labels)
        return fitted

    def _reference(self, source) -> TrainingTimeModel | None:
        """While the runs are unread: a stored model fitted on them (:meth:`_stored`; a fit keeps the runs'
        model table, precisions and configurations as ``models_``, ``precision_by_device_`` and ``configs_``),
        which then answers for the runs. None once they are read, or when no model is stored."""
        src = source if self.history is None else None
        if isinstance(self.history, TrainingTimeModel) or src in self._loaded:
            return None
        for key, fitted in self._fits.items():
            if len(key) == 3 and key[0] == src and not key[2]:
                return fitted
        if ("reference", src) not in self._loaded:  # looked up once: None means the runs are read
            self._loaded[("reference", src)] = self._stored("seen", src)
            if self._loaded[("reference", src)] is not None:
                self._fits[(src, "seen", False)] = self._loaded[("reference", src)]
        return self._loaded[("reference", src)]

    def _kinds(self, source, rows: pd.DataFrame) -> np.ndarray:
        """The kind of each row with respect to the history's runs (:func:`~perfmodel.kinds.classify`)."""
        ref = self._reference(source)
        return ref.query_kinds(rows) if ref is not None else classify(self.runs(source).runs, rows)

    def _table(self, source) -> pd.DataFrame:
        if isinstance(self.history, TrainingTimeModel):
            return self.history.models_
        key = ("table", source)
        if key not in self._fits:
            ref = self._reference(source)
            self._fits[key] = ref.models_.copy() if ref is not None else model_table(self.runs(source).runs)
        return self._fits[key]

    def _by_device(self, source) -> dict:
        """Per device type: the precision its runs used. With own runs beside bundled ones, the own runs' say
        first (the caller's stack), then the bundled runs' for devices the own runs lack — unless the own runs
        have GPU runs, whose usual precision is then assumed for every GPU they lack (``"*gpu*"``)."""
        if isinstance(self.history, TrainingTimeModel):
            return self.history.precision_by_device_
        key = ("precision", source)
        ref = self._reference(source) if key not in self._fits else None
        if ref is not None:  # a history that does not mix own and bundled runs (_stored)
            self._fits[key] = dict(ref.precision_by_device_)
        if key not in self._fits:
            by = precision_by_device(self.runs(source).runs)
            own = self.own(source)
            if own is not None:
                mine = precision_by_device(own.runs)
                gpu = [p for g, (p, _) in mine.items() if g != "cpu"]
                by = {**by, **mine}
                if gpu:
                    by["*gpu*"] = (max(set(gpu), key=gpu.count), False)
            self._fits[key] = by
        return self._fits[key]

    def max_batch(self, gpu_type: str) -> int:
        """The largest per-device batch in the runs a query on ``gpu_type`` is predicted from.

        Parameters
        ----------
        gpu_type : str
            The device (any alias).

        Returns
        -------
        int
            The largest ``batch_size`` of those runs (of the fitted model's domain, for a fitted model).
        """
        if isinstance(self.history, TrainingTimeModel):
            return int(self.history.domain_.loc["batch_size", "max"])
        source = self._source_of(resolve_gpu_type(gpu_type))
        return int(pd.to_numeric(self.runs(source).runs["batch_size"]).max())

    def _source_of(self, gpu_type: str, query: dict | None = None) -> str | None:
        if self.history is not None:
            return None
        return default_history(pd.DataFrame([{**(query or {}), "gpu_type": gpu_type}]))

    # ------------------------------------------------------------------------------------------ predict
    def predict(self, model, *, batch_size=None, gpu_count=1, gpu_type, steps=None, epochs=None, dataset_size=None,
                precision=None, example_input=None, seq_len=None, global_batch=None, layout=None,
                gpus_per_node=None, inter_node_gbps=None) -> "TrainingTimePrediction":
        """Predict the wall-clock time of one training job (as :func:`predict_training_time`).

        Parameters
        ----------
        model : str, dict or torch.nn.Module
            A model name in the history, a dict with ``params`` (and optionally ``flops_per_sample``, a family, a
            transformer's shape), or a module with ``example_input``.
        batch_size : int, optional
            Per-device batch size (or give ``global_batch``).
        gpu_count : int, default=1
            Devices (on CPU, worker processes).
        gpu_type : str
            Device name (any alias in :mod:`perfmodel.hardware`).
        steps : int, optional
            Optimizer steps; or give ``epochs`` and ``dataset_size``.
        epochs, dataset_size : int, optional
            The amount of work instead of ``steps``.
        precision : {"fp32", "tf32", "fp16", "bf16", "fp8"}, optional
            Default: what most of the history's runs on this device type used (:func:`default_precision`).
        example_input : torch.Tensor, optional
            One sample, without the batch dimension, when ``model`` is a module.
        seq_len : int, optional
            Tokens per sequence of transformer training (also accepted in a model dict).
        global_batch : int, optional
            Sequences per optimizer step over all devices, instead of ``batch_size``.
        layout : ParallelLayout or dict, optional
            The parallel layout of transformer training (:class:`perfmodel.layout.ParallelLayout`); default data
            parallel over every device, no accumulation.
        gpus_per_node : int, optional
            Devices per node (NVLink domain); default 8.
        inter_node_gbps : float, optional
            The cluster's network per device, GB/s one way; default the spec table's reference system's.

        Returns
        -------
        TrainingTimePrediction
            The predicted time, its interval and what it rests on.
        """
        gpu_count = check_positive_int(gpu_count, "gpu_count", _WHERE)
        if (batch_size is None) == (global_batch is None):
            raise ValueError(f"{_WHERE} needs the batch: 'batch_size' (per device) or 'global_batch' (all devices), "
                             f"one of them. Got batch_size={batch_size!r}, global_batch={global_batch!r}.")
        if global_batch is not None:
            global_batch = check_positive_int(global_batch, "global_batch", _WHERE)
        else:
            batch_size = check_positive_int(batch_size, "batch_size", _WHERE)
            global_batch = batch_size * gpu_count
        if precision is not None:
            check_precision(precision, _WHERE)
        canonical = resolve_gpu_type(gpu_type)
        n_steps = _steps(steps, epochs, dataset_size, global_batch, 1)
        job = {} if seq_len is None else {"seq_len": check_positive_int(seq_len, "seq_len", _WHERE)}
        sized = []
        if canonical != "cpu" and seq_len is None and isinstance(model, Mapping):
            implied, note = _implied_sequence(model)  # out of the box a decoder is answered by the layout model
            if implied is not None and ((self.history is None and self.method == "auto") or self._layout_history()):
                model = {**model, "seq_len": implied}
                sized.append(note)
        if (isinstance(model, Mapping) and (seq_len is not None or model.get("seq_len") is not None)
                and model.get("shape") is None and not any(model.get(k) is not None for k in SHAPE_NAMES)
                and model.get("params") is not None and str(model.get("family", "decoder")).lower() == "decoder"):
            # a transformer job given by its size: the standard decoder shape of that size (as plan_llm_job does)
            shape = standard_shape(check_positive_float(model["params"], "params", _WHERE))
            model = {**model, "shape": shape}
            sized.append(f"a decoder of {float(model['params']):.3g} parameters given by its size: the standard "
                         f"shape of that size ({shape.n_layers} layers, width {shape.d_model})")
        if isinstance(model, Mapping):
            given = dict(model)
            if isinstance(given.get("shape"), TransformerShape):
                given = {**shape_columns(given["shape"]), "family": "decoder", **given}
            job = {**{k: given[k] for k in ("seq_len", "family", *SHAPE_NAMES) if given.get(k) is not None}, **job}
        wants_layout = layout is not None or "seq_len" in job
        source = self._source_of(canonical, job if wants_layout else None)
        if source == "llm" or (self.history is None and wants_layout and isinstance(model, str)
                               and canonical != "cpu"):
            source = "llm" if isinstance(model, Mapping) or model in self._table("llm").index else source
        assumed = sized
        if precision is None:
            precision, note = default_precision(self._by_device(source), canonical)
            assumed += [note] if note else []
        if isinstance(model, Mapping) and "seq_len" in job and model.get("seq_len") is None:
            model = {**model, "seq_len": job["seq_len"]}  # a shape's FLOPs and attention share need the sequence
        spec = model_spec(model, example_input, self._table(source))
        row = {**spec, "gpu_count": gpu_count, "gpu_type": canonical, "precision": precision.lower(),
               "steps": n_steps,  # per device: whole where it divides (a model-parallel share may be a fraction)
               "batch_size": global_batch // gpu_count if global_batch % gpu_count == 0 else global_batch / gpu_count}
        if wants_layout or layout is not None or gpus_per_node is not None or inter_node_gbps is not None:
            row.update(layout_columns(row, seq_len=job.get("seq_len"), global_batch=global_batch, layout=layout,
                                      gpus_per_node=gpus_per_node, inter_node_gbps=inter_node_gbps, where=_WHERE))
            assumed += row.pop("_assumed")
            shape = model.get("shape") if isinstance(model, Mapping) else None
            if (isinstance(shape, TransformerShape) and model.get("flops_per_sample") is None
                    and row.get("recompute", "none") != "none"):
                # the work the devices do: recomputation runs the attention's forward (a third of it) again
                f = transformer_flops(shape, row["seq_len"], recompute=row["recompute"])
                attention = f.attention * 4 / 3
                row.update(flops_per_sample=f.hardware, op_attention_flops=attention,
                           op_matmul_flops=f.hardware - attention)
        elif global_batch % gpu_count:
            raise ValueError(f"{_WHERE}: global_batch {global_batch} does not divide over {gpu_count} devices; "
                             "give the model-parallel layout (layout=) of such a job.")
        q = pd.DataFrame([row])
        check_queries(q, _WHERE)
        if self._shifted_rows(q, source)[0]:
            return self._shifted_prediction(q, source, n_steps, assumed)
        fitted, kind = self._fitted_for(q, source)
        provenance = list(getattr(fitted, "provenance_", []) or [])
        notes = _check_support(fitted, q) + _domain_warnings(fitted, q)[0]
        res = _predict_frame(fitted, q, self.confidence).iloc[0]
        parts = fitted.breakdown(q)
        breakdown = {} if parts is None else {k: float(v) for k, v in parts.iloc[0].items()}
        prior_note = _prior_note(provenance, q, self._own_devices(source))
        for note in notes:
            warnings.warn(f"{_WHERE}: {note}.", ExtrapolationWarning, stacklevel=3)
        for note in prior_note:
            warnings.warn(f"{_WHERE}: {note}.", DataQualityWarning, stacklevel=3)
        return TrainingTimePrediction(
            seconds=float(res["seconds"]), lower=float(res["lower"]), upper=float(res["upper"]),
            confidence=self.confidence, step_seconds=float(res["step_time_s"]), step_lower=float(res["step_lower"]),
            step_upper=float(res["step_upper"]), steps=n_steps, startup_seconds=float(fitted.startup_s_),
            r2=float(fitted.rsquared_), r2_log=float(fitted.rsquared_log_), cv_mape=float(fitted.cv_mape_),
            method=fitted.method, n_runs=int(fitted.n_runs_), inside_domain=not notes,
            nearest_run_distance=float(res["nearest_run_distance"]),
            query={k: v for k, v in q.iloc[0].items()}, warnings=assumed + notes + prior_note,
            provenance=provenance, query_kind=str(res["query_kind"]), interval_rule=str(res["interval_rule"]),
            peak_basis=str(res.get("peak_basis", "")), breakdown=breakdown,
        )

    def _shifted_prediction(self, q: pd.DataFrame, source, n_steps: int, assumed: list) -> "TrainingTimePrediction":
        """:meth:`predict`'s answer for a row the shifted prior answers (:meth:`_shifted_rows`)."""
        prior, shift = self.prior(source), self.shift(source)
        asked = _prior_queries(q, prior)
        fitted, _ = prior._fitted_for(asked, None)  # the prior's fit for this row: its statistics, its checks
        res = self._shifted_frame(q, source, positions=np.arange(1)).iloc[0]
        notes = _check_support(fitted, asked) + _domain_warnings(fitted, asked)[0]
        factor = float(np.exp(shift.offset(q["gpu_type"].astype(str).to_numpy(),
                                           q["model"].astype(str).to_numpy() if "model" in q.columns else None)[0]))
        parts = fitted.breakdown(asked)
        breakdown = {} if parts is None else {k: float(v) * factor for k, v in parts.iloc[0].items()}
        provenance = list(self.own(source).labels) + list(getattr(fitted, "provenance_", []) or [])
        prior_note = _prior_note(provenance, q, self._own_devices(source))
        for note in notes:
            warnings.warn(f"{_WHERE}: {note}.", ExtrapolationWarning, stacklevel=4)
        for note in prior_note:
            warnings.warn(f"{_WHERE}: {note}.", DataQualityWarning, stacklevel=4)
        return TrainingTimePrediction(
            seconds=float(res["seconds"]), lower=float(res["lower"]), upper=float(res["upper"]),
            confidence=self.confidence, step_seconds=float(res["step_time_s"]), step_lower=float(res["step_lower"]),
            step_upper=float(res["step_upper"]), steps=n_steps,
            startup_seconds=float(res["seconds"] - n_steps * res["step_time_s"]),
            r2=float(fitted.rsquared_), r2_log=float(fitted.rsquared_log_), cv_mape=float(fitted.cv_mape_),
            method=fitted.method, n_runs=int(fitted.n_runs_) + shift.n, inside_domain=not notes,
            nearest_run_distance=float(res["nearest_run_distance"]),
            query={k: v for k, v in q.iloc[0].items()}, warnings=assumed + notes + prior_note,
            provenance=provenance, query_kind=str(res["query_kind"]), interval_rule=str(res["interval_rule"]),
            peak_basis=str(res.get("peak_basis", "")), breakdown=breakdown,
        )

    def _own_startup(self, source) -> float | None:
        """The own runs' median time to first step, where they record it (None otherwise): a shifted answer's
        startup is the caller's, not the bundled stack's."""
        own = self.own(source)
        if own is None or "startup_s" not in own.runs.columns:
            return None
        startup = pd.to_numeric(own.runs["startup_s"], errors="coerce").dropna()
        return float(startup.median()) if len(startup) else None

    def _own_devices(self, source) -> set | None:
        own = self.own(source)
        return None if own is None else set(map(str, pd.unique(own.runs["gpu_type"])))

    # ------------------------------------------------------------------------------------ shifted prior
    def prior(self, source: str | None = None) -> "BasePredictor | None":
        """The bundled parts of a history that mixes them with the caller's own runs, as a Predictor of their own:
        the prior the own runs shift (:meth:`shift`).

        Parameters
        ----------
        source : {"cpu", "gpu"}, optional
            As in :meth:`runs`.

        Returns
        -------
        BasePredictor or None
            None when the history does not mix own and bundled runs.
        """
        if self.own(source) is None:
            return None
        if ("prior", source) not in self._loaded:
            parts = [part for part in history_parts(self.history) if part_label(part).startswith(BUNDLED_PREFIX)]
            self._loaded[("prior", source)] = _predictor(parts, self.method, self.confidence, type(self).__name__)
        return self._loaded[("prior", source)]

    def shift(self, source: str | None = None) -> StackShift | None:
        """How far the caller's own runs sit from the bundled runs' answers (:class:`perfmodel.models.StackShift`):
        each own run asked of :meth:`prior` as a query, its log residual, shrunk per device type toward the shift
        over all of them and that toward none. Under ``auto`` the runs of transformer training with a layout are
        left out (the layout model calibrated on them answers such jobs).

        Parameters
        ----------
        source : {"cpu", "gpu"}, optional
            As in :meth:`runs`.

        Returns
        -------
        StackShift or None
            None when the history does not mix own and bundled runs.
        """
        prior = self.prior(source)
        if prior is None:
            return None
        if ("shift", source) not in self._loaded:
            runs = self.own(source).runs
            if self.method == "auto":
                runs = runs.loc[~is_layout_job(runs)]
            residuals = np.full(len(runs), np.nan)
            if len(runs):
                asked = _prior_queries(runs.reset_index(drop=True), prior).assign(steps=1)
                residuals = np.log(runs["step_time_s"].to_numpy(dtype=float) / _prior_steps(prior, asked))
            self._loaded[("shift", source)] = StackShift.fit(residuals, runs["gpu_type"].astype(str).to_numpy(),
                                                             runs["model"].astype(str).to_numpy())
        return self._loaded[("shift", source)]

    def _shifted_rows(self, rows: pd.DataFrame, source) -> np.ndarray:
        """Per row of a history that mixes own and bundled runs: whether the bundled answer shifted by the own runs
        (:meth:`shift`) answers it. Only a row the own runs would answer alone (:meth:`_answered_by_own`) can be:
        it is where their own fit is not better on its record — the log half-width of its 50% interval for the
        row, against the shifted prior's leave-one-model-out record (:meth:`perfmodel.models.StackShift.record`)
        — or cannot answer it or bound it at the Predictor's confidence (too few of its scores), and the prior
        can price the row. Rows the own runs do not answer alone (a device type they lack, too few of them, a
        model they lack when they hold fewer than :data:`~perfmodel.models._conformal.MIN_GROUPS`) keep the
        pooled fit; transformer training with a layout under ``auto`` is the layout model's,
        calibrated on the own runs. Each row is decided on its own, so the answer does not depend on the other
        rows asked with it."""
        if self.own(source) is None:
            return np.zeros(len(rows), dtype=bool)
        by_own, own_kinds = self._answered_by_own(rows, source)
        layout = (is_layout_job(rows) if self.method == "auto" and self._own_layout_runs(source)
                  else np.zeros(len(rows), dtype=bool))
        shifted = np.zeros(len(rows), dtype=bool)
        candidates = by_own & ~layout
        if not candidates.any():
            return shifted
        record = self.shift(source).record()
        if not math.isfinite(record):
            return shifted
        for kind in pd.unique(own_kinds[candidates]):
            at = np.flatnonzero(candidates & (own_kinds == kind))
            own_fit = self.model(str(kind), source, own=True)
            if own_fit.method == LAYOUT_METHOD:
                continue
            score, bounded = _own_scores(own_fit, rows.iloc[at], self.confidence)
            # the own fit answers where it can, its record is better and it can bound the row at this confidence
            shifted[at] = ~(score < record) | ~bounded
        if shifted.any():  # and the prior must be able to price the row (a precision or device it cannot: own fit)
            at = np.flatnonzero(shifted)
            prior = self.prior(source)
            shifted[at] = np.isfinite(_prior_steps(prior, _prior_queries(rows.iloc[at], prior).assign(steps=1)))
        return shifted

    def _shifted_frame(self, q: pd.DataFrame, source, *, positions: np.ndarray) -> pd.DataFrame:
        """:data:`PREDICTION_COLUMNS` of rows the shifted prior answers: the prior's answer times the own runs'
        shift, the interval from :meth:`perfmodel.models.StackShift.half_width`."""
        prior, shift = self.prior(source), self.shift(source)
        p = prior.predict_many(_prior_queries(q, prior), _positions=positions)
        devices = q["gpu_type"].astype(str).to_numpy()
        models = q["model"].astype(str).to_numpy() if "model" in q.columns else None
        factor = np.exp(shift.offset(devices, models))
        half = shift.half_width(devices, self.confidence)
        step = p["step_time_s"].to_numpy(dtype=float) * factor
        steps = p["steps"].to_numpy(dtype=float)
        startup = self._own_startup(source)
        if startup is None:  # the own runs do not record it: the prior's
            startup = p["seconds"].to_numpy(dtype=float) - steps * p["step_time_s"].to_numpy(dtype=float)
        out = p.copy()
        out["step_time_s"] = step
        out["step_lower"] = step * np.exp(-half)
        out["step_upper"] = step * np.exp(half)
        out["seconds"] = startup + steps * step
        out["lower"] = startup + steps * out["step_lower"].to_numpy()
        out["upper"] = startup + steps * out["step_upper"].to_numpy()
        out["interval_rule"] = f"{shift.describe()}; " + p["interval_rule"].astype(str)
        out.index = q.index
        return out

    def _fitted_for(self, q: pd.DataFrame, source) -> tuple[TrainingTimeModel, str | None]:
        """The model answering a one-row query, and the row's kind: by the caller's own runs where they answer
        it alone (:meth:`_answered_by_own`), else by the whole history's runs."""
        if isinstance(self.history, TrainingTimeModel):
            return self.history, None
        by_own, own_kinds = self._answered_by_own(q, source)
        if by_own[0]:
            kind = str(own_kinds[0])
            return self.model(kind, source, own=True), kind
        kind = str(self._kinds(source, q)[0])
        fitted = self.model(kind, source)
        if self._new_precision(q, source, fitted)[0]:
            return self.model(kind, source, method=PRECISION_TRANSFER_METHOD), kind
        return fitted, kind

    def _new_precision(self, rows: pd.DataFrame, source, fitted: TrainingTimeModel) -> np.ndarray:
        """Per row: whether ``auto`` hands it to :data:`~perfmodel.fitting.PRECISION_TRANSFER_METHOD` — its precision is one no run
        of the history used, and ``fitted`` (the model its kind gets) is not the layout model, which prices every
        precision from the datasheet itself."""
        if self.method != "auto" or fitted.method in (LAYOUT_METHOD, PRECISION_TRANSFER_METHOD):
            return np.zeros(len(rows), dtype=bool)
        return ~rows["precision"].astype(str).isin(fitted.precisions_).to_numpy()

    def predict_many(self, queries: pd.DataFrame, *, _positions=None) -> pd.DataFrame:
        """Predict many configurations at once (as :func:`predict_many`).

        Parameters
        ----------
        queries : pandas.DataFrame
            One row per configuration (the columns :func:`predict_many` describes).

        Returns
        -------
        pandas.DataFrame
            :data:`PREDICTION_COLUMNS`, aligned with ``queries``.
        """
        if not isinstance(queries, pd.DataFrame):
            raise TypeError(f"predict_many expects a DataFrame of queries. Got {type(queries).__name__}.")
        if len(queries) == 0:
            raise ValueError("predict_many got an empty DataFrame of queries.")
        positions = np.arange(len(queries)) if _positions is None else np.asarray(_positions)
        q = queries.copy()
        if "attention_flops_per_sample" in q.columns:  # as in a model spec: the op split the mfu rule reads
            both = [c for c in ("op_attention_flops", "op_matmul_flops") if c in q.columns]
            if both:
                raise ValueError(f"predict_many got 'attention_flops_per_sample' and {both[0]!r}: give the attention "
                                 "FLOPs one way (the op columns, or attention_flops_per_sample with "
                                 "flops_per_sample).")
            attn = pd.to_numeric(q.pop("attention_flops_per_sample"), errors="coerce").to_numpy(dtype=float)
            given = np.flatnonzero(~np.isnan(attn))
            wrong = given[~(np.isfinite(attn[given]) & (attn[given] >= 0))]
            if len(wrong):
                raise ValueError(f"predict_many: 'attention_flops_per_sample' must be a finite number >= 0 where "
                                 f"given; {row_label(int(wrong[0]), positions + 1)} has {float(attn[wrong[0]])!r}.")
            fps = (pd.to_numeric(q["flops_per_sample"], errors="coerce").to_numpy(dtype=float)
                   if "flops_per_sample" in q.columns else np.full(len(q), np.nan))
            dense = np.full(len(q), np.nan)
            dense[given] = _dense_part(attn[given], fps[given], "predict_many's queries", positions[given] + 1)
            q["op_attention_flops"], q["op_matmul_flops"] = attn, dense
        if "gpu_type" not in q.columns:
            raise SchemaError("predict_many needs a 'gpu_type' column in the queries.")
        codes, uniq = pd.factorize(q["gpu_type"])
        if (codes < 0).any():
            raise SchemaError(f"predict_many: column 'gpu_type' is missing in {int((codes < 0).sum())} rows.")
        resolved = [resolve_gpu_type(str(g)) for g in uniq]
        names = list(dict.fromkeys(resolved))  # aliases may resolve to one device
        remap = np.asarray([names.index(r) for r in resolved])
        q["gpu_type"] = pd.Categorical.from_codes(remap[codes], categories=names)  # no per-row string copies
        on_cpu = (q["gpu_type"].astype(str) == "cpu").to_numpy()
        if (self.history is None and self.method == "auto") or (_sized_decoders(q, ~on_cpu).any()
                                                                and self._layout_history()):
            _fill_implied_sequences(q, ~on_cpu)
        if self.history is None:  # each row from the bundled runs of its own kind: CPU, LLM training, other GPU
            llm = ~on_cpu & is_layout_job(q)
            sources = np.where(on_cpu, "cpu", np.where(llm, "llm", "gpu"))
            kinds = [src for src in ("cpu", "llm", "gpu") if (sources == src).any()]
            if len(kinds) > 1:
                parts = [self._predict_source(queries.iloc[np.flatnonzero(sources == src)],
                                              q.iloc[np.flatnonzero(sources == src)],
                                              positions[np.flatnonzero(sources == src)], src) for src in kinds]
                out = pd.concat(parts)
                order = np.argsort(np.concatenate([np.flatnonzero(sources == src) for src in kinds]), kind="stable")
                return out.iloc[order]
            return self._predict_source(queries, q, positions, kinds[0])
        return self._predict_source(queries, q, positions, None)

    def _predict_source(self, queries, q, positions, source) -> pd.DataFrame:
        table = self._table(source)
        if "params" not in q.columns:
            if "model" not in q.columns:
                raise SchemaError("predict_many needs a 'params' or a 'model' column in the queries.")
            unknown = sorted(set(map(str, pd.unique(q["model"]))) - set(table.index))
            if unknown:
                raise UnsupportedQueryError(f"predict_many: models not in the history: {', '.join(unknown[:5])}.")
            codes, uniq = pd.factorize(q["model"].astype(str))
            rows = table.loc[[str(u) for u in uniq]]
            for col in (c for c in rows.columns if c != "runs" and (c in ("params", "flops_per_sample")
                                                                    or c not in q.columns)):
                q[col] = rows[col].to_numpy()[codes]
        elif "model" in q.columns:
            _check_model_sizes(q, table, positions)
        q["gpu_count"] = q["gpu_count"] if "gpu_count" in q.columns else 1
        check_queries(q, "predict_many", positions)
        _fill_precision(q, self._by_device(source), positions)
        for col in ("params", "batch_size", "gpu_count", "steps"):
            if col not in q.columns:
                raise SchemaError(f"predict_many needs a {col!r} column in the queries.")
            vals = pd.to_numeric(q[col], errors="coerce").to_numpy(dtype=float)
            bad = ~(np.isfinite(vals) & (vals > 0))
            if bad.any():
                raise ValueError(f"predict_many: column {col!r} must be finite and positive; {int(bad.sum())} "
                                 f"rows are not (first: row {int(positions[np.flatnonzero(bad)[0]]) + 1}, "
                                 "counting from 1).")
        first, inverse = _distinct_rows(q, skip=("steps",))  # the steps only scale the per-step prediction
        rows = q.iloc[first]
        if isinstance(self.history, TrainingTimeModel):
            fits, kinds = {None: self.history}, np.full(len(rows), None, dtype=object)
        else:  # each row as predict_training_time answers it alone: the fit chosen for its own kind of query
            by_own, own_kinds = self._answered_by_own(rows, source)
            kinds = self._kinds(source, rows).astype(object)
            if by_own.any():
                kinds[by_own] = own_kinds[by_own]
            keys = np.where(by_own, np.char.add("own:", kinds.astype(str)), kinds.astype(str)).astype(object)
            keys[self._shifted_rows(rows, source)] = _SHIFTED  # the bundled answer shifted by the own runs
            fits = {}
            for k in sorted(set(keys.tolist()) - {_SHIFTED}, key=lambda k: (k.startswith("own:"), KIND_NAMES.index(
                    k.removeprefix("own:")))):
                fits[k] = self.model(k.removeprefix("own:"), source, own=k.startswith("own:"))
            if (keys == _SHIFTED).any():
                fits[_SHIFTED] = None
            for k in [k for k in fits if k != _SHIFTED]:  # a precision no run used: the rule chosen for it answers
                at = np.flatnonzero(keys == k)
                moved = at[self._new_precision(rows.iloc[at], source, fits[k])] if not k.startswith("own:") \
                    else at[:0]
                if len(moved):
                    keys[moved] = f"precision:{k}"
                    fits[f"precision:{k}"] = self.model(k, source, method=PRECISION_TRANSFER_METHOD)
            fits = {k: fit for k, fit in fits.items() if k in set(keys.tolist())}
            kinds = keys
        pieces = []
        row_kind = kinds[inverse]
        for kind, fitted in fits.items():
            take = np.flatnonzero(row_kind == kind) if kind is not None else np.arange(len(q))
            if kind == _SHIFTED:
                part = self._shifted_frame(q.iloc[take], source, positions=positions[take])
                part.index = take
                pieces.append(part)
                continue
            at = np.flatnonzero(kinds == kind) if kind is not None else np.arange(len(rows))
            _check_support(fitted, q.iloc[take], numbers=positions[take] + 1)
            pos = np.full(len(rows), -1)
            pos[at] = np.arange(len(at))
            sub = rows.iloc[at]
            if fitted.method == LAYOUT_METHOD and self.history is None:
                # out of the box, the layout predict_training_time assumes for the same job (a history of one's own
                # reads its runs' missing layout columns with the run schema's defaults: its queries keep them)
                sub = sub.copy()
                _fill_default_layouts(sub, is_layout_job(sub), positions[first[at]])
            part = _predict_frame(fitted, q.iloc[take], self.confidence, distinct=(sub, pos[inverse[take]]),
                                  where="predict_many", numbers=positions[take] + 1)
            masks = list(_outside(fitted, sub).values())
            inside = ~np.logical_or.reduce(masks) if masks else np.ones(len(at), dtype=bool)
            part["inside_domain"] = inside[pos[inverse[take]]]
            part["method"] = fitted.method
            part.index = take
            pieces.append(part)
        out = pieces[0] if len(pieces) == 1 else pd.concat(pieces).sort_index()
        out.index = queries.index
        out["precision"] = q["precision"].astype(str).to_numpy()
        return out[list(PREDICTION_COLUMNS)]


def _prior_queries(frame: pd.DataFrame, prior: BasePredictor) -> pd.DataFrame:
    """Rows (own runs or queries) as the bundled prior is asked them: a model the mixed history calls
    ``bundled:<name>`` is the prior's ``<name>``; a model named as one of the prior's runs but of another size is
    the caller's own model, renamed ``own/<name>`` (the prior would refuse the clash)."""
    if "model" not in frame.columns:
        return frame
    names = frame["model"].astype(str)
    if names.str.startswith(BUNDLED_PREFIX).any():  # the mixed history's name for a bundled model: the prior's own
        frame = frame.assign(model=names.str.removeprefix(BUNDLED_PREFIX).to_numpy())
        names = frame["model"].astype(str)
    if "params" not in frame.columns:
        return frame
    table = prior._table(None)
    ref = pd.to_numeric(table["params"], errors="coerce").reindex(names).to_numpy(dtype=float)
    given = pd.to_numeric(frame["params"], errors="coerce").to_numpy(dtype=float)
    clash = np.isfinite(ref) & np.isfinite(given) & ~np.isclose(given, ref, rtol=1e-3)
    if not clash.any():
        return frame
    out = frame.copy()
    out["model"] = np.where(clash, "own/" + names.to_numpy(), names.to_numpy())
    return out


def _prior_steps(prior: BasePredictor, asked: pd.DataFrame) -> np.ndarray:
    """The prior's per-step answer for each row (the caller's own runs, or queries to shift), nan where it cannot
    answer one (a precision or device it has no way to price). A refused batch is asked per (precision, device
    type, device count), what pricing turns on, so one refused row does not hide what the others say; a group
    whose first row is refused too is taken as refused, and only a group whose first row is answered is asked
    row by row."""
    def steps(part: pd.DataFrame) -> np.ndarray | None:
        try:
            return prior.predict_many(part)["step_time_s"].to_numpy(dtype=float)
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


def _own_scores(own_fit: TrainingTimeModel, frame: pd.DataFrame, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the own fit's record for it (the log half-width of its 50% interval; nan where it cannot answer
    the row) and whether its interval at ``confidence`` is bounded. A batch the fit refuses is asked row by row,
    so one row does not decide the others."""
    def ask(part: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        band = own_fit.predict_interval(part, 0.5)
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


def _row_groups(q: pd.DataFrame, rows: np.ndarray, cols: list) -> list[tuple[dict, np.ndarray]]:
    """The distinct values of ``cols`` among ``rows`` (positions), each as a dict of given values (None where
    missing) with the positions that hold it."""
    if not len(rows):
        return []
    sub = q.iloc[rows][cols]
    try:
        first, inverse = distinct_rows([sub[c] for c in cols])
    except TypeError:  # unhashable cells: each row on its own
        first, inverse = np.arange(len(rows)), np.arange(len(rows))
    out = []
    for k, f in enumerate(first):
        row = {c: (v if _given(v) else None) for c, v in sub.iloc[int(f)].items()}
        out.append((row, rows[np.flatnonzero(inverse == k)]))
    return out


def _set_cells(q: pd.DataFrame, positions: np.ndarray, values: dict) -> None:
    """Set the cells of ``values``' columns at ``positions`` (by position: the index may repeat)."""
    for c, v in values.items():
        if c not in q.columns:
            q[c] = pd.Series(pd.NA, index=q.index, dtype="string" if isinstance(v, str) else "Float64")
        elif isinstance(v, str) and not pd.api.types.is_string_dtype(q[c]) and not pd.api.types.is_object_dtype(q[c]):
            q[c] = q[c].astype("object")
        col = q.columns.get_loc(c)
        q.iloc[positions, col] = v


def _sized_decoders(q: pd.DataFrame, gpu: np.ndarray) -> np.ndarray:
    """Per row: a GPU row that is a decoder with params and FLOPs but no sequence length (a candidate for
    :func:`_implied_sequence`, which decides)."""
    if "family" not in q.columns or "flops_per_sample" not in q.columns or "params" not in q.columns:
        return np.zeros(len(q), dtype=bool)
    dec = gpu & (q["family"].astype("string").str.lower().fillna("") == "decoder").to_numpy(dtype=bool)
    if "seq_len" in q.columns:
        dec &= q["seq_len"].isna().to_numpy()
    return dec


def _fill_implied_sequences(q: pd.DataFrame, gpu: np.ndarray) -> None:
    """Give the GPU rows that are dense decoders by size and FLOPs alone the sequence length their FLOPs imply
    (:func:`_implied_sequence`), in place, once per distinct row; say how many once."""
    rows = np.flatnonzero(_sized_decoders(q, gpu))
    if not len(rows):
        return
    cols = [c for c in ("family", "params", "flops_per_sample", "seq_len", *SHAPE_NAMES) if c in q.columns]
    filled = 0
    for row, at in _row_groups(q, rows, cols):
        seq = _implied_sequence(row)[0]
        if seq is not None:
            if "seq_len" not in q.columns:
                q["seq_len"] = pd.Series(pd.NA, index=q.index, dtype="Int64")
            _set_cells(q, at, {"seq_len": seq})
            filled += len(at)
    if filled:
        warnings.warn(f"predict_many: {filled} decoder rows without seq_len get the sequence length their "
                      "flops_per_sample implies for a dense decoder of their size (give seq_len to say otherwise).",
                      ExtrapolationWarning, stacklevel=3)


#: A query's layout columns and the :func:`perfmodel.layout.job_layout` field each states.
_LAYOUT_FIELDS = {"tp": "tp", "pp": "pp", "vp": "vp", "cp": "cp", "ep": "ep", "micro_batch_size": "micro_batch",
                  "zero_stage": "zero_stage", "sequence_parallel": "sequence_parallel", "recompute": "recompute"}


def _fill_default_layouts(q: pd.DataFrame, rows: np.ndarray, positions: np.ndarray) -> None:
    """Complete the layout of the transformer jobs among ``rows`` as :func:`predict_training_time` does for the same
    job (:func:`layout_columns`: what a row states is kept, :func:`perfmodel.layout.job_layout`'s defaults fill the
    rest), in place, once per distinct job: one answer per job, one row or many. A layout the frameworks would not
    run is refused naming the row (``positions``: each row's 0-based place in the caller's queries)."""
    rows = np.flatnonzero(rows)
    if not len(rows) or "batch_size" not in q.columns:
        return
    stated = [c for c in _LAYOUT_FIELDS if c in q.columns]
    cols = [c for c in ("family", "params", "active_params", "seq_len", "gpu_count", "batch_size",
                        "global_batch_size", *SHAPE_NAMES, *stated) if c in q.columns]
    for row, at in _row_groups(q, rows, cols):
        given = {_LAYOUT_FIELDS[c]: row[c] for c in stated if row.get(c) is not None}
        try:
            count = int(row.get("gpu_count") or 1)
            gb = row.get("global_batch_size")
            gb = float(gb) if gb is not None else float(row["batch_size"]) * count
            if not math.isclose(gb, round(gb)):
                continue
            given = {k: (str(v) if k == "recompute" else bool(v) if k == "sequence_parallel" else int(v))
                     for k, v in given.items()}
            lay = layout_columns({**row, "gpu_count": count}, seq_len=row.get("seq_len"), global_batch=int(round(gb)),
                                 layout=given or None, where="predict_many")
        except LayoutError as exc:
            raise LayoutError(f"predict_many: {row_label(int(at[0]), positions + 1)}: {exc}") from None
        except (ValueError, TypeError, KeyError, OverflowError):
            continue  # the row's own checks say what is wrong
        lay.pop("_assumed")
        _set_cells(q, at, lay)


def _fill_precision(q: pd.DataFrame, by_device: dict, positions: np.ndarray) -> None:
    """Fill the ``precision`` column: what was given (lower case), else what most runs on that device used."""
    given = q["precision"] if "precision" in q.columns else pd.Series(pd.NA, index=q.index, dtype=object)
    codes, uniq = pd.factorize(q["gpu_type"])
    per_type = [default_precision(by_device, str(g))[0] for g in uniq]
    levels = list(dict.fromkeys(per_type))
    defaults = pd.Series(pd.Categorical.from_codes(np.asarray([levels.index(p) for p in per_type])[codes],
                                                   categories=levels), index=q.index)
    if given.notna().all():
        q["precision"] = given.astype(str).str.lower()
    elif given.isna().all():
        q["precision"] = defaults
    else:
        q["precision"] = given.where(given.notna(), defaults).astype(str).str.lower()
    bad_p = ~q["precision"].isin(PRECISIONS)
    if bad_p.any():
        raise ValueError(f"predict_many: column 'precision' must be one of {', '.join(PRECISIONS)}; got "
                         f"{q['precision'][bad_p].iloc[0]!r} (row "
                         f"{int(positions[np.flatnonzero(bad_p.to_numpy())[0]]) + 1}, counting from 1).")


def _distinct_rows(q: pd.DataFrame, skip: tuple = ()) -> tuple[np.ndarray, np.ndarray]:
    """``first, inverse``: the position of the first of each distinct row of ``q`` (ignoring ``skip``), and each
    row's index into ``first``. 100,000 queries over a grid of a few hundred configurations are predicted once per
    configuration; unhashable cells fall back to one group per row."""
    try:
        first, inverse = distinct_rows([q[col] for col in q.columns if col not in skip] or [np.zeros(len(q))])
    except TypeError:
        return np.arange(len(q)), np.arange(len(q))
    return first, inverse


def _predict_frame(fitted: TrainingTimeModel, q: pd.DataFrame, confidence: float,
                   distinct: tuple | None = None, *, where: str = _WHERE, numbers=None) -> pd.DataFrame:
    """Per-step and whole-run predictions of each query row; ``distinct`` = (rows, inverse) from
    :func:`_distinct_rows` predicts each distinct configuration once (the per-step prediction is row-wise).
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


# ---------------------------------------------------------------------------------------- module functions
#: Predictors kept in this process, by (history content digest, method), most recently used last.
_PREDICTORS: "OrderedDict[tuple, BasePredictor]" = OrderedDict()
_PREDICTORS_MAX = 8


def _history_key(history) -> tuple | None:
    """What identifies a history's content without parsing it: file bytes', stores' and frames' digests (None:
    cannot)."""
    if history is None:
        return ("bundled-default",)
    key = []
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


def _predictor(history, method: str, confidence: float, where: str) -> BasePredictor:
    """A Predictor for ``history`` and ``method``, shared in this process while the history's content is unchanged
    (a rewritten file, however its size and modification time look, is another key)."""
    _check_history_type(history, where)
    check_choice(method, "method", where, (*METHODS, "auto"))
    confidence = check_confidence(confidence, where)
    if isinstance(history, TrainingTimeModel):
        return BasePredictor(history, method=method, confidence=confidence)
    key = _history_key(history)
    if key is None:
        return BasePredictor(history, method=method, confidence=confidence)
    key = (key, method, table_digest())  # a device registered or replaced meanwhile is another answer
    cached = _PREDICTORS.get(key)
    if cached is None:
        cached = _PREDICTORS[key] = BasePredictor(history, method=method)
        while len(_PREDICTORS) > _PREDICTORS_MAX:
            _PREDICTORS.popitem(last=False)
    _PREDICTORS.move_to_end(key)
    if cached.confidence == confidence:
        return cached
    view = BasePredictor.__new__(BasePredictor)  # the same fits at another level
    view.__dict__.update(cached.__dict__)
    view.confidence = confidence
    return view


def fit(runs, method: str = DEFAULT_METHOD, *, cv: int | None = 5, kind: str = "seen") -> TrainingTimeModel:
    """Fit a training-time model on a run history.

    Parameters
    ----------
    runs : str, path-like, DataFrame, bundled name or a list of these
        A ``.csv``/``.parquet`` history, a DataFrame, the name of a bundled history (``"cpu"``, ``"gpu"``,
        ``"mlperf"``) or a list of them (concatenated), validated with :func:`perfmodel.load_runs`.
    method : {"auto", "physics", "roofline", "loglinear", "gbm", "ops", "linear"}, default="auto"
        ``auto`` scores every candidate by grouped cross-validation on the split matching ``kind`` and keeps
        the best, or the baselines where a transfer rests on few held-out groups (see :mod:`perfmodel.fitting`).
    cv : int or None, default=5
        Folds of the random K-fold conformity scores and cross-validated error (None: a point fit, no intervals).
    kind : {"seen", "new_batch", "new_count", "new_pair", "new_model", "new_device"}, default="seen"
        The kind of query the model is for (:mod:`perfmodel.kinds`): ``auto`` chooses for it, and its
        conformity scores come from the refits that hold out that kind's groups.

    Returns
    -------
    TrainingTimeModel
        The fitted model.
    """
    check_choice(method, "method", "fit", (*METHODS, "auto"))
    check_choice(kind, "kind", "fit", KIND_NAMES)
    return fit_history(read_history(runs), method, kind=kind, cv=cv)


def resolve_history(history, method: str = DEFAULT_METHOD, query: pd.DataFrame | None = None,
                    where: str = "predict_training_time") -> TrainingTimeModel:
    """The fitted model that answers ``query`` from ``history`` (see :class:`BasePredictor`).

    Parameters
    ----------
    history : None, path, DataFrame, bundled name, list of these, or TrainingTimeModel
        The runs to learn from; a fitted model is returned as it is. None: the bundled history of the query's
        devices (:func:`~perfmodel.history.default_history`; ``cpu`` without a query).
    method : str, default=DEFAULT_METHOD
        A method of :data:`~perfmodel.models.METHODS`, or ``"auto"``.
    query : pandas.DataFrame, optional
        The configurations to answer; the model is the one fitted for its most demanding row's kind of query.
        Without it: the ``seen`` fit.
    where : str, default="predict_training_time"
        The caller's name, for error messages.

    Returns
    -------
    TrainingTimeModel
        The fitted model (shared with other calls on the same history content and method).
    """
    p = _predictor(history, method, 0.9, where)
    if isinstance(history, TrainingTimeModel):
        return history
    source = None if history is not None else (default_history(query) if query is not None else "cpu")
    kind = "seen"
    if query is not None:
        kinds = p._kinds(source, query)
        kind = max(set(kinds.tolist()), key=KIND_NAMES.index) if len(kinds) else "seen"
    return p.model(kind, source)


def predict_training_time(model, *, batch_size=None, gpu_count=1, gpu_type, steps=None, epochs=None,
                          dataset_size=None, precision=None, example_input=None, history=None,
                          confidence=0.9, method=DEFAULT_METHOD, seq_len=None, global_batch=None, layout=None,
                          gpus_per_node=None, inter_node_gbps=None) -> TrainingTimePrediction:
    """Predict the wall-clock time of a training job, with a prediction interval.

    Parameters
    ----------
    model : str, dict or torch.nn.Module
        A model name in the history; a dict with ``params`` (and optionally ``flops_per_sample``, forward +
        backward FLOPs of one sample, ``family``, and ``attention_flops_per_sample``, the part of them in
        attention's score and value products, which the ``mfu`` rule prices at its own utilisation where the
        history's runs give theirs; for a transformer its ``shape``, a
        :class:`perfmodel.transformer.TransformerShape`, or the shape columns ``n_layers``, ``d_model``,
        ``n_heads``, ... of :data:`perfmodel.schema.SHAPE_COLUMNS`, and ``seq_len``); or a ``torch.nn.Module``
        with ``example_input``.
    batch_size : int, optional
        Per-device batch size; or give ``global_batch``.
    gpu_count : int, default=1
        Devices (on CPU, worker processes): data-parallel, or split by ``layout``.
    gpu_type : str
        Device name (any alias in :mod:`perfmodel.hardware`, e.g. ``"A100"``, ``"cpu"``).
    steps : int, optional
        Optimizer steps. Or give ``epochs`` and ``dataset_size``:
        ``steps = ceil(dataset_size / (batch_size * gpu_count)) * epochs``.
    epochs, dataset_size : int, optional
        The amount of work instead of ``steps``.
    precision : {"fp32", "tf32", "fp16", "bf16", "fp8"}, optional
        What the job runs in (autocast dtype; ``tf32`` = fp32 with TF32 matmuls). Default: the precision most of
        the history's runs on this device type used (on a device the history lacks, most of its GPU runs; else
        fp32) — e.g. bf16 with the bundled public GPU history, fp32 with the bundled CPU runs. The result's
        ``query`` and ``warnings`` say what was assumed.
    example_input : torch.Tensor, optional
        One sample, without the batch dimension, when ``model`` is a module.
    history : None, path, DataFrame, bundled name, list of these, or TrainingTimeModel, default=None
        Runs to learn from (:class:`BasePredictor`); None uses the bundled runs (data/README.md).
    confidence : float in (0, 1), default=0.9
        Level of the prediction interval.
    method : {"auto", "physics", "roofline", "loglinear", "gbm", "ops", "linear", "ratio", "mfu", "layout"}, \
default="auto"
        ``auto`` chooses by the cross-validation split matching the query (:mod:`perfmodel.fitting`); transformer
        training with a sequence length (:func:`perfmodel.layout.is_layout_job`) is answered by the layout model
        (``layout``), from the bundled LLM history when ``history`` is None.
    seq_len : int, optional
        Tokens per sequence of transformer training (or in the model dict).
    global_batch : int, optional
        Sequences per optimizer step over all devices, instead of ``batch_size``: a model-parallel job need not
        give each device whole sequences.
    layout : ParallelLayout or dict, optional
        The job's parallel layout (:class:`perfmodel.layout.ParallelLayout`: tensor, pipeline, context, data and
        expert degrees, micro-batch, ZeRO stage, sequence parallelism, recomputation), checked against the
        training frameworks' rules (:class:`perfmodel.layout.LayoutError`). Default: data parallel.
    gpus_per_node : int, optional
        Devices per node (per NVLink domain); default 8.
    inter_node_gbps : float, optional
        Your cluster's network per device, GB/s one way; default the spec table's reference system's.

    Returns
    -------
    TrainingTimePrediction
        The predicted time, its interval and what it rests on.

    Examples
    --------
    >>> import perfmodel
    >>> r = perfmodel.predict_training_time("gpt-s", batch_size=16, gpu_count=2, gpu_type="cpu", steps=1000)
    >>> r.lower < r.seconds < r.upper
    True
    """
    return _predictor(history, method, confidence, _WHERE).predict(
        model, batch_size=batch_size, gpu_count=gpu_count, gpu_type=gpu_type, steps=steps, epochs=epochs,
        dataset_size=dataset_size, precision=precision, example_input=example_input, seq_len=seq_len,
        global_batch=global_batch, layout=layout, gpus_per_node=gpus_per_node, inter_node_gbps=inter_node_gbps)


def predict_many(queries: pd.DataFrame, *, history=None, confidence: float = 0.9,
                 method: str = DEFAULT_METHOD) -> pd.DataFrame:
    """Predict many configurations at once (vectorised).

    Each row gets the answer :func:`predict_training_time` gives it alone: with ``history=None`` the bundled runs
    of its own kind of device (CPU or GPU), and with ``method="auto"`` the fit chosen for its own kind of query
    (``query_kind``), whatever the other rows ask. A row naming a model of the history takes that model's size
    (an empty ``params`` is filled in; a different one is refused).

    Parameters
    ----------
    queries : DataFrame
        Columns ``batch_size``, ``gpu_type``, ``steps`` and either ``params`` (optionally ``flops_per_sample``)
        or ``model`` (a name in the history; with ``params`` too, a name the history lacks is a label); optional
        ``gpu_count`` (default 1), ``precision`` (default: what most of the history's runs on that device type
        used, as in :func:`predict_training_time`), ``family``, and ``attention_flops_per_sample`` (the part of
        ``flops_per_sample`` in attention, as in a model spec; or the op columns ``op_attention_flops`` and
        ``op_matmul_flops`` themselves).
    history : None, path, DataFrame, bundled name, list of these, or TrainingTimeModel, default=None
        As in :func:`predict_training_time`.
    confidence : float, default=0.9
        Level of the prediction intervals.
    method : {"auto", "physics", "roofline", "loglinear", "gbm", "ops", "linear"}, default="auto"
        As in :func:`predict_training_time` (``auto``: per row kind of query).

    Returns
    -------
    DataFrame
        :data:`PREDICTION_COLUMNS`: ``step_time_s, step_lower, step_upper`` (per step), ``steps``, ``seconds,
        lower, upper`` (the whole run), ``inside_domain`` (as :attr:`TrainingTimePrediction.inside_domain`),
        ``nearest_run_distance``, ``query_kind``, ``interval_rule``, the ``precision`` predicted for and the
        ``method`` that answered the row (what ``auto`` chose for it: ``layout`` for transformer jobs answered
        by the layout model), aligned with ``queries``.
    """
    return _predictor(history, method, confidence, "predict_many").predict_many(queries)
