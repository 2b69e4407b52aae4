import json
import math
import time
import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from conftest import make_history

import perfmodel
from perfmodel import ExtrapolationWarning, TrainingTimeModel, plan, predict_training_time
from perfmodel.plan import (
    OnlineEstimator,
    diagnose,
    erlang_c,
    estimate_cost,
    load_prices,
    price_per_hour,
    recommend,
    scaling,
    scaling_from_model,
    simulate_queue,
)

PRICES = pd.DataFrame({"gpu_type": ["A100", "A100", "H100", "cpu"], "provider": ["x", "y", "x", "x"],
                       "on_demand_usd_per_hour": [2.0, 3.0, 4.0, 0.05], "spot_usd_per_hour": [1.0, None, 2.0, 0.02]})


class TestErlangC:
    @pytest.mark.parametrize("lam, s, c, p_wait, wq", [
        (2.0, 1.0, 3, 4 / 9, 4 / 9),          # a=2, c=3: P_W = 4/9, Wq = P_W / (c mu - lam)
        (0.5, 1.0, 1, 0.5, 1.0),              # M/M/1: P_W = rho, Wq = rho / (mu - lam)
        (9.0, 1.0, 10, 0.6687, 0.6687),       # a=9, c=10 (tables: P_W ~ 0.669)
    ])
    def test_textbook_values(self, lam, s, c, p_wait, wq):
        r = erlang_c(lam, s, c)
        assert r.p_wait == pytest.approx(p_wait, abs=1e-3)
        assert r.mean_wait == pytest.approx(wq, abs=1e-3)
        assert r.mean_response == pytest.approx(wq + s, abs=1e-3) and r.utilisation == pytest.approx(lam * s / c)

    def test_overloaded(self):
        with pytest.raises(ValueError, match=r"utilisation .* = 1 >= 1"):
            erlang_c(3.0, 1.0, 3)

    @pytest.mark.parametrize("kwargs, match", [({"arrival_rate": -1}, "'arrival_rate'"),
                                               ({"servers": 0}, "'servers'"), ({"service_time": 0}, "'service_time'")])
    def test_bad_input(self, kwargs, match):
        args = {"arrival_rate": 1.0, "service_time": 1.0, "servers": 2, **kwargs}
        with pytest.raises((ValueError, TypeError), match=match):
            erlang_c(**args)

    # Issue 26 #11: numbers outside the documented range are refused, never an OverflowError or a NaN.
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
        # the reference in exact rational arithmetic: a^c/c!·c/(c−a) over Σ_{k<c} a^k/k! + that
        a, c = 999, 1000
        top = Fraction(a**c, math.factorial(c)) * Fraction(c, c - a)
        below = sum(Fraction(a**k, math.factorial(k)) for k in range(c))
        assert r.p_wait == pytest.approx(float(top / (below + top)), rel=1e-10)

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


class TestSimulation:
    def test_fcfs_agrees_with_erlang_c(self):
        exact = erlang_c(2.0, 1.0, 3)
        sim = simulate_queue(2.0, 1.0, 3, policy="fcfs", n_arrivals=100_000, seed=1)
        assert abs(sim.mean_wait - exact.mean_wait) < 4 * sim.stderr_wait
        assert sim.utilisation == pytest.approx(exact.utilisation, abs=0.02)

    def test_sjf_waits_less_than_fcfs(self):
        fcfs = simulate_queue(2.0, 1.0, 3, policy="fcfs", n_arrivals=20_000, seed=2)
        sjf = simulate_queue(2.0, 1.0, 3, policy="sjf", n_arrivals=20_000, seed=2)
        assert sjf.mean_wait < fcfs.mean_wait

    def test_job_list_with_sizes(self):
        jobs = pd.DataFrame({"arrival": [0.0, 0.0, 1.0], "duration": [10.0, 1.0, 0.5], "size": [2, 2, 1]})
        fcfs = simulate_queue(servers=2, jobs=jobs, policy="fcfs", warmup_fraction=0)
        # job 0 holds both GPUs until 10; job 1 runs 10-11; job 2 (arrives at 1) queues behind it: 11-11.5
        assert fcfs.mean_wait == pytest.approx((0 + 10 + 10) / 3)
        assert fcfs.mean_response == pytest.approx((10 + 11 + 10.5) / 3)
        sjf = simulate_queue(servers=2, jobs=jobs, policy="sjf", warmup_fraction=0)
        # at 10 the shorter job 2 starts first; job 1 needs both GPUs and waits until 10.5
        assert sjf.mean_wait == pytest.approx((0 + 10.5 + 9) / 3)

    def test_bad_jobs(self):
        with pytest.raises(ValueError, match="sizes must be between 1 and servers"):
            simulate_queue(servers=1, jobs=[{"arrival": 0, "duration": 1, "size": 2}])
        with pytest.raises(ValueError, match="'policy'"):
            simulate_queue(1, 1, 1, policy="lifo")


class TestCost:
    def test_cost_interval_follows_time_interval(self):
        c = estimate_cost(seconds=3600, lower=1800, upper=7200, gpu_type="A100", gpu_count=4, prices=PRICES)
        assert c.dollars == pytest.approx(8.0) and c.lower == pytest.approx(4.0) and c.upper == pytest.approx(16.0)
        assert c.usd_per_device_hour == 2.0  # cheapest provider

    def test_provider_and_spot_overhead(self):
        on = estimate_cost(seconds=36000, gpu_type="H100", gpu_count=1, prices=PRICES, provider="x")
        spot = estimate_cost(seconds=36000, gpu_type="H100", gpu_count=1, prices=PRICES, spot=True,
                             interruptions_per_hour=0.1, checkpoint_interval_s=1800, checkpoint_cost_s=60,
                             restart_s=300)
        factor = (1 + 60 / 1800) / (1 - 0.1 * (300 + 900) / 3600)
        assert spot.overhead_fraction == pytest.approx(factor - 1)
        assert spot.dollars == pytest.approx(10 * 2.0 * factor) and on.dollars == pytest.approx(40.0)

    def test_from_prediction(self):
        fitted = TrainingTimeModel().fit(make_history())
        r = predict_training_time("m1", batch_size=16, gpu_count=2, gpu_type="A100", steps=10_000, history=fitted)
        c = estimate_cost(r, prices=PRICES)
        assert c.devices == 2 and c.lower < c.dollars < c.upper
        assert c.dollars == pytest.approx(r.seconds / 3600 * 2 * 2.0)

    @pytest.mark.parametrize("table, match", [
        (PRICES.assign(on_demand_usd_per_hour=[-1, 3, 4, 0.05]), "non-negative"),
        (PRICES.assign(gpu_type=["A100", "A1000", "H100", "cpu"]), "Unknown gpu_type 'A1000'"),
        (PRICES.drop(columns="provider"), "missing column"),
    ])
    def test_bad_price_tables(self, table, match):
        with pytest.raises(ValueError, match=match):
            load_prices(table)

    def test_no_price(self):
        with pytest.raises(ValueError, match="No spot price for 'A100-SXM4-80GB' from provider 'y'"):
            price_per_hour("A100", provider="y", spot=True, prices=PRICES)

    def test_bundled_prices_have_sources(self):
        table = load_prices()
        assert table["source"].str.len().min() > 20 and "cpu" in set(table["gpu_type"])

    # Issue 26 #11: numbers outside the documented range are refused, never an OverflowError or a NaN.
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


class TestRecommend:
    def test_ranks_and_filters(self):
        two = pd.concat([make_history(seed=0), make_history(seed=0, noise_seed=4).assign(
            gpu_type="H100", step_time_s=lambda d: d["step_time_s"] / 3)])
        fitted = TrainingTimeModel(method="loglinear").fit(two)
        out = recommend("m1", batch_size=16, steps=100_000, gpu_types=["A100", "H100"], gpu_counts=[1, 2, 4],
                        history=fitted, prices=PRICES, deadline=None)
        assert list(out.columns[:10]) == ["gpu_type", "gpu_count", "device_batch", "accumulation", "global_batch",
                                          "steps", "samples", "seconds", "lower", "upper"]
        assert len(out) == 6 and out["cost"].is_monotonic_increasing
        deadline = float(out["upper"].median())
        ranked = recommend("m1", batch_size=16, steps=100_000, gpu_types=["A100", "H100"], gpu_counts=[1, 2, 4],
                           history=fitted, prices=PRICES, deadline=deadline)
        assert (ranked["meets_deadline"] == (ranked["upper"] <= deadline)).all()
        feasible = ranked["meets_deadline"].to_numpy()
        assert feasible[: feasible.sum()].all()  # feasible rows first
        budget = recommend("m1", batch_size=16, steps=100_000, gpu_types=["A100"], gpu_counts=[1, 2],
                           history=fitted, prices=PRICES, budget=1e-9)
        assert not budget["within_budget"].any()

    @pytest.mark.slow
    def test_a_configuration_gets_the_answer_it_gets_alone(self):
        # adding a device type or a count the runs lack must not change the other rows (each is predicted from the
        # fit for its own kind of query, as predict_training_time predicts it)
        two = pd.concat([make_history(seed=0), make_history(seed=0, noise_seed=4).assign(
            gpu_type="H100", step_time_s=lambda d: d["step_time_s"] / 3)])
        kw = dict(batch_size=16, steps=1000, history=two, prices=PRICES, work="per_device_batch")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            alone = recommend("m1", gpu_types=["A100"], gpu_counts=[2], **kw)
            mixed = recommend("m1", gpu_types=["A100", "B200"], gpu_counts=[2, 64], **kw)
            # the same samples on 2 devices: 1000 x 16 / (16 x 2) steps
            single = predict_training_time("m1", batch_size=16, gpu_count=2, gpu_type="A100", steps=500,
                                           history=two)
        row = mixed[(mixed["gpu_type"] == "A100-SXM4-80GB") & (mixed["gpu_count"] == 2)].iloc[0]
        assert row["steps"] == 500
        assert [row["seconds"], row["lower"], row["upper"]] == pytest.approx(
            [alone.loc[0, "seconds"], alone.loc[0, "lower"], alone.loc[0, "upper"]])
        assert row["seconds"] == pytest.approx(single.seconds) and row["upper"] == pytest.approx(single.upper)

    def test_unpredictable_device_left_out_with_warning(self):
        fitted = TrainingTimeModel().fit(make_history())
        with pytest.warns(ExtrapolationWarning, match="left out: H100"):
            out = recommend("m1", batch_size=16, steps=10, gpu_types=["A100", "H100"], gpu_counts=[1],
                            history=fitted, prices=PRICES)
        assert list(out["gpu_type"]) == ["A100-SXM4-80GB"]

    def test_same_work_on_every_configuration(self):
        fitted = TrainingTimeModel(method="loglinear").fit(make_history())
        out = recommend("m1", batch_size=32, steps=1000, gpu_types=["A100"], gpu_counts=[1, 2, 4], history=fitted,
                        prices=PRICES).sort_values("gpu_count")
        assert (out["global_batch"] == 32).all() and (out["samples"] == 32_000).all() and (out["steps"] == 1000).all()
        assert list(out["device_batch"] * out["accumulation"]) == [32, 16, 8]
        # per-device batch fixed instead: the same samples, fewer steps on more devices
        per = recommend("m1", batch_size=16, steps=1000, gpu_types=["A100"], gpu_counts=[1, 2], history=fitted,
                        prices=PRICES, work="per_device_batch").sort_values("gpu_count")
        assert list(per["steps"]) == [1000, 500] and (per["samples"] == 16_000).all()

    def test_gradient_accumulation_above_the_device_batch_limit(self):
        fitted = TrainingTimeModel(method="loglinear").fit(make_history())
        out = recommend("m1", batch_size=64, steps=100, gpu_types=["A100"], gpu_counts=[1, 2], history=fitted,
                        prices=PRICES, max_device_batch=16).sort_values("gpu_count")
        assert list(out["device_batch"]) == [16, 16] and list(out["accumulation"]) == [4, 2]
        one = perfmodel.predict_training_time("m1", batch_size=16, gpu_type="A100", steps=400, history=fitted)
        assert out["seconds"].iloc[0] == pytest.approx(one.seconds)  # 100 steps of 4 micro-steps

    def test_count_that_does_not_divide_the_batch_is_left_out(self):
        fitted = TrainingTimeModel(method="loglinear").fit(make_history())
        with pytest.warns(ExtrapolationWarning, match="A100 x3 .the global batch 32 does not divide"):
            out = recommend("m1", batch_size=32, steps=10, gpu_types=["A100"], gpu_counts=[1, 3], history=fitted,
                            prices=PRICES)
        assert list(out["gpu_count"]) == [1]

    def test_bad_precision_raises_instead_of_leaving_out(self):
        fitted = TrainingTimeModel(method="loglinear").fit(make_history())
        with pytest.raises(ValueError, match="'precision' parameter of recommend"):
            recommend("m1", batch_size=16, steps=10, gpu_types=["A100"], gpu_counts=[1], history=fitted,
                      prices=PRICES, precision="fp33")

    def test_left_out_warning_gives_one_reason_per_kind(self):
        fitted = TrainingTimeModel(method="loglinear").fit(make_history())
        with pytest.warns(ExtrapolationWarning) as caught:
            recommend("m1", batch_size=16, steps=10, gpu_types=["A100", "H100"], gpu_counts=[1, 2, 4, 8],
                      history=fitted, prices=PRICES)
        msg = str(caught[0].message)
        assert msg.count("has no runs on gpu_type") == 1 and "H100 x1, H100 x2, H100 x4, H100 x8" in msg
        assert len(msg) < 400
        # notes about the predictions themselves come once each, not once per configuration
        texts = [str(w.message) for w in caught]
        assert len(texts) == len(set(texts))


class TestScalingAndDiagnose:
    def test_weak_scaling_by_hand(self):
        runs = pd.DataFrame({"model": "m", "params": 10, "batch_size": [8, 8, 16], "gpu_count": [1, 2, 1],
                             "gpu_type": "A100", "step_time_s": [1.0, 1.25, 1.8]})
        weak = scaling(runs, mode="weak")
        assert weak.loc[0, "speedup"] == pytest.approx(2 / 1.25) and weak.loc[0, "efficiency"] == pytest.approx(0.8)
        assert bool(weak.loc[0, "below_threshold"])
        strong = scaling(runs, mode="strong")  # global 16: 1 x 16 (1.8 s) vs 2 x 8 (1.25 s)
        assert strong.loc[0, "speedup"] == pytest.approx(1.8 / 1.25)

    def test_scaling_counts_an_accumulated_steps_samples(self):
        # 2 devices x 4 samples x 2 passes: the weak-scaling partner of 1 device x 8 samples, not a repeat of the
        # 4-sample runs
        runs = pd.DataFrame({"model": "m", "params": 10, "batch_size": [8, 4, 4], "gpu_count": [1, 2, 2],
                             "grad_accum": [1, 2, 1], "gpu_type": "A100", "step_time_s": [1.0, 1.25, 9.0]})
        weak = scaling(runs, mode="weak")
        assert len(weak) == 1 and weak.loc[0, "batch_size"] == 8 and weak.loc[0, "global_batch"] == 16
        assert weak.loc[0, "speedup"] == pytest.approx(2 / 1.25)

    def test_scaling_from_model_physics_has_comm_share(self):
        out = scaling_from_model("gpt-s", batch_size=16, gpu_type="cpu", gpu_counts=[1, 2])
        assert list(out["gpu_count"]) == [1, 2] and out.loc[0, "speedup"] == 1.0
        if "comm_share" in out:
            assert out.loc[0, "comm_share"] == 0 and 0 < out.loc[1, "comm_share"] < 1

    def test_diagnose_rules_with_evidence(self):
        runs = pd.DataFrame({"model": "m", "params": 10, "flops_per_sample": 1e9, "batch_size": [8, 8],
                             "gpu_count": [1, 2], "gpu_type": "A100", "precision": "bf16",
                             "step_time_s": [0.1, 0.2], "gpu_util_mean_pct": [45.0, 90.0],
                             "mem_util_mean_pct": [40.0, 30.0]})
        d = diagnose(runs)
        assert d.table.loc[0, "mfu"] == pytest.approx(8e9 / 0.1 / 312e12)
        rules = {f.rule: f for f in d.findings}
        assert any("input pipeline" in r for r in rules) and any("far apart" in r for r in rules)
        assert any("scaling below target" in r for r in rules)
        assert "60%" in next(f.threshold for f in d.findings if "input" in f.rule)

    # Issue 26 #11: numbers outside the documented range are refused, never an OverflowError or a NaN.
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


class TestOnline:
    def test_interval_narrows_and_converges_on_recorded_runs(self):
        path = perfmodel.datasets.bundled_runs_path()
        runs = perfmodel.load_runs(path)
        steps = {json.loads(ln)["run_id"]: json.loads(ln)["step_times_s"] for ln in open(str(path) + ".steps.jsonl")}
        run = runs[runs["run_id"].isin(steps)].assign(n=lambda d: d["run_id"].map(lambda r: len(steps[r])))
        run = run.sort_values("n").iloc[-1]
        times = steps[run["run_id"]]
        truth = sum(times)
        est = OnlineEstimator(float(np.median(times)) * 1.5, float(np.median(times)), float(np.median(times)) * 3,
                              total_steps=len(times))
        prior = est.estimate()
        widths, errors = [], []
        for i, t in enumerate(times):
            est.update(t)
            e = est.estimate()
            if i in (2, 10, len(times) // 2, len(times) - 2):
                widths.append(e["total_upper"] - e["total_lower"])
                errors.append(abs(e["total"] / truth - 1))
        # narrower than the prior at once; much narrower near the end (drift can widen it a little in between)
        assert all(w < prior["total_upper"] - prior["total_lower"] for w in widths)
        assert widths[-1] < widths[0] / 2
        assert errors[-1] < 0.02 and errors[-1] < errors[0]
        assert est.estimate()["total"] == pytest.approx(truth)  # all steps seen: nothing left to predict

    def test_recorder_callback(self):
        pytest.importorskip("torch")
        est = OnlineEstimator(0.01, 0.005, 0.02, total_steps=20)
        with perfmodel.record("m", params=10, batch_size=1, warmup_steps=0) as rec:
            rec.add_callback(est.callback)
            for _ in range(5):
                rec.step()
        assert est.estimate()["steps_done"] == 5

    def test_bad_prior(self):
        with pytest.raises(ValueError, match="prior_lower <= prior_step_seconds <= prior_upper"):
            OnlineEstimator(1.0, 2.0, 3.0, total_steps=10)

    # Issue 26 #11: numbers outside the documented range are refused, never an OverflowError or a NaN.
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


def test_yaml_price_table(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text("prices:\n  - {gpu_type: H100, provider: mycloud, on_demand_usd_per_hour: 2.5}\n")
    assert price_per_hour("NVIDIA H100 80GB HBM3", prices=str(path)) == 2.5


def test_cost_bounds_and_job_values_are_checked():
    with pytest.raises(ValueError, match="lower <= seconds <= upper"):
        estimate_cost(seconds=10, lower=20, gpu_type="A100", prices=PRICES)
    with pytest.raises(ValueError, match="durations must be finite and positive"):
        simulate_queue(servers=1, jobs=[{"arrival": 0, "duration": float("nan")}])
    with pytest.raises(ValueError, match="'mode' parameter of scaling_from_model"):
        scaling_from_model("gpt-s", batch_size=8, gpu_type="cpu", mode="diagonal")


class TestBundledPrices:
    def test_every_row_names_a_device_of_the_table(self):
        from perfmodel.datasets import bundled_runs_path
        from perfmodel.hardware import known_gpu_types

        raw = pd.read_csv(bundled_runs_path("prices.csv"))
        assert set(raw["gpu_type"]) <= set(known_gpu_types())  # canonical names, not aliases

    def test_aws_instances_price_the_device_they_carry(self):
        # the instance named in each AWS row resolves (hardware._lookup._INSTANCE_PATTERNS) to the row's device:
        # g5 carries A10G (not A10), p3 V100 16 GB (p3dn has the 32 GB ones)
        import re

        from perfmodel.datasets import bundled_runs_path
        from perfmodel.hardware import resolve_gpu_type

        raw = pd.read_csv(bundled_runs_path("prices.csv"))
        checked = 0
        for _, row in raw[(raw["provider"] == "aws") & (raw["gpu_type"] != "cpu")].iterrows():
            m = re.search(r"\b([a-z]+\d+[a-z]*\.\d*x?large)\b", str(row["unit"]))
            if m:
                assert resolve_gpu_type(m.group(1)) == row["gpu_type"], (m.group(1), row["gpu_type"])
                checked += 1
        assert checked >= 4
        assert price_per_hour("A10G", provider="aws") == pytest.approx(1.006)
        assert price_per_hour("p3.16xlarge", provider="aws") == pytest.approx(3.06)


def test_recommend_refuses_a_method_the_fitted_history_does_not_use_even_if_nothing_fits():
    from perfmodel.plan import recommend

    fitted = TrainingTimeModel(method="loglinear").fit(make_history())
    with pytest.raises(ValueError, match="uses 'loglinear'"):
        recommend("m1", batch_size=16, steps=10, gpu_types=["A100"], gpu_counts=[3], history=fitted,
                  method="physics", prices=PRICES)


class TestProviders:
    def test_cost_names_provider_region_date_and_url(self):
        c = estimate_cost(seconds=3600, gpu_type="H100", gpu_count=8)
        assert (c.provider, c.usd_per_device_hour, c.as_of) == ("lambda", pytest.approx(2.99), "2025-01")
        assert c.url.startswith("https://") and "at lambda" in str(c)
        d = c.to_dict()
        assert d["provider"] == "lambda" and d["url"] == c.url and d["region"] == c.region
        aws = estimate_cost(seconds=3600, gpu_type="H100", gpu_count=8, provider="aws")
        assert aws.region == "us-east-1" and aws.usd_per_device_hour == pytest.approx(12.29)

    def test_bundled_rows_have_a_price_or_a_reason(self):
        t = load_prices()
        assert {"region", "as_of", "url", "note", "source"} <= set(t.columns)
        priced = t["on_demand_usd_per_hour"].notna()
        assert t.loc[priced, "url"].str.startswith("https://").all() and t.loc[priced, "as_of"].notna().all()
        assert t.loc[~priced, "note"].str.len().min() > 40
        assert {"MI250X", "MI300X", "B200"} <= set(t.loc[~priced, "gpu_type"])

    def test_no_price_says_why(self):
        with pytest.raises(ValueError, match="No on-demand price for 'MI300X' in the price table: .*could be "
                                             "verified.*pass prices=.*as of 2026-12-01"):
            price_per_hour("MI300X")

    def test_every_device_has_a_price_or_a_reason(self):
        # issue 27: "Fill the table for every device the package can predict, or say per device why not"
        from perfmodel.hardware import known_gpu_types
        from perfmodel.plan._cost import no_price_reason

        t = load_prices()
        for g in known_gpu_types():
            rows = t[t["gpu_type"] == g]
            assert len(rows), f"{g} has no row in the bundled price table"
            if rows["on_demand_usd_per_hour"].isna().all():
                reason = no_price_reason(g)
                assert reason and "pass prices=" in reason and "as of " in reason, g
                assert rows["note"].str.len().min() > 40 and rows["as_of"].notna().all(), g
            else:
                assert no_price_reason(g) is None
        assert "consumer" in no_price_reason("RTX 4090") and "GCD" in no_price_reason("MI250X-GCD")

    def test_reason_for_a_device_or_provider_the_table_lacks(self):
        from perfmodel.plan._cost import no_price_reason

        assert "B200 has no row in the price table" in no_price_reason("B200", prices=PRICES)
        assert "no on-demand price from 'gcp'" in no_price_reason("H100", provider="gcp")
        assert "no spot price" in no_price_reason("A100", provider="y", spot=True, prices=PRICES)
        with pytest.raises(ValueError, match="No on-demand price for 'B200' in the price table: B200 has no row"):
            estimate_cost(seconds=10, gpu_type="B200", prices=PRICES)

    def test_an_empty_price_needs_a_note(self):
        bad = pd.DataFrame({"gpu_type": ["A100"], "provider": ["x"], "on_demand_usd_per_hour": [None]})
        with pytest.raises(ValueError, match="on_demand_usd_per_hour"):
            load_prices(bad)
        ok = load_prices(bad.assign(note=["no public price"]))
        assert ok["on_demand_usd_per_hour"].isna().all()

    def test_recommend_compares_providers(self):
        from perfmodel.plan import recommend

        model = {"params": 1.3e9, "flops_per_sample": 6 * 1.3e9 * 2048}
        with pytest.warns(Warning, match="no price for MI300X x8: kept with an empty cost"):
            out = recommend(model, batch_size=64, steps=100, gpu_types=["H100", "MI300X"], gpu_counts=[8],
                            provider=["aws", "lambda"])
        priced = out[out["price_note"].isna()]
        assert sorted(priced["provider"]) == ["aws", "lambda"] and set(priced["gpu_type"]) == {"H100-SXM5-80GB"}
        by = dict(zip(priced["provider"], priced["usd_per_device_hour"]))
        assert by == {"aws": pytest.approx(12.29), "lambda": pytest.approx(2.99)}
        assert priced["seconds"].nunique() == 1 and out["provider"].iloc[0] == "lambda"  # cheapest first
        # MI300X is priced by neither: one row, kept last, with the table's reason
        mi = out[out["gpu_type"] == "MI300X"]
        assert len(mi) == 1 and mi.index[0] == len(out) - 1 and mi["cost"].isna().all()
        assert mi["price_note"].iloc[0].startswith("no price: ") and "as of 2026-12-01" in mi["price_note"].iloc[0]
        assert mi["seconds"].iloc[0] > 0 and mi["provider"].iloc[0] is None

    def test_recommend_lists_unpriced_devices_instead_of_dropping_them(self):
        from perfmodel.plan import recommend

        model = {"params": 1.3e9, "flops_per_sample": 6 * 1.3e9 * 2048}
        with pytest.warns(Warning, match="no price for .*RTX-4090 x8"):
            out = recommend(model, batch_size=64, steps=100, gpu_types=["H100", "RTX-4090", "B200"], gpu_counts=[8],
                            budget=100.0)
        assert list(out["gpu_type"])[0] == "H100-SXM5-80GB" and set(out["gpu_type"]) >= {"RTX-4090", "B200"}
        unpriced = out[out["price_note"].notna()]
        assert unpriced["within_budget"].isna().all()  # a budget cannot be judged without a price: unknown
        assert all("consumer" in n for n in unpriced.loc[unpriced["gpu_type"] == "RTX-4090", "price_note"])
        assert out.loc[out["price_note"].isna(), "price_note"].tolist() == [None]
        assert unpriced["cost"].isna().all() and unpriced["useful_pflop_per_dollar"].isna().all()

    def test_cli_recommend_precision_and_providers(self):
        import json
        import subprocess
        import sys

        p = subprocess.run([sys.executable, "-m", "perfmodel", "recommend", "--params", "1.3e9", "--flops-per-sample",
                            "1.6e13", "--batch-size", "64", "--gpu-types", "H100", "--gpu-counts", "8", "--steps",
                            "100", "--precision", "bf16", "--providers", "aws,lambda", "--json"],
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        rows = json.loads(p.stdout)
        assert {r["provider"] for r in rows} == {"aws", "lambda"} and all(r["precision"] == "bf16" for r in rows)
        assert all(r["usd_per_device_hour"] > 0 and r["memory_gb"] > 0 and r["price_note"] is None for r in rows)

    def test_cli_recommend_says_why_a_device_has_no_price(self):
        import subprocess
        import sys

        args = [sys.executable, "-m", "perfmodel", "recommend", "--params", "1.3e9", "--flops-per-sample", "1.6e13",
                "--batch-size", "64", "--gpu-types", "H100,MI300X", "--gpu-counts", "8", "--steps", "100",
                "--precision", "bf16"]
        p = subprocess.run(args + ["--json"], capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        mi = [r for r in json.loads(p.stdout) if r["gpu_type"] == "MI300X"]
        assert len(mi) == 1 and mi[0]["cost"] is None and mi[0]["price_note"].startswith("no price: ")
        t = subprocess.run(args, capture_output=True, text=True, timeout=600)
        assert t.returncode == 0, t.stderr
        lines = t.stdout.splitlines()
        assert any(ln.lstrip().startswith("MI300X") and "no price" in ln for ln in lines)
        assert any(ln.startswith("MI300X: no price: ") and "pass prices=" in ln for ln in lines)


# ----------------------------------------------------------------------------------------------------------
# Issue 26 #11: numbers outside the documented range are refused with a ValueError/TypeError naming the
# parameter: never an OverflowError, a MemoryError or a NaN result.
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


# ----------------------------------------------------------------------------------------------------------
# Every public result serialises: ``json.dumps(result.to_dict(), allow_nan=False)`` works, numbers stay
# numbers.
def _strict(d):
    return json.loads(json.dumps(d, allow_nan=False))


class TestToDict:
    def test_queue_results(self):
        assert _strict(erlang_c(2.0, 1.0, 3).to_dict())["mean_response"] > 1
        sim = simulate_queue(jobs=[{"arrival": 0.0, "duration": 1.0}], servers=1)
        d = _strict(sim.to_dict())  # one job: no batch-means standard error -> null
        assert d["stderr_wait"] is None and d["n_arrivals"] == 1 and d["mean_response"] == 1.0

    def test_diagnosis(self):
        d = _strict(diagnose(make_history()).to_dict())
        assert len(d["runs"]) == len(make_history()) and d["runs"][0]["mfu"] is None or \
            isinstance(d["runs"][0]["mfu"], float)
