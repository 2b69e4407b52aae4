"""The baseline methods (ratio, mfu) against closed forms, fp32 precision semantics, and the peak floor."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

import perfmodel
from perfmodel.features import attention_share, conv_share, fp32_modes, peak_basis, run_quantities
from perfmodel.fitting import AUTO_CANDIDATES, fit_history
from perfmodel.hardware import get_spec
from perfmodel.models import METHODS, RATIO_BAND, MFURegressor, RatioRegressor, TrainingTimeModel
from perfmodel.models._conformal import clip_at_peak

ROOT = Path(__file__).resolve().parents[1]
A100, H100 = "A100-SXM4-80GB", "H100-SXM5-80GB"


def _row(model, gpu, t, *, b=8, n=1, fps=1e12, precision="bf16", family="decoder", **extra):
    return {"model": model, "family": family, "params": 1e8, "flops_per_sample": fps, "batch_size": b,
            "gpu_count": n, "gpu_type": gpu, "precision": precision, "step_time_s": t, **extra}


def _peak(gpu, precision="bf16"):
    return get_spec(gpu).peak_tflops(precision) * 1e12


def _mfu_history():
    """Model a on the A100 at MFU 0.5, 0.4, 0.3 (median 0.4); model b on the H100 at MFU 0.2."""
    work = 8e12
    rows = [_row("a", A100, work / (_peak(A100) * u), b=8) for u in (0.5, 0.4, 0.3)]
    rows.append(_row("b", H100, work / (_peak(H100) * 0.2), b=8))
    return pd.DataFrame(rows), work


class TestRegistry:
    def test_baselines_are_methods_auto_may_choose(self):
        assert {"ratio", "mfu"} <= set(METHODS) and {"ratio", "mfu"} <= set(AUTO_CANDIDATES)

    @pytest.mark.parametrize("reg, params", [(MFURegressor(), {"columns": None}),
                                             (RatioRegressor(), {"band": RATIO_BAND, "columns": None})])
    def test_sklearn_contract(self, reg, params):
        assert clone(reg).get_params() == params  # columns: where each quantity is (None: by its own name)
        X = np.array([[np.log(1e12), np.log(1e14), np.log(1e12), 0.0, np.log(8), 0, 0, 0, 0, 0, np.nan]] * 3)
        assert reg.fit(X, [1.0, 1.0, 1.0]) is reg
        with pytest.raises(ValueError, match="11 columns"):
            clone(reg).fit(X[:, :3], [1.0, 1.0, 1.0])


class TestMFU:
    def test_imputed_flops_stay_out_of_the_pools_and_take_their_models_own(self):
        # columns: log work, log peak, log bw, log n, log batch, model, device, precision, flops imputed, conv share,
        # attention share
        counted = [np.log(4e12), np.log(1e13), 0, 0, 0, 0, 0, 0, 0, 0, np.nan]   # model 0, counted: MFU 0.4 at 1 s
        imputed = [np.log(8e12), np.log(1e13), 0, 0, 0, 1, 0, 0, 1, 0, np.nan]   # model 1, imputed: "MFU" 8.0 at 0.1 s
        X = np.array([counted] * 3 + [imputed] * 3)
        reg = MFURegressor().fit(X, [1.0] * 3 + [0.1] * 3)
        assert np.exp(reg.log_u_) == pytest.approx(0.4)  # the pools hold counted runs only
        assert reg.predict(np.array([imputed]))[0] == pytest.approx(0.1)  # its own model's utilisation
        new_model = list(counted)
        new_model[5] = 2
        assert reg.predict(np.array([new_model]))[0] == pytest.approx(1.0)

    def test_convolutions_and_matmuls_pool_apart(self):
        # columns as above; device 0 ran a CNN (MFU 0.1) and a transformer (MFU 0.5), device 1 a transformer only
        cnn = [np.log(1e12), np.log(1e13), 0, 0, 0, 0, 0, 0, 0, 1.0, np.nan]  # 1e12 FLOP at 1e13 peak in 1 s: 0.1
        mm = [np.log(5e12), np.log(1e13), 0, 0, 0, 1, 0, 0, 0, 0.0, np.nan]   # 0.5
        mm1 = [np.log(2.5e13), np.log(1e14), 0, 0, 0, 2, 1, 0, 0, 0.0, np.nan]  # device 1: 2.5e13 / 1e14 in 0.5 s: 0.5
        X = np.array([cnn] * 3 + [mm] * 3 + [mm1] * 3)
        reg = MFURegressor().fit(X, [1.0] * 6 + [0.5] * 3)
        new_cnn = list(cnn)
        new_cnn[5] = 7
        assert reg.predict(np.array([new_cnn]))[0] == pytest.approx(1.0)  # device 0's CNN pool: 0.1
        # a CNN on device 1, which ran none: the CNN pool of that precision on any device, not device 1's 0.5
        cnn_on_1 = [np.log(1e13), np.log(1e14), 0, 0, 0, 7, 1, 0, 0, 1.0, np.nan]
        assert reg.predict(np.array([cnn_on_1]))[0] == pytest.approx(1.0)
        # a model of unknown op class (no family, no op columns): the class-blind pool of its device, not matmul's
        unknown = list(new_cnn)
        unknown[9] = np.nan
        assert reg.predict(np.array([unknown]))[0] == pytest.approx(1e12 / (1e13 * np.exp(reg.log_u_by_pair_[(0.0, 0.0)])))
        tab = reg.utilisation_table()
        assert tab.loc["utilisation[code 0, code 0, conv]", "value"] == pytest.approx(0.1)
        assert tab.loc["utilisation[code 0, matmul]", "value"] == pytest.approx(0.5)

    def test_pooled_median_by_device_and_precision(self):
        runs, work = _mfu_history()
        m = TrainingTimeModel(method="mfu").fit(runs)
        q = pd.DataFrame([_row("new", A100, np.nan, b=16)])
        assert m.predict(q)[0] == pytest.approx(2 * work / (_peak(A100) * 0.4))
        q = pd.DataFrame([_row("new", H100, np.nan, b=8)])
        assert m.predict(q)[0] == pytest.approx(work / (_peak(H100) * 0.2))

    def test_new_device_falls_back_to_precision_then_all(self):
        runs, work = _mfu_history()
        m = TrainingTimeModel(method="mfu").fit(runs)
        # bf16 pool: MFU 0.5, 0.4, 0.3, 0.2 -> median (of logs) sqrt(0.4 * 0.3)
        q = pd.DataFrame([_row("x", "H200-SXM-141GB", np.nan)])
        assert m.predict(q)[0] == pytest.approx(work / (_peak("H200-SXM-141GB") * math.sqrt(0.12)))
        # fp16: no run at that precision -> all runs (the same four here)
        q = pd.DataFrame([_row("x", A100, np.nan, precision="fp16")])
        assert m.predict(q)[0] == pytest.approx(work / (_peak(A100, "fp16") * math.sqrt(0.12)))

    def test_utilisation_table(self):
        runs, _ = _mfu_history()
        table = TrainingTimeModel(method="mfu").fit(runs).coef_table()
        assert table.loc[f"utilisation[{A100}, bf16]", "value"] == pytest.approx(0.4)
        assert table.loc["utilisation[all runs]", "value"] == pytest.approx(math.sqrt(0.12))


class TestRatio:
    def test_spec_ratio_scaling_closed_form(self):
        runs = pd.DataFrame([_row("a", A100, 1.0, b=8), _row("a", A100, 3.0, b=8, n=8),
                             _row("z", A100, 2.0, b=8)])
        m = TrainingTimeModel(method="ratio").fit(runs)
        q = pd.DataFrame([_row("a", H100, np.nan, b=16)])
        a, h = get_spec(A100), get_spec(H100)
        expected = 1.0 * 2 * math.sqrt(a.bf16_tflops / h.bf16_tflops * a.memory_bandwidth_gbps
                                       / h.memory_bandwidth_gbps)
        assert m.predict(q)[0] == pytest.approx(expected)

    def test_nearest_count_first_and_same_device_preferred(self):
        runs = pd.DataFrame([_row("a", A100, 1.0, b=8, n=1), _row("a", A100, 5.0, b=8, n=8),
                             _row("a", H100, 0.7, b=16, n=8)])
        m = TrainingTimeModel(method="ratio").fit(runs)
        # at 8 devices, batch 8 on the A100: its own 8-device run, not the H100's (another device)
        assert m.predict(pd.DataFrame([_row("a", A100, np.nan, b=8, n=8)]))[0] == pytest.approx(5.0)
        # at 1 device: the 1-device run, scaled by batch
        assert m.predict(pd.DataFrame([_row("a", A100, np.nan, b=16, n=1)]))[0] == pytest.approx(2.0)

    def test_nearby_batches_are_pooled_so_one_odd_run_does_not_decide(self):
        # model a at 8 devices: one run of another stack 10x slower at batch 128, three at batch 64; the query, at
        # batch 96 on an H100, is nearest in batch to the odd run (|log 128/96| = 0.29 < |log 64/96| = 0.41)
        refs = [("MI300X", 128, 10.0), (A100, 64, 0.5), ("A100-SXM4-40GB", 64, 0.55), ("H200-SXM-141GB", 64, 0.2)]
        runs = pd.DataFrame([_row("a", g, t, b=b, n=8) for g, b, t in refs])
        q = pd.DataFrame([_row("a", H100, np.nan, b=96, n=8)])
        h = get_spec(H100)
        scaled = np.log([t * 96 / b * math.sqrt(get_spec(g).bf16_tflops / h.bf16_tflops
                                                * get_spec(g).memory_bandwidth_gbps / h.memory_bandwidth_gbps)
                         for g, b, t in refs])
        pooled = TrainingTimeModel(method="ratio").fit(runs).predict(q)[0]
        assert pooled == pytest.approx(math.exp(np.median(scaled)))  # the median of all four: the odd run is one
        assert pooled < 0.5 * math.exp(scaled[0])
        feat = perfmodel.features.RunFeaturizer(kind="baseline").fit(runs)
        y = runs["step_time_s"].to_numpy()
        nearest = RatioRegressor(band=0.0).fit(feat.transform(runs), y).predict(feat.transform(q))[0]
        assert nearest == pytest.approx(math.exp(scaled[0]))  # band 0: the nearest run alone, as before
        old = RatioRegressor().fit(feat.transform(runs), y)
        del old.band  # a model saved before the band pooled only the nearest run: it predicts as it did
        assert old.predict(feat.transform(q))[0] == pytest.approx(nearest)

    def test_the_band_keeps_a_same_device_run_before_other_devices(self):
        runs = pd.DataFrame([_row("a", A100, 5.0, b=8, n=8), _row("a", H100, 0.7, b=8, n=8),
                             _row("a", "H200-SXM-141GB", 0.6, b=8, n=8)])
        m = TrainingTimeModel(method="ratio").fit(runs)
        # the A100's own run is at distance 0, the others at 0.5 (another device): beyond the band
        assert m.predict(pd.DataFrame([_row("a", A100, np.nan, b=8, n=8)]))[0] == pytest.approx(5.0)

    @pytest.mark.parametrize("band, error", [(-0.1, ValueError), (float("nan"), ValueError), ("0.3", TypeError),
                                             (True, TypeError)])
    def test_bad_band_is_refused(self, band, error):
        X = np.array([[np.log(1e12), np.log(1e14), np.log(1e12), 0.0, np.log(8), 0, 0, 0, 0, 0, np.nan]] * 3)
        with pytest.raises(error, match="band"):
            RatioRegressor(band=band).fit(X, [1.0, 1.0, 1.0])

    def test_unseen_model_gets_the_mfu_rule(self):
        runs, _ = _mfu_history()
        q = pd.DataFrame([_row("unseen", A100, np.nan, b=32)])
        ratio = TrainingTimeModel(method="ratio").fit(runs).predict(q)[0]
        mfu = TrainingTimeModel(method="mfu").fit(runs).predict(q)[0]
        assert ratio == pytest.approx(mfu)

    def test_intervals_come_from_the_score_book(self):
        from conftest import make_history

        runs = make_history()
        m = fit_history(runs, "ratio", kind="new_model")
        pi = m.predict_interval(runs.head(3).assign(model="unseen"))
        assert (pi["query_kind"] == "new_model").all()
        assert pi["interval_rule"].str.startswith("leave-one-model-out").all()
        assert (pi["step_lower"] < pi["step_time_s"]).all() and (pi["step_time_s"] < pi["step_upper"]).all()


def _split_history(shares, u_dense=0.5, u_attn=0.25, gpu=A100, models=None):
    """Runs on one device whose dense FLOPs ran at ``u_dense`` of the peak and attention's at ``u_attn`` (by
    default two models, each at several sequence lengths: several shares)."""
    models = models or [f"m{i % 2}" for i in range(len(shares))]
    rows = []
    for model, a in zip(models, shares):
        fps = 1e12
        t = 8 * fps / _peak(gpu) * ((1 - a) / u_dense + a / u_attn)
        rows.append(_row(model, gpu, t, fps=fps, op_matmul_flops=(1 - a) * fps, op_attention_flops=a * fps))
    return pd.DataFrame(rows)


class TestAttentionSplit:
    def test_attention_share_from_the_op_columns(self):
        frame = pd.DataFrame({"op_matmul_flops": [3.0, 1.0, np.nan, 0.0],
                              "op_attention_flops": [1.0, np.nan, 2.0, 0.0], "op_norm_flops": [0.0, 1.0, np.nan, 0.0]})
        # no matmul count (a partial split) or no FLOPs at all: unknown
        np.testing.assert_allclose(attention_share(frame), [0.25, np.nan, np.nan, np.nan])
        assert np.isnan(attention_share(pd.DataFrame({"op_matmul_flops": [1.0]}))).all()
        assert np.isnan(attention_share(pd.DataFrame({"op_attention_flops": [1.0]}))).all()
        negative = pd.DataFrame({"op_matmul_flops": [1e12], "op_attention_flops": [-9e11]})
        assert np.isnan(attention_share(negative)).all()  # not a share; the pooled rule prices such a row

    def test_dense_and_attention_parts_get_their_own_utilisation(self):
        runs = _split_history([0.05, 0.2, 0.4, 0.6, 0.8])
        m = TrainingTimeModel(method="mfu").fit(runs)
        q = _split_history([0.5], models=["new"])
        # one pooled utilisation would price the new share at the runs' median; the split gets it exactly
        assert m.predict(q.drop(columns="step_time_s"))[0] == pytest.approx(q["step_time_s"].iloc[0], rel=1e-6)
        split = MFURegressor().fit(*_baseline_design(runs))
        assert split.split_by_pair_ == {(0.0, 0.0): (pytest.approx(0.5), pytest.approx(0.25))}
        tab = split.utilisation_table(["A100"], ["bf16"])
        assert tab.loc["utilisation[A100, bf16, attention]", "value"] == pytest.approx(0.25)

    def test_the_split_survives_save_and_load(self, tmp_path):
        from perfmodel.persistence import load_model, save_model

        m = TrainingTimeModel(method="mfu").fit(_split_history(np.linspace(0.05, 0.8, 12)))
        q = _split_history([0.5], models=["new"]).drop(columns="step_time_s")
        save_model(m, tmp_path / "m.perfmodel")
        back = load_model(tmp_path / "m.perfmodel")
        assert back.predict(q)[0] == pytest.approx(m.predict(q)[0], rel=1e-12)

    def test_the_ratio_rule_uses_the_split_for_a_model_it_lacks(self):
        runs = _split_history(np.linspace(0.05, 0.8, 12))
        q = _split_history([0.5], models=["new"])
        m = TrainingTimeModel(method="ratio").fit(runs)
        assert m.predict(q.drop(columns="step_time_s"))[0] == pytest.approx(q["step_time_s"].iloc[0], rel=1e-6)

    def test_a_pool_that_cannot_tell_the_parts_apart_keeps_one_utilisation(self):
        runs = _split_history([0.3] * 5)  # the same share everywhere: no split to fit
        reg = MFURegressor().fit(*_baseline_design(runs))
        assert reg.split_by_pair_ == {}
        few = MFURegressor().fit(*_baseline_design(_split_history([0.1, 0.5, 0.9])))  # under 4 runs
        assert few.split_by_pair_ == {}
        # shares that differ only between models (one sequence length each) confound attention with model size
        across = MFURegressor().fit(*_baseline_design(_split_history([0.1, 0.3, 0.5, 0.7],
                                                                     models=["a", "b", "c", "d"])))
        assert across.split_by_pair_ == {}
        # an unphysical fit (attention faster than the peak allows) keeps one utilisation too
        fast = MFURegressor().fit(*_baseline_design(_split_history([0.1, 0.3, 0.5, 0.7], u_attn=2.0)))
        assert fast.split_by_pair_ == {}

    def test_rows_without_a_share_keep_the_pooled_rule(self):
        runs = _split_history([0.05, 0.2, 0.4, 0.6, 0.8])
        reg = MFURegressor().fit(*_baseline_design(runs))
        X, _ = _baseline_design(runs)
        X = X.assign(attn_share=np.nan)
        no_split = MFURegressor().fit(X, runs["step_time_s"].to_numpy())
        assert no_split.split_by_pair_ == {}
        np.testing.assert_allclose(reg.predict(X), no_split.predict(X))  # the pooled median of the runs


class TestAttentionInQueries:
    def test_a_model_spec_gives_its_attention_flops(self):
        runs = _split_history(np.linspace(0.05, 0.8, 12))  # 12 runs: enough for a 90% interval
        truth = _split_history([0.5], models=["new"])["step_time_s"].iloc[0]
        spec = {"params": 1e8, "flops_per_sample": 1e12, "family": "decoder"}
        kw = dict(batch_size=8, gpu_type=A100, precision="bf16", steps=1, history=runs, method="mfu")
        split = perfmodel.predict_training_time({**spec, "attention_flops_per_sample": 5e11}, **kw)
        assert split.step_seconds == pytest.approx(truth, rel=1e-6)
        pooled = perfmodel.predict_training_time(spec, **kw)  # no share given: the pooled utilisation
        assert pooled.step_seconds != pytest.approx(truth, rel=1e-3)

    @pytest.mark.parametrize("attn, fps, match", [(2e12, 1e12, "exceeds"), (5e11, None, "must be given with it"),
                                                 (-1.0, 1e12, "attention_flops_per_sample")])
    def test_bad_attention_flops_are_refused(self, attn, fps, match):
        spec = {"params": 1e8, "flops_per_sample": fps, "attention_flops_per_sample": attn}
        with pytest.raises(ValueError, match=match):
            perfmodel.predict_training_time(spec, batch_size=8, gpu_type=A100, steps=1,
                                            history=_split_history([0.1, 0.5, 0.2, 0.6]), method="mfu")

    def test_the_cli_takes_the_attention_flops(self, tmp_path, capsys):
        from perfmodel.cli import main

        path = tmp_path / "runs.csv"
        _split_history(np.linspace(0.05, 0.8, 12)).to_csv(path, index=False)
        args = ["predict", "--params", "1e8", "--flops-per-sample", "1e12", "--batch-size", "8", "--gpu-type", A100,
                "--precision", "bf16", "--steps", "1", "--history", str(path), "--method", "mfu", "--json"]
        truth = _split_history([0.5], models=["new"])["step_time_s"].iloc[0]
        assert main(args + ["--attention-flops-per-sample", "5e11"]) == 0
        assert json.loads(capsys.readouterr().out)["step_seconds"] == pytest.approx(truth, rel=1e-6)
        assert main(args) == 0  # no split given: the pooled utilisation, another answer
        assert json.loads(capsys.readouterr().out)["step_seconds"] != pytest.approx(truth, rel=1e-3)
        assert main(args + ["--attention-flops-per-sample", "2e12"]) == 2  # more than the whole: one-line error
        err = capsys.readouterr().err
        assert "exceeds its 'flops_per_sample'" in err and "Traceback" not in err
        named = ["predict", "--model", "m0", "--attention-flops-per-sample", "5e11", "--batch-size", "8",
                 "--gpu-type", A100, "--steps", "1", "--history", str(path)]
        assert main(named) == 2  # a FLOPs flag without --params is refused, not dropped
        assert "--attention-flops-per-sample describes a model given by --params" in capsys.readouterr().err

    def test_predict_many_takes_the_attention_flops(self):
        runs = _split_history(np.linspace(0.05, 0.8, 12))
        truth = _split_history([0.5], models=["new"])["step_time_s"].iloc[0]
        q = pd.DataFrame({"params": [1e8, 1e8], "flops_per_sample": [1e12, 1e12], "family": "decoder",
                          "attention_flops_per_sample": [5e11, np.nan], "batch_size": 8, "gpu_type": A100,
                          "precision": "bf16", "steps": 1})
        out = perfmodel.predict_many(q, history=runs, method="mfu")
        assert out["step_time_s"].iloc[0] == pytest.approx(truth, rel=1e-6)
        assert out["step_time_s"].iloc[1] != pytest.approx(truth, rel=1e-3)  # not given: the pooled rule
        with pytest.raises(ValueError, match=r"\(row 1 \(counting from 1\)\) exceeds"):
            perfmodel.predict_many(q.assign(attention_flops_per_sample=2e12), history=runs, method="mfu")
        with pytest.raises(ValueError, match=r"row 2 \(counting from 1\) has -1.0"):
            perfmodel.predict_many(q.assign(attention_flops_per_sample=[5e11, -1.0]), history=runs, method="mfu")
        with pytest.raises(ValueError, match="give the attention FLOPs one way"):
            perfmodel.predict_many(q.assign(op_attention_flops=5e11), history=runs, method="mfu")
        pure = perfmodel.predict_many(q.assign(attention_flops_per_sample=0.0), history=runs, method="mfu")
        dense_only = _split_history([0.0], models=["new"])["step_time_s"].iloc[0]  # no attention: u_dense alone
        np.testing.assert_allclose(pure["step_time_s"], dense_only, rtol=1e-6)

    @pytest.mark.filterwarnings("ignore::perfmodel.exceptions.ExtrapolationWarning")
    def test_plan_llm_passes_the_attention_term(self):
        from perfmodel.plan import plan_llm_job

        runs = _split_history(np.linspace(0.05, 0.8, 12))
        plan = plan_llm_job(n_layers=4, d_model=512, vocab=1000, seq_len=1024, tokens=1e9, global_batch=8,
                            gpu_type=A100, gpu_count=1, precision="bf16", history=runs, method="mfu")
        assert plan.prediction.query["op_attention_flops"] == pytest.approx(12 * 4 * 512 * 1024 ** 2)
        ckpt = plan_llm_job(n_layers=4, d_model=512, vocab=1000, seq_len=1024, tokens=1e9, global_batch=8,
                            gpu_type=A100, gpu_count=1, precision="bf16", history=runs, method="mfu",
                            activation_checkpointing=True)  # the forward pass recomputed: 16·L·d·seq²
        assert ckpt.prediction.query["op_attention_flops"] == pytest.approx(16 * 4 * 512 * 1024 ** 2)


def _baseline_design(runs):
    from perfmodel.features import RunFeaturizer
    from perfmodel.schema import validate_runs

    runs = validate_runs(runs)
    f = RunFeaturizer(kind="baseline").fit(runs)
    return pd.DataFrame(f.transform(runs), columns=f.feature_names_out_), runs["step_time_s"].to_numpy()


class TestPrecisionSemantics:
    def test_fp32_mode_texts(self):
        frame = pd.DataFrame({"fp32_mode": [
            "full fp32: matmul TF32 off (PyTorch default), cuDNN TF32 off (set by trace.py)",
            "fp32 (ROCm; CDNA has no TF32)", "tf32 (assumed: NGC PyTorch container sets ...)", "", None,
            "default", "TF32", "full"]})
        assert fp32_modes(frame).tolist() == ["full", "full", "tf32", "", "", "", "tf32", "full"]
        assert fp32_modes(pd.DataFrame({"x": [1]})).tolist() == [""]

    def test_conv_share_from_ops_else_family(self):
        frame = pd.DataFrame({"family": ["cnn", "transformer", "cnn", "mlp"],
                              "op_conv_dense_flops": [np.nan, np.nan, 3.0, 0.0],
                              "op_matmul_flops": [np.nan, np.nan, 1.0, 5.0]})
        np.testing.assert_allclose(conv_share(frame), [1.0, 0.0, 0.75, 0.0])

    @pytest.mark.parametrize("family, mode, expected", [
        ("cnn", "", "tf32"),           # PyTorch defaults: cuDNN convolutions in TF32
        ("decoder", "", "fp32"),       # matmuls in full fp32 (allow_tf32 False since 1.12)
        ("decoder", "tf32", "tf32"),
        ("cnn", "full fp32", "fp32"),
    ])
    def test_peak_an_fp32_run_uses(self, family, mode, expected):
        runs = pd.DataFrame([_row("a", A100, 1.0, precision="fp32", family=family, fp32_mode=mode)])
        peak = run_quantities(runs)["peak_tflops"].iloc[0]
        assert peak == pytest.approx(get_spec(A100).peak_tflops(expected))

    def test_mixed_share_is_time_weighted(self):
        runs = pd.DataFrame([_row("a", A100, 1.0, precision="fp32", family="cnn", op_conv_dense_flops=1.0,
                                  op_matmul_flops=1.0)])
        s = get_spec(A100)
        expected = 1 / (0.5 / s.peak_tflops("tf32") + 0.5 / s.peak_tflops("fp32"))
        assert run_quantities(runs)["peak_tflops"].iloc[0] == pytest.approx(expected)

    def test_other_precisions_unchanged_and_device_without_tf32(self):
        runs = pd.DataFrame([_row("a", A100, 1.0, precision="bf16", family="cnn"),
                             _row("a", "V100-PCIE-32GB", 1.0, precision="fp32", family="cnn")])
        q = run_quantities(runs)
        assert q["peak_tflops"].tolist() == pytest.approx([312.0, get_spec("V100-PCIE-32GB").fp32_tflops])

    def test_prediction_states_the_assumption(self):
        runs = pd.DataFrame([_row(m, A100, t, precision="fp32", family=f)
                             for m, t, f in (("a", 1.0, "decoder"), ("b", 2.0, "cnn"), ("c", 3.0, "decoder"))])
        pi = TrainingTimeModel(method="mfu").fit(runs).predict_interval(runs)
        assert pi["peak_basis"].iloc[0] == ("fp32 PyTorch defaults (no fp32_mode): conv share 0.00 at TF32, "
                                            "matmul share 1.00 at full fp32")
        assert "conv share 1.00 at TF32" in pi["peak_basis"].iloc[1]
        full = peak_basis(runs.assign(fp32_mode="full fp32"))
        assert full[0] == "fp32 full (no TF32; matmul share 1.00, conv share 0.00)"
        assert peak_basis(runs.assign(precision="bf16")).tolist() == ["bf16"] * 3


class TestPeakFloor:
    def test_clip_closed_form(self):
        p, lo, hi, moved = clip_at_peak(np.array([0.5, 2.0]), np.array([0.2, 1.5]), np.array([0.9, 3.0]),
                                        np.array([1.0, 1.0]))
        # the raised point keeps its upper half-width: 0.9 / 0.5 = 1.8 times the point
        assert p.tolist() == [1.0, 2.0] and lo.tolist() == [1.0, 1.5] and hi.tolist() == pytest.approx([1.8, 3.0])
        assert moved.tolist() == [True, False]

    def test_no_prediction_beyond_peak(self):
        # runs faster than the datasheet allows (MFU 1.5): the point and lower end stop at 100% of peak
        work = 8e12
        runs = pd.DataFrame([_row(m, A100, work / (_peak(A100) * 1.5) * k, b=8) for m, k in
                             (("a", 1.0), ("b", 1.02), ("c", 0.98))])
        pi = TrainingTimeModel(method="mfu").fit(runs).predict_interval(runs)
        floor = work / _peak(A100)
        assert pi["step_time_s"].to_numpy() == pytest.approx(np.full(3, floor))
        assert (pi["step_lower"] >= floor * (1 - 1e-12)).all()
        assert pi["interval_rule"].str.contains("raised to 100% of peak").all()

    def test_imputed_flops_and_cpu_are_not_clipped(self):
        runs = pd.DataFrame([_row(m, A100, 1e-6, b=8) for m in "abc"]).drop(columns="flops_per_sample")
        pi = TrainingTimeModel(method="mfu").fit(runs).predict_interval(runs)
        assert not pi["interval_rule"].str.contains("peak").any()


@pytest.mark.slow
def test_generalisation_quick_smoke(tmp_path):
    out = tmp_path / "gen"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "generalisation.py"), "--quick",
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "confirmation" in proc.stdout and "skipped" in proc.stdout
    assert (out.with_suffix(".json")).exists() and (out.with_suffix(".md")).exists()


@pytest.mark.slow
def test_generalisation_leave_one_set_out_smoke(tmp_path):
    out = tmp_path / "loso"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "generalisation.py"), "--loso", "--quick",
                           "--holdout", "public_neusight", "--methods", "auto,6ND-util0.4", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(out.with_suffix(".json").read_text())
    (entry,) = res["results"]
    assert entry["set"] == "public_neusight" and entry["role"] == "dev"
    assert "public_neusight" not in entry["history_sets"] and len(entry["history_sets"]) == 3
    assert sum(entry["kinds"].values()) == entry["rows"] == entry["all"]["auto"]["rows"]
    assert set(entry["per_kind"]) == set(entry["kinds"]) and res["methods"] == ["auto", "6ND-util0.4"]
    assert "held out" in out.with_suffix(".md").read_text()


@pytest.mark.parametrize("method", ["ratio", "mfu"])
def test_baselines_round_trip_through_a_safe_model_file(method, tmp_path):
    runs, _ = _mfu_history()
    fit = TrainingTimeModel(method=method).fit(runs)
    perfmodel.save_model(fit, tmp_path / "m.perfmodel")
    back = perfmodel.load_model(tmp_path / "m.perfmodel")
    pd.testing.assert_frame_equal(back.predict_interval(runs), fit.predict_interval(runs))
