import math
import os

import numpy as np
import pandas as pd
import pytest
from conftest import make_history

import perfmodel
from perfmodel.exceptions import (
    SchemaError,
    UnknownHardwareError,
)
from perfmodel.io import (
    append_runs,
    load_runs,
    read_raw_history,
    save_runs,
)
from perfmodel.schema import COLUMNS, LIMITS, MINIMAL_COLUMNS, describe_schema


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


# ----------------------------------------------------------------------------------------------------------
# Issue 14 (no silent corruption) #5 and issue 26 #11: every history column is checked: values in range,
# flags 0 or 1, integers that fit.
class TestInputs:
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

    def test_load_runs_params_beyond_int64(self):
        """load_runs with params=2**63 raised a pandas TypeError (it does not fit int64)."""
        from perfmodel.exceptions import SchemaError
        from perfmodel.io import load_runs

        row = {"model": "m", "params": 2**63, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu", "step_time_s": 0.5}
        with pytest.raises(SchemaError, match="Column 'params' holds integers too large to store"):
            load_runs(pd.DataFrame([row]))


# ----------------------------------------------------------------------------------------------------------
# Issue 26: every numeric column of the schema has a documented range, checked on load and before a fit.
REC = {"model": "m", "params": 1000, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu"}


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


def test_a_steps_global_batch_is_stated_or_the_passes_of_every_device():
    from perfmodel.schema import step_global_batch

    runs = pd.DataFrame({"batch_size": [4.0, 4.0, 64.0, 8.0], "gpu_count": [8, 8, 8, 2],
                         "grad_accum": [16, None, 16, 1], "global_batch_size": [None, None, 512, None]})
    # batch x accumulation x devices; accumulation 1 where missing; a stated global batch wins
    assert step_global_batch(runs).tolist() == [512.0, 32.0, 512.0, 16.0]
    assert step_global_batch(runs[["batch_size", "gpu_count"]]).tolist() == [32.0, 32.0, 512.0, 16.0]
