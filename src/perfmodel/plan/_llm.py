"""Job-shaped queries for decoder-only language models: :func:`plan_llm_job`.

An LLM job is stated the way its owner thinks of it (a model size or shape, tokens, sequence length, global batch,
devices or nodes, parallelism, precision), and turned into the query :func:`perfmodel.predict_training_time`
answers, with every step of the derivation kept in the result:

* **Parameters** (when not given): ``N = (4 + 2·ffn_mult)·L·d² + vocab·d`` for ``L`` layers of hidden size ``d``
  (attention Q, K, V and output projections ``4·d²``; an MLP of ``ffn_mult·d`` hidden units ``2·ffn_mult·d²``; one
  embedding matrix, tied with the output head), i.e. ``12·L·d² + vocab·d`` for ``ffn_mult=4``. Biases and norms
  (``O(L·d)``) are left out. Llama-2 7B (``L=32, d=4096, vocab=32000``; SwiGLU with 3 matrices of 11008, about
  the same as ``ffn_mult=4``; untied head) gives 6.57e9 against its 6.74e9.
* **FLOPs per sample** (forward + backward, one sequence): ``6·N·seq + 12·L·d·seq²`` (the matmul FLOPs of the
  weights, plus attention scores and values; Kaplan et al. 2020, and PaLM's appendix B, which also counts no
  causal-mask saving). Full activation checkpointing recomputes the forward pass: ``8·N·seq + 16·L·d·seq²``.
  Without ``n_layers`` and ``d_model`` the attention term is left out (``6·N·seq``) and the result says so.
* **Steps**: ``ceil(tokens / (global_batch·seq))`` (or ``ceil(samples / global_batch)``, or ``steps``).
* **Layout**: ``devices = gpu_count`` or ``nodes × gpus_per_node``; data-parallel degree
  ``dp = devices / (tp·pp)``; each replica takes ``global_batch / dp`` sequences per step, in micro-batches of
  ``micro_batch`` (default: all at once) with ``accumulation = global_batch / (dp·micro_batch)``.
* **Prediction**: :func:`perfmodel.predict_training_time` with the model's ``params`` and ``flops_per_sample``,
  ``batch_size = global_batch / devices`` (each device's share of the step's sequences) and ``gpu_count =
  devices``: the convention of the bundled MLPerf history, whose GPT-3 rows record tensor/pipeline-parallel jobs
  the same way. The fitted models scale **data-parallel** work only.
* **Tensor / pipeline parallelism** (``tp`` or ``pp > 1``): a documented estimate is added to each step, not learned
  from runs. Tensor parallelism (Megatron-LM) does 4 all-reduces of ``seq·micro_batch·d`` 16-bit activations per
  layer and micro-batch (2 forward, 2 backward); a ring all-reduce moves ``2·(tp−1)/tp`` of that over the
  device's link, taken as half the spec table's ``interconnect_gbps`` (which is bidirectional), within a node.
  Each device does this for its ``L/pp`` layers. Pipeline parallelism (1F1B) idles a fraction
  ``(pp−1)/accumulation`` of the compute (the bubble), which multiplies the step time by ``1 + (pp−1)/m``.
  The device table has no inter-node bandwidth, so tensor groups that span nodes are refused and the pipeline's
  point-to-point sends between nodes are not costed.
* **Memory**: :func:`perfmodel.plan.estimate_memory` per device, with the micro-batch.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass, field

from .._format import format_duration, to_plain
from .._validation import check_choice, check_confidence, check_positive_float, check_positive_int
from ..fitting import DEFAULT_METHOD
from ..hardware import PRECISIONS, get_spec, resolve_gpu_type
from ..models import METHODS
from ..predict import TrainingTimePrediction, predict_training_time
from ._cost import CostEstimate, estimate_cost
from ._memory import OPTIMIZERS, MemoryEstimate, estimate_memory

__all__ = ["plan_llm_job", "LLMJobPlan", "decoder_params", "decoder_flops_per_sample"]

_WHERE = "plan_llm_job"


def decoder_params(n_layers: int, d_model: int, vocab: int = 0, ffn_mult: float = 4.0) -> float:
    """Parameters of a decoder-only transformer: ``(4 + 2·ffn_mult)·L·d² + vocab·d`` (tied embedding).

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

    >>> round(decoder_flops_per_sample(7e9, 4096, 32, 4096) / 1e12, 1)
    198.4
    """
    n = check_positive_float(params, "params", "decoder_flops_per_sample")
    s = check_positive_int(seq_len, "seq_len", "decoder_flops_per_sample")
    attn = 0.0
    if n_layers is not None and d_model is not None:
        attn = 12.0 * n_layers * d_model * s * s
    base = 6.0 * n * s + attn
    return base * (4 / 3 if activation_checkpointing else 1.0)


@dataclass
class LLMJobPlan:
    """An LLM training job planned from its shape: the time prediction, how the query was derived, and memory.

    Attributes
    ----------
    seconds, lower, upper : float
        Predicted wall-clock time and its prediction interval (with the tensor/pipeline estimate when tp or
        pp > 1; else exactly ``prediction``'s).
    prediction : TrainingTimePrediction
        What :func:`perfmodel.predict_training_time` answered for the data-parallel query.
    params, params_formula : float, str
        The parameter count, and how it was obtained ("given", or the formula with its values).
    flops_per_sample, flops_formula : float, str
        Forward + backward FLOPs of one sequence, and the formula used.
    tokens, samples, steps, seq_len, global_batch : int
        The work: ``steps`` optimizer steps of ``global_batch`` sequences of ``seq_len`` tokens.
    devices, nodes, gpus_per_node, data_parallel, tensor_parallel, pipeline_parallel, zero_stage : int
    micro_batch, accumulation : int
        Sequences per forward/backward pass on one replica, and passes per step.
    batch_size_per_device : int
        ``global_batch / devices``, the ``batch_size`` given to the prediction.
    precision : str
        The precision predicted for; ``precision_assumed`` says whether it was assumed (not given).
    memory : MemoryEstimate
    tp_pp : dict or None
        The tensor/pipeline estimate: ``tp_comm_s_per_step``, ``pp_bubble_factor``, ``link_gb_per_s``, ``note``.
    notes : list of str
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
    batch_size_per_device: int
    precision: str
    precision_assumed: bool
    memory: MemoryEstimate
    tp_pp: dict | None = None
    notes: list = field(default_factory=list)

    @property
    def confidence(self) -> float:
        return self.prediction.confidence

    @property
    def fits(self) -> bool | None:
        """Whether the memory estimate fits the device (see :class:`MemoryEstimate`)."""
        return self.memory.fits

    def cost(self, *, provider=None, prices=None, spot=False, **kwargs) -> CostEstimate:
        """Dollars for the job on ``devices`` devices (:func:`perfmodel.plan.estimate_cost`)."""
        return estimate_cost(seconds=self.seconds, lower=self.lower, upper=self.upper, gpu_type=self.gpu_type,
                             gpu_count=self.devices, provider=provider, prices=prices, spot=spot, **kwargs)

    def to_dict(self) -> dict:
        """Plain JSON types only (``json.dumps(..., allow_nan=False)`` accepts it)."""
        out = to_plain(self)
        out["memory"] = self.memory.to_dict()
        return out

    def __str__(self) -> str:
        pct = f"{self.confidence * 100:g}%"
        p = self.prediction
        where = (f"{self.nodes} nodes x {self.gpus_per_node}" if self.nodes else f"{self.devices}")
        lines = [
            f"{format_duration(self.seconds)} ({pct} PI {format_duration(self.lower)} – {format_duration(self.upper)}; "
            f"{p.method}, R² {p.r2:.2f}, {p.n_runs} runs) on {where} x {self.gpu_type} in {self.precision}"
            f"{' (assumed)' if self.precision_assumed else ''}",
            f"work: {_si(self.tokens)} tokens = {self.steps:,} steps x {self.global_batch:,} sequences x "
            f"{self.seq_len:,} tokens",
            f"model: {_si(self.params)} params ({self.params_formula})",
            f"FLOPs per sample: {self.flops_formula} = {self.flops_per_sample:.4g}",
            f"layout: {self.devices} devices = data {self.data_parallel} x tensor {self.tensor_parallel} x pipeline "
            f"{self.pipeline_parallel}; ZeRO-{self.zero_stage}; micro-batch {self.micro_batch} x accumulation "
            f"{self.accumulation} per replica; predicted as batch {self.batch_size_per_device} per device",
            f"memory: {self.memory}",
        ]
        if self.tp_pp:
            lines.append(f"tensor/pipeline: {self.tp_pp['note']}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _si(x: float) -> str:
    """``100B``, ``1.3B``, ``350M``: counts as LLM people write them."""
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= div:
            return f"{x / div:.4g}{unit}"
    return f"{x:g}"


def _count(value, name: str) -> int:
    """A positive whole number, also given as a float such as ``100e9``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"The {name!r} parameter of {_WHERE} must be a positive whole number. Got {value!r} "
                        f"of type {type(value).__name__} instead.")
    if not math.isfinite(float(value)) or float(value) <= 0 or not float(value).is_integer():
        raise ValueError(f"The {name!r} parameter of {_WHERE} must be a positive whole number. Got {value!r} instead.")
    return check_positive_int(int(value), name, _WHERE)


def plan_llm_job(*, seq_len, global_batch, gpu_type, params=None, n_layers=None, d_model=None, vocab=None,
                 n_heads=None, ffn_mult=4.0, tokens=None, samples=None, steps=None, gpu_count=None, nodes=None,
                 gpus_per_node=None, zero_stage=0, tensor_parallel=1, pipeline_parallel=1, micro_batch=None,
                 activation_checkpointing=False, flash_attention=False, optimizer="adamw", precision=None,
                 history=None, confidence=0.9, method=DEFAULT_METHOD, name="llm") -> LLMJobPlan:
    """Plan a decoder-only LLM training job from its shape: time (with interval), derivation and memory fit.

    The derivation (parameters, FLOPs per sample ``6·N·seq + 12·L·d·seq²``, steps, layout, tensor/pipeline
    estimate) is described in :mod:`perfmodel.plan._llm`; every figure is in the result.

    Parameters
    ----------
    seq_len : int
        Tokens per sequence.
    global_batch : int
        Sequences per optimizer step, over all devices.
    gpu_type : str
        Device name (any alias of :mod:`perfmodel.hardware`).
    params : float, optional
        Parameter count. Or give the architecture (``n_layers``, ``d_model``, ``vocab``) and it is derived;
        with both, ``params`` is used and the architecture gives the attention FLOPs and the activations.
    n_layers, d_model, vocab : int, optional
        The decoder's layers, hidden size and vocabulary.
    n_heads : int, optional
        Attention heads (for the activation memory); default ``d_model // 128``.
    ffn_mult : float, default=4
        MLP width as a multiple of ``d_model``.
    tokens, samples, steps : int, optional
        The amount of work: exactly one. ``tokens`` (e.g. ``100e9``) and ``samples`` (sequences) are rounded up
        to whole steps.
    gpu_count : int, optional
        Devices in all. Or ``nodes`` and ``gpus_per_node`` (with ``gpu_count`` too, they must agree).
    nodes, gpus_per_node : int, optional
    zero_stage : {0, 1, 2, 3}, default=0
        ZeRO / FSDP sharding over the data-parallel replicas (3 = FSDP full shard); memory only.
    tensor_parallel, pipeline_parallel : int, default=1
        Degrees of tensor and pipeline parallelism; the data-parallel degree is ``devices / (tp·pp)``.
    micro_batch : int, optional
        Sequences per forward/backward pass on one replica; default ``global_batch / dp`` (no accumulation).
    activation_checkpointing : bool, default=False
        Full activation checkpointing: less activation memory, one more forward pass of FLOPs.
    flash_attention : bool, default=False
        Attention kernels that do not store the score matrix (memory only).
    optimizer : {"adamw", "sgd"}, default="adamw"
    precision : {"fp32", "tf32", "fp16", "bf16", "fp8"}, optional
        Default: what the history's runs on the device used (the result says it was assumed).
    history, confidence, method
        As in :func:`perfmodel.predict_training_time`.
    name : str, default="llm"
        The model's label in the query.

    Returns
    -------
    LLMJobPlan

    Examples
    --------
    >>> from perfmodel.plan import plan_llm_job
    >>> job = plan_llm_job(n_layers=32, d_model=4096, vocab=32000, seq_len=4096, tokens=100e9,
    ...                    global_batch=1024, gpu_type="H100", gpu_count=64)  # doctest: +SKIP
    >>> job.steps, job.fits                                                   # doctest: +SKIP
    (23842, False)
    """
    confidence = check_confidence(confidence, _WHERE)
    check_choice(method, "method", _WHERE, (*METHODS, "auto"))
    check_choice(optimizer, "optimizer", _WHERE, OPTIMIZERS)
    seq_len = _count(seq_len, "seq_len")
    global_batch = _count(global_batch, "global_batch")
    if precision is not None and (not isinstance(precision, str) or precision.lower() not in PRECISIONS):
        raise ValueError(f"The 'precision' parameter of {_WHERE} must be one of {', '.join(PRECISIONS)}. "
                         f"Got {precision!r} instead.")
    for flag_name, flag in (("activation_checkpointing", activation_checkpointing),
                            ("flash_attention", flash_attention)):
        if not isinstance(flag, bool):
            raise TypeError(f"The {flag_name!r} parameter of {_WHERE} must be a bool. Got {flag!r} instead.")
    if isinstance(zero_stage, bool) or zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"The 'zero_stage' parameter of {_WHERE} must be 0, 1, 2 or 3. Got {zero_stage!r} instead.")
    notes: list[str] = []

    # --- the model
    arch = {k: (None if v is None else _count(v, k)) for k, v in
            (("n_layers", n_layers), ("d_model", d_model), ("vocab", vocab))}
    L, d, V = arch["n_layers"], arch["d_model"], arch["vocab"]
    if n_heads is not None:
        n_heads = _count(n_heads, "n_heads")
        if d is not None and d % n_heads:
            raise ValueError(f"The 'n_heads' parameter of {_WHERE} must divide d_model={d}. Got {n_heads!r}.")
    ffn_mult = check_positive_float(ffn_mult, "ffn_mult", _WHERE)
    if params is not None:
        params = check_positive_float(params, "params", _WHERE)
        params_formula = "given"
        if L is not None and d is not None:
            derived = decoder_params(L, d, V or 0, ffn_mult)
            if not 0.75 <= params / derived <= 1.33:
                notes.append(f"params={params:.4g} differs from (4 + 2·ffn_mult)·L·d² + vocab·d = {derived:.4g} "
                             "by more than a third: check the architecture")
    elif L is not None and d is not None:
        params = decoder_params(L, d, V or 0, ffn_mult)
        f = f"{ffn_mult:g}"
        params_formula = (f"(4 + 2·{f})·L·d² + vocab·d with L={L}, d={d}, vocab={V or 0}" if ffn_mult != 4 else
                          f"12·L·d² + vocab·d with L={L}, d={d}, vocab={V or 0}")
        if V is None:
            notes.append("no vocab given: the embedding's vocab·d parameters are left out")
    else:
        raise ValueError(f"{_WHERE} needs the model: 'params', or 'n_layers' and 'd_model' (and 'vocab'). "
                         f"Got params=None, n_layers={n_layers!r}, d_model={d_model!r}.")
    fps = decoder_flops_per_sample(params, seq_len, L, d, activation_checkpointing=activation_checkpointing)
    if L is not None and d is not None:
        flops_formula = ("8·N·seq + 16·L·d·seq² (6·N·seq + 12·L·d·seq², + 1/3 for recomputing the forward pass)"
                         if activation_checkpointing else "6·N·seq + 12·L·d·seq²")
    else:
        flops_formula = "8·N·seq (6·N·seq + 1/3 recompute)" if activation_checkpointing else "6·N·seq"
        notes.append("no n_layers/d_model: the attention FLOPs (12·L·d·seq²) are left out and activation memory is "
                     "not estimated")

    # --- the work
    given = [k for k, v in (("tokens", tokens), ("samples", samples), ("steps", steps)) if v is not None]
    if len(given) != 1:
        raise ValueError(f"{_WHERE} needs exactly one of 'tokens', 'samples' or 'steps'. Got "
                         f"{', '.join(given) if given else 'none'}.")
    if tokens is not None:
        tokens = _count(tokens, "tokens")
        samples = -(-tokens // seq_len)
        n_steps = -(-samples // global_batch)
    elif samples is not None:
        samples = _count(samples, "samples")
        n_steps = -(-samples // global_batch)
    else:
        n_steps = _count(steps, "steps")
    samples = n_steps * global_batch
    tokens_done = samples * seq_len
    if tokens is not None and tokens_done != tokens:
        notes.append(f"{tokens:,} tokens rounded up to {n_steps:,} whole steps ({tokens_done:,} tokens)")

    # --- the layout
    if nodes is not None or gpus_per_node is not None:
        if nodes is None or gpus_per_node is None:
            raise ValueError(f"{_WHERE} takes 'nodes' and 'gpus_per_node' together. Got nodes={nodes!r}, "
                             f"gpus_per_node={gpus_per_node!r}.")
        nodes = _count(nodes, "nodes")
        gpus_per_node = _count(gpus_per_node, "gpus_per_node")
        devices = nodes * gpus_per_node
        if gpu_count is not None and _count(gpu_count, "gpu_count") != devices:
            raise ValueError(f"The 'gpu_count' parameter of {_WHERE} ({gpu_count!r}) is not nodes x gpus_per_node "
                             f"= {nodes} x {gpus_per_node} = {devices}.")
    elif gpu_count is not None:
        devices = _count(gpu_count, "gpu_count")
    else:
        raise ValueError(f"{_WHERE} needs the devices: 'gpu_count', or 'nodes' and 'gpus_per_node'.")
    tp = _count(tensor_parallel, "tensor_parallel")
    pp = _count(pipeline_parallel, "pipeline_parallel")
    if devices % (tp * pp):
        raise ValueError(f"{_WHERE}: {devices} devices do not divide into tensor_parallel x pipeline_parallel = "
                         f"{tp} x {pp}; the data-parallel degree devices / (tp·pp) must be whole.")
    dp = devices // (tp * pp)
    if global_batch % dp:
        raise ValueError(f"The 'global_batch' parameter of {_WHERE} ({global_batch}) must be a multiple of the "
                         f"data-parallel degree {dp} (= {devices} devices / (tp {tp} x pp {pp})).")
    if global_batch % devices:
        raise ValueError(f"The 'global_batch' parameter of {_WHERE} ({global_batch}) must be a multiple of the "
                         f"device count {devices}: the prediction takes each device's share of a step's sequences "
                         "as a whole batch.")
    per_replica = global_batch // dp
    if micro_batch is None:
        micro_batch = per_replica
    else:
        micro_batch = _count(micro_batch, "micro_batch")
        if per_replica % micro_batch:
            raise ValueError(f"The 'micro_batch' parameter of {_WHERE} ({micro_batch}) must divide the "
                             f"{per_replica} sequences each data-parallel replica takes per step.")
    accumulation = per_replica // micro_batch
    if tp > 1 and gpus_per_node is not None and tp > gpus_per_node:
        raise ValueError(f"tensor_parallel={tp} spans nodes of {gpus_per_node} devices: the device table has no "
                         "inter-node bandwidth to estimate its all-reduces; keep tensor groups within a node.")
    per_device = global_batch // devices

    # --- the prediction (data-parallel)
    g = resolve_gpu_type(gpu_type)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pred = predict_training_time({"params": params, "flops_per_sample": fps, "name": name},
                                     batch_size=per_device, gpu_count=devices, gpu_type=g, steps=n_steps,
                                     precision=precision, history=history, confidence=confidence, method=method)
    for w in caught:  # passed on, from the caller's line
        warnings.warn(str(w.message), w.category, stacklevel=2)
    used_precision = str(pred.query["precision"])
    assumed = precision is None
    if assumed:
        notes.append(f"precision not given: assumed {used_precision!r} (what the history's runs on {g} mostly used)")

    # --- tensor / pipeline estimate
    seconds, lower, upper = pred.seconds, pred.lower, pred.upper
    tp_pp = None
    if tp > 1 or pp > 1:
        spec = get_spec(g)
        link = spec.interconnect_gbps
        comm = 0.0
        parts = []
        if tp > 1:
            if link is None or not math.isfinite(link):
                raise ValueError(f"tensor_parallel={tp}: the spec table has no interconnect bandwidth for {g!r}, so "
                                 "the tensor-parallel all-reduces cannot be estimated.")
            bytes_per = 2.0 if used_precision != "fp32" and used_precision != "tf32" else 4.0
            volume = 4 * (L or 0) / pp * 2 * (tp - 1) / tp * seq_len * micro_batch * (d or 0) * bytes_per
            comm = accumulation * volume / (link / 2 * 1e9)
            if L is None or d is None:
                parts.append("tensor-parallel all-reduces not estimated (no n_layers/d_model)")
            else:
                parts.append(f"tensor-parallel all-reduces {comm:.3g} s per step (4 per layer and micro-batch, ring "
                             f"over {link / 2:g} GB/s, half of {g}'s {link:g} GB/s {spec.interconnect})")
        bubble = 1.0 + (pp - 1) / accumulation if pp > 1 else 1.0
        if pp > 1:
            parts.append(f"pipeline bubble x{bubble:.3g} ((pp−1)/micro-batches = {pp - 1}/{accumulation}; "
                         "inter-node sends not costed: the device table has no inter-node bandwidth)")
        start = pred.startup_seconds
        step = lambda s: s * bubble + comm  # noqa: E731
        seconds = start + n_steps * step(pred.step_seconds)
        lower = start + n_steps * step(pred.step_lower)
        upper = start + n_steps * step(pred.step_upper)
        note = ("the fitted models scale data-parallel work only; the tensor/pipeline communication is an "
                "estimate, not learned from runs: " + "; ".join(parts))
        tp_pp = {"tp_comm_s_per_step": comm, "pp_bubble_factor": bubble,
                 "link_gb_per_s": None if link is None else link / 2, "note": note}

    memory = estimate_memory(params=params, gpu_type=g, precision=used_precision, micro_batch=micro_batch,
                             seq_len=seq_len, n_layers=L, d_model=d, n_heads=n_heads, vocab=V, optimizer=optimizer,
                             zero_stage=zero_stage, data_parallel=dp, tensor_parallel=tp, pipeline_parallel=pp,
                             activation_checkpointing=activation_checkpointing, flash_attention=flash_attention)
    if memory.fits is False:
        notes.append("does not fit in device memory (see memory): try zero_stage=3, activation_checkpointing=True, "
                     "flash_attention=True, a smaller micro_batch or more tensor/pipeline parallelism")
    return LLMJobPlan(
        seconds=float(seconds), lower=float(lower), upper=float(upper), prediction=pred, gpu_type=g,
        params=float(params), params_formula=params_formula, flops_per_sample=float(fps),
        flops_formula=flops_formula, tokens=int(tokens_done), samples=int(samples), steps=int(n_steps),
        seq_len=seq_len, global_batch=global_batch, devices=devices, nodes=nodes, gpus_per_node=gpus_per_node,
        data_parallel=dp, tensor_parallel=tp, pipeline_parallel=pp, zero_stage=int(zero_stage),
        micro_batch=micro_batch, accumulation=accumulation, batch_size_per_device=per_device,
        precision=used_precision, precision_assumed=assumed, memory=memory, tp_pp=tp_pp, notes=notes)
