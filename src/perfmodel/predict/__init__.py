"""Predicting training jobs: :class:`BasePredictor` (a history, validated once, fitted lazily per kind of query) and
the module functions :func:`predict_training_time`, :func:`predict_many` and :func:`fit` over it.

A :class:`BasePredictor` reads its history once (:func:`perfmodel.history.read_history`), and for each kind of query
its rows ask (:mod:`perfmodel.kinds`) fits the method once (``auto``: chosen for that kind, :mod:`perfmodel.fitting`),
through the disk cache. The module functions keep a few Predictors in this process, keyed by the content digest of
their history and the method, so that repeated calls neither re-read nor refit an unchanged history.
"""

from __future__ import annotations

import pandas as pd

from .._deprecation import renamed
from .._methods import METHOD_CHOICES
from .._validation import check_choice
from ..fitting import DEFAULT_METHOD, fit_history
from ..history import default_history, read_history
from ..kinds import KIND_NAMES
from ..models import METHODS, TrainingTimeModel
from ._backend import MIN_OWN_RUNS as MIN_OWN_RUNS  # re-exported: the documented rule of a mixed history
from ._backend import bundled_layout_model
from ._base import BasePredictor, checked_predictor
from ._job import SHAPE_NAMES, WHERE, default_precision, model_spec, query_layout_columns
from ._memo import shared_predictor
from ._result import PREDICTION_COLUMNS, TrainingTimePrediction
from ._support import LAYOUT_METHOD

__all__ = ["BasePredictor", "predict_training_time", "predict_many", "fit", "TrainingTimePrediction", "resolve_history",
           "query_layout_columns", "SHAPE_NAMES", "LAYOUT_METHOD", "bundled_layout_model",
           "model_spec", "default_precision", "PREDICTION_COLUMNS"]


def fit(runs, method: str = DEFAULT_METHOD, *, cv: int | None = 5, kind: str = "seen") -> TrainingTimeModel:
    """Fit a training-time model on a run history.

    Parameters
    ----------
    runs : str, path-like, DataFrame, bundled name or a list of these
        A ``.csv``/``.parquet`` history, a DataFrame, the name of a bundled history (``"cpu"``, ``"gpu"``,
        ``"mlperf"``) or a list of them (concatenated), validated with :func:`perfmodel.load_runs`.
    method : str, default="auto"
        ``"auto"`` or a method of :data:`perfmodel.models.METHODS` (``perfmodel.models.METHODS`` lists them with
        their descriptions; ``perfmodel --help`` shows them as ``--method`` choices).
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
    check_choice(method, "method", "fit", METHOD_CHOICES)
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
    p = shared_predictor(checked_predictor, history, method, 0.9, where)
    if isinstance(history, TrainingTimeModel):
        return history
    source = None if history is not None else (default_history(query) if query is not None else "cpu")
    kind = "seen"
    if query is not None:
        kinds = p._backend.kinds(source, query)
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
        training with a sequence length, on a device whose figures price it
        (:func:`perfmodel.layout_features.layout_priceable`), is answered by the layout model (``layout``), from
        the bundled LLM history when ``history`` is None.
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
    return shared_predictor(checked_predictor, history, method, confidence, WHERE).predict(
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
    method : str, default="auto"
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
    return shared_predictor(checked_predictor, history, method, confidence, "predict_many").predict_many(queries)


# the old name still answers, with a DeprecationWarning, until perfmodel 0.4
__getattr__ = renamed(__name__, {"layout_columns": ("query_layout_columns", "perfmodel.importers.mlperf.layout."
                                                                           "layout_columns is another function")})
