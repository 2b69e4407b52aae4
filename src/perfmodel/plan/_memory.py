"""Does a training job fit in device memory? :func:`estimate_memory`, a closed-form per-device estimate.

Per device, in bytes (``N`` parameters, ``dp`` / ``tp`` / ``pp`` the data-, tensor- and pipeline-parallel degrees):

* **Model state** (the ZeRO paper's accounting, Rajbhandari et al. 2020, section 3.1). Mixed precision
  (``fp16``/``bf16``, and ``fp8``, whose frameworks keep 16-bit weights and cast to FP8 inside the matmuls) with
  AdamW keeps 2 bytes of 16-bit weights, 2 of 16-bit gradients and 12 of optimizer state (fp32 master weights,
  momentum and variance) per parameter: 16 bytes. ``fp32``/``tf32`` keeps 4 + 4 + 8 (momentum and variance):
  also 16. SGD with momentum keeps 4 bytes of momentum (+ 4 of fp32 master weights in mixed precision).
  Tensor and pipeline parallelism give each device ``N / (tp·pp)`` of the parameters; ZeRO then divides, over the
  ``dp`` replicas, the optimizer state (stage 1), also the gradients (stage 2), also the weights (stage 3, which
  is FSDP's full sharding).
* **Activations** of one micro-batch of ``b`` sequences of ``s`` tokens, hidden size ``h``, ``a`` heads, ``L``
  layers (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", eq. 1-2,
  16-bit activations): ``s·b·h·(34 + 5·a·s/h)`` bytes per layer, or with tensor parallelism (no sequence
  parallelism) ``s·b·h·(10 + 24/tp + 5·a·s/(h·tp))``. The ``5·a·s/h`` term is the stored attention-score matrix;
  FlashAttention does not store it (``flash_attention=True`` drops it). With full activation checkpointing each
  layer keeps only its 16-bit input, ``2·s·b·h`` bytes, plus one layer's full activations while it is recomputed.
  With pipeline parallelism (1F1B schedule) the first stage holds ``pp`` micro-batches in flight for its
  ``L / pp`` layers: the same as ``L`` layers of one micro-batch, so ``pp`` does not reduce it. fp32 activations
  take twice the bytes. When ``vocab`` is given the logits of the loss add ``4·s·b·vocab / tp`` bytes (fp32).
* **Framework overhead**: a fixed ``overhead_bytes`` (default 2 GB: CUDA context, NCCL buffers, allocator
  fragmentation), an assumption rather than a measurement.

The total is compared with the device table's ``memory_gb`` (:mod:`perfmodel.hardware`, vendor GB = 1e9 bytes).
The estimate is the standard closed-form one; real peaks also depend on the framework, kernels and allocator, so
treat a configuration within ~10% of the device memory as uncertain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .._format import to_plain
from .._validation import check_choice, check_nonnegative_float, check_positive_float, check_positive_int
from ..hardware import PRECISIONS, get_spec, resolve_gpu_type

__all__ = ["estimate_memory", "MemoryEstimate", "model_state_bytes_per_param", "DEFAULT_OVERHEAD_BYTES",
           "OPTIMIZERS"]

#: Fixed per-device framework overhead assumed by :func:`estimate_memory` (bytes).
DEFAULT_OVERHEAD_BYTES = 2e9
#: Optimizers :func:`estimate_memory` knows the state of.
OPTIMIZERS = ("adamw", "sgd")

_WHERE = "estimate_memory"


def model_state_bytes_per_param(precision: str, optimizer: str = "adamw") -> tuple[float, float, float]:
    """``(weights, gradients, optimizer state)`` bytes per parameter, unsharded.

    >>> model_state_bytes_per_param("bf16")
    (2.0, 2.0, 12.0)
    >>> model_state_bytes_per_param("fp32")
    (4.0, 4.0, 8.0)
    """
    precision = _check_precision(precision, "model_state_bytes_per_param")
    check_choice(optimizer, "optimizer", "model_state_bytes_per_param", OPTIMIZERS)
    mixed = precision in ("fp16", "bf16", "fp8")
    w, g = (2.0, 2.0) if mixed else (4.0, 4.0)
    if optimizer == "adamw":
        opt = 12.0 if mixed else 8.0  # (fp32 master +) momentum + variance
    else:
        opt = 8.0 if mixed else 4.0  # (fp32 master +) momentum
    return w, g, opt


def _check_precision(precision, where: str) -> str:
    if not isinstance(precision, str) or precision.lower() not in PRECISIONS:
        raise ValueError(f"The 'precision' parameter of {where} must be one of {', '.join(PRECISIONS)}. "
                         f"Got {precision!r} instead.")
    return precision.lower()


@dataclass
class MemoryEstimate:
    """Per-device memory of a training job, in bytes, by part, and whether it fits.

    Attributes
    ----------
    weights_bytes, gradients_bytes, optimizer_bytes : float
        Model state on one device, after tensor/pipeline parallelism and ZeRO sharding.
    activations_bytes : float or None
        Activations of one micro-batch (None when the architecture is not known: the total is then a lower bound).
    overhead_bytes : float
        The fixed framework overhead assumed.
    total_bytes : float
        The sum (without activations when they are None).
    device_bytes : float or None
        The device's memory (``memory_gb`` × 1e9); None when the table has no figure.
    fits : bool or None
        ``total_bytes <= device_bytes``; None when the device memory is unknown. With activations unknown, False
        is certain (the model state alone does not fit) and True is not.
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
        Sequences (samples) per device per forward/backward pass.
    activation_checkpointing : bool
        Whether full activation checkpointing was assumed.
    flash_attention : bool
        Whether attention was assumed not to store the score matrix.
    notes : list of str
        Caveats of the estimate (what was not estimated and why).
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
    notes: list = field(default_factory=list)

    @property
    def total_gb(self) -> float:
        return self.total_bytes / 1e9

    @property
    def device_gb(self) -> float | None:
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
        verdict = "fits" if self.fits else "does NOT fit"
        if self.fits and self.lower_bound:
            verdict = "model state fits (activations not estimated)"
        return f"{total} of {self.device_gb:.0f} GB per device: {verdict}"

    def __str__(self) -> str:
        gb = lambda v: f"{v / 1e9:.1f}"  # noqa: E731
        act = "not estimated" if self.activations_bytes is None else gb(self.activations_bytes)
        return (f"{self.short()} (weights {gb(self.weights_bytes)} + gradients {gb(self.gradients_bytes)} + "
                f"optimizer {gb(self.optimizer_bytes)} + activations {act} + overhead {gb(self.overhead_bytes)} GB; "
                f"{self.precision}, {self.optimizer}, ZeRO-{self.zero_stage}, micro-batch {self.micro_batch}"
                f"{', checkpointing' if self.activation_checkpointing else ''})")


def activation_bytes(*, seq_len: int, micro_batch: int, d_model: int, n_layers: int, n_heads: int,
                     tensor_parallel: int = 1, activation_checkpointing: bool = False,
                     flash_attention: bool = False, precision: str = "bf16", vocab: int | None = None) -> float:
    """Activation bytes of one micro-batch on one device (Korthikanti et al. 2022; see the module docstring)."""
    s, b, h, a, t = seq_len, micro_batch, d_model, n_heads, tensor_parallel
    scores = 0.0 if flash_attention else 5 * a * s / (h * t)
    per_layer = s * b * h * (10 + 24 / t + scores)  # = 34 + 5·a·s/h at tp = 1
    scale = 2.0 if precision in ("fp32", "tf32") else 1.0  # the formula counts 16-bit activations
    if activation_checkpointing:
        total = n_layers * 2 * s * b * h * scale + per_layer * scale  # layer inputs + one layer recomputed
    else:
        total = n_layers * per_layer * scale
    if vocab:
        total += 4.0 * s * b * vocab / t  # fp32 logits for the loss
    return float(total)


def estimate_memory(*, params, gpu_type=None, precision="bf16", micro_batch=1, seq_len=None, n_layers=None,
                    d_model=None, n_heads=None, vocab=None, optimizer="adamw", zero_stage=0, data_parallel=1,
                    tensor_parallel=1, pipeline_parallel=1, activation_checkpointing=False, flash_attention=False,
                    overhead_bytes=DEFAULT_OVERHEAD_BYTES) -> MemoryEstimate:
    """Per-device memory of a training step (weights, gradients, optimizer state, activations, overhead).

    The formulas are in :mod:`perfmodel.plan._memory`'s docstring (ZeRO accounting for the model state,
    Korthikanti et al. 2022 for transformer activations).

    Parameters
    ----------
    params : float
        Parameter count of the whole model.
    gpu_type : str, optional
        Device to compare with (its ``memory_gb`` in the spec table); None: no comparison.
    precision : {"fp32", "tf32", "fp16", "bf16", "fp8"}, default="bf16"
    micro_batch : int, default=1
        Sequences (samples) per device per forward/backward pass.
    seq_len, n_layers, d_model : int, optional
        The transformer's shape; all three are needed to estimate activations (without them the total is a
        lower bound: model state and overhead only).
    n_heads : int, optional
        Attention heads; default ``d_model // 128`` (head size 128).
    vocab : int, optional
        Vocabulary size: adds the fp32 logits of the loss.
    optimizer : {"adamw", "sgd"}, default="adamw"
    zero_stage : {0, 1, 2, 3}, default=0
        ZeRO / FSDP sharding over the data-parallel replicas (3 = FSDP full shard).
    data_parallel, tensor_parallel, pipeline_parallel : int, default=1
    activation_checkpointing : bool, default=False
        Full activation checkpointing (recompute each layer in the backward pass).
    flash_attention : bool, default=False
        Attention that does not store the score matrix (FlashAttention / SDPA memory-efficient kernels).
    overhead_bytes : float, default=2e9
        Fixed framework overhead per device.

    Returns
    -------
    MemoryEstimate

    Examples
    --------
    >>> m = estimate_memory(params=1.3e9, gpu_type="L4", precision="fp16", micro_batch=16, seq_len=2048,
    ...                     n_layers=24, d_model=2048)
    >>> m.fits, round(m.weights_bytes + m.gradients_bytes + m.optimizer_bytes)
    (False, 20800000000)
    """
    params = check_positive_float(params, "params", _WHERE)
    precision = _check_precision(precision, _WHERE)
    check_choice(optimizer, "optimizer", _WHERE, OPTIMIZERS)
    if isinstance(zero_stage, bool) or zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"The 'zero_stage' parameter of {_WHERE} must be 0, 1, 2 or 3. Got {zero_stage!r} instead.")
    micro_batch = check_positive_int(micro_batch, "micro_batch", _WHERE)
    dp = check_positive_int(data_parallel, "data_parallel", _WHERE)
    tp = check_positive_int(tensor_parallel, "tensor_parallel", _WHERE)
    pp = check_positive_int(pipeline_parallel, "pipeline_parallel", _WHERE)
    overhead_bytes = check_nonnegative_float(overhead_bytes, "overhead_bytes", _WHERE)
    for name, flag in (("activation_checkpointing", activation_checkpointing), ("flash_attention", flash_attention)):
        if not isinstance(flag, bool):
            raise TypeError(f"The {name!r} parameter of {_WHERE} must be a bool. Got {flag!r} instead.")
    shape = {"seq_len": seq_len, "n_layers": n_layers, "d_model": d_model}
    shape = {k: check_positive_int(v, k, _WHERE, allow_none=True) for k, v in shape.items()}
    vocab = check_positive_int(vocab, "vocab", _WHERE, allow_none=True)
    notes = []
    w_b, g_b, o_b = model_state_bytes_per_param(precision, optimizer)
    local = params / (tp * pp)
    weights = local * w_b / (dp if zero_stage >= 3 else 1)
    grads = local * g_b / (dp if zero_stage >= 2 else 1)
    opt = local * o_b / (dp if zero_stage >= 1 else 1)
    if all(v is not None for v in shape.values()):
        d = shape["d_model"]
        heads = check_positive_int(n_heads, "n_heads", _WHERE) if n_heads is not None else max(1, d // 128)
        acts = activation_bytes(seq_len=shape["seq_len"], micro_batch=micro_batch, d_model=d,
                                n_layers=shape["n_layers"], n_heads=heads, tensor_parallel=tp,
                                activation_checkpointing=activation_checkpointing, flash_attention=flash_attention,
                                precision=precision, vocab=vocab)
    else:
        acts = None
        missing = [k for k, v in shape.items() if v is None]
        notes.append(f"activations not estimated (no {', '.join(missing)}): the total is a lower bound")
    total = weights + grads + opt + (acts or 0.0) + overhead_bytes
    device_bytes, fits, name = None, None, None
    if gpu_type is not None:
        name = resolve_gpu_type(gpu_type)
        mem = get_spec(name).memory_gb
        if mem is not None and math.isfinite(mem):
            device_bytes = float(mem) * 1e9
            fits = bool(total <= device_bytes)
        else:
            notes.append(f"the spec table has no memory size for {name!r}")
    return MemoryEstimate(weights_bytes=float(weights), gradients_bytes=float(grads), optimizer_bytes=float(opt),
                          activations_bytes=acts, overhead_bytes=float(overhead_bytes), total_bytes=float(total),
                          device_bytes=device_bytes, fits=fits, gpu_type=name, precision=precision,
                          optimizer=optimizer, zero_stage=int(zero_stage), data_parallel=dp, tensor_parallel=tp,
                          pipeline_parallel=pp, micro_batch=micro_batch,
                          activation_checkpointing=activation_checkpointing, flash_attention=flash_attention,
                          notes=notes)
