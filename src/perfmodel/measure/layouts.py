"""Tensor- and pipeline-parallel layouts of a decoder, measured with the project's own timing protocol.

A *layout run* trains one of the decoders of :data:`LAYOUT_MODELS` (a GPT-style decoder with a stated shape:
layers, width, heads, MLP width, vocabulary, sequence length) on ``gpu_count`` processes split as
``tp x pp x dp``:

* **tensor parallel** (``tp``): torch's ``torch.distributed.tensor.parallel.parallelize_module`` on a
  ``DeviceMesh`` (gloo on CPU, NCCL on GPUs), Megatron-style: query/key/value projections and the first MLP
  matrix column-parallel (``ColwiseParallel``), the attention output and the second MLP matrix row-parallel
  (``RowwiseParallel``), the token embedding vocabulary-parallel (``RowwiseParallel`` on the embedding table),
  the output head column-parallel over the vocabulary with the cross-entropy computed on the vocabulary shards
  (``torch.distributed.tensor.parallel.loss_parallel``); with ``sequence_parallel`` the norms run on sequence
  shards (``SequenceParallel``) and the all-reduces become all-gather/reduce-scatter pairs;
* **pipeline parallel** (``pp``): ``torch.distributed.pipelining.PipelineStage`` over an even split of the layers
  (the embeddings on the first stage, the final norm and head on the last), driven by ``Schedule1F1B`` or
  ``ScheduleGPipe`` over the step's micro-batches;
* **data parallel** (``dp = gpu_count / (tp x pp)``): the gradients of each parameter shard are averaged over its
  ``dp`` replicas by one flat ``all_reduce`` after the backward pass (no overlap with it), then every rank steps
  its optimizer on its own shard (no ZeRO sharding).

Each optimizer step is timed whole: forward, loss, backward of every micro-batch, the gradient reduction and
``opt.step()``, closed by a barrier so that the step ends when the slowest rank is done. The timing protocol is the
sweep's (:class:`perfmodel.measure._timing.StopRule`). A run configuration's ``batch_size`` is the micro-batch (the
sequences one replica passes forward and backward at once) and ``grad_accum`` the micro-batches per optimizer step
on each replica, so that the global batch is ``batch_size x grad_accum x dp``; the record's ``batch_size`` is the
device's share of it (``global_batch_size / gpu_count``, fractional when ``tp x pp`` exceeds the per-replica
sequences) and its layout and shape columns (:data:`perfmodel.schema.LAYOUT_COLUMNS`,
:data:`perfmodel.schema.SHAPE_COLUMNS`) are filled.

This module is plain Python (the registry, the checks and the named sweep's definition, whose configurations
:func:`perfmodel.measure.plans.layouts_sweep_configs` builds); the torch side is
:mod:`perfmodel.measure._layout_worker`.
"""

from __future__ import annotations

from typing import Any

from .._deprecation import renamed
from ..exceptions import LayoutError

__all__ = ["LAYOUT_MODELS", "PP_SCHEDULES", "is_layout_model", "layout_shape", "layout_run_problems", "LAYOUTS_SWEEP"]

#: Decoders for layout runs: name -> shape. ``n_layers`` divides by pipeline degrees up to 4, ``n_heads``,
#: ``vocab`` and ``seq`` by tensor-parallel degrees up to 4 (sequence parallelism splits the sequence).
LAYOUT_MODELS: dict[str, dict] = {
    "layout-gpt-s": {"n_layers": 4, "d_model": 128, "n_heads": 4, "ffn_hidden": 512, "vocab": 1024, "seq": 64},
    "layout-gpt-m": {"n_layers": 4, "d_model": 256, "n_heads": 8, "ffn_hidden": 1024, "vocab": 1024, "seq": 64},
    "layout-gpt-l": {"n_layers": 4, "d_model": 512, "n_heads": 8, "ffn_hidden": 2048, "vocab": 1024, "seq": 64},
}
#: Pipeline schedules of ``torch.distributed.pipelining`` a layout run can use.
PP_SCHEDULES = ("1f1b", "gpipe")
_SHAPE_KEYS = ("n_layers", "d_model", "n_heads", "ffn_hidden", "vocab", "seq")


def is_layout_model(model) -> bool:
    """Whether ``model`` names a decoder of :data:`LAYOUT_MODELS`.

    Parameters
    ----------
    model : object
        A model spec (usually a str).

    Returns
    -------
    bool
    """
    return isinstance(model, str) and model in LAYOUT_MODELS


def layout_shape(model: str, knobs: dict | None = None, seq_len: int | None = None) -> dict:
    """The shape of a layout decoder: its registry entry with ``knobs`` and ``seq_len`` applied.

    Parameters
    ----------
    model : str
        A key of :data:`LAYOUT_MODELS`.
    knobs : dict, optional
        Shape overrides (``n_layers``, ``d_model``, ``n_heads``, ``ffn_hidden``, ``vocab``, ``seq``).
    seq_len : int, optional
        The sequence length (replaces ``seq``).

    Returns
    -------
    dict
        ``n_layers``, ``d_model``, ``n_heads``, ``ffn_hidden``, ``vocab``, ``seq`` as ints.

    Raises
    ------
    LayoutError
        ``model`` is not a layout decoder, a knob is unknown, or a size is not a positive int or does not divide.
    """
    if not is_layout_model(model):
        raise LayoutError(f"{model!r} is not a layout decoder; known: {', '.join(LAYOUT_MODELS)}.")
    knobs = dict(knobs or {})
    unknown = sorted(set(knobs) - set(_SHAPE_KEYS))
    if unknown:
        raise LayoutError(f"Unknown shape knobs for {model}: {', '.join(unknown)} (known: {', '.join(_SHAPE_KEYS)}).")
    shape = {**LAYOUT_MODELS[model], **knobs}
    if seq_len is not None:
        shape["seq"] = seq_len
    for k in _SHAPE_KEYS:
        v = shape[k]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise LayoutError(f"The shape's {k!r} of {model} must be a positive int. Got {v!r}.")
    if shape["d_model"] % shape["n_heads"]:
        raise LayoutError(f"d_model ({shape['d_model']}) of {model} must be a multiple of n_heads "
                          f"({shape['n_heads']}).")
    return shape


def layout_run_problems(model: str, *, gpu_count: int, tp: int = 1, pp: int = 1, micro_batches: int = 1,
                    sequence_parallel: bool = False, pp_schedule: str = "1f1b", knobs: dict | None = None,
                    seq_len: int | None = None, names: dict | None = None) -> list[str]:
    """Why a layout run of ``model`` cannot run as asked; empty when it can.

    Parameters
    ----------
    model : str
        A key of :data:`LAYOUT_MODELS`.
    gpu_count : int
        Processes (devices) of the run.
    tp, pp : int, default=1
        Tensor- and pipeline-parallel degrees.
    micro_batches : int, default=1
        Micro-batches per optimizer step on each replica.
    sequence_parallel : bool, default=False
        Sequence parallelism in the tensor-parallel norms.
    pp_schedule : {"1f1b", "gpipe"}, default="1f1b"
        The pipeline schedule.
    knobs : dict, optional
        Shape overrides (:func:`layout_shape`).
    seq_len : int, optional
        The sequence length.
    names : dict, optional
        How to name each quantity in the messages (e.g. ``{"tp": "--tensor-parallel"}`` for the command line);
        default the :class:`~perfmodel.measure.sweep.RunConfig` field names.

    Returns
    -------
    list of str
        One sentence per problem.
    """
    n = {"tp": "tp", "pp": "pp", "gpu_count": "gpu_count", "micro_batches": "grad_accum",
         "sequence_parallel": "sequence_parallel", "pp_schedule": "pp_schedule", **(names or {})}
    try:
        shape = layout_shape(model, knobs, seq_len)
    except LayoutError as exc:
        return [str(exc)]
    out = []
    if pp_schedule not in PP_SCHEDULES:
        out.append(f"{n['pp_schedule']} must be one of {', '.join(PP_SCHEDULES)}; got {pp_schedule!r}.")
    if gpu_count % (tp * pp):
        out.append(f"{n['tp']} {tp} x {n['pp']} {pp} = {tp * pp} processes per replica do not divide "
                   f"{n['gpu_count']} {gpu_count}.")
    if tp > 1:
        for what in ("n_heads", "vocab"):
            if shape[what] % tp:
                out.append(f"{n['tp']} {tp} does not divide the {shape[what]} {what} of {model}.")
        if shape["ffn_hidden"] % tp or shape["d_model"] % tp:
            out.append(f"{n['tp']} {tp} does not divide the widths of {model}.")
        if sequence_parallel and shape["seq"] % tp:
            out.append(f"{n['sequence_parallel']} needs a sequence length ({shape['seq']}) divisible by "
                       f"{n['tp']} {tp}.")
    elif sequence_parallel:
        out.append(f"{n['sequence_parallel']} needs tensor parallelism ({n['tp']} > 1).")
    if shape["n_layers"] % pp:
        out.append(f"{n['pp']} {pp} does not divide the {shape['n_layers']} layers of {model}.")
    if pp > 1 and pp_schedule == "1f1b" and micro_batches < pp:
        out.append(f"{n['pp_schedule']} 1f1b needs at least {n['pp']} ({pp}) micro-batches per step; got "
                   f"{n['micro_batches']} {micro_batches} (more micro-batches, or {n['pp_schedule']} gpipe).")
    return out


#: The layout sweep of the bundled ``data/runs_cpu_layouts.csv``: two decoders at a global batch of 16 sequences
#: under twelve layouts on 1, 2 and 4 processes and two micro-batch sizes (4 and 1 sequences; one micro-batch per
#: replica is at most its share, 4 for dp 4), every configuration three times, repeat index outermost (so that a
#: burst of other work on a shared host touches one repeat of a configuration, not all three). Each entry of
#: ``layouts`` is ``(processes, tp, pp, sequence_parallel)``. One torch thread per process, so that each process
#: stands for one device (1 process: 1 core; 4 processes oversubscribe a 2-core host twice).
LAYOUTS_SWEEP: dict[str, Any] = {
    "models": ("layout-gpt-s", "layout-gpt-m"),
    "global_batch": 16,
    "micro_batches": (4, 1),
    "layouts": ((1, 1, 1, False), (2, 1, 1, False), (2, 2, 1, False), (2, 2, 1, True), (2, 1, 2, False),
                (4, 1, 1, False), (4, 4, 1, False), (4, 4, 1, True), (4, 1, 4, False), (4, 2, 1, False),
                (4, 1, 2, False), (4, 2, 2, False)),
    "repeats": 3,
    "run_options": {"max_seconds": 2.0, "warmup_steps": 2, "min_steps": 5, "max_steps": 200, "threads": 1},
}


# the old name still answers, with a DeprecationWarning, until perfmodel 0.4
__getattr__ = renamed(__name__, {"layout_problems": ("layout_run_problems", "perfmodel.layout.layout_problems is"
                                                    " another function")})
