"""The timed part of a measured run, shared by the worker (:mod:`perfmodel.measure._worker`) and the layout runs
(:mod:`perfmodel.measure._layout_worker`): the peak-memory window, the first step (``startup_s``), the warm-up,
the timed steps under the stop rule (rank 0 decides, every rank runs as many) and the NVML sampling.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ._peakmem import CpuPeakMemory
from ._timing import StepStats, StopRule, summarise_steps
from .telemetry import NvmlSampler, nvml_device_facts

__all__ = ["stop_rule", "TimedSteps", "time_steps"]


def stop_rule(cfg: dict) -> StopRule:
    """The run's :class:`~perfmodel.measure._timing.StopRule` from its configuration (``RunConfig``'s defaults
    for what it leaves out)."""
    return StopRule(steps=cfg.get("steps"), ci_target=cfg.get("ci_target", 0.02), min_steps=cfg.get("min_steps", 5),
                    max_steps=cfg.get("max_steps", 500), max_seconds=cfg.get("max_seconds", 30.0))


@dataclass
class TimedSteps:
    """What rank 0 saw of a run's steps.

    Attributes
    ----------
    times : list of float
        Seconds of each timed step.
    stop_reason : str or None
        Why the timing stopped (:meth:`StopRule.reason`).
    rule : StopRule
        The stop rule.
    warmup : int
        Untimed steps after the first.
    startup_s : float
        From the launch to the end of the first step.
    wall_s : float
        From the start of the first step to the end of the last.
    peak_mem : float or None
        The window's peak memory in bytes, None where it could not be measured.
    mem_source : str or None
        How ``peak_mem`` was measured (:data:`perfmodel.measure._peakmem.MEM_SOURCES`).
    sampler : NvmlSampler or None
        The GPU telemetry sampled during the timed steps (CUDA runs).
    """

    times: list[float]
    stop_reason: str | None
    rule: StopRule
    warmup: int
    startup_s: float
    wall_s: float
    peak_mem: float | None
    mem_source: str | None
    sampler: NvmlSampler | None

    def timing_fields(self, stats: StepStats, global_batch: float) -> dict:
        """The record's leading timing columns (``stats``: :func:`summarise_steps` of :attr:`times`)."""
        return {
            **stats.to_record(),
            "stop_reason": self.stop_reason,
            "warmup_steps": self.warmup,
            "samples_per_s": global_batch / stats.mean,
            "startup_s": self.startup_s,
            "wall_time_s": self.wall_s,
            "steps": 1 + self.warmup + stats.n,
        }

    def memory_fields(self) -> dict:
        """The record's per-step times and peak-memory columns."""
        return {"step_times_s": self.times, "peak_mem_bytes": self.peak_mem, "mem_source": self.mem_source}

    def device_fields(self, device, local_rank: int) -> dict:
        """A CUDA run's device facts (NVML, torch's device name) and sampled telemetry; empty on the CPU."""
        if device.type != "cuda":
            return {}
        out = dict(nvml_device_facts(local_rank))
        out["gpu_name_torch"] = torch.cuda.get_device_name(device)
        if self.sampler is not None:
            out.update(self.sampler.summary())
        return out

    def summary(self) -> StepStats:
        """:func:`~perfmodel.measure._timing.summarise_steps` of the timed steps."""
        return summarise_steps(self.times)


def _open_memory_window(device, resident: Callable[[], int]) -> CpuPeakMemory | None:
    """Open the peak-memory window: every training step (the first, warm-up and timed ones), not the model build
    or the FLOP count. On the CPU the window starts from the bytes of the tensors resident now (``resident()``)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return None
    cpu_mem = CpuPeakMemory()  # the model and the batch, resident now, plus the growth of anonymous memory
    cpu_mem.start(resident())
    return cpu_mem


def _read_peak(device, cpu_mem: CpuPeakMemory | None) -> tuple[float | None, str | None]:
    """``(peak_mem_bytes, mem_source)`` of the window when the steps end."""
    if device.type == "cuda":
        return float(torch.cuda.max_memory_allocated(device)), "cuda_max_allocated"
    assert cpu_mem is not None  # opened on every non-CUDA device
    peak_mem = cpu_mem.peak_bytes()
    return peak_mem, (cpu_mem.source if peak_mem is not None else None)


def _timed_loop(step: Callable[[], None], sync: Callable[[], None], rule: StopRule, *, device, world: int,
                rank: int, local_rank: int) -> tuple[list[float], str | None, NvmlSampler | None]:
    """Time steps until ``rule`` says stop: ``(times, stop reason, the NVML sampler or None)``."""
    times: list[float] = []
    flag = torch.zeros(1, dtype=torch.int32, device=device)
    sampler = NvmlSampler(local_rank) if (device.type == "cuda" and rank == 0) else None
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
    return times, reason, sampler


def time_steps(step: Callable[[], None], cfg: dict, *, device, world: int, rank: int, local_rank: int,
               resident: Callable[[], int]) -> TimedSteps | None:
    """Run ``step`` (one optimizer step) once, then ``warmup_steps`` times, then timed until the stop rule ends
    it; return what was seen on rank 0 (None on the other ranks).

    Parameters
    ----------
    step : callable
        One training step on this rank.
    cfg : dict
        The run's configuration: the stop rule's fields, ``warmup_steps`` and ``launched_at``.
    device : torch.device
        This process's device (CUDA runs are synchronized around each step).
    world, rank, local_rank : int
        The process group's size and this process's ranks.
    resident : callable
        Bytes of the tensors resident when the peak-memory window opens (called on the CPU only).

    Returns
    -------
    TimedSteps or None
    """
    rule = stop_rule(cfg)
    warmup = int(cfg.get("warmup_steps", 3))

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    cpu_mem = _open_memory_window(device, resident)  # peak_mem_bytes is read when the steps end
    t_run0 = time.perf_counter()
    step()  # includes torch.compile's compilation when compile is on: it counts to startup_s
    sync()
    startup_s = time.time() - float(cfg["launched_at"])
    for _ in range(warmup):
        step()
    sync()
    times, reason, sampler = _timed_loop(step, sync, rule, device=device, world=world, rank=rank,
                                         local_rank=local_rank)
    wall = time.perf_counter() - t_run0
    if rank != 0:
        return None
    peak_mem, mem_source = _read_peak(device, cpu_mem)
    return TimedSteps(times, reason, rule, warmup, startup_s, wall, peak_mem, mem_source, sampler)
