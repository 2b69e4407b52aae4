"""Benchmark: predict 100,000 configurations at once with ``predict_many`` (issue: "well under a second").

Usage: python benchmarks/predict_speed.py [--queries 100000] [--method loglinear] [--distinct]
Fits on the bundled runs (not timed), then times predict_many over generated query configurations (the
queries are generated; the fit is on measured data). Prints the median of 5 repeats.

By default the queries draw from a grid (bundled model names x 4 batch sizes x 2 device counts, random steps),
as a planning sweep does; predict_many predicts each distinct configuration once. ``--distinct`` draws a
continuous parameter count per query instead, so every query is a different configuration (the worst case).
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import pandas as pd

import perfmodel


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--method", default="loglinear", choices=["loglinear", "gbm", "linear", "physics"])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--distinct", action="store_true", help="every query a different configuration")
    args = ap.parse_args()

    runs = perfmodel.load_bundled_runs()
    model = perfmodel.fit(runs, method=args.method)
    rng = np.random.default_rng(0)
    models = list(model.models_.index)
    which = ({"params": rng.uniform(1e5, 1e7, args.queries)} if args.distinct
             else {"model": rng.choice(models, args.queries)})
    q = pd.DataFrame({
        **which,
        "batch_size": rng.choice([8, 16, 32, 64], args.queries),
        "gpu_count": rng.choice([1, 2], args.queries),
        "gpu_type": "cpu",
        "steps": rng.integers(1_000, 100_000, args.queries),
    })
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        out = perfmodel.predict_many(q, history=model)
        times.append(time.perf_counter() - t0)
    assert len(out) == args.queries and np.isfinite(out["seconds"]).all()
    kind = "all distinct" if args.distinct else "grid"
    print(f"predict_many: {args.queries:,} queries ({kind}), method={args.method}: median {np.median(times):.3f} s "
          f"(min {min(times):.3f}, max {max(times):.3f}) over {args.repeats} repeats; "
          f"{platform.processor() or platform.machine()}, {perfmodel.__version__}")


if __name__ == "__main__":
    main()
