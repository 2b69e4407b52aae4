"""A measured run whose timing says the machine was busy warns and records why (``timing_flag``)."""

from __future__ import annotations

import itertools
import warnings

import pandas as pd
import pytest

import perfmodel
from perfmodel.exceptions import DataQualityWarning, NoisyTimingWarning
from perfmodel.io import load_runs
from perfmodel.measure import _timing, sweep
from perfmodel.measure import recorder as recorder_module
from perfmodel.measure._timing import (
    NOISY_REPEAT_SPREAD,
    NOISY_STEP_CV,
    config_key,
    summarise_steps,
    timing_flag,
)


class TestTimingFlag:
    def test_a_steady_run_has_no_flag(self):
        assert timing_flag(0.05) == ""
        assert timing_flag(0.05, 1.0, [1.1, 0.95]) == ""
        assert summarise_steps([1.0, 1.02, 0.98, 1.01]).to_record()["timing_flag"] == ""

    def test_a_high_step_cv_is_flagged(self):
        assert timing_flag(NOISY_STEP_CV * 1.01) == "high_step_cv"
        assert timing_flag(NOISY_STEP_CV) == ""  # the limit itself is not above it
        times = [0.01] * 4 + [0.5]  # one step 50x slower: something else ran
        assert summarise_steps(times).to_record()["timing_flag"] == "high_step_cv"

    def test_a_repeat_far_from_an_earlier_one_is_flagged(self):
        assert timing_flag(0.05, 1.0, [1.0 + NOISY_REPEAT_SPREAD * 1.01]) == "repeat_spread"
        assert timing_flag(0.05, 1.0 + NOISY_REPEAT_SPREAD * 1.01, [1.0]) == "repeat_spread"  # either direction
        assert timing_flag(0.05, 1.0, [1.0 + NOISY_REPEAT_SPREAD * 0.99]) == ""
        assert timing_flag(1.0, 1.0, [3.0]) == "high_step_cv;repeat_spread"

    def test_missing_values_flag_nothing(self):
        assert timing_flag(None) == timing_flag(float("nan"), float("nan"), [1.0]) == ""
        assert timing_flag(0.05, 1.0, [None, float("nan")]) == ""

    def test_the_configuration_key_ignores_the_repeat_and_how_numbers_were_read_back(self):
        a = {"model": "m", "batch_size": 32, "gpu_count": 1, "gpu_type": "cpu", "repeat": 0, "seq_len": None}
        b = dict(a, batch_size=32.0, repeat=2, seq_len=float("nan"))  # a CSV read back gives floats and NaN
        assert config_key(a) == config_key(b)
        assert config_key(a) != config_key(dict(a, batch_size=64))

    def test_the_warning_is_a_data_quality_warning(self):
        assert issubclass(NoisyTimingWarning, DataQualityWarning)


class _Clock:
    """A stand-in for time.perf_counter that advances by the given step durations."""

    def __init__(self, durations):
        self._t = 0.0
        self._next = iter(itertools.chain([0.0], durations))

    def __call__(self):
        self._t += next(self._next, 0.0)
        return self._t


def _record(tmp_path, monkeypatch, durations, name="busy-net"):
    monkeypatch.setattr(recorder_module.time, "perf_counter", _Clock(durations))
    out = tmp_path / "h.csv"
    with perfmodel.record(name, params=1000, batch_size=8, gpu_type="cpu", output=out, warmup_steps=0) as rec:
        for _ in durations:
            rec.step()
    return rec, out


class TestRecorder:
    def test_a_busy_loop_warns_and_records_the_flag(self, tmp_path, monkeypatch):
        durations = [0.5 if i % 5 == 0 else 0.01 for i in range(30)]  # every 5th step 50x slower
        with pytest.warns(NoisyTimingWarning, match=r"busy-net: .*CV 1\.\d+ .*machine was likely busy"):
            rec, out = _record(tmp_path, monkeypatch, durations)
        assert rec.result["timing_flag"] == "high_step_cv"
        assert load_runs(out).loc[0, "timing_flag"] == "high_step_cv"

    def test_a_steady_loop_does_not_warn(self, tmp_path, monkeypatch):
        with warnings.catch_warnings():
            warnings.simplefilter("error", NoisyTimingWarning)
            rec, out = _record(tmp_path, monkeypatch, [0.01, 0.0102, 0.0099, 0.0101] * 5, name="steady")
        assert rec.result["timing_flag"] == ""
        assert pd.isna(load_runs(out).loc[0, "timing_flag"])  # empty: nothing says the machine was busy


class TestSweep:
    def _ok(self, median, cv=0.05, repeat=0):
        return {"status": "ok", "model": "cnn-s", "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu",
                "precision": "fp32", "repeat": repeat, "step_time_cv": cv, "step_time_median_s": median}

    def test_a_repeat_far_from_the_first_is_flagged_and_warned(self):
        medians: dict = {}
        first = self._ok(1.0)
        assert sweep.flag_timing(first, medians) is False and first["timing_flag"] == ""
        second = self._ok(1.1, repeat=1)
        assert sweep.flag_timing(second, medians) is False
        with pytest.warns(NoisyTimingWarning, match=r"cnn-s batch=8 n=1 repeat 2: its median step time 2\.5 s"):
            third = self._ok(2.5, repeat=2)
            assert sweep.flag_timing(third, medians) is True
        assert third["timing_flag"] == "repeat_spread"
        assert medians[config_key(first)] == [1.0, 1.1, 2.5]

    def test_other_configurations_and_failed_runs_are_not_compared(self):
        medians: dict = {}
        sweep.flag_timing(self._ok(1.0), medians)
        other = dict(self._ok(3.0), batch_size=64)
        assert sweep.flag_timing(other, medians) is False and other["timing_flag"] == ""
        failed = {"status": "oom", "model": "cnn-s"}
        assert sweep.flag_timing(failed, medians) is False and "timing_flag" not in failed

    def test_runs_already_in_the_history_count_as_earlier_repeats(self, tmp_path):
        out = tmp_path / "h.csv"
        perfmodel.append_runs([dict(self._ok(1.0), params=1000, step_time_s=1.0, run_id="a"),
                               dict(self._ok(9.0), status="oom", params=1000, run_id="b")], out)
        medians = sweep.repeat_medians(out)
        assert list(medians.values()) == [[1.0]]  # the failed run is not a repeat
        with pytest.warns(NoisyTimingWarning):
            assert sweep.flag_timing(self._ok(2.0, repeat=1), medians) is True


def test_the_schema_documents_the_column():
    from perfmodel.schema import COLUMNS

    col = {c.name: c for c in COLUMNS}["timing_flag"]
    assert col.kind == "str" and "high_step_cv" in col.description and "repeat_spread" in col.description
    assert str(_timing.NOISY_STEP_CV) in col.description


def test_one_busy_repeat_does_not_make_the_steady_ones_busy():
    medians: dict = {}
    flags = []
    for m in (1.0, 2.1, 1.01, 0.99, 1.0):
        rec = {"status": "ok", "model": "m", "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu",
               "step_time_cv": 0.05, "step_time_median_s": m}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sweep.flag_timing(rec, medians)
        flags.append(rec["timing_flag"])
    assert flags == ["", "repeat_spread", "", "", ""]


def test_runs_on_another_cpu_model_or_node_count_are_not_repeats():
    a = {"model": "m", "batch_size": 8, "gpu_count": 8, "gpu_type": "cpu", "nodes": 1, "hostname": "n1",
         "cpu_model": "Xeon A"}
    assert config_key(a) != config_key(dict(a, cpu_model="EPYC B"))  # every CPU is gpu_type "cpu"
    assert config_key(a) != config_key(dict(a, nodes=2))
    assert config_key(a) == config_key(dict(a, hostname="n7"))  # the same device on another host: a repeat
    gpu = dict(a, gpu_type="H100-SXM5-80GB")
    assert config_key(gpu) == config_key(dict(gpu, cpu_model="EPYC B"))  # the host CPU does not make a GPU run
