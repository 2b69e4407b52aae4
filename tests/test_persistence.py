"""perfmodel.persistence: model files.

Safe round trips; loading fits nothing and reads no more than it must; tampered, oversized and pickle-based files
are refused with a reason; saves are atomic and go through symbolic links.
"""

from __future__ import annotations

import io
import json
import multiprocessing as mp
import os
import pickle
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import assert_one_line_error, cli, make_history

import perfmodel
from perfmodel.exceptions import DataQualityWarning
from perfmodel.persistence import load_model, save_model


# ----------------------------------------------------------------------------------------------------------
# Issue 14 (no silent corruption) #2: bounded model loading, no fit on load.
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


# ----------------------------------------------------------------------------------------------------------
# Issue 14 #3: atomic concurrent saves.
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


# ----------------------------------------------------------------------------------------------------------
# Issue 26 (model files): a save through a symbolic link; model files that cost far more than their size.
REC = {"model": "m", "params": 1000, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu"}


class TestSymlinks:
    def test_model_save_through_a_link(self, tmp_path):
        from perfmodel.persistence import save_model

        runs = pd.DataFrame([{**REC, "model": f"m{i}", "params": 1000 * (i + 1), "batch_size": b,
                              "step_time_s": 0.001 * (i + 1) * b} for i in range(3) for b in (1, 2, 4, 8)])
        model = perfmodel.fit(runs, method="loglinear")
        real = tmp_path / "real.perfmodel"
        real.write_bytes(b"old")
        link = tmp_path / "link.perfmodel"
        link.symlink_to(real)
        save_model(model, link, force=True)  # "old" is not a model file: replacing it takes force (issue 38)
        assert link.is_symlink()
        assert zipfile.ZipFile(real).namelist()[0] == "__meta__.npy"


def _npy(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


@pytest.fixture(scope="module")
def small_model_file(tmp_path_factory):
    from perfmodel.persistence import save_model

    runs = pd.DataFrame([{**REC, "model": f"m{i}", "params": 1000 * (i + 1), "batch_size": b,
                          "step_time_s": 0.001 * (i + 1) * b} for i in range(3) for b in (1, 2, 4, 8)])
    path = tmp_path_factory.mktemp("model") / "m.perfmodel"
    save_model(perfmodel.fit(runs, method="loglinear"), path)
    return path


def _with_members(src: Path, dst: Path, meta=None, extra=()) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == "__meta__.npy" and meta is not None:
                data = _npy(np.array(meta))
            zout.writestr(info.filename, data)
        for name, data in extra:
            zout.writestr(name, data)
    return dst


def _peak_mib(fn) -> tuple[float, Exception | None]:
    import tracemalloc

    tracemalloc.start()
    err = None
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - returned to the test
        err = exc
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return peak, err


class TestModelFileCost:
    def test_real_model_still_loads(self, small_model_file):
        from perfmodel.persistence import load_model

        assert load_model(small_model_file).method == "loglinear"

    def test_huge_json_list_refused_before_parsing(self, tmp_path, small_model_file):
        from perfmodel.persistence import load_model

        meta = json.loads(str(np.load(io.BytesIO(zipfile.ZipFile(small_model_file).read("__meta__.npy")))[()]))
        meta["model"]["state"]["n_runs_"] = [0] * 3_000_000  # 9M characters: 3M values, compresses to a few KB
        path = _with_members(small_model_file, tmp_path / "t.perfmodel", meta=json.dumps(meta))
        assert path.stat().st_size < 2_000_000
        t0 = time.process_time()
        peak, err = _peak_mib(lambda: load_model(path))
        assert isinstance(err, ValueError) and "values, more than the limit" in str(err)
        assert time.process_time() - t0 < 5 and peak < 150  # the text itself is 36 MiB as a NumPy unicode array

    def test_deep_nesting_refused_before_parsing(self, tmp_path, small_model_file):
        from perfmodel.persistence import load_model

        path = _with_members(small_model_file, tmp_path / "t.perfmodel",
                             meta='{"format": "perfmodel-safe/1", "model": ' + "[" * 100_000 + "]" * 100_000 + "}")
        with pytest.raises(ValueError, match="nested 100001 levels deep"):
            load_model(path)

    def test_size_lie_refused_before_reading(self, tmp_path, small_model_file):
        from perfmodel.persistence import load_model

        path = _with_members(small_model_file, tmp_path / "t.perfmodel")
        data = bytearray(path.read_bytes())
        # the central directory entry of the last member claims 512 MiB uncompressed
        with zipfile.ZipFile(path) as zf:
            last = zf.infolist()[-1]
        central = data.rfind(b"PK\x01\x02")  # the last member's central directory header
        assert central > 0 and data[central + 46:central + 46 + len(last.filename)] == last.filename.encode()
        data[central + 24:central + 28] = (512 * 2**20).to_bytes(4, "little")
        path.write_bytes(bytes(data))
        peak, err = _peak_mib(lambda: load_model(path))
        assert isinstance(err, ValueError) and "compressed bytes can hold" in str(err), (last.filename, err)
        assert peak < 20

    def test_declared_array_costs_its_size_once(self, tmp_path, small_model_file):
        from perfmodel.persistence import load_model

        meta = json.loads(str(np.load(io.BytesIO(zipfile.ZipFile(small_model_file).read("__meta__.npy")))[()]))
        key = "a9999"
        meta["model"]["state"]["n_runs_"] = {"__array__": key}
        n = 64 * 2**20 // 8  # 64 MiB of zeros, compressed to about 64 KiB
        path = _with_members(small_model_file, tmp_path / "t.perfmodel", meta=json.dumps(meta),
                             extra=[(key + ".npy", _npy(np.zeros(n)))])
        assert path.stat().st_size < 1_000_000
        peak, _ = _peak_mib(lambda: load_model(path))  # (whether the model then passes its checks or not)
        assert peak < 64 * 1.25  # was about twice the array (the bytes read, then a copy)

    def test_unused_array_is_never_read(self, tmp_path, small_model_file):
        from perfmodel.persistence import load_model

        path = _with_members(small_model_file, tmp_path / "t.perfmodel",
                             extra=[("a9999.npy", _npy(np.zeros(32 * 2**20 // 8)))])
        peak, err = _peak_mib(lambda: load_model(path))
        assert err is None and peak < 16

    def test_array_header_must_match_member(self, tmp_path, small_model_file):
        from perfmodel.persistence import load_model

        meta = json.loads(str(np.load(io.BytesIO(zipfile.ZipFile(small_model_file).read("__meta__.npy")))[()]))
        meta["model"]["state"]["n_runs_"] = {"__array__": "a9999"}
        member = _npy(np.zeros(10))[:-8]  # header says 10 values, the member holds 9
        path = _with_members(small_model_file, tmp_path / "t.perfmodel", meta=json.dumps(meta),
                             extra=[("a9999.npy", member)])
        with pytest.raises(ValueError, match="header declares 80 bytes in a member of 72"):
            load_model(path)


# ----------------------------------------------------------------------------------------------------------
# Fault injection: malicious model files.
class Evil:
    def __reduce__(self):
        return (os.system, (f"touch {os.environ.get('PERFMODEL_TEST_MARKER', '/tmp/perfmodel-pwned')}",))


class TestSafeModelFiles:
    @pytest.mark.parametrize("method", ["linear", "loglinear", "gbm", "physics"])
    def test_safe_round_trip_predicts_the_same(self, tmp_path, method):
        h = make_history().assign(family="mlp", threads_per_worker=1)
        m = perfmodel.fit(h, method=method)
        save_model(m, tmp_path / "m.perfmodel")
        assert (tmp_path / "m.perfmodel").read_bytes()[:4] == b"PK\x03\x04"  # npz, no pickle
        back = load_model(tmp_path / "m.perfmodel")
        pd.testing.assert_frame_equal(back.predict_interval(h), m.predict_interval(h))
        assert back.summary().as_text() == m.summary().as_text()

    def test_malicious_pickle_is_refused(self, tmp_path, monkeypatch):
        marker = tmp_path / "pwned"
        monkeypatch.setenv("PERFMODEL_TEST_MARKER", str(marker))
        path = tmp_path / "model.joblib"
        with open(path, "wb") as fh:
            pickle.dump({"format": "perfmodel-model/1", "model": Evil()}, fh)
        with pytest.raises(ValueError, match="pickle-based .*can run arbitrary code.*trusted=True"):
            load_model(path)
        assert not marker.exists()

    def test_cli_refuses_pickle(self, tmp_path):
        path = tmp_path / "model.joblib"
        with open(path, "wb") as fh:
            pickle.dump({"x": 1}, fh)
        proc = subprocess.run([sys.executable, "-m", "perfmodel", "summary", str(path)], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 2 and "pickle-based" in proc.stderr and "Traceback" not in proc.stderr

    def test_trusted_joblib_still_loads(self, tmp_path):
        m = perfmodel.fit(make_history(), method="loglinear")
        save_model(m, tmp_path / "m.joblib", format="joblib")
        back = load_model(tmp_path / "m.joblib", trusted=True)
        np.testing.assert_allclose(back.predict(make_history()), m.predict(make_history()))

    def test_incompatible_version_refused(self, tmp_path):
        m = perfmodel.fit(make_history(), method="loglinear")
        save_model(m, tmp_path / "m.perfmodel")
        with np.load(tmp_path / "m.perfmodel", allow_pickle=False) as a:
            arrays = {k: a[k] for k in a.files}
        meta = json.loads(str(arrays.pop("__meta__")))
        meta["perfmodel_version"] = "9.0.0"
        np.savez(tmp_path / "old.npz", __meta__=np.array(json.dumps(meta)), **arrays)
        with pytest.raises(ValueError, match=r"saved by perfmodel 9.0.0; this is perfmodel .* Refit"):
            load_model(tmp_path / "old.npz")

    def test_not_a_model_file(self, tmp_path):
        np.savez(tmp_path / "x.npz", a=np.arange(3))
        with pytest.raises(ValueError, match="not a readable perfmodel model file|not a perfmodel model file"):
            load_model(tmp_path / "x.npz")
