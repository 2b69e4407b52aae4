import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_history

import perfmodel
from perfmodel.evaluate import (
    EVALUATION_BASELINES,
    SPLITS,
    AnalyticBaseline,
    coverage,
    evaluate,
    grouped_folds,
    mean_relative_width,
    noise_floor,
    r2_log,
)
from perfmodel.exceptions import SchemaError
from perfmodel.kinds import KINDS, group_keys
from perfmodel.models import TrainingTimeModel

ROOT = Path(__file__).resolve().parents[1]


class TestMetrics:
    def test_hand_computed(self):
        y, lo, hi = np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.5, 2.5, 2.0, 3.9]), np.array([1.5, 3.0, 4.0, 4.1])
        assert coverage(y, lo, hi) == 0.75
        pred = np.array([1.0, 2.0, 4.0, 4.0])
        assert mean_relative_width(pred, lo, hi) == pytest.approx(np.mean([1.0, 0.25, 0.5, 0.05]))
        ly = np.log(y)
        expected = 1 - np.sum((ly - np.log(pred)) ** 2) / np.sum((ly - ly.mean()) ** 2)
        assert r2_log(y, pred) == pytest.approx(expected)

    def test_noise_floor_by_hand(self):
        runs = pd.DataFrame({"model": ["a", "a", "b", "b", "c"], "params": 1, "batch_size": 8, "gpu_count": 1,
                             "gpu_type": "cpu", "step_time_s": [1.0, 1.2, 2.0, 2.0, 5.0]})
        nf = noise_floor(runs)
        # a: |1/1.2-1|, |1.2/1-1|; b: 0, 0; c has no repeat
        apes = [abs(1 / 1.2 - 1) * 100, 20.0, 0.0, 0.0]
        assert nf.median_ape == pytest.approx(np.median(apes)) and nf.n_configs == 2 and nf.n_runs == 4


class TestGroupedFolds:
    @pytest.mark.parametrize("split", ["leave-one-model-out", "leave-one-batch-size-out", "leave-one-gpu-count-out"])
    def test_held_out_group_never_in_training(self, split):
        runs = make_history()
        col = SPLITS[split]
        # the groups are those perfmodel.kinds holds out (numbers compared as numbers: 8 and 8.0 are one group)
        keys = group_keys(runs, next(k for k in KINDS if k.column == col)).astype(str)
        seen = set()
        for held, train, test in grouped_folds(runs, col):
            assert set(keys[test]) == {held}
            assert held not in set(keys[train])
            assert len(set(train) & set(test)) == 0
            if col != "model":
                assert (runs.iloc[test][col].astype(float) == float(held)).all()
            seen.add(held)
        assert seen == set(keys)

    def test_evaluate_predictions_come_from_folds_without_their_group(self):
        runs = make_history(n_models=4)
        ev = evaluate(runs, methods=("loglinear",), splits=("leave-one-model-out",), baselines=False)
        preds = ev.predictions
        assert len(preds) == len(runs) and sorted(preds["row"]) == list(range(len(runs)))
        assert (runs["model"].to_numpy()[preds["row"]] == preds["held_out"].to_numpy()).all()


class TestEvaluate:
    def test_table_and_json(self):
        runs = make_history(n_models=5).assign(threads_per_worker=1, family="mlp")
        ev = evaluate(runs, methods=("loglinear", "physics"), splits=("leave-one-batch-size-out",))
        assert {"loglinear", "physics", *EVALUATION_BASELINES} == set(ev.table["method"])
        row = ev.table.set_index("method").loc["loglinear"]
        assert row["folds"] == 4 and row["n"] == len(runs) and 0 <= row["coverage"] <= 1
        data = json.loads(ev.to_json())
        assert data["confidence"] == 0.9 and len(data["table"]) == 2 + len(EVALUATION_BASELINES)

    def test_single_group_split_is_refused_not_an_empty_table(self):
        with pytest.raises(SchemaError, match="nothing to cross-validate.*gpu_type"):
            evaluate(make_history(n_models=3), methods=("loglinear",), splits=("leave-one-gpu-type-out",),
                     baselines=False)

    def test_one_run_is_refused(self):
        with pytest.raises(SchemaError, match="nothing to cross-validate"):
            evaluate(make_history().head(1))

    def test_bad_method(self):
        with pytest.raises(ValueError, match="unknown method"):
            evaluate(make_history(), methods=("magic",))

    def test_fixed_utilisation_baseline(self):
        runs = make_history(n_models=2)
        base = AnalyticBaseline(0.4).fit(runs)
        pi = base.predict_interval(runs)
        flops = runs["flops_per_sample"] * runs["batch_size"]
        np.testing.assert_allclose(pi["step_time_s"], flops / (19.5e12 * 0.4))  # A100 dense fp32 peak
        assert pi["step_lower"].isna().all()  # the calculators give no interval

    def test_fitted_utilisation_baseline_recovers_constant(self):
        runs = make_history(n_models=2, noise=0.0)
        flops = runs["flops_per_sample"] * runs["batch_size"]
        runs["step_time_s"] = flops / (19.5e12 * 0.25)
        base = AnalyticBaseline("fit").fit(runs)
        assert np.exp(base.log_u_) == pytest.approx(0.25)


def physics_history(seed, noise=0.05, noise_seed=None, model_sd=0.0, batches=(8, 16, 32, 64)):
    """Generated runs from the physics form itself (tests only)."""
    rng = np.random.default_rng(seed)
    nrng = np.random.default_rng(noise_seed if noise_seed is not None else seed + 99)
    rows = []
    for f, theta in (("mlp", 0.8), ("cnn", 0.3), ("rnn", 0.5)):
        for k in range(4):
            params = int(10 ** rng.uniform(4, 6.5))
            fps = params * rng.uniform(10, 200)
            offset = np.exp(rng.normal(0, model_sd)) if model_sd else 1.0  # model-level efficiency deviation
            for b in batches:
                for n in (1, 2):
                    threads = 2 / n
                    work = fps * b
                    eff = theta * offset * (fps / 1e9) ** 0.1
                    t = 1e-3 + work / (threads * 50e9) / eff + (n > 1) * (2e-3 + 3 * 2 * params * 4 / 2 / 5e9)
                    rows.append({"model": f"{f}{k}", "family": f, "params": params, "flops_per_sample": fps,
                                 "batch_size": b, "gpu_count": n, "gpu_type": "cpu", "threads_per_worker": int(threads),
                                 "step_time_s": t * np.exp(nrng.normal(0, noise))})
    return pd.DataFrame(rows)


class TestPhysics:
    def test_recovers_generated_form(self):
        m = TrainingTimeModel(method="physics").fit(physics_history(0, noise=0.01))
        table = m.coef_table()["value"]
        assert table["a0_overhead_s"] == pytest.approx(1e-3, rel=0.3)
        assert table["efficiency[cnn]"] / table["efficiency[mlp]"] == pytest.approx(0.3 / 0.8, rel=0.1)
        assert m.cv_median_ape_ < 3

    def test_conformal_coverage_near_nominal_for_seen_configurations(self):
        covers = []
        for s in range(3):
            train = physics_history(s, noise_seed=100 + s)
            test = pd.concat([physics_history(s, noise_seed=200 + 10 * s + k) for k in range(3)])
            pi = TrainingTimeModel(method="physics").fit(train).predict_interval(test, 0.9)
            covers.append(coverage(test["step_time_s"], pi["step_lower"], pi["step_upper"]))
        assert 0.85 <= np.mean(covers) <= 0.97  # cross-conformal is slightly conservative by construction

    def test_new_model_gets_the_wider_interval(self):
        train = physics_history(0, model_sd=0.3)  # models differ beyond what their family explains
        m = TrainingTimeModel(method="physics", held_out="new_model").fit(train)
        row = train.iloc[[0]]
        seen = m.predict_interval(row)
        new = m.predict_interval(row.assign(model="never-seen"))
        assert new["interval_rule"].iloc[0].startswith("leave-one-model-out (12 groups)")
        assert (new["step_upper"] / new["step_lower"]).iloc[0] > (seen["step_upper"] / seen["step_lower"]).iloc[0]

    def test_device_count_outside_range_widens(self):
        train = physics_history(0, model_sd=0.3)
        m = TrainingTimeModel(method="physics").fit(train)
        row = train.iloc[[1]]  # gpu_count 2, seen
        inside = m.predict_interval(row)
        outside = m.predict_interval(row.assign(gpu_count=8))
        assert (outside["step_upper"] / outside["step_lower"]).iloc[0] > (inside["step_upper"] / inside["step_lower"]).iloc[0]

    def test_seen_model_at_a_new_count_is_one_step_of_generalisation(self):
        # a one-count history: a seen model at another count is widened by its distance to the runs (the
        # calibrated extrapolation widening), starting from the seen-model scores; a model never seen at that
        # count is new in two ways and gets the wider new-model interval
        full = physics_history(0, model_sd=0.3)
        one = full[full["gpu_count"] == 1].reset_index(drop=True)
        m = TrainingTimeModel(method="physics", held_out=("new_count", "new_model")).fit(one)
        row = one.iloc[[2]]

        def width(r):
            pi = m.predict_interval(r)
            return float(np.log(pi["step_upper"] / pi["step_lower"]).iloc[0]), pi["interval_rule"].iloc[0]

        (inside, _), (out, rule) = width(row), width(row.assign(gpu_count=2))
        new_out, new_rule = width(row.assign(model="never-seen", gpu_count=2))
        # one count: no leave-one-count-out refit exists, so the count query takes the next kind that has scores
        # (new-model), widened by its distance to the runs; a new model at that count is at least as wide
        assert "new_count scores too few" in rule and "for distance" in rule
        assert inside < out <= new_out + 1e-12 and new_rule.startswith("leave-one-model-out")

    def test_cpu_workers_share_the_host_when_the_history_has_no_thread_counts(self):
        # a history in the minimal schema (no threads_per_worker) with one device count: a second worker on the
        # same host halves each worker's compute, so the step at the same per-device batch takes longer
        full = physics_history(0, noise=0.01)
        one = full[full["gpu_count"] == 1].drop(columns="threads_per_worker")
        m = TrainingTimeModel(method="physics").fit(one)
        assert m.pipeline_.named_steps["features"].threads_shared_
        row = one.iloc[[3]]
        two = m.predict(row.assign(gpu_count=2))[0] / m.predict(row)[0]
        measured = (full[(full["model"] == row["model"].iloc[0]) & (full["batch_size"] == row["batch_size"].iloc[0])]
                    .set_index("gpu_count")["step_time_s"])
        assert two == pytest.approx(measured[2] / measured[1], rel=0.25)
        assert two > 1.5
        # a history that records threads keeps them
        assert not TrainingTimeModel(method="physics").fit(full).pipeline_.named_steps["features"].threads_shared_


@pytest.mark.slow
def test_benchmark_script_quick_mode(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "accuracy.py"), "--quick", "--n-jobs", "1",
                           "--host-peak-gflops", "100", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "noise floor" in proc.stdout and "leave-one-batch-size-out" in proc.stdout
    result = json.loads((tmp_path / "accuracy_quick.json").read_text())
    assert {r["method"] for r in result["table"]} >= {"physics", "seed-linear", "6ND-util0.4", "6ND-fitted-util"}


def test_fitted_utilisation_needs_no_cpu_peak():
    runs = make_history(n_models=2).assign(gpu_type="cpu")
    pi = AnalyticBaseline("fit").fit(runs).predict_interval(runs)
    assert np.isfinite(pi["step_time_s"]).all()
    assert AnalyticBaseline(0.4).fit(runs).predict_interval(runs)["step_time_s"].isna().all()


def test_cli_evaluate_json(tmp_path):
    runs = make_history(n_models=3)
    path = tmp_path / "runs.csv"  # never a fixed path: test runs may share a checkout
    runs.to_csv(path, index=False)
    proc = subprocess.run([sys.executable, "-m", "perfmodel", "evaluate", str(path), "--methods", "loglinear",
                           "--splits", "leave-one-batch-size-out", "--json"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert {r["method"] for r in data["table"]} == {"loglinear", *EVALUATION_BASELINES}


def test_mlperf_script_skips_without_data(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "mlperf_cross_hardware.py"), "--data",
                           str(tmp_path / "absent.csv")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("skipped")


def test_methods_without_a_count_form_refuse_a_count_their_runs_never_varied():
    from perfmodel.exceptions import UnsupportedQueryError

    full = physics_history(0, noise=0.02)
    one = full[full["gpu_count"] == 1].reset_index(drop=True)
    row = one.iloc[[0]].assign(gpu_count=2)
    for method in ("linear", "loglinear", "gbm"):
        m = TrainingTimeModel(method=method).fit(one)
        with pytest.raises(UnsupportedQueryError, match="every run it was fitted on has gpu_count 1"):
            m.predict_interval(row)
        with pytest.raises(UnsupportedQueryError):
            m.predict(row)
        assert np.isfinite(m.predict(one.head(3))).all()  # the runs' own count is answered
    assert np.isfinite(TrainingTimeModel(method="physics").fit(one).predict(row)).all()
    # with two counts in the history, the leave-one-count-out refits score exactly that extrapolation
    gbm = TrainingTimeModel(method="gbm", held_out="new_count").fit(full)
    assert gbm.scores_["new_count"]["groups"] == 2 and gbm.scores_["new_count"]["split"] == "leave-one-gpu-count-out"
    # evaluate: the refused folds give a row with n = 0, and the printed table says why
    ev = evaluate(full, methods=("gbm", "physics"), splits=("leave-one-gpu-count-out",), baselines=False)
    t = ev.table.set_index("method")
    assert t.loc["gbm", "n"] == 0 and np.isnan(t.loc["gbm", "coverage"])
    assert t.loc["physics", "n"] == len(full)
    assert "n = 0: the method refused" in str(ev)


def test_a_kind_held_out_over_too_few_groups_takes_the_next_kinds_scores():
    # four batch sizes are four leave-one-batch-size-out refits: fewer than MIN_GROUPS, so a new batch size takes
    # the next more demanding kind that has enough groups (here new-model, 12 models), never the thin scores
    from perfmodel.models._conformal import MIN_GROUPS

    runs = physics_history(0, noise=0.05, batches=(8, 16, 32, 256))
    m = TrainingTimeModel(method="gbm", held_out=("new_batch", "new_model")).fit(runs)
    assert m.scores_["new_batch"]["groups"] == 4 < MIN_GROUPS
    pi = m.predict_interval(runs.iloc[[0]].assign(batch_size=24))
    assert pi["query_kind"].iloc[0] == "new_batch"
    # ... and never narrower than what its own four groups showed (they bound it below)
    from perfmodel.models import conformal_quantile

    q = max(conformal_quantile(m.scores_["new_model"]["scores"], 0.9),
            conformal_quantile(m.scores_["new_batch"]["scores"], 0.9),
            conformal_quantile(m.scores_["seen"]["scores"], 0.9))
    assert float(np.log(pi["step_upper"] / pi["step_time_s"]).iloc[0]) == pytest.approx(q)
    rule = pi["interval_rule"].iloc[0]
    assert "leave-one-model-out (12 groups)" in rule and ("new_batch scores too few" in rule
                                                          or "(4 groups, too few to stand alone" in rule)


def test_a_one_count_history_says_its_count_interval_is_widened_by_distance_only():
    full = physics_history(0, model_sd=0.3)
    one = full[full["gpu_count"] == 1].reset_index(drop=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = perfmodel.predict_training_time("mlp1", batch_size=16, gpu_count=2, gpu_type="cpu", steps=100,
                                            history=one, method="physics")
    assert r.query_kind == "new_count"
    # fitted for new-count queries, but one count leaves no leave-one-count-out refit: the rule says so
    assert "new_count scores too few" in r.interval_rule and "for distance" in r.interval_rule


def test_one_count_history_saves_loads_and_scales(tmp_path):
    # a gbm fitted on runs of one device count other than 1 saves and loads (the load check asks a count it saw)
    full = physics_history(1, noise=0.02)
    eights = full[full["gpu_count"] == 2].assign(gpu_count=8).drop(columns="threads_per_worker").reset_index(drop=True)
    m = TrainingTimeModel(method="gbm").fit(eights)
    path = tmp_path / "gbm8.perfmodel"
    perfmodel.save_model(m, path)
    back = perfmodel.load_model(path)
    np.testing.assert_allclose(back.predict(eights.head(4)), m.predict(eights.head(4)))
    # scaling over counts the history lacks: fitted for new-count queries, so a count form answers
    from perfmodel.plan import scaling_from_model

    sc = scaling_from_model(str(eights["model"].iloc[0]), batch_size=16, gpu_type="cpu", gpu_counts=(1, 2, 8),
                            history=eights)
    assert len(sc) == 3 and np.isfinite(sc.select_dtypes("number").to_numpy(dtype=float)).all()


def test_evaluate_keeps_the_seed_baseline_on_a_count_split():
    full = physics_history(0, noise=0.02)
    ev = evaluate(full, methods=("physics",), splits=("leave-one-gpu-count-out",), baselines=True)
    t = ev.table.set_index("method")
    assert t.loc["seed-linear", "n"] == len(full)


# ----------------------------------------------------------------------------------------------------------
# Every public result serialises: ``json.dumps(result.to_dict(), allow_nan=False)`` works, numbers stay
# numbers.
def _strict(d):
    return json.loads(json.dumps(d, allow_nan=False))


class TestToDict:
    def test_evaluation_has_no_nan(self):
        from perfmodel.evaluate import evaluate

        ev = evaluate(make_history(), methods=("loglinear",), splits=("leave-one-batch-size-out",))
        d = _strict(ev.to_dict())
        assert d["table"] and all(isinstance(row["median_ape"], float) for row in d["table"])
        json.loads(ev.to_json())


def test_the_old_baselines_name_warns_and_answers_the_new():
    from perfmodel import evaluate as ev

    with pytest.warns(DeprecationWarning, match="EVALUATION_BASELINES"):
        assert ev.BASELINES == ev.EVALUATION_BASELINES
    with pytest.raises(AttributeError, match="no attribute 'NOPE'"):
        ev.NOPE  # noqa: B018


def test_fold_predictions_is_one_fold_of_evaluate():
    from perfmodel.evaluate import fold_predictions, grouped_folds

    runs = make_history(n_models=4)
    held, train, test = next(iter(grouped_folds(runs, "model")))
    out = fold_predictions("loglinear", runs, train, test, 0.9)
    assert list(out["row"]) == list(test) and (out["method"] == "loglinear").all()
    assert np.allclose(out["y"], runs["step_time_s"].to_numpy()[test])
    assert (out["step_lower"] <= out["pred"]).all() and (out["pred"] <= out["step_upper"]).all()
