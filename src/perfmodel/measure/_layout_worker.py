"""The torch side of a layout run (:mod:`perfmodel.measure.layouts`): the decoder, its tensor-parallel plan, its
pipeline stages and the timed optimizer steps.

:func:`measure_layout_config` is called by :func:`perfmodel.measure._worker.main` in every process of a
``torchrun`` launch (or in the one process of a ``tp = pp = dp = 1`` run) once the process group is up.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from .layouts import layout_shape

if TYPE_CHECKING:
    from ._steps import TimedSteps

__all__ = ["describe_layout_model", "LayoutDecoder", "build_decoder", "tensor_parallelize", "keep_stage", "lm_loss",
           "measure_layout_config", "layout_flops_per_sample"]


class Attention(nn.Module):
    """Causal self-attention with separate query/key/value/output projections (so that each splits by heads)."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.head_dim = d_model // n_heads
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.o = nn.Linear(d_model, d_model)

    def forward(self, x):
        b, t, _ = x.shape
        # -1 heads: under tensor parallelism each rank holds n_heads / tp of them
        q = self.q(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, d_model: int, ffn_hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(d_model, ffn_hidden)
        self.fc2 = nn.Linear(ffn_hidden, d_model)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Layer(nn.Module):
    """A pre-norm transformer layer: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, d_model: int, n_heads: int, ffn_hidden: int):
        super().__init__()
        self.attn_norm = nn.LayerNorm(d_model)
        self.attn = Attention(d_model, n_heads)
        self.mlp_norm = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model, ffn_hidden)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class Embeddings(nn.Module):
    """Token plus learned position embeddings."""

    def __init__(self, vocab: int, d_model: int, seq: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq, d_model)

    def forward(self, idx):
        return self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))


class LayoutDecoder(nn.Module):
    """A GPT-style decoder whose parts a layout can split: ``emb``, ``layers`` (keyed by their global index, so
    that a pipeline stage keeps the names of the full model), ``norm`` and ``head`` (untied). A pipeline stage
    drops the parts it does not hold (:func:`keep_stage`) and passes hidden states on.

    Parameters
    ----------
    n_layers, d_model, n_heads, ffn_hidden, vocab, seq : int
        The shape.
    """

    def __init__(self, n_layers: int, d_model: int, n_heads: int, ffn_hidden: int, vocab: int, seq: int):
        super().__init__()
        # emb, norm and head are None on the pipeline stages that do not hold them (keep_stage)
        self.emb: Embeddings | None = Embeddings(vocab, d_model, seq)
        self.layers = nn.ModuleDict({str(i): Layer(d_model, n_heads, ffn_hidden) for i in range(n_layers)})
        self.norm: nn.LayerNorm | None = nn.LayerNorm(d_model)
        self.head: nn.Linear | None = nn.Linear(d_model, vocab, bias=False)

    def forward(self, x):
        if self.emb is not None:
            x = self.emb(x)
        for layer in self.layers.values():
            x = layer(x)
        if self.head is not None and self.norm is not None:  # the last stage holds both
            x = self.head(self.norm(x))
        return x


def build_decoder(model: str, knobs: dict | None = None, seq_len: int | None = None) -> tuple[LayoutDecoder, dict]:
    """The layout decoder ``model`` with random weights (seeded by the caller) and its shape.

    Parameters
    ----------
    model : str
        A key of :data:`perfmodel.measure.layouts.LAYOUT_MODELS`.
    knobs : dict, optional
        Shape overrides.
    seq_len : int, optional
        The sequence length.

    Returns
    -------
    module : LayoutDecoder
    shape : dict
        :func:`perfmodel.measure.layouts.layout_shape`.
    """
    shape = layout_shape(model, knobs, seq_len)
    return LayoutDecoder(**shape), shape


def lm_loss(logits, target):
    """Next-token cross-entropy, mean over every token of the batch."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def keep_stage(module: LayoutDecoder, stage: int, stages: int) -> LayoutDecoder:
    """Cut ``module`` down, in place, to pipeline stage ``stage`` of ``stages``: an even share of the layers, the
    embeddings on the first stage, the final norm and head on the last.

    Parameters
    ----------
    module : LayoutDecoder
        The full decoder.
    stage, stages : int
        This stage's index and the pipeline degree.

    Returns
    -------
    LayoutDecoder
        ``module``.
    """
    n = len(module.layers)
    per = n // stages
    keep = {str(i) for i in range(stage * per, (stage + 1) * per)}
    for key in list(module.layers.keys()):
        if key not in keep:
            del module.layers[key]
    if stage != 0:
        module.emb = None
    if stage != stages - 1:
        module.norm = None
        module.head = None
    return module


def tensor_parallelize(module: LayoutDecoder, mesh, *, sequence_parallel: bool = False) -> LayoutDecoder:
    """Split ``module`` (a full decoder or a pipeline stage of one) over the 1-D device mesh ``mesh``
    Megatron-style, with ``torch.distributed.tensor.parallel.parallelize_module`` (the plan is in
    :mod:`perfmodel.measure.layouts`). The head's output stays sharded over the vocabulary (a DTensor): compute the
    loss under ``loss_parallel()``.

    Parameters
    ----------
    module : LayoutDecoder
        The model or stage, on the mesh's device type.
    mesh : torch.distributed.device_mesh.DeviceMesh
        The tensor-parallel ranks.
    sequence_parallel : bool, default=False
        Norms on sequence shards (``SequenceParallel``), hidden states between layers sharded over the sequence.

    Returns
    -------
    LayoutDecoder
        ``module``, its parameters now DTensors.
    """
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        ParallelStyle,
        PrepareModuleInput,
        PrepareModuleOutput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    between = Shard(1) if sequence_parallel else Replicate()  # hidden states between the layers
    plan: dict[str, ParallelStyle] = {}
    if module.emb is not None:
        plan["emb.tok"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())
        if sequence_parallel:  # Megatron adds the (replicated) position embeddings, then scatters the sequence
            plan["emb"] = PrepareModuleOutput(output_layouts=Replicate(), desired_output_layouts=Shard(1))
    for key in module.layers.keys():
        p = f"layers.{key}."
        plan.update({
            p + "attn.q": ColwiseParallel(), p + "attn.k": ColwiseParallel(), p + "attn.v": ColwiseParallel(),
            p + "attn.o": RowwiseParallel(output_layouts=between),
            p + "mlp.fc1": ColwiseParallel(), p + "mlp.fc2": RowwiseParallel(output_layouts=between),
        })
        if sequence_parallel:
            plan.update({
                p + "attn_norm": SequenceParallel(), p + "mlp_norm": SequenceParallel(),
                p + "attn": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
                p + "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            })
    if module.head is not None:
        if sequence_parallel:
            plan["norm"] = SequenceParallel()
        plan["head"] = ColwiseParallel(input_layouts=between, output_layouts=Shard(-1), use_local_output=False)
    parallelize_module(module, mesh, plan)  # in place: returns module
    return module


def _local(t):
    """The local shard of a DTensor, the tensor itself otherwise."""
    return t.to_local() if hasattr(t, "to_local") else t


def allreduce_grads(params, group, dp: int) -> None:
    """Average the gradients of ``params`` (their local shards) over the ``dp`` ranks of ``group``: one flat
    ``all_reduce`` of all of them."""
    import torch.distributed as dist
    from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

    grads = [_local(p.grad) for p in params if p.grad is not None]
    if not grads:
        return
    flat = _flatten_dense_tensors(grads)
    dist.all_reduce(flat, group=group)
    flat.div_(dp)
    for g, avg in zip(grads, _unflatten_dense_tensors(flat, grads)):
        g.copy_(avg)


def layout_flops_per_sample(model: str, knobs: dict | None = None, seq_len: int | None = None) -> float:
    """Forward+backward FLOPs of one sequence through the whole (unsplit) decoder, by ``FlopCounterMode``.

    Parameters
    ----------
    model : str
        A key of :data:`perfmodel.measure.layouts.LAYOUT_MODELS`.
    knobs : dict, optional
        Shape overrides.
    seq_len : int, optional
        The sequence length.

    Returns
    -------
    float
    """
    from torch.utils.flop_counter import FlopCounterMode

    module, shape = build_decoder(model, knobs, seq_len)
    x = torch.randint(0, shape["vocab"], (1, shape["seq"]))
    with FlopCounterMode(display=False) as counter:
        lm_loss(module(x), torch.roll(x, -1, dims=1)).backward()
    return float(counter.get_total_flops())


def _mesh(device, pp: int, dp: int, tp: int):
    from torch.distributed.device_mesh import init_device_mesh

    # tp varies fastest, then dp, then pp (Megatron's rank order): a tensor-parallel group is adjacent ranks
    return init_device_mesh(device.type, (pp, dp, tp), mesh_dim_names=("pp", "dp", "tp"))


@dataclass(frozen=True)
class _Split:
    """How a layout run splits the decoder over its ``world`` processes: ``tp x pp`` ranks hold one replica, ``dp``
    replicas; ``mb`` sequences per micro-batch, ``accum`` micro-batches per step (the pipeline's when
    ``pp > 1``)."""

    tp: int
    pp: int
    dp: int
    sp: bool
    mb: int
    accum: int
    schedule: str

    @classmethod
    def of(cls, cfg: dict, world: int) -> _Split:
        """The split ``cfg`` asks for over ``world`` processes; ValueError where ``tp x pp`` does not divide
        them."""
        tp, pp = int(cfg.get("tp", 1)), int(cfg.get("pp", 1))
        if world % (tp * pp):
            raise ValueError(f"tp {tp} x pp {pp} does not divide the {world} processes")
        return cls(tp=tp, pp=pp, dp=world // (tp * pp), sp=bool(cfg.get("sequence_parallel")) and tp > 1,
                   mb=int(cfg["batch_size"]), accum=int(cfg.get("grad_accum", 1)),
                   schedule=cfg.get("pp_schedule", "1f1b"))

    @property
    def global_batch(self) -> int:
        """Sequences per optimizer step over all replicas."""
        return self.mb * self.accum * self.dp

    def describe(self, backend: str) -> str:
        """The layout part of the record's ``protocol``."""
        parts = []
        if self.tp > 1:
            parts.append(f"tensor parallel {self.tp} (torch.distributed.tensor.parallel: Colwise/Rowwise, "
                         f"vocab-parallel embedding and loss_parallel cross-entropy"
                         + (", SequenceParallel norms" if self.sp else "") + ")")
        if self.pp > 1:
            parts.append(f"pipeline parallel {self.pp} (torch.distributed.pipelining PipelineStage, "
                         f"{'Schedule1F1B' if self.schedule == '1f1b' else 'ScheduleGPipe'}, {self.accum} "
                         f"micro-batches)")
        elif self.accum > 1:
            parts.append(f"{self.accum} micro-batches accumulated")
        if self.dp > 1:
            parts.append(f"data parallel {self.dp} (one flat all_reduce of the gradient shards after backward)")
        return f"layout run ({'; '.join(parts) or 'one process'}; {backend} backend)"


def measure_layout_config(cfg: dict, *, device, world: int = 1, rank: int = 0, local_rank: int = 0) -> dict | None:
    """Build the layout decoder split as ``cfg`` asks, time its optimizer steps, return the record fields (rank 0;
    else None).

    Parameters
    ----------
    cfg : dict
        :class:`~perfmodel.measure.sweep.RunConfig`'s fields plus ``launched_at`` and optionally
        ``flops_per_sample``.
    device : torch.device
        This process's device.
    world, rank, local_rank : int
        The process group's size and this process's ranks (the group is initialised when ``world > 1``).

    Returns
    -------
    dict or None
        The record fields on rank 0.
    """
    from ._peakmem import tensor_bytes
    from ._steps import time_steps
    from ._train_setup import make_optimizer, setup_precision
    from .zoo import count_params

    split = _Split.of(cfg, world)
    mesh = _mesh(device, split.pp, split.dp, split.tp) if world > 1 else None
    pp_rank = mesh["pp"].get_local_rank() if mesh is not None else 0
    dp_rank = mesh["dp"].get_local_rank() if mesh is not None else 0

    torch.manual_seed(cfg.get("seed", 0))  # the same full model on every rank, then each keeps its part
    module, shape = build_decoder(cfg["model"], cfg.get("knobs"), cfg.get("seq_len"))
    params = count_params(module)
    if cfg.get("flops_per_sample") is not None:
        flops = float(cfg["flops_per_sample"])
    else:
        flops = layout_flops_per_sample(cfg["model"], cfg.get("knobs"), cfg.get("seq_len"))
    if split.pp > 1:
        keep_stage(module, pp_rank, split.pp)
    module.to(device)
    module.train()
    if split.tp > 1:
        assert mesh is not None  # tp > 1 divides world > 1 processes: there is a mesh
        tensor_parallelize(module, mesh["tp"], sequence_parallel=split.sp)
    amp_dtype, scaler, ran_precision = setup_precision(cfg.get("precision", "fp32"), device)
    if scaler is not None:
        raise ValueError("fp16 with a GradScaler is not supported in layout runs; use bf16 or fp32.")
    opt = make_optimizer(torch, cfg.get("optimizer", "adamw"), module.parameters())

    # synthetic tokens, generated once: the same on the ranks of one replica, different between replicas
    gen = torch.Generator().manual_seed(1000 + dp_rank)
    share = split.mb * split.accum
    tokens = torch.randint(0, shape["vocab"], (share, shape["seq"]), generator=gen).to(device)
    target = torch.roll(tokens, -1, dims=1)

    forward_backward = _forward_backward(module, tokens, target, split, mesh=mesh, pp_rank=pp_rank, device=device,
                                         amp_dtype=amp_dtype)
    dp_group = mesh["dp"].get_group() if (mesh is not None and split.dp > 1) else None
    step = _layout_step(forward_backward, list(module.parameters()), opt, dp_group, dp=split.dp, world=world)

    def resident() -> int:  # a DTensor's shard on this rank
        local = [_local(t) for t in (*module.parameters(), *module.buffers())]
        return tensor_bytes(local, tokens, target)

    run = time_steps(step, cfg, device=device, world=world, rank=rank, local_rank=local_rank, resident=resident)
    if run is None:  # not rank 0
        return None
    return _layout_record(cfg, run, split, shape, params=params, flops=flops, precision=ran_precision,
                          device=device, world=world, local_rank=local_rank)


def _forward_backward(module: LayoutDecoder, tokens, target, split: _Split, *, mesh, pp_rank: int, device,
                      amp_dtype) -> Callable[[], None]:
    """The forward and backward passes of one step on this rank: through the pipeline schedule when
    ``pp > 1``, else over the ``accum`` micro-batches; the loss under ``loss_parallel()`` when ``tp > 1``."""

    def autocast():
        return torch.autocast(device.type, dtype=amp_dtype) if amp_dtype is not None else contextlib.nullcontext()

    def loss_ctx():
        if split.tp > 1:
            from torch.distributed.tensor.parallel import loss_parallel

            return loss_parallel()
        return contextlib.nullcontext()

    if split.pp > 1:
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

        first, last = pp_rank == 0, pp_rank == split.pp - 1
        stage = PipelineStage(module, pp_rank, split.pp, device, group=mesh["pp"].get_group())
        sched_cls = Schedule1F1B if split.schedule == "1f1b" else ScheduleGPipe

        def stage_loss(out, y):
            with autocast():
                return lm_loss(out, y)

        schedule = sched_cls(stage, n_microbatches=split.accum, loss_fn=stage_loss)

        def pipelined():
            with loss_ctx(), autocast():
                if first:
                    schedule.step(tokens)
                elif last:
                    schedule.step(target=target, losses=[])
                else:
                    schedule.step()

        return pipelined

    micro_x = tokens.split(split.mb)
    micro_y = target.split(split.mb)

    def accumulated():
        for x, y in zip(micro_x, micro_y):
            with loss_ctx():
                with autocast():
                    loss = lm_loss(module(x), y)
                (loss / split.accum).backward()

    return accumulated


def _layout_step(forward_backward: Callable[[], None], params_list: list, opt, dp_group, *, dp: int,
                 world: int) -> Callable[[], None]:
    """One optimizer step: forward and backward, the gradients averaged over the data-parallel replicas
    (``dp_group``, when there are several), the optimizer, and a barrier (the step ends when the slowest rank is
    done)."""
    import torch.distributed as dist

    def step():
        forward_backward()
        if dp_group is not None:
            allreduce_grads(params_list, dp_group, dp)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if world > 1:
            dist.barrier()  # the step ends when the slowest rank is done

    return step


def _layout_record(cfg: dict, run: TimedSteps, split: _Split, shape: dict, *, params: int, flops: float,
                   precision: str, device, world: int, local_rank: int) -> dict:
    """The record fields of a layout run (rank 0); RuntimeError on a non-finite step time."""
    from .telemetry import host_facts

    use_cuda = device.type == "cuda"
    stats = run.summary()
    opt_name = cfg.get("optimizer", "adamw")
    backend = ("nccl" if use_cuda else "gloo") if world > 1 else "none"
    gbatch = split.global_batch
    rec = {
        **run.timing_fields(stats, gbatch),
        "params": params,
        "active_params": params,
        "flops_per_sample": flops,
        "flops_method": "flop_counter",
        "family": "decoder",
        "model_source": "zoo",
        "seq_len": shape["seq"],
        "precision": precision,
        "grad_accum": split.accum,
        "optimizer": opt_name,
        "compiled": 0,
        "activation_checkpointing": 0,
        "threads_per_worker": torch.get_num_threads(),
        "gpu_count": world,
        "batch_size": gbatch / world,
        "global_batch_size": gbatch,
        "micro_batch_size": split.mb,
        "tp": split.tp, "pp": split.pp, "vp": 1, "cp": 1, "ep": 1, "dp": split.dp,
        "zero_stage": 0,
        "sequence_parallel": int(split.sp),
        "recompute": "none",
        "flash_attention": 1,  # scaled_dot_product_attention: fused kernels
        "gpus_per_node": int(os.environ.get("LOCAL_WORLD_SIZE", world)),
        "n_layers": shape["n_layers"], "d_model": shape["d_model"], "n_heads": shape["n_heads"],
        "n_kv_heads": shape["n_heads"], "head_dim": shape["d_model"] // shape["n_heads"],
        "ffn_hidden": shape["ffn_hidden"], "gated_mlp": 0, "tied_embeddings": 0, "vocab": shape["vocab"],
        "n_experts": 0,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda if use_cuda else None,
        "protocol": (f"{split.describe(backend)}, "
                     f"{'AdamW' if opt_name == 'adamw' else 'SGD'} step ({precision}), synthetic tokens, "
                     f"every rank's step closed by a barrier, warm-up {run.warmup} steps, timed "
                     f"{run.rule.describe()}" + ("; cuda synchronize around each step" if use_cuda else "")),
        **run.memory_fields(),
        **host_facts(),
    }
    rec.update(run.device_fields(device, local_rank))
    if not math.isfinite(stats.mean):
        raise RuntimeError("non-finite step time")
    return rec


def describe_layout_model(model: str) -> dict:
    """Parameters and forward + backward FLOPs of one sequence of a layout decoder (builds it: needs torch).

    Parameters
    ----------
    model : str
        One of :data:`LAYOUT_MODELS`.

    Returns
    -------
    dict
        ``params`` and ``flops_per_sample``.
    """
    module, _ = build_decoder(model)
    return {"params": int(sum(p.numel() for p in module.parameters())),
            "flops_per_sample": float(layout_flops_per_sample(model))}
