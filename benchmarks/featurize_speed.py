"""How long op-level featurisation takes on the meta device: a ~124M-parameter GPT-2-sized decoder (1024 tokens).

Target (issue 15): < 10 s and no real memory. Prints the time and the process's peak resident memory; run it on a
quiet machine (timings on a busy one mean little).

    PYTHONPATH=src python benchmarks/featurize_speed.py [--model gpt-124m]
"""

from __future__ import annotations

import argparse
import resource
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt-124m", help="zoo name (default gpt-124m)")
    args = ap.parse_args()
    import torch

    from perfmodel.measure.opcount import count_workload_ops
    from perfmodel.measure.workload import resolve_workload

    t0 = time.perf_counter()
    with torch.device("meta"):  # the module is built on meta: no weights are ever allocated
        wl = resolve_workload(args.model)
    t_build = time.perf_counter() - t0
    t1 = time.perf_counter()
    feats = count_workload_ops(wl, device="meta")
    t_count = time.perf_counter() - t1
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"model {args.model}: {feats.params / 1e6:.1f}M params, {feats.total_flops:.3g} FLOPs/sample, "
          f"{feats.kernels:.0f} kernels/step")
    print(f"build on meta: {t_build:.2f} s; featurise on meta: {t_count:.2f} s (target < 10 s); "
          f"peak RSS of the process {rss_mb:.0f} MB")


if __name__ == "__main__":
    main()
