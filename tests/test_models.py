import joblib
import numpy as np
import pandas as pd
import pytest
from conftest import make_history
from sklearn.base import clone
from sklearn.model_selection import GroupKFold, cross_val_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from perfmodel.exceptions import NotFittedError
from perfmodel.models import (
    GBMRegressor,
    MFURegressor,
    OLSRegressor,
    OpsRegressor,
    PhysicsRegressor,
    RatioRegressor,
    RooflineRegressor,
    TrainingTimeModel,
    conformal_quantile,
    mape,
    median_ape,
)

#: The physical forms and the baselines on the checks' synthetic arrays: each reads two of its quantities from
#: the columns "x0" and "x1" (the checks' arrays have 1 to 10 unnamed columns); its other quantities are the
#: same in every row.
NAMED_COLUMN_REGRESSORS = [
    PhysicsRegressor(columns={"t_compute_s": "x0", "batch_size": "x1"}),
    OpsRegressor(columns={"t_flops_matmul_s": "x0", "kernels": "x1"}),
    RooflineRegressor(columns={"log_t_peak": "x0", "log_batch": "x1"}),
    RatioRegressor(columns={"log_work": "x0", "log_batch": "x1"}),
    MFURegressor(columns={"log_work": "x0", "log_peak": "x1"}),
]


def _expected_failed_checks(estimator) -> dict:
    if isinstance(estimator, (PhysicsRegressor, RooflineRegressor)):  # OpsRegressor is a PhysicsRegressor
        return {"check_estimators_nan_inf": "predict gives a run with a NaN or infinite quantity a NaN time, which "
                                            "the predict layer reports by query row (PredictionError); fit refuses "
                                            "them"}
    return {}


@parametrize_with_checks([OLSRegressor(), OLSRegressor(log_target=True), GBMRegressor(n_estimators=20),
                          *NAMED_COLUMN_REGRESSORS], expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible(estimator, check):
    check(estimator)


#: method -> (feature set, regressor class)
_NAMED = {"physics": ("physics", PhysicsRegressor), "ops": ("ops", OpsRegressor),
          "roofline": ("roofline", RooflineRegressor), "ratio": ("baseline", RatioRegressor),
          "mfu": ("baseline", MFURegressor)}


@pytest.fixture(scope="module")
def cpu_runs():
    from perfmodel.datasets import load_bundled_runs

    return load_bundled_runs()


def _design(runs, kind):
    from perfmodel.features import RunFeaturizer

    f = RunFeaturizer(kind=kind).fit(runs)
    return pd.DataFrame(f.transform(runs), columns=f.get_feature_names_out()), runs["step_time_s"].to_numpy()


class TestNamedColumns:
    @pytest.mark.parametrize("method", list(_NAMED))
    def test_columns_are_read_by_name(self, cpu_runs, method):
        kind, cls = _NAMED[method]
        X, y = _design(cpu_runs, kind)
        ref = cls().fit(X.to_numpy(), y)  # a plain array: the featurizer's columns in its order
        expect = ref.predict(X.to_numpy())
        assert not hasattr(ref, "feature_names_in_") and ref.columns_ == {c: c for c in X.columns}
        # by name: another column order, and an extra column, change nothing
        shuffled = X[list(X.columns[::-1])].assign(note=1.0)
        reg = cls().fit(shuffled, y)
        assert list(reg.feature_names_in_) == list(shuffled.columns)
        np.testing.assert_allclose(reg.predict(shuffled), expect, rtol=1e-9)
        # other names, given by ``columns``
        renamed = X.rename(columns=lambda c: f"my_{c}")
        reg = cls(columns={c: f"my_{c}" for c in X.columns}).fit(renamed, y)
        np.testing.assert_allclose(reg.predict(renamed), expect, rtol=1e-9)
        assert clone(reg).get_params()["columns"] == {c: f"my_{c}" for c in X.columns}

    def test_training_time_model_hands_its_regressors_named_columns(self, cpu_runs, tmp_path):
        import perfmodel

        m = TrainingTimeModel(method="physics", cv=None).fit(cpu_runs)
        reg = m.pipeline_.named_steps["regressor"]
        assert list(reg.feature_names_in_) == list(m.feature_names_)
        perfmodel.save_model(m, tmp_path / "m.perfmodel")
        back = perfmodel.load_model(tmp_path / "m.perfmodel")
        np.testing.assert_array_equal(back.predict(cpu_runs.head(20)), m.predict(cpu_runs.head(20)))

    def test_a_model_from_before_named_columns_still_predicts(self, cpu_runs):
        # a model file written before: arrays between the steps, no columns_ on the regressor
        m = TrainingTimeModel(method="roofline", cv=None).fit(cpu_runs)
        expect = m.predict(cpu_runs.head(20))
        features, reg = m.pipeline_.named_steps["features"], m.pipeline_.named_steps["regressor"]
        features.set_output(transform="default")
        del reg.feature_names_in_, reg.columns_, reg._column_index
        np.testing.assert_array_equal(m.predict(cpu_runs.head(20)), expect)

    def test_absent_quantities_are_the_same_in_every_run(self):
        # T = 2 ms + t / 0.25 (one family, no optimizer or communication term, batch 1): recovered, up to the
        # weak prior's pull toward the starting values (PRIOR_WEIGHT; it fades with the number of runs)
        rng = np.random.default_rng(0)
        t = rng.uniform(0.01, 1.0, 400)
        reg = PhysicsRegressor(fit_gamma=False, columns={"t_compute_s": "time"}).fit(pd.DataFrame({"time": t}),
                                                                                    0.002 + t / 0.25)
        table = reg.coef_table()["value"]
        assert table["a0_overhead_s"] == pytest.approx(0.002, rel=2e-3)
        assert table["efficiency[family_0]"] == pytest.approx(0.25, rel=2e-3)
        assert reg.columns_["t_opt_s"] is None and reg.columns_["t_compute_s"] == "time"
        # mfu with one device type and precision: the median utilisation of all runs
        work = np.log(rng.uniform(1e12, 1e13, 9))
        u = np.array([0.2, 0.3, 0.4, 0.5, 0.6, 0.3, 0.35, 0.45, 0.5])
        mfu = MFURegressor(columns={"log_work": "x0"}).fit(work[:, None], np.exp(work) / u)
        assert np.exp(mfu.log_u_) == pytest.approx(np.median(u))

    @pytest.mark.parametrize("method", list(_NAMED))
    def test_bad_columns(self, method):
        kind, cls = _NAMED[method]
        from perfmodel.features import BASELINE_COLUMNS, OPS_COLUMNS, PHYSICS_COLUMNS, ROOFLINE_COLUMNS

        names = {"physics": PHYSICS_COLUMNS, "ops": OPS_COLUMNS, "roofline": ROOFLINE_COLUMNS,
                 "baseline": BASELINE_COLUMNS}[kind]
        X = pd.DataFrame(np.ones((5, len(names))), columns=names)
        y = np.ones(5)
        with pytest.raises(ValueError, match=f"expects the {len(names)} columns .* got an array of 3 feature"):
            cls().fit(np.ones((5, 3)), y)
        with pytest.raises(ValueError, match=f"lacks '{names[-1]}'"):
            cls().fit(X.drop(columns=names[-1]), y)
        with pytest.raises(ValueError, match="names 'speed', which"):
            cls(columns={"speed": "x0"}).fit(X, y)
        with pytest.raises(TypeError, match="'columns' parameter .* must be a dict"):
            cls(columns=["x0"]).fit(X, y)
        anchor = {"physics": "t_compute_s", "ops": "t_flops_matmul_s", "roofline": "log_t_peak",
                  "ratio": "log_work", "mfu": "log_work"}[method]
        with pytest.raises(ValueError, match=f"reads column 'nope' for '{anchor}', which X does not have: X has "
                                             f"{len(names)} feature"):
            cls(columns={anchor: "nope"}).fit(X, y)
        with pytest.raises(ValueError, match="at least 3 runs to fit; got 2 sample"):
            cls().fit(X.head(2), y[:2])
        with pytest.raises(ValueError, match="positive step times"):
            cls().fit(X, -y)
        with pytest.raises(ValueError, match="feature names should match"):
            cls().fit(X, y).predict(X.rename(columns={names[0]: "other"}))

    def test_a_form_needs_its_anchor_quantity(self):
        X = np.ones((5, 2))
        with pytest.raises(ValueError, match="must give 't_compute_s' a column"):
            PhysicsRegressor(columns={"batch_size": "x0"}).fit(X, np.ones(5))
        with pytest.raises(ValueError, match="must give at least one of 't_flops_"):
            OpsRegressor(columns={"kernels": "x0"}).fit(X, np.ones(5))
        with pytest.raises(ValueError, match="must give 'log_work' a column"):
            MFURegressor(columns={"log_peak": "x0"}).fit(X, np.ones(5))

    def test_physical_quantities_are_checked(self):
        with pytest.raises(ValueError, match="Negative values in data passed to PhysicsRegressor: 'x0' "):
            PhysicsRegressor(columns={"t_compute_s": "x0"}).fit(-np.ones((5, 1)), np.ones(5))
        with pytest.raises(ValueError, match="NaN or infinite values in 'x0' \\(log_t_peak\\)"):
            RooflineRegressor(columns={"log_t_peak": "x0"}).fit(np.full((5, 1), np.nan), np.ones(5))
        with pytest.raises(ValueError, match="holds codes .* got 0.5"):
            RooflineRegressor(columns={"log_t_peak": "x0", "model_code": "x1"}).fit(
                np.column_stack([np.ones(5), np.full(5, 0.5)]), np.ones(5))

    def test_not_fitted(self):
        from sklearn.exceptions import NotFittedError as SklearnNotFitted

        for cls in (PhysicsRegressor, OpsRegressor, RooflineRegressor, RatioRegressor, MFURegressor):
            with pytest.raises(SklearnNotFitted):
                cls().predict(np.ones((1, 9)))


class TestOLS:
    def test_recovers_linear_coefficients(self):
        rng = np.random.default_rng(0)
        X = rng.uniform(0, 10, size=(500, 3))
        y = 1.5 + X @ np.array([2.0, -0.5, 0.25]) + rng.normal(0, 0.01, 500)
        reg = OLSRegressor().fit(X, y)
        np.testing.assert_allclose(reg.intercept_, 1.5, atol=0.01)
        np.testing.assert_allclose(reg.coef_, [2.0, -0.5, 0.25], atol=0.01)
        assert reg.rsquared_ > 0.999

    def test_recovers_power_law_on_logs(self):
        rng = np.random.default_rng(1)
        X = np.log(rng.uniform(1, 1000, size=(400, 2)))
        y = np.exp(-3.0 + X @ np.array([0.9, 0.3]) + rng.normal(0, 0.02, 400))
        reg = OLSRegressor(log_target=True).fit(X, y)
        np.testing.assert_allclose(reg.coef_, [0.9, 0.3], atol=0.01)
        np.testing.assert_allclose(reg.intercept_, -3.0, atol=0.02)

    def test_interval_coverage_near_nominal(self):
        rng = np.random.default_rng(2)
        def draw(n):
            X = rng.uniform(0, 5, size=(n, 2))
            return X, np.exp(0.5 + X @ np.array([0.4, -0.2]) + rng.normal(0, 0.1, n))
        X, y = draw(300)
        Xt, yt = draw(4000)
        _, lo, hi = OLSRegressor(log_target=True).fit(X, y).predict_interval(Xt, 0.9)
        coverage = np.mean((yt >= lo) & (yt <= hi))
        assert 0.85 <= coverage <= 0.95

    def test_mean_interval_narrower_than_prediction_interval(self):
        rng = np.random.default_rng(3)
        X = rng.uniform(0, 5, size=(100, 1))
        y = 2 * X[:, 0] + rng.normal(0, 1, 100)
        reg = OLSRegressor().fit(X, y)
        _, mlo, mhi = reg.predict_mean_interval(X[:5], 0.9)
        _, plo, phi = reg.predict_interval(X[:5], 0.9)
        assert np.all(mhi - mlo < phi - plo)

    def test_log_target_needs_positive_y(self):
        with pytest.raises(ValueError, match="positive target"):
            OLSRegressor(log_target=True).fit(np.ones((5, 1)) * np.arange(5)[:, None], [1, 2, 0, 3, 4])

    def test_coef_table_has_ci(self):
        rng = np.random.default_rng(4)
        X = rng.normal(size=(50, 2))
        reg = OLSRegressor(feature_names=["a", "b"]).fit(X, X[:, 0] + rng.normal(0, 0.1, 50))
        table = reg.coef_table(0.95)
        assert list(table.index) == ["const", "a", "b"]
        assert {"coef", "std_err", "[0.025", "0.975]"} <= set(table.columns)
        assert (table["[0.025"] < table["coef"]).all() and (table["coef"] < table["0.975]"]).all()


class TestGBM:
    def test_conformal_quantile(self):
        scores = np.arange(1, 10.0)  # n = 9
        assert conformal_quantile(scores, 0.9) == 9.0  # ceil(10 * 0.9) = 9th
        assert conformal_quantile(scores, 0.5) == 5.0
        assert conformal_quantile(scores[:3], 0.9) == np.inf

    def test_cross_conformal_coverage_near_nominal(self):
        # the one mechanism every method's interval uses: K-fold out-of-fold log errors, their conformal quantile
        from perfmodel.models._conformal import folds, half_widths, score_set

        rng = np.random.default_rng(5)
        def draw(n):
            X = rng.uniform(0, 3, size=(n, 2))
            return X, np.exp(np.sin(X[:, 0]) + 0.3 * X[:, 1] + rng.normal(0, 0.1, n))
        X, y = draw(400)
        Xt, yt = draw(3000)
        oof = np.empty(len(y))
        for tr, te in folds(None, len(y), cv=5):
            oof[te] = GBMRegressor(n_estimators=100).fit(X[tr], y[tr]).predict(X[te])
        book = {"seen": score_set(np.abs(np.log(y) - np.log(oof)), None, split="random 5-fold")}
        half, rule = half_widths(book, np.full(len(yt), "seen", dtype=object), 0.9)
        pred = GBMRegressor(n_estimators=100).fit(X, y).predict(Xt)
        coverage = np.mean((yt >= pred * np.exp(-half)) & (yt <= pred * np.exp(half)))
        assert 0.85 <= coverage <= 0.95 and set(rule) == {"random 5-fold (400 runs)"}


class TestTrainingTimeModel:
    @pytest.mark.parametrize("method", ["linear", "loglinear", "gbm"])
    def test_fit_reports(self, history, method):
        m = TrainingTimeModel(method=method).fit(history)
        assert m.n_runs_ == len(history)
        assert np.isfinite(m.rsquared_) and np.isfinite(m.cv_mape_)
        assert "R² (step time)" in m.summary().as_text()
        assert "<table>" in m.summary()._repr_html_()
        pi = m.predict_interval(history.head(5), 0.9)
        assert list(pi.columns) == ["step_time_s", "step_lower", "step_upper", "nearest_run_distance",
                                    "query_kind", "interval_rule", "peak_basis"]
        assert (pi["query_kind"] == "seen").all() and pi["interval_rule"].str.startswith("random 5-fold").all()
        assert (pi["step_lower"] <= pi["step_time_s"]).all() and (pi["step_time_s"] <= pi["step_upper"]).all()

    def test_loglinear_recovers_generated_exponent(self, history):
        m = TrainingTimeModel(method="loglinear").fit(history)
        table = m.coef_table()
        # generated with step = c * flops_step^0.9 * n^0.1, flops_step = fps * batch
        assert table.loc["log_flops_per_step", "coef"] == pytest.approx(0.9, abs=0.05)
        assert m.rsquared_log_ > 0.95
        assert m.cv_median_ape_ < 10

    def test_linear_uses_exactly_the_seed_formula(self, history):
        m = TrainingTimeModel(method="linear").fit(history)
        assert m.feature_names_ == ["params", "batch_size", "gpu_count"]
        assert list(m.coef_table().index) == ["const", "params", "batch_size", "gpu_count"]

    def test_sklearn_tools_work_on_run_frames(self, history):
        m = TrainingTimeModel(method="loglinear", conformal=False)
        scores = cross_val_score(m, history, history["step_time_s"], groups=history["model"],
                                 cv=GroupKFold(4), scoring="neg_mean_absolute_percentage_error")
        assert len(scores) == 4 and np.all(np.isfinite(scores))
        assert clone(m).get_params()["method"] == "loglinear"
        kept = clone(TrainingTimeModel(method="gbm", held_out=("new_model",)))  # held_out is a parameter: kept
        assert kept.get_params()["held_out"] == ("new_model",)

    def test_joblib_round_trip(self, history, tmp_path):
        m = TrainingTimeModel(method="gbm").fit(history)
        joblib.dump(m, tmp_path / "m.joblib")
        back = joblib.load(tmp_path / "m.joblib")
        np.testing.assert_allclose(back.predict(history), m.predict(history))

    def test_not_fitted(self, history):
        with pytest.raises(NotFittedError, match="not fitted"):
            TrainingTimeModel().predict(history)

    def test_bad_method(self, history):
        with pytest.raises(ValueError, match="'method' parameter of TrainingTimeModel must be one of"):
            TrainingTimeModel(method="magic").fit(history)

    def test_bad_confidence(self, history):
        m = TrainingTimeModel().fit(history)
        with pytest.raises(ValueError, match=r"'confidence' parameter .* must be a float in \(0, 1\). Got 1.5"):
            m.predict_interval(history, 1.5)

    def test_interval_coverage_on_new_generated_models(self):
        # New models from the same generator: the leave-one-model-out interval should hold its nominal level.
        covers = []
        for seed in range(5):
            train, test = make_history(n_models=30, seed=2 * seed), make_history(n_models=30, seed=2 * seed + 1)
            test = test.assign(model=test["model"] + "-new")  # models the fit has not seen
            pi = TrainingTimeModel(method="loglinear", held_out="new_model").fit(train).predict_interval(test, 0.9)
            assert (pi["query_kind"] == "new_model").all()
            covers.append(np.mean((test["step_time_s"] >= pi["step_lower"]) & (test["step_time_s"] <= pi["step_upper"])))
        assert 0.85 <= np.mean(covers) <= 0.95


class TestLogFeatureIdentifiability:
    """kind="log" keeps only the hardware columns the runs can identify: a coefficient set by datasheet rounding
    (H100's fp8 peak is 2.0001 times its bf16 peak, B200's exactly 2) once gave a new device e^460 seconds."""

    @staticmethod
    def _runs(devices, seed=0):
        from perfmodel.hardware import get_spec

        rng = np.random.default_rng(seed)
        rows = []
        for g in devices:
            for prec in ("bf16", "fp8"):
                for m, params in (("a", 8e9), ("b", 70e9)):
                    for n in (8, 64):
                        work = 6 * params * 4096 * 16
                        t = work / (get_spec(g).peak_tflops(prec) * 1e12 * 0.4) * np.exp(rng.normal(0, 0.05))
                        rows.append({"model": m, "params": params, "flops_per_sample": 6 * params * 4096,
                                     "batch_size": 16, "gpu_count": n, "gpu_type": g, "precision": prec,
                                     "step_time_s": t})
        return pd.DataFrame(rows)

    def test_devices_with_the_same_datasheet_are_one_point(self):
        from perfmodel.features import RunFeaturizer

        # B200 and B300 share every figure: with H100 that is two points, so one hardware column, not two
        two = RunFeaturizer(kind="log").fit(self._runs(["H100", "B200", "B300"]))
        assert "log_peak_tflops" in two.feature_names_out_ and "log_memory_bandwidth" not in two.feature_names_out_
        three = RunFeaturizer(kind="log").fit(self._runs(["H100", "B200", "GB200"]))
        assert {"log_peak_tflops", "log_memory_bandwidth"} <= set(three.feature_names_out_)

    def test_a_column_equal_to_others_but_for_rounding_is_dropped(self):
        from perfmodel.features import COLLINEAR_TOL, RunFeaturizer

        rng = np.random.default_rng(0)
        full = pd.DataFrame({"a": rng.normal(size=200), "b": rng.normal(size=200)})
        full["c"] = 2 * full["a"] - full["b"] + 3 + rng.normal(0, COLLINEAR_TOL / 100, 200)  # rounding only
        full["d"] = full["a"] + rng.normal(0, 0.1, 200)  # mostly a, with information of its own
        assert RunFeaturizer._independent(full, ["a", "b", "c", "d"]) == ["a", "b", "d"]
        # a column that varies by float noise only has no rank of its own either
        full["e"] = 40.0 + rng.normal(0, 1e-14, 200)
        assert RunFeaturizer._independent(full, ["a", "e", "b"]) == ["a", "b"]

    def test_loglinear_carries_a_two_point_history_to_a_new_device_without_blowing_up(self):
        runs = self._runs(["H100", "B200", "B300"])
        query = self._runs(["GB200"])
        pi = TrainingTimeModel(method="loglinear", held_out="new_device").fit(runs).predict_interval(query, 0.9)
        ratio = pi["step_time_s"].to_numpy() / query["step_time_s"].to_numpy()
        assert np.all((ratio > 0.5) & (ratio < 2))  # was e^+-400 before
        assert np.all(pi["step_upper"] / pi["step_time_s"] < 100)


def test_metrics_match_hand_computation():
    y, p = np.array([1.0, 2.0, 4.0]), np.array([1.1, 1.8, 5.0])
    assert mape(y, p) == pytest.approx((10 + 10 + 25) / 3)
    assert median_ape(y, p) == pytest.approx(10)


@pytest.mark.parametrize("rows", [37, 5000])  # below and above the row count where trees are walked one by one
def test_tree_ensemble_predicts_bit_identically_to_scikit_learn(rows):
    from sklearn.ensemble import GradientBoostingRegressor

    from perfmodel.models import TreeEnsemble

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = X[:, 0] ** 2 + np.sin(3 * X[:, 1]) + 0.1 * rng.normal(size=400)
    est = GradientBoostingRegressor(n_estimators=120, max_depth=3, learning_rate=0.05, random_state=0).fit(X, y)
    Q = rng.normal(size=(rows, 4)) * 1.5
    assert np.array_equal(TreeEnsemble.from_sklearn(est).predict(Q), est.predict(Q))


def test_every_method_has_one_regressor_factory():
    from perfmodel.models import METHODS
    from perfmodel.models._registry import REGRESSORS, make_regressor

    assert set(REGRESSORS) == set(METHODS)
    for method in METHODS:
        a, b = make_regressor(method), make_regressor(method)
        assert a is not b and hasattr(a, "fit") and hasattr(a, "predict")  # a fresh estimator each call
    with pytest.raises(ValueError, match="Unknown method 'nope'"):
        make_regressor("nope")
