"""Does a training job fit in device memory? :func:`estimate_memory`, a closed-form per-device estimate of the kind
the training frameworks print (Megatron-LM's ``theoretical_memory_usage``, Korthikanti et al. 2022).

Per device, in bytes, for a transformer of shape ``L, d, h, kv·hd, ffn, V`` (:mod:`perfmodel.transformer`) under a
layout ``tp, pp, cp, dp, ep, vp``, micro-batch ``b``, sequence ``s`` (:mod:`perfmodel.layout`):

* **Model state** (the ZeRO paper's accounting, Rajbhandari et al. 2020, section 3.1, with Megatron-LM's fp32
  gradient buffers): mixed precision (``fp16``/``bf16``) with AdamW keeps 2 bytes of 16-bit weights, 4 of fp32
  gradients (Megatron accumulates and reduces them in fp32 by default) and 12 of optimizer state (fp32 master
  weights, momentum and variance) per parameter: 18; ``fp8`` keeps 1 byte more per parameter (the fp8 weight
  copies of Transformer Engine); ``fp32``/``tf32`` keeps 4 + 4 + 8. SGD with momentum keeps 4 bytes of momentum (+
  4 of fp32 master weights in mixed precision). A device holds ``dense/tp + experts/(ep·tp)`` of its pipeline
  stage's parameters: the whole model without pipelining, else the busiest stage's — its ``⌈L/(pp·vp)⌉·vp`` layers
  and one ``V·d`` matrix (Megatron-LM puts the input embedding on the first stage and the output head, or a copy of
  the tied embedding, on the last), ``1/pp`` of the model when the shape is unknown;
  ZeRO then divides, over the ``dp·cp`` ranks that hold the same parameters (a mixture's experts: ``dp·cp/ep``),
  the optimizer state (stage 1: Megatron's distributed optimizer), also the gradients (stage 2), also the weights
  (stage 3: FSDP's full sharding, which keeps the sharded weights in fp32 as the master copy — 4 + 4 + 8 bytes
  with AdamW — and gathers one layer's 16-bit weights at a time, two with prefetching).
* **Activations** of one micro-batch per layer, per token of the ``s/cp`` on the device, in 16-bit bytes
  (Korthikanti et al. 2022, eq. 1–2, generalised to grouped-query attention and gated MLPs): attention
  ``7·d + 4·kv·hd`` (``11·d`` for multi-head attention), MLP ``3·d + 4·ffn`` (gated: ``3·d + 6·ffn``; a mixture's
  expert layer ``3·d + 4·k·d + 6·k·ffn_e`` with its routed copies), two norms ``4·d`` — ``34·d`` for the plain
  case —, of which ``10·d`` (norm inputs, dropout masks, the attention and MLP inputs) is not split by tensor
  parallelism unless it is sequence-parallel; plus the attention scores ``5·h·s`` unless FlashAttention-style
  kernels (the default) or selective recomputation drop them. Full recomputation keeps each layer's ``2·d`` input
  and one layer's full activations. The first pipeline stage holds ``min(m, pp)`` micro-batches in flight for its
  ``⌈L/(pp·vp)⌉·vp`` layers (× ``1 + (pp−1)/(pp·vp)`` when interleaved); the last stage adds the loss's logits,
  ``6·s·b·V/tp`` bytes (16-bit and fp32). fp32 activations take twice the bytes.
* **Framework overhead**: a fixed ``overhead_bytes`` (default 2 GB: CUDA context, NCCL buffers, allocator
  fragmentation), an assumption rather than a measurement.

A model given by its size alone is estimated with the standard shape of that size
(:func:`perfmodel.transformer.standard_shape`), said in ``notes``. Without a sequence length the activations are
not estimated: the total is a lower bound, and ``fits`` is then False when the model state alone does not fit and
None (unknown) otherwise — a lower bound never reads "fits".

The total is compared with the device table's ``memory_gb`` (:mod:`perfmodel.hardware`, vendor GB = 1e9 bytes):
it fits when below it, does not when above it by more than the estimate's error (:data:`MEMORY_MARGIN`), and may
not in between. Real peaks also depend on the framework, kernels and allocator; ``benchmarks/llm_layouts.py``
measures the error against published peak memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .._format import to_plain
from .._validation import check_choice, check_nonnegative_float, check_positive_float, check_positive_int
from ..hardware import MIXED_PRECISIONS, PRECISION_TABLE, check_precision, get_spec, resolve_gpu_type
from ..layout import ParallelLayout
from ..transformer import RECOMPUTE_MODES, TransformerShape, standard_shape

__all__ = ["estimate_memory", "MemoryEstimate", "model_state_bytes_per_param", "layout_activation_bytes",
           "DEFAULT_OVERHEAD_BYTES", "OPTIMIZERS", "MEMORY_MARGIN"]

#: Fixed per-device framework overhead assumed by :func:`estimate_memory` (bytes).
DEFAULT_OVERHEAD_BYTES = 2e9
#: How far above the device's memory an estimate may be and still be "may not fit" (``fits`` None) rather than
#: "does NOT fit": the largest over-estimate among the published, completed LLM Foundry runs, whose recomputation
#: is stated (11%), rounded up; ``benchmarks/llm_layouts.py`` measures it on every set.
MEMORY_MARGIN = 0.15
#: Optimizers :func:`estimate_memory` knows the state of.
OPTIMIZERS = ("adamw", "sgd")

_WHERE = "estimate_memory"


def model_state_bytes_per_param(precision: str, optimizer: str = "adamw") -> tuple[float, float, float]:
    """``(weights, gradients, optimizer state)`` bytes per parameter, unsharded (module docstring).

    Parameters
    ----------
    precision : {"fp32", "tf32", "fp16", "bf16", "fp8"}
        The training precision.
    optimizer : {"adamw", "sgd"}, default="adamw"
        The optimizer.

    Returns
    -------
    tuple of float
        Bytes per parameter of the weights, the gradients and the optimizer state.

    Examples
    --------
    >>> model_state_bytes_per_param("bf16")
    (2.0, 4.0, 12.0)
    >>> model_state_bytes_per_param("fp32")
    (4.0, 4.0, 8.0)
    """
    precision = check_precision(precision, "model_state_bytes_per_param")
    check_choice(optimizer, "optimizer", "model_state_bytes_per_param", OPTIMIZERS)
    mixed = precision in MIXED_PRECISIONS
    w = PRECISION_TABLE[precision].weight_bytes
    g = 4.0  # fp32 gradient buffers (mixed precision) or fp32 gradients
    if optimizer == "adamw":
        opt = 12.0 if mixed else 8.0  # (fp32 master +) momentum + variance
    else:
        opt = 8.0 if mixed else 4.0  # (fp32 master +) momentum
    return w, g, opt


@dataclass
class MemoryEstimate:
    """Per-device memory of a training job, in bytes, by part, and whether it fits.

    Attributes
    ----------
    weights_bytes, gradients_bytes, optimizer_bytes : float
        Model state on one device, after tensor/pipeline/expert parallelism and ZeRO sharding.
    activations_bytes : float or None
        Activations held at the peak (the first pipeline stage's micro-batches in flight, or the last stage's
        logits); None when the sequence length is not known: the total is then a lower bound.
    overhead_bytes : float
        The fixed framework overhead assumed.
    total_bytes : float
        The sum (without activations when they are None).
    device_bytes : float or None
        The device's memory (``memory_gb`` × 1e9); None when the table has no figure.
    fits : bool or None
        True when ``total_bytes <= device_bytes``; False when it exceeds the device's memory by more than the
        estimate's error (:data:`MEMORY_MARGIN`), or when the model state alone does not fit; None ("may not fit",
        or unknown) in between, when the device memory is unknown, or when the activations are not estimated and
        the model state alone fits (a lower bound never reads "fits").
    gpu_type : str or None
        The device compared with (resolved name); None when none was given.
    precision : str
        The training precision.
    optimizer : str
        The optimizer (``"adamw"`` or ``"sgd"``).
    zero_stage : int
        ZeRO / FSDP sharding stage (0-3).
    data_parallel, tensor_parallel, pipeline_parallel : int
        The parallel layout.
    micro_batch : int
        Sequences per forward/backward pass on one replica.
    activation_checkpointing : bool
        Whether full recomputation was assumed.
    flash_attention : bool
        Whether attention was assumed not to store the score matrix.
    context_parallel, expert_parallel, virtual_stages : int, default=1
        The rest of the layout.
    sequence_parallel : bool, default=False
        Whether tensor-parallel ranks split the sequence in norms and dropouts.
    recompute : str, default="none"
        Activation recomputation (``none``, ``selective``, ``full``).
    in_flight : float, default=1
        Micro-batches whose activations the first pipeline stage holds at once.
    notes : list of str
        Caveats of the estimate (what was assumed or not estimated, and why).
    """

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float | None
    overhead_bytes: float
    total_bytes: float
    device_bytes: float | None
    fits: bool | None
    gpu_type: str | None
    precision: str
    optimizer: str
    zero_stage: int
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    micro_batch: int
    activation_checkpointing: bool
    flash_attention: bool
    context_parallel: int = 1
    expert_parallel: int = 1
    virtual_stages: int = 1
    sequence_parallel: bool = False
    recompute: str = "none"
    in_flight: float = 1.0
    notes: list = field(default_factory=list)

    @property
    def total_gb(self) -> float:
        """The total in GB (1e9 bytes)."""
        return self.total_bytes / 1e9

    @property
    def device_gb(self) -> float | None:
        """The device's memory in GB; None where unknown."""
        return None if self.device_bytes is None else self.device_bytes / 1e9

    @property
    def lower_bound(self) -> bool:
        """True when activations were not estimated (the total is a lower bound)."""
        return self.activations_bytes is None

    def to_dict(self) -> dict:
        """Plain JSON types only, with ``total_gb`` and ``device_gb``.

        Returns
        -------
        dict
            The fields by name, plus ``total_gb`` and ``device_gb``.
        """
        return to_plain({**{k: getattr(self, k) for k in self.__dataclass_fields__}, "total_gb": self.total_gb,
                         "device_gb": self.device_gb})

    def short(self) -> str:
        """One phrase: ``"123 GB of 80 GB per device: does NOT fit"``.

        Returns
        -------
        str
            The total (``>=`` when activations were not estimated), the device's memory and the verdict.
        """
        total = f"{'>= ' if self.lower_bound else ''}{self.total_gb:.1f} GB"
        if self.device_bytes is None:
            return f"{total} per device (device memory unknown)"
        if self.fits is None and self.lower_bound:
            return f"{total} of {self.device_gb:.0f} GB per device: model state fits; activations not estimated " \
                   "(no sequence length), so whether the job fits is unknown"
        if self.fits is None:
            return f"{total} of {self.device_gb:.0f} GB per device: may not fit (above the device's memory by less " \
                   f"than the estimate's error, {MEMORY_MARGIN:.0%})"
        return f"{total} of {self.device_gb:.0f} GB per device: {'fits' if self.fits else 'does NOT fit'}"

    def __str__(self) -> str:
        gb = lambda v: f"{v / 1e9:.1f}"  # noqa: E731
        act = "not estimated" if self.activations_bytes is None else gb(self.activations_bytes)
        return (f"{self.short()} (weights {gb(self.weights_bytes)} + gradients {gb(self.gradients_bytes)} + "
                f"optimizer {gb(self.optimizer_bytes)} + activations {act} + overhead {gb(self.overhead_bytes)} GB; "
                f"{self.precision}, {self.optimizer}, ZeRO-{self.zero_stage}, micro-batch {self.micro_batch}"
                f"{', sequence parallel' if self.sequence_parallel and self.tensor_parallel > 1 else ''}"
                f"{'' if self.recompute == 'none' else f', {self.recompute} recomputation'})")


def _token_layer_bytes(shape: TransformerShape, *, expert: bool) -> tuple[float, float]:
    """Activation bytes per token of one layer (16-bit): ``(not split by tp without SP, split by tp)``."""
    kv_heads, head_dim, ffn = shape.n_kv_heads, shape.head_dim, shape.ffn_hidden
    assert kv_heads is not None and head_dim is not None and ffn is not None  # set by TransformerShape itself
    d, kvd = shape.d_model, kv_heads * head_dim
    attention = 7 * d + 4 * kvd
    norms = 4 * d
    if expert:
        k, fe = shape.experts_per_token, shape.moe_ffn_hidden
        assert fe is not None  # an expert layer: the shape is a mixture, whose moe_ffn_hidden is set
        mlp = 3 * d + 4 * k * d + (2 * shape.mlp_matrices) * (k + shape.n_shared_experts) * fe
    else:
        mlp = 3 * d + 2 * shape.mlp_matrices * ffn
    replicated = 10 * d
    return replicated, attention + mlp + norms - replicated


def layout_activation_bytes(shape: TransformerShape, layout: ParallelLayout, *, seq_len: int,
                            global_batch: int | None = None, precision: str = "bf16",
                            flash_attention: bool = True) -> tuple[float, float]:
    """Activation bytes one device holds at its peak, and the micro-batches in flight (module docstring).

    Parameters
    ----------
    shape : TransformerShape
        The model.
    layout : ParallelLayout
        The layout.
    seq_len : int
        Tokens per sequence.
    global_batch : int, optional
        Sequences per step (bounds the micro-batches in flight); default: as many as the pipeline holds.
    precision : str, default="bf16"
        fp32/tf32 activations take twice the bytes.
    flash_attention : bool, default=True
        Attention kernels that store no score matrix.

    Returns
    -------
    tuple of float
        The bytes, and the micro-batches in flight on the first pipeline stage.
    """
    tp, pp, vp, cp, b = layout.tp, layout.pp, layout.vp, layout.cp, layout.micro_batch
    tokens = b * seq_len / cp
    sp = layout.sequence_parallel and tp > 1
    scale = 1.0 if precision in MIXED_PRECISIONS else 2.0
    stage_layers = math.ceil(shape.n_layers / (pp * vp)) * vp
    expert_share = shape.moe_layers / shape.n_layers
    scores = 0.0 if flash_attention or layout.recompute != "none" else 5.0 * shape.n_heads * seq_len / cp / tp

    def per_layer(expert: bool) -> float:
        rep, split = _token_layer_bytes(shape, expert=expert)
        return tokens * (rep / (tp if sp else 1) + split / tp + scores)

    dense_layer = per_layer(False)
    expert_layer = per_layer(True) if shape.is_moe else dense_layer
    layer = (1 - expert_share) * dense_layer + expert_share * expert_layer
    if layout.recompute == "full":  # each layer's input kept; one layer's activations rebuilt at a time
        held = stage_layers * tokens * 2 * shape.d_model / (tp if sp else 1)
        working = max(dense_layer, expert_layer)
    else:
        held, working = stage_layers * layer, 0.0
    micro = math.inf if global_batch is None else global_batch / (layout.dp * b)
    in_flight = min(micro, pp) * ((1 + (pp - 1) / (pp * vp)) if vp > 1 else 1.0)
    first = held * in_flight + working
    logits = 6.0 * tokens * shape.vocab / tp
    last = held + working + logits if pp > 1 else 0.0
    total = max(first + (logits if pp == 1 else 0.0), last)
    return float(total * scale), float(in_flight)


def estimate_memory(*, params=None, gpu_type=None, precision="bf16", micro_batch=1, seq_len=None, n_layers=None,
                    d_model=None, n_heads=None, vocab=None, optimizer="adamw", zero_stage=0, data_parallel=1,
                    tensor_parallel=1, pipeline_parallel=1, activation_checkpointing=False, flash_attention=True,
                    overhead_bytes=DEFAULT_OVERHEAD_BYTES, shape=None, layout=None, global_batch=None,
                    context_parallel=1, expert_parallel=1, virtual_stages=1, sequence_parallel=None,
                    recompute=None) -> MemoryEstimate:
    """Per-device memory of a training step (weights, gradients, optimizer state, activations, overhead).

    The formulas are in :mod:`perfmodel.plan._memory`'s docstring.

    Parameters
    ----------
    params : float, optional
        Parameter count of the whole model (or give ``shape``; with both, the shape's count is used for the
        model state when it is within a third of ``params``, else ``params``).
    gpu_type : str, optional
        Device to compare with (its ``memory_gb`` in the spec table); None: no comparison.
    precision : {"fp32", "tf32", "fp16", "bf16", "fp8"}, default="bf16"
    micro_batch : int, default=1
        Sequences per forward/backward pass on one replica.
    seq_len : int, optional
        Tokens per sequence: without it the activations are not estimated (the total is a lower bound).
    n_layers, d_model, n_heads, vocab : int, optional
        The transformer's shape (heads default ``d_model // 128``, the MLP ``4·d_model``); without ``n_layers``
        and ``d_model`` (and no ``shape``), the standard shape of ``params``
        (:func:`perfmodel.transformer.standard_shape`), said in the notes.
    optimizer : {"adamw", "sgd"}, default="adamw"
    zero_stage : {0, 1, 2, 3}, default=0
        ZeRO / FSDP sharding over the data-parallel replicas (1 = Megatron's distributed optimizer, 3 = FSDP full
        shard).
    data_parallel, tensor_parallel, pipeline_parallel : int, default=1
    activation_checkpointing : bool, default=False
        Full recomputation (the same as ``recompute="full"``).
    flash_attention : bool, default=True
        Attention that does not store the score matrix (FlashAttention / SDPA memory-efficient kernels).
    overhead_bytes : float, default=2e9
        Fixed framework overhead per device.
    shape : TransformerShape, optional
        The model's shape (instead of ``n_layers``, ``d_model``...).
    layout : ParallelLayout, optional
        The layout (instead of the degrees, ``micro_batch``, ``zero_stage``...).
    global_batch : int, optional
        Sequences per step: bounds the micro-batches a pipeline holds in flight.
    context_parallel, expert_parallel, virtual_stages : int, default=1
    sequence_parallel : bool, optional
        Default: on where ``tensor_parallel > 1``.
    recompute : {"none", "selective", "full"}, optional
        Default ``"full"`` with ``activation_checkpointing``, else ``"none"``.

    Returns
    -------
    MemoryEstimate

    Examples
    --------
    >>> m = estimate_memory(params=1.3e9, gpu_type="L4", precision="fp16", micro_batch=16, seq_len=2048,
    ...                     n_layers=24, d_model=2048)
    >>> m.fits, round(m.weights_bytes + m.gradients_bytes + m.optimizer_bytes)
    (False, 21743271936)
    """
    precision = check_precision(precision, _WHERE)
    check_choice(optimizer, "optimizer", _WHERE, OPTIMIZERS)
    overhead_bytes = check_nonnegative_float(overhead_bytes, "overhead_bytes", _WHERE)
    for name, flag in (("activation_checkpointing", activation_checkpointing), ("flash_attention", flash_attention)):
        if not isinstance(flag, bool):
            raise TypeError(f"The {name!r} parameter of {_WHERE} must be a bool. Got {flag!r} instead.")
    notes: list = []
    if layout is None:
        layout = _degrees_layout(zero_stage=zero_stage, tensor_parallel=tensor_parallel,
                                 pipeline_parallel=pipeline_parallel, context_parallel=context_parallel,
                                 data_parallel=data_parallel, expert_parallel=expert_parallel,
                                 virtual_stages=virtual_stages, micro_batch=micro_batch,
                                 sequence_parallel=sequence_parallel, recompute=recompute,
                                 activation_checkpointing=activation_checkpointing)
    elif not isinstance(layout, ParallelLayout):
        raise TypeError(f"The 'layout' parameter of {_WHERE} must be a ParallelLayout. Got {type(layout).__name__}.")
    if global_batch is not None:
        global_batch = check_positive_int(global_batch, "global_batch", _WHERE)
    seq_len = check_positive_int(seq_len, "seq_len", _WHERE, allow_none=True)
    if params is not None:
        params = check_positive_float(params, "params", _WHERE)
    if shape is None:
        shape = _given_shape(n_layers=n_layers, d_model=d_model, n_heads=n_heads, vocab=vocab, params=params,
                             seq_len=seq_len, notes=notes)
    elif not isinstance(shape, TransformerShape):
        raise TypeError(f"The 'shape' parameter of {_WHERE} must be a TransformerShape. Got {type(shape).__name__}.")
    weights, grads, opt = _model_state_bytes(shape, params, layout, precision, optimizer, notes)
    acts: float | None = None
    in_flight = 1.0
    if shape is not None and seq_len is not None:
        acts, in_flight = layout_activation_bytes(shape, layout, seq_len=seq_len, global_batch=global_batch,
                                                  precision=precision, flash_attention=flash_attention)
    else:
        notes.append("activations not estimated (no sequence length): the total is a lower bound")
    total_bytes = weights + grads + opt + (acts or 0.0) + overhead_bytes
    device_name, device_bytes, fits = _device_fit(gpu_type, total_bytes, lower_bound=acts is None, notes=notes)
    return MemoryEstimate(weights_bytes=float(weights), gradients_bytes=float(grads), optimizer_bytes=float(opt),
                          activations_bytes=acts, overhead_bytes=float(overhead_bytes), total_bytes=float(total_bytes),
                          device_bytes=device_bytes, fits=fits, gpu_type=device_name, precision=precision,
                          optimizer=optimizer, zero_stage=layout.zero_stage, data_parallel=layout.dp,
                          tensor_parallel=layout.tp, pipeline_parallel=layout.pp, micro_batch=layout.micro_batch,
                          activation_checkpointing=layout.recompute == "full", flash_attention=flash_attention,
                          context_parallel=layout.cp, expert_parallel=layout.ep, virtual_stages=layout.vp,
                          sequence_parallel=layout.sequence_parallel, recompute=layout.recompute,
                          in_flight=in_flight, notes=notes)


def _degrees_layout(*, zero_stage, tensor_parallel, pipeline_parallel, context_parallel, data_parallel,
                    expert_parallel, virtual_stages, micro_batch, sequence_parallel, recompute,
                    activation_checkpointing: bool) -> ParallelLayout:
    """The layout :func:`estimate_memory` is given as degrees (without ``layout=``), checked."""
    if isinstance(zero_stage, bool) or zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"The 'zero_stage' parameter of {_WHERE} must be 0, 1, 2 or 3. Got {zero_stage!r} "
                         "instead.")
    tp = check_positive_int(tensor_parallel, "tensor_parallel", _WHERE)
    if recompute is None:
        recompute = "full" if activation_checkpointing else "none"
    if recompute not in RECOMPUTE_MODES:
        raise ValueError(f"The 'recompute' parameter of {_WHERE} must be one of {', '.join(RECOMPUTE_MODES)}. "
                         f"Got {recompute!r}.")
    return ParallelLayout(tp=tp, pp=check_positive_int(pipeline_parallel, "pipeline_parallel", _WHERE),
                          cp=check_positive_int(context_parallel, "context_parallel", _WHERE),
                          dp=check_positive_int(data_parallel, "data_parallel", _WHERE),
                          ep=check_positive_int(expert_parallel, "expert_parallel", _WHERE),
                          vp=check_positive_int(virtual_stages, "virtual_stages", _WHERE),
                          micro_batch=check_positive_int(micro_batch, "micro_batch", _WHERE),
                          zero_stage=int(zero_stage), recompute=recompute,
                          sequence_parallel=(tp > 1) if sequence_parallel is None else bool(sequence_parallel))


def _given_shape(*, n_layers, d_model, n_heads, vocab, params: float | None, seq_len: int | None,
                 notes: list) -> TransformerShape | None:
    """The shape :func:`estimate_memory` is given as ``n_layers``, ``d_model``... (without ``shape=``); the
    standard shape of ``params`` when only the size and a sequence length are given; None with the size alone."""
    L = check_positive_int(n_layers, "n_layers", _WHERE, allow_none=True)
    d = check_positive_int(d_model, "d_model", _WHERE, allow_none=True)
    V = check_positive_int(vocab, "vocab", _WHERE, allow_none=True) or 0
    if L is not None and d is not None:
        h = check_positive_int(n_heads, "n_heads", _WHERE) if n_heads is not None else max(1, d // 128)
        return TransformerShape(n_layers=L, d_model=d, n_heads=h, vocab=V,
                                head_dim=None if d % h == 0 else max(1, d // h))
    if params is None:
        raise ValueError(f"{_WHERE} needs the model: 'params', 'shape', or 'n_layers' and 'd_model'.")
    if seq_len is None:
        return None
    shape = standard_shape(params, vocab=V or 32000)
    notes.append(f"shape not given: the standard shape of a {params:.3g}-parameter decoder "
                 f"(L={shape.n_layers}, d={shape.d_model}, {shape.n_heads} heads, gated MLP "
                 f"{shape.ffn_hidden}, vocabulary {shape.vocab})")
    return shape


def _model_state_bytes(shape: TransformerShape | None, params: float | None, layout: ParallelLayout,
                       precision: str, optimizer: str, notes: list) -> tuple[float, float, float]:
    """Weights, gradients and optimizer state on one device, in bytes (module docstring, "Model state")."""
    tp, ep = layout.tp, layout.ep
    replicas = layout.dp * layout.cp
    experts: float
    if shape is not None:
        experts = shape.moe_layers * shape.n_experts * shape.mlp_params(shape.moe_ffn_hidden) if shape.is_moe else 0
        total = float(shape.params())
        if params is not None and not 0.75 <= params / total <= 1.33:
            notes.append(f"params={params:.4g} differs from the shape's {total:.4g} by more than a third: the model "
                         "state uses params")
            scale = params / total
            experts, total = experts * scale, params
    else:
        assert params is not None  # _given_shape refuses a model given neither way
        experts, total = 0.0, float(params)
    dense = total - experts
    if shape is not None and layout.pp > 1:  # the busiest pipeline stage, not an even share (module docstring)
        share = _stage_share(shape, layout)
        dense, experts = dense * share, experts * share
    else:
        dense, experts = dense / layout.pp, experts / layout.pp
    w_b, g_b, o_b = model_state_bytes_per_param(precision, optimizer)
    if layout.zero_stage >= 3 and precision in MIXED_PRECISIONS:
        # FSDP keeps the sharded weights themselves in fp32 (they are the master copy; 16-bit copies are made
        # per layer when gathered): no separate fp32 master in the optimizer state
        w_b, o_b = w_b + 2.0, o_b - 4.0
    parts = [(dense / tp, replicas), (experts / (ep * tp), max(1, replicas // ep))]
    weights = sum(n * w_b / (r if layout.zero_stage >= 3 else 1) for n, r in parts)
    grads = sum(n * g_b / (r if layout.zero_stage >= 2 else 1) for n, r in parts)
    opt = sum(n * o_b / (r if layout.zero_stage >= 1 else 1) for n, r in parts)
    if layout.zero_stage >= 3 and shape is not None:  # one layer's weights gathered at a time (and the next prefetched)
        weights += 2 * (shape.layer_params() / shape.n_layers) / tp * 2.0
    return weights, grads, opt


def _stage_share(shape: TransformerShape, layout: ParallelLayout) -> float:
    """The share of the model's parameters the busiest pipeline stage holds (``pp > 1``): its
    ``⌈L/(pp·vp)⌉·vp`` layers and one ``V·d`` matrix (the first stage's input embedding, or the last stage's output
    head, a copy of it when tied), learned positions on the first."""
    total = float(shape.params())
    layers = math.ceil(shape.n_layers / (layout.pp * layout.vp)) * layout.vp
    ends = shape.vocab * shape.d_model + shape.positions * shape.d_model
    return min(1.0, (layers * shape.layer_params() / shape.n_layers + ends) / total)


def _device_fit(gpu_type, total_bytes: float, *, lower_bound: bool,
                notes: list) -> tuple[str | None, float | None, bool | None]:
    """``(device name, device bytes, fits)``: the estimate against the device's memory (module docstring)."""
    if gpu_type is None:
        return None, None, None
    device_bytes, fits = None, None
    name = resolve_gpu_type(gpu_type)
    mem = get_spec(name).memory_gb
    if mem is not None and math.isfinite(mem):
        device_bytes = float(mem) * 1e9
        if lower_bound:  # a lower bound never reads "fits"
            fits = False if total_bytes > device_bytes else None
        elif total_bytes <= device_bytes:
            fits = True
        elif total_bytes > device_bytes * (1 + MEMORY_MARGIN):
            fits = False
        else:  # within the estimate's own error of the device's memory: may or may not fit
            fits = None
            notes.append(f"the estimate exceeds the device's memory by less than the estimate's own error "
                         f"({MEMORY_MARGIN:.0%}): the job may not fit")
    else:
        notes.append(f"the spec table has no memory size for {name!r}")
    return name, device_bytes, fits
