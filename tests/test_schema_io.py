import os

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel.exceptions import SchemaError, UnknownHardwareError
from perfmodel.io import append_runs, load_runs, read_raw_history, save_runs
from perfmodel.schema import COLUMNS, MINIMAL_COLUMNS, describe_schema


def minimal(**over):
    base = {"model": ["a", "b", "c"], "params": [1000, 2000, 3000], "batch_size": [8, 16, 32],
            "gpu_count": [1, 2, 4], "gpu_type": ["A100", "NVIDIA A100-SXM4-80GB", "cpu"],
            "step_time_s": [0.1, 0.2, 0.3]}
    base.update(over)
    return pd.DataFrame(base)


class TestValidate:
    def test_minimal_history_loads_and_canonicalises(self):
        runs = load_runs(minimal())
        assert list(runs["gpu_type"]) == ["A100-SXM4-80GB", "A100-SXM4-80GB", "cpu"]
        assert list(runs["precision"]) == ["fp32"] * 3
        assert list(runs["run_id"]) == ["row-1", "row-2", "row-3"]  # data rows counted from 1

    def test_wall_time_and_steps_give_step_time(self):
        df = minimal().drop(columns="step_time_s").assign(wall_time_s=[10.0, 20.0, 30.0], steps=[100, 100, 300])
        runs = load_runs(df)
        np.testing.assert_allclose(runs["step_time_s"], [0.1, 0.2, 0.1])

    @pytest.mark.parametrize("column", MINIMAL_COLUMNS)
    def test_missing_column(self, column):
        with pytest.raises(SchemaError, match=f"missing required column.*'{column}'"):
            load_runs(minimal().drop(columns=column))

    def test_missing_time(self):
        with pytest.raises(SchemaError, match="needs a time"):
            load_runs(minimal().drop(columns="step_time_s"))

    def test_wrong_dtype_names_column_and_rows(self):
        with pytest.raises(SchemaError, match=r"Column 'params' must be numeric.*\(rows 2\).*'big'"):
            load_runs(minimal(params=[1000, "big", 3000]))

    def test_nan_names_rows(self):
        with pytest.raises(SchemaError, match=r"Column 'step_time_s' has NaN in 1 row \(run_id row-3\)"):
            load_runs(minimal(step_time_s=[0.1, 0.2, np.nan]))

    @pytest.mark.parametrize("column, values", [("batch_size", [8, 0, 32]), ("gpu_count", [1, -2, 4]),
                                                ("step_time_s", [0.1, -0.2, 0.3]), ("params", [1, 2, 0])])
    def test_non_positive(self, column, values):
        with pytest.raises(SchemaError, match=f"Column '{column}' must be finite and positive"):
            load_runs(minimal(**{column: values}))

    def test_fractional_batch(self):
        with pytest.raises(SchemaError, match="'batch_size' must hold integers"):
            load_runs(minimal(batch_size=[8, 16.5, 32]))

    def test_unknown_gpu_type_names_rows(self):
        with pytest.raises(UnknownHardwareError, match=r"run_id row-2.*Unknown gpu_type 'A1000'"):
            load_runs(minimal(gpu_type=["A100", "A1000", "cpu"]))

    def test_bad_precision(self):
        with pytest.raises(SchemaError, match="'precision' must be one of"):
            load_runs(minimal(precision=["fp32", "int4", "fp32"]))

    def test_empty(self):
        with pytest.raises(SchemaError, match="empty"):
            load_runs(minimal().iloc[:0])

    def test_failed_runs_left_out_unless_asked(self):
        df = minimal(status=["ok", "oom", "ok"], step_time_s=[0.1, np.nan, 0.3])
        assert len(load_runs(df)) == 2
        assert len(load_runs(df, include_failed=True)) == 3

    def test_not_a_dataframe(self):
        with pytest.raises(TypeError, match="path to a .csv/.parquet file or a DataFrame"):
            load_runs(42)

    def test_schema_table_lists_every_column(self):
        assert list(describe_schema()["column"]) == [c.name for c in COLUMNS]


class TestFiles:
    @pytest.mark.parametrize("suffix", [".csv", ".parquet"])
    def test_save_load_round_trip(self, tmp_path, suffix):
        path = tmp_path / f"runs{suffix}"
        save_runs(minimal(), path)
        back = load_runs(path)
        assert list(back["model"]) == ["a", "b", "c"]
        np.testing.assert_allclose(back["step_time_s"], [0.1, 0.2, 0.3])

    @pytest.mark.parametrize("suffix", [".csv", ".parquet"])
    def test_append_creates_then_extends(self, tmp_path, suffix):
        path = tmp_path / f"runs{suffix}"
        append_runs({"model": "a", "params": 10, "batch_size": 1, "gpu_count": 1, "gpu_type": "cpu",
                     "step_time_s": 0.5}, path)
        append_runs(minimal(), path)
        assert len(load_runs(path)) == 4

    def test_interrupted_write_keeps_old_file(self, tmp_path, monkeypatch):
        path = tmp_path / "runs.csv"
        save_runs(minimal(), path)
        before = path.read_bytes()

        def boom(self, *a, **k):
            raise KeyboardInterrupt

        monkeypatch.setattr(os, "fsync", boom)  # inside the atomic write, after the new content is written
        with pytest.raises(KeyboardInterrupt):
            append_runs(minimal(), path)
        monkeypatch.undo()
        assert path.read_bytes() == before
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []

    def test_torn_parquet_raises_naming_file(self, tmp_path):
        path = tmp_path / "runs.parquet"
        save_runs(minimal(), path)
        path.write_bytes(path.read_bytes()[:50])
        with pytest.raises(SchemaError, match="runs.parquet.*not a readable Parquet file"):
            load_runs(path)

    def test_broken_csv_row_raises(self, tmp_path):
        path = tmp_path / "runs.csv"
        save_runs(minimal(), path)
        with open(path, "a") as fh:
            fh.write("x,y,z,1,2,3,4,5,6,7,8,9,10,11,12,13,14\n")
        with pytest.raises(SchemaError, match="runs.csv.*cannot be parsed"):
            load_runs(path)

    def test_bad_suffix(self, tmp_path):
        with pytest.raises(ValueError, match="must end in .csv or .parquet"):
            save_runs(minimal(), tmp_path / "runs.xlsx")

    def test_missing_file(self, tmp_path):
        with pytest.raises(FileNotFoundError, match="does not exist"):
            read_raw_history(tmp_path / "nope.csv")

    def test_top_level_exports(self):
        assert perfmodel.load_runs is load_runs


def test_the_old_raw_reader_name_still_reads_and_says_it_is_deprecated(tmp_path):
    from conftest import make_history

    import perfmodel.io as pio

    path = save_runs(make_history(n_models=1), tmp_path / "runs.csv")
    with pytest.warns(DeprecationWarning, match="renamed perfmodel.io.read_raw_history"):
        old = pio.read_history(path)
    pd.testing.assert_frame_equal(old, read_raw_history(path))
