"""Re-create data/mlperf_steps.csv (and data/mlperf_steps_excluded.csv.gz) from MLPerf Training results.

The inputs are the public repositories https://github.com/mlcommons/training_results_v<round> (Apache-2.0),
read straight from bare git mirrors (no checkout needed): for each round, every
``<submitter>/results/<system>/<benchmark>/result_<n>.txt`` and ``<submitter>/systems/<system>.json`` at the
mirror's HEAD commit, which is recorded in every row (``source_commit``) and printed. Where a log does not state
its precision, the launch configs, READMEs and argparse definitions under
``<submitter>/benchmarks/<benchmark>/implementations/`` are read for it
(``perfmodel.importers.mlperf.implementation_precision``).

Usage::

    PYTHONPATH=src python scripts/derive_mlperf_steps.py --mirrors DIR [--rounds v4.0,v5.0] [--out data]

A mirror for round R is looked for at ``<mirrors>/mlcommons+training_results_<R>/repo`` or
``<mirrors>/training_results_<R>`` (any bare or non-bare git repository).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd

from perfmodel.hardware import get_spec
from perfmodel.importers.mlperf import (
    SKIPPED_BENCHMARKS,
    frame,
    implementation_text,
    is_implementation_file,
    loadable,
    make_run_id,
    summarize_run,
)
from perfmodel.io import load_runs

ROUNDS = ["v1.0", "v1.1", "v2.0", "v2.1", "v3.0", "v3.1", "v4.0", "v4.1", "v5.0"]
RESULT = re.compile(r"^([^/]+)/results/([^/]+)/([^/]+)/(result_\d+\.txt)$")
SYSTEM = re.compile(r"^([^/]+)/systems/([^/]+)\.json$")
IMPLEMENTATION = re.compile(r"^([^/]+)/benchmarks/([^/]+)/implementations/")
MAX_PY_BYTES = 1_000_000  # larger Python and YAML files are not read (implementation_text drops them)


def git_dir_for(mirrors: Path, rnd: str) -> Path | None:
    for cand in (mirrors / f"mlcommons+training_results_{rnd}" / "repo", mirrors / f"training_results_{rnd}"):
        if cand.exists():
            return cand
    return None


class Blobs:
    """Read many blobs through one ``git cat-file --batch``."""

    def __init__(self, git_dir: Path):
        self.p = subprocess.Popen(["git", "--git-dir", str(git_dir), "cat-file", "--batch"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def read(self, spec: str) -> bytes | None:
        self.p.stdin.write(spec.encode() + b"\n")
        self.p.stdin.flush()
        header = self.p.stdout.readline().split()
        if len(header) < 3 or header[1] != b"blob":  # "<spec> missing" (absent large file)
            return None
        data = self.p.stdout.read(int(header[2]))
        self.p.stdout.read(1)
        return data

    def close(self):
        self.p.stdin.close()
        self.p.wait()


class _LazyFiles(Mapping):
    """Path -> text of some blobs, read on first use (most runs state their precision and never need them);
    Python files are kept only where they define command-line flags."""

    def __init__(self, blobs: Blobs, commit: str, paths: list[str]):
        self.blobs, self.commit, self.paths, self._files = blobs, commit, paths, None

    def _load(self) -> dict[str, str]:
        if self._files is None:
            self._files = {}
            for n in self.paths:
                raw = self.blobs.read(f"{self.commit}:{n}")
                if raw is None:  # absent from the mirror (large file)
                    continue
                text = implementation_text(n, raw.decode("utf-8", "replace"))
                if text is not None:
                    self._files[n] = text
        return self._files

    def __getitem__(self, key):
        return self._load()[key]

    def __iter__(self):
        return iter(self._load())

    def __len__(self):
        return len(self._load())


def derive_round(git_dir: Path, rnd: str) -> tuple[list[dict], str]:
    commit = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    listing = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-l", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.splitlines()
    names, sizes = [], {}
    for entry in listing:
        if "\t" not in entry:
            continue
        meta, name = entry.split("\t", 1)
        names.append(name)
        size = meta.split()[-1]
        sizes[name] = int(size) if size.isdigit() else None
    impl_names: dict[tuple[str, str], list[str]] = {}
    for n in names:
        m = IMPLEMENTATION.match(n)
        small = not n.endswith((".py", ".yaml", ".yml")) or (sizes.get(n) or 0) <= MAX_PY_BYTES
        if m and is_implementation_file(n) and small:
            impl_names.setdefault(m.groups(), []).append(n)
    blobs = Blobs(git_dir)
    impl_files = {key: _LazyFiles(blobs, commit, paths) for key, paths in impl_names.items()}

    systems = {}
    for n in names:
        m = SYSTEM.match(n)
        if m:
            raw = blobs.read(f"{commit}:{n}")
            try:
                systems[(m.group(1), m.group(2))] = json.loads(raw.decode("utf-8", "replace")) if raw else None
            except ValueError:
                print(f"  {rnd}: {n} is not valid JSON; its runs get no accelerator count", file=sys.stderr)
    rows, missing = [], 0
    for n in names:
        m = RESULT.match(n)
        if not m:
            continue
        submitter, system, bench, fname = m.groups()
        if bench in SKIPPED_BENCHMARKS:
            continue
        raw = blobs.read(f"{commit}:{n}")
        if raw is None:
            missing += 1
            continue
        sysd = systems.get((submitter, system))
        try:
            row = summarize_run(raw.decode("utf-8", "replace"), sysd, benchmark=bench, source_path=n,
                                implementation=impl_files.get((submitter, bench)),
                                round=rnd, submitter=submitter, system=system,
                                source_repo=f"https://github.com/mlcommons/training_results_{rnd}",
                                source_commit=commit)
        except ValueError as exc:
            print(f"  {rnd}: skipped {n}: {exc}", file=sys.stderr)
            continue
        row["run_id"] = make_run_id(rnd, submitter, system, row["benchmark"], fname)
        rows.append(row)
    blobs.close()
    if missing:
        print(f"  {rnd}: {missing} result files absent from the mirror (large files)", file=sys.stderr)
    print(f"  {rnd}: done", file=sys.stderr, flush=True)
    return rows, commit


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirrors", type=Path, help="the folder holding the mirrors (see above)")
    ap.add_argument("--rounds", default=",".join(ROUNDS))
    ap.add_argument("--out", default="data", type=Path)
    ap.add_argument("--jobs", default=1, type=int, help="rounds derived in parallel processes")
    ap.add_argument("--summary-only", action="store_true", help="print the README tables of the files in --out")
    args = ap.parse_args(argv)
    if args.summary_only:
        print(summary(pd.read_csv(args.out / "mlperf_steps.csv"),
                      pd.read_csv(args.out / "mlperf_steps_excluded.csv.gz")))
        return 0
    if args.mirrors is None:
        ap.error("--mirrors is required (the folder holding a git mirror per round; see the script's docstring)")
    todo = []
    for rnd in [r.strip() for r in args.rounds.split(",") if r.strip()]:
        git_dir = git_dir_for(args.mirrors, rnd)
        if git_dir is None:
            print(f"{rnd}: no mirror under {args.mirrors}; skipped", file=sys.stderr)
            continue
        todo.append((git_dir, rnd))
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(derive_round, *zip(*todo))) if todo else []
    all_rows, commits = [], {}
    for (_, rnd), (rows, commit) in zip(todo, results):
        commits[rnd] = commit
        print(f"{rnd}: {len(rows)} runs from mlcommons/training_results_{rnd} @ {commit}", flush=True)
        all_rows += rows
    df = frame(all_rows)
    ok = loadable(df)
    load_runs(ok, include_failed=True)  # the bundled file must load
    rest = df.loc[df["excluded_reason"].notna()].reset_index(drop=True)
    args.out.mkdir(parents=True, exist_ok=True)
    ok.to_csv(args.out / "mlperf_steps.csv", index=False)
    # gzip: the excluded rows are not needed at run time (and pyproject's data/*.csv glob does not ship them).
    rest.to_csv(args.out / "mlperf_steps_excluded.csv.gz", index=False, compression={"method": "gzip", "mtime": 0})
    print(f"wrote {len(ok)} loadable rows to {args.out / 'mlperf_steps.csv'} and {len(rest)} excluded rows to "
          f"{args.out / 'mlperf_steps_excluded.csv.gz'}")
    print(json.dumps(commits, indent=1))
    print(summary(ok, rest))
    return 0


def _md(df: pd.DataFrame) -> str:
    head = [str(df.index.name or "")] + [str(c) for c in df.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for idx, row in df.iterrows():
        lines.append("| " + " | ".join([str(idx)] + [str(v) for v in row.tolist()]) + " |")
    return "\n".join(lines)


def _utilisation(ok: pd.DataFrame) -> pd.DataFrame:
    def share(row):
        peak = get_spec(row["gpu_type"]).peak_tflops(row["precision"])
        return row["flops_per_sample"] * row["batch_size"] / row["step_time_s"] / (peak * 1e12) if peak else None

    u = ok.assign(u=ok.apply(share, axis=1).astype(float))
    t = u.groupby("benchmark")["u"].agg(["median", "max"]).round(2)
    t.columns = ["median", "max"]
    return t


def _layouts(runs: pd.DataFrame) -> pd.DataFrame:
    if "n_layers" not in runs.columns:
        return pd.DataFrame()
    llm = runs.loc[runs["n_layers"].notna()]
    t = llm.groupby(["benchmark", "round"])["tp"].agg(lambda tp: f"{int(tp.notna().sum())} / {len(tp)}")
    return t.unstack("round").fillna("")


def summary(ok: pd.DataFrame, rest: pd.DataFrame) -> str:
    """Markdown tables for data/README.md: loadable rows per benchmark x device, and why the rest are out."""
    out = ["Loadable rows (`data/mlperf_steps.csv`) per benchmark and `gpu_type`:", ""]
    if len(ok):
        t = ok.pivot_table(index="benchmark", columns="gpu_type", values="run_id", aggfunc="count", fill_value=0)
        t["total"] = t.sum(axis=1)
        out.append(_md(t))
        out += ["", "Implied utilisation of the loadable rows (FLOPs per sample x per-device batch / step time / the "
                "device's dense peak at the row's precision, `perfmodel.hardware`), per benchmark:", ""]
        out.append(_md(_utilisation(ok)))
        out += ["", "Where the loadable rows' precision comes from (`precision_source`), per benchmark:", ""]
        src = ok.pivot_table(index="benchmark", columns="precision_source", values="run_id", aggfunc="count",
                             fill_value=0)
        src["total"] = src.sum(axis=1)
        out.append(_md(src))
    out += ["", "Language-model rows (loadable and excluded) whose launch config gave a layout (`tp`, `pp`, ...), "
            "of all rows, per benchmark and round:", ""]
    out.append(_md(_layouts(pd.concat([ok, rest]) if len(rest) else ok)))
    out += ["", "Rows per round (loadable / excluded):", ""]
    rounds = pd.concat([ok.assign(kind="loadable"), rest.assign(kind="excluded")]) if len(rest) else ok.assign(
        kind="loadable")
    out.append(_md(rounds.pivot_table(index="round", columns="kind", values="run_id", aggfunc="count",
                                  fill_value=0)))
    if len(rest):
        out += ["", "Why rows are in `data/mlperf_steps_excluded.csv.gz` (a row can have several reasons):", ""]
        reasons = rest["excluded_reason"].str.split("; ").explode()
        reasons = reasons.str.replace(r"\(ratio [^)]*\)", "", regex=True).str.strip()
        out.append(_md(reasons.value_counts().rename("rows").to_frame()))
        unresolved = rest.loc[rest["gpu_type"].isna() & rest["accelerator_name"].notna()]
        out += ["", "Accelerator names that do not resolve in perfmodel.hardware (rows):", ""]
        out.append(_md(unresolved["accelerator_name"].value_counts().rename("rows").to_frame()))
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
