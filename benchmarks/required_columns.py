"""Only the required columns (issue #36 item 4): does a history that lacks the optional columns flip ``auto`` to a
worse method?

Every set of ``benchmarks/generalisation.py`` (development and confirmation, Lambda with ``--lambda PATH``), its
transfer splits (a new device type; a new model size where the set has several sizes), fitted twice: on the set as
published (every column its publisher states), and on the required columns alone
(:data:`perfmodel.schema.MINIMAL_COLUMNS`, the measured step time, the run status and the precision: no
``family``, no FLOPs, no ``fp32_mode``, no shape or layout; where a row accumulates gradients, its
``batch_size`` is what a user without the ``grad_accum`` column would write, the per-device samples of the
optimizer step its time covers, ``batch_size × grad_accum``). A set's rows whose per-device batch is a fraction (a
model-parallel share, which the schema accepts only beside its layout columns) are left out of both. ``auto`` beside
the ``ratio`` rule (what a careful user would compute in a spreadsheet), 90% intervals. Target: with only the
required columns, ``auto`` within 1.1× of ``ratio`` on every set and split.

Usage::

    python benchmarks/required_columns.py [--lambda PATH] [--folds 10] [--out benchmarks/results/required_columns]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import generalisation as G  # benchmarks/, beside this script
import numpy as np
from _paths import ROOT

from perfmodel.schema import MINIMAL_COLUMNS, step_global_batch

#: What "only the required columns" keeps.
REQUIRED = (*MINIMAL_COLUMNS, "step_time_s", "status", "precision")
METHODS = ("auto", "ratio")


def required_only(runs):
    """The runs with only the :data:`REQUIRED` columns, ``batch_size`` the per-device samples of the step its time
    covers (:func:`perfmodel.schema.step_global_batch` over the devices: an accumulated step's passes folded in)."""
    frame = runs[[c for c in REQUIRED if c in runs.columns]].copy()
    frame["batch_size"] = step_global_batch(runs) / runs["gpu_count"].to_numpy(dtype=float)
    return frame


def run(lambda_path: Path | None, folds: int) -> list[dict]:
    out = []
    for s in G.load_sets(lambda_path, False):
        runs = s["runs"]
        whole = np.isclose(runs["batch_size"].to_numpy(dtype=float), np.round(runs["batch_size"].to_numpy(dtype=float)))
        runs = runs.loc[whole].reset_index(drop=True)
        for split in s["splits"]:
            if split == "small→large":
                continue
            row = {"set": s["name"], "role": s["role"], "split": split, "runs": int(len(runs)), "cells": {}}
            for columns, frame in (("as published", runs), ("required only", required_only(runs))):
                kind, pairs = G.split_folds(frame, split, folds)
                for method in METHODS:
                    t = time.perf_counter()
                    cell = G.summarise([G.fit_predict(method, frame, tr, te, kind) for tr, te in pairs])
                    cell["seconds"] = round(time.perf_counter() - t, 1)
                    row["cells"][f"{columns} / {method}"] = cell
                    print(f"{s['name']:24s} {split:16s} {columns:13s} {method:6s} "
                          f"{G._fmt(cell['median_ape'], '.1f')}% cov {G._fmt(cell['coverage'], '.2f')} "
                          f"chosen {','.join(cell['chosen'])}", flush=True)
            a = row["cells"]["required only / auto"]["median_ape"]
            b = row["cells"]["required only / ratio"]["median_ape"]
            row["auto_over_ratio_required_only"] = None if a is None or b is None else round(a / b, 3)
            out.append(row)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lambda", dest="lambda_path", type=Path, default=None)
    ap.add_argument("--folds", type=int, default=10)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "required_columns"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = run(args.lambda_path, args.folds)
    lines = ["# Only the required columns (benchmarks/required_columns.py)", "",
             f"Required: {', '.join(REQUIRED)}. 90% intervals; median APE / coverage; `chosen`: what `auto` picked "
             "across the refits. Target: `auto` within 1.1x of `ratio` with only the required columns.", "",
             "| set | split | runs | as published: auto | ratio | required only: auto | ratio | auto/ratio | "
             "auto chose (required only) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["cells"]

        def f(k):
            v = c[k]
            return "—" if v["median_ape"] is None else f"{v['median_ape']:.1f}% / {G._fmt(v['coverage'], '.2f')}"

        ratio = r["auto_over_ratio_required_only"]
        verdict = "—" if ratio is None else f"{ratio:.2f} ({'met' if ratio <= 1.1 else 'NOT met'})"
        lines.append(f"| {r['set']} ({r['role']}) | {r['split']} | {r['runs']} | {f('as published / auto')} | "
                     f"{f('as published / ratio')} | {f('required only / auto')} | {f('required only / ratio')} | "
                     f"{verdict} | {', '.join(c['required only / auto']['chosen'])} |")
    if args.lambda_path is None:
        lines += ["", "public_lambda: not run (no `--lambda PATH`)."]
    lines += ["", f"Wall time {time.perf_counter() - t0:.0f} s."]
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    Path(args.out + ".json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
