import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import make_history
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel import ExtrapolationWarning, TrainingTimeModel, predict_many, predict_training_time
from perfmodel.exceptions import (
    PredictionError,
    SchemaError,
    UnknownHardwareError,
)
from perfmodel.plan import OnlineEstimator, estimate_cost


@pytest.fixture(scope="module")
def fitted():
    return TrainingTimeModel(method="loglinear").fit(make_history())


def call(fitted, **over):
    kw = dict(batch_size=16, gpu_count=2, gpu_type="A100", steps=1000, history=fitted)
    kw.update(over)
    model = kw.pop("model", "m1")
    return predict_training_time(model, **kw)


class TestResult:
    def test_fields_and_interval(self, fitted):
        r = call(fitted)
        assert r.lower < r.seconds < r.upper
        assert r.steps == 1000 and r.method == "loglinear" and r.n_runs == fitted.n_runs_
        assert r.seconds == pytest.approx(r.startup_seconds + 1000 * r.step_seconds)
        assert r.confidence == 0.9 and r.inside_domain and r.warnings == []
        d = r.to_dict()
        assert {"seconds", "lower", "upper", "confidence", "step_seconds", "r2", "method", "n_runs", "warnings"} <= set(d)

    def test_str_is_readable(self, fitted):
        text = str(call(fitted, steps=2_000_000))
        assert "(90% PI" in text and "loglinear, R² " in text and f"{fitted.n_runs_} runs)" in text

    def test_higher_confidence_is_wider(self, fitted):
        a, b = call(fitted, confidence=0.5), call(fitted, confidence=0.98)
        assert b.upper - b.lower > a.upper - a.lower

    def test_epochs_and_dataset_size(self, fitted):
        r = call(fitted, steps=None, epochs=3, dataset_size=1000)
        assert r.steps == math.ceil(1000 / (16 * 2)) * 3

    def test_spec_dict(self, fitted):
        row = fitted.models_.loc["m1"]
        r = call(fitted, model={"params": row["params"], "flops_per_sample": row["flops_per_sample"]})
        assert r.seconds == pytest.approx(call(fitted).seconds)

    def test_alias_gpu_type(self, fitted):
        assert call(fitted, gpu_type="NVIDIA A100-SXM4-80GB").seconds == call(fitted).seconds

    def test_outside_domain_warns(self, fitted):
        with pytest.warns(ExtrapolationWarning, match="gpu_count=64 is outside the fitted range"):
            r = call(fitted, gpu_count=64)
        assert not r.inside_domain and r.warnings

    def test_history_as_dataframe_and_path(self, tmp_path):
        h = make_history()
        path = tmp_path / "h.csv"
        h.to_csv(path, index=False)
        a = predict_training_time("m1", batch_size=16, gpu_type="A100", steps=10, history=h, method="loglinear")
        b = predict_training_time("m1", batch_size=16, gpu_type="A100", steps=10, history=str(path),
                                  method="loglinear")
        assert a.seconds == pytest.approx(b.seconds)

    def test_auto_picks_a_method(self):
        r = predict_training_time("m1", batch_size=16, gpu_type="A100", steps=10, history=make_history())
        assert r.method in ("loglinear", "gbm")


class TestBadInput:
    @pytest.mark.parametrize("over, exc, match", [
        ({"batch_size": 0}, ValueError, r"'batch_size' parameter of predict_training_time must be a positive int. Got 0"),
        ({"batch_size": -4}, ValueError, r"'batch_size' .* Got -4"),
        ({"batch_size": "8"}, TypeError, r"'batch_size' .* positive int. Got '8'"),
        ({"gpu_count": 0}, ValueError, r"'gpu_count' .* Got 0"),
        ({"steps": 0}, ValueError, r"'steps' .* Got 0"),
        ({"steps": -10}, ValueError, r"'steps' .* Got -10"),
        ({"gpu_type": "A1000"}, UnknownHardwareError, r"Unknown gpu_type 'A1000'.*Closest"),
        ({"steps": 10, "epochs": 1, "dataset_size": 100}, ValueError, r"either 'steps' or 'epochs'.*not both"),
        ({"steps": None}, ValueError, r"needs the amount of work: 'steps', or 'epochs' and 'dataset_size'"),
        ({"steps": None, "epochs": 2}, ValueError, r"needs the amount of work"),
        ({"confidence": 1.0}, ValueError, r"'confidence' parameter .* in \(0, 1\). Got 1.0"),
        ({"confidence": 0}, ValueError, r"'confidence' .* Got 0"),
        ({"precision": "int8"}, ValueError, r"'precision' parameter .* Got 'int8'"),
        ({"model": "resnet-9000"}, ValueError, r"names 'resnet-9000', which is not in the history"),
        ({"model": 3.5}, TypeError, r"'model' parameter .* Got float"),
        ({"model": {"flops_per_sample": 1e9}}, ValueError, r"needs 'params'"),
        ({"model": {"params": -5}}, ValueError, r"'params' parameter of the model spec of predict_training_time must be a finite positive number. Got -5"),
        ({"method": "magic"}, ValueError, r"'method' parameter of predict_training_time must be one of"),
        ({"history": 12}, TypeError, r"'history' parameter .* Got int"),
    ])
    def test_raises_naming_the_parameter(self, fitted, over, exc, match):
        with pytest.raises(exc, match=match):
            call(fitted, **over)

    def test_empty_history(self):
        with pytest.raises(ValueError, match="empty"):
            predict_training_time("m1", batch_size=8, gpu_type="A100", steps=1, history=make_history().iloc[:0])

    def test_unseen_device_with_one_device_history(self, fitted):
        with pytest.raises(ValueError, match=r"no runs on gpu_type 'H100-SXM5-80GB' \(it has: A100-SXM4-80GB\)"):
            call(fitted, gpu_type="H100")

    def test_unseen_precision(self, fitted):
        with pytest.raises(ValueError, match="no runs at precision 'bf16'"):
            call(fitted, precision="bf16")

    def test_module_without_example_input(self, fitted):
        torch = pytest.importorskip("torch")
        with pytest.raises(ValueError, match="'example_input' parameter .* required"):
            call(fitted, model=torch.nn.Linear(4, 4))


def test_torch_module_is_counted():
    torch = pytest.importorskip("torch")
    h = make_history()
    module = torch.nn.Sequential(torch.nn.Linear(100, 200), torch.nn.ReLU(), torch.nn.Linear(200, 10))
    r = predict_training_time(module, example_input=torch.randn(100), batch_size=16, gpu_type="A100", steps=10,
                              history=h, method="loglinear")
    params = 100 * 200 + 200 + 200 * 10 + 10
    assert r.query["params"] == params
    # forward 2*(100*200 + 200*10) per sample, backward twice that (input grads of layer 1 skipped: x needs none)
    assert r.query["flops_per_sample"] == pytest.approx(2 * 100 * 200 * 2 + 2 * 200 * 10 * 3)


def test_cross_device_history_predicts_unseen_device_with_warning():
    a = make_history(seed=0)
    b = make_history(seed=0, noise_seed=5).assign(gpu_type="H100", step_time_s=lambda d: d["step_time_s"] / 3)
    fitted = TrainingTimeModel(method="loglinear").fit(pd.concat([a, b]))
    with pytest.warns(ExtrapolationWarning, match="not in the history; predicted through hardware peaks"):
        r = predict_training_time("m1", batch_size=16, gpu_type="H200", steps=10, history=fitted)
    assert r.seconds > 0


class TestPredictMany:
    def test_vectorised_matches_single(self, fitted):
        q = pd.DataFrame({"model": ["m1", "m2", "m1"], "batch_size": [16, 32, 64], "gpu_count": [2, 1, 4],
                          "gpu_type": ["A100", "A100", "NVIDIA A100-SXM4-80GB"], "steps": [1000, 10, 5]})
        out = predict_many(q, history=fitted)
        assert len(out) == 3
        assert out.loc[0, "seconds"] == pytest.approx(call(fitted).seconds)
        assert (out["lower"] <= out["seconds"]).all() and (out["seconds"] <= out["upper"]).all()
        assert out["inside_domain"].all()

    @pytest.mark.parametrize("method", ["loglinear", "gbm", "physics"])
    def test_each_distinct_configuration_once_gives_the_per_row_answer(self, monkeypatch, method):
        # predict_many predicts each distinct configuration once and broadcasts: the same frame, to the bit, as
        # predicting every row (the per-step prediction is row-wise), repeated rows, NA precision and all
        import perfmodel.predict._base as P

        runs = perfmodel.load_bundled_runs()
        model = perfmodel.fit(runs, method=method, cv=None)
        rng = np.random.default_rng(3)
        n = 3000
        q = pd.DataFrame({"model": rng.choice(list(model.models_.index)[:5] + ["gpt-s"], n),
                          "batch_size": rng.choice([8, 16, 1024], n), "gpu_count": rng.choice([1, 2, 3], n),
                          "gpu_type": rng.choice(["cpu", "CPU"], n), "steps": rng.integers(1, 10**6, n),
                          "precision": rng.choice(["fp32", None], n)})
        once = predict_many(q, history=model)
        first, inverse = P.distinct_query_rows(q, skip=("steps",))
        assert len(first) < n / 5
        rest = q.drop(columns="steps")
        pd.testing.assert_frame_equal(rest.iloc[first].iloc[inverse].reset_index(drop=True), rest)
        monkeypatch.setattr(P, "distinct_query_rows", lambda q, skip=(): (np.arange(len(q)), np.arange(len(q))))
        every = predict_many(q, history=model)
        pd.testing.assert_frame_equal(once, every)
        assert (once["query_kind"] == "new_count").any() and not once["inside_domain"].all()

    def test_unhashable_cells_fall_back_to_one_group_per_row(self):
        from perfmodel.predict._queries import distinct_query_rows as _distinct_rows

        q = pd.DataFrame({"a": [[1], [1], [2]], "b": [1, 1, 1]})
        first, inverse = _distinct_rows(q)
        assert list(first) == [0, 1, 2] and list(inverse) == [0, 1, 2]
        first, inverse = _distinct_rows(pd.DataFrame({"a": ["x", "y", "x", None, None], "s": [1, 2, 3, 4, 5]}),
                                        skip=("s",))
        assert list(first) == [0, 1, 3] and list(inverse) == [0, 1, 0, 2, 2]

    def test_distinct_rows_when_the_column_code_would_overflow(self):
        # 6 columns of 2,000 distinct values: 2000**6 > 2**62, so the mixed-radix code must renumber on the way
        from perfmodel.predict._queries import distinct_query_rows as _distinct_rows

        rng = np.random.default_rng(0)
        base = pd.DataFrame({f"c{j}": rng.integers(0, 2000, 2000) * 1.5 for j in range(6)})
        q = pd.concat([base, base.iloc[::3]], ignore_index=True)
        first, inverse = _distinct_rows(q)
        assert len(first) == len(q.drop_duplicates())
        pd.testing.assert_frame_equal(q.iloc[first].iloc[inverse].reset_index(drop=True), q)

    def test_domain_distance_is_the_same_for_repeated_and_distinct_rows(self, fitted):
        rng = np.random.default_rng(1)
        q = pd.DataFrame({"params": rng.choice([1e5, 3e6, 2e7], 500) * rng.choice([1.0, 1.7], 500),
                          "batch_size": rng.choice([4, 16, 128], 500), "gpu_count": rng.choice([1, 2, 8], 500)})
        d = fitted.domain_distance(q)
        one_by_one = np.array([fitted.domain_distance(q.iloc[[i]])[0] for i in range(0, 500, 37)])
        np.testing.assert_allclose(d[::37], one_by_one)
        assert (d >= 0).all() and d.max() > 0

    def test_bad_column(self, fitted):
        q = pd.DataFrame({"params": [1e6], "batch_size": [0], "gpu_type": ["A100"], "steps": [10]})
        with pytest.raises(ValueError, match="column 'batch_size' must be finite and positive"):
            predict_many(q, history=fitted)


class TestBundled:
    def test_default_history_is_the_bundled_runs(self):
        runs = perfmodel.load_bundled_runs()
        model = runs["model"].iloc[0]
        r = predict_training_time(model, batch_size=int(runs["batch_size"].iloc[0]), gpu_type="cpu", steps=100)
        assert r.n_runs == len(runs) and r.lower < r.seconds < r.upper


def test_nearest_run_distance(fitted):
    assert call(fitted).nearest_run_distance == pytest.approx(0.0)
    with pytest.warns(ExtrapolationWarning):
        far = call(fitted, model={"params": 1e9, "flops_per_sample": 1e13}, batch_size=4096, gpu_count=64)
    assert far.nearest_run_distance > 1.0


class TestExtrapolationWidening:
    def test_far_batch_gets_a_wider_interval(self):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            near = perfmodel.predict_training_time("gpt-m", batch_size=32, gpu_count=2, gpu_type="cpu", steps=100,
                                                   method="loglinear")
            far = perfmodel.predict_training_time("gpt-m", batch_size=100_000, gpu_count=2, gpu_type="cpu",
                                                  steps=100, method="loglinear")
        assert far.nearest_run_distance > 2 and not far.inside_domain
        assert math.log(far.upper / far.lower) > 1.5 * math.log(near.upper / near.lower)

    def test_widening_starts_beyond_d0(self):
        from perfmodel.models._conformal import EXTRAPOLATION_D0

        runs = perfmodel.load_bundled_runs()
        m = perfmodel.TrainingTimeModel(method="loglinear").fit(runs)
        pi = m.predict_interval(runs.head(20))
        near = (pi["nearest_run_distance"] <= EXTRAPOLATION_D0).to_numpy()
        assert near.all() and not pi["interval_rule"].str.contains("distance").any()


class TestEachRowAsAlone:
    """A row of predict_many (or a configuration of recommend) gets the answer predict_training_time gives it
    alone, whatever the other rows ask."""

    @pytest.fixture(scope="class")
    def runs(self):
        return make_history()

    def _alone(self, runs, row, method="physics"):
        return predict_training_time(row["model"], batch_size=row["batch_size"], gpu_count=row["gpu_count"],
                                     gpu_type=row["gpu_type"], steps=row["steps"], history=runs, method=method)

    def test_other_rows_do_not_change_a_row(self, runs):
        base = {"model": "m1", "batch_size": 16, "gpu_count": 2, "gpu_type": "A100", "steps": 1000}
        others = [dict(base, gpu_count=64), dict(base, batch_size=100_000), dict(base, batch_size=24)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            alone = predict_many(pd.DataFrame([base]), history=runs, method="physics")
            mixed = predict_many(pd.DataFrame([base] + others), history=runs, method="physics")
            singles = [self._alone(runs, r) for r in [base] + others]
        cols = ["seconds", "lower", "upper"]
        assert np.allclose(mixed.loc[0, cols].to_numpy(float), alone.loc[0, cols].to_numpy(float))
        for i, r in enumerate(singles):
            assert np.allclose(mixed.loc[i, cols].to_numpy(float), [r.seconds, r.lower, r.upper]), i
            assert mixed.loc[i, "query_kind"] == r.query_kind
        assert list(mixed["query_kind"]) == ["seen", "new_count", "new_batch", "new_batch"]

    def test_rows_keep_their_order_and_index(self, runs):
        q = pd.DataFrame([{"model": "m1", "batch_size": b, "gpu_count": n, "gpu_type": "A100", "steps": 10}
                          for b, n in [(24, 1), (16, 1), (16, 64), (16, 2)]], index=[7, 3, 5, 1])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = predict_many(q, history=runs, method="physics")
            one = [predict_many(q.loc[[i]], history=runs, method="physics") for i in q.index]
        assert list(out.index) == [7, 3, 5, 1]
        assert np.allclose(out["seconds"].to_numpy(), [o["seconds"].iloc[0] for o in one])

    def test_a_batch_size_the_runs_lack_is_reported_as_new(self, runs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert self._alone(runs, {"model": "m1", "batch_size": 100_000, "gpu_count": 2, "gpu_type": "A100",
                                      "steps": 10}).query_kind == "new_batch"

    def test_a_model_of_the_history_with_another_size_is_refused(self, runs):
        q = pd.DataFrame({"model": ["m1", "m1"], "params": [np.nan, 1e3], "batch_size": 16, "gpu_count": 1,
                          "gpu_type": "A100", "steps": 10})
        with pytest.raises(ValueError, match=r"row 2 \(counting from 1\) names model 'm1', which the history has"):
            predict_many(q, history=runs)
        filled = predict_many(q.iloc[:1], history=runs)  # an empty size is the history model's
        named = predict_many(q.iloc[:1].drop(columns="params"), history=runs)
        assert filled["seconds"].iloc[0] == pytest.approx(named["seconds"].iloc[0])


class TestEachRowAsAloneReview:
    @pytest.fixture(scope="class")
    def runs(self):
        return make_history()

    def test_a_history_model_with_its_own_params_gets_its_flops_too(self, runs):
        row = runs[runs["model"] == "m1"].iloc[0]
        q = pd.DataFrame({"model": ["m1"], "params": [row["params"]], "batch_size": [16], "gpu_count": [2],
                          "gpu_type": ["A100"], "steps": [100]})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            many = predict_many(q, history=runs, method="loglinear")
            alone = predict_training_time("m1", batch_size=16, gpu_count=2, gpu_type="A100", steps=100,
                                          history=runs, method="loglinear")
        assert many["seconds"].iloc[0] == pytest.approx(alone.seconds)

    def test_text_that_is_not_a_number_is_refused_not_replaced(self, runs):
        q = pd.DataFrame({"model": ["m1"], "params": ["3.7e6x"], "batch_size": [16], "gpu_count": [1],
                          "gpu_type": ["A100"], "steps": [10]})
        with pytest.raises(perfmodel.SchemaError, match="params"):
            predict_many(q, history=runs)

    def test_error_rows_count_in_the_callers_queries(self, runs):
        q = pd.DataFrame({"model": ["bert-large", "bert-large", "gpt-m"], "batch_size": [16, 16, 16], "gpu_count": 1,
                          "gpu_type": ["H100", "H100", "cpu"], "precision": ["bf16", "bf16", "fp33"],
                          "steps": 10})
        # the cpu row is answered from the CPU history, apart from the GPU rows; its number is still the caller's
        with pytest.raises(ValueError, match=r"'fp33' \(row 3, counting from 1\)"):
            predict_many(q)
        with pytest.raises(perfmodel.SchemaError, match=r"'steps'.*\(first: row 2, counting from 1"):
            predict_many(pd.DataFrame({"model": ["m1", "m1"], "batch_size": 16, "gpu_count": 1,
                                       "gpu_type": "A100", "steps": [10, -1]}), history=runs)


def test_a_history_file_rewritten_while_it_is_read_is_read_again(tmp_path, monkeypatch):
    # the digest that keys every fit is of the very bytes the runs came from
    from perfmodel import history, io

    path = tmp_path / "h.csv"
    make_history(n_models=3).to_csv(path, index=False)
    real, calls = io.load_runs, []

    def load_and_rewrite(source, **kw):
        out = real(source, **kw)
        if not calls:  # a writer replaces the file while it is being read, once
            make_history(n_models=5).to_csv(path, index=False)
        calls.append(source)
        return out

    monkeypatch.setattr(io, "load_runs", load_and_rewrite)
    loaded = history.read_history(str(path))
    assert len(calls) == 2 and len(loaded.runs) == len(make_history(n_models=5))
    assert loaded.digest == history.read_history(str(path)).digest


def test_a_history_rewritten_at_the_same_size_and_time_is_not_answered_from_the_old_fit(tmp_path):
    # the in-process cache is keyed by content: a rewrite that keeps the size and modification time is seen
    import os

    path = tmp_path / "h.csv"
    runs = make_history(n_models=3)
    runs.to_csv(path, index=False, float_format="%.6e")  # fixed width: ten times slower is the same size
    kw = dict(batch_size=16, gpu_count=2, gpu_type="A100", steps=1000, history=str(path), method="loglinear")
    before = predict_training_time("m1", **kw).seconds
    st = os.stat(path)
    text = path.read_text()
    slower = runs.assign(step_time_s=runs["step_time_s"] * 10)
    new = slower.to_csv(index=False, float_format="%.6e")
    assert len(new) == len(text) and new != text
    path.write_text(new)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = predict_training_time("m1", **kw).seconds
    assert after == pytest.approx(before * 10, rel=0.05)


def test_a_misnamed_history_says_what_is_wrong_with_it():
    with pytest.raises(ValueError, match=r"Run history 'gpuu' must end in \.csv or \.parquet"):
        predict_training_time("gpt-s", batch_size=8, gpu_type="cpu", steps=10, history="gpuu")
    with pytest.raises(FileNotFoundError, match=r"Run history '.*nonexistent\.csv' does not exist"):
        predict_many(pd.DataFrame({"model": ["gpt-s"], "batch_size": [8], "gpu_type": ["cpu"], "steps": [10]}),
                     history="/nonexistent.csv")


def test_a_non_numeric_cell_is_named_by_its_row_in_the_callers_queries():
    q = pd.DataFrame({"model": ["bert-large", "bert-large", "newm"], "params": [None, None, "abc"],
                      "batch_size": 16, "gpu_count": 1, "gpu_type": ["H100", "H100", "cpu"], "steps": 10})
    with pytest.raises(perfmodel.SchemaError, match=r"predict_many: Column 'params' must be numeric.*\(rows 3\).*'abc'"):
        predict_many(q)


class TestOwnRunsWin:
    """A history of the caller's own runs beside perfmodel's bundled runs: the own runs answer their own
    configurations; the bundled runs inform only what the own runs cannot."""

    @pytest.fixture(scope="class")
    def own(self):
        runs = perfmodel.load_bundled_runs()
        own = runs[runs["model"] == "gpt-s"].copy()
        own["step_time_s"] *= 2.0  # the caller's stack is twice as slow (a transform of real runs, tests only)
        own["run_id"] = "own-" + own["run_id"].astype(str)
        return own.reset_index(drop=True)

    def test_an_own_configuration_follows_the_own_runs(self, own):
        from perfmodel.predict import MIN_OWN_RUNS

        assert len(own) >= MIN_OWN_RUNS
        q = dict(batch_size=16, gpu_count=1, gpu_type="cpu", steps=1000, method="loglinear")
        pooled = predict_training_time("gpt-s", history=[own, "cpu"], **q)
        alone = predict_training_time("gpt-s", history=own, **q)
        bundled = predict_training_time("gpt-s", history="cpu", **q)
        assert pooled.provenance == [f"DataFrame ({len(own)} runs)"] and pooled.query_kind == "seen"
        assert pooled.seconds == pytest.approx(alone.seconds) and pooled.upper == pytest.approx(alone.upper)
        assert pooled.step_seconds > 1.5 * bundled.step_seconds  # not pulled toward the bundled gpt-s

    def test_a_new_model_is_answered_by_the_own_runs_when_they_hold_enough_models(self, own):
        # one own model cannot score a new one: the pooled fit answers
        r = predict_training_time("gpt-m", batch_size=16, gpu_type="cpu", steps=1000, history=[own, "cpu"],
                                  method="loglinear")
        assert len(r.provenance) == 2
        runs = perfmodel.load_bundled_runs()
        many = runs[runs["model"].isin(sorted(set(runs["model"]))[:6]) & (runs["model"] != "gpt-m")].copy()
        many["run_id"] = "own-" + many["run_id"].astype(str)
        p = perfmodel.Predictor([many, "cpu"], method="loglinear")
        r = p.predict("gpt-m", batch_size=16, gpu_type="cpu", steps=1000)
        # enough models to score a new one: their own fit answers where its record (its 50% band for the row)
        # beats the shifted prior's leave-one-model-out record, else the shifted prior does
        own_fit = p.model("new_model", own=True)
        band = own_fit.predict_interval(pd.DataFrame([r.query]), 0.5)
        own_record = float(np.log(band["step_upper"] / band["step_time_s"]).iloc[0])
        shifted = not own_record < p.shift().record()
        assert r.interval_rule.startswith("the bundled answer shifted") == shifted
        if shifted:
            assert len(r.provenance) == 2 and r.n_runs > len(many)
        else:
            assert r.provenance == [f"DataFrame ({len(many)} runs)"] and r.query_kind == "new_model"

    def test_own_runs_do_not_drop_the_prior_for_a_model_they_lack(self, own):
        # 20 own runs of 5 models on a host twice as slow (a transform of real runs, tests only); a sixth model
        runs = perfmodel.load_bundled_runs()
        names = ["gpt-s", "bert-s", "lstm-s", "mlp-m", "cnn-s"]
        mine = runs[runs["model"].isin(names)].groupby("model").head(4).copy()
        mine["step_time_s"] *= 2.0
        mine["run_id"] = "own-" + mine["run_id"].astype(str)
        p = perfmodel.Predictor([mine, "cpu"])
        shift = p.shift()
        assert shift.n == len(mine) and 1.5 < np.exp(shift.overall) < 2.05  # most of the way to x2, shrunk
        q = dict(batch_size=8, gpu_type="cpu", steps=100)
        shifted = p.predict("vit-s", **q)
        bundled = perfmodel.Predictor("cpu").predict("vit-s", **q)
        assert shifted.interval_rule.startswith("the bundled answer shifted")
        assert shifted.step_seconds / bundled.step_seconds == pytest.approx(
            float(np.exp(shift.offset(["cpu"], ["vit-s"])[0])), rel=1e-6)
        assert shifted.step_lower < shifted.step_seconds < shifted.step_upper
        many = p.predict_many(pd.DataFrame({"model": ["vit-s"], "steps": [100], **{k: [v] for k, v in q.items()
                                                                                  if k != "steps"}}))
        assert many["seconds"].iloc[0] == pytest.approx(shifted.seconds)
        assert many["step_upper"].iloc[0] == pytest.approx(shifted.step_upper)

    @pytest.fixture(scope="class")
    def mine(self):
        # 20 own runs of 5 models on a host twice as slow (a transform of real runs, tests only)
        runs = perfmodel.load_bundled_runs()
        names = ["gpt-s", "bert-s", "lstm-s", "mlp-m", "cnn-s"]
        mine = runs[runs["model"].isin(names)].groupby("model").head(4).copy()
        mine["step_time_s"] *= 2.0
        mine["run_id"] = "own-" + mine["run_id"].astype(str)
        return mine.reset_index(drop=True)

    @pytest.fixture(scope="class")
    def two_precisions(self, mine):
        # the own runs at fp32 and bf16 (bf16 x1.5: a transform of real runs, tests only); the bundled CPU runs
        # are all fp32, so the prior cannot price a bf16 row
        bf16 = mine.assign(precision="bf16", step_time_s=mine["step_time_s"] * 1.5,
                           run_id=mine["run_id"].astype(str) + "-bf16")
        return pd.concat([mine, bf16], ignore_index=True)

    @pytest.mark.slow  # 13 predictions, each deciding its rows afresh (~20 s)
    def test_a_shifted_row_does_not_depend_on_the_rows_asked_with_it(self, two_precisions):
        p = perfmodel.Predictor([two_precisions, "cpu"])
        rows = pd.DataFrame({"model": ["vit-s", "vit-s", "gpt-s", "vit-m", "cnn-s", "vit-s"],
                             "batch_size": [8, 8, 16, 4, 2, 64], "gpu_type": "cpu", "steps": 100,
                             "precision": ["fp32", "bf16", "fp32", "bf16", "fp32", "fp32"]})
        together = p.predict_many(rows)
        rules = together["interval_rule"].str.startswith("the bundled answer shifted")
        assert rules.any() and not rules.all()  # one batch, rows of one kind answered both ways
        fresh = perfmodel.Predictor([two_precisions, "cpu"])  # asked one row at a time, last row first
        for i in reversed(range(len(rows))):
            alone = fresh.predict_many(rows.iloc[[i]])
            for col in ("seconds", "lower", "upper", "step_time_s"):
                assert together[col].iloc[i] == pytest.approx(alone[col].iloc[0], rel=1e-9)
            assert together["interval_rule"].iloc[i] == alone["interval_rule"].iloc[0]
            one = p.predict(rows["model"].iloc[i], batch_size=int(rows["batch_size"].iloc[i]), gpu_type="cpu",
                            steps=100, precision=rows["precision"].iloc[i])
            assert one.seconds == pytest.approx(together["seconds"].iloc[i], rel=1e-9)

    def test_a_shifted_answer_starts_up_as_the_own_runs_do(self, mine):
        slow_start = mine.assign(startup_s=30.0)
        p = perfmodel.Predictor([slow_start, "cpu"])
        r = p.predict("vit-s", batch_size=8, gpu_type="cpu", steps=100)
        assert r.interval_rule.startswith("the bundled answer shifted")
        assert r.startup_seconds == pytest.approx(30.0)
        assert r.seconds == pytest.approx(30.0 + 100 * r.step_seconds)
        assert r.lower == pytest.approx(30.0 + 100 * r.step_lower)

    def test_a_row_the_prior_cannot_price_is_the_own_runs(self, two_precisions):
        from perfmodel.exceptions import UnsupportedQueryError

        q = dict(batch_size=8, gpu_type="cpu", steps=100)
        with pytest.raises(UnsupportedQueryError, match="bf16"):
            perfmodel.Predictor("cpu").predict("vit-s", precision="bf16", **q)
        p = perfmodel.Predictor([two_precisions, "cpu"])
        assert p.shift().n == len(two_precisions) // 2  # the fp32 runs: the prior prices no bf16 run
        fp32 = p.predict("vit-s", precision="fp32", **q)
        bf16 = p.predict("vit-s", precision="bf16", **q)
        assert fp32.interval_rule.startswith("the bundled answer shifted")
        assert not bf16.interval_rule.startswith("the bundled answer shifted")
        assert bf16.provenance == [f"DataFrame ({len(two_precisions)} runs)"] and bf16.seconds > 0

    def test_a_row_the_own_fit_refuses_goes_to_the_shifted_prior(self, mine):
        # the own runs are all on one device: their loglinear fit cannot say what two devices do; the prior can
        assert set(mine["gpu_count"]) == {1}
        p = perfmodel.Predictor([mine, "cpu"], method="loglinear")
        with pytest.raises(ValueError, match="gpu_count"):
            perfmodel.Predictor(mine, method="loglinear").predict("gpt-s", batch_size=8, gpu_count=2, gpu_type="cpu",
                                                                  steps=100)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = p.predict("gpt-s", batch_size=8, gpu_count=2, gpu_type="cpu", steps=100)
        assert r.interval_rule.startswith("the bundled answer shifted") and r.seconds > 0

    def test_a_bundled_model_by_its_mixed_history_name_is_the_priors_model(self, mine):
        p = perfmodel.Predictor([mine, "cpu"])
        r = p.predict("bundled:gpt-s", batch_size=8, gpu_type="cpu", steps=100)
        prior = perfmodel.Predictor("cpu").predict("gpt-s", batch_size=8, gpu_type="cpu", steps=100)
        assert r.interval_rule.startswith("the bundled answer shifted")
        assert r.query_kind == prior.query_kind == "seen"  # the prior's own model, not a new one
        assert r.step_seconds / prior.step_seconds == pytest.approx(
            float(np.exp(p.shift().offset(["cpu"], ["bundled:gpt-s"])[0])), rel=1e-6)

    @pytest.mark.parametrize("confidence", [0.5, 0.95])
    def test_a_shifted_band_is_at_the_predictors_confidence(self, mine, confidence):
        p = perfmodel.Predictor([mine, "cpu"], confidence=confidence)
        r = p.predict("vit-s", batch_size=8, gpu_type="cpu", steps=100)
        assert r.interval_rule.startswith("the bundled answer shifted") and r.confidence == confidence
        half = float(p.shift().half_width(["cpu"], confidence)[0])
        assert np.log(r.step_upper / r.step_seconds) == pytest.approx(half, rel=1e-9)
        assert np.log(r.step_seconds / r.step_lower) == pytest.approx(half, rel=1e-9)

    def test_a_device_the_own_runs_lack_is_answered_by_the_pooled_fit(self):
        from perfmodel.datasets import bundled_runs_path

        mine = perfmodel.load_runs(bundled_runs_path("public_neusight.csv"))  # another publisher's runs as "own"
        assert "B200" not in set(mine["gpu_type"])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r = predict_training_time(str(mine["model"].iloc[0]), batch_size=2, gpu_type="B200", steps=100,
                                      precision="fp32", history=[mine, "mlperf"], method="roofline")
        assert r.provenance == [f"DataFrame ({len(mine)} runs)", "bundled:mlperf_steps.csv"]
        assert r.query_kind == "new_pair" and r.n_runs > len(mine)
        assert any("your own runs have no B200" in str(w.message) for w in caught)

    def test_too_few_own_runs_are_pooled(self, own):
        few = own.head(4)
        r = predict_training_time("gpt-s", batch_size=16, gpu_type="cpu", steps=1000, history=[few, "cpu"],
                                  method="loglinear")
        assert len(r.provenance) == 2

    def test_predict_many_rows_split_between_own_and_pooled_fits(self, own):
        q = pd.DataFrame({"model": ["gpt-s", "gpt-m", "gpt-s"], "batch_size": [16, 16, 16], "gpu_type": "cpu",
                          "steps": 100})
        many = predict_many(q, history=[own, "cpu"], method="loglinear")
        for i, row in q.iterrows():
            one = predict_training_time(row["model"], batch_size=16, gpu_type="cpu", steps=100,
                                        history=[own, "cpu"], method="loglinear")
            assert many["seconds"].iloc[i] == pytest.approx(one.seconds)
            assert many["query_kind"].iloc[i] == one.query_kind

    def test_a_bundled_model_named_like_an_own_one_is_another_workload(self, own):
        from perfmodel.history import read_history

        loaded = read_history([own, "cpu"])
        assert loaded.mixed and len(loaded.own_runs().runs) == len(own)
        bundled_names = set(loaded.runs.loc[~loaded.own, "model"])
        assert "gpt-s" not in bundled_names and "bundled:gpt-s" in bundled_names
        assert set(loaded.runs.loc[loaded.own, "model"]) == {"gpt-s"}

    def test_the_own_gpu_runs_precision_is_assumed_on_devices_they_lack(self):
        from perfmodel.predict import default_precision

        by = {"A100-SXM4-80GB": ("fp32", True), "H100-SXM5-80GB": ("bf16", True), "*gpu*": ("fp32", False)}
        assert default_precision(by, "L4") == ("fp32", "precision not given: assumed 'fp32', what most of your "
                                                       "own GPU runs used")
        assert default_precision(by, "H100-SXM5-80GB") == ("bf16", None)

    def test_a_device_the_own_runs_lack_says_the_bundled_history_answered(self):
        from perfmodel.predict._support import prior_note as _prior_note

        q = pd.DataFrame({"gpu_type": ["L4"]})
        prov = ["my_runs.csv", "bundled:mlperf_steps.csv"]
        note = _prior_note(prov, q, {"A100-SXM4-80GB"})[0]
        assert "your own runs have no L4" in note and "fitted together with your runs" in note
        assert "shifted" not in note  # such a row is the pooled fit's, not the shifted prior's
        assert _prior_note(prov, q, {"L4"}) == []
        assert "Calibrate with a few runs of your own" in _prior_note(["bundled:mlperf_steps.csv"], q)[0]


def test_a_known_model_is_predicted_with_its_runs_family_and_op_counts():
    """The row cross-validation scored and the query naming that model see the same model-level columns."""
    runs = perfmodel.load_bundled_runs()
    fitted = perfmodel.fit(runs, method="ops")
    row = runs[(runs["model"] == "gpt-m") & (runs["batch_size"] == 32) & (runs["gpu_count"] == 2)].head(1)
    direct = float(fitted.predict_interval(row)["step_time_s"].iloc[0])
    r = predict_training_time("gpt-m", batch_size=32, gpu_count=2, gpu_type="cpu", steps=1, history=fitted)
    assert r.step_seconds == pytest.approx(direct, rel=1e-9)
    many = predict_many(pd.DataFrame({"model": ["gpt-m"], "batch_size": [32], "gpu_count": [2], "gpu_type": ["cpu"],
                                      "steps": [1]}), history=fitted)
    assert many["step_time_s"].iloc[0] == pytest.approx(direct, rel=1e-9)
    # a row with params (the model's own) and no family takes the family too
    many = predict_many(pd.DataFrame({"model": ["gpt-m"], "params": [float(row["params"].iloc[0])], "batch_size": [32],
                                      "gpu_count": [2], "gpu_type": ["cpu"], "steps": [1]}), history=fitted)
    assert many["step_time_s"].iloc[0] == pytest.approx(direct, rel=1e-9)


class TestModelSpecFamily:
    """A dict spec may say what its FLOPs are: the baselines pool utilisation by op class."""

    def test_family_reaches_the_query(self):
        import warnings

        spec = {"params": 25.6e6, "flops_per_sample": 2.46e10}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cnn = predict_training_time({**spec, "family": "cnn"}, batch_size=256, gpu_count=8,
                                        gpu_type="A100-SXM4-80GB", steps=1000, method="mfu")
            dec = predict_training_time({**spec, "family": "Decoder"}, batch_size=256, gpu_count=8,
                                        gpu_type="A100-SXM4-80GB", steps=1000, method="mfu")
        # convolutions reach a smaller share of the peak than matmuls: on the bundled MLPerf rows of A100 the
        # CNNs' median utilisation is below half the transformers' (BERT counted at its unpadded length)
        assert cnn.seconds > 1.5 * dec.seconds

    def test_bad_family_is_refused(self):
        with pytest.raises(TypeError, match="family"):
            predict_training_time({"params": 1e6, "family": 3}, batch_size=8, gpu_type="cpu", steps=10)


def test_fp8_is_never_assumed_unless_every_run_used_it():
    """fp8 is an opt-in: a device whose runs are mostly fp8 answers an unnamed precision in its usual other one."""
    from perfmodel.history import precision_by_device

    runs = pd.DataFrame({"gpu_type": ["H100"] * 6 + ["B200"] * 2,
                         "precision": ["fp8", "fp8", "fp8", "bf16", "bf16", "fp16"] + ["fp8", "fp8"]})
    by = precision_by_device(runs)
    assert by["H100"] == ("bf16", False)  # fp8 is the mode, but not every run used it
    assert by["B200"] == ("fp8", True)  # every run fp8: that is what the history knows


class TestPrecisionTransfer:
    """A precision no run of the history used is a new_device query, answered under auto by the ratio rule through
    the device's peaks and element sizes (perfmodel.fitting.PRECISION_TRANSFER_METHOD)."""

    @staticmethod
    def _fp16_history():
        h = make_history(n_models=4)
        h = h[h["gpu_count"] == 1]
        return pd.concat([h.assign(gpu_type="A100-SXM4-80GB", precision="fp16"),
                          h.assign(gpu_type="H100-SXM5-80GB", precision="fp16",
                                   step_time_s=h["step_time_s"] / 2.5)], ignore_index=True)

    def test_classified_as_new_device(self):
        from perfmodel.kinds import classify

        runs = self._fp16_history()
        q = runs.iloc[[0, 0]].drop(columns=["step_time_s"]).reset_index(drop=True)
        q.loc[1, "precision"] = "fp32"
        assert list(classify(runs, q)) == ["seen", "new_device"]

    def test_tf32_from_fp16_runs_through_peak_and_element_bytes(self):
        from perfmodel.hardware import ELEMENT_BYTES, get_spec

        h = self._fp16_history()
        row = h[(h["gpu_type"] == "A100-SXM4-80GB") & (h["model"] == "m1") & (h["batch_size"] == 16)].iloc[0]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r = predict_training_time("m1", batch_size=16, gpu_type="A100", precision="tf32", steps=1, history=h)
        a100 = get_spec("A100")
        # sqrt(peak ratio x element-bandwidth ratio): sqrt(312/156 x 4/2) = 2
        factor = math.sqrt(a100.peak_tflops("fp16") / a100.peak_tflops("tf32")
                           * ELEMENT_BYTES["tf32"] / ELEMENT_BYTES["fp16"])
        assert r.method == "ratio" and r.query_kind == "new_device"
        assert r.step_seconds == pytest.approx(row["step_time_s"] * factor, rel=1e-9)
        assert r.step_lower < r.step_seconds < r.step_upper
        assert any("precision 'tf32' is not in the history" in w for w in r.warnings + [str(c.message)
                                                                                        for c in caught])

    def test_many_queries_mix_seen_and_new_precisions(self):
        h = self._fp16_history()
        q = pd.DataFrame({"model": ["m1", "m1", "m2"], "batch_size": [16, 16, 32], "gpu_count": 1,
                          "gpu_type": "A100", "precision": ["fp16", "fp32", "tf32"], "steps": 10})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = predict_many(q, history=h)
            one = [predict_training_time(m, batch_size=b, gpu_type="A100", precision=p, steps=10, history=h)
                   for m, b, p in zip(q["model"], q["batch_size"], q["precision"])]
        assert list(out["query_kind"]) == ["seen", "new_device", "new_device"]
        assert np.allclose(out["seconds"], [r.seconds for r in one], rtol=1e-9)
        assert out["seconds"][1] > out["seconds"][0]  # full fp32 on A100: 16x fewer FLOP/s

    def test_explicit_method_is_kept(self):
        h = self._fp16_history()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = predict_training_time("m1", batch_size=16, gpu_type="A100", precision="tf32", steps=1, history=h,
                                      method="physics")
        assert r.method == "physics"

    def test_a_device_without_that_peak_is_refused_by_name(self):
        h = self._fp16_history()
        with pytest.raises(perfmodel.exceptions.UnsupportedQueryError,
                           match=r"'A100-SXM4-80GB' has no fp8 peak.*no fp8 runs on it"):
            predict_training_time("m1", batch_size=16, gpu_type="A100", precision="fp8", steps=1, history=h)

    def test_out_of_the_box_fp32_is_answered(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = predict_training_time({"params": 25.6e6, "flops_per_sample": 2.46e10, "family": "cnn"},
                                      batch_size=256, gpu_count=8, gpu_type="A100", precision="fp32", steps=100)
        assert r.method == "ratio" and r.query_kind == "new_device" and r.lower < r.seconds < r.upper

    def test_an_llm_job_in_tf32_is_priced_by_the_layout_model(self):
        job = {"seq_len": 2048, "global_batch": 256, "gpu_count": 8, "gpu_type": "A100", "steps": 100}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bf16, tf32, fp32 = (predict_training_time({"params": 1.3e9, "family": "decoder"}, precision=p, **job)
                                for p in ("bf16", "tf32", "fp32"))
        assert bf16.method == tf32.method == fp32.method == "layout"
        assert tf32.query_kind == "new_device" and any("precision 'tf32'" in w for w in tf32.warnings)
        # half the tensor-core peak and twice the bytes per element of bf16; full fp32 has 1/16 of the peak
        assert bf16.seconds < tf32.seconds < fp32.seconds

    def test_a_model_and_device_known_at_another_precision_only_is_a_new_pair(self):
        from perfmodel.kinds import classify

        runs = pd.concat([self._fp16_history(), make_history(n_models=2).assign(gpu_type="A100-SXM4-80GB",
                                                                               precision="fp32")])
        q = runs[(runs["model"] == "m2") & (runs["precision"] == "fp16")].iloc[[0]].drop(columns=["step_time_s"])
        assert list(classify(runs, q)) == ["seen"]
        # m2 on A100 ran only in fp16; fp32 is known from other models: a pair never run
        assert list(classify(runs, q.assign(precision="fp32", gpu_type="A100-SXM4-80GB"))) == ["new_pair"]

    def test_a_model_saved_before_configs_held_precision_still_tells_a_new_one(self):
        fitted = TrainingTimeModel(method="ratio").fit(self._fp16_history())
        fitted.configs_ = fitted.configs_.drop(columns=["precision"])
        q = pd.DataFrame({"model": ["m1", "m1"], "params": 1e6, "flops_per_sample": 1e9, "batch_size": 16,
                          "gpu_count": 1, "gpu_type": "A100-SXM4-80GB", "precision": ["fp16", "FP32"]})
        assert list(fitted.query_kinds(q))[1] == "new_device"

    def test_recommend_leaves_out_only_the_device_without_that_peak(self):
        h = self._fp16_history()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            table = perfmodel.Predictor(h).recommend("m1", batch_size=16, gpu_types=["A100", "H100"],
                                                     gpu_counts=[1], steps=100, precision="fp8")
        assert set(table["gpu_type"]) == {"H100-SXM5-80GB"}
        assert any("A100-SXM4-80GB" in str(c.message) and "no fp8 peak" in str(c.message) for c in caught)

    def test_out_of_the_box_fp8_on_a_device_without_it_is_refused_by_name(self):
        with pytest.raises(perfmodel.exceptions.UnsupportedQueryError, match=r"has no fp8 peak in the spec table"):
            predict_training_time({"params": 25.6e6, "flops_per_sample": 2.46e10, "family": "cnn"}, batch_size=64,
                                  gpu_count=8, gpu_type="A100", precision="fp8", steps=100)


class TestDecoderBySizeAndFlops:
    """Out of the box, a dense decoder given by params, flops_per_sample and family="decoder" (no seq_len, no shape)
    is answered by the layout model at the sequence length its FLOPs imply, the same one query at a time or many."""

    SPEC = {"params": 1.3e9, "family": "decoder"}

    def _spec(self, seq):
        from perfmodel.transformer import standard_shape, transformer_flops

        return {**self.SPEC, "flops_per_sample": transformer_flops(standard_shape(1.3e9), seq).model}

    def test_the_implied_sequence_routes_to_the_layout_model(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = predict_training_time(self._spec(4096), batch_size=8, gpu_count=8, gpu_type="H100", steps=10)
            given = predict_training_time(self.SPEC, seq_len=4096, batch_size=8, gpu_count=8, gpu_type="H100",
                                          steps=10)
        assert r.method == "layout" and any("seq_len 4,096" in w for w in r.warnings)
        assert r.seconds == pytest.approx(given.seconds, rel=1e-9)

    def test_many_rows_agree_with_one_at_a_time(self):
        q = pd.DataFrame([{**self._spec(s), "batch_size": b, "gpu_count": n, "gpu_type": "H100", "steps": 10}
                          for s, b, n in ((2048, 4, 8), (8192, 1, 16), (1024, 16, 8))])
        with pytest.warns(ExtrapolationWarning, match="3 decoder rows without seq_len"):
            many = predict_many(q)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            one = [predict_training_time(self._spec(s), batch_size=b, gpu_count=n, gpu_type="H100", steps=10)
                   for s, b, n in ((2048, 4, 8), (8192, 1, 16), (1024, 16, 8))]
        assert np.allclose(many["seconds"], [r.seconds for r in one], rtol=1e-9)

    def test_a_job_with_its_sequence_but_no_layout_gets_the_same_layout_one_row_or_many(self):
        q = pd.DataFrame([{"params": 1.3e9, "family": "decoder", "seq_len": s, "batch_size": b, "gpu_count": n,
                           "gpu_type": "H100", "steps": 10} for s, b, n in ((2048, 8, 8), (4096, 2, 16))])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            many = predict_many(q)
            one = [predict_training_time({"params": 1.3e9, "family": "decoder"}, seq_len=s, batch_size=b,
                                         gpu_count=n, gpu_type="H100", steps=10)
                   for s, b, n in ((2048, 8, 8), (4096, 2, 16))]
        assert np.allclose(many["seconds"], [r.seconds for r in one], rtol=1e-9)

    def test_a_partial_layout_is_completed_as_one_row_is_and_a_bad_one_named_by_its_row(self):
        q = pd.DataFrame([{"params": 1.3e9, "family": "decoder", "seq_len": 2048, "batch_size": 8, "gpu_count": 8,
                           "gpu_type": "H100", "steps": 10, "tp": 2}] * 2, index=[5, 5])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            many = predict_many(q)
            one = predict_training_time({"params": 1.3e9, "family": "decoder"}, seq_len=2048, batch_size=8,
                                        gpu_count=8, gpu_type="H100", steps=10, layout={"tp": 2})
        assert np.allclose(many["seconds"], one.seconds, rtol=1e-9)
        with pytest.raises(perfmodel.exceptions.LayoutError, match=r"row 2 \(counting from 1\).*does not divide"):
            predict_many(pd.concat([q.iloc[:1], q.iloc[:1].assign(tp=3)]))

    def test_an_implied_sequence_divides_over_tensor_parallel_ranks(self):
        spec = {**self.SPEC, "flops_per_sample": 6 * 1.3e9 * 2048}  # the 6ND count: no attention term
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = predict_training_time(spec, batch_size=8, gpu_count=8, gpu_type="H100", steps=10, layout={"tp": 4})
        assert r.method == "layout" and r.query["seq_len"] % 16 == 0

    def test_not_inferred_for_a_mixture_a_history_or_no_family(self):
        spec = self._spec(4096)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            moe = predict_training_time({**spec, "active_params": 0.4e9}, batch_size=8, gpu_count=8,
                                        gpu_type="H100", steps=10)
            gpu = predict_training_time(spec, batch_size=8, gpu_count=8, gpu_type="H100", steps=10, history="gpu")
            plain = predict_training_time({k: v for k, v in spec.items() if k != "family"}, batch_size=8,
                                          gpu_count=8, gpu_type="H100", steps=10)
            mfu = predict_training_time(spec, batch_size=8, gpu_count=8, gpu_type="H100", steps=10, method="mfu")
        assert "layout" not in (moe.method, gpu.method, plain.method) and mfu.method == "mfu"


def test_a_predictor_without_history_asks_which_bundled_one_to_fit():
    with pytest.raises(ValueError, match="source='cpu', 'gpu' or 'llm'"):
        perfmodel.Predictor().model("seen")


# ----------------------------------------------------------------------------------------------------------
# Issue 14 (no silent corruption) #5: every query is checked; no NaN, inf or inverted results.
@pytest.fixture(scope="module")
def fitted_loglinear():
    return perfmodel.fit(make_history(), method="loglinear")


@pytest.fixture(scope="module")
def gbm_model():
    return perfmodel.fit(make_history(n_models=4), method="gbm")


class TestInputs:
    @pytest.mark.parametrize("column, value, message", [
        ("flops_per_sample", -1e9, "'flops_per_sample' must be finite and positive"),
        ("flops_per_sample", math.inf, "'flops_per_sample' must be finite and positive"),
        ("flops_per_sample", 1e308, "'flops_per_sample' must be finite and positive \\(at most 1e\\+24\\)"),
        ("batch_size", 8.5, "'batch_size' must hold whole numbers"),
        ("gpu_count", 1.5, "'gpu_count' must hold whole numbers"),
        ("steps", 10.25, "'steps' must hold whole numbers"),
        ("steps", -3, "'steps' must be finite and positive"),
        ("batch_size", True, "'batch_size' must be numeric"),
        ("precision", 3, "'precision' must hold text"),
        ("precision", pd.NaT, "'precision' must hold text")])
    def test_predict_many_validates(self, fitted_loglinear, column, value, message):
        q = pd.DataFrame([{"params": 1e6, "flops_per_sample": 1e9, "batch_size": 8, "gpu_count": 1,
                           "gpu_type": "A100", "steps": 100, "precision": "fp32"}] * 2)
        q[column] = q[column].astype(object)
        q.loc[1, column] = value
        with pytest.raises(SchemaError, match=message):
            perfmodel.predict_many(q, history=fitted_loglinear)

    def test_unbounded_interval_is_an_error_not_inf(self):
        small = make_history(n_models=1).head(6)
        model = perfmodel.fit(small, method="gbm")
        with pytest.raises(PredictionError, match="unbounded.*confidence <= n/\\(n\\+1\\)"):
            perfmodel.predict_training_time("m0", batch_size=8, gpu_type="A100", steps=10, history=model,
                                            confidence=0.99)

    def test_predictions_are_finite_and_ordered(self, fitted_loglinear):
        q = pd.DataFrame({"params": [1e3, 1e9, 1e12], "flops_per_sample": [1e3, 1e12, 1e20],
                          "batch_size": [1, 64, 4096], "gpu_count": [1, 2, 4], "gpu_type": "A100", "steps": 10**6})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = perfmodel.predict_many(q, history=fitted_loglinear)
        v = out[["step_lower", "step_time_s", "step_upper", "lower", "seconds", "upper"]].to_numpy()
        assert np.isfinite(v).all() and (v >= 0).all()
        assert (v[:, 0] <= v[:, 1]).all() and (v[:, 1] <= v[:, 2]).all() and (v[:, 3] <= v[:, 4]).all()


NUM = st.one_of(st.integers(-3, 10**7), st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
                st.text(max_size=4), st.sampled_from([1e308, 1e24, 5e-324, 2**63]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.fixed_dictionaries({"params": NUM | st.just(1e6), "batch_size": NUM | st.just(8),
                                            "gpu_count": NUM | st.just(2), "steps": NUM | st.just(100),
                                            "flops_per_sample": NUM | st.just(1e9)}), min_size=1, max_size=3),
       conf=st.floats(0.01, 0.9999), method=st.sampled_from(["loglinear", "gbm"]))
def test_fuzz_predict_many(fitted_loglinear, gbm_model, rows, conf, method):
    q = pd.DataFrame(rows).assign(gpu_type="A100")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = perfmodel.predict_many(q, confidence=conf, history=fitted_loglinear if method == "loglinear" else gbm_model)
    except (ValueError, TypeError) as exc:
        assert str(exc)
        return
    v = out[["step_lower", "step_time_s", "step_upper", "lower", "seconds", "upper"]].to_numpy(dtype=float)
    assert np.isfinite(v).all() and (v >= 0).all()
    assert (v[:, 0] <= v[:, 1]).all() and (v[:, 1] <= v[:, 2]).all()
    assert (v[:, 3] <= v[:, 4]).all() and (v[:, 4] <= v[:, 5]).all()


def test_a_whole_float_beyond_int64_in_an_integer_column_is_an_error_not_an_overflow(fitted_loglinear):
    """Found by test_fuzz_predict_many: params 1e308 beside an empty cell crashed converting to Int64."""
    q = pd.DataFrame([{"params": 5, "batch_size": 8, "gpu_count": 1, "steps": 10},
                      {"params": "", "batch_size": 8, "gpu_count": 1, "steps": 10},
                      {"params": 1e308, "batch_size": 8, "gpu_count": 1, "steps": 10}]).assign(gpu_type="A100")
    with pytest.raises(ValueError, match="params"):
        perfmodel.predict_many(q, history=fitted_loglinear)


# ----------------------------------------------------------------------------------------------------------
# Fault injection: fuzzed prediction arguments.
@pytest.fixture(scope="module")
def fitted_for_fuzz():
    return perfmodel.fit(make_history(), method="loglinear")


ARG = st.one_of(st.none(), st.integers(-5, 10**7), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5),
                st.booleans())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=ARG, count=ARG, steps=ARG, epochs=ARG, size=ARG, conf=ARG,
       gpu=st.sampled_from(["A100", "NVIDIA A100-SXM4-80GB", "cpu", "A1000", "", "ü"]),
       prec=st.sampled_from(["fp32", "bf16", "int8", ""]))
def test_fuzz_predict(fitted_for_fuzz, batch, count, steps, epochs, size, conf, gpu, prec):
    import warnings

    kwargs = dict(batch_size=batch, gpu_count=count, gpu_type=gpu, steps=steps, epochs=epochs, dataset_size=size,
                  precision=prec, history=fitted_for_fuzz)
    if conf is not None:
        kwargs["confidence"] = conf
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = perfmodel.predict_training_time("m1", **kwargs)
    except (ValueError, TypeError) as exc:
        assert str(exc)
        return
    assert np.isfinite(r.seconds) and 0 <= r.lower <= r.seconds <= r.upper


# ----------------------------------------------------------------------------------------------------------
# Issue 26 #11: numbers outside the documented range are refused with a ValueError/TypeError naming the
# parameter: never an OverflowError, a MemoryError or a NaN result.
class TestPredictSteps:
    def test_steps_beyond_int64_is_a_value_error(self):
        import perfmodel

        with pytest.raises(ValueError, match="'steps' parameter of predict_training_time.*at most"):
            perfmodel.predict_training_time("gpt-m", batch_size=32, gpu_type="cpu", steps=10**400)


class TestPredictInputs:
    def test_params_beyond_floats_is_a_value_error(self):
        """{"params": 10**400} raised OverflowError (int too large to convert to float)."""
        import perfmodel

        with pytest.raises(ValueError, match="'params' parameter of the model spec of predict_training_time"):
            perfmodel.predict_training_time({"params": 10**400}, batch_size=8, gpu_type="cpu", steps=10)


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

    def test_method_and_confidence_are_checked_once_per_call(self, monkeypatch):
        # issue 37: the memo checks them in the caller's words; the Predictor it makes does not check them again
        from perfmodel.predict import _base, _memo

        checked = []
        for module in (_base, _memo):
            for name in ("check_choice", "check_confidence"):
                real = getattr(module, name)
                monkeypatch.setattr(module, name,
                                    lambda *a, _real=real, **k: (checked.append(a[:2]), _real(*a, **k))[1])
        monkeypatch.setattr(_memo, "_PREDICTORS", type(_memo._PREDICTORS)())  # made anew, not taken from a memo
        perfmodel.predict_training_time("gpt-m", batch_size=32, gpu_type="cpu", steps=10, confidence=0.8)
        assert checked == [("auto", "method"), (0.8, "predict_training_time")]
        checked.clear()
        perfmodel.predict.BasePredictor("cpu", method="auto", confidence=0.8)
        assert checked == [("auto", "method"), (0.8, "Predictor")]


# ----------------------------------------------------------------------------------------------------------
# Every public result serialises: ``json.dumps(result.to_dict(), allow_nan=False)`` works, numbers stay
# numbers.
PRICES = pd.DataFrame({"gpu_type": ["A100"], "provider": ["x"], "on_demand_usd_per_hour": [2.0],
                       "spot_usd_per_hour": [np.nan]})


def _strict(d):
    return json.loads(json.dumps(d, allow_nan=False))


class TestToDict:
    def test_prediction_cost_online(self):
        fitted = TrainingTimeModel(method="loglinear").fit(make_history())
        r = perfmodel.predict_training_time("m1", batch_size=16, gpu_type="A100", steps=100, history=fitted)
        d = _strict(r.to_dict())
        assert isinstance(d["query"]["batch_size"], int) and isinstance(d["seconds"], float)
        cost = estimate_cost(r, prices=PRICES)
        assert _strict(cost.to_dict())["devices"] == 1
        est = OnlineEstimator.from_prediction(r)
        for t in (r.step_seconds,) * 4:
            est.update(t)
        e = est.estimate()
        assert e["total"] == e.total and _strict(e.to_dict())["steps_done"] == 4
