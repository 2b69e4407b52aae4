"""The layout model: a step's physical parts (perfmodel.layout_features) in closed form on known layouts, and
LayoutRegressor's fit, prior and breakdown."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import perfmodel
from perfmodel.layout_features import LAYOUT_FEATURES, layout_components, layout_jobs
from perfmodel.models import CALIBRATION_PRIOR_WEIGHT, LayoutRegressor
from perfmodel.models._layout import COEFFICIENTS, PRIOR

H100 = {"peak": 989.4e12, "bw": 3350e9, "nvl": 450e9, "net": 50e9}


def _row(**kw):
    base = {"model": "m", "params": 1e9, "gpu_type": "H100-SXM5-80GB", "precision": "bf16", "n_layers": 32,
            "d_model": 4096, "n_heads": 32, "ffn_hidden": 16384, "vocab": 0, "seq_len": 2048,
            "global_batch_size": 64, "gpu_count": 8, "tp": 1, "pp": 1, "cp": 1, "batch_size": 8.0}
    return {**base, **kw}


def _parts(**kw):
    return layout_components(pd.DataFrame([_row(**kw)])).iloc[0]


class TestComponents:
    def test_gemm_flops_of_a_data_parallel_step(self):
        # 32 layers of 4·d² attention + 2·d·4d MLP weights, 2048·b tokens, forward + backward (x3 of 2·M·K·N)
        c = _parts(micro_batch_size=2, dp=8)
        weights = 32 * (4 * 4096**2 + 2 * 4096 * 16384)
        assert c["layer_flops_s"] == pytest.approx(6 * weights * 2048 * 2 / H100["peak"])
        assert c["attn_flops_s"] == pytest.approx(12 * 32 * 4096 * 2048 * 2048 * 2 / H100["peak"])
        assert c["microbatches"] == 4 and c["bubble"] == 0
        assert c["xl_nvl_s"] == 0 and c["p2p_nvl_s"] == 0

    def test_tensor_parallel_bytes_on_nvlink(self):
        c = _parts(tp=8, dp=1, micro_batch_size=1, sequence_parallel=1)
        # 8·(tp−1)/tp·t·d bytes of 16-bit activations per layer (two all-reduces forward and backward)
        assert c["xl_nvl_s"] == pytest.approx(8 * 7 / 8 * 2048 * 4096 * 2 * 32 / H100["nvl"])
        assert c["xl_net_s"] == 0
        spans = _parts(tp=16, gpu_count=16, dp=1, micro_batch_size=1, global_batch_size=16)
        assert spans["xl_nvl_s"] == 0 and spans["xl_net_s"] > 0  # a tensor group wider than a node

    def test_collective_calls_per_micro_batch(self):
        assert _parts(micro_batch_size=1, dp=8)["collectives"] == 0
        # tensor parallel: 4 calls per layer (two all-reduces forward, two backward), 32 layers; under sequence
        # parallelism each all-reduce is an all-gather and a reduce-scatter; full recomputation repeats the forward's
        assert _parts(tp=8, dp=1, micro_batch_size=1, sequence_parallel=0)["collectives"] == 4 * 32
        assert _parts(tp=8, dp=1, micro_batch_size=1, sequence_parallel=1)["collectives"] == 8 * 32
        assert _parts(tp=8, dp=1, micro_batch_size=1, sequence_parallel=0, recompute="full")["collectives"] == 6 * 32
        # context parallel: the ring's cp − 1 steps, three passes
        assert _parts(cp=4, dp=2, micro_batch_size=1)["collectives"] == 3 * 3 * 32
        # the pipeline's sends: 2 per virtual stage
        assert _parts(pp=4, dp=2, micro_batch_size=1, vp=2)["collectives"] == 2 * 2

    def test_expert_all_to_all_splits_by_link(self):
        moe = {"n_experts": 64, "experts_per_token": 8, "moe_ffn_hidden": 1024, "global_batch_size": 64,
               "micro_batch_size": 1}
        # every token to its 8 experts, 4 passes (dispatch and combine, forward and backward), 32 expert layers
        vol = 4 * 2048 * 8 * 4096 * 2 * 32
        one_node = _parts(**moe, gpu_count=8, dp=8, ep=8)
        assert one_node["xl_nvl_s"] == pytest.approx(vol * 7 / 8 / H100["nvl"]) and one_node["xl_net_s"] == 0
        # a group of 32 on four nodes: 7/32 of the copies stay on the node, 24/32 leave it
        wide = _parts(**moe, gpu_count=32, dp=32, ep=32)
        assert wide["xl_nvl_s"] == pytest.approx(vol * 7 / 32 / H100["nvl"])
        assert wide["xl_net_s"] == pytest.approx(vol * 24 / 32 / H100["net"])
        # under sequence parallelism a device dispatches only its share of the tokens
        tp = _parts(**moe, gpu_count=16, dp=8, ep=8, tp=2, sequence_parallel=1)
        no_tp = _parts(**moe, gpu_count=8, dp=8, ep=8)
        a2a = tp["xl_nvl_s"] - 8 * 1 / 2 * 2048 * 4096 * 2 * 32 / H100["nvl"]  # less the tensor-parallel part
        assert a2a == pytest.approx(no_tp["xl_nvl_s"] / 2)

    def test_pipeline_bubble_and_micro_batches(self):
        c = _parts(pp=4, dp=2, micro_batch_size=1, vp=2)
        assert c["microbatches"] == 32 and c["bubble"] == pytest.approx(3 / 2)
        # 8 layers per stage (⌈32/(4·2)⌉·2), a quarter of the data-parallel step's per micro-batch work
        full = _parts(micro_batch_size=1, dp=8)
        assert c["layer_flops_s"] == pytest.approx(full["layer_flops_s"] / 4)

    def test_data_parallel_traffic_is_hierarchical(self):
        # 64 replicas on 8 nodes: the k = 8 ranks of a node over NVLink, then 8 nodes over each rank's NIC
        c = _parts(gpu_count=64, dp=64, global_batch_size=64, micro_batch_size=1, zero_stage=0)
        P = 32 * (4 * 4096**2 + 2 * 4096 * 16384)
        V = P * 2
        assert c["dp_nvl_s"] == pytest.approx(2 * 7 / 8 * V / H100["nvl"])
        assert c["dp_net_s"] == pytest.approx(2 * 7 / 8 * V / 8 / H100["net"])
        fsdp = _parts(gpu_count=64, dp=64, global_batch_size=64, micro_batch_size=1, zero_stage=3)
        assert fsdp["dp_net_s"] == pytest.approx(1.5 * c["dp_net_s"])

    def test_fp8_and_recomputation(self):
        bf16, fp8 = _parts(micro_batch_size=1, dp=8), _parts(micro_batch_size=1, dp=8, precision="fp8")
        assert fp8["fp8"] == 1 and fp8["layer_flops_s"] == pytest.approx(bf16["layer_flops_s"] / 2, rel=1e-3)
        assert fp8["attn_flops_s"] == bf16["attn_flops_s"]  # attention stays 16-bit
        full = _parts(micro_batch_size=1, dp=8, recompute="full")
        assert full["layer_flops_s"] == pytest.approx(bf16["layer_flops_s"] * 4 / 3)

    def test_gradient_accumulation_grows_with_the_weights_not_the_tokens(self):
        # every micro-batch adds its gradients into the fp32 main gradient: 8 bytes per weight the stage holds
        c = _parts(micro_batch_size=1, dp=8)
        weights = 32 * (4 * 4096**2 + 2 * 4096 * 16384)
        assert c["grad_acc_s"] == pytest.approx(weights * 8 / H100["bw"])
        assert _parts(micro_batch_size=4, dp=8)["grad_acc_s"] == pytest.approx(c["grad_acc_s"])  # not the tokens
        assert _parts(micro_batch_size=1, dp=1, tp=8)["grad_acc_s"] == pytest.approx(c["grad_acc_s"] / 8)
        assert _parts(micro_batch_size=1, dp=2, pp=4)["grad_acc_s"] == pytest.approx(c["grad_acc_s"] / 4)
        # the output head, and an untied input embedding where one stage holds both ends
        tied = _parts(micro_batch_size=1, dp=8, vocab=32000, tied_embeddings=1)["grad_acc_s"]
        untied = _parts(micro_batch_size=1, dp=8, vocab=32000, tied_embeddings=0)["grad_acc_s"]
        assert tied == pytest.approx(c["grad_acc_s"] + 4096 * 32000 * 8 / H100["bw"])
        assert untied == pytest.approx(tied + 4096 * 32000 * 8 / H100["bw"])

    def test_unfused_attention_moves_its_scores_through_memory(self):
        # flash_attention 0: the (h/tp)·t·seq score elements per layer pass through memory 16 times (2 bytes each)
        fused, unfused = _parts(micro_batch_size=1, dp=8), _parts(micro_batch_size=1, dp=8, flash_attention=0)
        assert fused["attn_bytes_s"] == 0 and _parts(micro_batch_size=1, dp=8, flash_attention=1)["attn_bytes_s"] == 0
        assert unfused["attn_bytes_s"] == pytest.approx(16 * 2 * 32 * 32 * 2048 * 2048 / H100["bw"])
        # it grows with the heads at one width (the flash FLOPs do not), and full recomputation repeats the forward
        many = _parts(micro_batch_size=1, dp=8, flash_attention=0, n_heads=64)
        assert many["attn_bytes_s"] == pytest.approx(2 * unfused["attn_bytes_s"])
        assert many["attn_flops_s"] == pytest.approx(unfused["attn_flops_s"])
        full = _parts(micro_batch_size=1, dp=8, flash_attention=0, recompute="full")
        assert full["attn_bytes_s"] == pytest.approx(unfused["attn_bytes_s"] * 22.5 / 16)

    def test_a_stated_accumulation_is_part_of_the_step(self):
        # the schema's step: grad_accum micro-batches of batch_size on every device (no global batch given)
        row = _row(global_batch_size=None, batch_size=4.0, grad_accum=16)
        job = layout_jobs(pd.DataFrame([row]))[0]
        assert job.global_batch == 4 * 16 * 8 and job.layout.micro_batch == 4
        one = _parts(global_batch_size=None, batch_size=4.0, grad_accum=1)
        many = _parts(global_batch_size=None, batch_size=4.0, grad_accum=16)
        assert one["microbatches"] == 1 and many["microbatches"] == 16

    def test_rows_that_are_not_layout_jobs(self):
        rows = pd.DataFrame([_row(), {**_row(), "seq_len": None}])
        c = layout_components(rows)
        physics = c.drop(columns="source_weight")
        assert physics.iloc[0].notna().all() and physics.iloc[1].isna().all()
        assert (c["source_weight"] == 0.5).all()  # one source (none named): each of its 2 rows weighs 1/2
        jobs = layout_jobs(rows)
        assert jobs[1].problem == "no seq_len"

    def test_standard_shape_for_a_size(self):
        row = _row(micro_batch_size=1, dp=8)
        for k in ("n_layers", "d_model", "n_heads", "ffn_hidden"):
            row.pop(k)
        job = layout_jobs(pd.DataFrame([{**row, "params": 7e9}]))[0]
        assert job.shape.d_model == 4096 and "standard shape" in job.assumed[0]


class TestRegressor:
    def test_a_host_with_slow_collectives_fits_their_latency(self):
        # gloo on a CPU host takes milliseconds a call whatever its size, far above NCCL's ~10 µs: the fit can say so
        X = np.zeros((6, len(LAYOUT_FEATURES)))
        calls = np.array([0.0, 50, 100, 200, 400, 800])
        X[:, LAYOUT_FEATURES.index("layer_flops_s")] = 1e-3
        X[:, LAYOUT_FEATURES.index("kernels")] = 100.0
        X[:, LAYOUT_FEATURES.index("collectives")] = calls
        X[:, LAYOUT_FEATURES.index("microbatches")] = 1.0
        y = 3e-3 * calls + 0.05
        reg = LayoutRegressor(prior_weight=1e-4).fit(X, y)
        assert reg.coef_["collective_s"] == pytest.approx(3e-3, rel=0.2)

    @staticmethod
    def design(n=60, seed=0):
        rng = np.random.default_rng(seed)
        X = pd.DataFrame(0.0, index=range(n), columns=list(LAYOUT_FEATURES))
        X["layer_flops_s"] = rng.uniform(0.01, 1.0, n)
        X["layer_bytes_s"] = X["layer_flops_s"] * rng.uniform(0.01, 0.2, n)
        X["attn_flops_s"] = X["layer_flops_s"] * rng.uniform(0.05, 0.3, n)
        X["mem_s"] = X["layer_flops_s"] * rng.uniform(0.02, 0.1, n)
        X["kernels"] = rng.integers(100, 2000, n).astype(float)
        X["microbatches"] = rng.integers(1, 16, n).astype(float)
        X["dp_net_s"] = rng.uniform(0, 2.0, n)
        X["fp8"] = (rng.uniform(size=n) < 0.3).astype(float)
        X["source_weight"] = 1.0
        X.loc[X["fp8"] == 1, "layer_flops_s"] /= 2
        return X

    def test_recovers_the_coefficients_of_its_own_form(self):
        X = self.design()
        truth = {**PRIOR, "gemm_eff": 0.5, "attn_eff": 0.35, "mem_factor": 3.0, "fp8_gemm_eff": 0.7}
        model = LayoutRegressor(prior=truth, prior_weight=1e6).fit(X, np.ones(len(X)))  # pinned at the truth
        assert model.coef_ == pytest.approx(truth, rel=1e-3)
        y = model.predict(X)
        fit = LayoutRegressor(prior_weight=1e-6).fit(X, y)  # from the default prior, on the truth's times
        assert np.allclose(fit.predict(X), y, rtol=1e-3)
        assert fit.coef_["gemm_eff"] == pytest.approx(0.5, rel=0.05)
        assert fit.coef_["fp8_gemm_eff"] == pytest.approx(0.7, rel=0.05)
        assert fit.rsquared_ > 0.999

    def test_prior_holds_what_the_runs_cannot_identify(self):
        X = self.design()
        y = LayoutRegressor().fit(X, np.ones(len(X))).predict(X)  # any positive times
        X["dp_net_s"] = 0.0  # no data-parallel traffic at all: its coefficients stay at the prior
        fit = LayoutRegressor(prior={**PRIOR, "network_eff": 0.33, "dp_overlap": 0.44}).fit(X, y)
        assert fit.coef_["network_eff"] == pytest.approx(0.33, rel=1e-3)
        assert fit.coef_["dp_overlap"] == pytest.approx(0.44, rel=1e-3)
        calibrated = fit.with_prior()
        assert calibrated.prior == fit.coef_ and calibrated.prior_weight == CALIBRATION_PRIOR_WEIGHT

    def test_breakdown_adds_up(self):
        X = self.design()
        reg = LayoutRegressor().fit(X, np.exp(np.random.default_rng(1).normal(0, 0.1, len(X))))
        parts = reg.breakdown(X)
        total = parts["pipeline"] + parts["dp_exposed"] + parts["optimizer"] + parts["overhead"]
        assert np.allclose(total, parts["total"]) and np.allclose(parts["total"], reg.predict(X))
        X["collectives"] = 50.0
        parts = reg.breakdown(X)
        per_mb = parts["gemm"] + parts["attention"] + parts["memory"] + parts["layer_comm"] + parts["latency"]
        assert np.allclose(per_mb, parts["per_microbatch"]) and (parts["latency"] > 0).all()
        table = reg.coef_table()
        assert list(table.index) == list(COEFFICIENTS) and (table["value"] > 0).all()

    @pytest.mark.parametrize("kwargs, match", [({"prior": {"nope": 1.0}}, "unknown coefficients"),
                                               ({"prior": {"gemm_eff": -1.0}}, "positive finite"),
                                               ({"prior_weight": -1}, "'prior_weight'")])
    def test_bad_parameters(self, kwargs, match):
        X = self.design(10)
        with pytest.raises(ValueError, match=match):
            LayoutRegressor(**kwargs).fit(X, np.ones(10))


class TestOwnLayoutHistoryWithoutASequence:
    """A history of one's own layout runs answers a decoder given by size and FLOPs (its implied sequence, as out
    of the box) and refuses, naming seq_len, a query the layout model cannot price (it used to be a NaN
    'beyond the numeric range' error)."""

    @pytest.fixture(scope="class")
    def history(self):
        from perfmodel.datasets import bundled_runs_path

        return pd.read_csv(bundled_runs_path("public_llmfoundry.csv"))

    def test_a_decoder_by_size_gets_its_implied_sequence(self, history):
        import warnings

        from perfmodel import predict_many, predict_training_time

        spec = {"params": 7e9, "flops_per_sample": 6 * 7e9 * 2048, "family": "decoder"}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            one = predict_training_time(spec, batch_size=4, gpu_count=8, gpu_type="A100", history=history, steps=10)
            many = predict_many(pd.DataFrame([{**spec, "model": "mine", "batch_size": 4, "gpu_count": 8,
                                               "gpu_type": "A100", "steps": 10}]), history=history)
        assert one.method == "layout" and one.query["seq_len"] % 16 == 0 and np.isfinite(one.seconds)
        assert many["method"].iloc[0] == "layout" and np.isfinite(many["seconds"].iloc[0])

    def test_a_query_with_accumulation_is_the_job_with_its_global_batch(self, history):
        # batch_size 4 per device, 16 accumulated passes, 8 devices: the step of a 512-sequence global batch in
        # micro-batches of 4, however the step is written (the layout runs' own convention: batch_size the step's
        # share per device beside global_batch_size; the peak floor reads the same global batch)
        import warnings

        from perfmodel import predict_many

        base = {"model": "mpt-13b", "seq_len": 2048, "gpu_count": 8, "gpu_type": "A100", "steps": 1,
                "zero_stage": 3}
        queries = pd.DataFrame([{**base, "batch_size": 4, "grad_accum": 16},
                                {**base, "batch_size": 64, "global_batch_size": 512, "micro_batch_size": 4},
                                {**base, "batch_size": 64, "global_batch_size": 512, "grad_accum": 16},
                                {**base, "batch_size": 4, "grad_accum": 1}])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = predict_many(queries, history=history)
        t = out["step_time_s"].to_numpy()
        assert t[0] == pytest.approx(t[1], rel=1e-9) and t[2] == pytest.approx(t[1], rel=1e-9)
        assert not out["interval_rule"].str.contains("raised to").iloc[:3].any()
        assert 8 < t[0] / t[3] < 17

    def test_out_of_the_box_a_query_with_accumulation_takes_its_micro_batches(self):
        # no history: predict_many completes the layout. A stated accumulation states the micro-batch, as a
        # history's row does (grad_accum 1: one pass of batch_size; under a pipeline, one per stage); none stated
        # leaves the frameworks' default (1 sequence per pass)
        import warnings

        from perfmodel import predict_many

        base = {"model": "mine", "family": "decoder", "params": 1.3e10, "seq_len": 2048, "gpu_count": 8,
                "gpu_type": "H100", "steps": 1, "batch_size": 4}
        queries = pd.DataFrame([{**base, "grad_accum": 16.0}, {**base, "grad_accum": 1}, {**base, "grad_accum": None},
                                {**base, "batch_size": 64, "global_batch_size": 512, "micro_batch_size": 4},
                                {**base, "micro_batch_size": 4}, {**base, "micro_batch_size": 1},
                                {**base, "pp": 4, "grad_accum": 1}, {**base, "pp": 4, "micro_batch_size": 4}])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = predict_many(queries)["step_time_s"].to_numpy()
        assert t[0] == pytest.approx(t[3], rel=1e-9)
        assert t[1] == pytest.approx(t[4], rel=1e-9) and t[2] == pytest.approx(t[5], rel=1e-9)
        assert t[6] == pytest.approx(t[7], rel=1e-9)
        assert 8 < t[0] / t[1] < 17

    @pytest.mark.parametrize("accum", [2.5, 0, -1])
    def test_an_accumulation_that_is_not_a_positive_whole_number_is_refused(self, accum):
        from perfmodel import predict_many
        from perfmodel.exceptions import SchemaError

        q = pd.DataFrame([{"model": "mine", "family": "decoder", "params": 1.3e10, "seq_len": 2048, "gpu_count": 8,
                           "gpu_type": "H100", "steps": 1, "batch_size": 4, "grad_accum": accum}])
        with pytest.raises(SchemaError, match="grad_accum"):
            predict_many(q)

    @pytest.mark.parametrize("family", ["cnn", None])
    def test_a_query_without_a_sequence_is_refused_naming_it(self, history, family):
        from perfmodel import predict_training_time
        from perfmodel.exceptions import UnsupportedQueryError

        spec = {"params": 25e6, "flops_per_sample": 2.4e10} | ({"family": family} if family else {})
        with pytest.raises(UnsupportedQueryError, match="seq_len"):
            predict_training_time(spec, batch_size=32, gpu_count=8, gpu_type="A100", history=history, steps=10)

    def test_predict_many_names_the_callers_row(self, history):
        from perfmodel import predict_many
        from perfmodel.exceptions import UnsupportedQueryError

        known = {"model": "mpt-7b", "seq_len": 2048, "batch_size": 4, "gpu_count": 8, "gpu_type": "A100", "steps": 1}
        cnn = {"model": "my-cnn", "params": 25e6, "flops_per_sample": 2.4e10, "family": "cnn", "batch_size": 32,
               "gpu_count": 8, "gpu_type": "A100", "steps": 1}
        with pytest.raises(UnsupportedQueryError, match=r"row 2 \(counting from 1\)"):
            predict_many(pd.DataFrame([known, cnn, known]), history=history)

    @pytest.mark.slow  # fits the bundled GPU history (~10 s)
    def test_beside_bundled_gpu_runs_a_cnn_is_answered_by_them_and_a_decoder_by_the_layout_model(self, tmp_path,
                                                                                                 history):
        import warnings

        from perfmodel import predict_training_time

        own = tmp_path / "mine.csv"
        history.to_csv(own, index=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cnn = predict_training_time({"params": 25e6, "flops_per_sample": 2.4e10, "family": "cnn"}, batch_size=32,
                                        gpu_count=8, gpu_type="A100", history=[str(own), "gpu"], steps=10)
            dec = predict_training_time({"params": 7e9, "flops_per_sample": 8.6e13, "family": "decoder"},
                                        batch_size=4, gpu_count=8, gpu_type="A100", history=[str(own), "gpu"],
                                        steps=10)
        assert cnn.method != "layout" and np.isfinite(cnn.seconds)
        assert dec.method == "layout" and dec.query["seq_len"] % 16 == 0

    def test_the_layout_models_coefficient_table(self, history):
        import perfmodel
        from perfmodel.models._layout import COEFFICIENTS

        table = perfmodel.fit(history, method="layout", cv=None).coef_table()
        assert list(table.index) == list(COEFFICIENTS) and {"value", "prior", "meaning"} <= set(table.columns)
        assert np.isfinite(table["value"]).all()



class TestImpliedMicroBatch:
    @pytest.mark.parametrize("share, accum, pp, mb, says", [
        (64, 16, 1, 4, None),            # the share over its passes
        (16, 1, 1, 16, None),            # one pass: the whole share
        (16, None, 4, 4, "one per pipeline stage"),
        (16, 1, 4, 4, "one per pipeline stage"),
        (3, 2, 1, 3, "2 passes do not divide"),
    ])
    def test_the_rule(self, share, accum, pp, mb, says):
        from perfmodel.layout import implied_micro_batch

        got, note = implied_micro_batch(share, accum=accum, pp=pp)
        assert got == mb and (note is None if says is None else says in note)


class TestLayoutsOnADeviceWithoutFigures:
    """Layout runs measured on the generic ``cpu`` device (``perfmodel measure --sweep layouts`` writes them so) have
    no peak or memory bandwidth for the layout model to divide by: the history's generic fit answers them, with a
    warning that says how to give the host's figures; with them registered, the layout model is calibrated on the
    same runs. (Before, predict_many on the bundled CPU layout runs failed with the regressor's NaN error.)"""

    @pytest.fixture(scope="class")
    def runs(self):
        from perfmodel.datasets import bundled_runs_path

        runs = perfmodel.load_runs(bundled_runs_path("runs_cpu_layouts.csv"))
        return runs[runs["repeat"] == 0].reset_index(drop=True)

    def test_generic_fit_answers_with_a_warning(self, runs):
        from perfmodel.exceptions import DataQualityWarning
        from perfmodel.layout_features import layout_priceable

        assert not layout_priceable(runs).any()
        q = runs.head(4).drop(columns=["step_time_s"]).assign(steps=1)
        with pytest.warns(DataQualityWarning, match="predict_many: .*register_device"):
            out = perfmodel.predict_many(q, history=runs)
        assert np.all(np.isfinite(out["step_time_s"])) and not (out["method"] == "layout").any()

    def test_registered_host_is_priced_by_the_layout_model(self, runs):
        from perfmodel.hardware import register_device, unregister_device
        from perfmodel.layout_features import layout_priceable

        register_device(name="Test Host L1", vendor="host", source="test: a host's measured figures",
                        fp32_tflops=0.18, memory_bandwidth_gbps=17.6, interconnect_gbps=2.3, network_gbps=1.2)
        try:
            hosted = runs.assign(gpu_type="Test Host L1")
            assert layout_priceable(hosted).all()
            q = hosted.head(4).drop(columns=["step_time_s"]).assign(steps=1)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = perfmodel.predict_many(q, history=hosted)
            assert (out["method"] == "layout").all() and np.all(np.isfinite(out["step_time_s"]))
        finally:
            unregister_device("Test Host L1")

    def test_search_layouts_does_not_pretend_to_rank_what_it_cannot(self, runs):
        from perfmodel.exceptions import DataQualityWarning
        from perfmodel.plan import search_layouts
        from perfmodel.transformer import TransformerShape

        shape = TransformerShape(n_layers=4, d_model=128, n_heads=4, vocab=1024)
        with pytest.warns(DataQualityWarning, match="ordered by memory.*register_device|register_device.*ordered"):
            table = search_layouts(shape=shape, seq_len=64, global_batch=16, gpu_type="cpu", devices=2,
                                   precision="fp32", history=runs, include_unfit=True)
        assert len(table) > 1 and table["vs_fastest"].isna().all()
        assert table["memory_gb"].is_monotonic_increasing

    def test_an_upper_case_precision_still_reaches_the_layout_model(self):
        from perfmodel.datasets import bundled_runs_path

        mb = perfmodel.load_runs(bundled_runs_path("public_megatron_bridge.csv"))
        row = mb[(mb["model"] == "llama3-8b") & (mb["gpu_count"] == 8)].head(1).drop(columns=["step_time_s"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = perfmodel.predict_many(row.assign(precision=row["precision"].str.upper(), steps=1))
        assert out["method"].iloc[0] == "layout"
