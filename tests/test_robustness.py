"""Issue 26 #11: numbers outside the documented range are refused with a ValueError/TypeError naming the
parameter — never an OverflowError, a MemoryError or a NaN result."""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import pytest

from perfmodel import plan
from perfmodel._validation import MAX_INT, check_nonnegative_float, check_positive_float, check_positive_int


class TestValidationHelpers:
    @pytest.mark.parametrize("value", [10**400, 2**63, -(10**5000), 10**5000], ids=["1e400", "2^63", "-1e5000",
                                                                                  "1e5000"])
    def test_huge_ints_are_value_errors(self, value):
        with pytest.raises(ValueError, match="'steps' parameter of f"):
            check_positive_int(value, "steps", "f")
        if abs(value) > 1e308:
            with pytest.raises(ValueError, match="'x' parameter of f must be a finite positive number"):
                check_positive_float(abs(value), "x", "f")

    def test_int64_range_and_numpy_widths(self):
        assert check_positive_int(MAX_INT, "n", "f") == MAX_INT
        for v in (np.uint8(200), np.int16(7), np.uint64(2**63 - 1), np.float32(4.0)):
            out = check_positive_int(v, "n", "f")
            assert type(out) is int and out == int(v)
        with pytest.raises(ValueError, match="at most 9.223e"):
            check_positive_int(np.uint64(2**63), "n", "f")

    def test_maximum_and_nonnegative(self):
        with pytest.raises(ValueError, match="at most 3"):
            check_positive_float(4.0, "x", "f", maximum=3)
        assert check_nonnegative_float(0, "x", "f") == 0.0
        for bad in (float("nan"), float("inf"), -1e-9, 10**400):
            with pytest.raises(ValueError, match="'x' parameter of f"):
                check_nonnegative_float(bad, "x", "f")
        with pytest.raises(TypeError, match="'x' parameter of f"):
            check_nonnegative_float("1", "x", "f")


class TestPredictSteps:
    def test_steps_beyond_int64_is_a_value_error(self):
        import perfmodel

        with pytest.raises(ValueError, match="'steps' parameter of predict_training_time.*at most"):
            perfmodel.predict_training_time("gpt-m", batch_size=32, gpu_type="cpu", steps=10**400)


class TestErlangC:
    def test_known_values(self):
        r = plan.erlang_c(2.0, 1.0, 3)
        assert r.p_wait == pytest.approx(4 / 9) and r.mean_wait == pytest.approx(4 / 9)
        assert plan.erlang_c(0.5, 1.0, 1).p_wait == pytest.approx(0.5)  # M/M/1: p_wait = rho

    def test_many_servers_in_log_space(self):
        """erlang_c(1000, 1, 2000) was NaN (a^c/c! overflowed)."""
        r = plan.erlang_c(1000, 1, 2000)
        assert all(math.isfinite(v) for v in r.to_dict().values())
        assert 0 <= r.p_wait < 1e-100 and r.mean_response == pytest.approx(1.0)
        r = plan.erlang_c(999, 1, 1000)
        assert r.p_wait == pytest.approx(0.96123926040846, rel=1e-10)  # log-sum-exp reference

    def test_no_loop_per_server(self):
        t0 = time.perf_counter()
        r = plan.erlang_c(9e8, 1.0, 10**9)
        assert time.perf_counter() - t0 < 0.5 and math.isfinite(r.p_wait)
        with pytest.raises(ValueError, match="'servers' parameter of erlang_c.*at most"):
            plan.erlang_c(1.0, 1.0, 10**12)

    def test_overload_and_overflow(self):
        with pytest.raises(ValueError, match=">= 1"):
            plan.erlang_c(1e300, 1e300, 3)
        assert plan.erlang_c(1e-300, 1e-300, 3).p_wait == 0.0


class TestSimulateQueue:
    def test_empty_jobs(self):
        for jobs in ([], pd.DataFrame(columns=["arrival", "duration"])):
            with pytest.raises(ValueError, match="'jobs' parameter of simulate_queue is empty"):
                plan.simulate_queue(servers=2, jobs=jobs)

    @pytest.mark.parametrize("fraction", [1.0, 1.5, -0.1, float("nan")])
    def test_warmup_fraction_out_of_range(self, fraction):
        with pytest.raises(ValueError, match="'warmup_fraction' parameter of simulate_queue"):
            plan.simulate_queue(2.0, 1.0, 3, n_arrivals=100, warmup_fraction=fraction)

    def test_almost_all_warmup_still_averages_one_job(self):
        r = plan.simulate_queue(2.0, 1.0, 3, n_arrivals=50, warmup_fraction=0.999)
        assert math.isfinite(r.mean_wait) and math.isfinite(r.mean_response)

    def test_n_arrivals_is_capped_with_a_message(self):
        """simulate_queue(n_arrivals=10**9) ran out of memory."""
        with pytest.raises(ValueError, match="'n_arrivals' parameter of simulate_queue.*at most 1e\\+07"):
            plan.simulate_queue(2.0, 1.0, 3, n_arrivals=10**9)

    @pytest.mark.parametrize("kwargs", [{"arrival_rate": 1e-308}, {"service_time": 1e308}], ids=["rate", "service"])
    def test_drawn_times_beyond_floats(self, kwargs):
        """arrival_rate=1e-308 drew infinite arrival times and the event loop raised IndexError."""
        import warnings

        args = {"arrival_rate": 2.0, "service_time": 1.0, "servers": 3, "n_arrivals": 200, **kwargs}
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no RuntimeWarning on the way either
            with pytest.raises(ValueError, match="simulate_queue: the job times are beyond the numeric range"):
                plan.simulate_queue(**args)

    def test_jobs_are_sorted_as_numbers(self):
        """A column mixing numbers and numeric text raised a raw TypeError from sorting ('<' between float and
        str); the arrivals are read as numbers first, then sorted."""
        r = plan.simulate_queue(servers=1, jobs={"arrival": [5.0, "1"], "duration": [1.0, 10.0]})
        assert r.mean_wait == pytest.approx(3.0)  # the job arriving at 1 runs to 11; the one at 5 waits 6

    def test_bad_job_values(self):
        with pytest.raises(ValueError, match="must be numbers"):
            plan.simulate_queue(servers=2, jobs={"arrival": ["a"], "duration": [1.0]})
        with pytest.raises(ValueError, match="whole numbers"):
            plan.simulate_queue(servers=2, jobs={"arrival": [0.0], "duration": [1.0], "size": [1.5]})
        with pytest.raises(ValueError, match="beyond the numeric range"):
            plan.simulate_queue(servers=1, jobs={"arrival": [0.0, 0.0], "duration": [1e308, 1e308]})


class TestCost:
    @pytest.mark.parametrize("rate", [float("nan"), float("inf"), -0.1])
    def test_interruptions_per_hour(self, rate):
        """estimate_cost(..., interruptions_per_hour=nan) returned NaN dollars."""
        with pytest.raises(ValueError, match="'interruptions_per_hour' parameter of estimate_cost"):
            plan.estimate_cost(seconds=3600, gpu_type="cpu", gpu_count=1, spot=True, interruptions_per_hour=rate)

    @pytest.mark.parametrize("count", [float("inf"), 1.5])
    def test_gpu_count_is_not_truncated(self, count):
        """gpu_count=inf raised OverflowError (int() before the check) and 1.5 was billed as 1 device."""
        with pytest.raises(TypeError, match="'gpu_count' parameter of estimate_cost must be a positive int"):
            plan.estimate_cost(seconds=3600, gpu_type="cpu", gpu_count=count)
        assert plan.estimate_cost(seconds=3600, gpu_type="cpu", gpu_count=2.0).devices == 2

    def test_bounds_are_checked(self):
        with pytest.raises(ValueError, match="'upper' parameter of estimate_cost"):
            plan.estimate_cost(seconds=3600, upper=float("nan"), gpu_type="cpu")
        with pytest.raises(ValueError, match="'seconds' parameter"):
            plan.estimate_cost(seconds=10**400, gpu_type="cpu")
        with pytest.raises(ValueError, match="beyond the numeric range"):
            plan.estimate_cost(seconds=1e307, gpu_type="cpu", gpu_count=10**9)


class TestOnline:
    @pytest.mark.parametrize("kwargs, name", [
        ({"drift": 1e300}, "drift"), ({"drift": float("nan")}, "drift"), ({"step_noise": 1e300}, "step_noise"),
        ({"drift_steps": float("inf")}, "drift_steps"), ({"total_steps": 10**400}, "total_steps"),
    ], ids=["drift", "drift-nan", "step_noise", "drift_steps", "total_steps"])
    def test_out_of_range_parameters(self, kwargs, name):
        """OnlineEstimator(..., drift=1e300) raised OverflowError."""
        args = {"prior_step_seconds": 1.0, "prior_lower": 0.5, "prior_upper": 2.0, "total_steps": 100, **kwargs}
        with pytest.raises(ValueError, match=f"'{name}' parameter of OnlineEstimator"):
            plan.OnlineEstimator(**args).estimate()

    @pytest.mark.parametrize("level", [1e-308, 1e-15])
    def test_prior_confidence_near_zero(self, level):
        """prior_confidence=1e-308 raised ZeroDivisionError: (1 + 1e-308) / 2 is 0.5, a zero-width quantile."""
        with pytest.raises(ValueError, match="'prior_confidence' parameter of OnlineEstimator must be at least"):
            plan.OnlineEstimator(1.0, 0.5, 2.0, 100, prior_confidence=level)

    def test_extremes_inside_the_range_are_finite(self):
        est = plan.OnlineEstimator(1e7, 1e-9, 1e7, 10**12, drift=3.0, step_noise=3.0)
        for t in (1e-9, 1e7, 1.0):
            est.update(t)
        out = est.estimate()
        assert all(math.isfinite(v) for v in (out.total, out.total_lower, out.total_upper))
        for bad in (1e300, 1e-300):
            with pytest.raises(ValueError, match="'step_seconds' parameter"):
                est.update(bad)

    def test_an_interval_beyond_floats_is_a_value_error(self):
        est = plan.OnlineEstimator(1.0, 1e-9, 1e7, 10**12, prior_confidence=1e-6, confidence=0.999999)
        with pytest.raises(ValueError, match="beyond the numeric range"):
            est.estimate()


class TestPredictInputs:
    def test_params_beyond_floats_is_a_value_error(self):
        """{"params": 10**400} raised OverflowError (int too large to convert to float)."""
        import perfmodel

        with pytest.raises(ValueError, match="'params' parameter of the model spec of predict_training_time"):
            perfmodel.predict_training_time({"params": 10**400}, batch_size=8, gpu_type="cpu", steps=10)

    def test_load_runs_params_beyond_int64(self):
        """load_runs with params=2**63 raised a pandas TypeError (it does not fit int64)."""
        from perfmodel.exceptions import SchemaError
        from perfmodel.io import load_runs

        row = {"model": "m", "params": 2**63, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu", "step_time_s": 0.5}
        with pytest.raises(SchemaError, match="Column 'params' holds integers too large to store"):
            load_runs(pd.DataFrame([row]))

    def test_scaling_from_model_with_a_uint8_batch(self):
        """The issue's fuzz reported an OverflowError for a numpy uint8 batch in scaling_from_model: numpy
        integers of any width give the same table as Python ints (no arithmetic in the narrow type)."""
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for mode in ("weak", "strong"):
                plain = plan.scaling_from_model("gpt-s", batch_size=200, gpu_type="cpu", gpu_counts=(1, 2, 8),
                                                mode=mode)
                narrow = plan.scaling_from_model("gpt-s", batch_size=np.uint8(200), gpu_type="cpu",
                                                 gpu_counts=np.array([1, 2, 8], dtype=np.uint8), mode=mode)
                pd.testing.assert_frame_equal(narrow, plain)
        assert plain["global_batch"].tolist() == [200, 200, 200] and narrow["batch_size"].tolist() == [200, 100, 25]
        assert np.isfinite(narrow.select_dtypes("number").to_numpy(dtype=float)).all()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # np.uint8(200) // 300 raised OverflowError ("Python integer 300 out of bounds for uint8")
            many = plan.scaling_from_model("gpt-s", batch_size=np.uint8(200), gpu_type="cpu", gpu_counts=(300,),
                                           mode="strong")
        assert many["batch_size"].tolist() == [200, 1] and many["batch_size"].dtype == np.int64

    @pytest.mark.parametrize("kwargs, exc, match", [
        ({"batch_size": 10**400}, ValueError, "'batch_size' parameter of scaling_from_model.*at most"),
        ({"batch_size": 0}, ValueError, "'batch_size' parameter of scaling_from_model must be a positive int"),
        ({"batch_size": "8"}, TypeError, "'batch_size' parameter of scaling_from_model must be a positive int"),
        ({"threshold": float("nan")}, ValueError, "'threshold' parameter of scaling_from_model"),
        ({"mode": "both"}, ValueError, "'mode' parameter of scaling_from_model")],
        ids=["1e400", "zero", "text", "nan-threshold", "mode"])
    def test_scaling_from_model_checks_its_arguments_first(self, kwargs, exc, match):
        """10**400 raised OverflowError and '8' a NumPy TypeError about ufuncs, after a fit."""
        with pytest.raises(exc, match=match):
            plan.scaling_from_model("gpt-s", **{"batch_size": 8, "gpu_type": "cpu", **kwargs})


def test_linear_never_answers_zero_for_a_measured_configuration():
    """method='linear' answered 0 s/step (with an ExtrapolationWarning) for a configuration measured 4 times at
    0.039 s. A measured configuration must get a positive time, or a refusal that says why."""
    import warnings

    import perfmodel

    rows = [{"model": "small", "params": 1000, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu",
             "step_time_s": 0.039 + 0.0005 * i} for i in range(4)]
    rng = np.random.default_rng(0)
    for m in range(6):
        params = int(10 ** rng.uniform(6, 8))
        rows += [{"model": f"big{m}", "params": params, "batch_size": b, "gpu_count": n, "gpu_type": "cpu",
                  "step_time_s": 1e-9 * params * b * n} for b in (8, 16, 32, 64) for n in (1, 2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the linear fit crosses zero at the small model: refused, naming the method and what to use instead
        with pytest.raises(perfmodel.PredictionError, match="linear fit predicts a non-positive step time.*log scale"):
            perfmodel.predict_training_time("small", batch_size=8, gpu_type="cpu", steps=100,
                                            history=pd.DataFrame(rows), method="linear")
        # a log-scale method answers the same query with a positive time
        r = perfmodel.predict_training_time("small", batch_size=8, gpu_type="cpu", steps=100,
                                            history=pd.DataFrame(rows), method="loglinear")
        # in predict_many the refused row is named as the caller counts it (the third of three)
        q = pd.DataFrame({"model": ["big0", "big1", "small"], "batch_size": [64, 64, 8], "gpu_count": 1,
                          "gpu_type": "cpu", "steps": 100})
        with pytest.raises(perfmodel.PredictionError, match=r"^predict_many: .*row 3 \(counting from 1\)"):
            perfmodel.predict_many(q, history=pd.DataFrame(rows), method="linear")
    assert r.step_seconds > 0


class TestAnalysisThresholds:
    """Thresholds of scaling and diagnose are checked first: 10**400 raised OverflowError, '3' and None a raw
    TypeError from a comparison deep inside."""

    @pytest.mark.parametrize("value, exc", [(10**400, ValueError), (float("nan"), ValueError), (-1.0, ValueError),
                                            ("3", TypeError), (None, TypeError)],
                             ids=["1e400", "nan", "negative", "text", "none"])
    def test_scaling_threshold(self, value, exc):
        from conftest import make_history

        from perfmodel import analysis

        with pytest.raises(exc, match="'threshold' parameter of scaling"):
            analysis.scaling(make_history(n_models=2), threshold=value)

    @pytest.mark.parametrize("name, value, exc", [
        ("host_peak_flops", 10**400, ValueError), ("host_peak_flops", "3", TypeError),
        ("util_threshold", 10**400, ValueError), ("util_threshold", 150.0, ValueError),
        ("gap_threshold", float("inf"), ValueError), ("efficiency_threshold", None, TypeError)])
    def test_diagnose_thresholds(self, name, value, exc):
        from conftest import make_history

        from perfmodel import analysis

        with pytest.raises(exc, match=f"'{name}' parameter of diagnose"):
            analysis.diagnose(make_history(n_models=2), **{name: value})
        assert analysis.diagnose(make_history(n_models=2), host_peak_flops=1e12).table["mfu"].notna().all()


class TestValidationEdges:
    """issue 26: a confidence beyond the float range raised OverflowError; True passed as a count of 1."""

    def test_confidence_beyond_floats_is_a_value_error(self):
        import perfmodel

        with pytest.raises(ValueError, match="'confidence' parameter of predict_training_time must be a float"):
            perfmodel.predict_training_time("gpt-m", batch_size=32, gpu_type="cpu", steps=10, confidence=10**400)

    def test_a_bool_is_not_a_count(self):
        import perfmodel

        with pytest.raises(TypeError, match="'gpu_count' parameter of predict_training_time must be a positive int"):
            perfmodel.predict_training_time("gpt-m", batch_size=32, gpu_type="cpu", gpu_count=True, steps=10)
