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
from perfmodel.fitting import choose_method, fit_history, load_history, query_kind
from perfmodel.hardware import get_spec
from perfmodel.models._roofline import QUERY_KINDS
from perfmodel.models import RooflineRegressor

DEVICES = ("V100", "A100", "H100", "L40S", "A10")


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
    model = perfmodel.TrainingTimeModel(method="roofline").fit(train)
    pi = model.predict_interval(test)
    ape = np.abs(pi["step_time_s"].to_numpy() / test["step_time_s"].to_numpy() - 1)
    assert np.median(ape) < 0.15
    inside = (pi["step_lower"].to_numpy() <= test["step_time_s"].to_numpy()) & (
        test["step_time_s"].to_numpy() <= pi["step_upper"].to_numpy())
    assert inside.mean() >= 0.7
    reg = model.pipeline_.named_steps["regressor"]
    kinds = reg.query_kind(model.pipeline_.named_steps["features"].transform(test))
    assert set(kinds) == {"new_device"}
    # the new-device interval is the one built from leave-one-device-type-out refits: wider than a seen config's
    seen = model.predict_interval(train.head(5))
    assert (pi["step_upper"] / pi["step_time_s"]).min() > (seen["step_upper"] / seen["step_time_s"]).max()


def test_roofline_scores_match_query_kinds(xhw):
    reg = perfmodel.TrainingTimeModel(method="roofline").fit(xhw).pipeline_.named_steps["regressor"]
    assert set(reg.scores_) == set(QUERY_KINDS)
    for kind, scores in reg.scores_.items():
        assert np.all(np.diff(scores) >= 0)
        if kind == "new_model":  # group-balanced: 200 quantiles of each held-out model's scores
            assert len(scores) == 200 * xhw["model"].nunique()
        elif kind != "sparse_model":  # one out-of-fold score per run; the few-shot refits score a subset
            assert len(scores) == len(xhw)


def test_roofline_query_kinds_within_a_known_pair(xhw):
    model = perfmodel.TrainingTimeModel(method="roofline").fit(xhw)
    reg, feat = model.pipeline_.named_steps["regressor"], model.pipeline_.named_steps["features"]
    row = xhw.head(1)
    kinds = reg.query_kind(feat.transform(pd.concat([
        row, row.assign(batch_size=3), row.assign(gpu_count=int(row["gpu_count"].iloc[0]) * 3),
        row.assign(model="never-seen")], ignore_index=True)))
    assert list(kinds) == ["seen", "new_batch", "new_count", "new_model"]
    # a model known from runs on one device only, asked on another: the few-shot scores
    other = next(g for g in xhw["gpu_type"].unique() if g != row["gpu_type"].iloc[0])
    one_dev = pd.concat([xhw, row.assign(model="mine", run_id="mine-1")], ignore_index=True)
    m2 = perfmodel.TrainingTimeModel(method="roofline").fit(one_dev)
    r2_, f2 = m2.pipeline_.named_steps["regressor"], m2.pipeline_.named_steps["features"]
    assert list(r2_.query_kind(f2.transform(row.assign(model="mine", gpu_type=other)))) == ["sparse_model"]


def test_roofline_point_fit_skips_scores(xhw):
    X = perfmodel.TrainingTimeModel(method="roofline").fit(xhw).pipeline_.named_steps["features"].transform(xhw)
    reg = RooflineRegressor(conformal=False).fit(X, xhw["step_time_s"].to_numpy())
    assert reg.scores_ == {}
    lo = reg.predict_interval(X[:3])[1]
    assert np.isnan(lo).all()


def test_roofline_rejects_bad_input():
    with pytest.raises(ValueError, match="columns"):
        RooflineRegressor().fit(np.ones((5, 3)), np.ones(5))
    with pytest.raises(ValueError, match="positive"):
        from perfmodel.features import ROOFLINE_COLUMNS

        RooflineRegressor().fit(np.zeros((5, len(ROOFLINE_COLUMNS))), -np.ones(5))


def test_query_kind_of_a_query(xhw):
    q = xhw.head(1).copy()
    assert query_kind(xhw, q) == "seen"
    assert query_kind(xhw, q.assign(batch_size=3)) == "new_batch"
    assert query_kind(xhw, q.assign(gpu_count=64)) == "new_count"
    assert query_kind(xhw, q.assign(model="other")) == "new_model"
    assert query_kind(xhw, q.assign(gpu_type=get_spec("B200").name)) == "new_device"


def test_auto_chooses_on_the_split_matching_the_query(xhw):
    model = fit_history(xhw, "auto", kind="new_device")
    assert model.auto_split_ == "leave-one-gpu_type-out"
    assert set(model.auto_scores_) == {"physics", "roofline", "loglinear", "gbm", "ops"}
    finite = {m: s for m, s in model.auto_scores_.items() if np.isfinite(s)}
    assert model.method == min(finite, key=finite.get)
    best, scores, split = choose_method(xhw, "new_model")
    assert split == "leave-one-model-out" and best in scores


def test_auto_honours_cv_on_seen_queries(xhw):
    _, _, split = choose_method(xhw, "seen", cv=3)
    assert split == "3-fold"


def test_named_methods_score_queries_beyond_the_runs_by_holding_that_group_out(xhw, tmp_path):
    h100 = get_spec("H100").name
    train, test = xhw[xhw["gpu_type"] != h100], xhw[xhw["gpu_type"] == h100]
    plain = perfmodel.TrainingTimeModel(method="gbm").fit(train)
    held = perfmodel.TrainingTimeModel(method="gbm").fit(train, held_out="gpu_type")
    assert plain.held_out_ is None and held.held_out_ == "gpu_type"
    assert len(held.held_out_scores_) == len(train)  # one leave-device-out score per run
    assert np.all(np.diff(held.held_out_scores_) >= 0)
    # a device the runs lack: pred · exp(±q) with q the conformal quantile of the leave-device-out scores
    # (never narrower than the method's own interval)
    pi = held.predict_interval(test, 0.9)
    own = plain.predict_interval(test, 0.9)
    q = perfmodel.models.conformal_quantile(held.held_out_scores_, 0.9)
    assert q > perfmodel.models.conformal_quantile(held.pipeline_.named_steps["regressor"].scores_, 0.9)
    # (a model whose own leave-device-out scores, from 2-8 device types, run larger takes its own quantile)
    from perfmodel.models._gbm import group_quantiles

    assert held.held_out_scores_by_model_ == {} and held.held_out_scores_by_model_few_
    q = group_quantiles({}, test["model"].astype(str).to_numpy(), np.full(len(test), q), 0.9,
                        widen_only=held.held_out_scores_by_model_few_)
    np.testing.assert_allclose(pi["step_upper"], np.maximum(own["step_upper"], pi["step_time_s"] * np.exp(q)))
    np.testing.assert_allclose(pi["step_lower"], np.minimum(own["step_lower"], pi["step_time_s"] * np.exp(-q)))
    assert (pi["step_upper"] > own["step_upper"]).all()
    # a device the runs have keeps the method's own interval
    pd.testing.assert_frame_equal(held.predict_interval(train.head(10)), plain.predict_interval(train.head(10)))
    # the scores travel in a safe model file
    held.save(tmp_path / "g.perfmodel")
    pd.testing.assert_frame_equal(perfmodel.load_model(tmp_path / "g.perfmodel").predict_interval(test), pi)


def test_held_out_model_scores_weigh_every_model_alike(xhw):
    model = perfmodel.TrainingTimeModel(method="gbm").fit(xhw, held_out="model")
    assert len(model.held_out_scores_) == 200 * xhw["model"].nunique()
    # physics scores new models itself (new family vs new model of a known family), also group-balanced
    physics = perfmodel.TrainingTimeModel(method="physics").fit(xhw, held_out="model")
    assert physics.held_out_ is None
    assert len(physics.pipeline_.named_steps["regressor"].scores_new_) == 200 * xhw["model"].nunique()


def test_held_out_is_checked_and_ignored_where_it_cannot_apply(xhw):
    with pytest.raises(ValueError, match="held_out"):
        perfmodel.TrainingTimeModel(method="gbm").fit(xhw, held_out="precision")
    one = xhw[xhw["gpu_type"] == get_spec("A100").name]
    assert perfmodel.TrainingTimeModel(method="loglinear").fit(one, held_out="gpu_type").held_out_ is None
    # roofline scores every kind of query itself
    assert perfmodel.TrainingTimeModel(method="roofline").fit(xhw, held_out="gpu_type").held_out_ is None
    assert perfmodel.TrainingTimeModel(method="physics").fit(xhw, held_out="gpu_type").held_out_ == "gpu_type"


def test_held_out_counts_compare_as_numbers(xhw):
    model = perfmodel.TrainingTimeModel(method="loglinear").fit(xhw, held_out="gpu_count")
    assert model.held_out_values_ == ["1.0", "8.0"]
    q = pd.concat([xhw.head(1)] * 4, ignore_index=True)
    q["gpu_count"] = pd.Series([8, 8.0, "8", 4], dtype=object)
    pi = model.predict_interval(q)
    own = model.pipeline_.named_steps["regressor"].predict_interval(
        model.pipeline_.named_steps["features"].transform(q.head(1)), 0.9)
    # 8 however written is a count the runs have (the method's own interval); 4 is not
    np.testing.assert_allclose(pi["step_upper"].iloc[:3], own[2][0])
    assert pi["step_upper"].iloc[3] / pi["step_time_s"].iloc[3] > own[2][0] / own[0][0]


def test_evaluate_fits_named_methods_for_the_split(xhw, monkeypatch):
    from perfmodel.evaluate import evaluate

    seen = []
    fit = perfmodel.TrainingTimeModel.fit

    def spy(self, X, y=None, *, held_out=None):
        seen.append((self.method, held_out))
        return fit(self, X, y, held_out=held_out)

    monkeypatch.setattr(perfmodel.TrainingTimeModel, "fit", spy)
    evaluate(xhw, methods=("loglinear",), splits=("leave-one-gpu-type-out",), baselines=False)
    assert ("loglinear", "gpu_type") in seen


def test_a_model_fitted_for_other_queries_says_its_interval_is_its_own(xhw):
    h100 = get_spec("H100").name
    fitted = perfmodel.fit(xhw[xhw["gpu_type"] != h100], method="loglinear")
    with pytest.warns(perfmodel.exceptions.DataQualityWarning, match="not fitted for new_device"):
        perfmodel.predict_training_time("m1", batch_size=8, gpu_type="H100", steps=100, precision="fp16",
                                        history=fitted)


def test_a_point_fit_gbm_refuses_intervals(xhw):
    from perfmodel.models import GBMRegressor

    X = np.log(xhw[["params", "batch_size"]].to_numpy(dtype=float))
    reg = GBMRegressor(conformal=False, n_estimators=10).fit(X, xhw["step_time_s"].to_numpy())
    with pytest.raises(ValueError, match="conformal=False"):
        reg.predict_interval(X)


def test_fitting_for_a_kind_of_query_holds_out_its_column(xhw):
    assert fit_history(xhw, "loglinear", kind="new_device").held_out_ == "gpu_type"
    assert fit_history(xhw, "loglinear", kind="new_count").held_out_ == "gpu_count"
    assert fit_history(xhw, "loglinear", kind="seen").held_out_ is None


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
    runs, labels = load_history([str(a), xhw.iloc[50:]])
    assert len(runs) == len(xhw)
    assert labels == [str(a), f"DataFrame ({len(xhw) - 50} runs)"]
    assert list(runs["history_source"].unique()) == labels
    with pytest.raises(TypeError, match="history"):
        load_history([1])
    with pytest.raises(ValueError, match="empty"):
        load_history([])


def test_bundled_history_names():
    runs, labels = load_history("cpu")
    assert labels == ["bundled:runs_cpu.csv"] and len(runs) > 100


def test_roofline_round_trips_through_a_safe_model_file(tmp_path, xhw):
    model = perfmodel.fit(xhw, method="roofline")
    model.save(tmp_path / "m.perfmodel")
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
    assert np.isfinite(p["pred"]).all() and (lo < p["pred"]).all() and (p["pred"] < hi).all()
    assert set(p["held_out"]) == set(sub["gpu_type"]) and 0.0 <= row["coverage"] <= 1.0


def test_balanced_scores_weigh_every_group_alike():
    from perfmodel.models import balanced_scores

    # 1,000 runs of a well-predicted model and 10 of a badly predicted one: each is half of the scores
    scores = np.r_[np.zeros(1000), np.ones(10)]
    b = balanced_scores(scores, np.r_[np.zeros(1000), np.ones(10)])
    assert len(b) == 400 and b.mean() == 0.5
    assert perfmodel.models.conformal_quantile(b, 0.9) == 1.0  # pooled rows would say 0.0


def test_new_device_intervals_are_scored_per_model_where_enough_devices_were_held_out():
    """Mondrian by model: a workload whose speed transfers across devices poorly gets a wider new-device interval
    than one that transfers well, once its runs span enough device types; with fewer, every model's scores."""
    devices = ("V100-SXM2-32GB", "T4", "A100-SXM4-80GB", "A100-PCIE-40GB", "A30", "A10", "A40", "L4", "L40",
               "RTX-A6000", "H100")
    rng = np.random.default_rng(5)
    rows = []
    for m, spread in (("steady", 0.02), ("erratic", 0.35), ("other", 0.1)):
        params = int(10 ** rng.uniform(7, 9))
        for d in devices:
            spec = get_spec(d)
            eff = 0.3 * float(np.exp(rng.normal(0, spread)))  # how well this workload suits this device
            for b in (4, 8, 16):
                t = 6.0 * params * 512 * b / (spec.peak_tflops("fp16") * 1e12 * eff) * float(np.exp(rng.normal(0, .02)))
                rows.append({"model": m, "family": "decoder", "params": params, "flops_per_sample": 6.0 * params * 512,
                             "batch_size": b, "gpu_count": 1, "gpu_type": d, "precision": "fp16", "step_time_s": t})
    runs = perfmodel.load_runs(pd.DataFrame(rows))
    train = runs[runs["gpu_type"] != get_spec("H100").name].reset_index(drop=True)  # 10 device types
    model = perfmodel.TrainingTimeModel(method="roofline").fit(train)
    reg = model.pipeline_.named_steps["regressor"]
    assert len(reg.device_scores_by_model_) == 3
    q = pd.DataFrame({"model": ["steady", "erratic"], "params": 1e8, "batch_size": 8, "gpu_count": 1,
                      "gpu_type": "H100", "precision": "fp16"})
    pi = model.predict_interval(q)
    width = np.log(pi["step_upper"] / pi["step_lower"]).to_numpy()
    assert width[1] > 3 * width[0]
    # on 5 device types no model has enough held-out devices to stand alone: the pooled interval, which the
    # erratic model's own few scores widen (they never narrow the steady one's)
    few = train[train["gpu_type"].isin([get_spec(d).name for d in devices[:5]])]
    m5 = perfmodel.TrainingTimeModel(method="roofline").fit(few)
    reg5 = m5.pipeline_.named_steps["regressor"]
    assert reg5.device_scores_by_model_ == {} and len(reg5.device_scores_by_model_few_) == 3
    w5 = np.log(m5.predict_interval(q)["step_upper"] / m5.predict_interval(q)["step_lower"]).to_numpy()
    reg5.device_scores_by_model_few_ = {}
    pooled = np.log(m5.predict_interval(q)["step_upper"] / m5.predict_interval(q)["step_lower"]).to_numpy()
    assert pooled[0] == pytest.approx(pooled[1])  # without them: one pooled interval for every model
    assert w5[0] == pytest.approx(pooled[0]) and w5[1] > w5[0]


def test_per_model_new_device_scores_too_few_for_the_confidence_fall_back_to_pooled():
    # one run per (model, device) on 10 devices: 10 own scores bound a 90% interval but not a 95% one
    devices = ("V100-SXM2-32GB", "T4", "A100-SXM4-80GB", "A100-PCIE-40GB", "A30", "A10", "A40", "L4", "L40",
               "RTX-A6000")
    rng = np.random.default_rng(2)
    rows = [{"model": f"m{m}", "family": "decoder", "params": 1e8 * (m + 1), "flops_per_sample": 6e8 * 512 * (m + 1),
             "batch_size": 8, "gpu_count": 1, "gpu_type": d, "precision": "fp16",
             "step_time_s": 6e8 * 512 * (m + 1) * 8 / (get_spec(d).peak_tflops("fp16") * 1e12 * 0.3)
             * float(np.exp(rng.normal(0, 0.2)))} for m in range(3) for d in devices]
    model = perfmodel.TrainingTimeModel(method="roofline").fit(perfmodel.load_runs(pd.DataFrame(rows)))
    assert len(model.pipeline_.named_steps["regressor"].device_scores_by_model_) == 3
    q = pd.DataFrame({"model": ["m0"], "params": 1e8, "batch_size": 8, "gpu_count": 1, "gpu_type": "H100",
                      "precision": "fp16"})
    for conf in (0.9, 0.95):
        pi = model.predict_interval(q, conf)
        assert np.isfinite(pi[["step_lower", "step_upper"]].to_numpy()).all() and (pi["step_lower"] > 0).all()


def test_named_methods_score_a_new_device_per_model_where_enough_devices_were_held_out():
    devices = ("V100-SXM2-32GB", "T4", "A100-SXM4-80GB", "A100-PCIE-40GB", "A30", "A10", "A40", "L4", "L40",
               "RTX-A6000", "H100")
    rng = np.random.default_rng(7)
    rows = []
    for m, spread in (("steady", 0.02), ("erratic", 0.4)):
        params = int(10 ** rng.uniform(7, 9))
        for d in devices:
            eff = 0.3 * float(np.exp(rng.normal(0, spread)))
            for b in (4, 8, 16):
                t = 6.0 * params * 512 * b / (get_spec(d).peak_tflops("fp16") * 1e12 * eff)
                rows.append({"model": m, "family": "decoder", "params": params, "flops_per_sample": 6.0 * params * 512,
                             "batch_size": b, "gpu_count": 1, "gpu_type": d, "precision": "fp16", "step_time_s": t})
    runs = perfmodel.load_runs(pd.DataFrame(rows))
    train = runs[runs["gpu_type"] != get_spec("H100").name].reset_index(drop=True)
    model = perfmodel.TrainingTimeModel(method="loglinear").fit(train, held_out="gpu_type")
    assert set(model.held_out_scores_by_model_) == {"steady", "erratic"}
    q = pd.DataFrame({"model": ["steady", "erratic"], "params": 1e8, "flops_per_sample": 6e8 * 512, "batch_size": 8,
                      "gpu_count": 1, "gpu_type": "H100", "precision": "fp16"})
    width = np.log(model.predict_interval(q)["step_upper"] / model.predict_interval(q)["step_lower"]).to_numpy()
    assert width[1] > width[0]
    # a model's own scores are its calibration: its interval is theirs, even where the method's own (seen-
    # configuration, pooled over both models) interval is wider
    pred = model.predict_interval(q)
    own_q = perfmodel.models.conformal_quantile(model.held_out_scores_by_model_["steady"], 0.9)
    assert np.log(pred["step_upper"] / pred["step_time_s"]).iloc[0] == pytest.approx(own_q)
    seen = model.predict_interval(train[train["model"] == "steady"].head(1))
    assert np.log(seen["step_upper"] / seen["step_time_s"]).iloc[0] > own_q
    # a higher confidence never narrows it (past what its own scores can bound: at least their largest)
    halves = [float(np.log(model.predict_interval(q, c)["step_upper"] / model.predict_interval(q, c)["step_time_s"])
                    .iloc[1]) for c in (0.5, 0.8, 0.9, 0.95, 0.99)]
    assert np.all(np.diff(halves) >= -1e-12)
    # a device the runs have, however it is spelled, is not a new device
    a10 = get_spec("A10").name
    spelled = model.predict_interval(q.iloc[[0, 0]].assign(gpu_type=[a10, a10.lower()]))
    np.testing.assert_allclose(spelled["step_lower"].iloc[0], spelled["step_lower"].iloc[1])
    np.testing.assert_allclose(spelled["step_upper"].iloc[0], spelled["step_upper"].iloc[1])
    # with too few devices: no per-model scores to stand alone; the erratic model's own scores only widen
    few = train[train["gpu_type"].isin([get_spec(d).name for d in devices[:5]])].reset_index(drop=True)
    fm = perfmodel.TrainingTimeModel(method="loglinear").fit(few, held_out="gpu_type")
    assert fm.held_out_scores_by_model_ == {}
    assert set(fm.held_out_scores_by_model_few_) == {"steady", "erratic"}
    pooled = perfmodel.models.conformal_quantile(fm.held_out_scores_, 0.9)
    half = np.log(fm.predict_interval(q)["step_upper"] / fm.predict_interval(q)["step_time_s"]).to_numpy()
    erratic = perfmodel.models.conformal_quantile(fm.held_out_scores_by_model_few_["erratic"], 0.9)
    steady = perfmodel.models.conformal_quantile(fm.held_out_scores_by_model_few_["steady"], 0.9)
    assert steady < pooled < erratic
    assert half[1] >= erratic - 1e-12  # widened to the erratic model's own errors
    assert half[0] >= pooled - 1e-12  # never narrowed below the pooled scores by the steady model's few


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
