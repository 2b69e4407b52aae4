"""perfmodel.io: history files read, written and appended (CSV and Parquet).

Exact round trips, malformed and damaged files, row checks, symbolic links, atomic and concurrent writes, writers
killed mid-write, Parquet readers racing a rewrite, and pyarrow as an optional dependency.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SRC, make_history
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfmodel._atomic import atomic_write, clean_stale_temps
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

# ----------------------------------------------------------------------------------------------------------
# Issue 14 (no silent corruption) #1: CSV round-trip fidelity; malformed files refused with a reason.
BASE = {"params": 1000, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu", "step_time_s": 0.25}


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


# ----------------------------------------------------------------------------------------------------------
# Issue 14 #3: atomic writes; stale temporary files cleaned, live ones kept.
class TestAtomicSaves:
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


# ----------------------------------------------------------------------------------------------------------
# Issue 26 (history files): nothing lost, nothing silently changed: a cut last number, appends through a
# symbolic link, unknown text columns that changed on the next append, Parquet readers racing a rewrite,
# pyarrow as an optional dependency.
REC = {"model": "m", "params": 1000, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu"}


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


# ----------------------------------------------------------------------------------------------------------
# Fault injection: concurrent appenders, kills mid-write, damaged files, fuzzed input.
def record(i, tag="w"):
    return {"run_id": f"{tag}-{i}", "model": "m", "params": 1000 + i, "batch_size": 8, "gpu_count": 1,
            "gpu_type": "cpu", "step_time_s": 0.1 + i * 1e-3}


def _append_many(args):
    path, tag, n = args
    for i in range(n):
        append_runs(record(i, tag), path)


class TestNoLostRuns:
    @pytest.mark.parametrize("suffix", [".csv", ".parquet"])
    def test_concurrent_appenders_each_record_exactly_once(self, tmp_path, suffix):
        path = str(tmp_path / f"runs{suffix}")
        with mp.get_context("spawn").Pool(4) as pool:
            pool.map(_append_many, [(path, f"p{k}", 15) for k in range(4)])
        runs = load_runs(path)
        assert len(runs) == 60 and runs["run_id"].is_unique
        assert set(runs["run_id"]) == {f"p{k}-{i}" for k in range(4) for i in range(15)}

    def test_kill_9_mid_append_leaves_a_valid_history(self, tmp_path):
        path = tmp_path / "runs.parquet"
        save_runs(make_history(n_models=40), path)  # big enough that each rewrite takes a while
        base = len(load_runs(path))
        code = textwrap.dedent(f"""
            import sys; sys.path.insert(0, {SRC!r})
            from perfmodel.io import append_runs
            for i in range(100000):
                append_runs({{"run_id": f"k{{sys.argv[1]}}-{{i}}", "model": "m", "params": 10, "batch_size": 1, "gpu_count": 1,
                              "gpu_type": "cpu", "step_time_s": 0.5}}, {str(path)!r})
                print(i, flush=True)
        """)
        for attempt in range(3):
            proc = subprocess.Popen([sys.executable, "-c", code, str(attempt)], stdout=subprocess.PIPE, text=True)
            done = -1
            deadline = time.time() + 60
            while done < 3 + attempt and time.time() < deadline:
                done = int(proc.stdout.readline())
            time.sleep(0.05 * attempt)
            proc.kill()  # SIGKILL: no cleanup, maybe mid-write
            proc.wait()
            runs = load_runs(path)  # still a valid file
            new = runs[runs["run_id"].str.startswith("k-")]
            assert new["run_id"].is_unique
            # every append that reported completion is there; at most one more landed before the kill
            assert base + done + 1 <= len(runs)
            base = len(runs)
            leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
            for p in leftovers:  # an interrupted write leaves only its own temp file, never a torn history
                p.unlink()


class TestDamagedFiles:
    def test_recover_csv_reports_dropped_rows(self, tmp_path):
        path = tmp_path / "runs.csv"
        save_runs(pd.DataFrame([record(i) for i in range(5)]), path)
        lines = path.read_text().splitlines()
        lines.insert(3, "broken,row,with,far,too,many,fields,1,2,3,4,5,6,7,8,9,10,11")
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(SchemaError, match="cannot be parsed"):
            load_runs(path)
        good, problems = recover_runs(path)
        assert len(load_runs(good)) == 5 and len(problems) == 1 and "broken" in problems[0]

    def test_recover_parquet_without_footer_says_so(self, tmp_path):
        path = tmp_path / "runs.parquet"
        save_runs(pd.DataFrame([record(i) for i in range(5)]), path)
        path.write_bytes(path.read_bytes()[:-20])
        with pytest.raises(SchemaError, match="footer is unreadable"):
            recover_runs(path)

    def test_recover_intact_parquet(self, tmp_path):
        path = tmp_path / "runs.parquet"
        save_runs(pd.DataFrame([record(i) for i in range(5)]), path)
        good, problems = recover_runs(path)
        assert len(good) == 5 and problems == []


COLUMNS = ["model", "params", "batch_size", "gpu_count", "gpu_type", "step_time_s", "precision", "status",
           "wall_time_s", "steps", "flops_per_sample", "run_id", "ünïcode"]
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True, allow_infinity=True),
                   st.text(max_size=8), st.sampled_from(["A100", "cpu", "H100", "fp32", "bf16", "ok", "oom", "A1000"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.fixed_dictionaries({}, optional={c: VALUES for c in COLUMNS}), min_size=0, max_size=6))
def test_fuzz_history_loader(rows):
    df = pd.DataFrame(rows)
    try:
        runs = load_runs(df)
    except (ValueError, TypeError) as exc:
        assert str(exc)  # a message naming the problem
        return
    t = runs["step_time_s"].to_numpy(dtype=float)
    assert len(runs) > 0 and np.all(np.isfinite(t)) and np.all(t > 0)
