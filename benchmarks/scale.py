"""Scale benchmark: a history of 1,000,000 runs loads, validates and fits in seconds with bounded memory, and
100,000 predictions stay well under a second.

The history is GENERATED here (a power law with noise over 1,000 made-up models on A100/H100, written to a
temporary Parquet file): it measures perfmodel's speed, not its accuracy, and is never saved as data.
Usage: python benchmarks/scale.py [--runs 1000000] [--queries 100000]
"""

from __future__ import annotations

import argparse
import platform
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import perfmodel


def generate(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n_models = 1000
    params = (10 ** rng.uniform(5, 9, n_models)).astype(np.int64)
    fps = params * rng.uniform(6, 600, n_models)
    m = rng.integers(0, n_models, n)
    batch = rng.choice([8, 16, 32, 64, 128], n)
    count = rng.choice([1, 2, 4, 8], n)
    gpu = rng.choice(["A100", "H100"], n)
    peak = np.where(gpu == "A100", 19.5e12, 67e12)
    t = 1e-3 + fps[m] * batch / (0.4 * peak) * np.exp(rng.normal(0, 0.1, n)) * (1 + 0.05 * np.log2(count))
    return pd.DataFrame({"run_id": np.char.add("r", np.arange(n).astype(str)), "model": np.char.add("m", m.astype(str)),
                         "family": "decoder", "params": params[m], "flops_per_sample": fps[m], "batch_size": batch,
                         "gpu_count": count, "gpu_type": gpu, "precision": "fp32", "step_time_s": t})


def timed(label, fn):
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{label:<44} {dt:8.2f} s   (peak RSS so far {rss:,.0f} MiB)", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=100_000)
    args = ap.parse_args(argv)
    print(f"perfmodel {perfmodel.__version__}, {platform.machine()}, {args.runs:,} generated runs")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.parquet"
        df = timed("generate", lambda: generate(args.runs))
        timed("write Parquet", lambda: df.to_parquet(path, index=False))  # noqa: F821 (called before the del)
        del df
        runs = timed("load_runs (read + validate)", lambda: perfmodel.load_runs(path))
        model = timed("fit loglinear (with 5-fold CV error)", lambda: perfmodel.fit(runs, method="loglinear"))
        timed("fit loglinear (no CV)", lambda: perfmodel.fit(runs, method="loglinear", cv=None))
        q = runs.sample(args.queries, random_state=0)[["model", "batch_size", "gpu_count", "gpu_type"]].assign(steps=1000)
        for _ in range(2):
            timed(f"predict_many {args.queries:,} queries (loglinear)", lambda: perfmodel.predict_many(q, history=model))
        sub = runs.sample(100_000, random_state=1)
        timed("fit physics on a 100,000-run sample", lambda: perfmodel.fit(sub, method="physics"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
