"""History stores (issue 38): SQLite and a real PostgreSQL server started here (benchmarks/pg_server.py; skipped,
with the reason, where none can start), the CSV/Parquet import and export, the three breaks of the file history
closed, and every writer reaching a store."""

from __future__ import annotations

import importlib.util
import json
import multiprocessing as mp
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel import io
from perfmodel.exceptions import NotAModelFileError, SchemaError
from perfmodel.history import read_history
from perfmodel.store import SCHEMA_VERSION, default_store, is_store, open_store

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("pg_server", ROOT / "benchmarks" / "pg_server.py")
pg_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pg_server)

BASE = {"model": "m", "params": 1000, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu", "step_time_s": 0.5}


def rec(**kw) -> dict:
    return {**BASE, "run_id": uuid.uuid4().hex[:12], **kw}


@pytest.fixture(scope="session")
def pg_url():
    try:
        url, stop = pg_server.start()
    except pg_server.Unavailable as exc:
        pytest.skip(f"no PostgreSQL server could start here: {exc}")
    yield url
    stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request, tmp_path):
    """A new, empty store of each kind: a SQLite file, or a fresh database on the test server."""
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    url = request.getfixturevalue("pg_url")
    return pg_server.fresh_database(url, f"t{uuid.uuid4().hex[:10]}")


class TestRoundTrip:
    def test_known_columns_come_back_exactly(self, target):
        runs = [rec(step_time_s=0.1 + 1e-17 * i, params=10**15 - i, model=name, error=text)
                for i, (name, text) in enumerate([("a,b", 'q"x'), ("NA", "line\nbreak"), ("ü", ""), ("1.10", None)])]
        io.append_runs(runs, target)
        back = io.load_runs(target, include_failed=True)
        assert list(back["model"]) == ["a,b", "NA", "ü", "1.10"]
        assert list(back["params"]) == [10**15 - i for i in range(4)]
        assert list(back["step_time_s"]) == [r["step_time_s"] for r in runs]
        assert back["error"].tolist()[:3] == ['q"x', "line\nbreak", ""] and pd.isna(back["error"].iloc[3])

    def test_unknown_fields_keep_their_type_and_value(self, target):
        # break 2: an unknown column that turns from int to float must not change the earlier rows
        io.append_runs(rec(note=1, big=2**60 + 1, flag=True, raw=b"\x00\xff", text="007"), target)
        io.append_runs(rec(note=1.5, big=2.5, flag=False, text="-0"), target)
        io.append_runs(rec(note="x", huge=2**70), target)
        back = io.read_raw_history(target)
        assert [type(v) for v in back["note"]] == [int, float, str] and back["note"].tolist() == [1, 1.5, "x"]
        assert back["big"].iloc[0] == 2**60 + 1 and isinstance(back["big"].iloc[0], int)
        assert back["flag"].tolist()[:2] == [True, False]
        assert back["raw"].iloc[0] == b"\x00\xff" and back["huge"].iloc[2] == 2**70
        assert back["text"].tolist()[:2] == ["007", "-0"]

    def test_a_long_text_field_is_stored_and_read(self, target):
        # break 1: a field over 128 KiB (a long error text)
        long = "traceback line\n" * 100_000
        io.append_runs(rec(status="error", error=long), target)
        io.append_runs(rec(), target)
        assert io.read_raw_history(target)["error"].iloc[0] == long
        good, problems = io.recover_runs(target)
        assert len(good) == 2 and problems == []

    def test_values_a_history_cannot_keep_are_refused_by_name(self, target):
        with pytest.raises(SchemaError, match="'when'"):
            io.append_runs(rec(when=[1, 2]), target)
        with pytest.raises(SchemaError, match="'step_time_s'"):
            io.append_runs(rec(step_time_s=-1.0), target)
        with pytest.raises(FileNotFoundError):
            io.read_raw_history(target)  # nothing was written: the store was never created


class TestStoreInterface:
    def test_filters_count_and_digest(self, target):
        store = open_store(target)
        with store:
            store.append([rec(gpu_type="cpu", batch_size=b) for b in (8, 16)] + [rec(gpu_type="A100")])
            first = store.digest()
            assert store.count() == 3 and store.count({"gpu_type": "cpu"}) == 2
            assert store.count({"batch_size": [16, 99]}) == 1
            assert list(store.read(where={"gpu_type": "A100-SXM4-80GB"})["gpu_type"]) == ["A100-SXM4-80GB"]
            assert store.digest() == first  # reading changes nothing
            runs, digest = store.snapshot()
            assert digest == first and len(runs) == 3
            store.append(rec())
            assert store.digest() != first
            with pytest.raises(ValueError, match="not a schema column"):
                store.count({"note": 1})

    def test_history_digest_comes_from_the_store(self, target):
        io.append_runs([rec(batch_size=b) for b in (8, 16)], target)
        loaded = read_history(target)
        with open_store(target) as store:
            assert store.info()["runs"] == 2
            assert loaded.labels == [store.label]
        again = read_history(target)
        assert again.digest == loaded.digest
        io.append_runs(rec(), target)
        assert read_history(target).digest != loaded.digest

    def test_append_new_skips_keys_already_stored(self, target):
        assert io.append_new_runs([rec(source_id="a"), rec(source_id="b"), rec(source_id="a")], target) == (2, 1)
        assert io.append_new_runs([rec(source_id="b"), rec(source_id="c")], target) == (1, 1)
        assert sorted(io.read_raw_history(target)["source_id"]) == ["a", "b", "c"]

    def test_save_runs_replaces_the_runs(self, target):
        io.append_runs([rec(), rec()], target)
        io.save_runs(pd.DataFrame([rec(note="only")]), target)
        back = io.read_raw_history(target)
        assert len(back) == 1 and back["note"].iloc[0] == "only"

    def test_steps_are_kept_in_the_store(self, target):
        with open_store(target) as store:
            store.append(rec(run_id="r1"))
            store.append_steps("r1", [0.1, 0.2])
            assert store.read_steps() == {"r1": [0.1, 0.2]}


class TestSQLiteFile:
    def test_a_change_by_hand_changes_the_digest(self, tmp_path):
        path = tmp_path / "runs.db"
        io.append_runs([rec(), rec()], path)
        before = open_store(path).digest()
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE perfmodel_runs SET step_time_s = 0.25 WHERE seq = 1")
        assert open_store(path).digest() != before

    def test_not_a_history_is_refused_with_a_sentence(self, tmp_path):
        junk = tmp_path / "junk.db"
        junk.write_bytes(b"not a database" * 100)
        with pytest.raises(SchemaError, match="junk.db"):
            io.load_runs(junk)
        other = tmp_path / "mlflow.db"
        with sqlite3.connect(other) as conn:
            conn.execute("CREATE TABLE experiments (id INTEGER)")
        with pytest.raises(SchemaError, match="not a perfmodel run history"):
            io.append_runs(rec(), other)
        with pytest.raises(FileNotFoundError):
            io.load_runs(tmp_path / "missing.db")

    def test_a_newer_layout_is_refused(self, tmp_path):
        path = tmp_path / "runs.db"
        io.append_runs(rec(), path)
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE perfmodel_meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
        with pytest.raises(SchemaError, match="newer perfmodel"):
            io.load_runs(path)

    def test_migration_adds_a_new_schema_column_and_moves_its_values(self, tmp_path):
        # a store written before 'seq_len' was a schema column kept it in the JSON of unknown fields
        path = tmp_path / "runs.db"
        io.append_runs([rec(run_id="a"), rec(run_id="b")], path)
        with sqlite3.connect(path) as conn:
            conn.execute('ALTER TABLE perfmodel_runs DROP COLUMN "seq_len"')
            conn.execute("""UPDATE perfmodel_runs SET extra = '{"seq_len":2048,"note":"x"}' WHERE run_id = 'a'""")
            conn.execute("INSERT INTO perfmodel_columns (name) VALUES ('seq_len'), ('note')")
        old = io.read_raw_history(path)
        assert old["seq_len"].tolist()[0] == 2048 and old["note"].iloc[0] == "x"
        notes = open_store(path).migrate()
        assert notes == ["added column 'seq_len' (moved 1 values out of extra)"]
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT seq_len, extra FROM perfmodel_runs WHERE run_id = 'a'").fetchone() == \
                (2048, '{"note":"x"}')
        new = io.read_raw_history(path)
        assert new["seq_len"].tolist()[0] == 2048 and new["note"].iloc[0] == "x"
        assert open_store(path).migrate() == []

    def test_urls_and_the_default_store(self, tmp_path, monkeypatch):
        io.append_runs(rec(), f"sqlite:///{tmp_path}/u.db")
        assert len(io.load_runs(tmp_path / "u.db")) == 1
        monkeypatch.setenv("PERFMODEL_HISTORY", str(tmp_path / "mine.db"))
        assert default_store() == str(tmp_path / "mine.db") and is_store("default")
        io.append_runs(rec(), "default")
        assert len(io.load_runs(tmp_path / "mine.db")) == 1

    def test_readers_do_not_wait_for_a_writer(self, tmp_path):
        path = tmp_path / "runs.db"
        io.append_runs(rec(), path)
        writer = sqlite3.connect(path, isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")  # a writer holding the write lock, mid-transaction
        writer.execute("INSERT INTO perfmodel_runs (model) VALUES ('half')")
        try:
            t = time.perf_counter()
            assert len(io.read_raw_history(path)) == 1  # the committed run, at once
            assert time.perf_counter() - t < 5
        finally:
            writer.execute("ROLLBACK")
            writer.close()


class TestImportExport:
    def test_export_is_plain_and_reimports_exactly(self, target, tmp_path):
        io.append_runs([rec(step_time_s=0.1 + 1e-17, note="007", n=3, error='a "b", c'), rec(n=4)], target)
        out = tmp_path / "out.csv"
        assert io.export_history(target, out) == 2
        header = out.read_text().splitlines()[0]
        assert "row_crc32" not in header
        edited = pd.read_csv(out)  # a user's own round trip through pandas loads
        edited.to_csv(tmp_path / "edited.csv", index=False)
        assert len(io.load_runs(tmp_path / "edited.csv")) == 2
        again = tmp_path / "again.db"
        assert io.import_history(out, again) == (2, 0)
        assert io.import_history(out, again) == (0, 2)  # each run_id once
        a, b = io.read_raw_history(target), io.read_raw_history(again)
        pd.testing.assert_frame_equal(a, b)
        with pytest.raises(FileExistsError, match="force"):
            io.export_history(target, out)
        io.export_history(target, tmp_path / "out.parquet")
        pd.testing.assert_frame_equal(io.read_raw_history(tmp_path / "out.parquet")[list(a.columns)], a,
                                      check_dtype=False)

    def test_a_csv_history_of_an_earlier_version_moves_into_a_store_and_back(self, tmp_path):
        legacy = tmp_path / "old.csv"
        io.save_runs(pd.DataFrame([rec(note="x"), rec(note="y")]), legacy)  # sealed with row_crc32 as before
        assert "row_crc32" in legacy.read_text().splitlines()[0]
        store = tmp_path / "runs.db"
        assert io.import_history([legacy], store) == (2, 0)
        io.export_history(store, tmp_path / "back.csv")
        pd.testing.assert_frame_equal(io.read_raw_history(legacy), io.read_raw_history(tmp_path / "back.csv"))

    def test_rows_repeating_a_run_id_in_one_file_are_all_imported(self, tmp_path):
        src = tmp_path / "dup.csv"
        pd.DataFrame([{**BASE, "run_id": "x"}, {**BASE, "run_id": "x", "step_time_s": 0.7}]).to_csv(src, index=False)
        assert io.import_history(src, tmp_path / "runs.db") == (2, 0)


class TestFileHistoryBreaksClosed:
    def test_csv_keeps_a_field_over_128_kib(self, tmp_path):
        path = tmp_path / "runs.csv"
        long = "x" * 300_000
        io.append_runs(rec(status="error", error=long), path)
        io.append_runs(rec(), path)
        assert io.read_raw_history(path)["error"].iloc[0] == long
        good, problems = io.recover_runs(path)
        assert len(good) == 2 and problems == []

    def test_csv_append_does_not_rewrite_earlier_values_of_an_unknown_column(self, tmp_path):
        path = tmp_path / "runs.csv"
        io.append_runs([rec(note=1), rec(note=2**60 + 1)], path)
        io.append_runs(rec(note=1.5), path)
        text = path.read_text()
        assert "1152921504606846977" in text and "1152921504606846976" not in text
        assert io.read_raw_history(path)["note"].tolist() == ["1", "1152921504606846977", "1.5"]

    def test_parquet_refuses_to_turn_stored_integers_into_floats(self, tmp_path):
        path = tmp_path / "runs.parquet"
        io.append_runs(rec(note=2**60 + 1), path)
        with pytest.raises(SchemaError, match="'note'.*integers and floats|'note'.*floats and integers"):
            io.append_runs(rec(note=1.5), path)
        assert io.read_raw_history(path)["note"].tolist() == [2**60 + 1]

    @pytest.mark.parametrize("existing", ["runs.csv", "runs.db", "other.csv"])
    def test_no_model_is_written_over_a_history_without_force(self, tmp_path, history, existing):
        path = tmp_path / existing
        io.save_runs(history, path)
        before = path.read_bytes()
        model = perfmodel.fit(history, method="loglinear")
        with pytest.raises(NotAModelFileError, match="force"):
            perfmodel.save_model(model, path)
        assert path.read_bytes() == before
        perfmodel.save_model(model, tmp_path / "m.perfmodel")
        perfmodel.save_model(model, tmp_path / "m.perfmodel")  # a model file is replaced as before
        perfmodel.save_model(model, path, force=True)
        assert perfmodel.load_model(path).method == "loglinear"

    def test_cli_fit_over_its_own_history_is_refused(self, tmp_path, history):
        path = tmp_path / "runs.csv"
        io.save_runs(history, path)
        before = path.read_bytes()
        out = _cli("fit", str(path), "-o", str(path), "--method", "loglinear")
        assert out.returncode == 2 and "--force" in out.stderr and out.stderr.count("\n") == 1
        assert path.read_bytes() == before
        other = tmp_path / "notes.txt"
        other.write_text("mine")
        assert _cli("fit", str(path), "-o", str(other), "--method", "loglinear").returncode == 2
        assert _cli("fit", str(path), "-o", str(other), "--method", "loglinear", "--force").returncode == 0


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "perfmodel", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=600)


class TestCLI:
    def test_history_commands(self, tmp_path, history):
        csv = tmp_path / "old.csv"
        io.save_runs(history, csv)
        store = tmp_path / "runs.db"
        out = _cli("history", "import", str(csv), "--into", str(store))
        assert out.returncode == 0 and f"imported {len(history)} runs" in out.stdout, out.stderr
        info = _cli("history", "info", str(store))
        assert f"runs: {len(history)}" in info.stdout and "kind: sqlite" in info.stdout
        assert _cli("history", "export", str(store), "-o", str(tmp_path / "x.csv")).returncode == 0
        again = _cli("history", "export", str(store), "-o", str(tmp_path / "x.csv"))
        assert again.returncode == 2 and "--force" in again.stderr
        assert "up to date" in _cli("history", "migrate", str(store)).stdout
        pred = _cli("predict", "--model", "m0", "--batch-size", "16", "--gpu-type", "A100", "--steps", "100",
                    "--history", str(store), "--method", "loglinear", "--json")
        assert pred.returncode == 0, pred.stderr
        assert json.loads(pred.stdout)["provenance"] == [str(store)]

    def test_the_default_store_without_o(self, tmp_path, history):
        csv = tmp_path / "old.csv"
        io.save_runs(history, csv)
        env = {"PERFMODEL_HISTORY": str(tmp_path / "team.db")}
        assert _cli("history", "import", str(csv), env=env).returncode == 0
        info = _cli("history", "info", env=env)
        assert str(tmp_path / "team.db") in info.stdout and f"runs: {len(history)}" in info.stdout

    def test_fit_leaves_out_runs_flagged_noisy(self, tmp_path, history):
        flagged = history.assign(timing_flag=[""] * (len(history) - 3) + ["high_step_cv"] * 3)
        path = tmp_path / "runs.db"
        io.append_runs(flagged, path)
        out = _cli("fit", str(path), "-o", str(tmp_path / "m.perfmodel"), "--method", "loglinear")
        assert out.returncode == 0 and "left out 3 of 96 runs flagged as noisy" in out.stderr
        assert perfmodel.load_model(tmp_path / "m.perfmodel").n_runs_ == len(history) - 3
        kept = _cli("fit", str(path), "-o", str(tmp_path / "k.perfmodel"), "--method", "loglinear", "--keep-noisy")
        assert kept.returncode == 0 and "noisy" not in kept.stderr
        assert perfmodel.load_model(tmp_path / "k.perfmodel").n_runs_ == len(history)

    def test_an_unreachable_server_is_one_line(self):
        out = _cli("history", "info", "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
        assert out.returncode == 2 and out.stderr.startswith("perfmodel: error:") and out.stderr.count("\n") == 1


def test_import_perfmodel_loads_no_database_driver():
    code = ("import sys, perfmodel, perfmodel.io, perfmodel.history; "
            "print(sorted(m for m in ('psycopg', 'sqlalchemy', 'torch', 'sqlite3') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr


# ------------------------------------------------------------------------------------------ many writers
def _appender(target: str, tag: str, n: int) -> None:
    for i in range(n):
        io.append_runs({**BASE, "run_id": f"{tag}-{i}"}, target)


def _append_forever(target: str, tag: str, done) -> None:
    i = 0
    while True:
        io.append_runs([{**BASE, "run_id": f"{tag}-{i}-{j}", "note": "x" * 2000} for j in range(20)], target)
        done.value = i + 1
        i += 1


@pytest.mark.slow
class TestManyWriters:
    def test_concurrent_appends_lose_and_repeat_nothing(self, target):
        io.append_runs({**BASE, "run_id": "seed"}, target)  # created before the writers race
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=_appender, args=(target, f"p{k}", 30)) for k in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(300)
        assert all(p.exitcode == 0 for p in procs)
        ids = io.read_raw_history(target)["run_id"].tolist()
        assert len(ids) == len(set(ids)) == 1 + 4 * 30

    def test_writers_racing_to_create_the_store(self, target):
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=_appender, args=(target, f"c{k}", 2)) for k in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(300)
        assert all(p.exitcode == 0 for p in procs)
        assert sorted(io.read_raw_history(target)["run_id"]) == sorted(f"c{k}-{i}" for k in range(3) for i in range(2))

    def test_sigkilled_writers_leave_no_torn_rows_and_lose_no_returned_append(self, target):
        io.append_runs({**BASE, "run_id": "seed"}, target)
        ctx = mp.get_context("fork")
        rng = np.random.default_rng(0)
        for trial in range(5):
            done = ctx.Value("i", 0)
            p = ctx.Process(target=_append_forever, args=(target, f"k{trial}", done))
            p.start()
            time.sleep(float(rng.uniform(0.3, 1.0)))
            os.kill(p.pid, signal.SIGKILL)
            p.join()
            runs = io.load_runs(target)
            ids = set(runs["run_id"])
            batches = {}
            for rid in ids - {"seed"}:
                tag, i, _ = rid.split("-")
                if tag == f"k{trial}":
                    batches.setdefault(int(i), 0)
                    batches[int(i)] += 1
            assert all(n == 20 for n in batches.values())  # a batch is all there or not at all
            assert all(i in batches for i in range(done.value))  # every returned append is there
            assert (runs["note"].dropna() == "x" * 2000).all()


@pytest.mark.slow
def test_slurm_jobs_append_to_a_postgresql_history_from_their_nodes(pg_url, tmp_path, monkeypatch):
    from perfmodel.measure import run_sweep
    from perfmodel.measure.slurm import SlurmOptions

    pytest.importorskip("submitit")
    pytest.importorskip("torch")
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "src"))
    url = pg_server.fresh_database(pg_url, f"slurm{uuid.uuid4().hex[:8]}")
    opts = SlurmOptions(partition="debug", time_min=5, cluster="local", poll_s=0.5, folder=str(tmp_path / "sl"))
    done = run_sweep(models=["mlp-xs"], output=url, batch_sizes=[2, 4], launcher="slurm", slurm=opts,
                     progress=False, steps=3)
    assert sorted(done["status"]) == ["ok", "ok"], done["error"].tolist()
    records = [json.loads(p.read_text()) for p in (tmp_path / "sl" / "records").glob("*.json")]
    assert len(records) == 2 and all(r.get("stored") for r in records)  # each job appended its own record
    runs = io.read_raw_history(url)
    assert len(runs) == 2 and not runs["run_id"].duplicated().any() and set(runs["launcher"]) == {"slurm"}
    with open_store(url) as store:
        assert set(store.read_steps()) == set(runs["run_id"])
