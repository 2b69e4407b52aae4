"""One measured training run, in its own process (launched by :mod:`perfmodel.measure.sweep`).

Usage: ``python -m perfmodel.measure._worker CONFIG.json RESULT.json`` for one device, or the same module under
``torchrun --nproc_per_node N -m`` for data-parallel runs (DDP; NCCL on GPUs, gloo on CPU). Only rank 0 writes
RESULT.json. The parent records failures (non-zero exit, out of memory, time-out) from the exit status and stderr.
"""

from __future__ import annotations

import json
import os
import sys
import time


def _write_json(path: str, obj: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh)
    os.replace(tmp, path)


def main(config_path: str, result_path: str) -> int:
    with open(config_path, encoding="utf-8") as fh:
        cfg = json.load(fh)
    import torch
    import torch.distributed as dist

    from .telemetry import NvmlSampler, host_facts, nvml_device_facts
    from ._timing import StopRule, summarise_steps
    from .zoo import build, count_flops_per_sample, count_params

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = cfg["device"] == "cuda"
    if use_cuda:
        if not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' requested but torch.cuda.is_available() is False")
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        threads = torch.get_num_threads()
    else:
        device = torch.device("cpu")
        threads = int(cfg.get("threads") or max(1, (os.cpu_count() or 1) // world))
        torch.set_num_threads(threads)
    if world > 1:
        dist.init_process_group("nccl" if use_cuda else "gloo")

    torch.manual_seed(cfg.get("seed", 0))
    bundle = build(cfg["model"], **cfg.get("knobs", {}))
    params = count_params(bundle.module)
    if cfg.get("flops_per_sample") is not None:  # counted once per model by the parent sweep
        flops, flops_method = float(cfg["flops_per_sample"]), cfg.get("flops_method", "flop_counter")
    else:
        flops, flops_method = count_flops_per_sample(bundle, device)
    model = bundle.module.to(device)
    model.train()
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x, y = bundle.make_batch(int(cfg["batch_size"]), device)  # synthetic inputs, generated once on the device

    precision = cfg.get("precision", "fp32")
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    if precision == "tf32" and use_cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    elif use_cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    scaler = torch.amp.GradScaler("cuda") if (precision == "fp16" and use_cuda) else None

    def sync():
        if use_cuda:
            torch.cuda.synchronize(device)

    def step():
        if amp_dtype is not None:
            with torch.autocast(device.type, dtype=amp_dtype):
                loss = bundle.loss_fn(model(x), y)
        else:
            loss = bundle.loss_fn(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)

    rule = StopRule(
        steps=cfg.get("steps"),
        ci_target=cfg.get("ci_target", 0.02),
        min_steps=cfg.get("min_steps", 5),
        max_steps=cfg.get("max_steps", 500),
        max_seconds=cfg.get("max_seconds", 30.0),
    )
    t_run0 = time.perf_counter()
    step()
    sync()
    startup_s = time.time() - float(cfg["launched_at"])
    for _ in range(int(cfg.get("warmup_steps", 3))):
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
            # Outside the timed region: rank 0 decides, every rank runs the same number of steps.
            if rank == 0:
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

    if rank == 0:
        stats = summarise_steps(times)
        gbatch = int(cfg["batch_size"]) * world
        rec = {
            **stats.to_record(),
            "stop_reason": reason,
            "warmup_steps": int(cfg.get("warmup_steps", 3)),
            "samples_per_s": gbatch / stats.mean,
            "startup_s": startup_s,
            "wall_time_s": wall,
            "steps": 1 + int(cfg.get("warmup_steps", 3)) + stats.n,
            "params": params,
            "flops_per_sample": flops,
            "flops_method": flops_method,
            "family": bundle.family,
            "threads_per_worker": threads,
            "gpu_count": world,
            "torch_version": torch.__version__,
            "cuda_version": torch.version.cuda if use_cuda else None,
            "protocol": f"AdamW step, synthetic data, warm-up {int(cfg.get('warmup_steps', 3))} steps, "
                        f"timed {rule.describe()}" + ("; cuda synchronize around each step" if use_cuda else ""),
            "step_times_s": times,
            **host_facts(),
        }
        if use_cuda:
            rec.update(nvml_device_facts(local_rank))
            rec["gpu_name_torch"] = torch.cuda.get_device_name(device)
            rec["gpu_mem_peak_torch_bytes"] = float(torch.cuda.max_memory_allocated(device))
            if sampler is not None:
                rec.update(sampler.summary())
        _write_json(result_path, rec)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
