"""The torch side of a layout run (:mod:`perfmodel.measure.layouts`): the decoder, its tensor-parallel plan, its
pipeline stages and the timed optimizer steps.

:func:`measure_layout_config` is called by :func:`perfmodel.measure._worker.main` in every process of a
``torchrun`` launch (or in the one process of a ``tp = pp = dp = 1`` run) once the process group is up.
"""

from __future__ import annotations

import contextlib
import math
import os
import time

import torch
import torch.nn.functional as F
from torch import nn

from .layouts import layout_shape

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
        self.emb = Embeddings(vocab, d_model, seq)
        self.layers = nn.ModuleDict({str(i): Layer(d_model, n_heads, ffn_hidden) for i in range(n_layers)})
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, x):
        if self.emb is not None:
            x = self.emb(x)
        for layer in self.layers.values():
            x = layer(x)
        if self.head is not None:
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
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, PrepareModuleOutput,
                                                   RowwiseParallel, SequenceParallel, parallelize_module)

    between = Shard(1) if sequence_parallel else Replicate()  # hidden states between the layers
    plan = {}
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
    return parallelize_module(module, mesh, plan)


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
    import torch.distributed as dist

    from ._peakmem import CpuPeakMemory, tensor_bytes
    from ._timing import StopRule, summarise_steps
    from ._train_setup import make_optimizer, setup_precision
    from .telemetry import NvmlSampler, host_facts, nvml_device_facts
    from .zoo import count_params

    use_cuda = device.type == "cuda"
    tp, pp = int(cfg.get("tp", 1)), int(cfg.get("pp", 1))
    if world % (tp * pp):
        raise ValueError(f"tp {tp} x pp {pp} does not divide the {world} processes")
    dp = world // (tp * pp)
    sp = bool(cfg.get("sequence_parallel")) and tp > 1
    mb, accum = int(cfg["batch_size"]), int(cfg.get("grad_accum", 1))
    schedule_name = cfg.get("pp_schedule", "1f1b")
    gbatch = mb * accum * dp

    mesh = _mesh(device, pp, dp, tp) if world > 1 else None
    pp_rank = mesh["pp"].get_local_rank() if mesh is not None else 0
    dp_rank = mesh["dp"].get_local_rank() if mesh is not None else 0

    torch.manual_seed(cfg.get("seed", 0))  # the same full model on every rank, then each keeps its part
    module, shape = build_decoder(cfg["model"], cfg.get("knobs"), cfg.get("seq_len"))
    params = count_params(module)
    if cfg.get("flops_per_sample") is not None:
        flops = float(cfg["flops_per_sample"])
    else:
        flops = layout_flops_per_sample(cfg["model"], cfg.get("knobs"), cfg.get("seq_len"))
    if pp > 1:
        keep_stage(module, pp_rank, pp)
    module.to(device)
    module.train()
    if tp > 1:
        tensor_parallelize(module, mesh["tp"], sequence_parallel=sp)
    amp_dtype, scaler, ran_precision = setup_precision(cfg.get("precision", "fp32"), device)
    if scaler is not None:
        raise ValueError("fp16 with a GradScaler is not supported in layout runs; use bf16 or fp32.")
    opt = make_optimizer(torch, cfg.get("optimizer", "adamw"), module.parameters())

    # synthetic tokens, generated once: the same on the ranks of one replica, different between replicas
    gen = torch.Generator().manual_seed(1000 + dp_rank)
    share = mb * accum
    tokens = torch.randint(0, shape["vocab"], (share, shape["seq"]), generator=gen).to(device)
    target = torch.roll(tokens, -1, dims=1)

    def autocast():
        return torch.autocast(device.type, dtype=amp_dtype) if amp_dtype is not None else contextlib.nullcontext()

    def loss_ctx():
        if tp > 1:
            from torch.distributed.tensor.parallel import loss_parallel

            return loss_parallel()
        return contextlib.nullcontext()

    if pp > 1:
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

        first, last = pp_rank == 0, pp_rank == pp - 1
        stage = PipelineStage(module, pp_rank, pp, device, group=mesh["pp"].get_group())
        sched_cls = Schedule1F1B if schedule_name == "1f1b" else ScheduleGPipe

        def stage_loss(out, y):
            with autocast():
                return lm_loss(out, y)

        schedule = sched_cls(stage, n_microbatches=accum, loss_fn=stage_loss)

        def forward_backward():
            with loss_ctx(), autocast():
                if first:
                    schedule.step(tokens)
                elif last:
                    schedule.step(target=target, losses=[])
                else:
                    schedule.step()
    else:
        micro_x = tokens.split(mb)
        micro_y = target.split(mb)

        def forward_backward():
            for x, y in zip(micro_x, micro_y):
                with loss_ctx():
                    with autocast():
                        loss = lm_loss(module(x), y)
                    (loss / accum).backward()

    dp_group = mesh["dp"].get_group() if (mesh is not None and dp > 1) else None
    params_list = list(module.parameters())

    def step():
        forward_backward()
        if dp_group is not None:
            allreduce_grads(params_list, dp_group, dp)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if world > 1:
            dist.barrier()  # the step ends when the slowest rank is done

    def sync():
        if use_cuda:
            torch.cuda.synchronize(device)

    rule = StopRule(steps=cfg.get("steps"), ci_target=cfg.get("ci_target", 0.02), min_steps=cfg.get("min_steps", 5),
                    max_steps=cfg.get("max_steps", 500), max_seconds=cfg.get("max_seconds", 30.0))
    warmup = int(cfg.get("warmup_steps", 3))
    if use_cuda:
        torch.cuda.reset_peak_memory_stats(device)
    else:
        cpu_mem = CpuPeakMemory()
        local = [_local(t) for t in (*module.parameters(), *module.buffers())]  # a DTensor's shard on this rank
        cpu_mem.start(tensor_bytes(local, tokens, target))
    t_run0 = time.perf_counter()
    step()
    sync()
    startup_s = time.time() - float(cfg["launched_at"])
    for _ in range(warmup):
        step()
    sync()

    times: list[float] = []
    flag = torch.zeros(1, dtype=torch.int32, device=device)
    sampler = NvmlSampler(local_rank) if (use_cuda and rank == 0) else None
    if sampler is not None:
        sampler.__enter__()
    reason = None
    try:
        while True:
            sync()
            t0 = time.perf_counter()
            step()
            sync()
            times.append(time.perf_counter() - t0)
            if rank == 0:  # outside the timed region: rank 0 decides, every rank runs the same steps
                reason = rule.reason(times)
                flag.fill_(1 if reason else 0)
            if world > 1:
                dist.broadcast(flag, 0)
            if int(flag.item()):
                break
    finally:
        if sampler is not None:
            sampler.__exit__(None, None, None)
    wall = time.perf_counter() - t_run0
    if rank != 0:
        return None
    if use_cuda:
        peak_mem, mem_source = float(torch.cuda.max_memory_allocated(device)), "cuda_max_allocated"
    else:
        peak_mem = cpu_mem.peak_bytes()
        mem_source = cpu_mem.source if peak_mem is not None else None

    stats = summarise_steps(times)
    opt_name = cfg.get("optimizer", "adamw")
    parts = []
    if tp > 1:
        parts.append(f"tensor parallel {tp} (torch.distributed.tensor.parallel: Colwise/Rowwise, vocab-parallel "
                     f"embedding and loss_parallel cross-entropy" + (", SequenceParallel norms" if sp else "") + ")")
    if pp > 1:
        parts.append(f"pipeline parallel {pp} (torch.distributed.pipelining PipelineStage, "
                     f"{'Schedule1F1B' if schedule_name == '1f1b' else 'ScheduleGPipe'}, {accum} micro-batches)")
    elif accum > 1:
        parts.append(f"{accum} micro-batches accumulated")
    if dp > 1:
        parts.append(f"data parallel {dp} (one flat all_reduce of the gradient shards after backward)")
    backend = ("nccl" if use_cuda else "gloo") if world > 1 else "none"
    rec = {
        **stats.to_record(),
        "stop_reason": reason,
        "warmup_steps": warmup,
        "samples_per_s": gbatch / stats.mean,
        "startup_s": startup_s,
        "wall_time_s": wall,
        "steps": 1 + warmup + stats.n,
        "params": params,
        "active_params": params,
        "flops_per_sample": flops,
        "flops_method": "flop_counter",
        "family": "decoder",
        "model_source": "zoo",
        "seq_len": shape["seq"],
        "precision": ran_precision,
        "grad_accum": accum,
        "optimizer": opt_name,
        "compiled": 0,
        "activation_checkpointing": 0,
        "threads_per_worker": torch.get_num_threads(),
        "gpu_count": world,
        "batch_size": gbatch / world,
        "global_batch_size": gbatch,
        "micro_batch_size": mb,
        "tp": tp, "pp": pp, "vp": 1, "cp": 1, "ep": 1, "dp": dp,
        "zero_stage": 0,
        "sequence_parallel": int(sp),
        "recompute": "none",
        "gpus_per_node": int(os.environ.get("LOCAL_WORLD_SIZE", world)),
        "n_layers": shape["n_layers"], "d_model": shape["d_model"], "n_heads": shape["n_heads"],
        "n_kv_heads": shape["n_heads"], "head_dim": shape["d_model"] // shape["n_heads"],
        "ffn_hidden": shape["ffn_hidden"], "gated_mlp": 0, "tied_embeddings": 0, "vocab": shape["vocab"],
        "n_experts": 0,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda if use_cuda else None,
        "protocol": (f"layout run ({'; '.join(parts) or 'one process'}; {backend} backend), "
                     f"{'AdamW' if opt_name == 'adamw' else 'SGD'} step ({ran_precision}), synthetic tokens, "
                     f"every rank's step closed by a barrier, warm-up {warmup} steps, timed {rule.describe()}"
                     + ("; cuda synchronize around each step" if use_cuda else "")),
        "step_times_s": times,
        "peak_mem_bytes": peak_mem,
        "mem_source": mem_source,
        **host_facts(),
    }
    if use_cuda:
        rec.update(nvml_device_facts(local_rank))
        rec["gpu_name_torch"] = torch.cuda.get_device_name(device)
        if sampler is not None:
            rec.update(sampler.summary())
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
