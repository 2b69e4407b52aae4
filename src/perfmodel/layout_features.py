"""Runs of transformer training with their parallel layout -> the physical parts of one optimizer step.

:func:`layout_jobs` reads each row's model shape (:mod:`perfmodel.transformer`), layout (:mod:`perfmodel.layout`)
and device (:mod:`perfmodel.hardware`); :func:`layout_components` turns them into :data:`LAYOUT_FEATURES`, the
quantities :class:`perfmodel.models.LayoutRegressor` combines with its fitted coefficients. Every quantity is a
time at 100% of a datasheet figure (a peak, a bandwidth) or a count; nothing here is fitted.

Per **micro-batch on the busiest pipeline stage** (``Ls = ⌈L/(pp·vp)⌉·vp`` layers, ``t = b·seq/cp`` tokens on each
device, ``b`` the micro-batch):

* GEMMs of the layers (attention projections, dense MLPs, a mixture's shared experts), of the routed experts
  (``E/ep`` experts per device, each taking ``t·k·ep/E`` tokens: small GEMMs), and of the output head: for each
  group its FLOPs over the peak at the run's precision (``*_flops_s``) and the bytes its operands and result move
  over the memory bandwidth (``*_bytes_s``), forward and backward (3 GEMMs each), tensor-parallel shards;
* ``attn_flops_s``: attention scores and values, ``12·Ls·(h/tp)·hd·seq·t`` FLOPs at the 16-bit peak (attention
  runs in 16 bits under fp8 training; an fp32 or TF32 run's at its own peak);
* ``mem_s``: bytes that memory-bound kernels (norms, activations, dropout, residuals, rotary, routing copies)
  move, from the activation accounting of Korthikanti et al. 2022 (per token and layer ``10·d`` bytes not split
  by tensor parallelism unless sequence-parallel, ``(8·d + 2·m·ffn)/tp`` split, ``m`` MLP matrices, plus ``4·k·d``
  of routing copies in an expert layer), over the memory bandwidth;
* ``kernels``: kernels launched (forward + backward; a layer ~30, an expert layer ~20 more, a collective 3);
* ``collectives``: collective calls inside the layers (tensor parallel 4 per layer, 8 under sequence parallelism,
  ×1.5 with full recomputation; context parallel ``3·(cp−1)``, the ring's steps; expert all-to-alls 4 per expert
  layer) and pipeline sends (``2·vp``): each pays a latency whatever its size (the α of an α–β model), which many
  small messages make count; the data-parallel calls, overlapped with compute, are not counted;
* ``xl_nvl_s`` / ``xl_net_s``: collectives inside the layers at the link's one-way bandwidth — tensor parallel
  (``8·(tp−1)/tp·t·d`` bytes of 16-bit activations per layer: two all-reduces, or all-gather + reduce-scatter
  pairs, forward and backward), context parallel (the ring's K/V exchange, ``3·(cp−1)·2·t·kv·hd`` per layer) and
  expert all-to-alls (``4·t'·k·d`` per expert layer, ``t'`` the tokens a device holds — ``t/tp`` under sequence
  parallelism — each sent to its ``k`` experts: the share ``(g−1)/ep`` to another device of the expert group on
  the same node, ``(ep−g)/ep`` off the node, ``g = min(ep, gpus_per_node)`` the group's devices per node: its ranks
  consecutive, as Megatron-core places them without expert tensor parallelism, while the expert GEMMs, weights
  and gradient reduction below are sharded by ``tp`` as with expert tensor parallelism ``tp``; the two agree at
  ``tp`` 1) — tensor and context groups over NVLink when they fit in a node (``gpus_per_node``), else the
  network;
* ``p2p_nvl_s`` / ``p2p_net_s``: pipeline sends, activations forward and gradients back (``2·t·d/tp`` per virtual
  stage boundary).

Bytes are counted at :data:`perfmodel.hardware.ELEMENT_BYTES` of the run's precision: 2 per activation,
gradient and collective element under mixed precision and fp8 training, 4 in fp32/TF32.

Full recomputation adds a forward pass (GEMMs, attention, memory traffic, ×4/3; tensor-parallel collectives
×1.5); selective recomputation the attention core (×4/3 of ``attn_flops_s``).

Per **step**: ``microbatches`` (``m = global_batch/(dp·b)``), ``bubble`` (``(pp−1)/vp`` micro-batch times of the
1F1B schedule), ``dp_nvl_s`` / ``dp_net_s`` (the data-parallel gradient reduction and, with ZeRO/FSDP, the weights'
all-gathers: an all-reduce's ``2·(n−1)/n·P·2`` bytes, 1.5 times that for full sharding, of the device's ``P``
parameters — dense ones over ``dp·cp`` replicas, experts over ``dp·cp·tp/(ep·tp)`` — hierarchical: the ``k``
ranks of a node over NVLink, then across ``n/k`` nodes each rank's share over its own network link, so
``2·(k−1)/k·V/B_nvl`` and ``2·(n/k−1)/(n/k)·V/(k·B_net)``), ``opt_s`` (the optimizer's traffic, 16 bytes per
parameter held, over the memory bandwidth), ``fp8`` (1 where the GEMMs run in fp8) and ``sync_spread``
(``√(2 ln N)`` of the job's ``N`` devices: how many spreads of one device's step time the slowest of them lies above
the mean); ``grad_acc_s`` (per micro-batch, the stage's GEMM weights — attention, MLPs, the device's experts, the
output head, tensor-parallel shards — times 8 bytes, the fp32 gradient accumulation's read and write, over the
memory bandwidth: a cost that grows with the weights, not the tokens, so many small micro-batches pay it many
times); ``attn_bytes_s`` (per micro-batch, where attention does not run in fused kernels — ``flash_attention``
0: FlashAttention and its kin keep the scores on chip — the score matrix's ``(h/tp)·t·seq`` elements per layer
over the memory bandwidth, 16 passes forward and backward, 22.5 with the forward recomputed; it grows with the
heads, not the head size); and ``source_weight``, the row's weight in a fit (:func:`source_weights`).

Where a run or query lacks a quantity: heads ``d/128`` (or of the first head size of 64, 96, 192, 256 whose count
divides over the row's tensor-parallel degree: the frameworks' rule), MLP ``4·d`` (plain), vocabulary 0, key/value
heads as heads; a model given by its size only gets :func:`perfmodel.transformer.standard_shape`; the micro-batch is
the replica's whole share (no accumulation), or with pipeline parallelism the share split into one micro-batch per
stage (torchtitan's default); sequence parallelism on where ``tp > 1``; no recomputation (full
where ``activation_checkpointing`` is 1); fused attention (``flash_attention`` 1); ZeRO stage 0; ``gpus_per_node`` the device's NVLink domain
(:attr:`perfmodel.hardware.HardwareSpec.nvlink_domain`: 72 on NVL72 racks), else 8; the network per device
``inter_node_gbps``, else the spec table's ``network_gbps``, else :data:`DEFAULT_NETWORK_GBPS`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from .exceptions import UnknownHardwareError
from .hardware import ELEMENT_BYTES, get_spec
from .layout import DEFAULT_GPUS_PER_NODE, ParallelLayout, implied_micro_batch, is_layout_job, layout_problems
from .schema import SHAPE_COLUMNS, step_global_batch
from .transformer import TransformerShape, standard_shape

__all__ = ["LAYOUT_FEATURES", "LayoutJob", "layout_jobs", "layout_components", "layout_priceable", "job_problems",
           "shape_of", "shape_columns", "source_weights", "DEFAULT_NETWORK_GBPS"]

#: The quantities :func:`layout_components` produces, in order.
LAYOUT_FEATURES = ("layer_flops_s", "layer_bytes_s", "expert_flops_s", "expert_bytes_s", "head_flops_s",
                   "head_bytes_s", "attn_flops_s", "mem_s", "kernels", "xl_nvl_s", "xl_net_s", "p2p_nvl_s",
                   "p2p_net_s", "microbatches", "bubble", "dp_nvl_s", "dp_net_s", "opt_s", "fp8", "sync_spread",
                   "grad_acc_s", "attn_bytes_s", "collectives", "source_weight")
#: Inter-node bandwidth per device (GB/s, one way) assumed where neither the run nor the spec table gives one:
#: one 200 Gb/s NIC per device.
DEFAULT_NETWORK_GBPS = 25.0
_SHAPE_FIELDS = tuple(c.name for c in SHAPE_COLUMNS if c.name != "active_params")
_KERNELS_PER_LAYER = 30.0
_KERNELS_PER_EXPERT_LAYER = 20.0
_KERNELS_PER_COLLECTIVE = 3.0
_OPT_BYTES_PER_PARAM = 16.0
#: Bytes each weight of a stage moves per micro-batch when its gradient is accumulated into the fp32 main gradient
#: (read 4 + write 4; the 16-bit gradient's read is counted with the weight-gradient GEMM).
_GRAD_ACC_BYTES_PER_PARAM = 8.0
#: Passes over the attention score matrix (one element each) of a layer's forward and backward when attention does
#: not run in fused kernels (``flash_attention`` 0): forward, the scores' GEMM writes them, the fused scale-mask-
#: softmax reads them and writes the probabilities, dropout reads and writes them (and its 1-byte mask), the
#: values' GEMM reads them (6.5); backward, the probabilities read for dV, dP written, dropout's and softmax's
#: backward read and write it (with the probabilities and the mask), dQ's and dK's GEMMs read dS (9.5).
_UNFUSED_SCORE_PASSES = 16.0


class LayoutJob:
    """One row resolved: its shape, layout, global batch, sequence, precision and links (see the module
    docstring for the defaults). ``problem`` says why a row cannot be resolved (then the rest is None)."""

    __slots__ = ("shape", "layout", "global_batch", "seq_len", "precision", "gpu_type", "gpus_per_node",
                 "network_gbps", "flash", "problem", "assumed")
    shape: TransformerShape | None
    layout: ParallelLayout | None
    global_batch: int | None
    seq_len: int | None
    precision: str | None
    gpu_type: str | None
    gpus_per_node: int | None
    network_gbps: float | None
    flash: bool | None  # attention in fused kernels that keep the scores on chip
    problem: str | None
    assumed: list

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))
        if self.assumed is None:
            self.assumed = []


def _value(row: dict, name: str):
    v = row.get(name)
    if v is None or v is pd.NA:
        return None
    try:
        if isinstance(v, float) and math.isnan(v):
            return None
    except TypeError:
        pass
    return v


def _int(row: dict, name: str) -> int | None:
    v = _value(row, name)
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(round(f)) if math.isfinite(f) else None


def shape_columns(shape: TransformerShape) -> dict:
    """A shape as the run schema's shape columns (the inverse of :func:`shape_of`; a mixture's expert fields only
    for a mixture).

    Parameters
    ----------
    shape : TransformerShape

    Returns
    -------
    dict
        ``n_layers``, ``d_model``, ``n_heads``, ``n_kv_heads``, ``head_dim``, ``ffn_hidden``, ``gated_mlp``,
        ``tied_embeddings``, ``vocab`` (and ``n_experts``, ``experts_per_token``, ``moe_ffn_hidden``,
        ``active_params``).
    """
    out: dict[str, Any] = {
        "n_layers": shape.n_layers, "d_model": shape.d_model, "n_heads": shape.n_heads,
        "n_kv_heads": shape.n_kv_heads, "head_dim": shape.head_dim, "ffn_hidden": shape.ffn_hidden,
        "gated_mlp": int(shape.gated_mlp), "tied_embeddings": int(shape.tied_embeddings), "vocab": shape.vocab}
    if shape.is_moe:
        out.update(n_experts=shape.n_experts, experts_per_token=shape.experts_per_token,
                   moe_ffn_hidden=shape.moe_ffn_hidden, active_params=float(shape.active_params()))
    return out


def shape_of(row: dict, assumed: list | None = None) -> TransformerShape:
    """A row's transformer shape: from its shape columns, else the standard shape of its size (module docstring).

    Parameters
    ----------
    row : dict
        One run or query (``n_layers``, ``d_model`` and the other shape columns where known; else ``params`` or
        ``active_params``).
    assumed : list, optional
        Receives a sentence per default taken.

    Returns
    -------
    TransformerShape

    Raises
    ------
    ValueError, TypeError
        A shape the columns cannot form (heads that do not divide, no size).
    """
    assumed = [] if assumed is None else assumed
    if _int(row, "n_layers") is None or _int(row, "d_model") is None:
        size = _value(row, "active_params") or _value(row, "params")
        if size is None:
            raise ValueError("no shape (n_layers, d_model) and no size (params)")
    return _shape(row, assumed)


def _shape(row: dict, assumed: list) -> TransformerShape:
    L, d = _int(row, "n_layers"), _int(row, "d_model")
    if L is None or d is None:
        size = _value(row, "active_params") or _value(row, "params")
        shape = standard_shape(float(size), vocab=_int(row, "vocab") or 32000)
        assumed.append(f"shape: the standard shape of a {float(size):.3g}-parameter decoder (L={shape.n_layers}, "
                       f"d={shape.d_model})")
        return shape
    h = _int(row, "n_heads")
    if h is None:  # heads of 128 (else 64, 96, 192, 256: the sizes models use) that divide over the row's tp
        tp = _int(row, "tp") or 1
        h = next((d // hd for hd in (128, 64, 96, 192, 256) if d % hd == 0 and (d // hd) % tp == 0), None)
        if h is None:
            h = max(1, d // 128)
        assumed.append(f"heads: {h}")
    kw: dict[str, Any] = {"n_layers": L, "d_model": d, "n_heads": h, "vocab": _int(row, "vocab") or 0}
    kv = _int(row, "n_kv_heads")
    if kv:
        kw["n_kv_heads"] = kv
    hd = _int(row, "head_dim")
    if hd:
        kw["head_dim"] = hd
    elif d % h:
        kw["head_dim"] = max(1, d // h)
    ffn = _int(row, "ffn_hidden")
    experts = _int(row, "n_experts") or 0
    gated = _int(row, "gated_mlp")
    if gated is None:  # not stated: a width that is not a multiple of d is a gated MLP's (Llama's 8/3·d)
        gated = ffn is not None and ffn % d != 0
    kw.update(ffn_hidden=ffn, gated_mlp=bool(gated))
    tied = _int(row, "tied_embeddings")
    if tied is not None:
        kw["tied_embeddings"] = bool(tied)
    if experts > 1:
        kw.update(n_experts=experts, experts_per_token=_int(row, "experts_per_token") or 1,
                  moe_ffn_hidden=_int(row, "moe_ffn_hidden") or ffn, gated_mlp=True)
    return TransformerShape(**kw)


def _job(row: dict) -> LayoutJob:
    assumed: list = []
    seq = _int(row, "seq_len")
    if not seq or seq <= 0:
        return LayoutJob(problem="no seq_len")
    try:
        shape = _shape(row, assumed)
    except (TypeError, ValueError) as exc:
        return LayoutJob(problem=f"shape: {exc}")
    devices = _int(row, "gpu_count") or 1
    step = float(step_global_batch({**row, "gpu_count": devices})[0])  # the schema's step
    if not math.isfinite(step):
        return LayoutJob(problem="no global_batch_size or batch_size")
    gb = int(round(step))
    tp, pp, cp = (_int(row, c) or 1 for c in ("tp", "pp", "cp"))
    vp, ep = _int(row, "vp") or 1, _int(row, "ep") or 1
    if pp == 1:
        vp = 1
    if devices % (tp * pp * cp):
        return LayoutJob(problem=f"{devices} devices do not divide into tp x pp x cp = {tp * pp * cp}")
    dp = devices // (tp * pp * cp)
    mb = _int(row, "micro_batch_size")
    if mb is None:
        mb, note = implied_micro_batch(gb // dp, accum=_int(row, "grad_accum"), pp=pp)
        if note:
            assumed.append(note)
    zero = _int(row, "zero_stage")
    zero = 0 if zero is None else zero
    sp = _int(row, "sequence_parallel")
    sp = tp > 1 if sp is None else bool(sp)
    rc = _value(row, "recompute")
    if rc is None:
        rc = "full" if _int(row, "activation_checkpointing") == 1 else "none"
    rc = str(rc).lower()
    try:
        layout = ParallelLayout(tp=tp, pp=pp, cp=cp, dp=dp, ep=ep if shape.is_moe else 1, vp=vp, micro_batch=mb,
                                zero_stage=min(max(zero, 0), 3), sequence_parallel=sp, recompute=rc)
    except (TypeError, ValueError) as exc:
        return LayoutJob(problem=f"layout: {exc}")
    spec = get_spec(str(row["gpu_type"]))
    gpn = _int(row, "gpus_per_node") or spec.nvlink_domain or DEFAULT_GPUS_PER_NODE
    net = _value(row, "inter_node_gbps")
    net = float(net) if net is not None else (spec.network_gbps or DEFAULT_NETWORK_GBPS)
    flash = _int(row, "flash_attention")
    return LayoutJob(shape=shape, layout=layout, global_batch=gb, seq_len=seq,
                     precision=str(row.get("precision") or "bf16"), gpu_type=spec.name, gpus_per_node=gpn,
                     network_gbps=net, flash=True if flash is None else bool(flash), assumed=assumed)


def layout_jobs(runs: pd.DataFrame) -> list[LayoutJob]:
    """Resolve each row's shape, layout and links (module docstring), once per distinct row.

    Parameters
    ----------
    runs : pandas.DataFrame
        Runs or queries (``gpu_type``, ``gpu_count``, ``seq_len``, ``precision`` and the shape and layout
        columns of :mod:`perfmodel.schema` where known).

    Returns
    -------
    list of LayoutJob
        One per row; a row that cannot be priced has ``problem`` set.
    """
    cols = [c for c in runs.columns if c in _SHAPE_FIELDS or c in (
        "seq_len", "gpu_count", "gpu_type", "precision", "global_batch_size", "batch_size", "micro_batch_size",
        "grad_accum", "tp", "pp", "cp", "vp", "ep", "zero_stage", "sequence_parallel", "recompute",
        "flash_attention", "activation_checkpointing", "gpus_per_node", "inter_node_gbps", "params", "active_params")]
    frame = runs[cols]
    keys = pd.util.hash_pandas_object(frame.astype("string"), index=False).to_numpy() if len(frame) else []
    cache: dict = {}
    out = []
    records = frame.to_dict("records")
    for key, row in zip(keys, records):
        if key not in cache:
            cache[key] = _job(row)
        out.append(cache[key])
    return out


def _link(group: int, gpus_per_node: int) -> str:
    return "nvl" if group <= gpus_per_node else "net"


class _Stage(NamedTuple):
    """What one device of the busiest pipeline stage works on per micro-batch."""

    t: float  # tokens per device per micro-batch
    per_stage: int  # layers on the stage
    Lm: float  # expert layers on the stage
    Ld: float  # dense layers on the stage
    B: float  # bytes per activation and gradient element


def _gemm(B: float, M, K, N, count=1.0) -> tuple[float, float]:
    """FLOPs and bytes moved of an ``M x K`` by ``K x N`` GEMM, forward and backward (3 GEMMs), ``count``
    times."""
    flops = 3 * 2.0 * M * K * N * count
    moved = 3 * B * (M * K + K * N + M * N) * count
    return flops, moved


def _layer_gemms(s: TransformerShape, lay: ParallelLayout, st: _Stage) -> tuple[float, float, float, float]:
    """FLOPs and bytes of the stage's layer GEMMs (attention projections, dense MLPs, shared experts) and of
    its routed experts: ``(layer flops, layer bytes, expert flops, expert bytes)``."""
    assert s.head_dim is not None and s.n_kv_heads is not None  # set by TransformerShape itself
    tp, ep, t, B = lay.tp, lay.ep, st.t, st.B
    d, hd, h, kv = s.d_model, s.head_dim, s.n_heads, s.n_kv_heads
    m_mats = s.mlp_matrices
    qkv = _gemm(B, t, d, (h + 2 * kv) * hd / tp)
    proj = _gemm(B, t, h * hd / tp, d)
    dense_mlp = _gemm(B, t, d, m_mats * s.ffn_hidden / tp) if s.ffn_hidden else (0.0, 0.0)
    lf = st.per_stage * (qkv[0] + proj[0]) + st.Ld * dense_mlp[0]
    lb = st.per_stage * (qkv[1] + proj[1]) + st.Ld * dense_mlp[1]
    ef = eb = 0.0
    if s.is_moe:
        assert s.moe_ffn_hidden is not None  # set for a mixture by TransformerShape itself
        k, E = s.experts_per_token, s.n_experts
        if s.n_shared_experts:
            sh = _gemm(B, t, d, m_mats * s.n_shared_experts * s.moe_ffn_hidden / tp)
            lf += st.Lm * sh[0]
            lb += st.Lm * sh[1]
        local = E / ep
        tokens_per_expert = t * k * ep / E
        ex = _gemm(B, tokens_per_expert, d, m_mats * s.moe_ffn_hidden / tp, count=local)
        ef, eb = st.Lm * ex[0], st.Lm * ex[1]
    return lf, lb, ef, eb


def _stage_weights(s: TransformerShape, lay: ParallelLayout, st: _Stage) -> float:
    """The weights one device of the busiest stage holds (attention projections, dense and expert MLPs, the output
    head, and an untied input embedding where there is one stage), tensor-parallel shards: what each micro-batch's
    gradients are accumulated into."""
    assert s.head_dim is not None and s.n_kv_heads is not None  # set by TransformerShape itself
    d, hd = s.d_model, s.head_dim
    attention = d * (s.n_heads + 2 * s.n_kv_heads) * hd + s.n_heads * hd * d
    weights = st.per_stage * attention + st.Ld * d * s.mlp_matrices * (s.ffn_hidden or 0)
    if s.is_moe:
        assert s.moe_ffn_hidden is not None  # set for a mixture by TransformerShape itself
        weights += st.Lm * d * s.mlp_matrices * s.moe_ffn_hidden * (s.n_shared_experts + s.n_experts / lay.ep)
    # the output head (the last stage), and an untied input embedding where one stage holds both ends
    ends = 2 if (lay.pp == 1 and not s.tied_embeddings) else 1
    return (weights + ends * d * (s.vocab or 0)) / lay.tp


def _activation_bytes(s: TransformerShape, lay: ParallelLayout, st: _Stage, rf: float) -> float:
    """Memory-bound traffic per micro-batch (Korthikanti et al. 2022 activation accounting, generalised)."""
    tp, d, m_mats = lay.tp, s.d_model, s.mlp_matrices
    dense_tok = 10 * d / (tp if lay.sequence_parallel else 1) + (8 * d + 2 * m_mats * (s.ffn_hidden or 0)) / tp
    moe_tok = 0.0
    if s.is_moe:
        assert s.moe_ffn_hidden is not None  # set for a mixture by TransformerShape itself
        ffn_eff = (s.experts_per_token + s.n_shared_experts) * s.moe_ffn_hidden
        moe_tok = (10 * d / (tp if lay.sequence_parallel else 1) + (8 * d + 2 * m_mats * ffn_eff) / tp
                   + 4 * s.experts_per_token * d)
    return st.t * (st.Ld * dense_tok + st.Lm * moe_tok) * st.B * rf


def _layer_collectives(s: TransformerShape, lay: ParallelLayout, st: _Stage, gpus_per_node: int,
                       kernels: float) -> tuple[dict, float, float]:
    """Bytes of the collectives inside the layers by link (tensor and context parallel, expert all-to-alls),
    ``kernels`` with their launches added, and the number of collective calls."""
    assert s.head_dim is not None and s.n_kv_heads is not None  # set by TransformerShape itself
    tp, cp, ep, t, B, per_stage = lay.tp, lay.cp, lay.ep, st.t, st.B, st.per_stage
    xl = {"nvl": 0.0, "net": 0.0}
    calls = 0.0
    if tp > 1:
        again = 1.5 if lay.recompute == "full" else 1.0  # the forward's collectives again
        vol = 8 * (tp - 1) / tp * t * s.d_model * B * per_stage * again
        xl[_link(tp, gpus_per_node)] += vol
        kernels += 4 * per_stage * _KERNELS_PER_COLLECTIVE
        # two all-reduces forward and two backward per layer; under sequence parallelism each is an all-gather and
        # a reduce-scatter
        calls += (8 if lay.sequence_parallel else 4) * per_stage * again
    if cp > 1:
        vol = 3 * (cp - 1) * 2 * t * s.n_kv_heads * s.head_dim * B * per_stage / tp
        xl[_link(tp * cp, gpus_per_node)] += vol
        kernels += 2 * per_stage * _KERNELS_PER_COLLECTIVE
        calls += 3 * (cp - 1) * per_stage  # the ring's steps, forward and backward
    if s.is_moe and ep > 1:
        # each device dispatches the tokens it holds (its sequence-parallel share), every one to k experts; with
        # the experts spread evenly, a copy stays on the device with chance 1/ep, goes to one of the group's other
        # devices on the same node with (g−1)/ep and leaves the node with (ep−g)/ep, g the group's devices per node
        held = t / tp if lay.sequence_parallel else t
        vol = 4 * held * s.experts_per_token * s.d_model * B * st.Lm
        g = max(1, min(ep, gpus_per_node))
        xl["nvl"] += vol * (g - 1) / ep
        xl["net"] += vol * (ep - g) / ep
        kernels += 4 * st.Lm * _KERNELS_PER_COLLECTIVE
        calls += 4 * st.Lm  # dispatch and combine, forward and backward
    return xl, kernels, calls


def _gradient_sync(s: TransformerShape, lay: ParallelLayout, B: float,
                   gpus_per_node: int) -> tuple[dict, float]:
    """Per step, the data-parallel gradient reduction's (and ZeRO/FSDP all-gathers') bytes by link, and the
    parameters a device holds optimizer state for."""
    tp, pp, cp, dp, ep = lay.tp, lay.pp, lay.cp, lay.dp, lay.ep
    expert_params = (s.n_experts * s.mlp_params(s.moe_ffn_hidden) * s.moe_layers) if s.is_moe else 0
    dense_params = s.params() - expert_params
    P_dense = dense_params / (tp * pp)
    P_exp = expert_params / (ep * tp * pp) if s.is_moe else 0.0
    dpn = {"nvl": 0.0, "net": 0.0}
    z = 1.5 if lay.zero_stage == 3 else 1.0
    for params, replicas in ((P_dense, dp * cp), (P_exp, max(1, dp * cp * tp // (ep * tp)))):
        if params <= 0 or replicas <= 1:
            continue
        V = z * params * B
        per_node = max(1, gpus_per_node // (tp * cp)) if tp * cp <= gpus_per_node else 1
        k = min(replicas, per_node)
        nodes = replicas / k
        if k > 1:
            dpn["nvl"] += 2 * (k - 1) / k * V
        if nodes > 1:
            dpn["net"] += 2 * (nodes - 1) / nodes * V / k
    held = P_dense / (dp * cp if lay.zero_stage >= 1 else 1) + P_exp / (
        max(1, dp * cp * tp // (ep * tp)) if lay.zero_stage >= 1 else 1)
    return dpn, held


def _components(job: LayoutJob) -> dict:
    s, lay = job.shape, job.layout
    # a resolved job (problem None, the only kind priced): every field is set
    assert s is not None and lay is not None and job.gpu_type is not None and job.precision is not None
    assert job.seq_len is not None and job.global_batch is not None and job.gpus_per_node is not None
    assert job.network_gbps is not None
    spec = get_spec(job.gpu_type)
    peak = spec.peak_tflops(job.precision)
    # attention runs in 16 bits under mixed precision and fp8 training, at the run's own peak in fp32/TF32
    wide = ELEMENT_BYTES.get(job.precision, 2) > 2
    peak16 = peak if wide else (spec.peak_tflops("bf16") or spec.peak_tflops("fp16") or peak)
    if peak is None or not spec.memory_bandwidth_gbps:
        return {}
    P, P16, W = peak * 1e12, (peak16 or peak) * 1e12, spec.memory_bandwidth_gbps * 1e9
    nvl = (spec.interconnect_gbps or 0.0) / 2 * 1e9 or 1e9  # one direction
    net = job.network_gbps * 1e9
    tp, pp, cp, dp, vp, b = lay.tp, lay.pp, lay.cp, lay.dp, lay.vp, lay.micro_batch
    t = b * job.seq_len / cp  # tokens per device per micro-batch
    hd, h = s.head_dim, s.n_heads
    assert hd is not None  # set by TransformerShape itself
    per_stage = math.ceil(s.n_layers / (pp * vp)) * vp
    moe_share = s.moe_layers / s.n_layers
    Lm = per_stage * moe_share  # expert layers on the stage
    Ld = per_stage - Lm
    B = float(ELEMENT_BYTES.get(job.precision, 2))  # bytes per activation and gradient element
    st = _Stage(t=t, per_stage=per_stage, Lm=Lm, Ld=Ld, B=B)
    recompute = lay.recompute
    rf = 4.0 / 3.0 if recompute == "full" else 1.0

    # the layers' GEMMs: attention projections, dense MLPs, shared experts; the routed experts'
    lf, lb, ef, eb = _layer_gemms(s, lay, st)
    head = _gemm(B, t, s.d_model, s.vocab / tp) if s.vocab else (0.0, 0.0)
    attn = 12.0 * per_stage * (h / tp) * hd * job.seq_len * t
    # without fused attention kernels the score matrix, (h/tp)·t·seq elements per layer, passes through memory
    scores = 0.0 if job.flash else _UNFUSED_SCORE_PASSES * B * per_stage * (h / tp) * t * job.seq_len
    if recompute in ("full", "selective"):
        attn *= 4.0 / 3.0
        scores *= 22.5 / 16.0  # the forward's 6.5 passes again
    mem = _activation_bytes(s, lay, st, rf)
    kernels = per_stage * _KERNELS_PER_LAYER + Lm * _KERNELS_PER_EXPERT_LAYER
    # collectives inside the layers
    xl, kernels, calls = _layer_collectives(s, lay, st, job.gpus_per_node, kernels)
    calls += 2 * vp if pp > 1 else 0  # and the pipeline's sends, activations forward and gradients back
    # pipeline sends per micro-batch
    p2p = {"nvl": 0.0, "net": 0.0}
    if pp > 1:
        p2p[_link(tp * cp * dp + 1, job.gpus_per_node)] += (2 * vp * t * s.d_model * B
                                                           / (tp if lay.sequence_parallel else 1))
    # per step
    micro = job.global_batch / (dp * b)
    bubble = (pp - 1) / vp
    dpn, held = _gradient_sync(s, lay, B, job.gpus_per_node)
    return {"layer_flops_s": lf * rf / P, "layer_bytes_s": lb * rf / W, "expert_flops_s": ef * rf / P,
            "expert_bytes_s": eb * rf / W, "head_flops_s": head[0] / P, "head_bytes_s": head[1] / W,
            "attn_flops_s": attn / P16, "mem_s": mem / W, "kernels": kernels * (1.0 if recompute == "none" else 1.3),
            "xl_nvl_s": xl["nvl"] / nvl, "xl_net_s": xl["net"] / net, "p2p_nvl_s": p2p["nvl"] / nvl,
            "p2p_net_s": p2p["net"] / net, "microbatches": micro, "bubble": bubble, "dp_nvl_s": dpn["nvl"] / nvl,
            "dp_net_s": dpn["net"] / net, "opt_s": held * _OPT_BYTES_PER_PARAM / W,
            "fp8": 1.0 if job.precision == "fp8" else 0.0,
            "sync_spread": math.sqrt(2.0 * math.log(lay.devices)) if lay.devices > 1 else 0.0,
            "grad_acc_s": _stage_weights(s, lay, st) * _GRAD_ACC_BYTES_PER_PARAM / W, "attn_bytes_s": scores / W,
            "collectives": calls}


def layout_components(runs: pd.DataFrame, jobs: list | None = None) -> pd.DataFrame:
    """The physical parts of each row's optimizer step (:data:`LAYOUT_FEATURES`; module docstring).

    Parameters
    ----------
    runs : pandas.DataFrame
        Runs or queries.
    jobs : list of LayoutJob, optional
        :func:`layout_jobs` of ``runs``, when already resolved.

    Returns
    -------
    pandas.DataFrame
        Indexed like ``runs``, one column per quantity; NaN in every column of a row that is not a layout job
        or whose device lacks the figures (a peak at its precision, the memory bandwidth).
    """
    jobs = layout_jobs(runs) if jobs is None else jobs
    cache: dict = {}
    rows: list[dict] = []
    for job in jobs:
        if job.problem is not None:
            rows.append({})
            continue
        key = id(job)
        if key not in cache:
            cache[key] = _components(job)
        rows.append(cache[key])
    out = pd.DataFrame(rows, index=runs.index, columns=list(LAYOUT_FEATURES), dtype=float)
    out["source_weight"] = source_weights(runs)
    return out


def layout_priceable(runs: pd.DataFrame) -> np.ndarray:
    """Per row, whether the layout model can price it: transformer training with a layout
    (:func:`perfmodel.layout.is_layout_job`) on a device whose datasheet gives what :func:`layout_components` divides
    by, a peak at the row's precision and a memory bandwidth. The generic ``"cpu"`` device has neither (a host's
    figures are its own: :func:`perfmodel.hardware.register_device` gives them, as ``benchmarks/llm_layouts.py``
    does for the host its layout runs were measured on).

    Parameters
    ----------
    runs : pandas.DataFrame
        Runs or queries.

    Returns
    -------
    numpy.ndarray of bool
    """
    ok = is_layout_job(runs)
    if not ok.any() or "gpu_type" not in runs.columns:
        return ok & ("gpu_type" in runs.columns)
    prec = (runs["precision"].astype("string").fillna("").str.strip().str.lower().to_numpy(dtype=object)
            if "precision" in runs.columns else np.full(len(runs), "", dtype=object))
    dev = runs["gpu_type"].astype("string").fillna("").to_numpy(dtype=object)
    known: dict = {}
    for i in np.flatnonzero(ok):
        key = (dev[i], prec[i])
        if key not in known:
            try:  # an unknown device or precision: not priceable (the query's own checks name the problem)
                spec = get_spec(dev[i])
                known[key] = bool(spec.peak_tflops(prec[i] or "bf16") and spec.memory_bandwidth_gbps)  # as layout_jobs
            except (UnknownHardwareError, ValueError, TypeError):
                known[key] = False
        ok[i] = known[key]
    return ok


def source_weights(runs: pd.DataFrame) -> np.ndarray:
    """Per row, ``1 / (rows of its source)``: the weight that makes every source of a history (a published set, a
    team's sweep, ``source`` column) weigh the same in a fit, so that the largest table does not set the
    coefficients alone. Rows without a source form one group.

    Parameters
    ----------
    runs : pandas.DataFrame
        Runs (their ``source`` column where given).

    Returns
    -------
    numpy.ndarray of float, shape (len(runs),)
    """
    src = (runs["source"].astype("string").fillna("").to_numpy(dtype=object) if "source" in runs.columns
           else np.full(len(runs), "", dtype=object))
    codes, uniq = pd.factorize(pd.Series(src))
    counts = np.bincount(codes, minlength=len(uniq)) if len(codes) else np.zeros(0)
    return 1.0 / counts[codes] if len(codes) else np.zeros(0)


def job_problems(job: LayoutJob) -> list[str]:
    """Why a row cannot be priced, or the framework rules its layout breaks.

    Parameters
    ----------
    job : LayoutJob
        A resolved row (:func:`layout_jobs`).

    Returns
    -------
    list of str
        Empty for a valid layout job.
    """
    if job.problem is not None:
        return [job.problem]
    assert job.layout is not None and job.global_batch is not None  # a resolved job: every field is set
    return layout_problems(job.layout, devices=job.layout.devices, global_batch=job.global_batch,
                           shape=job.shape, seq_len=job.seq_len)
