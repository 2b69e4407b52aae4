"""One measured training run, in its own process (launched by :mod:`perfmodel.measure.sweep`).

Usage: ``python -m perfmodel.measure._worker CONFIG.json RESULT.json`` for one device, or the same module under
``torchrun --nproc_per_node N -m`` for data-parallel runs (DDP; NCCL on GPUs, gloo on CPU). Only rank 0 writes
RESULT.json. A layout decoder (:mod:`perfmodel.measure.layouts`) runs split over tensor-, pipeline- and
data-parallel ranks instead (:mod:`perfmodel.measure._layout_worker`). The parent records failures (non-zero
exit, out of memory, time-out) from the exit status and stderr; the last stderr line of a failed worker is
``perfmodel-worker: <ExceptionType>: <first line of the message>``.

:func:`measure_config` is the measurement itself, callable in-process (``benchmarks/gpu_campaign.py`` runs many
configurations in one long-lived process this way).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable

from ._train_setup import make_optimizer, set_tf32, setup_precision

ERROR_PREFIX = "perfmodel-worker: "
#: Kept under its old name (``benchmarks/gpu_campaign.py`` and the tests import it from here).
_set_tf32 = set_tf32


def _write_json(path: str, obj: dict) -> None:
    from .._atomic import atomic_write_bytes

    atomic_write_bytes(path, json.dumps(obj).encode("utf-8"))


def _write_text(path: str, text: str) -> None:
    from .._atomic import atomic_write_bytes

    atomic_write_bytes(path, text.encode("utf-8"))


def _op_columns(cfg: dict, fkey: tuple, cache: dict | None) -> dict:
    """Op-level feature columns of the run's model (:mod:`perfmodel.measure.opcount`), counted once per model on
    the meta device (a fresh build: the timed module is untouched); empty if counting fails (logged to stderr).

    Zoo and Hugging Face models only: a bring-your-own factory is not called a second time (it may have side
    effects or cost); count its ops with :func:`perfmodel.measure.count_ops`."""
    from .workload import model_kind

    if model_kind(cfg["model"]) == "factory":
        return {}
    key = ("ops", *fkey, cfg.get("optimizer", "adamw"))
    if cache is not None and key in cache:
        return cache[key]
    from .opcount import workload_op_columns

    try:
        cols = workload_op_columns(cfg["model"], knobs=cfg.get("knobs") or {}, seq_len=cfg.get("seq_len"),
                                   optimizer=cfg.get("optimizer", "adamw"))
    except Exception as exc:  # noqa: BLE001 - op features are optional: the run is still measured
        print(f"perfmodel: op-level features not counted ({type(exc).__name__}: {exc})", file=sys.stderr)
        cols = {}
    if cache is not None:
        cache[key] = cols
    return cols


def measure_config(cfg: dict, *, device, world: int = 1, rank: int = 0, local_rank: int = 0,
                   flops_cache: dict | None = None) -> dict | None:
    """Build the configuration's model, time its optimizer steps, return the record fields (rank 0; else None).

    ``cfg`` holds :class:`~perfmodel.measure.sweep.RunConfig`'s fields plus ``launched_at`` (the wall-clock time
    the run was started, for ``startup_s``) and optionally ``flops_per_sample``/``flops_method``. Raises on any
    failure (the caller records it). ``flops_cache`` (a dict) keeps FLOP counts across calls in one process.
    """
    import torch

    from ._peakmem import tensor_bytes
    from ._steps import time_steps
    from .telemetry import host_facts
    from .workload import model_kind, resolve_workload
    from .zoo import count_params

    use_cuda = device.type == "cuda"
    torch.manual_seed(cfg.get("seed", 0))
    # Zoo and Hugging Face models are initialised on the device directly (a 350M-parameter model's random
    # initialisation takes seconds on a CPU); a user's factory runs as written, and its module is moved after.
    where = torch.device(device) if (use_cuda and model_kind(cfg["model"]) != "factory") else contextlib.nullcontext()
    with where:
        wl = resolve_workload(cfg["model"], name=cfg.get("name"), knobs=cfg.get("knobs") or {},
                              seq_len=cfg.get("seq_len"))
    params = count_params(wl.module)
    fkey = (cfg["model"], json.dumps(cfg.get("knobs") or {}, sort_keys=True), cfg.get("seq_len"))
    flops, flops_method = _flops(cfg, wl, device, fkey, flops_cache)
    op_cols = _op_columns(cfg, fkey, flops_cache)
    checkpointing = bool(cfg.get("activation_checkpointing")) and wl.enable_checkpointing()
    model = wl.module.to(device)
    model.train()
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)
    opt = make_optimizer(torch, cfg.get("optimizer", "adamw"), model.parameters())
    inputs, target = wl.make_inputs(int(cfg["batch_size"]), device)  # synthetic, generated once on the device
    amp_dtype, scaler, ran_precision = setup_precision(cfg.get("precision", "fp32"), device)
    if cfg.get("compile"):
        model = torch.compile(model)
    accum = int(cfg.get("grad_accum", 1))
    step = _train_step(wl, model, opt, inputs, target, accum=accum, amp_dtype=amp_dtype, scaler=scaler,
                       device=device, world=world)
    # the peak-memory window on the CPU: the model and the batch, resident now, plus the growth of anonymous memory
    run = time_steps(step, cfg, device=device, world=world, rank=rank, local_rank=local_rank,
                     resident=lambda: tensor_bytes(model, inputs, target))
    if run is None:  # not rank 0
        return None

    stats = run.summary()
    gbatch = int(cfg["batch_size"]) * world * accum
    opt_name = cfg.get("optimizer", "adamw")
    extras = [f"{ran_precision}" + (" autocast" if amp_dtype is not None else ""),
              f"grad-accum {accum}" if accum > 1 else None, "torch.compile" if cfg.get("compile") else None,
              "activation checkpointing" if checkpointing else None]
    rec = {
        **run.timing_fields(stats, gbatch),
        "params": params,
        "flops_per_sample": flops,
        "flops_method": flops_method,
        "family": wl.family,
        "model_source": wl.source,
        "seq_len": wl.seq_len,
        "precision": ran_precision,
        "grad_accum": accum,
        "optimizer": opt_name,
        "compiled": int(bool(cfg.get("compile"))),
        "activation_checkpointing": int(checkpointing),
        "threads_per_worker": torch.get_num_threads(),
        "gpu_count": world,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda if use_cuda else None,
        "protocol": f"{'AdamW' if opt_name == 'adamw' else 'SGD'} step ({', '.join(e for e in extras if e)}), "
                    f"synthetic data, warm-up {run.warmup} steps, timed {run.rule.describe()}"
                    + ("; cuda synchronize around each step" if use_cuda else ""),
        **run.memory_fields(),
        **op_cols,
        **host_facts(),
    }
    rec.update(run.device_fields(device, local_rank))
    return rec


def _flops(cfg: dict, wl, device, fkey: tuple, flops_cache: dict | None) -> tuple[float | None, str]:
    """``(flops_per_sample, flops_method)``: as the parent sweep counted them (once per model), from
    ``flops_cache``, or counted here on ``device`` (the module is moved there)."""
    from .workload import count_workload_flops

    if cfg.get("flops_per_sample") is not None:  # counted once per model by the parent sweep
        return float(cfg["flops_per_sample"]), cfg.get("flops_method", "flop_counter")
    if flops_cache is not None and fkey in flops_cache:
        return flops_cache[fkey]
    wl.module.to(device)
    flops, flops_method = count_workload_flops(wl, device)
    if flops_cache is not None:
        flops_cache[fkey] = (flops, flops_method)
    return flops, flops_method


def _train_step(wl, model, opt, inputs, target, *, accum: int, amp_dtype, scaler, device,
                world: int) -> Callable[[], None]:
    """One optimizer step: ``accum`` micro-batches (under DDP the gradients are synchronised on the last one
    only), each forward under autocast when ``amp_dtype`` is set, backward through ``scaler`` when given."""
    import torch

    def micro(last: bool):
        ctx = model.no_sync() if (world > 1 and not last and hasattr(model, "no_sync")) else contextlib.nullcontext()
        with ctx:
            with torch.autocast(device.type, dtype=amp_dtype) if amp_dtype is not None else contextlib.nullcontext():
                loss = wl.loss(model(*inputs), inputs, target)
            if accum > 1:
                loss = loss / accum
            (scaler.scale(loss) if scaler is not None else loss).backward()

    def step():
        for i in range(accum):
            micro(i == accum - 1)
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def error_line(exc: BaseException) -> str:
    """``ExceptionType: first line of the message`` — what a failed run's ``error`` column holds."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def main(config_path: str, result_path: str) -> int:
    from ._lifeline import watch_sweep

    watch_sweep()  # never outlive the sweep that started this run
    with open(config_path, encoding="utf-8") as fh:
        cfg = json.load(fh)
    import torch
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = cfg["device"] == "cuda"
    if use_cuda:
        if not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' requested but torch.cuda.is_available() is False")
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
        threads = int(cfg.get("threads") or max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE",
                                                                                              world))))
        torch.set_num_threads(threads)
    if world > 1:
        dist.init_process_group("nccl" if use_cuda else "gloo")
        if local_rank == 0:  # tells this node's parent whether it records the run (multi-node: one node does)
            _write_text(result_path + ".role", "leader" if rank == 0 else "follower")
    from .layouts import is_layout_model

    if is_layout_model(cfg["model"]):  # a decoder split over tensor/pipeline/data-parallel ranks
        from ._layout_worker import measure_layout_config

        rec = measure_layout_config(cfg, device=device, world=world, rank=rank, local_rank=local_rank)
    else:
        rec = measure_config(cfg, device=device, world=world, rank=rank, local_rank=local_rank)
    if rank == 0:
        assert rec is not None  # rank 0 gets the record (the other ranks None)
        rec["nodes"] = max(1, world // int(os.environ.get("LOCAL_WORLD_SIZE", world)))
        rec["launcher"] = "torchrun" if world > 1 else "local"
        _write_json(result_path, rec)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1], sys.argv[2]))
    except Exception as exc:  # the traceback for the log, then one line the parent records
        import traceback

        traceback.print_exc()
        print(ERROR_PREFIX + error_line(exc), file=sys.stderr, flush=True)
        sys.exit(1)
