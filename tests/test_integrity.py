"""Issue 26 (history and model files): nothing lost, nothing silently changed.

Each test reproduces one reported break: a cut last number, appends through a symbolic link, unknown text columns
that changed on the next append, schema columns without limits, Parquet readers racing a rewrite, model files that
cost far more than their size, and pyarrow as an optional dependency.
"""

from __future__ import annotations

import io
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel.exceptions import SchemaError
from perfmodel.io import (
    ROW_CHECK,
    append_runs,
    load_runs,
    read_raw_history,
    recover_runs,
    save_runs,
    write_history,
)
from perfmodel.schema import COLUMNS, LIMITS, describe_schema

REC = {"model": "m", "params": 1000, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu"}
SRC = str(Path(__file__).resolve().parents[1] / "src")


def _history(path, n=3):
    save_runs(pd.DataFrame([{**REC, "run_id": f"r{i}", "step_time_s": 12.345 + i, "startup_s": 1.5}
                            for i in range(n)]), path)
    return path


class TestCutLastField:
    def test_every_cut_of_the_last_row_is_caught_or_loses_nothing(self, tmp_path):
        full = _history(tmp_path / "full.csv")
        want = load_runs(full).set_index("run_id")
        data = full.read_bytes()
        last_row_start = data.rstrip(b"\n").rfind(b"\n") + 1
        cut_path = tmp_path / "cut.csv"
        caught = 0
        for end in range(last_row_start + 1, len(data)):
            cut_path.write_bytes(data[:end])
            try:
                got = load_runs(cut_path).set_index("run_id")
            except SchemaError as exc:
                assert "line 4" in str(exc)
                caught += 1
                good, problems = recover_runs(cut_path)
                assert list(good["run_id"]) == ["r0", "r1"]  # the cut row dropped, the others kept
                assert len(problems) == 1 and "line 4" in problems[0]
                continue
            # loads only when every value of the last row is whole (cut inside its row check's separator)
            pd.testing.assert_frame_equal(got[want.columns], want, check_dtype=False)
        assert caught >= len(data) - last_row_start - 3

    def test_the_reported_cut_number(self, tmp_path):
        path = _history(tmp_path / "runs.csv", n=1)
        text = path.read_text()
        assert "12.345" in text
        path.write_text(text[:text.rindex("12.345")] + "14.")  # `12.345` -> `14.`, the file ends there
        with pytest.raises(SchemaError, match="line 2 has 9 fields but the header has 11"):
            load_runs(path)
        _, problems = recover_runs(path)
        assert problems and "dropped row at line 2" in problems[0]

    def test_cut_inside_the_check_is_a_mismatch(self, tmp_path):
        path = _history(tmp_path / "runs.csv")
        path.write_bytes(path.read_bytes()[:-3])  # the last check loses its last two digits
        with pytest.raises(SchemaError, match=f"line 4 does not match its {ROW_CHECK} check"):
            load_runs(path)

    def test_pandas_reads_the_file(self, tmp_path):
        path = _history(tmp_path / "runs.csv")
        raw = pd.read_csv(path)
        assert list(raw.columns)[-1] == ROW_CHECK
        assert list(raw["step_time_s"]) == [12.345, 13.345, 14.345]
        assert ROW_CHECK not in read_raw_history(path).columns
        save_runs(load_runs(raw), tmp_path / "again.csv")  # a frame from pd.read_csv gets fresh checks
        assert read_raw_history(tmp_path / "again.csv").equals(read_raw_history(path))

    def test_edited_row_refused_until_its_check_is_emptied(self, tmp_path):
        path = _history(tmp_path / "runs.csv")
        lines = path.read_text().splitlines()
        lines[2] = lines[2].replace("13.345", "13.5")
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(SchemaError, match="line 3 does not match"):
            load_runs(path)
        lines[2] = lines[2][:lines[2].rindex(",") + 1]  # the user empties the check of the row they edited
        path.write_text("\n".join(lines) + "\n")
        assert load_runs(path)["step_time_s"].tolist() == [12.345, 13.5, 14.345]
        append_runs({**REC, "step_time_s": 0.5}, path)  # the next write seals every row again
        assert all(line.rsplit(",", 1)[1].isdigit() for line in path.read_text().splitlines()[1:])

    def test_old_files_without_checks_still_load(self, tmp_path):
        path = tmp_path / "old.csv"
        path.write_text("model,params,batch_size,gpu_count,gpu_type,step_time_s\nm,1000,8,1,cpu,12.345\n"
                        "m,1000,8,1,cpu,14.")
        assert load_runs(path)["step_time_s"].tolist() == [12.345, 14.0]  # cannot be seen without a check...
        good, problems = recover_runs(path)
        assert len(good) == 2 and len(problems) == 1 and "no line end" in problems[0]  # ...but is reported
        append_runs({**REC, "step_time_s": 0.5}, path)
        assert path.read_text().splitlines()[0].endswith(f'"{ROW_CHECK}"')  # upgraded on the next write

    def test_cut_inside_a_character_is_dropped_by_recover(self, tmp_path):
        path = tmp_path / "runs.csv"
        save_runs(pd.DataFrame([{**REC, "run_id": f"r{i}", "step_time_s": 0.5, "note": "ü" * 3} for i in range(2)]),
                  path)
        data = path.read_bytes()
        path.write_bytes(data[:data.rindex("ü".encode()) + 1])  # half of the last row's last 'ü'
        with pytest.raises(SchemaError, match="not UTF-8"):
            load_runs(path)
        good, problems = recover_runs(path)
        assert list(good["run_id"]) == ["r0"] and len(problems) == 1 and "line 3" in problems[0]

    def test_double_bom_refused(self, tmp_path):
        path = tmp_path / "bom.csv"
        path.write_bytes("\ufeff\ufeffrun_id,model,params,batch_size,gpu_count,gpu_type,step_time_s\n"
                         "a,m,1,1,1,cpu,1\n".encode())
        with pytest.raises(SchemaError, match="byte-order mark"):
            load_runs(path)


class TestSymlinks:
    @pytest.mark.parametrize("suffix", [".csv", ".parquet"])
    def test_append_through_a_link_updates_the_shared_file(self, tmp_path, suffix):
        shared = tmp_path / "shared"
        shared.mkdir()
        real = shared / f"runs{suffix}"
        append_runs({**REC, "step_time_s": 0.5, "run_id": "a"}, real)
        link = tmp_path / f"link{suffix}"
        link.symlink_to(real)
        append_runs({**REC, "step_time_s": 0.6, "run_id": "b"}, link)
        assert link.is_symlink()
        assert list(load_runs(real)["run_id"]) == ["a", "b"]
        assert (shared / f"runs{suffix}.lock").exists() and not (tmp_path / f"link{suffix}.lock").exists()
        save_runs(load_runs(real).head(1), link)
        write_history(read_raw_history(real), link)
        assert link.is_symlink() and list(load_runs(real)["run_id"]) == ["a"]

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


class TestUnknownColumnsKeepTheirText:
    # "nan" became empty and "-0" became 0 (issue 26); the others are text that must stay text as well
    @pytest.mark.parametrize("value", ["nan", "-0", "+1", "007", "1e5", "NaN", "1.50", "0x10"])
    def test_csv_text_survives_appends(self, tmp_path, value):
        path = tmp_path / "runs.csv"
        append_runs({**REC, "step_time_s": 0.5, "note": value}, path)
        append_runs({**REC, "step_time_s": 0.5}, path)
        append_runs({**REC, "step_time_s": 0.5, "note": "other"}, path)
        got = read_raw_history(path)["note"].tolist()
        assert got[0] == value and pd.isna(got[1]) and got[2] == "other"

    def test_csv_numbers_stay_numbers(self, tmp_path):
        path = tmp_path / "runs.csv"
        append_runs([{**REC, "step_time_s": 0.5, "n": 3, "x": 1.5}, {**REC, "step_time_s": 0.5, "n": 4, "x": 2.0}],
                    path)
        append_runs({**REC, "step_time_s": 0.5}, path)
        df = read_raw_history(path)
        assert df["n"].tolist()[:2] == [3, 4] and df["x"].tolist()[:2] == [1.5, 2.0]

    def test_bytes_refused_in_csv(self, tmp_path):
        with pytest.raises(SchemaError, match="'note' holds binary"):
            append_runs({**REC, "step_time_s": 0.5, "note": b"x"}, tmp_path / "runs.csv")

    def test_parquet_text_not_turned_into_bytes(self, tmp_path):
        path = tmp_path / "runs.parquet"
        append_runs({**REC, "step_time_s": 0.5, "note": "x"}, path)
        with pytest.raises(SchemaError, match="'note' would mix bytes and text"):
            append_runs({**REC, "step_time_s": 0.5, "note": b"y"}, path)
        assert read_raw_history(path)["note"].tolist() == ["x"]


NUMERIC = [c.name for c in COLUMNS if c.kind != "str"]


class TestSchemaRanges:
    def test_every_numeric_column_has_a_documented_range(self):
        assert [n for n in NUMERIC if n not in LIMITS] == []
        table = describe_schema().set_index("column")
        assert (table.loc[NUMERIC, "range"] != "").all()
        assert table.loc["compiled", "range"] == "0 or 1"

    @pytest.mark.parametrize("column, value", [
        ("grad_accum", 0), ("grad_accum", -3), ("op_matmul_flops", np.inf), ("op_matmul_flops", -1e308),
        ("op_kernels", -1.0), ("seq_len", -1), ("seq_len", 0), ("compiled", -1), ("compiled", 7),
        ("activation_checkpointing", -1), ("activation_checkpointing", 7), ("op_feature_version", 0)])
    def test_out_of_range_refused_naming_column_row_and_value(self, column, value):
        df = pd.DataFrame([{**REC, "step_time_s": 0.5, "run_id": "ok1"},
                           {**REC, "step_time_s": 0.5, "run_id": "bad1", column: value}])
        with pytest.raises(SchemaError, match=rf"Column '{column}' must .*run_id bad1.*e\.g\. "):
            load_runs(df)

    @pytest.mark.parametrize("column", NUMERIC)
    def test_in_range_accepted(self, column):
        lo, inclusive, hi = LIMITS[column]
        value = lo if inclusive else min(1.0, hi)
        if column in ("params", "batch_size", "gpu_count", "step_time_s", "wall_time_s", "steps"):
            value = 1
        runs = load_runs(pd.DataFrame([{**REC, "step_time_s": 0.5, column: value}]))
        assert float(runs[column].iloc[0]) == value

    def test_checked_on_load_from_a_file(self, tmp_path):
        path = tmp_path / "runs.csv"
        path.write_text("model,params,batch_size,gpu_count,gpu_type,step_time_s,grad_accum\n"
                        "m,1000,8,1,cpu,0.5,1\nm,1000,8,1,cpu,0.5,-1\n")
        with pytest.raises(SchemaError, match=r"'grad_accum'.*row-2.*-1"):
            load_runs(path)

    def test_fits_refuse_an_out_of_range_row(self):
        """One row with grad_accum=-1 moved another model's prediction by 28%; op_matmul_flops=inf broke the ops
        fit. Both are refused before anything is fitted, naming the row."""
        from conftest import make_history

        runs = make_history(n_models=4)
        runs["run_id"] = [f"r{i}" for i in range(len(runs))]
        runs["grad_accum"] = 1
        runs.loc[5, "grad_accum"] = -1
        with pytest.raises(SchemaError, match=r"Column 'grad_accum' must .*run_id r5"):
            perfmodel.fit(runs, method="loglinear", cv=None)
        runs["grad_accum"] = 1
        runs["op_matmul_flops"] = runs["flops_per_sample"] * runs["batch_size"]
        runs.loc[7, "op_matmul_flops"] = np.inf
        with pytest.raises(SchemaError, match=r"Column 'op_matmul_flops' must .*run_id r7"):
            perfmodel.fit(runs, method="ops", cv=None)

    def test_missing_op_value_is_missing_not_refused(self):
        """NaN (or an empty CSV cell) in an optional column is a missing value, not an out-of-range one."""
        runs = load_runs(pd.DataFrame([{**REC, "step_time_s": 0.5, "op_matmul_flops": np.nan},
                                       {**REC, "step_time_s": 0.5, "op_matmul_flops": 1e9}]))
        assert runs["op_matmul_flops"].isna().tolist() == [True, False]


def _rewrite_loop(path: str, stop) -> None:
    rng = np.random.default_rng(0)
    while not stop.is_set():
        n = int(rng.integers(1, 400))
        save_runs(pd.DataFrame([{**REC, "step_time_s": 0.5, "note": "x" * int(rng.integers(1, 50))}] * n), path)


class TestParquetReaders:
    def test_read_uses_one_open_handle(self, tmp_path, monkeypatch):
        path = _history(tmp_path / "runs.parquet")
        seen = []
        real = pd.read_parquet

        def spy(source, *a, **k):
            seen.append(source)
            return real(source, *a, **k)

        monkeypatch.setattr(pd, "read_parquet", spy)
        read_raw_history(path)
        assert len(seen) == 1 and hasattr(seen[0], "read")  # a file object, not a path pyarrow opens again

    @pytest.mark.slow
    def test_no_spurious_errors_while_another_process_rewrites(self, tmp_path):
        path = tmp_path / "runs.parquet"
        save_runs(pd.DataFrame([{**REC, "step_time_s": 0.5}]), path)
        ctx = mp.get_context("fork")
        stop = ctx.Event()
        writer = ctx.Process(target=_rewrite_loop, args=(str(path), stop))
        writer.start()
        errors, reads, deadline = [], 0, time.time() + 4
        try:
            while time.time() < deadline:
                try:
                    read_raw_history(path)
                except Exception as exc:  # noqa: BLE001 - counted
                    errors.append(f"{type(exc).__name__}: {exc}")
                reads += 1
        finally:
            stop.set()
            writer.join(10)
        assert reads > 50 and errors == []


class TestOptionalPyarrow:
    SCRIPT = """
import sys
sys.modules["pyarrow"] = None  # pyarrow is not installed
import perfmodel
from perfmodel.io import append_runs, load_runs
rec = {"model": "m", "params": 1000, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu", "step_time_s": 0.5}
append_runs(rec, sys.argv[1] + "/runs.csv")
assert len(load_runs(sys.argv[1] + "/runs.csv")) == 1
for call in (lambda: append_runs(rec, sys.argv[1] + "/runs.parquet"),
             lambda: load_runs(sys.argv[1] + "/runs.parquet")):
    try:
        call()
    except ImportError as exc:
        assert 'pip install "perfmodel[parquet]"' in str(exc), exc
        assert isinstance(exc, perfmodel.exceptions.PerfModelError)
    else:
        raise AssertionError("no error without pyarrow")
print("ok")
"""

    def test_csv_works_and_parquet_says_what_to_install(self, tmp_path):
        (tmp_path / "runs.parquet").write_bytes(b"PAR1")
        out = subprocess.run([sys.executable, "-c", self.SCRIPT, str(tmp_path)], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": SRC}, timeout=120)
        assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]

    def test_import_perfmodel_does_not_import_pyarrow(self):
        code = "import sys, perfmodel; print('pyarrow' in sys.modules)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": SRC}, timeout=120)
        assert out.stdout.strip() == "False", out.stderr[-2000:]

    def test_pyproject_makes_it_an_extra(self):
        text = (Path(SRC).parent / "pyproject.toml").read_text()
        deps = text.split("dependencies = [", 1)[1].split("]", 1)[0]
        assert "pyarrow" not in deps
        assert 'parquet = ["pyarrow' in text


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
