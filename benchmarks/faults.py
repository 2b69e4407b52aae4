"""Fault benchmark for perfmodel's guarantees (issue 14): counts of failures under fuzzing, kills and concurrency.

Figures (each must be 0 failures):

1. fuzzed round trips: hypothesis-generated records (arbitrary text, floats, integers) appended to CSV and Parquet
   histories and loaded back; a mismatch is any value that does not come back equal. (A ``model`` name must not
   be blank: the schema refuses that, so blank names are not generated.)
2. SIGKILL trials: a forked process appends runs (or saves a model) in a loop and is SIGKILLed at a random moment;
   afterwards the file must load, every append that had returned must be in it, and after the next write no
   temporary file may be left.
3. concurrent save/load: 4 processes save models to one path while this process loads it.
4. orphaned workers: a real ``perfmodel measure`` sweep (needs torch) is started in its own process group, the
   group is SIGKILLed while a worker runs, and the worker must be gone within 20 s.
5. public API fuzz: hypothesis calls ``load_runs``, ``predict_training_time`` and ``predict_many`` with arbitrary
   arguments; any exception other than ``ValueError``/``TypeError`` (the documented ones) counts, and so does a
   returned NaN, infinity, negative time or an interval that does not contain its prediction.

6. history and model file integrity (issue 26): every cut inside the last rows of sealed CSV histories (must be
   refused, or load exactly the original values; recover_runs must drop exactly the cut row); appends through a
   symbolic link from several processes (no lost record, the link kept); unknown text columns appended and
   re-appended in CSV and Parquet (no value changed); every numeric schema column given out-of-range values (none
   accepted, each a SchemaError naming the column); Parquet reads while another process rewrites the file (no
   spurious error); attack model files (a huge JSON list, deep nesting, a size lie, a large declared array in a
   small file), each loaded in a fresh process with its CPU time and peak memory measured; CSV and the Parquet
   error without pyarrow.
7. inputs (issue 26 #7-#12, ``benchmarks/faults_inputs.py``): broken importer inputs, duplicate imports, device
   files, numbers outside the documented ranges, plan/analysis arguments, the cache key and the CLI; each count
   (tracebacks, NaN results, duplicated rows, partly registered device files...) must be 0.
8. the history store (issue 38): the round trips, SIGKILL trials, symbolic-link appends and unknown columns above
   run against a SQLite store (``.db``) as well as CSV and Parquet; and the probe's three breaks, on every kind of
   history: a field over 128 KiB (every history loads, appends and recovers), an unknown column turning from int
   to float (no earlier value changes; Parquet refuses), and a model written over a history (refused without
   ``--force``, through the API and the CLI). Appends to a PostgreSQL store from many processes and SIGKILLs are
   counted by ``benchmarks/store.py``.

Only counts are reported (no timings: they depend on the machine). Usage::

    python benchmarks/faults.py            # full: >= 10,000 round trips and API calls, 100 + 100 kills, 5 sweeps
    python benchmarks/faults.py --quick    # CI scale
    python benchmarks/faults.py --output benchmarks/results/faults.txt
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel.io import append_runs, load_runs
from perfmodel.persistence import load_model, save_model

SRC = str(Path(__file__).resolve().parents[1] / "src")
BASE = {"params": 1000, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu"}


def history(n_models: int = 6, seed: int = 0) -> pd.DataFrame:
    """A generated history (a power law with noise) for exercising the code paths; never saved as data."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(n_models):
        params = int(10 ** rng.uniform(4, 7))
        fps = 6.0 * params * rng.uniform(5, 50)
        for b in (8, 16, 32, 64):
            for n in (1, 2, 4):
                t = 2e-9 * (fps * b) ** 0.9 * n**0.1 * math.exp(rng.normal(0, 0.05))
                rows.append({"model": f"m{m}", "params": params, "flops_per_sample": fps, "batch_size": b,
                             "gpu_count": n, "gpu_type": "A100", "step_time_s": t, "startup_s": 2.0})
    return pd.DataFrame(rows)


def _settings(n: int):
    return settings(max_examples=n, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


# ------------------------------------------------------------------------------------------- round trips
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=16) | st.sampled_from(
    ["1.10", "01234567", "1234e567", "NA", "None", "null", "N/A", "nan", "inf", "TRUE", " x ", "a,b", "q\"", "\r\n",
     "#", "\ufeffbom", "-0", "1e5"])
FLOAT = st.floats(min_value=5e-324, max_value=1e5, allow_nan=False, allow_infinity=False)


def round_trips(n: int, workdir: Path) -> dict:
    stats = {"records": 0, "mismatches": 0, "errors": 0}
    counter = [0]

    @_settings(n)
    @given(suffix=st.sampled_from([".csv", ".parquet", ".db"]), model=TEXT.filter(str.strip), note=TEXT, t=FLOAT,
           startup=st.none() | FLOAT, params=st.integers(1, 10**15), extra=TEXT)
    def one(suffix, model, note, t, startup, params, extra):
        counter[0] += 1
        path = workdir / f"rt{counter[0] // 25}{suffix}"  # 25 appends per file, so each rewrite re-reads others
        rec = {**BASE, "model": model, "sweep_id": note, "family": extra, "step_time_s": t, "startup_s": startup,
               "params": params, "run_id": f"r{counter[0]}"}
        try:
            append_runs(rec, path)
            back = load_runs(path).set_index("run_id").loc[rec["run_id"]]
        except Exception as exc:  # noqa: BLE001 - counted
            stats["errors"] += 1
            print(f"  round trip error: {type(exc).__name__}: {exc}"[:200], file=sys.stderr)
            return
        stats["records"] += 1
        got = (back["model"], back["sweep_id"], back["family"], float(back["step_time_s"]),
               None if pd.isna(back["startup_s"]) else float(back["startup_s"]), int(back["params"]))
        want = (model, note, extra, t, startup, params)
        if got != want:
            stats["mismatches"] += 1
            print(f"  mismatch: sent {want!r}, got {got!r}"[:300], file=sys.stderr)

    one()
    return stats


# ---------------------------------------------------------------------------------------------- SIGKILL
def _append_loop(path: str, tag: str, done) -> None:
    i = 0
    while True:
        append_runs({**BASE, "model": "m", "step_time_s": 0.5, "run_id": f"{tag}-{i}"}, path)
        done.value = i + 1  # only after append_runs returned
        i += 1


def _save_loop(path: str, model, done) -> None:
    i = 0
    while True:
        save_model(model, path)
        done.value = i + 1
        i += 1


def _temps(d: Path) -> list[str]:
    return [p.name for p in d.iterdir() if p.name.endswith(".tmp")]


def kill_trials(n: int, workdir: Path) -> dict:
    ctx = mp.get_context("fork")
    stats = {"append_trials": 0, "store_append_trials": 0, "save_trials": 0, "unloadable": 0, "lost_appends": 0,
             "leftover_temps": 0, "killed_with_temp_present": 0}
    rng = random.Random(0)
    for kind in ("append", "store_append", "save"):
        d = workdir / f"kill-{kind}"
        d.mkdir()
        path = d / {"append": "runs.csv", "store_append": "runs.db", "save": "m.perfmodel"}[kind]
        if kind != "save":
            perfmodel.save_runs(pd.concat([history(40)] * 2, ignore_index=True), path)  # slow enough to hit writes
        model = perfmodel.fit(history(), method="gbm") if kind == "save" else None
        if kind == "save":
            save_model(model, path)
        for trial in range(n):
            done = ctx.Value("i", 0)
            tag = f"k{trial}"
            target = _save_loop if kind == "save" else _append_loop
            proc = ctx.Process(target=target, args=(str(path), model if kind == "save" else tag, done))
            proc.start()
            time.sleep(rng.uniform(0.05, 0.6))
            os.kill(proc.pid, signal.SIGKILL)
            proc.join()
            returned = done.value
            stats["killed_with_temp_present"] += bool(_temps(d))
            try:
                if kind != "save":
                    ids = set(load_runs(path)["run_id"])
                    stats["lost_appends"] += sum(f"{tag}-{i}" not in ids for i in range(returned))
                else:
                    load_model(path)
            except Exception as exc:  # noqa: BLE001 - counted
                stats["unloadable"] += 1
                print(f"  unloadable after kill: {type(exc).__name__}: {exc}"[:200], file=sys.stderr)
            # the next write cleans up what the killed one left
            if kind != "save":
                append_runs({**BASE, "model": "m", "step_time_s": 0.5, "run_id": f"{tag}-after"}, path)
            else:
                save_model(model, path)
            stats["leftover_temps"] += len(_temps(d))
            stats[f"{kind}_trials"] += 1
    return stats


# ---------------------------------------------------------------------------------------- concurrency
def _writer(args):
    path, seed, n = args
    model = perfmodel.fit(history(3, seed=seed), method="loglinear")
    errors = 0
    for _ in range(n):
        try:
            save_model(model, path)
        except Exception:  # noqa: BLE001 - counted
            errors += 1
    return errors


def concurrent(n_per_writer: int, workdir: Path) -> dict:
    path = workdir / "shared.perfmodel"
    _writer((path, 0, 1))
    reads = read_errors = 0
    with mp.get_context("spawn").Pool(4) as pool:
        res = pool.map_async(_writer, [(path, s, n_per_writer) for s in range(4)])
        while not res.ready() or reads < n_per_writer:
            try:
                load_model(path)
            except Exception as exc:  # noqa: BLE001 - counted
                read_errors += 1
                print(f"  read error: {type(exc).__name__}: {exc}"[:200], file=sys.stderr)
            reads += 1
        write_errors = sum(res.get())
    return {"writers": 4, "saves": 4 * n_per_writer, "loads": reads, "save_errors": write_errors,
            "load_errors": read_errors, "leftover_temps": len(_temps(workdir))}


# -------------------------------------------------------------------------------------------- orphans
def orphans(n: int, workdir: Path) -> dict:
    stats = {"group_kills": 0, "orphaned_workers": 0, "resume_refused": 0, "skipped": ""}
    try:
        import torch  # noqa: F401
    except ImportError:
        stats["skipped"] = "torch not installed"
        return stats
    from perfmodel.measure._lifeline import check_stale_workers

    for i in range(n):
        tmp = workdir / f"sweep{i}"
        tmp.mkdir()
        env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": SRC}
        sweep = subprocess.Popen([sys.executable, "-m", "perfmodel", "measure", "--models", "mlp-xs",
                                  "--batch-sizes", "2", "--steps", "200000",  # minutes: killed mid-run
                                  "--output", str(tmp / "runs.csv")], env=env, start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        owner, deadline = None, time.time() + 180
        while owner is None and time.time() < deadline:
            found = list(tmp.glob("perfmodel-run-*/owner.json"))
            if found:
                try:
                    owner = json.loads(found[0].read_text())
                except ValueError:
                    pass
            time.sleep(0.2)
        if owner is None:
            sweep.kill()
            sweep.wait()
            stats["skipped"] = "a sweep did not start its worker within 180 s"
            continue
        time.sleep(2 + i)  # kill at different stages: importing torch, warming up, timing
        os.killpg(sweep.pid, signal.SIGKILL)
        sweep.wait()
        stats["group_kills"] += 1
        gone, deadline = False, time.time() + 20
        while not gone and time.time() < deadline:
            try:
                os.killpg(owner["worker_pgid"], 0)
                time.sleep(0.2)
            except ProcessLookupError:
                gone = True
        if not gone:
            stats["orphaned_workers"] += 1
            os.killpg(owner["worker_pgid"], signal.SIGKILL)
        try:
            check_stale_workers(tmp)
        except Exception:  # noqa: BLE001 - counted
            stats["resume_refused"] += 1
    return stats


# ------------------------------------------------------------------------------------------- API fuzz
ANY = (st.none() | st.booleans() | st.integers(-10, 10**8) | st.integers(-2**70, 2**70)
       | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6)
       | st.sampled_from([1e308, -0.0, 5e-324, 2**53 + 1, "8", "1e3", b"\xff", pd.Timedelta(1, "s")]))
COLUMNS = ["model", "params", "batch_size", "gpu_count", "gpu_type", "step_time_s", "precision", "status",
           "wall_time_s", "steps", "flops_per_sample", "run_id", "startup_s", "gpu_util_mean_pct", "family"]
POS_INT = st.integers(1, 10**6) | st.sampled_from([1, 2, 8, 64, 4096])
POS_FLOAT = st.floats(min_value=1e-6, max_value=1e12) | st.sampled_from([1e-300, 1e15, 1e24])


def mostly(valid, weight: int = 9):
    """Valid values ``weight`` times as often as arbitrary ones, so that many calls get through validation."""
    return st.integers(0, weight).flatmap(lambda k: ANY if k == weight else valid)  # hypothesis favours k=0


GPU = mostly(st.sampled_from(["A100", "A100", "H100", "cpu", "A1000", "", "ü"]))
PREC = mostly(st.sampled_from(["fp32", "fp32", "fp32", "bf16", "FP32", "int8"]))
VALID_COLUMN = {
    "model": st.sampled_from(["m0", "m1", "NA", "1.10"]), "params": POS_INT, "batch_size": POS_INT,
    "gpu_count": st.sampled_from([1, 2, 4]), "gpu_type": st.sampled_from(["A100", "H100", "cpu"]),
    "step_time_s": st.floats(1e-6, 1e5), "precision": st.sampled_from(["fp32", "bf16"]), "status": st.sampled_from(["ok", "oom"]),
    "wall_time_s": st.floats(1e-6, 1e5), "steps": POS_INT, "flops_per_sample": POS_FLOAT, "run_id": st.text(max_size=4),
    "startup_s": st.floats(0, 1e4), "gpu_util_mean_pct": st.floats(0, 100), "family": st.text(max_size=4)}


def _check_frame(out: pd.DataFrame) -> bool:
    v = out[["step_lower", "step_time_s", "step_upper", "lower", "seconds", "upper"]].to_numpy(dtype=float)
    return bool(np.isfinite(v).all() and (v >= 0).all() and (v[:, 0] <= v[:, 1]).all()
                and (v[:, 1] <= v[:, 2]).all() and (v[:, 3] <= v[:, 4]).all() and (v[:, 4] <= v[:, 5]).all())


def api_fuzz(n: int, parts=("load_runs", "predict_training_time", "predict_many")) -> dict:
    stats = {"calls": 0, "documented_errors": 0, "other_exceptions": 0, "bad_results": 0, "ok": 0}
    fitted = {m: perfmodel.fit(history(), method=m) for m in ("loglinear", "gbm", "physics")}
    small = perfmodel.fit(history(1).head(6), method="gbm")
    examples: list[str] = []
    reasons: Counter = Counter()

    def run(fn):
        stats["calls"] += 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                good = fn()
        except (ValueError, TypeError) as exc:
            stats["documented_errors"] += 1
            reasons[f"{fn.__name__}: {type(exc).__name__}: {str(exc)[:70]}"] += 1
            if not str(exc):
                stats["other_exceptions"] += 1
            return
        except Exception as exc:  # noqa: BLE001 - counted
            stats["other_exceptions"] += 1
            if len(examples) < 10:
                examples.append(f"{type(exc).__name__}: {exc}"[:200])
            return
        if good:
            stats["ok"] += 1
        else:
            stats["bad_results"] += 1
            if len(examples) < 10:
                examples.append(f"bad result from {fn.__name__}")

    per = max(1, n // len(parts))

    @_settings(per)
    @given(rows=st.lists(st.fixed_dictionaries(
        {c: mostly(VALID_COLUMN[c], 30) for c in COLUMNS[:6]},
        optional={c: mostly(VALID_COLUMN[c], 30) for c in COLUMNS[6:]}), max_size=5))
    def f_load(rows):
        def load_runs_call():
            runs = load_runs(pd.DataFrame(rows))
            t = runs["step_time_s"].to_numpy(dtype=float)
            return bool(len(runs) and np.isfinite(t).all() and (t > 0).all())
        run(load_runs_call)

    @_settings(per)
    @given(model=st.sampled_from(["m0", "m3", "zz"]) | st.fixed_dictionaries({"params": ANY},
                                                                             optional={"flops_per_sample": ANY})
           | st.fixed_dictionaries({"params": POS_FLOAT}, optional={"flops_per_sample": POS_FLOAT}),
           batch=mostly(POS_INT), count=mostly(st.sampled_from([1, 2, 4, 8, 1000])), steps=mostly(POS_INT),
           epochs=mostly(st.none()), size=mostly(st.none()), conf=mostly(st.floats(0.01, 0.999)), gpu=GPU,
           prec=PREC,
           which=st.sampled_from(["loglinear", "gbm", "physics", "small"]))
    def f_predict(model, batch, count, steps, epochs, size, conf, gpu, prec, which):
        def predict_training_time_call():
            r = perfmodel.predict_training_time(
                model, batch_size=batch, gpu_count=count, gpu_type=gpu, steps=steps, epochs=epochs,
                dataset_size=size, precision=prec, confidence=conf,
                history=small if which == "small" else fitted[which])
            v = [r.step_lower, r.step_seconds, r.step_upper, r.lower, r.seconds, r.upper]
            return bool(np.isfinite(v).all() and min(v) >= 0 and v[0] <= v[1] <= v[2] and v[3] <= v[4] <= v[5])
        run(predict_training_time_call)

    @_settings(per)
    @given(rows=st.lists(st.fixed_dictionaries(
        {"batch_size": mostly(POS_INT, 30), "gpu_type": mostly(st.sampled_from(["A100", "A100", "H100"]), 30),
         "steps": mostly(POS_INT, 30), "params": mostly(POS_FLOAT, 30), "flops_per_sample": mostly(POS_FLOAT, 30),
         "gpu_count": mostly(st.sampled_from([1, 2, 4]), 30), "precision": mostly(st.just("fp32"), 30)}),
        min_size=1, max_size=4),
        conf=mostly(st.floats(0.01, 0.999)), which=st.sampled_from(["loglinear", "gbm", "physics", "small"]))
    def f_many(rows, conf, which):
        def predict_many_call():
            out = perfmodel.predict_many(pd.DataFrame(rows), confidence=conf,
                                         history=small if which == "small" else fitted[which])
            return len(out) == len(rows) and _check_frame(out)
        run(predict_many_call)

    for name, f in (("load_runs", f_load), ("predict_training_time", f_predict), ("predict_many", f_many)):
        if name in parts:
            f()
    stats["examples"] = examples
    stats["top_errors"] = reasons.most_common(8)
    return stats


# ------------------------------------------------------------------------------ integrity (issue 26)
def _random_records(rng: random.Random, n: int, tag: str) -> list[dict]:
    texts = ["nan", "-0", "007", "1e5", "NA", "", "a,b", 'q"', "x\ny", "+1", "ü", "1.50"]
    return [{**BASE, "model": f"m{rng.randrange(5)}", "run_id": f"{tag}-{i}", "step_time_s": rng.uniform(1e-4, 1e3),
             "startup_s": round(rng.uniform(0, 100), rng.randrange(1, 6)), "params": rng.randrange(1, 10**12),
             "note": rng.choice(texts) + rng.choice(["", "z"]), "tag": rng.choice(texts),
             "seq_len": rng.choice([None, 128, 2048])} for i in range(n)]


def _same(got: pd.DataFrame, want: pd.DataFrame) -> bool:
    cols = list(want.columns)
    if list(got["run_id"]) != list(want["run_id"]):
        return False
    a, b = got[cols].astype(object), want[cols].astype(object)
    return all((pd.isna(x) and pd.isna(y)) or x == y for x, y in zip(a.to_numpy().ravel(), b.to_numpy().ravel()))


def cut_trials(n_files: int, workdir: Path) -> dict:
    from perfmodel.exceptions import SchemaError
    from perfmodel.io import read_raw_history, recover_runs, save_runs
    from perfmodel.schema import coerce_dtypes

    rng = random.Random(1)
    st_ = {"cuts": 0, "refused": 0, "loaded_intact": 0, "changed": 0, "tracebacks": 0, "recover_wrong": 0,
           "row_boundary_cuts": 0}
    for k in range(n_files):
        path, cut = workdir / f"h{k}.csv", workdir / f"cut{k}.csv"
        save_runs(pd.DataFrame(_random_records(rng, 6, f"f{k}")), path)
        full = read_raw_history(path)
        data = path.read_bytes()
        # record ends: a line end outside quotes (an even number of '"' before it; quotes in text are doubled)
        quotes = np.cumsum(np.frombuffer(data, dtype=np.uint8) == ord('"'))
        ends = [i + 1 for i in range(len(data)) if data[i:i + 1] == b"\n" and quotes[i] % 2 == 0]
        start = ends[-3]  # the last two rows
        for end in range(start, len(data)):
            cut.write_bytes(data[:end])
            rows_whole = sum(e <= end for e in ends) - 1  # complete rows left
            if end in ends:
                st_["row_boundary_cuts"] += 1  # a valid shorter file: no per-row check can tell
                continue
            st_["cuts"] += 1
            try:
                got = read_raw_history(cut)
            except SchemaError:
                st_["refused"] += 1
                try:
                    good, problems = recover_runs(cut)
                    if not (_same(coerce_dtypes(good), full.head(rows_whole)) and len(problems) == 1):
                        st_["recover_wrong"] += 1
                except Exception as exc:  # noqa: BLE001 - counted
                    st_["tracebacks"] += 1
                    print(f"  recover_runs: {type(exc).__name__}: {exc}"[:200], file=sys.stderr)
                continue
            except Exception as exc:  # noqa: BLE001 - counted
                st_["tracebacks"] += 1
                print(f"  cut load: {type(exc).__name__}: {exc}"[:200], file=sys.stderr)
                continue
            if _same(got, full.head(len(got))) and len(got) in (rows_whole, rows_whole + 1):
                st_["loaded_intact"] += 1
            else:
                st_["changed"] += 1
                print(f"  cut at byte {end} of {path.name} loaded changed values", file=sys.stderr)
    return st_


def _link_appender(link: str, tag: str, n: int) -> None:
    for i in range(n):
        append_runs({**BASE, "model": "m", "step_time_s": 0.5, "run_id": f"{tag}-{i}"}, link)


def symlink_trials(n: int, workdir: Path) -> dict:
    ctx = mp.get_context("fork")
    st_ = {"appends": 0, "lost": 0, "links_replaced": 0}
    for suffix in (".csv", ".parquet", ".db"):
        real = workdir / "shared" / f"runs{suffix}"
        real.parent.mkdir(exist_ok=True)
        append_runs({**BASE, "model": "m", "step_time_s": 0.5, "run_id": "seed"}, real)
        links = []
        for j in range(2):
            link = workdir / f"link{j}{suffix}"
            link.symlink_to(real)
            links.append(link)
        targets = [str(links[0]), str(links[1]), str(real), str(links[0])]
        procs = [ctx.Process(target=_link_appender, args=(t, f"p{j}", n)) for j, t in enumerate(targets)]
        for p_ in procs:
            p_.start()
        for p_ in procs:
            p_.join()
        ids = set(load_runs(real)["run_id"])
        st_["appends"] += len(targets) * n
        st_["lost"] += sum(f"p{j}-{i}" not in ids for j in range(len(targets)) for i in range(n))
        st_["links_replaced"] += sum(not link.is_symlink() for link in links)
    return st_


def unknown_text_trials(n: int, workdir: Path) -> dict:
    from perfmodel.io import read_raw_history

    rng = random.Random(2)
    st_ = {"values": 0, "changed": 0, "errors": 0}
    for suffix in (".csv", ".parquet", ".db"):
        path = workdir / f"text{suffix}"
        sent: dict = {}
        for i in range(n):
            recs = _random_records(rng, 3, f"t{i}")
            try:
                append_runs(recs, path)
            except Exception as exc:  # noqa: BLE001 - counted
                st_["errors"] += 1
                print(f"  unknown text append: {type(exc).__name__}: {exc}"[:200], file=sys.stderr)
                continue
            for r in recs:
                sent[r["run_id"]] = (r["note"], r["tag"])
        back = read_raw_history(path).set_index("run_id")
        for rid, (note, tag) in sent.items():
            for want, got in ((note, back.at[rid, "note"]), (tag, back.at[rid, "tag"])):
                st_["values"] += 1
                # CSV keeps empty and missing alike (documented); anything else must come back as written
                empty_ok = suffix == ".csv" and want == "" and (pd.isna(got) or got == "")
                if not (empty_ok or (not pd.isna(got) and got == want)):
                    st_["changed"] += 1
                    print(f"  unknown column: sent {want!r}, got {got!r} ({suffix})", file=sys.stderr)
    return st_


def break_trials(workdir: Path) -> dict:
    """The probe's three breaks (issue 38) on CSV, Parquet and a SQLite store; every count must be 0."""
    from perfmodel.exceptions import SchemaError
    from perfmodel.io import read_raw_history, recover_runs

    st_ = {"histories": 0, "long_field_failures": 0, "values_changed": 0, "type_change_not_refused": 0,
           "models_written_over_a_history": 0}
    long = "traceback line\n" * 20_000  # 300 KB, over the csv module's 128 KiB field limit
    model = perfmodel.fit(history(3), method="loglinear")
    for suffix in (".csv", ".parquet", ".db"):
        st_["histories"] += 1
        path = workdir / f"breaks{suffix}"
        try:  # 1. a long text field: load, append, recover all keep working
            append_runs({**BASE, "model": "m", "step_time_s": 0.5, "status": "error", "error": long, "run_id": "e"},
                        path)
            append_runs({**BASE, "model": "m", "step_time_s": 0.5, "run_id": "after"}, path)
            ok = read_raw_history(path).set_index("run_id").at["e", "error"] == long
            ok &= len(load_runs(path)) == 1 and len(recover_runs(path)[0]) == 2
            st_["long_field_failures"] += not ok
        except Exception as exc:  # noqa: BLE001 - counted
            st_["long_field_failures"] += 1
            print(f"  long field ({suffix}): {type(exc).__name__}: {exc}"[:200], file=sys.stderr)
        path = workdir / f"types{suffix}"  # 2. an unknown column that turns from int to float
        append_runs([{**BASE, "model": "m", "step_time_s": 0.5, "run_id": "a", "n": 1},
                     {**BASE, "model": "m", "step_time_s": 0.5, "run_id": "b", "n": 2**60 + 1}], path)
        try:
            append_runs({**BASE, "model": "m", "step_time_s": 0.5, "run_id": "c", "n": 1.5}, path)
        except SchemaError:
            st_["type_change_not_refused"] += suffix != ".parquet"  # Parquet keeps one type per column
        else:
            st_["type_change_not_refused"] += suffix == ".parquet"
        back = read_raw_history(path).set_index("run_id")["n"]
        want = {"a": "1", "b": str(2**60 + 1)} if suffix == ".csv" else {"a": 1, "b": 2**60 + 1}
        got = {k: back[k].item() if isinstance(back[k], np.generic) else back[k] for k in want}  # NumPy scalars
        st_["values_changed"] += sum(got[k] != v or type(got[k]) is not type(v) for k, v in want.items())
        before = path.read_bytes()  # 3. a model saved over the history
        try:
            perfmodel.save_model(model, path)
        except ValueError:
            pass
        cli = subprocess.run([sys.executable, "-m", "perfmodel", "fit", str(path), "-o", str(path)],
                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=600)
        st_["models_written_over_a_history"] += (path.read_bytes() != before) + (cli.returncode == 0)
    return st_


def range_trials() -> dict:
    from perfmodel.exceptions import SchemaError
    from perfmodel.schema import COLUMNS as SCHEMA
    from perfmodel.schema import LIMITS

    st_ = {"columns": 0, "values": 0, "accepted": 0, "wrong_error": 0, "unnamed": 0, "no_range": 0}
    for c in SCHEMA:
        if c.kind == "str":
            continue
        st_["columns"] += 1
        if c.name not in LIMITS:
            st_["no_range"] += 1
            continue
        lo, inclusive, hi = LIMITS[c.name]
        bad = [math.inf, -math.inf, -1e308, -3, hi * 10] + ([] if inclusive else [lo]) + ([lo - 1] if inclusive else [])
        if c.kind == "int" and hi <= 1:
            bad += [7, 2]
        for v in bad:
            st_["values"] += 1
            row = {**BASE, "model": "m", "step_time_s": 0.5, c.name: v}
            try:
                load_runs(pd.DataFrame([row]))
            except SchemaError as exc:
                st_["unnamed"] += repr(c.name) not in str(exc)
                continue
            except Exception as exc:  # noqa: BLE001 - counted
                st_["wrong_error"] += 1
                print(f"  range {c.name}={v!r}: {type(exc).__name__}: {exc}"[:200], file=sys.stderr)
                continue
            st_["accepted"] += 1
            print(f"  range {c.name}={v!r} accepted", file=sys.stderr)
    return st_


def _parquet_rewriter(path: str, stop) -> None:
    r = np.random.default_rng(0)
    while not stop.is_set():
        k = int(r.integers(1, 400))
        perfmodel.save_runs(pd.DataFrame([{**BASE, "model": "m", "step_time_s": 0.5,
                                           "note": "x" * int(r.integers(1, 50))}] * k), path)


def parquet_race(seconds: float, workdir: Path) -> dict:
    from perfmodel.io import read_raw_history

    path = workdir / "race.parquet"
    perfmodel.save_runs(pd.DataFrame([{**BASE, "model": "m", "step_time_s": 0.5}]), path)
    ctx = mp.get_context("fork")
    stop = ctx.Event()
    writer = ctx.Process(target=_parquet_rewriter, args=(str(path), stop))
    writer.start()
    reads = errors = 0
    deadline = time.time() + seconds
    try:
        while time.time() < deadline:
            try:
                read_raw_history(path)
            except Exception as exc:  # noqa: BLE001 - counted
                errors += 1
                print(f"  parquet read: {type(exc).__name__}: {exc}"[:200], file=sys.stderr)
            reads += 1
    finally:
        stop.set()
        writer.join(30)
    return {"reads": reads, "errors": errors}


_LOAD_ONE = """
import resource, sys, time
from perfmodel.persistence import load_model
t = time.process_time()
try:
    load_model(sys.argv[1])
    what = "loaded"
except ValueError as exc:
    what = "refused"
print(what, time.process_time() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def _zip_member_stream(zf, name: str, header: bytes, chunks) -> None:
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    with zf.open(info, "w", force_zip64=True) as fh:
        fh.write(header)
        for c in chunks:
            fh.write(c)


def model_file_trials(scale: int, workdir: Path) -> dict:
    """Attack files built from a real model file; each is loaded in a fresh process (CPU time, peak RSS)."""
    global zipfile
    import zipfile

    base = workdir / "base.perfmodel"
    save_model(perfmodel.fit(history(3), method="loglinear"), base)
    with zipfile.ZipFile(base) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    meta = json.loads(str(np.load(__import__("io").BytesIO(members["__meta__.npy"]))[()]))

    def npy_header(descr: str, shape) -> bytes:
        buf = __import__("io").BytesIO()
        np.lib.format.write_array_header_2_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
        return buf.getvalue()

    def write(name: str, meta_text=None, extra=()) -> Path:
        out = workdir / name
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
            for n, data in members.items():
                if n == "__meta__.npy" and meta_text is not None:
                    if isinstance(meta_text, str):
                        buf = __import__("io").BytesIO()
                        np.save(buf, np.array(meta_text))
                        zf.writestr(n, buf.getvalue())
                    else:  # (n_chars, chunk generator): streamed, never held in memory
                        n_chars, gen = meta_text
                        _zip_member_stream(zf, n, npy_header(f"<U{n_chars}", ()), gen)
                    continue
                zf.writestr(n, data)
            for n, header, gen in extra:
                _zip_member_stream(zf, n, header, gen)
        return out

    n_list = scale  # characters of the JSON list
    prefix = json.dumps(meta)[:-1] + ', "junk": ['
    body = n_list - len(prefix) - 2

    def list_chunks():
        yield prefix.encode("utf-32-le")
        left = body // 2
        piece = ("0," * 65536).encode("utf-32-le")
        while left > 65536:
            yield piece
            left -= 65536
        yield ("0," * left + "0" * (body - 2 * (body // 2)) + "0]}").encode("utf-32-le")

    big_array = scale * 4  # bytes of a declared float64 array, zeros, in a small file
    meta2 = json.loads(json.dumps(meta))
    meta2["model"]["state"]["n_runs_"] = {"__array__": "a9999"}
    zeros = bytes(1 << 20)

    def zero_chunks():
        left = big_array
        while left > 0:
            yield zeros[:min(len(zeros), left)]
            left -= len(zeros)

    attacks = {
        "huge JSON list": write("list.perfmodel", (n_list + 1, list_chunks())),
        "deep nesting": write("deep.perfmodel", '{"format": "perfmodel-safe/1", "model": ' + "[" * 10**6
                              + "]" * 10**6 + "}"),
        "large declared array": write("array.perfmodel", json.dumps(meta2),
                                      [("a9999.npy", npy_header("<f8", (big_array // 8,)), zero_chunks())]),
    }
    st_ = {"files": 0, "tracebacks": 0, "over_cpu_budget": 0, "over_memory_budget": 0, "details": []}
    baseline = None
    for label, path in [("real model", base)] + list(attacks.items()):
        out = subprocess.run([sys.executable, "-c", _LOAD_ONE, str(path)], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": SRC}, timeout=900)
        st_["files"] += 1
        if out.returncode != 0 or not out.stdout.strip():
            st_["tracebacks"] += 1
            print(f"  model file {label}: {out.stderr[-300:]}", file=sys.stderr)
            continue
        what, cpu, rss = out.stdout.split()
        cpu, rss = float(cpu), int(rss)
        if baseline is None:
            baseline = rss
        # budget: 10 s of CPU, and memory of the process that loads a real model plus 1.25x what the file's
        # arrays declare (the large declared array is within the default max_bytes and is read, once)
        allowed = baseline + 1.25 * (big_array if label == "large declared array" else 0) + 64 * 2**20
        st_["over_cpu_budget"] += cpu > 10
        st_["over_memory_budget"] += rss > allowed
        st_["details"].append(f"{label} ({path.stat().st_size / 2**20:.1f} MiB file): {what}, "
                              f"{cpu:.1f} s CPU, peak {rss / 2**20:.0f} MiB")
    return st_


def no_pyarrow() -> dict:
    code = """
import sys, tempfile, os
sys.modules["pyarrow"] = None
import perfmodel
from perfmodel.io import append_runs, load_runs
d = tempfile.mkdtemp()
rec = {"model": "m", "params": 1000, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu", "step_time_s": 0.5}
append_runs(rec, os.path.join(d, "r.csv")); assert len(load_runs(os.path.join(d, "r.csv"))) == 1
try:
    append_runs(rec, os.path.join(d, "r.parquet"))
except ImportError as exc:
    assert 'pip install "perfmodel[parquet]"' in str(exc)
    print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": SRC}, timeout=300)
    return {"failures": int(out.stdout.strip() != "ok")}


# ----------------------------------------------------------------------------------------------- main
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="CI scale (hundreds instead of tens of thousands)")
    p.add_argument("--output", help="also write the report to this file")
    p.add_argument("--skip", default="", help="comma-separated parts to skip: "
                   "roundtrip,kill,concurrent,orphans,api,integrity,inputs")
    p.add_argument("--api-functions", default="load_runs,predict_training_time,predict_many",
                   help="which public functions the API fuzz calls (its calls are split evenly between them)")
    args = p.parse_args(argv)
    q = args.quick
    skip = set(filter(None, args.skip.split(",")))
    sizes = {"roundtrip": 300 if q else 10_000, "kill": 10 if q else 100, "concurrent": 10 if q else 60,
             "orphans": 1 if q else 5, "api": 600 if q else 10_500, "cut": 4 if q else 40,
             "link": 10 if q else 50, "text": 10 if q else 100, "race_s": 5 if q else 30,
             "model_scale": 2**25 if q else 2**28}  # the full run: the 268M-character list, a 1 GiB array
    lines = [f"perfmodel {perfmodel.__version__} fault benchmark ({'quick' if q else 'full'}), "
             f"python {sys.version.split()[0]}, {sys.platform}"]

    def report(text):
        print(text, flush=True)
        lines.append(text)

    with tempfile.TemporaryDirectory(prefix="perfmodel-faults-") as tmp:
        work = Path(tmp)
        if "roundtrip" not in skip:
            (work / "rt").mkdir()
            s = round_trips(sizes["roundtrip"], work / "rt")
            report(f"round trips (CSV + Parquet + SQLite store, hypothesis): {s['records']} records appended and loaded back, "
                   f"{s['mismatches']} mismatches, {s['errors']} errors")
        if "kill" not in skip:
            s = kill_trials(sizes["kill"], work)
            report(f"SIGKILL trials: {s['append_trials']} CSV appends + {s['store_append_trials']} store appends + "
                   f"{s['save_trials']} saves killed "
                   f"({s['killed_with_temp_present']} left a temp file at the kill); {s['unloadable']} unloadable "
                   f"files, {s['lost_appends']} lost returned appends, {s['leftover_temps']} temp files left after "
                   "the next write")
        if "concurrent" not in skip:
            (work / "cc").mkdir()
            s = concurrent(sizes["concurrent"], work / "cc")
            report(f"concurrent save/load: {s['writers']} writers x {s['saves'] // s['writers']} saves + 1 reader "
                   f"({s['loads']} loads) = {s['saves'] + s['loads']} operations; {s['save_errors']} save errors, "
                   f"{s['load_errors']} load errors, {s['leftover_temps']} temp files left")
        if "orphans" not in skip:
            s = orphans(sizes["orphans"], work)
            extra = f" (skipped: {s['skipped']})" if s["skipped"] else ""
            report(f"process-group kills of a measuring sweep: {s['group_kills']}; orphaned workers "
                   f"{s['orphaned_workers']}; resumes refused afterwards {s['resume_refused']}{extra}")
        if "integrity" not in skip:
            (work / "cut").mkdir()
            s = cut_trials(sizes["cut"], work / "cut")
            report(f"cut histories (every cut inside the last 2 rows of {sizes['cut']} sealed CSV files): {s['cuts']} "
                   f"cuts, {s['refused']} refused, {s['loaded_intact']} loaded with every value intact; {s['changed']} "
                   f"loaded changed values, {s['tracebacks']} tracebacks, {s['recover_wrong']} recover_runs results "
                   f"not exactly the whole rows ({s['row_boundary_cuts']} cuts at a row boundary left a valid "
                   "shorter file, not counted)")
            (work / "link").mkdir()
            s = symlink_trials(sizes["link"], work / "link")
            report(f"appends through symbolic links (CSV + Parquet + SQLite store, 4 processes, 2 links + the real "
                   "path): "
                   f"{s['appends']} appends, {s['lost']} lost, {s['links_replaced']} links replaced by a copy")
            (work / "text").mkdir()
            s = unknown_text_trials(sizes["text"], work / "text")
            report(f"unknown text columns (CSV + Parquet + SQLite store, appended and re-appended): {s['values']} values, "
                   f"{s['changed']} changed, {s['errors']} errors")
            (work / "breaks").mkdir()
            s = break_trials(work / "breaks")
            report(f"the probe's three breaks (CSV, Parquet, SQLite store): {s['histories']} histories; "
                   f"{s['long_field_failures']} failing on a 300 KB field, {s['values_changed']} earlier values "
                   f"changed by an int->float append, {s['type_change_not_refused']} wrong refusals, "
                   f"{s['models_written_over_a_history']} models written over a history (API + CLI)")
            s = range_trials()
            report(f"schema ranges: {s['columns']} numeric columns, {s['no_range']} without a documented range; "
                   f"{s['values']} out-of-range values, {s['accepted']} accepted, {s['wrong_error']} not a "
                   f"SchemaError, {s['unnamed']} errors not naming the column")
            (work / "race").mkdir()
            s = parquet_race(sizes["race_s"], work / "race")
            report(f"Parquet reads during rewrites by another process: {s['reads']} reads, {s['errors']} errors")
            (work / "model").mkdir()
            s = model_file_trials(sizes["model_scale"], work / "model")
            report(f"model files (each loaded in a fresh process): {s['files']} files, {s['tracebacks']} tracebacks, "
                   f"{s['over_cpu_budget']} over 10 s CPU, {s['over_memory_budget']} over the memory budget")
            for d in s["details"]:
                report(f"  {d}")
            s = no_pyarrow()
            report(f"without pyarrow: CSV append/load and the Parquet error message, {s['failures']} failures")
        if "inputs" not in skip:
            import faults_inputs

            t0 = time.perf_counter()
            counts = faults_inputs.run_all()
            for text in faults_inputs.report_lines(counts, time.perf_counter() - t0):
                report(text)
        if "api" not in skip:
            funcs = tuple(filter(None, args.api_functions.split(",")))
            s = api_fuzz(sizes["api"] * len(funcs) // 3, funcs)
            report(f"public API fuzz (hypothesis; {', '.join(funcs)}): {s['calls']} calls, "
                   f"{s['ok']} returned, {s['documented_errors']} ValueError/TypeError, {s['other_exceptions']} other "
                   f"exceptions, {s['bad_results']} NaN/inf/negative/inverted results")
            for e in s["examples"]:
                report(f"  e.g. {e}")
            report("  most frequent documented errors (by message prefix):")
            for msg, k in s["top_errors"]:
                report(f"    {k:>5}  {msg}")
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
