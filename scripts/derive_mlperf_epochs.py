"""Re-create data/mlperf_epochs.csv.gz: the training time of every epoch of the MLPerf runs in
data/mlperf_steps.csv whose logs time each epoch (``epoch_start`` / ``epoch_stop`` events).

What it is for: the online estimator's benchmark on real GPU runs (``benchmarks/online_mlperf.py``):
a run's epochs in order are its "steps", and the sum of their times is the run's training time (evaluations,
which MLPerf logs outside the epochs, are not in it).

The inputs are the same public repositories as data/mlperf_steps.csv (https://github.com/mlcommons/
training_results_v<round>, Apache-2.0), read from bare git mirrors at the commit each row of
data/mlperf_steps.csv records (``source_commit``). A run is kept when its log has at least ``--min-epochs`` (10)
complete, consecutive epochs with positive durations; the epoch time is ``epoch_stop.time_ms -
epoch_start.time_ms`` of the same ``epoch_num``.

Usage::

    PYTHONPATH=src python scripts/derive_mlperf_epochs.py --mirrors DIR [--out data]

A mirror for round R is looked for at ``<mirrors>/mlcommons+training_results_<R>/repo`` or
``<mirrors>/training_results_<R>``. The epochs are read by :func:`perfmodel.importers.mlperf.epoch_times`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from derive_mlperf_steps import Blobs, git_dir_for  # noqa: E402

from perfmodel.importers.mlperf import epoch_times  # noqa: E402

COLUMNS = ["run_id", "epoch", "seconds"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirrors", required=True, type=Path)
    ap.add_argument("--steps", type=Path, default=Path("data/mlperf_steps.csv"))
    ap.add_argument("--out", type=Path, default=Path("data"))
    ap.add_argument("--min-epochs", type=int, default=10)
    args = ap.parse_args(argv)
    runs = pd.read_csv(args.steps, usecols=["run_id", "round", "source_path", "source_commit"])
    rows, kept, seen = [], 0, 0
    for rnd, group in runs.groupby("round"):
        git_dir = git_dir_for(args.mirrors, rnd)
        if git_dir is None:
            print(f"{rnd}: no mirror under {args.mirrors}; skipped", file=sys.stderr)
            continue
        blobs = Blobs(git_dir)
        try:
            for r in group.itertuples():
                data = blobs.read(f"{r.source_commit}:{r.source_path}")
                seen += 1
                if data is None:
                    continue
                epochs = epoch_times(data.decode("utf-8", errors="replace"))
                if len(epochs) < args.min_epochs:
                    continue
                kept += 1
                rows += [(r.run_id, k, s) for k, s in epochs]
        finally:
            blobs.close()
    if not kept:  # nothing read (e.g. a wrong --mirrors): leave any existing table as it is
        print(f"derive_mlperf_epochs: no run with >= {args.min_epochs} timed epochs found under {args.mirrors} "
              f"({seen} logs read); nothing written.", file=sys.stderr)
        return 2
    out = pd.DataFrame(rows, columns=COLUMNS)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "mlperf_epochs.csv.gz"
    out.to_csv(path, index=False, float_format="%.3f", compression={"method": "gzip", "mtime": 0})
    print(f"{kept} of {seen} runs have >= {args.min_epochs} timed epochs; {len(out)} epochs -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
