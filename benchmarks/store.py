"""History store benchmark (issue 38): appends and loads on a 10^6-run SQLite store, many writers on SQLite and
PostgreSQL, and writers SIGKILLed mid-append.

Targets: one append to a 10^6-run store <= 50 ms; load_runs of 10^6 runs <= 5 s; peak memory of either <= 500 MB;
8 processes x 500 appends, on SQLite and on PostgreSQL, 0 lost and 0 duplicated; SIGKILL of writers mid-append,
0 torn rows and 0 lost returned appends.

The history is GENERATED (``benchmarks/scale.py``'s power law over 1,000 made-up models: 10 columns per run) and
never saved as data. Appends and loads are timed in fresh processes (``python -c``), so their peak memory
(``VmHWM``, Linux) is the process's own, interpreter and libraries included; each is repeated and every repeat is
printed, with CPU time beside wall time and the load average (this machine's timings vary by ~10%, and by far
more when other work shares its 2 cores: CPU time is the figure that other work disturbs least).
``--csv-baseline`` also times the same history as a CSV file (the writable history before stores). PostgreSQL: a throwaway server
(``benchmarks/pg_server.py``: ``$PERFMODEL_TEST_POSTGRES``, the pgserver package, or a system server); its lines
say so when none can start.

Usage::

    python benchmarks/store.py --output benchmarks/results/store.txt [--csv-baseline]
    python benchmarks/store.py --runs 100000 --writers 4 --appends 50 --kills 5     # quick
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = str(HERE.parent / "src")
sys.path[:0] = [SRC, str(HERE)]

import pg_server  # noqa: E402
from scale import generate  # noqa: E402

import perfmodel  # noqa: E402
from perfmodel import io  # noqa: E402
from perfmodel.store import open_store  # noqa: E402

RECORD = {"model": "m1", "params": 1000, "batch_size": 8, "gpu_count": 1, "gpu_type": "A100", "step_time_s": 0.5}

# Peak memory: VmHWM of /proc/self/status, the high-water mark of this process's own memory (ru_maxrss would
# include the parent's at the fork on Linux).
_PEAK = """
def peak():
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))
"""

_APPEND = _PEAK + """
import json, statistics, sys, time
import perfmodel.io as io
rec = json.loads(sys.argv[2])
io.append_runs(rec, sys.argv[1])  # warm: imports, first connection
rss0 = peak()
times = []
for i in range(int(sys.argv[3])):
    t = time.perf_counter()
    io.append_runs({**rec, "run_id": f"bench-append-{i}-{time.time_ns()}"}, sys.argv[1])
    times.append(time.perf_counter() - t)
print(json.dumps({"times": times, "rss_before": rss0, "rss": peak()}))
"""

_LOAD = _PEAK + """
import json, sys, time
import perfmodel.io as io
t, c = time.perf_counter(), time.process_time()
runs = io.load_runs(sys.argv[1])
print(json.dumps({"wall": time.perf_counter() - t, "cpu": time.process_time() - c, "rows": len(runs),
                  "rss": peak()}))
"""


def _run(code: str, *args) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": SRC}, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _ms(values) -> str:
    v = sorted(values)
    return (f"median {1e3 * statistics.median(v):.1f} ms, p90 {1e3 * v[int(0.9 * (len(v) - 1))]:.1f} ms, "
            f"min {1e3 * v[0]:.1f} ms, max {1e3 * v[-1]:.1f} ms")


def scale_part(n: int, repeats: int, appends: int, tmp: Path, csv_baseline: bool, report) -> None:
    frame = generate(n)
    db = tmp / "big.db"
    t = time.perf_counter()
    with open_store(db) as store:
        store.append(frame)
    report(f"build: {n:,} generated runs imported into a new SQLite store in {time.perf_counter() - t:.1f} s "
           f"({db.stat().st_size / 2**20:.0f} MiB file)")
    targets = [("SQLite store", db)]
    if csv_baseline:
        csv = tmp / "big.csv"
        t = time.perf_counter()
        io.save_runs(frame, csv)
        report(f"build: the same runs saved as a CSV history in {time.perf_counter() - t:.1f} s "
               f"({csv.stat().st_size / 2**20:.0f} MiB file)")
        targets.append(("CSV file (before stores)", csv))
    del frame
    for label, path in targets:
        k = appends if path.suffix == ".db" else 3
        runs = [_run(_APPEND, path, json.dumps(RECORD), k) for _ in range(repeats if path.suffix == ".db" else 1)]
        times = [x for r in runs for x in r["times"]]
        report(f"append one run to {n:,} runs, {label}: {len(times)} appends in {len(runs)} processes: "
               f"{_ms(times)}; peak memory {max(r['rss'] for r in runs) / 2**20:.0f} MiB "
               f"(after the first append {max(r['rss_before'] for r in runs) / 2**20:.0f} MiB); load average "
               f"{os.getloadavg()[0]:.1f}")
        loads = [_run(_LOAD, path) for _ in range(repeats if path.suffix == ".db" else 1)]
        walls = [x["wall"] for x in loads]
        report(f"load_runs of {loads[0]['rows']:,} runs, {label}: wall "
               f"{', '.join(f'{w:.2f}' for w in walls)} s (median {statistics.median(walls):.2f} s); CPU "
               f"{', '.join(f'{c:.2f}' for c in (x['cpu'] for x in loads))} s; peak memory "
               f"{max(x['rss'] for x in loads) / 2**20:.0f} MiB; load average {os.getloadavg()[0]:.1f}")


# ------------------------------------------------------------------------------------------ many writers
def _writer(args) -> int:
    target, tag, n = args
    errors = 0
    for i in range(n):
        try:
            io.append_runs({**RECORD, "run_id": f"{tag}-{i}"}, target)
        except Exception as exc:  # noqa: BLE001 - counted
            errors += 1
            print(f"  append error: {type(exc).__name__}: {exc}"[:200], file=sys.stderr)
    return errors


def writers_part(target: str, label: str, writers: int, appends: int, report) -> None:
    io.append_runs({**RECORD, "run_id": "seed"}, target)
    t = time.perf_counter()
    with mp.get_context("spawn").Pool(writers) as pool:
        errors = sum(pool.map(_writer, [(target, f"w{k}", appends) for k in range(writers)]))
    seconds = time.perf_counter() - t
    ids = io.read_raw_history(target)["run_id"].tolist()
    expected = {f"w{k}-{i}" for k in range(writers) for i in range(appends)}
    present = set(ids)
    lost = len(expected - present)
    duplicated = len(ids) - len(present)
    report(f"{label}: {writers} processes x {appends} appends = {writers * appends} in {seconds:.1f} s "
           f"({writers * appends / seconds:.0f} appends/s); {lost} lost, {duplicated} duplicated, {errors} errors")


# ------------------------------------------------------------------------------------------------ SIGKILL
BATCH = 10


def _append_loop(target: str, tag: str, done) -> None:
    i = 0
    while True:
        io.append_runs([{**RECORD, "run_id": f"{tag}-{i}-{j}", "note": "x" * 4000} for j in range(BATCH)], target)
        done.value = i + 1  # only after append_runs returned
        i += 1


def kill_part(target: str, label: str, trials: int, report) -> None:
    io.append_runs({**RECORD, "run_id": "seed"}, target)
    ctx = mp.get_context("fork")
    rng = random.Random(0)
    torn = lost = unloadable = 0
    for trial in range(trials):
        done = ctx.Value("i", 0)
        tag = f"k{trial}"
        p = ctx.Process(target=_append_loop, args=(target, tag, done))
        p.start()
        time.sleep(rng.uniform(0.2, 1.5))
        os.kill(p.pid, signal.SIGKILL)
        p.join()
        try:
            runs = io.load_runs(target)
        except Exception as exc:  # noqa: BLE001 - counted
            unloadable += 1
            print(f"  unloadable after kill: {type(exc).__name__}: {exc}"[:200], file=sys.stderr)
            continue
        batches: dict[int, int] = {}
        for rid, note in zip(runs["run_id"], runs["note"]):
            parts = rid.split("-")
            if parts[0] == tag:
                batches[int(parts[1])] = batches.get(int(parts[1]), 0) + 1
                torn += note != "x" * 4000
        torn += sum(n != BATCH for n in batches.values())
        lost += sum(i not in batches for i in range(done.value))
    report(f"{label}: {trials} writers SIGKILLed mid-append (batches of {BATCH} runs): {unloadable} unloadable, "
           f"{torn} torn rows or batches, {lost} lost returned appends")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3, help="processes timing appends and loads")
    ap.add_argument("--appends", type=int, default=500, help="appends per writer (and per timing process: 30)")
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--kills", type=int, default=20, help="SIGKILL trials per store kind")
    ap.add_argument("--csv-baseline", action="store_true", help="also time the same history as a CSV file")
    ap.add_argument("--skip", default="", help="comma-separated: scale,writers,kill,postgres")
    ap.add_argument("--output", help="also write the report to this file")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    lines: list[str] = []

    def report(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    report(f"perfmodel {perfmodel.__version__} store benchmark, python {sys.version.split()[0]}, "
           f"{platform.machine()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory(prefix="perfmodel-store-") as tmp:
        tmp = Path(tmp)
        if "scale" not in skip:
            scale_part(args.runs, args.repeats, 30, tmp, args.csv_baseline, report)
        pg_url, stop = None, None
        if "postgres" not in skip and not {"writers", "kill"} <= skip:
            try:
                pg_url, stop = pg_server.start()
            except pg_server.Unavailable as exc:
                report(f"PostgreSQL: not measured, no server could start ({exc})")
        try:
            kinds = [("SQLite", lambda name: str(tmp / f"{name}.db"))]
            if pg_url:
                kinds.append(("PostgreSQL", lambda name: pg_server.fresh_database(pg_url, name)))
            for kind, make in kinds:
                if "writers" not in skip:
                    writers_part(make("writers"), f"{kind}, concurrent appends", args.writers, args.appends, report)
                if "kill" not in skip:
                    kill_part(make("kills"), f"{kind}, SIGKILL", args.kills, report)
        finally:
            if stop is not None:
                stop()
    report(f"load average {os.getloadavg()[0]:.1f} at the end")
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
