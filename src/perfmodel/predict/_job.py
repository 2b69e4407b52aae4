"""One training job as a query row: the model's columns (:func:`model_spec`), a transformer job's layout
(:func:`query_layout_columns`), its steps, and the precision it is predicted at when it names none
(:func:`default_precision`)."""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from .._validation import check_nonnegative_float, check_positive_float, check_positive_int, row_label
from ..exceptions import UnsupportedQueryError
from ..layout import check_layout, job_layout
from ..layout_features import shape_columns, shape_of
from ..models import TrainingTimeModel
from ..schema import SHAPE_COLUMNS
from ..transformer import TransformerShape, sequence_for_flops, standard_shape, transformer_flops

#: The caller named in messages about one job.
WHERE = "predict_training_time"


# ----------------------------------------------------------------------------------------------- model
def _is_torch_module(obj) -> bool:
    return any(c.__module__.startswith("torch.nn") and c.__name__ == "Module" for c in type(obj).__mro__)


def dense_part(attn: np.ndarray, fps: np.ndarray, where: str, numbers=None) -> np.ndarray:
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
        products; ``flash_attention``: False where attention does not run in fused kernels, so its score matrix
        passes through memory, which the layout model prices); or a ``torch.nn.Module`` (its parameters and FLOPs counted with
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
                f"The 'model' parameter of {WHERE} names {model!r}, which is not in the history.{hint} Known: "
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
        where = f"the model spec of {WHERE}"
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
            raise ValueError(f"A model spec given to {WHERE} needs 'params' (and optionally 'flops_per_sample'), "
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
            assert seq is not None  # check_positive_int returns None only with allow_none
            spec["flops_per_sample"] = transformer_flops(shape, seq).model
            spec["op_attention_flops"] = transformer_flops(shape, seq).attention
            spec["op_matmul_flops"] = transformer_flops(shape, seq).dense
        if model.get("flash_attention") is not None:  # attention in fused kernels (1) or its scores through memory
            if not isinstance(model["flash_attention"], (bool, int, np.integer)) or model["flash_attention"] not in (0, 1):
                raise TypeError(f"The 'flash_attention' of {where} must be True or False. Got "
                                f"{model['flash_attention']!r}.")
            spec["flash_attention"] = int(bool(model["flash_attention"]))
        family = model.get("family")
        if family is not None:  # what its FLOPs are (cnn: convolutions; decoder, encoder, ...: matmuls)
            if not isinstance(family, str) or not family.strip():
                raise TypeError(f"The 'family' of {where} must be a non-empty string such as 'cnn' or 'decoder'. "
                                f"Got {family!r}.")
            spec["family"] = family.strip().lower()
        if model.get("attention_flops_per_sample") is not None:  # the mfu rule prices it at its own utilisation
            attn = check_nonnegative_float(model["attention_flops_per_sample"], "attention_flops_per_sample", where)
            dense = dense_part(np.array([attn]), np.array([np.nan if fps is None else fps]), where)[0]
            spec["op_attention_flops"], spec["op_matmul_flops"] = attn, float(dense)
        return spec
    if _is_torch_module(model):
        if example_input is None:
            raise ValueError(
                f"The 'example_input' parameter of {WHERE} is required when model is a torch.nn.Module: pass "
                "one sample without the batch dimension, e.g. torch.randn(3, 224, 224)."
            )
        from ..measure.flops import count_module

        params, fps = count_module(model, example_input)
        return {"model": type(model).__name__, "params": float(params), "flops_per_sample": fps}
    raise TypeError(
        f"The 'model' parameter of {WHERE} must be a model name from the history, a dict with 'params', or a "
        f"torch.nn.Module. Got {type(model).__name__} instead."
    )


#: The transformer-shape fields a model spec may give (:data:`perfmodel.schema.SHAPE_COLUMNS`).
SHAPE_NAMES = tuple(c.name for c in SHAPE_COLUMNS)


def query_layout_columns(row: dict, *, seq_len, global_batch: int, layout=None, gpus_per_node=None,
                   inter_node_gbps=None, where: str = WHERE, names: dict | None = None) -> dict:
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
    out: dict[str, Any] = {"seq_len": seq, "global_batch_size": global_batch, "micro_batch_size": lay.micro_batch,
                           "tp": lay.tp, "pp": lay.pp, "vp": lay.vp, "cp": lay.cp, "ep": lay.ep, "dp": lay.dp,
                           "zero_stage": lay.zero_stage, "sequence_parallel": int(lay.sequence_parallel),
                           "recompute": lay.recompute, "_assumed": assumed}
    if gpus_per_node is not None:
        out["gpus_per_node"] = check_positive_int(gpus_per_node, "gpus_per_node", where)
    if inter_node_gbps is not None:
        out["inter_node_gbps"] = check_positive_float(inter_node_gbps, "inter_node_gbps", where)
    return out


def _nonnegative_int(value, name: str, where: str) -> int:
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and float(value) == 0:
        return 0
    out = check_positive_int(value, name, where)
    assert out is not None  # check_positive_int returns None only with allow_none
    return out


def job_steps(steps, epochs, dataset_size, batch_size, gpu_count) -> int:
    """The job's optimizer steps: ``steps``, or ``epochs`` over ``dataset_size`` samples at ``batch_size`` per
    device on ``gpu_count`` devices (one of the two, checked)."""
    if steps is not None and (epochs is not None or dataset_size is not None):
        raise ValueError(f"{WHERE} takes either 'steps' or 'epochs' with 'dataset_size', not both. "
                         f"Got steps={steps!r}, epochs={epochs!r}, dataset_size={dataset_size!r}.")
    if steps is not None:
        n = check_positive_int(steps, "steps", WHERE)
        assert n is not None  # check_positive_int returns None only with allow_none
        return n
    if epochs is None or dataset_size is None:
        raise ValueError(f"{WHERE} needs the amount of work: 'steps', or 'epochs' and 'dataset_size'. "
                         f"Got steps=None, epochs={epochs!r}, dataset_size={dataset_size!r}.")
    n_epochs = check_positive_int(epochs, "epochs", WHERE)
    samples = check_positive_int(dataset_size, "dataset_size", WHERE)
    assert n_epochs is not None and samples is not None  # check_positive_int returns None only with allow_none
    return math.ceil(samples / (batch_size * gpu_count)) * n_epochs


def is_given(value) -> bool:
    """Whether a query cell holds a value (not None, NaN or pd.NA)."""
    try:
        return value is not None and not bool(pd.isna(value))
    except (TypeError, ValueError):  # an array-like cell: given
        return True


def implied_sequence(model: Mapping) -> tuple[int | None, str | None]:
    """A dense decoder given by ``params``, ``flops_per_sample`` and ``family="decoder"`` but no ``seq_len`` and no
    shape: the sequence length its FLOPs imply for the standard shape of its size
    (:func:`~perfmodel.transformer.sequence_for_flops`), rounded to a multiple of 16 (so that tensor and context
    degrees up to 8 divide it), and the note saying so; ``(None, None)`` otherwise (a mixture of experts, a shape
    given, FLOPs no length between 128 and 2M tokens explains)."""
    family = model.get("family")
    if (not is_given(family) or str(family).lower() != "decoder" or is_given(model.get("seq_len"))
            or model.get("shape") is not None or any(is_given(model.get(k)) for k in SHAPE_NAMES)
            or not is_given(model.get("params")) or not is_given(model.get("flops_per_sample"))):
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


# ------------------------------------------------------------------------------------- one job's query row
def global_batch_of(batch_size, global_batch, gpu_count: int) -> int:
    """Sequences per optimizer step over all devices: ``global_batch``, or ``batch_size`` per device on
    ``gpu_count`` devices (one of the two, checked)."""
    if (batch_size is None) == (global_batch is None):
        raise ValueError(f"{WHERE} needs the batch: 'batch_size' (per device) or 'global_batch' (all devices), "
                         f"one of them. Got batch_size={batch_size!r}, global_batch={global_batch!r}.")
    if global_batch is not None:
        total = check_positive_int(global_batch, "global_batch", WHERE)
    else:
        per_device = check_positive_int(batch_size, "batch_size", WHERE)
        assert per_device is not None  # check_positive_int returns None only with allow_none
        total = per_device * gpu_count
    assert total is not None  # check_positive_int returns None only with allow_none
    return total


def standard_sized(model, seq_len) -> tuple[Any, str | None]:
    """A transformer job given by its size (a decoder's ``params`` and a sequence length, no shape): the model
    with the standard decoder shape of that size (as plan_llm_job does), and the note saying so; any other
    ``model`` as it is, and None."""
    if not (isinstance(model, Mapping) and (seq_len is not None or model.get("seq_len") is not None)
            and model.get("shape") is None and not any(model.get(k) is not None for k in SHAPE_NAMES)
            and model.get("params") is not None and str(model.get("family", "decoder")).lower() == "decoder"):
        return model, None
    params = check_positive_float(model["params"], "params", WHERE)
    assert params is not None  # check_positive_float returns None only with allow_none
    shape = standard_shape(params)
    return {**model, "shape": shape}, (f"a decoder of {float(model['params']):.3g} parameters given by its size: the "
                                       f"standard shape of that size ({shape.n_layers} layers, width "
                                       f"{shape.d_model})")


def job_columns(model, job: dict) -> dict:
    """The transformer columns a job states: ``job``'s (its ``seq_len``), after the model dict's ``seq_len``,
    ``family`` and shape columns (a ``shape``'s, as a decoder's) where given."""
    if not isinstance(model, Mapping):
        return job
    given = dict(model)
    if isinstance(given.get("shape"), TransformerShape):
        given = {**shape_columns(given["shape"]), "family": "decoder", **given}
    return {**{k: given[k] for k in ("seq_len", "family", *SHAPE_NAMES) if given.get(k) is not None}, **job}


def query_row(spec: dict, model, *, gpu_count: int, gpu_type: str, precision: str, steps: int, global_batch: int,
              seq_len, layout, gpus_per_node, inter_node_gbps, wants_layout: bool) -> tuple[dict, list[str]]:
    """The query row of one job, and what its layout assumed: the model's columns (``spec``), the devices,
    precision and steps, and for transformer training its layout's columns (:func:`query_layout_columns`; with
    recomputation, the FLOPs the devices do)."""
    row = {**spec, "gpu_count": gpu_count, "gpu_type": gpu_type, "precision": precision.lower(),
           "steps": steps,  # per device: whole where it divides (a model-parallel share may be a fraction)
           "batch_size": global_batch // gpu_count if global_batch % gpu_count == 0 else global_batch / gpu_count}
    assumed: list[str] = []
    if wants_layout or layout is not None or gpus_per_node is not None or inter_node_gbps is not None:
        row.update(query_layout_columns(row, seq_len=seq_len, global_batch=global_batch, layout=layout,
                                  gpus_per_node=gpus_per_node, inter_node_gbps=inter_node_gbps, where=WHERE))
        assumed = row.pop("_assumed")
        shape = model.get("shape") if isinstance(model, Mapping) else None
        if (isinstance(shape, TransformerShape) and model.get("flops_per_sample") is None
                and row.get("recompute", "none") != "none"):
            # the work the devices do: recomputation runs the attention's forward (a third of it) again
            f = transformer_flops(shape, row["seq_len"], recompute=row["recompute"])
            attention = f.attention * 4 / 3
            row.update(flops_per_sample=f.hardware, op_attention_flops=attention,
                       op_matmul_flops=f.hardware - attention)
    elif global_batch % gpu_count:
        raise ValueError(f"{WHERE}: global_batch {global_batch} does not divide over {gpu_count} devices; "
                         "give the model-parallel layout (layout=) of such a job.")
    return row, assumed
