"""Job-shaped queries for decoder-only language models: :func:`plan_llm_job` and :func:`search_layouts`.

An LLM job is stated the way its owner thinks of it (a model size, shape or Hugging Face config, tokens, sequence
length, global batch, devices or nodes, the parallel layout, precision) and answered by the same prediction as
:func:`perfmodel.predict_training_time` gives the same job (one answer per job), with every step of the
derivation kept in the result:

* **The model** (:mod:`perfmodel.transformer`): a :class:`~perfmodel.transformer.TransformerShape` given
  (``shape=``), read from a Hugging Face config (``hf_config=``: a ``config.json`` path, a dict or a
  ``PretrainedConfig``; dense or mixture of experts; read locally, never downloaded;
  :func:`~perfmodel.transformer.hf_config_shape` counts its exact parameters), built from ``n_layers``,
  ``d_model`` and the rest, or — a model given by its size only — the standard shape of that size
  (:func:`~perfmodel.transformer.standard_shape`, said in the notes), so that activations and communication are
  estimated for every plan.
* **FLOPs per sequence** (forward + backward): :func:`~perfmodel.transformer.transformer_flops`,
  ``6·N_a·seq + 12·L·h·hd·seq²`` (``N_a`` the matmul parameters a token passes through; model FLOPs, without
  recomputation).
* **Steps**: ``ceil(tokens / (global_batch·seq))`` (or ``ceil(samples / global_batch)``, or ``steps``).
* **Layout** (:mod:`perfmodel.layout`): ``devices = gpu_count`` or ``nodes × gpus_per_node`` ``= tp·pp·cp·dp``,
  checked against the training frameworks' rules (the global batch a multiple of ``dp × micro_batch``, heads
  divisible by ``tp``, ...; :class:`~perfmodel.exceptions.LayoutError` names the rule). Defaults: micro-batch 1,
  ZeRO stage 1 (Megatron's distributed optimizer), sequence parallelism with tensor parallelism, no
  recomputation, FlashAttention-style kernels, 8 devices per node.
* **Prediction**: :func:`perfmodel.predict_training_time` with the shape, ``seq_len``, ``global_batch`` and the
  layout: the layout model (:class:`perfmodel.models.LayoutRegressor`) fitted on the bundled LLM history (or on
  ``history=``), which prices the GEMMs, attention, memory-bound kernels, tensor/context/expert collectives on the
  link they use, the pipeline bubble, data-parallel / FSDP traffic and the optimizer; the result's ``breakdown``
  says where each step's time goes.
* **Memory**: :func:`perfmodel.plan.estimate_memory` per device with the same shape and layout. A plan that does
  not fit is refused (:class:`~perfmodel.exceptions.DoesNotFitError`, with the estimate and the fastest layout
  that fits) unless ``allow_no_fit=True``.
* **Layout search** (``search_layouts=True``, or :func:`search_layouts`): every valid layout of the job
  (:func:`perfmodel.layout.enumerate_layouts`) whose memory fits, predicted at once and ranked by time; the plan
  takes the fastest and keeps the ranking.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._format import format_duration, to_plain
from .._methods import METHOD_CHOICES
from .._validation import check_choice, check_confidence, check_positive_float, check_positive_int
from ..exceptions import DataQualityWarning, DoesNotFitError
from ..fitting import DEFAULT_METHOD
from ..hardware import check_precision, resolve_gpu_type
from ..layout import DEFAULT_GPUS_PER_NODE, ParallelLayout, check_layout, enumerate_layouts
from ..layout_features import layout_priceable, shape_columns
from ..models import layout_tie_factor
from ..predict import LAYOUT_METHOD, TrainingTimePrediction, predict_many, predict_training_time
from ..transformer import TransformerFlops, TransformerShape, hf_config_shape, transformer_flops
from ._cost import CostEstimate, estimate_cost
from ._llm_layout import JobDevices, LayoutArgs, checked_recompute, checked_zero_stage, job_devices
from ._llm_shape import WHERE, ModelArgs, job_work, si, whole_count
from ._memory import OPTIMIZERS, MemoryEstimate, estimate_memory

__all__ = ["plan_llm_job", "LLMJobPlan", "search_layouts", "decoder_params", "decoder_flops_per_sample",
           "hf_config_shape", "LAYOUT_PARAMETER_NAMES"]

#: How :func:`plan_llm_job` names the layout's degrees in its messages (a CLI passes its flags instead).
LAYOUT_PARAMETER_NAMES = {"tp": "tensor_parallel", "pp": "pipeline_parallel", "cp": "context_parallel",
                          "dp": "the data-parallel degree", "ep": "expert_parallel", "vp": "virtual_stages",
                          "micro_batch": "micro_batch", "global_batch": "global_batch", "devices": "devices",
                          "search": "search=True", "allow_no_fit": "allow_no_fit=True"}


def decoder_params(n_layers: int, d_model: int, vocab: int = 0, ffn_mult: float = 4.0) -> float:
    """Parameters of a decoder-only transformer: ``(4 + 2·ffn_mult)·L·d² + vocab·d`` (tied embedding).

    Per layer ``4·d²`` for the attention projections and ``2·ffn_mult·d²`` for the MLP; biases and norms are left
    out.

    Parameters
    ----------
    n_layers : int
        Transformer layers ``L``.
    d_model : int
        Hidden size ``d``.
    vocab : int, default=0
        Vocabulary size (one tied embedding matrix); 0 or None leaves the embedding out.
    ffn_mult : float, default=4.0
        The MLP's hidden size over ``d_model``.

    Returns
    -------
    float
        The parameter count.

    Examples
    --------
    >>> decoder_params(32, 4096, 32000)
    6573522944.0
    """
    L = check_positive_int(n_layers, "n_layers", "decoder_params")
    d = check_positive_int(d_model, "d_model", "decoder_params")
    v = 0 if vocab in (0, None) else check_positive_int(vocab, "vocab", "decoder_params")
    f = check_positive_float(ffn_mult, "ffn_mult", "decoder_params")
    return float((4 + 2 * f) * L * d * d + v * d)


def decoder_flops_per_sample(params: float, seq_len: int, n_layers: int | None = None, d_model: int | None = None,
                             *, activation_checkpointing: bool = False) -> float:
    """Forward + backward FLOPs of one sequence: ``6·N·seq + 12·L·d·seq²`` (× 4/3 with full checkpointing).

    :func:`perfmodel.transformer.transformer_flops` with the size given as the matmul parameters.

    Parameters
    ----------
    params : float
        Parameter count ``N``.
    seq_len : int
        Tokens per sequence.
    n_layers : int, optional
        Transformer layers ``L``; with ``d_model``, adds the attention scores' ``12·L·d·seq²`` term (left out when
        either is None).
    d_model : int, optional
        Hidden size ``d``.
    activation_checkpointing : bool, default=False
        Full activation checkpointing: the forward pass is run again in the backward, 4/3 of the FLOPs.

    Returns
    -------
    float
        FLOPs of one sequence's forward and backward pass.

    Examples
    --------
    >>> round(decoder_flops_per_sample(7e9, 4096, 32, 4096) / 1e12, 1)
    198.4
    """
    n = check_positive_float(params, "params", "decoder_flops_per_sample")
    s = check_positive_int(seq_len, "seq_len", "decoder_flops_per_sample")
    shape = None
    if n_layers is not None and d_model is not None:
        shape = TransformerShape(n_layers=check_positive_int(n_layers, "n_layers", "decoder_flops_per_sample"),
                                 d_model=check_positive_int(d_model, "d_model", "decoder_flops_per_sample"), n_heads=1)
    flops = transformer_flops(shape, s, recompute="full" if activation_checkpointing else "none", matmul_params=n)
    return flops.hardware


@dataclass
class LLMJobPlan:
    """An LLM training job planned from its shape and layout: the time (with interval), how it was derived,
    where each step's time goes, and memory.

    Attributes
    ----------
    seconds, lower, upper : float
        Predicted wall-clock time and its prediction interval (``prediction``'s).
    prediction : TrainingTimePrediction
        What :func:`perfmodel.predict_training_time` answered for the job (the same call gives the same answer).
    gpu_type : str
        The device type (resolved name).
    params, params_formula : float, str
        The parameter count, and how it was obtained ("given", the HF config's count, or the shape's).
    flops_per_sample, flops_formula : float, str
        Forward + backward model FLOPs of one sequence, and the formula used.
    tokens, samples, steps, seq_len, global_batch : int
        The work: ``steps`` optimizer steps of ``global_batch`` sequences of ``seq_len`` tokens.
    devices, nodes, gpus_per_node, data_parallel, tensor_parallel, pipeline_parallel, zero_stage : int
    micro_batch, accumulation : int
        Sequences per forward/backward pass on one replica, and passes per step.
    batch_size_per_device : float
        ``global_batch / devices``, each device's share of a step's sequences.
    precision : str
        The precision predicted for.
    precision_assumed : bool
        Whether ``precision`` was assumed (not given).
    memory : MemoryEstimate
        The per-device memory estimate (:func:`perfmodel.plan.estimate_memory`).
    shape : TransformerShape
        The model's shape (given, from the HF config, or the standard shape of its size).
    layout : ParallelLayout
        The layout predicted (the fastest that fits, after a search).
    flops : TransformerFlops
        The FLOPs of one sequence by part.
    breakdown : dict
        Seconds per step by part (:attr:`TrainingTimePrediction.breakdown`).
    layouts : pandas.DataFrame or None
        The ranked layouts of a search (:func:`search_layouts`), when one ran.
    context_parallel, expert_parallel, virtual_stages : int
    sequence_parallel : bool
    recompute : str
    hf_config : dict or None
        The shape read from ``hf_config=`` (:func:`hf_config_shape`), when given.
    notes : list of str
        What was assumed and what to check.
    """

    seconds: float
    lower: float
    upper: float
    prediction: TrainingTimePrediction
    gpu_type: str
    params: float
    params_formula: str
    flops_per_sample: float
    flops_formula: str
    tokens: int
    samples: int
    steps: int
    seq_len: int
    global_batch: int
    devices: int
    nodes: int | None
    gpus_per_node: int | None
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    zero_stage: int
    micro_batch: int
    accumulation: int
    batch_size_per_device: float
    precision: str
    precision_assumed: bool
    memory: MemoryEstimate
    shape: TransformerShape
    layout: ParallelLayout
    flops: TransformerFlops
    breakdown: dict = field(default_factory=dict)
    layouts: pd.DataFrame | None = None
    context_parallel: int = 1
    expert_parallel: int = 1
    virtual_stages: int = 1
    sequence_parallel: bool = False
    recompute: str = "none"
    hf_config: dict | None = None
    notes: list = field(default_factory=list)

    @property
    def confidence(self) -> float:
        """The interval's level."""
        return self.prediction.confidence

    @property
    def fits(self) -> bool | None:
        """Whether the memory estimate fits the device (see :class:`MemoryEstimate`)."""
        return self.memory.fits

    def cost(self, *, provider=None, prices=None, spot=False, **kwargs) -> CostEstimate:
        """Dollars for the job on ``devices`` devices (:func:`perfmodel.plan.estimate_cost`).

        Parameters
        ----------
        provider : str, optional
            Price from this provider; default the cheapest in the table.
        prices : DataFrame or path, optional
            Your own price table (:func:`perfmodel.plan.load_prices`); default the bundled one.
        spot : bool, default=False
            Spot pricing, with the interruption overhead added to the time.
        **kwargs
            The spot overhead's parameters of :func:`perfmodel.plan.estimate_cost` (``checkpoint_interval_s``,
            ``checkpoint_cost_s``, ``restart_s``, ``interruptions_per_hour``).

        Returns
        -------
        CostEstimate
            The cost of ``seconds`` (and its interval) on ``devices`` devices of ``gpu_type``.
        """
        return estimate_cost(seconds=self.seconds, lower=self.lower, upper=self.upper, gpu_type=self.gpu_type,
                             gpu_count=self.devices, provider=provider, prices=prices, spot=spot, **kwargs)

    def to_dict(self) -> dict:
        """Plain JSON types only (``json.dumps(..., allow_nan=False)`` accepts it).

        Returns
        -------
        dict
            The fields by name; ``memory``, ``shape``, ``layout`` and ``flops`` as dicts, ``layouts`` as a list of
            rows.
        """
        out = to_plain({k: getattr(self, k) for k in self.__dataclass_fields__
                        if k not in ("memory", "shape", "layout", "flops", "layouts")})
        out["memory"] = self.memory.to_dict()
        out["shape"] = to_plain(self.shape.to_dict())
        out["layout"] = to_plain(self.layout.to_dict())
        out["flops"] = to_plain({"dense": self.flops.dense, "attention": self.flops.attention,
                                 "recompute": self.flops.recompute})
        out["layouts"] = None if self.layouts is None else to_plain(self.layouts.to_dict("records"))
        return out

    def __str__(self) -> str:
        pct = f"{self.confidence * 100:g}%"
        p = self.prediction
        where = (f"{self.nodes} nodes x {self.gpus_per_node}" if self.nodes else f"{self.devices}")
        s = self.shape
        shape = (f"L={s.n_layers}, d={s.d_model}, {s.n_heads} heads ({s.n_kv_heads} KV), MLP {s.ffn_hidden}"
                 f"{' gated' if s.gated_mlp else ''}, vocabulary {s.vocab}"
                 + (f", {s.n_experts} experts ({s.experts_per_token} per token, width {s.moe_ffn_hidden})"
                    if s.is_moe else ""))
        lines = [
            f"{format_duration(self.seconds)} ({pct} PI {format_duration(self.lower)} – {format_duration(self.upper)}; "
            f"{p.method}, {p.n_runs} runs) on {where} x {self.gpu_type} in {self.precision}"
            f"{' (assumed)' if self.precision_assumed else ''}",
            f"work: {si(self.tokens)} tokens = {self.steps:,} steps x {self.global_batch:,} sequences x "
            f"{self.seq_len:,} tokens; step {p.step_seconds:.3g} s ({p.step_lower:.3g}–{p.step_upper:.3g})",
            f"model: {si(self.params)} params ({self.params_formula}); {shape}",
            f"FLOPs per sequence: {self.flops_formula} = {self.flops_per_sample:.4g}",
            f"layout: {self.devices} devices = {self.layout.describe()}; {self.accumulation} micro-batches per step",
            f"memory: {self.memory}",
        ]
        if self.breakdown:
            b = self.breakdown
            total = b.get("total") or 1.0
            lines.append("step: " + ", ".join(f"{k} {b[k]:.3g} s ({100 * b[k] / total:.0f}%)" for k in
                                              ("pipeline", "bubble", "dp_exposed", "optimizer", "overhead",
                                               "sync") if k in b) + "; per micro-batch " + ", ".join(
                f"{k} {b[k] * 1e3:.3g} ms" for k in ("gemm", "attention", "memory", "layer_comm", "latency") if k in b))
        if self.layouts is not None and len(self.layouts):
            lines.append(f"layouts searched: {len(self.layouts)} fit in memory; fastest first:")
            for _, r in self.layouts.head(5).iterrows():
                lines.append(f"  {r['layout']}: step {r['step_time_s']:.3g} s, {r['memory_gb']:.0f} GB")
            tied = self.layouts["told_apart"].map(lambda v: v is False).to_numpy(dtype=bool)  # None: not told
            if tied.sum() > 1:
                lines.append(f"  {int(tied.sum())} layouts within x{self.layouts['vs_fastest'][tied].max():.2f} of "
                             "the fastest: the model does not tell them apart (its errors between two layouts of "
                             "one published job); measure the leading few")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _layout_rows(layouts, *, shape, seq_len, global_batch, gpu_type, devices, precision, gpus_per_node,
                 inter_node_gbps, steps, name, flash_attention=True) -> pd.DataFrame:
    """The query rows of many layouts of one job (the columns :func:`perfmodel.predict_many` reads)."""
    base = {"model": name, "params": float(shape.params()), "family": "moe" if shape.is_moe else "decoder",
            **shape_columns(shape), "seq_len": seq_len, "global_batch_size": global_batch, "gpu_count": devices, "gpu_type": gpu_type,
            "batch_size": global_batch / devices, "steps": steps, "gpus_per_node": gpus_per_node,
            "flash_attention": int(bool(flash_attention))}
    if precision is not None:
        base["precision"] = precision
    if inter_node_gbps is not None:
        base["inter_node_gbps"] = inter_node_gbps
    return pd.DataFrame([{**base, "micro_batch_size": lay.micro_batch, "tp": lay.tp, "pp": lay.pp, "vp": lay.vp,
                          "cp": lay.cp, "ep": lay.ep, "dp": lay.dp, "zero_stage": lay.zero_stage,
                          "sequence_parallel": int(lay.sequence_parallel), "recompute": lay.recompute}
                         for lay in layouts])


def search_layouts(*, shape: TransformerShape, seq_len: int, global_batch: int, gpu_type: str, devices: int,
                   precision: str = "bf16", gpus_per_node: int = DEFAULT_GPUS_PER_NODE, inter_node_gbps=None,
                   optimizer: str = "adamw", flash_attention: bool = True, history=None, method=DEFAULT_METHOD,
                   confidence: float = 0.9, micro_batches=(1, 2, 4, 8), zero_stages=(1, 3),
                   recompute=("none", "selective", "full"), include_unfit: bool = False,
                   name: str = "llm") -> pd.DataFrame:
    """Every valid layout of a job (:func:`perfmodel.layout.enumerate_layouts`), its memory and predicted step.

    Parameters
    ----------
    shape : TransformerShape
        The model.
    seq_len, global_batch : int
        Tokens per sequence and sequences per step.
    gpu_type : str
        The device (any alias).
    devices : int
        Devices of the job.
    precision : str, default="bf16"
        The training precision.
    gpus_per_node : int, default=8
        Devices per node (NVLink domain).
    inter_node_gbps : float, optional
        The network per device, GB/s one way.
    optimizer : {"adamw", "sgd"}, default="adamw"
    flash_attention : bool, default=True
        Attention kernels that keep the score matrix on chip: its memory, and without them its traffic (time).
    history, method, confidence
        As in :func:`perfmodel.predict_training_time`.
    micro_batches, zero_stages, recompute
        The search space (:func:`perfmodel.layout.enumerate_layouts`).
    include_unfit : bool, default=False
        Keep the layouts whose memory estimate does not fit or may not (predicted too, ``fits`` False or None).
    name : str, default="llm"
        The model's label in the queries.

    Returns
    -------
    pandas.DataFrame
        One row per layout, fastest first: ``layout`` (in words), the degrees (``tp, pp, vp, cp, dp, ep``),
        ``micro_batch``, ``zero_stage``, ``recompute``, ``step_time_s``, ``step_lower``, ``step_upper``,
        ``vs_fastest`` (its step over the fastest one's in the table, which with ``include_unfit`` may not fit),
        ``told_apart`` (False where the step is within :func:`perfmodel.models.layout_tie_factor` of the
        fastest: the bundled layout model's errors between two layouts of one job could make this one the
        faster; None where the answers are not the bundled layout model's: a history of your own, whose errors
        the book does not know),
        ``memory_gb``, ``fits`` and the ``ParallelLayout`` itself (``layout_obj``). Empty when none is valid (or
        fits).

    Warns
    -----
    DataQualityWarning
        When a method other than the layout model answers (``method`` names another, the device's figures give
        no peak at ``precision`` or no memory bandwidth, or the runs that answer are not transformer training with
        layouts the layout model can price): it does not see the layout, so every layout gets the same time; the
        table is then ordered by memory (least first), ``vs_fastest`` empty.
    """
    gpu_type = resolve_gpu_type(gpu_type)
    devices = check_positive_int(devices, "devices", "search_layouts")
    layouts, mems = [], []
    for lay in enumerate_layouts(devices=devices, global_batch=global_batch, shape=shape, seq_len=seq_len,
                                 gpus_per_node=gpus_per_node, micro_batches=micro_batches, zero_stages=zero_stages,
                                 recompute=recompute):
        mem = estimate_memory(shape=shape, layout=lay, seq_len=seq_len, precision=precision, optimizer=optimizer,
                              gpu_type=gpu_type, global_batch=global_batch, flash_attention=flash_attention)
        if mem.fits is not True and not include_unfit:  # "may not fit" is not planned either
            continue
        layouts.append(lay)
        mems.append(mem)
    columns = ["layout", "tp", "pp", "vp", "cp", "dp", "ep", "micro_batch", "zero_stage", "recompute",
               "step_time_s", "step_lower", "step_upper", "vs_fastest", "told_apart", "memory_gb", "fits",
               "layout_obj"]
    if not layouts:
        return pd.DataFrame(columns=columns)
    q = _layout_rows(layouts, shape=shape, seq_len=seq_len, global_batch=global_batch, gpu_type=gpu_type,
                     devices=devices, precision=precision, gpus_per_node=gpus_per_node,
                     inter_node_gbps=inter_node_gbps, steps=1, name=name, flash_attention=flash_attention)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pred = predict_many(q, history=history, confidence=confidence, method=method)
    others = sorted(set(pred["method"].astype(str)) - {LAYOUT_METHOD})
    if others:  # a method that does not see the layout gives every layout of the job the same time
        why = (f"the device {gpu_type!r} has no peak at {precision} or no memory bandwidth in its figures (give "
               "them: perfmodel.hardware.register_device)" if not layout_priceable(q).all() else
               f"method={method!r}" if method != DEFAULT_METHOD else
               "the runs that answer them are not transformer training with a layout the layout model can price")
        warnings.warn(f"search_layouts: {', '.join(others)} answered these ({why}) and does not see the layout: "
                      "every layout gets the same time, so they are ordered by memory, not ranked by time "
                      "(vs_fastest is empty).", DataQualityWarning, stacklevel=2)
    out = pd.DataFrame({
        "layout": [lay.describe() for lay in layouts], "tp": q["tp"], "pp": q["pp"], "vp": q["vp"], "cp": q["cp"],
        "dp": q["dp"], "ep": q["ep"], "micro_batch": q["micro_batch_size"], "zero_stage": q["zero_stage"],
        "recompute": q["recompute"], "step_time_s": pred["step_time_s"].to_numpy(),
        "step_lower": pred["step_lower"].to_numpy(), "step_upper": pred["step_upper"].to_numpy(),
        "memory_gb": [m.total_gb for m in mems], "fits": [m.fits for m in mems], "layout_obj": layouts})
    out = out.sort_values(["memory_gb"] if others else ["step_time_s", "memory_gb"], kind="stable")
    out = out.reset_index(drop=True)
    out.insert(out.columns.get_loc("step_upper") + 1, "vs_fastest",
               np.nan if others else out["step_time_s"] / out["step_time_s"].min())
    # whether the layout model's errors between two layouts of one job could make this one the faster one: the
    # bundled fit's (the book's); an own history's calibration has errors the book does not know
    tie = layout_tie_factor(confidence) if history is None and (pred["method"] == LAYOUT_METHOD).all() else None
    out.insert(out.columns.get_loc("vs_fastest") + 1, "told_apart",
               pd.Series([None if tie is None or not np.isfinite(v) else bool(v > tie) for v in out["vs_fastest"]],
                         dtype=object))
    return out


def plan_llm_job(*, seq_len, global_batch, gpu_type, params=None, n_layers=None, d_model=None, vocab=None,
                 n_heads=None, n_kv_heads=None, ffn_mult=None, ffn_hidden=None, hf_config=None, shape=None,
                 tokens=None, samples=None, steps=None, gpu_count=None, nodes=None, gpus_per_node=None,
                 inter_node_gbps=None, zero_stage=1, tensor_parallel=1, pipeline_parallel=1, context_parallel=1,
                 expert_parallel=1, virtual_stages=1, micro_batch=None, sequence_parallel=None, recompute=None,
                 activation_checkpointing=False, flash_attention=True, optimizer="adamw", precision=None,
                 history=None, confidence=0.9, method=DEFAULT_METHOD, name="llm", search=False,
                 allow_no_fit=False, names=None) -> LLMJobPlan:
    """Plan a decoder-only LLM training job: time (with interval), derivation, layout and memory fit.

    The derivation is described in :mod:`perfmodel.plan._llm`; every figure is in the result. The time is what
    :func:`perfmodel.predict_training_time` answers for the same job.

    Parameters
    ----------
    seq_len : int
        Tokens per sequence.
    global_batch : int
        Sequences per optimizer step, over all devices.
    gpu_type : str
        Device name (any alias of :mod:`perfmodel.hardware`).
    params : float, optional
        Parameter count. Alone: the standard shape of that size is assumed (said in the notes). With a shape, it
        is the count reported; the time follows the shape.
    n_layers, d_model, vocab, n_heads, n_kv_heads : int, optional
        The decoder's shape (heads default ``d_model // 128``).
    ffn_mult, ffn_hidden : optional
        MLP width, as a multiple of ``d_model`` or in units (default ``4·d_model``).
    hf_config : str, os.PathLike, dict or transformers.PretrainedConfig, optional
        A Hugging Face config (dense or mixture of experts): the shape and exact parameter count
        (:func:`hf_config_shape`). Read locally, never downloaded. Excludes the shape parameters.
    shape : TransformerShape, optional
        The shape itself. Excludes the shape parameters and ``hf_config``.
    tokens, samples, steps : int, optional
        The amount of work: exactly one. ``tokens`` and ``samples`` are rounded up to whole steps.
    gpu_count : int, optional
        Devices in all. Or ``nodes`` and ``gpus_per_node`` (with ``gpu_count`` too, they must agree).
    nodes, gpus_per_node : int, optional
        The node layout (NVLink domain: 8 on HGX/DGX nodes, 72 on GB200 NVL72); default 8 devices per node.
    inter_node_gbps : float, optional
        Your cluster's scale-out network per device, GB/s one way (50 for one 400 Gb/s NIC per GPU). Default: the
        spec table's reference system's.
    zero_stage : {0, 1, 2, 3}, default=1
        Sharding over the data-parallel ranks (1: Megatron's distributed optimizer; 3: FSDP full shard).
    tensor_parallel, pipeline_parallel, context_parallel, expert_parallel, virtual_stages : int, default=1
        The layout's degrees; the data-parallel degree is ``devices / (tp·pp·cp)``.
    micro_batch : int, optional
        Sequences per forward/backward pass on one replica; default 1.
    sequence_parallel : bool, optional
        Default: on with tensor parallelism.
    recompute : {"none", "selective", "full"}, optional
        Activation recomputation; default ``"full"`` with ``activation_checkpointing``, else ``"none"``.
    activation_checkpointing : bool, default=False
        Full recomputation (``recompute="full"``).
    flash_attention : bool, default=True
        Attention kernels that keep the score matrix on chip (FlashAttention and its kin); False stores the
        scores (memory) and moves them through memory (time: the layout model's ``attn_bytes_s``).
    optimizer : {"adamw", "sgd"}, default="adamw"
    precision : {"fp32", "tf32", "fp16", "bf16", "fp8"}, optional
        Default: what the history's runs on the device mostly used (the result says it was assumed).
    history, confidence, method
        As in :func:`perfmodel.predict_training_time`.
    name : str, default="llm"
        The model's label in the query.
    search : bool, default=False
        Search every valid layout that fits (:func:`search_layouts`) and plan the fastest; the given degrees are
        then ignored (``zero_stage`` and ``recompute`` too), the ranking is in ``layouts``.
    allow_no_fit : bool, default=False
        Plan a layout whose memory estimate does not fit instead of refusing it.
    names : dict, optional
        How to name the layout's parameters in messages (default :data:`LAYOUT_PARAMETER_NAMES`; the CLI passes
        its flags).

    Returns
    -------
    LLMJobPlan

    Raises
    ------
    LayoutError
        A layout the training frameworks would not run (the message names each rule it breaks).
    DoesNotFitError
        The layout's memory estimate exceeds the device's (with the fastest layout that fits, when one does),
        unless ``allow_no_fit``.

    Examples
    --------
    >>> from perfmodel.plan import plan_llm_job
    >>> job = plan_llm_job(n_layers=32, d_model=4096, vocab=32000, seq_len=4096, tokens=100e9,
    ...                    global_batch=1024, gpu_type="H100", gpu_count=64, tensor_parallel=2)  # doctest: +SKIP
    >>> job.layout.describe()                                                 # doctest: +SKIP
    'tp 2 × dp 32, micro-batch 1, ZeRO-1, sequence parallel'
    """
    confidence = check_confidence(confidence, WHERE)
    check_choice(method, "method", WHERE, METHOD_CHOICES)
    check_choice(optimizer, "optimizer", WHERE, OPTIMIZERS)
    names = {**LAYOUT_PARAMETER_NAMES, **(names or {})}
    seq_len = whole_count(seq_len, "seq_len")
    global_batch = whole_count(global_batch, "global_batch")
    precision = None if precision is None else check_precision(precision, WHERE)
    for flag_name, flag in (("activation_checkpointing", activation_checkpointing),
                            ("flash_attention", flash_attention), ("search", search),
                            ("allow_no_fit", allow_no_fit)):
        if not isinstance(flag, bool):
            raise TypeError(f"The {flag_name!r} parameter of {WHERE} must be a bool. Got {flag!r} instead.")
    layout_args = LayoutArgs(tensor_parallel=tensor_parallel, pipeline_parallel=pipeline_parallel,
                             context_parallel=context_parallel, expert_parallel=expert_parallel,
                             virtual_stages=virtual_stages, micro_batch=micro_batch,
                             sequence_parallel=sequence_parallel, zero_stage=checked_zero_stage(zero_stage),
                             recompute=checked_recompute(recompute, activation_checkpointing))
    inter_node_gbps = check_positive_float(inter_node_gbps, "inter_node_gbps", WHERE, allow_none=True)
    notes: list[str] = []

    model = ModelArgs(params=params, shape=shape, hf_config=hf_config, n_layers=n_layers, d_model=d_model,
                      vocab=vocab, n_heads=n_heads, n_kv_heads=n_kv_heads, ffn_mult=ffn_mult,
                      ffn_hidden=ffn_hidden).resolve(notes)
    work = job_work(tokens, samples, steps, seq_len, global_batch, notes)
    where = job_devices(gpu_type, gpu_count=gpu_count, nodes=nodes, gpus_per_node=gpus_per_node)
    layout = layout_args.layout(where.devices, names)
    job = _Job(shape=model.shape, seq_len=seq_len, global_batch=global_batch, where=where,
               inter_node_gbps=inter_node_gbps, optimizer=optimizer, flash_attention=flash_attention,
               history=history, method=method, confidence=confidence, name=name)
    searched = None
    if search:
        searched = job.search(precision or "bf16")
        if not len(searched):
            raise DoesNotFitError(f"{WHERE}: no layout of this job on {where.devices} x {where.gpu_type} fits in "
                                  "memory (searched tensor, pipeline, context and expert degrees, micro-batches "
                                  "1-8, ZeRO-1 and FSDP, every recomputation); use more devices or a device with "
                                  "more memory.")
        layout = searched["layout_obj"].iloc[0]
        notes.append(f"layout searched: the fastest of {len(searched)} that fit in memory"
                     if searched["vs_fastest"].notna().all() else
                     f"layout searched: the one of {len(searched)} that fit in memory needing the least (the method "
                     "that answered does not see the layout, so it could not rank them by time)")
    else:
        check_layout(layout, devices=where.devices, global_batch=global_batch, shape=model.shape, seq_len=seq_len,
                     names=names)
        if micro_batch is None:
            notes.append(f"micro_batch not given: 1 sequence per pass (the frameworks' usual; {names['search']} "
                         "compares the others)")

    pred = job.predict(model.params, layout, steps=work.steps, precision=precision)
    used_precision = str(pred.query["precision"])
    if precision is None:
        notes.append(f"precision not given: assumed {used_precision!r} (what the history's runs on "
                     f"{where.gpu_type} mostly used)")
    flops, flops_formula = _flops(model.shape, seq_len, layout)
    memory = job.memory(layout, used_precision, model.params)
    if memory.fits is False and not allow_no_fit:
        raise _does_not_fit(job, layout, memory, used_precision, names)
    if memory.fits is False:
        notes.append("does not fit in device memory (see memory); allowed by allow_no_fit")
    elif memory.fits is None and memory.device_bytes is not None and not memory.lower_bound:
        notes.append(f"may not fit in device memory: {memory.short()}; {names['search']} finds layouts that fit")
    return LLMJobPlan(
        seconds=float(pred.seconds), lower=float(pred.lower), upper=float(pred.upper), prediction=pred,
        gpu_type=where.gpu_type, params=float(model.params), params_formula=model.params_formula,
        flops_per_sample=float(flops.model), flops_formula=flops_formula, tokens=int(work.tokens),
        samples=int(work.samples), steps=int(work.steps), seq_len=seq_len, global_batch=global_batch,
        devices=where.devices, nodes=where.nodes, gpus_per_node=where.gpus_per_node, data_parallel=layout.dp,
        tensor_parallel=layout.tp, pipeline_parallel=layout.pp, zero_stage=layout.zero_stage,
        micro_batch=layout.micro_batch, accumulation=global_batch // (layout.dp * layout.micro_batch),
        batch_size_per_device=global_batch / where.devices, precision=used_precision,
        precision_assumed=precision is None, memory=memory, shape=model.shape, layout=layout, flops=flops,
        breakdown=dict(pred.breakdown), layouts=None if searched is None else searched.drop(columns="layout_obj"),
        context_parallel=layout.cp, expert_parallel=layout.ep, virtual_stages=layout.vp,
        sequence_parallel=layout.sequence_parallel, recompute=layout.recompute,
        hf_config=None if model.hf is None else {k: v for k, v in model.hf.items() if k != "shape"}, notes=notes)


@dataclass(frozen=True)
class _Job:
    """What stays fixed while :func:`plan_llm_job` searches, predicts and checks the memory of its layouts: the
    model's shape, the work per step, the devices and the options of the prediction."""

    shape: TransformerShape
    seq_len: int
    global_batch: int
    where: JobDevices
    inter_node_gbps: float | None
    optimizer: str
    flash_attention: bool
    history: Any
    method: str
    confidence: float
    name: str

    def search(self, precision: str) -> pd.DataFrame:
        """The ranked layouts of the job that fit (:func:`search_layouts`)."""
        return search_layouts(shape=self.shape, seq_len=self.seq_len, global_batch=self.global_batch,
                              gpu_type=self.where.gpu_type, devices=self.where.devices, precision=precision,
                              gpus_per_node=self.where.gpus_per_node, inter_node_gbps=self.inter_node_gbps,
                              optimizer=self.optimizer, flash_attention=self.flash_attention, history=self.history,
                              method=self.method, confidence=self.confidence, name=self.name)

    def predict(self, params: float, layout: ParallelLayout, *, steps: int,
                precision: str | None) -> TrainingTimePrediction:
        """The prediction: the same call :func:`perfmodel.predict_training_time` answers for the job; its
        warnings are passed on, from the line that called :func:`plan_llm_job`."""
        spec = {"shape": self.shape, "params": params, "name": self.name,
                "family": "moe" if self.shape.is_moe else "decoder", "flash_attention": self.flash_attention}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pred = predict_training_time(spec, seq_len=self.seq_len, global_batch=self.global_batch,
                                         gpu_count=self.where.devices, gpu_type=self.where.gpu_type, steps=steps,
                                         precision=precision, layout=layout, gpus_per_node=self.where.gpus_per_node,
                                         inter_node_gbps=self.inter_node_gbps, history=self.history,
                                         confidence=self.confidence, method=self.method)
        for w in caught:  # passed on, from the caller's line (of plan_llm_job, which called this)
            warnings.warn(str(w.message), w.category, stacklevel=3)
        return pred

    def memory(self, layout: ParallelLayout, precision: str, params: float) -> MemoryEstimate:
        """The per-device memory of the job under ``layout`` (:func:`estimate_memory`)."""
        return estimate_memory(shape=self.shape, layout=layout, seq_len=self.seq_len, precision=precision,
                               optimizer=self.optimizer, gpu_type=self.where.gpu_type,
                               global_batch=self.global_batch, params=params, flash_attention=self.flash_attention)


def _flops(shape: TransformerShape, seq_len: int, layout: ParallelLayout) -> tuple[TransformerFlops, str]:
    """The FLOPs of one sequence under the layout's recomputation, and the formula in words."""
    flops = transformer_flops(shape, seq_len, recompute=layout.recompute)
    lookups = " and ".join(x for x in ("" if shape.tied_embeddings or not shape.vocab else "the untied input "
                                       "embedding", "the position table" if shape.positions else "") if x)
    formula = (f"6·N_a·seq + 12·L·h·hd·seq² with N_a = {shape.matmul_params():.4g} matmul parameters"
               + (" (a token's experts only)" if shape.is_moe else "")
               + (f" ({lookups}: lookups, not matmuls)" if lookups else "")
               + (f"; recomputation adds {flops.recompute:.3g}" if flops.recompute else ""))
    return flops, formula


def _does_not_fit(job: _Job, layout: ParallelLayout, memory: MemoryEstimate, precision: str,
                  names: dict) -> DoesNotFitError:
    """The refusal of a layout whose memory does not fit, naming the fastest layout that does (when one does)."""
    suggestion, ranked = None, True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataQualityWarning)  # a search the method cannot rank: said below
            found = job.search(precision)
        if len(found):
            suggestion = found["layout"].iloc[0]
            ranked = bool(found["vs_fastest"].notna().all())
    except (ValueError, TypeError):
        found = None
    which = "The fastest layout that fits" if ranked else "A layout that fits (the least memory of them)"
    hint = (f" {which}: {suggestion} ({names['search']} plans it)." if suggestion else
            " No layout of this job fits on these devices: use more devices or a device with more memory.")
    return DoesNotFitError(f"{WHERE}: the job does not fit in memory: {memory.short()} with {layout.describe()} "
                           f"({memory.total_gb:.1f} GB: weights {memory.weights_bytes / 1e9:.1f}, gradients "
                           f"{memory.gradients_bytes / 1e9:.1f}, optimizer {memory.optimizer_bytes / 1e9:.1f}, "
                           f"activations {(memory.activations_bytes or 0) / 1e9:.1f}).{hint} Give "
                           f"{names['allow_no_fit']} for its time anyway.", memory=memory, suggestion=suggestion)
