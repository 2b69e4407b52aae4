"""Job-shaped queries for decoder-only language models: :func:`plan_llm_job`.

An LLM job is stated the way its owner thinks of it (a model size, shape or Hugging Face config, tokens, sequence
length, global batch, devices or nodes, parallelism, precision), and turned into the query
:func:`perfmodel.predict_training_time` answers, with every step of the derivation kept in the result:

* **Parameters** (when not given): ``N = (4 + 2·ffn_mult)·L·d² + vocab·d`` for ``L`` layers of hidden size ``d``
  (attention Q, K, V and output projections ``4·d²``; an MLP of ``ffn_mult·d`` hidden units ``2·ffn_mult·d²``; one
  embedding matrix, tied with the output head), i.e. ``12·L·d² + vocab·d`` for ``ffn_mult=4``. Biases and norms
  (``O(L·d)``) are left out. Llama-2 7B (``L=32, d=4096, vocab=32000``; SwiGLU with 3 matrices of 11008, about
  the same as ``ffn_mult=4``; untied head) gives 6.57e9 against its 6.74e9.
* **From a Hugging Face config** (``hf_config=``: a ``config.json`` path, a dict, or a ``PretrainedConfig``; read
  locally, never downloaded): ``L`` = ``num_hidden_layers`` (GPT-2: ``n_layer``), ``d`` = ``hidden_size``
  (``n_embd``), ``h`` = ``num_attention_heads`` (``n_head``), ``kv`` = ``num_key_value_heads`` (default ``h``),
  head size ``hd`` = ``head_dim`` (default ``d/h``), ``ffn`` = ``intermediate_size`` (GPT-2: ``n_inner``, default
  ``4·d``), ``vocab`` = ``vocab_size``, and

  ``N = L·(2·d·(h + kv)·hd + m·d·ffn + biases + norms) + vocab·d·(1 if tied else 2) + positions·d + final norm``

  with ``m = 3`` for a gated MLP (SwiGLU: Llama, Mistral, Qwen2, Gemma, ...; else decided by ``hidden_act`` =
  ``silu``) and 2 otherwise (GPT-2, GPT-NeoX, ...); ``tie_word_embeddings`` (default true, as in ``transformers``)
  decides whether the output head is a second ``vocab·d`` matrix; learned position embeddings (GPT-2's
  ``n_positions``) add ``positions·d``; norms are ``d`` (RMSNorm, configs with ``rms_norm_eps``) or ``2·d``
  (LayerNorm) twice per layer and once at the end; biases (GPT-2; ``attention_bias`` / ``mlp_bias`` when true) add
  ``(h + 2·kv)·hd + d`` and ``m'·ffn + d``. GPT-2 small (12, 768, 50257) gives 124,439,808 and Llama-2 7B
  (32, 4096, 11008, 32000, untied) 6,738,415,616, their published counts. Mixture-of-experts and encoder-decoder
  configs are refused. The FLOPs below then use the *matmul* parameters: ``N`` less the untied input embedding and
  the position table, which are lookups.
* **FLOPs per sample** (forward + backward, one sequence): ``6·N·seq + 12·L·d·seq²`` (the matmul FLOPs of the
  weights, plus attention scores and values; Kaplan et al. 2020, and PaLM's appendix B, which also counts no
  causal-mask saving). Full activation checkpointing recomputes the forward pass: ``8·N·seq + 16·L·d·seq²``.
  Without ``n_layers`` and ``d_model`` the attention term is left out (``6·N·seq``) and the result says so.
* **Steps**: ``ceil(tokens / (global_batch·seq))`` (or ``ceil(samples / global_batch)``, or ``steps``).
* **Layout**: ``devices = gpu_count`` or ``nodes × gpus_per_node``; data-parallel degree
  ``dp = devices / (tp·pp)``; each replica takes ``global_batch / dp`` sequences per step, in micro-batches of
  ``micro_batch`` (default: all at once) with ``accumulation = global_batch / (dp·micro_batch)``. Ranks are laid
  out as Megatron-LM does: tensor-parallel innermost, then data-parallel, then pipeline stages, so a node of
  ``g = gpus_per_node`` devices holds ``k = min(dp, g / tp)`` members of each data-parallel group.
* **Prediction**: :func:`perfmodel.predict_training_time` with the model's ``params`` and ``flops_per_sample``,
  ``batch_size = global_batch / devices`` (each device's share of the step's sequences) and ``gpu_count =
  devices``: the convention of the bundled MLPerf history, whose GPT-3 rows record tensor/pipeline-parallel jobs
  the same way. The fitted models scale **data-parallel** work only, as they learned it from the history's runs
  (single- and multi-node).
* **Communication** (an estimate added to each step, not learned from runs). Links: ``B_intra`` = half the spec
  table's ``interconnect_gbps`` (which is bidirectional), within a node; ``B_net`` = the inter-node network per
  device, ``inter_node_gbps=`` when given, else the spec table's ``network_gbps`` (the reference system's, e.g.
  DGX H100: 50 GB/s per GPU), both GB/s in one direction. ``b`` = 2 bytes (4 in fp32/tf32).

  - *Tensor parallelism* (Megatron-LM): 4 all-reduces of ``seq·micro_batch·d`` activations per layer and
    micro-batch (2 forward, 2 backward), for the device's ``L/pp`` layers; a ring all-reduce moves
    ``2·(tp−1)/tp`` of that, over ``B_intra``, or over ``min(B_intra, B_net)`` when the tensor group spans nodes
    (``tp > gpus_per_node``), which is allowed only when ``B_net`` is known.
  - *Pipeline parallelism* (1F1B): the bubble idles ``(pp−1)/accumulation`` of the compute, multiplying the step
    by ``1 + (pp−1)/m``; and each micro-batch's activations go forward and their gradients back,
    ``2·accumulation·seq·micro_batch·d·b`` bytes per step over ``B_intra``, or ``B_net`` when the stages span
    nodes (with more than one node a pipeline always does, in the layout above). Not costed between nodes when
    ``B_net`` is unknown.
  - *Data parallelism* across nodes: a hierarchical all-reduce of the device's ``G = N/(tp·pp)·b`` gradient bytes,
    once per step: reduce-scatter and all-gather among the ``k`` group members in a node, a ring all-reduce of each
    ``1/k`` shard across the ``n = dp/k`` nodes, each device on its own NIC:
    ``t_dp = z·(2·(k−1)/k·G/B_intra + 2·(n−1)/n·G/(k·B_net))``, ``z = 1.5`` for ZeRO-3 (the weights are gathered
    again in the backward pass; ZeRO paper) and 1 otherwise. The fitted models already hold a data-parallel
    all-reduce, learned from the history's multi-node runs, which are taken to have run on the reference network:
    so ``t_dp`` is shown, and only when ``inter_node_gbps`` is *slower* than the table's ``network_gbps`` is the
    difference of the inter-node stage, ``z·2·(n−1)/n·G/k·(1/B_given − 1/B_reference)``, added to the step (a
    faster network never shortens the fitted time). With no reference figure for the device the fitted time is
    kept and the result says so.

  Where the inter-node bandwidth is unknown (neither ``inter_node_gbps`` nor ``network_gbps``), tensor groups that
  span nodes are refused, the pipeline's sends between nodes are not costed and the data-parallel all-reduce is
  left to the fitted models; the result says so.
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
from ..transformer import TransformerShape, hf_config_shape, transformer_flops

__all__ = ["plan_llm_job", "LLMJobPlan", "decoder_params", "decoder_flops_per_sample", "hf_config_shape"]

_WHERE = "plan_llm_job"

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
    """An LLM training job planned from its shape: the time prediction, how the query was derived, and memory.

    Attributes
    ----------
    seconds, lower, upper : float
        Predicted wall-clock time and its prediction interval (with the tensor/pipeline estimate when tp or
        pp > 1; else exactly ``prediction``'s).
    prediction : TrainingTimePrediction
        What :func:`perfmodel.predict_training_time` answered for the data-parallel query.
    gpu_type : str
        The device type (resolved name).
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
        The precision predicted for.
    precision_assumed : bool
        Whether ``precision`` was assumed (not given).
    memory : MemoryEstimate
        The per-device memory estimate (:func:`perfmodel.plan.estimate_memory`).
    communication : dict or None
        The communication estimate (module docstring), when tp or pp > 1 or the job spans nodes:
        ``intra_link_gb_per_s`` and ``inter_node_gb_per_s`` (one direction; None where unknown),
        ``inter_node_source``, ``tp_comm_s_per_step``, ``tp_spans_nodes``, ``pp_send_s_per_step`` (None where not
        costed), ``pp_crosses_nodes``, ``pp_bubble_factor``, ``dp_allreduce_s_per_step`` (the hierarchical
        all-reduce; None where not estimated), ``dp_added_s_per_step`` (the part added to the fitted time),
        ``added_s_per_step`` (all that was added per step) and ``note``.
    hf_config : dict or None
        The shape read from ``hf_config=`` (:func:`hf_config_shape`), when given.
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
    communication: dict | None = None
    hf_config: dict | None = None
    notes: list = field(default_factory=list)

    @property
    def confidence(self) -> float:
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
            The fields by name, ``memory`` as :meth:`MemoryEstimate.to_dict` gives it.
        """
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
        if self.communication:
            lines.append(f"communication: {self.communication['note']}")
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
                 n_heads=None, ffn_mult=None, hf_config=None, tokens=None, samples=None, steps=None, gpu_count=None,
                 nodes=None, gpus_per_node=None, inter_node_gbps=None, zero_stage=0, tensor_parallel=1,
                 pipeline_parallel=1, micro_batch=None, activation_checkpointing=False, flash_attention=False,
                 optimizer="adamw", precision=None, history=None, confidence=0.9, method=DEFAULT_METHOD,
                 name="llm") -> LLMJobPlan:
    """Plan a decoder-only LLM training job from its shape: time (with interval), derivation and memory fit.

    The derivation (parameters, FLOPs per sample ``6·N·seq + 12·L·d·seq²``, steps, layout, the communication
    estimate with its intra- and inter-node links) is described in :mod:`perfmodel.plan._llm`; every figure is in
    the result.

    Parameters
    ----------
    seq_len : int
        Tokens per sequence.
    global_batch : int
        Sequences per optimizer step, over all devices.
    gpu_type : str
        Device name (any alias of :mod:`perfmodel.hardware`).
    params : float, optional
        Parameter count. Or give the architecture (``n_layers``, ``d_model``, ``vocab``, or ``hf_config``) and it
        is derived; with both, ``params`` is used and the architecture gives the attention FLOPs and the
        activations.
    n_layers, d_model, vocab : int, optional
        The decoder's layers, hidden size and vocabulary.
    n_heads : int, optional
        Attention heads (for the activation memory); default ``d_model // 128``.
    ffn_mult : float, optional
        MLP width as a multiple of ``d_model``; default 4.
    hf_config : str, os.PathLike, dict or transformers.PretrainedConfig, optional
        A Hugging Face ``config.json`` (path, or the folder holding it), its contents as a dict, or a config
        object: gives ``n_layers``, ``d_model``, ``n_heads``, ``vocab`` and the parameter count
        (:func:`hf_config_shape`; the formula is in the result). Read locally, never downloaded. Excludes
        ``n_layers``, ``d_model``, ``vocab``, ``n_heads`` and ``ffn_mult``.
    tokens, samples, steps : int, optional
        The amount of work: exactly one. ``tokens`` (e.g. ``100e9``) and ``samples`` (sequences) are rounded up
        to whole steps.
    gpu_count : int, optional
        Devices in all. Or ``nodes`` and ``gpus_per_node`` (with ``gpu_count`` too, they must agree).
    nodes, gpus_per_node : int, optional
        The node layout; needed for any inter-node communication to be costed.
    inter_node_gbps : float, optional
        Your cluster's scale-out network per device, GB/s in one direction (e.g. 50 for one 400 Gb/s NIC per
        GPU; 1.5625 for one 100 Gb/s NIC shared by 8). Default: the spec table's ``network_gbps``, the reference
        system's (None for many devices: then inter-node traffic is not costed, and the result says so).
    zero_stage : {0, 1, 2, 3}, default=0
        ZeRO / FSDP sharding over the data-parallel replicas (3 = FSDP full shard): memory, and the data-parallel
        traffic (ZeRO-3 moves 1.5x an all-reduce).
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
    >>> job = plan_llm_job(hf_config="Llama-2-7b-hf/config.json", seq_len=4096, tokens=100e9,
    ...                    global_batch=1024, gpu_type="H100", nodes=8, gpus_per_node=8,
    ...                    inter_node_gbps=12.5)                              # doctest: +SKIP
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
    inter_node_gbps = check_positive_float(inter_node_gbps, "inter_node_gbps", _WHERE, allow_none=True)
    notes: list[str] = []

    # --- the model
    shape = None
    if hf_config is not None:
        clash = {k: v for k, v in (("n_layers", n_layers), ("d_model", d_model), ("vocab", vocab),
                                   ("n_heads", n_heads), ("ffn_mult", ffn_mult)) if v is not None}
        if clash:
            raise ValueError(f"{_WHERE}: hf_config gives the architecture; leave out "
                             f"{', '.join(f'{k}={v!r}' for k, v in clash.items())}.")
        shape = hf_config_shape(hf_config)
        n_layers, d_model, vocab, n_heads = shape["n_layers"], shape["d_model"], shape["vocab"], shape["n_heads"]
    arch = {k: (None if v is None else _count(v, k)) for k, v in
            (("n_layers", n_layers), ("d_model", d_model), ("vocab", vocab))}
    L, d, V = arch["n_layers"], arch["d_model"], arch["vocab"]
    if n_heads is not None:
        n_heads = _count(n_heads, "n_heads")
        if shape is None and d is not None and d % n_heads:
            raise ValueError(f"The 'n_heads' parameter of {_WHERE} must divide d_model={d}. Got {n_heads!r}.")
    ffn_mult = 4.0 if ffn_mult is None else check_positive_float(ffn_mult, "ffn_mult", _WHERE)
    flops_params = None  # the matmul parameters, when they differ from params (an HF config's lookups)
    if shape is not None:
        derived, derived_formula = float(shape["params"]), shape["formula"]
    elif L is not None and d is not None:
        derived = decoder_params(L, d, V or 0, ffn_mult)
        f = f"{ffn_mult:g}"
        derived_formula = (f"(4 + 2·{f})·L·d² + vocab·d with L={L}, d={d}, vocab={V or 0}" if ffn_mult != 4 else
                           f"12·L·d² + vocab·d with L={L}, d={d}, vocab={V or 0}")
    else:
        derived = derived_formula = None
    if params is not None:
        params = check_positive_float(params, "params", _WHERE)
        params_formula = "given"
        if derived is not None and not 0.75 <= params / derived <= 1.33:
            what = "the HF config's" if shape is not None else "(4 + 2·ffn_mult)·L·d² + vocab·d ="
            notes.append(f"params={params:.4g} differs from {what} {derived:.4g} by more than a third: check the "
                         "architecture")
    elif derived is not None:
        params, params_formula = derived, derived_formula
        if shape is not None and shape["matmul_params"] != shape["params"]:
            flops_params = float(shape["matmul_params"])
        if V is None:
            notes.append("no vocab given: the embedding's vocab·d parameters are left out")
    else:
        raise ValueError(f"{_WHERE} needs the model: 'params', 'hf_config', or 'n_layers' and 'd_model' (and "
                         f"'vocab'). Got params=None, n_layers={n_layers!r}, d_model={d_model!r}.")
    fps = decoder_flops_per_sample(flops_params or params, seq_len, L, d,
                                   activation_checkpointing=activation_checkpointing)
    if L is not None and d is not None:
        flops_formula = ("8·N·seq + 16·L·d·seq² (6·N·seq + 12·L·d·seq², + 1/3 for recomputing the forward pass)"
                         if activation_checkpointing else "6·N·seq + 12·L·d·seq²")
    else:
        flops_formula = "8·N·seq (6·N·seq + 1/3 recompute)" if activation_checkpointing else "6·N·seq"
        notes.append("no n_layers/d_model: the attention FLOPs (12·L·d·seq²) are left out and activation memory is "
                     "not estimated")
    if flops_params is not None:
        flops_formula += (f", N = {flops_params:.4g} matmul parameters (the params less {shape['lookups']}: "
                          "lookups, not matmuls)")

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
    per_device = global_batch // devices

    # --- the links (checked before the prediction, which may fit a model)
    g = resolve_gpu_type(gpu_type)
    spec = get_spec(g)
    link = spec.interconnect_gbps
    intra = None if link is None or not math.isfinite(link) else link / 2  # one direction
    reference_net = spec.network_gbps
    net = inter_node_gbps if inter_node_gbps is not None else reference_net
    net_source = ("given (inter_node_gbps)" if inter_node_gbps is not None else
                  f"the spec table's network_gbps for {g} (its reference system)" if reference_net else None)
    layout_known = nodes is not None
    multi_node = layout_known and nodes > 1
    tp_spans = False
    if tp > 1 and layout_known:
        if tp <= gpus_per_node and gpus_per_node % tp:
            raise ValueError(f"tensor_parallel={tp} does not divide gpus_per_node={gpus_per_node}: tensor groups "
                             "would straddle nodes; choose a tp that divides the node (or a multiple of it).")
        if tp > gpus_per_node:
            if tp % gpus_per_node:
                raise ValueError(f"tensor_parallel={tp} spans nodes of {gpus_per_node} devices but is not a "
                                 "multiple of gpus_per_node; tensor groups must take whole nodes.")
            if net is None:
                raise ValueError(f"tensor_parallel={tp} spans nodes of {gpus_per_node} devices: the device table "
                                 f"has no inter-node bandwidth for {g!r} to estimate its all-reduces. Pass "
                                 "inter_node_gbps= (your network per device, GB/s one way) or keep tensor groups "
                                 "within a node.")
            tp_spans = True
    if tp > 1 and intra is None:
        raise ValueError(f"tensor_parallel={tp}: the spec table has no interconnect bandwidth for {g!r}, so the "
                         "tensor-parallel all-reduces cannot be estimated.")

    # --- the prediction (data-parallel)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        query = {"params": params, "flops_per_sample": fps, "name": name, "family": "decoder"}  # matmuls
        if L is not None and d is not None:  # the attention term of the FLOPs, for the mfu rule's split
            query["attention_flops_per_sample"] = fps - decoder_flops_per_sample(
                flops_params or params, seq_len, activation_checkpointing=activation_checkpointing)
        pred = predict_training_time(query,
                                     batch_size=per_device, gpu_count=devices, gpu_type=g, steps=n_steps,
                                     precision=precision, history=history, confidence=confidence, method=method)
    for w in caught:  # passed on, from the caller's line
        warnings.warn(str(w.message), w.category, stacklevel=2)
    used_precision = str(pred.query["precision"])
    assumed = precision is None
    if assumed:
        notes.append(f"precision not given: assumed {used_precision!r} (what the history's runs on {g} mostly used)")

    # --- communication estimate: tensor and pipeline parallelism, data parallelism across nodes
    seconds, lower, upper = pred.seconds, pred.lower, pred.upper
    communication = None
    if inter_node_gbps is not None and not multi_node:
        notes.append("inter_node_gbps not used: " + ("one node, no inter-node traffic" if layout_known else
                                                      "give nodes= and gpus_per_node= for it to be used"))
    if tp > 1 or pp > 1 or multi_node:
        communication = _communication(
            g=g, spec=spec, params=params, L=L, d=d, seq_len=seq_len, micro_batch=micro_batch,
            accumulation=accumulation, precision=used_precision, tp=tp, pp=pp, dp=dp, zero_stage=int(zero_stage),
            nodes=nodes, gpus_per_node=gpus_per_node, intra=intra, net=net, net_source=net_source,
            reference_net=reference_net, given_net=inter_node_gbps, tp_spans=tp_spans)
        bubble, added = communication["pp_bubble_factor"], communication["added_s_per_step"]
        start = pred.startup_seconds
        step = lambda s: s * bubble + added  # noqa: E731
        seconds = start + n_steps * step(pred.step_seconds)
        lower = start + n_steps * step(pred.step_lower)
        upper = start + n_steps * step(pred.step_upper)

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
        precision=used_precision, precision_assumed=assumed, memory=memory, communication=communication,
        hf_config=shape, notes=notes)


def _communication(*, g, spec, params, L, d, seq_len, micro_batch, accumulation, precision, tp, pp, dp, zero_stage,
                   nodes, gpus_per_node, intra, net, net_source, reference_net, given_net, tp_spans) -> dict:
    """The communication estimate of the module docstring: seconds per step, the links used, and a note."""
    b = 4.0 if precision in ("fp32", "tf32") else 2.0
    multi_node = nodes is not None and nodes > 1
    shape_known = L is not None and d is not None
    parts = []
    gb = lambda x: f"{x:.4g} GB/s"  # noqa: E731
    # tensor parallelism: 4 ring all-reduces of seq·mb·d activations per layer and micro-batch
    tp_comm = 0.0
    if tp > 1:
        tp_link = min(intra, net) if tp_spans else intra
        volume = 4 * (L or 0) / pp * 2 * (tp - 1) / tp * seq_len * micro_batch * (d or 0) * b
        tp_comm = accumulation * volume / (tp_link * 1e9)
        if not shape_known:
            parts.append("tensor-parallel all-reduces not estimated (no n_layers/d_model)")
        elif tp_spans:
            parts.append(f"tensor-parallel all-reduces {tp_comm:.3g} s per step (4 per layer and micro-batch; the "
                         f"tensor group spans {tp // gpus_per_node} nodes: ring over {gb(tp_link)}, the slower of "
                         f"the intra-node link and the network)")
        else:
            parts.append(f"tensor-parallel all-reduces {tp_comm:.3g} s per step (4 per layer and micro-batch, ring "
                         f"over {gb(intra)}, half of {g}'s {spec.interconnect_gbps:g} GB/s {spec.interconnect})")
    # pipeline parallelism: the 1F1B bubble, and the activations / gradients sent between stages
    bubble = 1.0 + (pp - 1) / accumulation if pp > 1 else 1.0
    pp_send = None
    if pp > 1:
        parts.append(f"pipeline bubble x{bubble:.3g} ((pp−1)/micro-batches = {pp - 1}/{accumulation})")
        send_link = net if multi_node else intra
        if not shape_known:
            parts.append("pipeline sends not estimated (no n_layers/d_model)")
        elif send_link is None:
            if not multi_node:  # between nodes: said once below
                parts.append(f"pipeline sends not costed: no interconnect bandwidth for {g}")
        else:
            pp_send = accumulation * 2 * seq_len * micro_batch * d * b / (send_link * 1e9)
            parts.append(f"pipeline sends {pp_send:.3g} s per step (activations forward and gradients back, "
                         f"{accumulation} micro-batches, over {gb(send_link)}"
                         f"{', between nodes' if multi_node else ', within a node'})")
    # data parallelism across nodes: hierarchical all-reduce of the gradients, once per step
    dp_total = None
    dp_added = 0.0
    if multi_node and dp > 1:
        k = min(dp, gpus_per_node // tp) if tp <= gpus_per_node else 1
        n = dp / k  # nodes a data-parallel group spans
        if n > 1:
            z = 1.5 if zero_stage == 3 else 1.0
            grad = params / (tp * pp) * b
            inter = lambda bw: z * 2 * (n - 1) / n * grad / k / (bw * 1e9)  # noqa: E731
            intra_part = 0.0 if k == 1 else (None if intra is None else z * 2 * (k - 1) / k * grad / (intra * 1e9))
            if net is None:
                pass  # said once below
            elif intra_part is None:
                parts.append(f"data-parallel all-reduce not estimated: no interconnect bandwidth for {g}")
            else:
                dp_total = intra_part + inter(net)
                what = (f"data-parallel all-reduce {dp_total:.3g} s per step (hierarchical: {k} per node over "
                        f"{gb(intra) if intra else 'the intra-node link'}, then {n:g} nodes over {gb(net)}"
                        f"{', x1.5 for ZeRO-3' if z != 1 else ''})")
                if given_net is not None and reference_net:
                    if given_net < reference_net:
                        dp_added = inter(given_net) - inter(reference_net)
                        parts.append(f"{what}; added {dp_added:.3g} s per step: its inter-node stage at the given "
                                     f"{gb(given_net)} less at the reference {gb(reference_net)}, which the fitted "
                                     "time already holds")
                    else:
                        parts.append(f"{what}; nothing added: the given {gb(given_net)} is not slower than the "
                                     f"reference {gb(reference_net)} the fitted time already holds (never shortened)")
                elif given_net is not None:
                    parts.append(f"{what}; not added: the device table has no reference network for {g}, so the "
                                 "fitted time (learned from the history's runs) cannot be corrected for the given one")
                else:
                    parts.append(f"{what} at the reference network: not added; the fitted time holds what its "
                                 "method learned from multi-node runs (ratio and mfu have no device-count term: "
                                 "they scale work per device only)")
    if nodes is None and (tp > 1 or pp > 1):
        parts.append("no node layout given (nodes=, gpus_per_node=): all communication costed within a node")
    if multi_node and net is None:  # today's behaviour where the network is unknown, said
        left = (["the data-parallel all-reduce between nodes is left to the fitted models"] if dp > 1 else []) + (
            ["pipeline sends between nodes are not costed"] if pp > 1 else []) + [
            "tensor groups must stay within a node"]
        parts.append(f"no inter-node bandwidth for {g} (the device table has none; pass inter_node_gbps=): "
                     + ", ".join(left))
    added = tp_comm + (pp_send or 0.0) + dp_added
    note = ("the fitted models scale data-parallel work only; the communication below is an estimate, not learned "
            "from runs: " + "; ".join(parts) +
            (f"; inter-node network {gb(net)} per device, {net_source}" if multi_node and net is not None else ""))
    return {"intra_link_gb_per_s": intra, "inter_node_gb_per_s": net if multi_node else None,
            "inter_node_source": net_source if multi_node else None, "tp_comm_s_per_step": tp_comm,
            "tp_spans_nodes": tp_spans, "pp_send_s_per_step": pp_send, "pp_crosses_nodes": bool(pp > 1 and multi_node),
            "pp_bubble_factor": bubble, "dp_allreduce_s_per_step": dp_total, "dp_added_s_per_step": dp_added,
            "added_s_per_step": added, "note": note}
