"""This host's figures for the spec table: one torch thread's fp32 matmul rate, its copy bandwidth, and gloo's
all-reduce bandwidth between two processes (the rates the CPU layout runs of ``data/runs_cpu_layouts.csv`` had:
one torch thread per process, gloo on one host).

The spec table has no figures for ``cpu``; :mod:`benchmarks.llm_layouts` registers a device from this file's output
to price those runs with the layout model. Each figure is the median of repeats, with its spread printed.

Usage::

    python benchmarks/cpu_host_figures.py [--out benchmarks/results/cpu_host_figures.json]

Needs torch (the ``measure`` extra). Run it with nothing else running: the figures are only as quiet as the host.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sys
import time
from pathlib import Path

import numpy as np
from _paths import ROOT, rel  # benchmarks/_paths.py (the scripts run from benchmarks/)

REPEATS = 7


def matmul_gflops(torch, n: int = 768) -> list[float]:
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        a @ b
    out = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        for _ in range(5):
            a @ b
        out.append(5 * 2 * n**3 / (time.perf_counter() - t) / 1e9)
    return out


def copy_gbps(torch, mib: int = 128) -> list[float]:
    src = torch.empty(mib * 2**20 // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    out = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        dst.copy_(src)
        out.append(2 * src.numel() * 4 / (time.perf_counter() - t) / 1e9)  # read + write
    return out


def _allreduce_worker(rank: int, port: int, mib: int, queue) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    x = torch.ones(mib * 2**20 // 4)
    for _ in range(2):
        dist.all_reduce(x)
    times = []
    for _ in range(REPEATS):
        dist.barrier()
        t = time.perf_counter()
        dist.all_reduce(x)
        times.append(time.perf_counter() - t)
    if rank == 0:
        # the bus bandwidth of a ring all-reduce over 2 ranks: 2·(n-1)/n of the bytes cross the link = the bytes
        queue.put([x.numel() * 4 / s / 1e9 for s in times])
    dist.destroy_process_group()


def allreduce_gbps(mib: int = 32) -> list[float]:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_allreduce_worker, args=(r, port, mib, queue)) for r in range(2)]
    for p in procs:
        p.start()
    out = queue.get(timeout=300)
    for p in procs:
        p.join(60)
    return out


def _summary(values: list[float]) -> dict:
    v = np.asarray(values)
    return {"median": float(np.median(v)), "min": float(v.min()), "max": float(v.max()), "repeats": len(v)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu_host_figures.json")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("cpu_host_figures needs torch: pip install -e '.[measure]'", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    res = {"host": platform.processor() or platform.machine(), "cores": os.cpu_count(), "torch": torch.__version__,
           "threads": 1, "load_average_1min_before": load,
           "fp32_matmul_gflops": _summary(matmul_gflops(torch)),
           "copy_gbps": _summary(copy_gbps(torch)),
           "gloo_allreduce_bus_gbps": _summary(allreduce_gbps())}
    res["load_average_1min_after"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))
    print(f"wrote {rel(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
