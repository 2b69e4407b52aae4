"""Cross-hardware prediction: the roofline method, query-matched auto, history lists and provenance.

Generated histories here follow a known roofline law (tests only; never bundled as measurements).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel.exceptions import ExtrapolationWarning
from perfmodel.fitting import AUTO_CANDIDATES, baseline_margin, choose_method, fit_history
from perfmodel.hardware import get_spec
from perfmodel.history import read_history
from perfmodel.kinds import KIND_NAMES, classify
from perfmodel.models import RooflineRegressor, conformal_quantile

DEVICES = ("V100", "A100", "H100", "L40S", "A10", "L4")  # 5 left when one is held out: MIN_GROUPS


def roofline_history(devices=DEVICES, n_models=6, seed=0, noise=0.04):
    """Step time = work / (peak^(1-k) · bw^k · c_m) with a per-model memory share k and efficiency c_m."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(n_models):
        params = int(10 ** rng.uniform(7, 9))
        fps = 6.0 * params * 512
        kappa = rng.uniform(0.05, 0.4)
        eff = rng.uniform(0.2, 0.5)
        for d in devices:
            spec = get_spec(d)
            peak = spec.peak_tflops("fp16") * 1e12
            bw = spec.memory_bandwidth_gbps * 1e9
            ridge_ref = 300.0  # FLOP/byte: a mid-range ridge point
            for b in (4, 8, 16):
                for n in (1, 8):
                    work = fps * b
                    t = work / (peak * eff) * (peak / bw / ridge_ref) ** kappa * (1 + 0.05 * (n > 1))
                    t *= float(np.exp(rng.normal(0, noise)))
                    rows.append({"model": f"m{m}", "family": "decoder", "params": params,
                                 "flops_per_sample": fps, "batch_size": b, "gpu_count": n, "gpu_type": d,
                                 "precision": "fp16", "step_time_s": t})
    return perfmodel.load_runs(pd.DataFrame(rows))


@pytest.fixture(scope="module")
def xhw():
    return roofline_history()


def test_roofline_predicts_a_device_left_out(xhw):
    train = xhw[xhw["gpu_type"] != get_spec("H100").name]
    test = xhw[xhw["gpu_type"] == get_spec("H100").name]
    model = perfmodel.TrainingTimeModel(method="roofline", held_out="new_device").fit(train)
    pi = model.predict_interval(test)
    ape = np.abs(pi["step_time_s"].to_numpy() / test["step_time_s"].to_numpy() - 1)
    assert np.median(ape) < 0.15
    inside = (pi["step_lower"].to_numpy() <= test["step_time_s"].to_numpy()) & (
        test["step_time_s"].to_numpy() <= pi["step_upper"].to_numpy())
    assert inside.mean() >= 0.7
    assert set(model.query_kinds(test)) == {"new_device"} and set(pi["query_kind"]) == {"new_device"}
    assert pi["interval_rule"].str.startswith("leave-one-gpu-type-out").all()
    # the new-device interval is the one built from leave-one-device-type-out refits: wider than a seen config's
    seen = model.predict_interval(train.head(5))
    assert (pi["step_upper"] / pi["step_time_s"]).min() > (seen["step_upper"] / seen["step_time_s"]).max()


def test_score_book_holds_every_calibrated_kind(xhw):
    model = perfmodel.TrainingTimeModel(method="roofline", held_out="all").fit(xhw)
    assert set(model.scores_) == set(KIND_NAMES)
    n_models = xhw["model"].nunique()
    for kind, entry in model.scores_.items():
        assert np.all(np.diff(entry["scores"]) >= 0)
        if kind == "seen":  # one out-of-fold score per run
            assert len(entry["scores"]) == len(xhw) and entry["groups"] == len(xhw)
        else:  # group-balanced: 200 quantiles of each held-out group's scores
            assert len(entry["scores"]) == 200 * entry["groups"]
    assert model.scores_["new_model"]["groups"] == n_models
    assert model.scores_["new_device"]["groups"] == len(DEVICES)


def test_query_kinds_within_a_known_pair(xhw):
    model = perfmodel.TrainingTimeModel(method="roofline").fit(xhw)
    row = xhw.head(1)
    kinds = model.query_kinds(pd.concat([
        row, row.assign(batch_size=3), row.assign(gpu_count=int(row["gpu_count"].iloc[0]) * 3),
        row.assign(model="never-seen")], ignore_index=True))
    assert list(kinds) == ["seen", "new_batch", "new_count", "new_model"]
    # a model known from runs on one device only, asked on another device the runs have: a new pair
    other = next(g for g in xhw["gpu_type"].unique() if g != row["gpu_type"].iloc[0])
    one_dev = pd.concat([xhw, row.assign(model="mine", run_id="mine-1")], ignore_index=True)
    m2 = perfmodel.TrainingTimeModel(method="roofline").fit(one_dev)
    assert list(m2.query_kinds(row.assign(model="mine", gpu_type=other))) == ["new_pair"]


def test_point_fit_has_no_scores_and_refuses_intervals(xhw):
    model = perfmodel.TrainingTimeModel(method="roofline", conformal=False).fit(xhw)
    assert model.scores_ == {}
    assert np.isfinite(model.predict(xhw.head(3))).all()
    with pytest.raises(ValueError, match="conformal=False"):
        model.predict_interval(xhw.head(3))


def test_roofline_rejects_bad_input():
    with pytest.raises(ValueError, match="columns"):
        RooflineRegressor().fit(np.ones((5, 3)), np.ones(5))
    with pytest.raises(ValueError, match="positive"):
        from perfmodel.features import ROOFLINE_COLUMNS

        RooflineRegressor().fit(np.zeros((5, len(ROOFLINE_COLUMNS))), -np.ones(5))


@pytest.mark.parametrize("params, error", [({"tau_slope": 0}, ValueError), ({"tau_slope": float("nan")}, ValueError),
                                           ({"tau_slope": -1.0}, ValueError), ({"tau_model": 0.0}, ValueError),
                                           ({"tau_device": float("inf")}, ValueError), ({"tau_slope": "0.5"}, TypeError)])
def test_roofline_refuses_a_prior_that_is_not_a_positive_number(xhw, params, error):
    with pytest.raises(error, match=next(iter(params))):
        perfmodel.TrainingTimeModel(method="roofline", conformal=False, regressor_params=params).fit(xhw)


def test_a_history_of_one_device_count_keeps_communication_at_its_physical_slope(xhw):
    """With every run on one device count the data cannot say what communication costs: the slope prior keeps its
    physical value (time = compute + communication), where without a prior it was 0 (communication free)."""
    one = xhw[xhw["gpu_count"] == 1]
    slopes = {}
    for tau in (0.5, None):
        model = perfmodel.TrainingTimeModel(method="roofline", conformal=False,
                                            regressor_params={"tau_slope": tau}).fit(one)
        slopes[tau] = float(model.pipeline_.named_steps["regressor"].effects().loc["slope[comm_rel]", "value"])
    assert slopes[0.5] == pytest.approx(1.0, abs=1e-6) and slopes[None] == pytest.approx(0.0, abs=1e-6)


def test_classify_a_query(xhw):
    q = xhw.head(1).copy()
    kinds = classify(xhw, pd.concat([q, q.assign(batch_size=3), q.assign(gpu_count=64), q.assign(model="other"),
                                     q.assign(gpu_type=get_spec("B200").name)], ignore_index=True))
    assert list(kinds) == ["seen", "new_batch", "new_count", "new_model", "new_device"]


def test_auto_chooses_on_the_split_matching_the_query(xhw):
    model = fit_history(xhw, "auto", kind="new_device")
    assert model.auto_split_ == "leave-one-gpu-type-out" and model.auto_kind_ == "new_device"
    assert set(model.auto_scores_) == set(AUTO_CANDIDATES)
    finite = {m: s for m, s in model.auto_scores_.items() if np.isfinite(s)}
    # the lowest score wins only by more than the selection's noise over the baselines (ratio, then mfu)
    margin = baseline_margin(len(DEVICES))
    base = "mfu" if finite["mfu"] < (1 - margin) * finite["ratio"] else "ratio"
    lowest = min(finite, key=finite.get)
    assert model.method == (lowest if finite[lowest] < (1 - margin) * finite[base] else base)
    # the winner's out-of-fold predictions are its new-device conformity scores (no second round of refits)
    assert model.scores_["new_device"]["groups"] == len(DEVICES)
    choice = choose_method(xhw, "new_model")
    assert choice["split"] == "leave-one-model-out" and choice["best"] in choice["scores"]
    assert len(choice["oof"]) == len(xhw)
    # what the choice rests on: every scored candidate's out-of-fold predictions, their median APE the score
    ev = choice["evidence"]
    assert len(ev["y"]) == len(ev["groups"]) == len(xhw) and set(ev["oofs"]) <= set(choice["scores"])
    assert len(pd.unique(pd.Series(ev["groups"]))) == xhw["model"].nunique()
    np.testing.assert_array_equal(ev["oofs"][choice["best"]], choice["oof"])
    for m, oof in ev["oofs"].items():
        assert np.isclose(100 * np.median(np.abs(oof / ev["y"] - 1)), choice["scores"][m])


def test_auto_honours_cv_on_seen_queries(xhw):
    choice = choose_method(xhw, "seen", cv=3)
    assert choice["split"] == "random 3-fold" and choice["evidence"]["groups"] is None  # random folds: no groups


def test_named_methods_score_queries_beyond_the_runs_by_holding_that_group_out(xhw, tmp_path):
    h100 = get_spec("H100").name
    train, test = xhw[xhw["gpu_type"] != h100], xhw[xhw["gpu_type"] == h100]
    plain = perfmodel.TrainingTimeModel(method="gbm").fit(train)
    held = perfmodel.TrainingTimeModel(method="gbm", held_out="new_device").fit(train)
    assert set(plain.scores_) == {"seen"} and set(held.scores_) == {"seen", "new_device"}
    entry = held.scores_["new_device"]
    assert entry["groups"] == len(DEVICES) - 1 and np.all(np.diff(entry["scores"]) >= 0)
    # a device the runs lack: pred · exp(±q), q the conformal quantile of the leave-device-out scores, never
    # narrower than the seen scores' (the test rows sit on training configurations: no distance widening)
    pi = held.predict_interval(test, 0.9)
    q = max(conformal_quantile(entry["scores"], 0.9), conformal_quantile(held.scores_["seen"]["scores"], 0.9))
    assert (pi["nearest_run_distance"] <= 0.5).all()
    np.testing.assert_allclose(pi["step_upper"], pi["step_time_s"] * np.exp(q))
    np.testing.assert_allclose(pi["step_lower"], pi["step_time_s"] * np.exp(-q))
    # without new-device scores the model says which scores it fell back on
    own = plain.predict_interval(test, 0.9)
    assert own["interval_rule"].str.contains("new_device scores too few").all()
    assert (pi["step_upper"] > own["step_upper"]).all()
    # a device the runs have keeps the seen interval
    pd.testing.assert_frame_equal(held.predict_interval(train.head(10)), plain.predict_interval(train.head(10)))
    # the scores travel in a safe model file
    perfmodel.save_model(held, tmp_path / "g.perfmodel")
    pd.testing.assert_frame_equal(perfmodel.load_model(tmp_path / "g.perfmodel").predict_interval(test), pi)


def test_held_out_kind_is_a_constructor_parameter_that_clone_keeps(xhw):
    from sklearn.base import clone

    est = perfmodel.TrainingTimeModel(method="loglinear", held_out=("new_model",))
    assert clone(est).get_params()["held_out"] == ("new_model",)
    model = clone(est).fit(xhw)
    assert model.scores_["new_model"]["groups"] == xhw["model"].nunique()
    assert len(model.scores_["new_model"]["scores"]) == 200 * xhw["model"].nunique()


def test_held_out_is_checked_and_thin_kinds_fall_back(xhw):
    with pytest.raises(ValueError, match="Unknown kind of query 'precision'"):
        perfmodel.TrainingTimeModel(method="gbm", held_out="precision").fit(xhw)
    one = xhw[xhw["gpu_type"] == get_spec("A100").name]
    model = perfmodel.TrainingTimeModel(method="loglinear", held_out="new_device").fit(one)
    assert model.scores_["new_device"]["groups"] == 0  # one device type: no leave-one-device-out refit exists
    q = one.head(1).assign(gpu_type=get_spec("H100").name)
    rule = model.predict_interval(q)["interval_rule"].iloc[0]
    assert "new_device scores too few" in rule


def test_held_out_counts_compare_as_numbers(xhw):
    q = pd.concat([xhw.head(1)] * 4, ignore_index=True)
    q["gpu_count"] = pd.Series([8, 8.0, "8", 4], dtype=object)
    # 8 however written is a count the runs have; 4 is not
    assert list(classify(xhw, q)) == ["seen", "seen", "seen", "new_count"]


def test_evaluate_fits_named_methods_for_the_split(xhw, monkeypatch):
    from perfmodel.evaluate import evaluate

    seen = []
    fit = perfmodel.TrainingTimeModel.fit

    def spy(self, X, y=None, **kwargs):
        seen.append((self.method, tuple(self.held_out)))
        return fit(self, X, y, **kwargs)

    monkeypatch.setattr(perfmodel.TrainingTimeModel, "fit", spy)
    evaluate(xhw, methods=("loglinear",), splits=("leave-one-gpu-type-out",), baselines=False)
    assert ("loglinear", ("new_device",)) in seen


def test_fitting_for_a_kind_of_query_holds_out_its_groups(xhw):
    assert fit_history(xhw, "loglinear", kind="new_device").held_out == ("new_device",)
    assert fit_history(xhw, "loglinear", kind="new_count").held_out == ("new_count",)
    assert fit_history(xhw, "loglinear", kind="seen").held_out == ()
    assert set(fit_history(xhw, "loglinear", kind="new_count").scores_) == {"seen", "new_count"}


def test_single_device_history_refuses_other_devices(xhw):
    one = xhw[xhw["gpu_type"] == get_spec("A100").name]
    with pytest.raises(ValueError, match="no runs on gpu_type"):
        perfmodel.predict_training_time("m0", batch_size=8, gpu_type="H100", steps=10, history=one,
                                        precision="fp16")


def test_prediction_for_an_unseen_device_says_what_it_learned_from(xhw):
    train = xhw[xhw["gpu_type"] != get_spec("H100").name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExtrapolationWarning)
        r = perfmodel.predict_training_time("m1", batch_size=8, gpu_count=8, gpu_type="H100", steps=1000,
                                            precision="fp16", history=train)
    assert r.query_kind == "new_device"
    assert r.provenance == [f"DataFrame ({len(train)} runs)"]
    assert r.lower < r.seconds < r.upper
    d = r.to_dict()
    json.dumps(d, allow_nan=False)
    assert isinstance(d["query"]["batch_size"], int)


def test_history_list_concatenates_and_labels(tmp_path, xhw):
    a = tmp_path / "a.csv"
    xhw.iloc[:50].to_csv(a, index=False)
    loaded = read_history([str(a), xhw.iloc[50:]])
    assert len(loaded.runs) == len(xhw) and loaded.own.all()
    assert loaded.labels == [str(a), f"DataFrame ({len(xhw) - 50} runs)"]
    assert list(loaded.runs["history_source"].unique()) == loaded.labels
    with pytest.raises(TypeError, match="history"):
        read_history([1])
    with pytest.raises(ValueError, match="empty"):
        read_history([])


def test_bundled_history_names():
    loaded = read_history("cpu")
    assert loaded.labels == ["bundled:runs_cpu.csv"] and len(loaded.runs) > 100 and not loaded.own.any()


def test_roofline_round_trips_through_a_safe_model_file(tmp_path, xhw):
    model = perfmodel.fit(xhw, method="roofline")
    perfmodel.save_model(model, tmp_path / "m.perfmodel")
    back = perfmodel.load_model(tmp_path / "m.perfmodel")
    a = model.predict_interval(xhw.head(20))
    b = back.predict_interval(xhw.head(20))
    pd.testing.assert_frame_equal(a, b)


def test_roofline_summary_names_the_pooled_effects(xhw):
    text = str(perfmodel.fit(xhw, method="roofline").summary())
    assert "efficiency_log[device=" in text and "kappa_memory_share" in text


def test_peak_ratio_baseline_scales_by_peaks(xhw):
    from perfmodel.evaluate import PeakRatioBaseline

    a100, h100 = get_spec("A100"), get_spec("H100")
    train = xhw[xhw["gpu_type"] == a100.name]
    test = xhw[xhw["gpu_type"] == h100.name].head(4)
    pred = PeakRatioBaseline().fit(train).predict_interval(test)["step_time_s"].to_numpy()
    ref = train.set_index(["model", "batch_size", "gpu_count"])["step_time_s"]
    expect = [ref.loc[(m, b, n)] * a100.peak_tflops("fp16") / h100.peak_tflops("fp16")
              for m, b, n in zip(test["model"], test["batch_size"], test["gpu_count"])]
    np.testing.assert_allclose(pred, expect)


def test_leave_one_device_out_on_a_small_real_subset():
    """The bundled MLPerf per-step table (real, public): hold out each of three devices of one benchmark."""
    from perfmodel.datasets import bundled_runs_path
    from perfmodel.evaluate import evaluate

    runs = perfmodel.load_runs(bundled_runs_path("mlperf_steps.csv"))
    keep = runs["gpu_type"].isin(["A100-SXM4-80GB", "H100-SXM5-80GB", "A100-PCIE-80GB", "H100-PCIE-80GB"])
    sub = runs[keep & runs["model"].isin(["bert-large", "resnet50-v1.5"])]
    sub = sub.groupby(["model", "gpu_type"], group_keys=False).head(15).reset_index(drop=True)
    ev = evaluate(sub, methods=("roofline",), splits=("leave-one-gpu-type-out",), baselines=False)
    row = ev.table.iloc[0]
    assert row["folds"] == 4 and row["n"] == len(sub)
    p = ev.predictions
    lo, hi = p["step_lower"], p["step_upper"]
    # (a point that would beat the device's peak is raised to it, with the interval's lower end: lo <= pred)
    assert np.isfinite(p["pred"]).all() and (lo <= p["pred"]).all() and (p["pred"] < hi).all() and (lo < hi).all()
    assert set(p["held_out"]) == set(sub["gpu_type"]) and 0.0 <= row["coverage"] <= 1.0


def test_balanced_scores_weigh_every_group_alike():
    from perfmodel.models import balanced_scores

    # 1,000 runs of a well-predicted model and 10 of a badly predicted one: each is half of the scores
    scores = np.r_[np.zeros(1000), np.ones(10)]
    b = balanced_scores(scores, np.r_[np.zeros(1000), np.ones(10)])
    assert len(b) == 400 and b.mean() == 0.5
    assert perfmodel.models.conformal_quantile(b, 0.9) == 1.0  # pooled rows would say 0.0


DEVICES_11 = ("V100-SXM2-32GB", "T4", "A100-SXM4-80GB", "A100-PCIE-40GB", "A30", "A10", "A40", "L4", "L40",
              "RTX-A6000", "H100")


def _transfer_history(spreads, seed):
    """Per model, a device-dependent efficiency with log-spread ``spread``: how well its speed transfers."""
    rng = np.random.default_rng(seed)
    rows = []
    for m, spread in spreads:
        params = int(10 ** rng.uniform(7, 9))
        for d in DEVICES_11:
            eff = 0.1 * float(np.exp(rng.normal(0, spread)))  # well below peak: no run nears the peak floor
            for b in (4, 8, 16):
                t = 6.0 * params * 512 * b / (get_spec(d).peak_tflops("fp16") * 1e12 * eff)
                t *= float(np.exp(rng.normal(0, .02)))
                rows.append({"model": m, "family": "decoder", "params": params, "flops_per_sample": 6.0 * params * 512,
                             "batch_size": b, "gpu_count": 1, "gpu_type": d, "precision": "fp16", "step_time_s": t})
    runs = perfmodel.load_runs(pd.DataFrame(rows))
    return runs[runs["gpu_type"] != get_spec("H100").name].reset_index(drop=True)  # 10 device types


@pytest.mark.parametrize("method", ["roofline", "loglinear"])
def test_new_device_intervals_are_scored_per_model_where_enough_devices_were_held_out(method):
    """Rule 2: a workload whose speed transfers poorly across devices gets a wider new-device interval than one
    that transfers well, once its runs span MODEL_MIN_DEVICES held-out device types; with fewer, pooled scores."""
    from perfmodel.models._conformal import MODEL_MIN_DEVICES

    train = _transfer_history((("steady", 0.02), ("erratic", 0.35), ("other", 0.1)), seed=5)
    assert train["gpu_type"].nunique() >= MODEL_MIN_DEVICES
    model = perfmodel.TrainingTimeModel(method=method, held_out="new_device").fit(train)
    assert set(model.scores_["new_device"]["by_model"]) == {"steady", "erratic", "other"}
    q = pd.DataFrame({"model": ["steady", "erratic"], "params": 1e8, "batch_size": 8, "gpu_count": 1,
                      "gpu_type": "H100", "precision": "fp16"})
    q["params"] = [float(train.loc[train["model"] == m, "params"].iloc[0]) for m in q["model"]]
    q["flops_per_sample"] = 6.0 * q["params"] * 512
    pi = model.predict_interval(q)
    assert pi["interval_rule"].str.contains("the model's own").all()
    width = np.log(pi["step_upper"] / pi["step_lower"]).to_numpy()
    assert width[1] > 2 * width[0]
    # a higher confidence never narrows it
    halves = [float(np.log(model.predict_interval(q, c)["step_upper"] / model.predict_interval(q, c)["step_time_s"])
                    .iloc[1]) for c in (0.5, 0.8, 0.9)]
    assert np.all(np.diff(halves) >= -1e-12)
    # a device the runs have, however it is spelled, is not a new device
    a10 = get_spec("A10").name
    spelled = model.predict_interval(q.iloc[[0, 0]].assign(gpu_type=[a10, a10.lower()]))
    assert list(spelled["query_kind"]) == ["seen", "seen"]
    np.testing.assert_allclose(spelled["step_upper"].iloc[0], spelled["step_upper"].iloc[1])
    # on 5 device types no model has enough held-out devices to stand alone: one pooled interval for every model
    few = train[train["gpu_type"].isin([get_spec(d).name for d in DEVICES_11[:5]])].reset_index(drop=True)
    m5 = perfmodel.TrainingTimeModel(method=method, held_out="new_device").fit(few)
    assert m5.scores_["new_device"]["by_model"] == {}
    pi5 = m5.predict_interval(q)
    half = np.log(pi5["step_upper"] / pi5["step_time_s"]).to_numpy()
    assert half[0] == pytest.approx(half[1])


def test_per_model_new_device_scores_too_few_for_the_confidence_fall_back_to_pooled():
    # one run per (model, device) on 10 devices: 10 own scores bound a 90% interval but not a 95% one
    rng = np.random.default_rng(2)
    rows = [{"model": f"m{m}", "family": "decoder", "params": 1e8 * (m + 1), "flops_per_sample": 6e8 * 512 * (m + 1),
             "batch_size": 8, "gpu_count": 1, "gpu_type": d, "precision": "fp16",
             "step_time_s": 6e8 * 512 * (m + 1) * 8 / (get_spec(d).peak_tflops("fp16") * 1e12 * 0.3)
             * float(np.exp(rng.normal(0, 0.2)))} for m in range(3) for d in DEVICES_11[:10]]
    model = perfmodel.TrainingTimeModel(method="roofline", held_out="new_device").fit(
        perfmodel.load_runs(pd.DataFrame(rows)))
    assert len(model.scores_["new_device"]["by_model"]) == 3
    q = pd.DataFrame({"model": ["m0"], "params": 1e8, "flops_per_sample": 6e8 * 512, "batch_size": 8, "gpu_count": 1,
                      "gpu_type": "H100", "precision": "fp16"})
    rules = []
    for conf in (0.9, 0.95):
        pi = model.predict_interval(q, conf)
        assert np.isfinite(pi[["step_lower", "step_upper"]].to_numpy()).all() and (pi["step_lower"] > 0).all()
        rules.append(pi["interval_rule"].iloc[0])
    assert "the model's own" in rules[0] and "the model's own" not in rules[1]


def test_per_benchmark_coverage_interval_resamples_device_types():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "cross_hardware.py"
    spec = importlib.util.spec_from_file_location("cross_hardware_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    devices = np.repeat(list("abcde"), 20)
    # every run covered: no resample can say otherwise
    assert bench.device_bootstrap(np.ones(100, bool), devices) == (1.0, 1.0)
    # one device type of five missed entirely: 0.8 overall, and resampling the types spans well past 0.9
    inside = devices != "e"
    lo, hi = bench.device_bootstrap(inside, devices)
    assert lo < 0.8 < hi and hi >= 0.95
    assert bench.coverage_verdict(0.8, lo, hi, 5) == "outside, too few device types"
    # the same miss rate spread over 50 device types is a real miss: the interval excludes 0.90
    many = np.repeat(np.arange(50), 10)
    spread = np.tile(np.r_[np.ones(8, bool), np.zeros(2, bool)], 50)
    lo, hi = bench.device_bootstrap(spread, many)
    assert bench.coverage_verdict(0.8, lo, hi, 50) == "miss"
    assert bench.coverage_verdict(0.8, 0.6, 0.95, 10) == "outside, within sampling"
    assert bench.coverage_verdict(0.9, 0.5, 1.0, 2) == "ok"


def test_a_kind_scored_on_too_few_groups_still_bounds_its_interval_below():
    from perfmodel.models._conformal import half_widths

    book = {"seen": {"scores": np.linspace(0, 0.1, 100), "groups": 100, "split": "random 5-fold", "by_model": {}},
            "new_device": {"scores": np.linspace(0, 0.5, 600), "groups": 3, "split": "leave-one-gpu-type-out",
                           "by_model": {}}}
    half, rule = half_widths(book, np.array(["new_device", "seen"], dtype=object), 0.9)
    assert half[0] == pytest.approx(conformal_quantile(book["new_device"]["scores"], 0.9))
    assert half[1] == pytest.approx(conformal_quantile(book["seen"]["scores"], 0.9))
    assert rule[0].startswith("leave-one-gpu-type-out (3 groups, too few to stand alone")
    # one group is no bound at all: the seen scores
    book["new_device"]["groups"] = 1
    half, rule = half_widths(book, np.array(["new_device"], dtype=object), 0.9)
    assert half[0] == pytest.approx(conformal_quantile(book["seen"]["scores"], 0.9))
    assert "new_device scores too few" in rule[0]


class TestBaselineFirst:
    """``auto`` keeps the one-line baselines unless a candidate beats them by more than the selection's noise."""

    def test_only_transfer_kinds_keep_the_baselines(self):
        from perfmodel.fitting import TRANSFER_KINDS
        from perfmodel.kinds import KIND_NAMES
        assert set(TRANSFER_KINDS) <= set(KIND_NAMES) and not {"seen", "new_batch", "new_count"} & set(TRANSFER_KINDS)

    def test_margin_only_where_the_selection_rests_on_few_groups(self):
        assert baseline_margin(1) == baseline_margin(8) == 0.5
        assert baseline_margin(9) == baseline_margin(400) == 0.0

    def test_choice(self):
        from perfmodel.fitting import baseline_first
        # 4 groups: margin 0.5; gbm 40% below ratio is not enough, 60% is
        assert baseline_first({"gbm": 6.0, "ratio": 10.0, "mfu": 9.0}, 4) == "ratio"
        assert baseline_first({"gbm": 4.0, "ratio": 10.0, "mfu": 9.0}, 4) == "gbm"
        # mfu replaces ratio only by the same margin, and then is the reference
        assert baseline_first({"gbm": 3.0, "ratio": 10.0, "mfu": 4.0}, 4) == "mfu"
        # many groups (or runs): the lowest wins
        assert baseline_first({"gbm": 9.0, "ratio": 10.0, "mfu": 11.0}, 9) == "gbm"
        assert baseline_first({"gbm": 9.0, "ratio": 10.0, "mfu": 8.0}, 400) == "mfu"
        # no baseline scored: the lowest
        assert baseline_first({"gbm": 9.0, "roofline": 8.0}, 4) == "roofline"
        # what it cannot choose from is refused by name, not met with min()'s message
        with pytest.raises(ValueError, match="got none"):
            baseline_first({}, 4)
        with pytest.raises(ValueError, match="not finite: gbm"):
            baseline_first({"gbm": float("nan"), "ratio": 10.0}, 4)


def test_roofline_slopes_stay_physical_on_a_handful_of_runs():
    """Nine published runs of nine configurations (Megatron-Bridge's table): with its fixed slopes unpenalised
    the form's refits on seven or eight of them put what the runs cannot pin down into the slopes and predicted a
    held-out run at 10^47 times its time; the slope prior (``tau_slope``) keeps every refit within a few times."""
    from perfmodel.datasets import bundled_runs_path
    from perfmodel.schema import validate_runs

    runs = perfmodel.load_runs(bundled_runs_path("public_megatron_bridge.csv"))
    picks = [("deepseek-v3", 4096, "GB200", "fp8", 256), ("gpt-oss-120b", 4096, "GB200", "fp8", 64),
             ("gpt-oss-120b", 8192, "GB200", "bf16", 64), ("gpt-oss-120b", 8192, "GB300", "bf16", 64),
             ("llama3-8b", 8192, "B200", "fp8", 8), ("llama3-8b", 8192, "GB300", "fp8", 8),
             ("llama3-8b", 8192, "H100-SXM5-80GB", "fp8", 8), ("qwen3-235b-a22b", 4096, "GB200", "fp8", 256),
             ("qwen3-30b-a3b", 4096, "B200", "fp8", 8)]
    rows = [runs[(runs["model"] == m) & (runs["seq_len"] == s) & (runs["gpu_type"] == g) & (runs["precision"] == p)
                 & (runs["gpu_count"] == n)].iloc[0] for m, s, g, p, n in picks]
    nine = pd.DataFrame(rows).reset_index(drop=True)
    nine["model"] = nine["model"] + "@" + nine["seq_len"].astype(int).astype(str)  # one workload per sequence
    nine = validate_runs(nine[["model", "family", "params", "flops_per_sample", "batch_size", "gpu_count",
                               "gpu_type", "precision", "step_time_s"]])
    y = nine["step_time_s"].to_numpy(float)

    def worst_refit(**params):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = perfmodel.TrainingTimeModel(method="roofline", conformal=False,
                                                regressor_params=params or None).fit(nine)
            oof, _ = model.out_of_fold(nine, y, "seen")
        return float(np.max(np.abs(np.log(oof / y))))

    assert RooflineRegressor().tau_slope == 0.5
    assert worst_refit() < np.log(3.0)
    assert worst_refit(tau_slope=None) > np.log(1e6)  # the form before the prior
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pi = perfmodel.TrainingTimeModel(method="roofline").fit(nine).predict_interval(nine)
    assert np.all(pi["step_upper"] / pi["step_lower"] < 100.0)
