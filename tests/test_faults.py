"""Regression tests for issue 14 ("no silent corruption"): one or more per reproduced defect.

1 CSV round-trip fidelity · 2 bounded model loading, no fit on load · 3 atomic concurrent saves · 4 no orphaned
sweep workers · 5 every input checked, no NaN/inf/inverted results · 6 one-line errors instead of tracebacks.
"""

from __future__ import annotations

import io
import json
import math
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_history
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel._atomic import atomic_write, clean_stale_temps
from perfmodel.exceptions import DataQualityWarning, MeasurementError, PredictionError, SchemaError
from perfmodel.io import append_runs, load_runs, read_raw_history, save_runs
from perfmodel.persistence import load_model, save_model

SRC = str(Path(__file__).resolve().parents[1] / "src")
BASE = {"params": 1000, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu", "step_time_s": 0.25}


def cli(*args, **kw):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "perfmodel", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=kw.get("timeout", 300))


def assert_one_line_error(proc, pattern=""):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("perfmodel: error:"), proc.stderr
    assert "Traceback" not in proc.stderr
    if pattern:
        import re

        assert re.search(pattern, lines[0]), lines[0]


# ------------------------------------------------------------------------------------------------ 1: CSV
class TestRoundTrip:
    @pytest.mark.parametrize("suffix", [".csv", ".parquet"])
    @pytest.mark.parametrize("model, sweep_id", [("1.10", "01234567"), ("x", "1234e567"), ("NA", "None"),
                                                 ("null", "N/A"), ("nan", "inf"), (" pad ", "a,b\r\nc\"d"),
                                                 ("TRUE", "#comment"), ("ünï\u2028code", "-0")])
    def test_text_columns_come_back_exactly(self, tmp_path, suffix, model, sweep_id):
        path = tmp_path / f"runs{suffix}"
        for _ in range(3):  # every append re-reads and rewrites the whole file
            append_runs({**BASE, "model": model, "sweep_id": sweep_id, "family": "NA"}, path)
        runs = load_runs(path)
        assert list(runs["model"]) == [model] * 3 and list(runs["sweep_id"]) == [sweep_id] * 3
        assert list(runs["family"]) == ["NA"] * 3

    @pytest.mark.parametrize("suffix", [".csv", ".parquet"])
    def test_floats_exact_and_ids_unique(self, tmp_path, suffix):
        path = tmp_path / f"runs{suffix}"
        values = [0.1 + 1e-17, 1 / 3, 5e-324, 1e6, 123456.78901234567, 2.0**-1074 * 3]
        for v in values:
            append_runs({**BASE, "model": "m", "step_time_s": v, "startup_s": v}, path)  # no run_id given
        runs = load_runs(path)
        assert runs["step_time_s"].tolist() == values and runs["startup_s"].tolist() == values
        assert runs["run_id"].is_unique and not runs["run_id"].str.startswith("row-").any()

    def test_big_integers_exact(self, tmp_path):
        path = tmp_path / "runs.csv"
        append_runs({**BASE, "model": "m", "seed": 2**61 + 1, "steps": 2**43 + 1}, path)
        append_runs({**BASE, "model": "m"}, path)
        h = read_raw_history(path)
        assert int(h["seed"].iloc[0]) == 2**61 + 1 and int(h["steps"].iloc[0]) == 2**43 + 1

    def test_unknown_columns_keep_their_text(self, tmp_path):
        path = tmp_path / "runs.csv"
        append_runs({**BASE, "model": "m", "note": "007", "lr": 0.001}, path)
        append_runs({**BASE, "model": "m", "note": "1.10", "lr": 0.002}, path)
        h = read_raw_history(path)
        assert list(h["note"]) == ["007", "1.10"] and h["lr"].tolist() == [0.001, 0.002]

    def test_hand_written_history_with_na_text_loads(self, tmp_path):
        path = tmp_path / "runs.csv"
        path.write_text("model,params,batch_size,gpu_count,gpu_type,step_time_s,family\n"
                        "NA,10,1,1,cpu,0.5,None\nnull,20,1,1,cpu,0.6,N/A\n")
        append_runs({**BASE, "model": "N/A"}, path)
        assert list(load_runs(path)["model"]) == ["NA", "null", "N/A"]


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
FLOAT = st.floats(min_value=5e-324, max_value=1e5, allow_nan=False, allow_infinity=False)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(TEXT.filter(str.strip), TEXT, FLOAT, st.one_of(st.none(), FLOAT),  # no blank model
                               st.integers(1, 2**40)), min_size=1, max_size=3))
def test_property_append_load_equal(tmp_path_factory, suffix, rows):
    path = tmp_path_factory.mktemp("rt") / f"runs{suffix}"
    sent = []
    for model, note, t, startup, params in rows:
        rec = {**BASE, "model": model, "sweep_id": note, "step_time_s": t, "startup_s": startup, "params": params}
        append_runs(rec, path)
        sent.append(rec)
    back = load_runs(path)
    assert back["model"].tolist() == [r["model"] for r in sent]
    assert back["sweep_id"].tolist() == [r["sweep_id"] for r in sent]
    assert back["step_time_s"].tolist() == [r["step_time_s"] for r in sent]
    assert [None if pd.isna(v) else v for v in back["startup_s"]] == [r["startup_s"] for r in sent]
    assert [int(v) for v in back["params"]] == [r["params"] for r in sent]


class TestMalformedFiles:
    def test_duplicated_header_refused(self, tmp_path):
        path = tmp_path / "runs.csv"
        path.write_text("model,params,params,batch_size,gpu_count,gpu_type,step_time_s\nm,1,2,1,1,cpu,0.1\n")
        with pytest.raises(SchemaError, match="names column 'params' twice"):
            load_runs(path)

    def test_short_row_refused_with_line(self, tmp_path):
        path = tmp_path / "runs.csv"
        path.write_text("model,params,batch_size,gpu_count,gpu_type,step_time_s\nm,1,1,1,cpu,0.1\nm,1,1\n")
        with pytest.raises(SchemaError, match="line 3 has 3 fields but the header has 6"):
            load_runs(path)

    def test_trailing_comma_named(self, tmp_path):
        path = tmp_path / "runs.csv"
        path.write_text("model,params,batch_size,gpu_count,gpu_type,step_time_s\nm,1,1,1,cpu,0.1,\n")
        with pytest.raises(SchemaError, match="line 2 has 7 fields.*trailing comma"):
            load_runs(path)

    def test_true_is_not_a_number(self, tmp_path):
        with pytest.raises(SchemaError, match="'batch_size' must be numeric.*True"):
            load_runs(pd.DataFrame([{**BASE, "model": "m", "batch_size": True}]))
        path = tmp_path / "runs.csv"
        path.write_text("model,params,batch_size,gpu_count,gpu_type,step_time_s\nm,1,True,1,cpu,0.1\n")
        with pytest.raises(SchemaError, match="'batch_size' must be numeric"):
            load_runs(path)

    def test_parquet_timedelta_and_timestamp_refused(self, tmp_path):
        df = pd.DataFrame([{**BASE, "model": "m"}])
        df["step_time_s"] = pd.to_timedelta([0.25], unit="s")
        df.to_parquet(tmp_path / "a.parquet")
        with pytest.raises(SchemaError, match="'step_time_s' must be numeric.*timedelta"):
            load_runs(tmp_path / "a.parquet")
        df = pd.DataFrame([{**BASE, "model": "m"}])
        df["batch_size"] = pd.to_datetime(["2024-01-01"])
        df.to_parquet(tmp_path / "b.parquet")
        with pytest.raises(SchemaError, match="'batch_size' must be numeric.*datetime"):
            load_runs(tmp_path / "b.parquet")

    def test_binary_model_column(self, tmp_path):
        df = pd.DataFrame([{**BASE, "model": b"\xff\xfe"}])
        df.to_parquet(tmp_path / "b.parquet")
        with pytest.raises(SchemaError, match="'model' holds binary"):
            load_runs(tmp_path / "b.parquet")

    def test_not_utf8(self, tmp_path):
        path = tmp_path / "runs.csv"
        path.write_bytes(b"model,params,batch_size,gpu_count,gpu_type,step_time_s\n\xff,1,1,1,cpu,0.1\n")
        with pytest.raises(SchemaError, match="not UTF-8"):
            load_runs(path)


# ------------------------------------------------------------------------------------------- 2: loading
def _archive(path):
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    meta = json.loads(str(np.load(io.BytesIO(members.pop("__meta__.npy")))[()]))
    return meta, members


def _write_archive(path, meta, members, extra=()):
    buf = io.BytesIO()
    np.save(buf, np.array(json.dumps(meta)))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("__meta__.npy", buf.getvalue())
        for n, b in members.items():
            zf.writestr(n, b)
        for n, b in extra:
            zf.writestr(n, b)


def _find(node, key):
    """The first dict in the JSON tree that has ``key``."""
    if isinstance(node, dict):
        if key in node:
            return node
        node = list(node.values())
    if isinstance(node, list):
        for x in node:
            hit = _find(x, key)
            if hit is not None:
                return hit
    return None


@pytest.fixture(scope="module")
def gbm_model():
    return perfmodel.fit(make_history(n_models=4), method="gbm")


@pytest.fixture(scope="module")
def queries():
    return make_history(n_models=4, seed=3).assign(steps=100)


class TestLoading:
    @pytest.mark.parametrize("method", ["gbm", "loglinear", "physics", "roofline"])
    def test_load_never_fits(self, tmp_path, monkeypatch, method, queries):
        model = perfmodel.fit(make_history(n_models=4), method=method)
        save_model(model, tmp_path / "m.perfmodel")
        import scipy.optimize
        import statsmodels.regression.linear_model as lm
        from sklearn.ensemble import GradientBoostingRegressor

        def boom(*a, **k):
            raise AssertionError("fit called while loading")

        monkeypatch.setattr(GradientBoostingRegressor, "fit", boom)
        monkeypatch.setattr(lm.OLS, "fit", boom)
        monkeypatch.setattr(scipy.optimize, "least_squares", boom)
        monkeypatch.setattr("perfmodel.models._physics.least_squares", boom)
        loaded = load_model(tmp_path / "m.perfmodel")
        a, b = model.predict_interval(queries, 0.8), loaded.predict_interval(queries, 0.8)
        assert a.equals(b)
        if method != "gbm":
            assert model.coef_table().equals(loaded.coef_table())

    def test_tampered_n_estimators_does_not_hang(self, tmp_path, gbm_model, queries):
        save_model(gbm_model, tmp_path / "m.perfmodel")
        meta, members = _archive(tmp_path / "m.perfmodel")
        _find(meta, "n_estimators")["n_estimators"] = 10**9
        _write_archive(tmp_path / "t.perfmodel", meta, members)
        t0 = time.perf_counter()
        loaded = load_model(tmp_path / "t.perfmodel")
        assert time.perf_counter() - t0 < 30
        assert np.array_equal(loaded.predict(queries), gbm_model.predict(queries))

    def test_unknown_member_is_never_read(self, tmp_path, gbm_model, monkeypatch):
        save_model(gbm_model, tmp_path / "m.perfmodel")
        meta, members = _archive(tmp_path / "m.perfmodel")
        _write_archive(tmp_path / "t.perfmodel", meta, members, extra=[("payload.bin", b"\0" * 50_000_000)])
        assert (tmp_path / "t.perfmodel").stat().st_size < 1_000_000
        opened = []
        real_open = zipfile.ZipFile.open
        monkeypatch.setattr(zipfile.ZipFile, "open", lambda self, name, *a, **k: (
            opened.append(getattr(name, "filename", name)), real_open(self, name, *a, **k))[1])
        with pytest.raises(ValueError, match="member perfmodel does not write.*payload.bin"):
            load_model(tmp_path / "t.perfmodel")
        assert opened == []

    def test_total_size_bounded_before_reading(self, tmp_path, gbm_model):
        save_model(gbm_model, tmp_path / "m.perfmodel")
        with pytest.raises(ValueError, match="more than the limit"):
            load_model(tmp_path / "m.perfmodel", max_bytes=1000)

    def test_array_header_bounded(self, tmp_path, gbm_model):
        save_model(gbm_model, tmp_path / "m.perfmodel")
        meta, members = _archive(tmp_path / "m.perfmodel")
        name = next(iter(members))
        header = np.lib.format.header_data_from_array_1_0(np.zeros(3))
        header["shape"] = (10**12,)
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, header)
        members[name] = buf.getvalue() + b"\0" * 24
        _write_archive(tmp_path / "t.perfmodel", meta, members)
        with pytest.raises(ValueError, match="header declares 8000000000000 bytes"):
            load_model(tmp_path / "t.perfmodel")

    def test_library_versions_recorded_and_checked(self, tmp_path, gbm_model):
        save_model(gbm_model, tmp_path / "m.perfmodel")
        meta, members = _archive(tmp_path / "m.perfmodel")
        import sklearn

        assert meta["libraries"]["sklearn"] == sklearn.__version__ and "statsmodels" in meta["libraries"]
        meta["libraries"]["sklearn"] = "0.24.2"
        _write_archive(tmp_path / "t.perfmodel", meta, members)
        with pytest.warns(DataQualityWarning, match="written with sklearn 0.24.2"):
            load_model(tmp_path / "t.perfmodel")

    def test_a_model_of_another_fit_format_is_refused(self, tmp_path, gbm_model):
        from perfmodel.models import FIT_FORMAT

        save_model(gbm_model, tmp_path / "m.perfmodel")
        meta, members = _archive(tmp_path / "m.perfmodel")
        assert meta["fit_format"] == FIT_FORMAT
        meta["fit_format"] = FIT_FORMAT - 1
        _write_archive(tmp_path / "old.perfmodel", meta, members)
        with pytest.raises(ValueError, match=f"with fit format {FIT_FORMAT - 1}; this one computes fit format"):
            load_model(tmp_path / "old.perfmodel")
        del meta["fit_format"]
        _write_archive(tmp_path / "older.perfmodel", meta, members)
        with pytest.raises(ValueError, match="before fits recorded their format.*Refit"):
            load_model(tmp_path / "older.perfmodel")

    @pytest.mark.parametrize("mutation", [
        "drop_pipeline", "unknown_class", "method_name", "tree_backwards", "tree_feature", "deep_nesting",
        "frame_columns", "array_key", "not_object", "ols_shapes", "objarray_nested", "string_for_array",
        "meta_list"])
    def test_tampered_files_are_value_errors(self, tmp_path, mutation):
        method = "loglinear" if mutation == "ols_shapes" else "gbm"
        model = perfmodel.fit(make_history(n_models=3), method=method)
        save_model(model, tmp_path / "m.perfmodel")
        meta, members = _archive(tmp_path / "m.perfmodel")
        state = meta["model"]["state"]
        if mutation == "drop_pipeline":
            del state["pipeline_"]
        elif mutation == "unknown_class":
            meta["model"]["__object__"] = "os.system"
        elif mutation == "method_name":
            state["predict"] = 1
        elif mutation in ("tree_backwards", "tree_feature"):
            trees = _find(meta, "__trees__")["__trees__"]
            key = trees["left" if mutation == "tree_backwards" else "feature"]["__array__"]
            arr = np.load(io.BytesIO(members[key + ".npy"]))
            arr[arr > 0] = 0 if mutation == "tree_backwards" else 99
            buf = io.BytesIO()
            np.save(buf, arr)
            members[key + ".npy"] = buf.getvalue()
        elif mutation == "deep_nesting":
            deep = 1
            for _ in range(200):
                deep = [deep]
            state["n_runs_"] = deep
        elif mutation == "frame_columns":
            _find(meta, "__frame__")["__frame__"]["columns"].append("extra")
        elif mutation == "array_key":
            _find(meta, "__array__")["__array__"] = "a99999"
        elif mutation == "not_object":
            meta["model"] = [1, 2, 3]
        elif mutation == "ols_shapes":
            _find(meta, "_fit_state_")["_fit_state_"]["__dict__"][0][1] = [1.0]
        elif mutation == "objarray_nested":
            _find(meta, "__objarray__")["__objarray__"] = [{"__dict__": []}]
        elif mutation == "string_for_array":
            state["pipeline_"] = "x"
        elif mutation == "meta_list":
            meta = [meta]
        _write_archive(tmp_path / "t.perfmodel", meta if isinstance(meta, dict) else {"x": 1}, members)
        if mutation == "meta_list":
            buf = io.BytesIO()
            np.save(buf, np.array(json.dumps(meta)))
            with zipfile.ZipFile(tmp_path / "t.perfmodel", "w") as zf:
                zf.writestr("__meta__.npy", buf.getvalue())
        with pytest.raises(ValueError, match="perfmodel model file"):
            load_model(tmp_path / "t.perfmodel")

    def test_cli_tampered_file_is_one_line(self, tmp_path, gbm_model):
        save_model(gbm_model, tmp_path / "m.perfmodel")
        meta, members = _archive(tmp_path / "m.perfmodel")
        del meta["model"]["state"]["models_"]
        _write_archive(tmp_path / "t.perfmodel", meta, members)
        assert_one_line_error(cli("summary", tmp_path / "t.perfmodel"), "damaged or inconsistent")
        (tmp_path / "torn.perfmodel").write_bytes((tmp_path / "m.perfmodel").read_bytes()[:300])
        assert_one_line_error(cli("summary", tmp_path / "torn.perfmodel"), "not a readable perfmodel model file")


# --------------------------------------------------------------------------------------- 3: atomic saves
def _save_loop(args):
    path, seed, n = args
    model = perfmodel.fit(make_history(n_models=3, seed=seed), method="loglinear")
    for _ in range(n):
        save_model(model, path)
    return n


class TestAtomicSaves:
    def test_concurrent_saves_and_reads(self, tmp_path):
        path = tmp_path / "m.perfmodel"
        _save_loop((path, 0, 1))
        errors = []
        with mp.get_context("spawn").Pool(4) as pool:
            result = pool.map_async(_save_loop, [(path, s, 10) for s in range(4)])
            reads = 0
            while not result.ready() or reads < 20:
                try:
                    load_model(path)
                except Exception as exc:  # noqa: BLE001 - any failure is the defect
                    errors.append(repr(exc))
                reads += 1
            assert result.get() == [10] * 4
        assert errors == []
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []

    def test_stale_temp_files_are_cleaned_live_ones_kept(self, tmp_path):
        target = tmp_path / "runs.csv"
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        stale = tmp_path / f".runs.csv.{dead.pid}-abcdef012345.tmp"
        legacy = tmp_path / ".runs.csv.tmp"
        live = tmp_path / f".runs.csv.{os.getpid()}-abcdef012345.tmp"
        for p in (stale, legacy, live):
            p.write_text("partial")
        old = time.time() - 3600
        os.utime(legacy, (old, old))
        append_runs({**BASE, "model": "m"}, target)
        assert not stale.exists() and not legacy.exists() and live.exists()

    def test_failed_write_leaves_target_and_no_temp(self, tmp_path):
        target = tmp_path / "x.bin"
        target.write_bytes(b"old")
        with pytest.raises(RuntimeError):
            with atomic_write(target) as fh:
                fh.write(b"new")
                raise RuntimeError("interrupted")
        assert target.read_bytes() == b"old" and list(tmp_path.iterdir()) == [target]
        assert clean_stale_temps(target) == []


# -------------------------------------------------------------------------------------- 4: orphan workers
class TestOrphanWorkers:
    def _dead_pid(self):
        p = subprocess.Popen([sys.executable, "-c", "pass"])
        p.wait()
        return p.pid

    def test_live_stale_worker_refused_dead_dirs_removed(self, tmp_path):
        from perfmodel.measure._lifeline import check_stale_workers

        gone = tmp_path / "perfmodel-run-gone"
        gone.mkdir()
        (gone / "owner.json").write_text(json.dumps({"sweep_pid": self._dead_pid(), "worker_pgid": self._dead_pid()}))
        assert check_stale_workers(tmp_path) == [gone] and not gone.exists()
        stale = tmp_path / "perfmodel-run-stale"
        stale.mkdir()
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(stale)],
                                  start_new_session=True)
        try:
            (stale / "owner.json").write_text(json.dumps({"sweep_pid": self._dead_pid(), "worker_pgid": worker.pid}))
            with pytest.raises(MeasurementError, match=f"still running \\(pid {worker.pid}"):
                check_stale_workers(tmp_path)
        finally:
            worker.kill()
            worker.wait()
        assert check_stale_workers(tmp_path) == [stale]

    def test_live_sweeps_dirs_are_left_alone(self, tmp_path):
        from perfmodel.measure._lifeline import check_stale_workers

        mine = tmp_path / "perfmodel-run-mine"
        mine.mkdir()
        (mine / "owner.json").write_text(json.dumps({"sweep_pid": os.getpid(), "worker_pgid": os.getpid()}))
        assert check_stale_workers(tmp_path) == [] and mine.exists()

    @pytest.mark.slow
    def test_killing_the_sweep_group_kills_its_worker(self, tmp_path):
        pytest.importorskip("torch")
        env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": SRC}
        out = tmp_path / "runs.csv"
        # a fixed 200,000 steps (minutes): the adaptive budget stops early on a quiet machine, and a worker that
        # has finished leaves no run directory to find stale
        sweep = subprocess.Popen([sys.executable, "-m", "perfmodel", "measure", "--models", "mlp-xs",
                                  "--batch-sizes", "2", "--steps", "200000",
                                  "--output", str(out)], env=env, start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        owner = None
        deadline = time.time() + 120
        while time.time() < deadline and owner is None:
            found = list(tmp_path.glob("perfmodel-run-*/owner.json"))
            owner = json.loads(found[0].read_text()) if found else None
            time.sleep(0.2)
        assert owner is not None
        time.sleep(3)  # the worker is importing torch / measuring
        os.killpg(sweep.pid, signal.SIGKILL)
        sweep.wait()
        deadline = time.time() + 20
        alive = True
        while alive and time.time() < deadline:
            try:
                os.killpg(owner["worker_pgid"], 0)
                time.sleep(0.2)
            except ProcessLookupError:
                alive = False
        assert not alive, "the worker outlived its sweep"
        from perfmodel.measure._lifeline import check_stale_workers

        assert len(check_stale_workers(tmp_path)) == 1 and not list(tmp_path.glob("perfmodel-run-*"))


# ------------------------------------------------------------------------------------------ 5: inputs
@pytest.fixture(scope="module")
def fitted():
    return perfmodel.fit(make_history(), method="loglinear")


class TestInputs:
    @pytest.mark.parametrize("column, value, message", [
        ("flops_per_sample", -1e9, "'flops_per_sample' must be finite and positive"),
        ("flops_per_sample", math.inf, "'flops_per_sample' must be finite and positive"),
        ("flops_per_sample", 1e308, "'flops_per_sample' must be finite and positive \\(at most 1e\\+24\\)"),
        ("batch_size", 8.5, "'batch_size' must hold whole numbers"),
        ("gpu_count", 1.5, "'gpu_count' must hold whole numbers"),
        ("steps", 10.25, "'steps' must hold whole numbers"),
        ("steps", -3, "'steps' must be finite and positive"),
        ("batch_size", True, "'batch_size' must be numeric"),
        ("precision", 3, "'precision' must hold text"),
        ("precision", pd.NaT, "'precision' must hold text")])
    def test_predict_many_validates(self, fitted, column, value, message):
        q = pd.DataFrame([{"params": 1e6, "flops_per_sample": 1e9, "batch_size": 8, "gpu_count": 1,
                           "gpu_type": "A100", "steps": 100, "precision": "fp32"}] * 2)
        q[column] = q[column].astype(object)
        q.loc[1, column] = value
        with pytest.raises(SchemaError, match=message):
            perfmodel.predict_many(q, history=fitted)

    @pytest.mark.parametrize("column, value", [("startup_s", -1e6), ("startup_s", math.inf),
                                               ("step_time_s", 1e308), ("gpu_util_mean_pct", 250.0),
                                               ("power_mean_w", -5.0), ("step_time_std_s", -1.0)])
    def test_history_columns_in_range(self, column, value):
        h = make_history()
        h[column] = 0.5
        h.loc[3, column] = value
        with pytest.raises(SchemaError, match=f"Column '{column}' must be finite"):
            load_runs(h)

    @pytest.mark.parametrize("column", ["sequence_parallel", "gated_mlp", "tied_embeddings"])
    def test_flag_columns_take_zero_and_one_only(self, column):
        h = make_history()
        h[column] = [0, 1] * (len(h) // 2) + [0] * (len(h) % 2)
        assert set(load_runs(h)[column]) == {0, 1}
        h.loc[3, column] = 2
        with pytest.raises(SchemaError, match=f"Column '{column}' must be 0 or 1"):
            load_runs(h)

    def test_unbounded_interval_is_an_error_not_inf(self):
        small = make_history(n_models=1).head(6)
        model = perfmodel.fit(small, method="gbm")
        with pytest.raises(PredictionError, match="unbounded.*confidence <= n/\\(n\\+1\\)"):
            perfmodel.predict_training_time("m0", batch_size=8, gpu_type="A100", steps=10, history=model,
                                            confidence=0.99)

    def test_predictions_are_finite_and_ordered(self, fitted):
        q = pd.DataFrame({"params": [1e3, 1e9, 1e12], "flops_per_sample": [1e3, 1e12, 1e20],
                          "batch_size": [1, 64, 4096], "gpu_count": [1, 2, 4], "gpu_type": "A100", "steps": 10**6})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = perfmodel.predict_many(q, history=fitted)
        v = out[["step_lower", "step_time_s", "step_upper", "lower", "seconds", "upper"]].to_numpy()
        assert np.isfinite(v).all() and (v >= 0).all()
        assert (v[:, 0] <= v[:, 1]).all() and (v[:, 1] <= v[:, 2]).all() and (v[:, 3] <= v[:, 4]).all()


# ------------------------------------------------------------------------------------ 6: late failures
class TestEarlyOneLineErrors:
    def test_run_config_rejects_bad_budgets(self):
        pytest.importorskip("torch")
        from perfmodel.measure.sweep import RunConfig

        for kwargs, name in [({"max_seconds": -1}, "max_seconds"), ({"ci_target": 0}, "ci_target"),
                             ({"warmup_steps": -2}, "warmup_steps"), ({"max_steps": 0}, "max_steps")]:
            with pytest.raises(ValueError, match=name):
                RunConfig(model="mlp-xs", batch_size=2, **kwargs)

    def test_cli_measure_bad_numbers(self, tmp_path):
        pytest.importorskip("torch")
        out = tmp_path / "runs.csv"
        assert_one_line_error(cli("measure", "--models", "mlp-xs", "--batch-sizes", "2", "--max-seconds", "-1",
                                  "--output", out), "max_seconds")
        assert_one_line_error(cli("measure", "--models", "mlp-xs", "--batch-sizes", "2", "--timeout", "-5",
                                  "--output", out), "timeout_s")
        assert not out.exists()

    def test_unwritable_output_before_first_run(self, tmp_path, monkeypatch):
        pytest.importorskip("torch")
        from perfmodel.measure import run_sweep, sweep

        measured = []
        monkeypatch.setattr(sweep, "measure_run", lambda *a, **k: measured.append(1))
        blocker = tmp_path / "file"
        blocker.write_text("x")
        with pytest.raises(OSError):
            run_sweep([sweep.RunConfig(model="mlp-xs", batch_size=2)], blocker / "sub" / "runs.csv")
        assert measured == []

    def test_cuda_on_cpu_torch(self, tmp_path):
        torch = pytest.importorskip("torch")
        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
        assert_one_line_error(cli("measure", "--device", "cuda", "--models", "mlp-xs", "--batch-sizes", "2",
                                  "--steps", "2", "--output", tmp_path / "runs.csv"), "sees no CUDA device")

    def test_evaluate_one_row(self, tmp_path):
        path = tmp_path / "one.csv"
        save_runs(make_history().head(1), path)
        assert_one_line_error(cli("evaluate", path), "nothing to cross-validate")

    def test_cli_negative_startup(self, tmp_path):
        h = make_history()
        h["startup_s"] = -1e6
        h.to_csv(tmp_path / "h.csv", index=False)
        assert_one_line_error(cli("predict", "--model", "m1", "--batch-size", "8", "--gpu-type", "A100",
                                  "--steps", "10", "--history", tmp_path / "h.csv"), "startup_s")


NUM = st.one_of(st.integers(-3, 10**7), st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
                st.text(max_size=4), st.sampled_from([1e308, 1e24, 5e-324, 2**63]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.fixed_dictionaries({"params": NUM | st.just(1e6), "batch_size": NUM | st.just(8),
                                            "gpu_count": NUM | st.just(2), "steps": NUM | st.just(100),
                                            "flops_per_sample": NUM | st.just(1e9)}), min_size=1, max_size=3),
       conf=st.floats(0.01, 0.9999), method=st.sampled_from(["loglinear", "gbm"]))
def test_fuzz_predict_many(fitted, gbm_model, rows, conf, method):
    q = pd.DataFrame(rows).assign(gpu_type="A100")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = perfmodel.predict_many(q, confidence=conf, history=fitted if method == "loglinear" else gbm_model)
    except (ValueError, TypeError) as exc:
        assert str(exc)
        return
    v = out[["step_lower", "step_time_s", "step_upper", "lower", "seconds", "upper"]].to_numpy(dtype=float)
    assert np.isfinite(v).all() and (v >= 0).all()
    assert (v[:, 0] <= v[:, 1]).all() and (v[:, 1] <= v[:, 2]).all()
    assert (v[:, 3] <= v[:, 4]).all() and (v[:, 4] <= v[:, 5]).all()


def test_a_whole_float_beyond_int64_in_an_integer_column_is_an_error_not_an_overflow(fitted):
    """Found by test_fuzz_predict_many: params 1e308 beside an empty cell crashed converting to Int64."""
    q = pd.DataFrame([{"params": 5, "batch_size": 8, "gpu_count": 1, "steps": 10},
                      {"params": "", "batch_size": 8, "gpu_count": 1, "steps": 10},
                      {"params": 1e308, "batch_size": 8, "gpu_count": 1, "steps": 10}]).assign(gpu_type="A100")
    with pytest.raises(ValueError, match="params"):
        perfmodel.predict_many(q, history=fitted)
