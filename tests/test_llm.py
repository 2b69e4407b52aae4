"""Job-shaped LLM queries (perfmodel.plan.plan_llm_job) and the memory estimate (perfmodel.plan.estimate_memory):
closed-form checks of parameters, FLOPs, steps and bytes on known configurations, and the CLI's plan-llm."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from perfmodel.plan import (decoder_flops_per_sample, decoder_params, estimate_memory, plan_llm_job,
                            recommend)
from perfmodel.plan._llm import hf_config_shape

pytestmark = pytest.mark.filterwarnings("ignore::perfmodel.exceptions.DataQualityWarning")

LLAMA2_7B = {"n_layers": 32, "d_model": 4096, "vocab": 32000, "n_heads": 32}


class TestClosedForms:
    def test_llama2_7b_params(self):
        # 12·L·d² + V·d = 12·32·4096² + 32000·4096; Llama-2 7B has 6.74e9 (untied head, SwiGLU): within 3%
        n = decoder_params(32, 4096, 32000)
        assert n == 12 * 32 * 4096**2 + 32000 * 4096 == 6_573_522_944
        assert abs(n / 6.74e9 - 1) < 0.03

    def test_ffn_mult(self):
        assert decoder_params(2, 8, 0, ffn_mult=8) == (4 + 16) * 2 * 64

    def test_flops_per_sample(self):
        n, s, L, d = 7e9, 4096, 32, 4096
        assert decoder_flops_per_sample(n, s) == 6 * n * s
        assert decoder_flops_per_sample(n, s, L, d) == 6 * n * s + 12 * L * d * s * s
        assert decoder_flops_per_sample(n, s, L, d, activation_checkpointing=True) == pytest.approx(
            8 * n * s + 16 * L * d * s * s)

    def test_model_state_bytes(self):
        m = estimate_memory(params=1e9, precision="bf16")
        assert (m.weights_bytes, m.gradients_bytes, m.optimizer_bytes) == (2e9, 2e9, 12e9)
        m = estimate_memory(params=1e9, precision="fp32", optimizer="sgd")
        assert (m.weights_bytes, m.gradients_bytes, m.optimizer_bytes) == (4e9, 4e9, 4e9)
        assert m.activations_bytes is None and m.lower_bound

    @pytest.mark.parametrize("stage, expected", [(0, (2, 2, 12)), (1, (2, 2, 1.5)), (2, (2, 0.25, 1.5)),
                                                 (3, (0.25, 0.25, 1.5))])
    def test_zero_stages_divide_by_dp(self, stage, expected):
        m = estimate_memory(params=1e9, precision="bf16", zero_stage=stage, data_parallel=8)
        assert (m.weights_bytes / 1e9, m.gradients_bytes / 1e9, m.optimizer_bytes / 1e9) == expected

    def test_tp_pp_divide_model_state(self):
        m = estimate_memory(params=8e9, precision="bf16", tensor_parallel=2, pipeline_parallel=4)
        assert m.weights_bytes + m.gradients_bytes + m.optimizer_bytes == 16e9

    def test_activations_korthikanti(self):
        s, b, h, a, L = 2048, 4, 2048, 16, 24
        m = estimate_memory(params=1e9, micro_batch=b, seq_len=s, n_layers=L, d_model=h, n_heads=a,
                            overhead_bytes=0)
        assert m.activations_bytes == pytest.approx(L * s * b * h * (34 + 5 * a * s / h))
        ck = estimate_memory(params=1e9, micro_batch=b, seq_len=s, n_layers=L, d_model=h, n_heads=a,
                             activation_checkpointing=True)
        assert ck.activations_bytes == pytest.approx(L * 2 * s * b * h + s * b * h * (34 + 5 * a * s / h))
        fa = estimate_memory(params=1e9, micro_batch=b, seq_len=s, n_layers=L, d_model=h, n_heads=a,
                             flash_attention=True)
        assert fa.activations_bytes == pytest.approx(L * s * b * h * 34)
        tp = estimate_memory(params=1e9, micro_batch=b, seq_len=s, n_layers=L, d_model=h, n_heads=a,
                             tensor_parallel=4)
        assert tp.activations_bytes == pytest.approx(L * s * b * h * (10 + 24 / 4 + 5 * a * s / (h * 4)))

    def test_1p3b_adamw_on_l4_does_not_fit(self):
        m = estimate_memory(params=1.3e9, gpu_type="L4", precision="fp16", micro_batch=16, seq_len=2048,
                            n_layers=24, d_model=2048)
        assert m.weights_bytes + m.gradients_bytes + m.optimizer_bytes == pytest.approx(20.8e9)
        assert m.device_bytes == 24e9 and m.fits is False
        assert "does NOT fit" in str(m) and "of 24 GB" in m.short()

    def test_device_without_memory_figure(self):
        assert estimate_memory(params=1e6, gpu_type="cpu").fits is None

    @pytest.mark.parametrize("kwargs, err, match", [
        ({"params": 0}, ValueError, "'params'"),
        ({"params": 1e9, "zero_stage": 4}, ValueError, "'zero_stage'.*0, 1, 2 or 3"),
        ({"params": 1e9, "precision": "fp33"}, ValueError, "'precision'"),
        ({"params": 1e9, "optimizer": "lion"}, ValueError, "'optimizer'"),
        ({"params": 1e9, "micro_batch": 0}, ValueError, "'micro_batch'"),
        ({"params": 1e9, "activation_checkpointing": "yes"}, TypeError, "activation_checkpointing"),
    ])
    def test_bad_input(self, kwargs, err, match):
        with pytest.raises(err, match=match):
            estimate_memory(**kwargs)


@pytest.fixture(scope="module")
def llama_job():
    with pytest.warns(Warning, match="precision not given|bundled public GPU history"):
        return plan_llm_job(**LLAMA2_7B, seq_len=4096, tokens=100e9, global_batch=1024, gpu_type="H100",
                            nodes=8, gpus_per_node=8)


class TestPlanLLMJob:
    def test_derivation(self, llama_job):
        j = llama_job
        assert j.params == 6_573_522_944 and "12·L·d² + vocab·d" in j.params_formula
        assert j.flops_per_sample == 6 * j.params * 4096 + 12 * 32 * 4096 * 4096**2
        assert j.flops_formula == "6·N·seq + 12·L·d·seq²"
        assert j.steps == -(-100_000_000_000 // (1024 * 4096)) == 23_842
        assert (j.devices, j.data_parallel, j.batch_size_per_device, j.micro_batch, j.accumulation) == \
            (64, 64, 16, 16, 1)
        assert j.prediction.query["flops_per_sample"] == j.flops_per_sample
        assert j.prediction.query["batch_size"] == 16 and j.prediction.query["gpu_count"] == 64
        assert j.prediction.steps == j.steps and (j.seconds, j.lower, j.upper) == (
            j.prediction.seconds, j.prediction.lower, j.prediction.upper)

    def test_precision_memory_and_text(self, llama_job):
        j = llama_job
        assert j.precision == "bf16" and j.precision_assumed
        assert j.fits is False  # 16 sequences of 4096 tokens without checkpointing: far above 80 GB
        text = str(j)
        assert "in bf16 (assumed)" in text and "6·N·seq + 12·L·d·seq²" in text and "does NOT fit" in text
        d = json.loads(json.dumps(j.to_dict(), allow_nan=False))
        assert d["memory"]["fits"] is False and d["steps"] == 23_842 and d["prediction"]["seconds"] > 0

    def test_sharded_checkpointed_fits(self):
        j = plan_llm_job(**LLAMA2_7B, seq_len=4096, steps=10, global_batch=1024, gpu_type="H100", gpu_count=64,
                         zero_stage=3, micro_batch=1, activation_checkpointing=True, precision="bf16")
        assert j.fits is True and j.accumulation == 16 and not j.precision_assumed
        assert j.flops_formula.startswith("8·N·seq + 16·L·d·seq²")

    def test_tensor_pipeline_estimate(self):
        base = plan_llm_job(**LLAMA2_7B, seq_len=4096, steps=100, global_batch=512, gpu_type="H100",
                            nodes=4, gpus_per_node=8, micro_batch=1, precision="bf16")
        j = plan_llm_job(**LLAMA2_7B, seq_len=4096, steps=100, global_batch=512, gpu_type="H100", nodes=4,
                         gpus_per_node=8, tensor_parallel=4, pipeline_parallel=2, micro_batch=1, precision="bf16")
        assert j.data_parallel == 4 and j.accumulation == 128
        c = j.communication
        # 4 all-reduces per layer and micro-batch, L/pp layers, ring 2(t-1)/t, 16-bit, half of NVLink's 900 GB/s
        comm = 128 * 4 * 16 * 2 * 3 / 4 * 4096 * 1 * 4096 * 2 / 450e9
        assert c["tp_comm_s_per_step"] == pytest.approx(comm) and not c["tp_spans_nodes"]
        assert c["pp_bubble_factor"] == pytest.approx(1 + 1 / 128)
        # 4 nodes: the stages span nodes, so the sends (activations forward, gradients back, per micro-batch) go
        # over the DGX H100 reference network, 50 GB/s per GPU one way
        send = 128 * 2 * 4096 * 1 * 4096 * 2 / 50e9
        assert c["pp_crosses_nodes"] and c["pp_send_s_per_step"] == pytest.approx(send)
        assert c["inter_node_gb_per_s"] == 50 and "network_gbps" in c["inter_node_source"]
        assert c["dp_added_s_per_step"] == 0 and c["added_s_per_step"] == pytest.approx(comm + send)
        assert "data-parallel work only" in c["note"] and "data-parallel work only" in str(j)
        step = base.prediction.step_seconds
        assert j.seconds == pytest.approx(j.prediction.startup_seconds + 100 * (step * (1 + 1 / 128) + comm + send))

    def test_1p3b_on_8_l4_flagged(self):
        j = plan_llm_job(n_layers=24, d_model=2048, vocab=50257, seq_len=2048, steps=1000, global_batch=128,
                         gpu_type="L4", gpu_count=8)
        assert j.fits is False and j.precision == "fp16"
        assert any("does not fit" in n for n in j.notes)

    @pytest.mark.parametrize("kwargs, match", [
        ({}, "needs the model"),
        ({"params": 1e9, "tokens": 1e9, "steps": 10}, "exactly one of 'tokens', 'samples' or 'steps'"),
        ({"params": 1e9, "tokens": 1e9, "global_batch": 1001}, "multiple of the data-parallel degree 8"),
        ({"params": 1e9, "tokens": 1e9, "tensor_parallel": 3}, "do not divide"),
        ({"params": 1e9, "tokens": 1.5, "seq_len": 1}, "'tokens'.*whole number"),
        ({"params": 1e9, "tokens": 1e9, "nodes": 2}, "'nodes' and 'gpus_per_node' together"),
        ({"params": 1e9, "tokens": 1e9, "nodes": 2, "gpus_per_node": 2}, "not nodes x gpus_per_node"),
        ({"params": 1e9, "tokens": 1e9, "zero_stage": 5}, "'zero_stage'"),
        ({"params": 1e9, "tokens": 1e9, "precision": "int4"}, "'precision'"),
        ({"params": 1e9, "tokens": 1e9, "micro_batch": 3}, "'micro_batch'.*must divide"),
    ])
    def test_bad_input(self, kwargs, match):
        base = {"seq_len": 2048, "global_batch": 64, "gpu_type": "H100", "gpu_count": 8}
        args = {**base, **kwargs}
        if not {"tokens", "samples", "steps"} & set(args):
            args["steps"] = 10
        with pytest.raises((ValueError, TypeError), match=match):
            plan_llm_job(**args)


GPT2_SMALL = {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257,
              "n_positions": 1024, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}
LLAMA2_7B_HF = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 11008,
                "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
                "tie_word_embeddings": False, "rms_norm_eps": 1e-5, "hidden_act": "silu",
                "max_position_embeddings": 4096}
LLAMA3_8B_HF = {**LLAMA2_7B_HF, "intermediate_size": 14336, "num_key_value_heads": 8, "vocab_size": 128256,
                "max_position_embeddings": 8192}


class TestHFConfig:
    """Parameters derived from Hugging Face configs against the counts their model cards publish."""

    @pytest.mark.parametrize("config, published", [
        (GPT2_SMALL, 124e6),            # GPT-2 small: "124M"
        (LLAMA2_7B_HF, 6.74e9),         # Llama-2-7B: 6.74B (untied head, SwiGLU)
        (LLAMA3_8B_HF, 8.03e9),         # Llama-3-8B: 8.03B (grouped-query attention, 8 key/value heads)
    ])
    def test_params_match_published_counts(self, config, published):
        shape = hf_config_shape(config)
        assert abs(shape["params"] / published - 1) < 0.01
        assert shape["n_layers"] == config.get("num_hidden_layers", config.get("n_layer"))

    def test_exact_counts_and_layout(self):
        gpt2 = hf_config_shape(GPT2_SMALL)
        # 12 x (4·768² + 2·768·3072 + biases 3072 + 3840 + 2 LayerNorms 3072) + 50257·768 + 1024·768 + 1536
        assert gpt2["params"] == 124_439_808 and gpt2["ffn"] == 3072 and not gpt2["gated_mlp"]
        # what a token multiplies by: the layers' weights (no biases or norms) and the head (tied: the embedding)
        assert gpt2["tied_embeddings"] and gpt2["matmul_params"] == 12 * (4 * 768**2 + 2 * 768 * 3072) + 50257 * 768
        llama = hf_config_shape(LLAMA2_7B_HF)
        assert llama["params"] == 6_738_415_616 and llama["gated_mlp"] and not llama["tied_embeddings"]
        assert llama["matmul_params"] == 32 * (4 * 4096**2 + 3 * 4096 * 11008) + 32000 * 4096
        tied = hf_config_shape({**LLAMA2_7B_HF, "tie_word_embeddings": True})
        assert llama["params"] - tied["params"] == 32000 * 4096

    def test_mixture_of_experts_counts(self):
        # Mixtral 8x7B: 46.7B parameters, 12.9B active (its model card); 8 experts, 2 per token
        mixtral = {**LLAMA2_7B_HF, "model_type": "mixtral", "num_key_value_heads": 8, "intermediate_size": 14336,
                   "num_local_experts": 8, "num_experts_per_tok": 2}
        shape = hf_config_shape(mixtral)
        layer_norms = 2 * 4096
        attention = 4096 * 128 * (2 * 32 + 2 * 8)
        expert = 3 * 4096 * 14336
        per_layer = attention + 8 * expert + 4096 * 8 + layer_norms
        assert shape["params"] == 32 * per_layer + 2 * 32000 * 4096 + 4096
        assert shape["active_params"] == shape["params"] - 32 * 6 * expert
        assert round(shape["params"] / 1e9, 1) == 46.7 and round(shape["active_params"] / 1e9, 1) == 12.9
        assert shape["shape"].is_moe and shape["matmul_params"] == 32 * (attention + 2 * expert + 4096 * 8) + 32000 * 4096

    def test_path_folder_and_plan(self, tmp_path):
        (tmp_path / "config.json").write_text(json.dumps(LLAMA2_7B_HF))
        for cfg in (tmp_path / "config.json", str(tmp_path)):
            assert hf_config_shape(cfg)["params"] == 6_738_415_616
        j = plan_llm_job(hf_config=tmp_path / "config.json", seq_len=4096, steps=10, global_batch=64,
                         gpu_type="H100", gpu_count=8, precision="bf16")
        assert j.params == 6_738_415_616 and j.params_formula.startswith("HF config (llama)")
        assert (j.hf_config["n_layers"], j.hf_config["d_model"], j.memory.device_bytes) == (32, 4096, 80e9)
        # FLOPs from the matmul parameters: the untied input embedding is a lookup
        matmul = 32 * (4 * 4096**2 + 3 * 4096 * 11008) + 32000 * 4096
        assert j.flops_per_sample == 6 * matmul * 4096 + 12 * 32 * 4096 * 4096**2
        assert "untied input embedding" in j.flops_formula

    def test_pretrained_config_object(self):
        transformers = pytest.importorskip("transformers")
        gpt2 = hf_config_shape(transformers.GPT2Config())  # the defaults are GPT-2 small's
        assert gpt2["params"] == 124_439_808
        cfg = transformers.LlamaConfig(**{k: v for k, v in LLAMA2_7B_HF.items() if k != "model_type"})
        assert hf_config_shape(cfg)["params"] == 6_738_415_616

    @pytest.mark.parametrize("config, err, match", [
        ({**LLAMA2_7B_HF, "num_hidden_layers": None}, ValueError, "no layer count.*'num_hidden_layers' or 'n_layer'"),
        ({k: v for k, v in LLAMA2_7B_HF.items() if k != "vocab_size"}, ValueError, "no vocabulary size.*'vocab_size'"),
        ({k: v for k, v in LLAMA2_7B_HF.items() if k != "intermediate_size"}, ValueError,
         "no MLP width.*'intermediate_size' or 'n_inner'"),
        ({**LLAMA2_7B_HF, "hidden_size": "4096"}, ValueError, "'hidden_size' must be a positive whole number"),
        ({**LLAMA2_7B_HF, "num_local_experts": 8}, ValueError, "no experts per token.*'num_experts_per_tok'"),
        ({**LLAMA2_7B_HF, "is_encoder_decoder": True}, ValueError, "encoder-decoder"),
        ("/nonexistent/config.json", FileNotFoundError, "no such file.*nothing is downloaded"),
        (42, TypeError, "'hf_config' parameter"),
    ])
    def test_bad_configs_name_the_problem(self, config, err, match):
        with pytest.raises(err, match=match):
            hf_config_shape(config)

    def test_bad_json_and_clash(self, tmp_path):
        bad = tmp_path / "config.json"
        bad.write_text("{not json")
        with pytest.raises(ValueError, match="not valid JSON"):
            hf_config_shape(bad)
        with pytest.raises(ValueError, match="hf_config gives the architecture; leave out n_layers=32"):
            plan_llm_job(hf_config=LLAMA2_7B_HF, n_layers=32, seq_len=4096, steps=10, global_batch=64,
                         gpu_type="H100", gpu_count=8)


def _job(**kw):
    args = dict(**LLAMA2_7B, seq_len=4096, steps=10, global_batch=1024, gpu_type="H100", nodes=8, gpus_per_node=8,
                precision="bf16")
    return plan_llm_job(**{**args, **kw})


class TestInterNode:
    """The data-parallel all-reduce across nodes (hierarchical), pipeline sends and tensor groups between nodes."""

    @staticmethod
    def hierarchical(params, k, n, intra, net, z=1.0):
        grad = params * 2  # 16-bit gradients
        return z * (2 * (k - 1) / k * grad / (intra * 1e9) + 2 * (n - 1) / n * grad / k / (net * 1e9))

    def test_reference_network_is_shown_not_added(self):
        j = _job()
        c = j.communication
        # 8 per node over half of NVLink's 900 GB/s, then 8 nodes over the DGX H100's 50 GB/s per GPU
        assert c["dp_allreduce_s_per_step"] == pytest.approx(self.hierarchical(j.params, 8, 8, 450, 50))
        assert c["dp_added_s_per_step"] == 0 and c["added_s_per_step"] == 0
        assert (j.seconds, j.upper) == (j.prediction.seconds, j.prediction.upper)  # the fitted time holds it
        assert "not added; the fitted time holds what its method learned" in str(j) and "hierarchical" in str(j)

    def test_a_slower_network_adds_the_difference(self):
        ref, slow, fast = _job(), _job(inter_node_gbps=12.5), _job(inter_node_gbps=100)
        inter = lambda bw: 2 * 7 / 8 * ref.params * 2 / 8 / (bw * 1e9)  # noqa: E731 - the inter-node stage
        c = slow.communication
        assert c["inter_node_gb_per_s"] == 12.5 and c["inter_node_source"] == "given (inter_node_gbps)"
        assert c["dp_added_s_per_step"] == pytest.approx(inter(12.5) - inter(50))
        assert slow.seconds == pytest.approx(ref.seconds + 10 * c["dp_added_s_per_step"])
        assert slow.lower == pytest.approx(ref.lower + 10 * c["dp_added_s_per_step"])
        # a faster network than the reference never shortens the fitted time
        assert fast.communication["dp_added_s_per_step"] == 0 and fast.seconds == ref.seconds
        assert "not slower than the reference" in fast.communication["note"]

    def test_zero3_moves_one_and_a_half_all_reduces(self):
        j = _job(zero_stage=3, micro_batch=2, activation_checkpointing=True)
        assert j.communication["dp_allreduce_s_per_step"] == pytest.approx(
            self.hierarchical(j.params, 8, 8, 450, 50, z=1.5))

    def test_tensor_parallel_within_nodes_leaves_one_dp_member_per_node(self):
        j = _job(tensor_parallel=8, global_batch=64)
        assert j.data_parallel == 8
        assert j.communication["dp_allreduce_s_per_step"] == pytest.approx(
            2 * 7 / 8 * j.params / 8 * 2 / 50e9)  # k = 1: each GPU's shard over its own NIC

    def test_unknown_network_keeps_todays_behaviour_and_says_so(self):
        # MI300X: no reference system network in the table
        j = _job(gpu_type="MI300X", tensor_parallel=4, pipeline_parallel=2, global_batch=512, micro_batch=1)
        c = j.communication
        assert c["inter_node_gb_per_s"] is None and c["pp_send_s_per_step"] is None
        assert c["dp_allreduce_s_per_step"] is None and c["added_s_per_step"] == c["tp_comm_s_per_step"]
        assert "no inter-node bandwidth for MI300X" in c["note"] and "pass inter_node_gbps=" in c["note"]
        assert "pipeline sends between nodes are not costed" in c["note"]
        with pytest.raises(ValueError, match="tensor_parallel=16 spans nodes.*no inter-node bandwidth.*inter_node_gbps"):
            _job(gpu_type="MI300X", tensor_parallel=16)

    def test_tensor_groups_span_nodes_when_the_network_is_known(self):
        j = _job(gpu_type="MI300X", tensor_parallel=16, micro_batch=1, global_batch=64, inter_node_gbps=50)
        c = j.communication
        assert c["tp_spans_nodes"] and c["inter_node_gb_per_s"] == 50
        # ring over the slower link: min(896 / 2, 50); 4 all-reduces per layer and micro-batch, 16 micro-batches
        assert c["tp_comm_s_per_step"] == pytest.approx(16 * 4 * 32 * 2 * 15 / 16 * 4096 * 4096 * 2 / 50e9)
        # the device table has no reference for MI300X: the data-parallel estimate is shown, not added
        assert c["dp_added_s_per_step"] == 0 and "no reference network for MI300X" in c["note"]
        h100 = _job(tensor_parallel=16, micro_batch=1, global_batch=64)  # DGX H100 reference: allowed
        assert h100.communication["tp_spans_nodes"]

    def test_layout_checks_and_unused_override(self):
        with pytest.raises(ValueError, match="tensor_parallel=3 does not divide gpus_per_node=8"):
            _job(tensor_parallel=3, nodes=3, global_batch=24)
        with pytest.raises(ValueError, match="'inter_node_gbps'"):
            _job(inter_node_gbps=-1)
        j = plan_llm_job(**LLAMA2_7B, seq_len=4096, steps=10, global_batch=64, gpu_type="H100", gpu_count=64,
                         precision="bf16", inter_node_gbps=12.5)
        assert j.communication is None and any("inter_node_gbps not used" in n for n in j.notes)


class TestRecommendMemory:
    def test_rows_that_do_not_fit_are_flagged(self):
        with pytest.warns(Warning, match="do not fit in device memory.*L4 x8"):
            out = recommend({"params": 1.3e9, "flops_per_sample": 6 * 1.3e9 * 2048}, batch_size=128, steps=100,
                            gpu_types=["L4"], gpu_counts=[8],
                            memory={"seq_len": 2048, "n_layers": 24, "d_model": 2048})
        row = out.iloc[0]
        assert not row["fits_memory"] and row["memory_gb"] > row["device_memory_gb"] == 24
        assert row["provider"] == "gcp" and row["usd_per_device_hour"] == pytest.approx(0.71)

    def test_model_state_alone_is_a_lower_bound(self):
        out = recommend({"params": 1.3e9, "flops_per_sample": 6 * 1.3e9 * 2048}, batch_size=8, steps=100,
                        gpu_types=["H100"], gpu_counts=[8])
        assert out["memory_lower_bound"].all() and out["fits_memory"].all()
        assert out["memory_gb"].iloc[0] == pytest.approx(1.3e9 * 16 / 1e9 + 2)

    def test_bad_memory_keys(self):
        with pytest.raises(ValueError, match="unknown keys"):
            recommend("gpt-s", batch_size=8, steps=10, gpu_types=["cpu"], gpu_counts=[1], memory={"seqlen": 1})


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "perfmodel", *args], capture_output=True, text=True, timeout=600)


class TestCLI:
    def test_plan_llm(self):
        p = _cli("plan-llm", "--params", "7e9", "--tokens", "100e9", "--seq-len", "4096", "--global-batch", "1024",
                 "--gpu-type", "H100", "--gpu-count", "64")
        assert p.returncode == 0, p.stderr
        first = p.stdout.splitlines()[0]
        assert "90% PI" in first and "in bf16 (assumed)" in first
        assert "23,842 steps" in p.stdout and "6·N·seq = 1.72e+14" in p.stdout and "cost: $" in p.stdout
        assert "at lambda" in p.stdout

    def test_plan_llm_json(self):
        p = _cli("plan-llm", "--n-layers", "24", "--d-model", "2048", "--seq-len", "2048", "--steps", "10",
                 "--global-batch", "128", "--gpu-type", "L4", "--gpu-count", "8", "--json")
        d = json.loads(p.stdout)
        assert d["memory"]["fits"] is False and d["cost"]["provider"] == "gcp"

    def test_plan_llm_hf_config_and_network(self, tmp_path):
        cfg = tmp_path / "config.json"
        cfg.write_text(json.dumps(LLAMA2_7B_HF))
        p = _cli("plan-llm", "--hf-config", str(cfg), "--seq-len", "4096", "--steps", "10", "--global-batch", "1024",
                 "--gpu-type", "H100", "--nodes", "8", "--gpus-per-node", "8", "--precision", "bf16",
                 "--inter-node-gbps", "12.5", "--json")
        assert p.returncode == 0, p.stderr
        d = json.loads(p.stdout)
        assert d["params"] == 6_738_415_616 and d["hf_config"]["n_layers"] == 32
        c = d["communication"]
        assert c["inter_node_gb_per_s"] == 12.5 and c["dp_added_s_per_step"] > 0
        t = _cli("plan-llm", "--hf-config", str(tmp_path), "--seq-len", "4096", "--steps", "10", "--global-batch",
                 "1024", "--gpu-type", "H100", "--nodes", "8", "--gpus-per-node", "8")
        assert t.returncode == 0 and "HF config (llama)" in t.stdout and "communication: " in t.stdout

    @pytest.mark.parametrize("config, match", [
        (None, "no such file.*nothing is downloaded"),
        ({"model_type": "llama", "hidden_size": 64}, "no layer count: the config has no 'num_hidden_layers'"),
        ("{oops", "not valid JSON"),
    ])
    def test_plan_llm_bad_hf_config_is_one_line(self, tmp_path, config, match):
        path = tmp_path / "config.json"
        if config is not None:
            path.write_text(config if isinstance(config, str) else json.dumps(config))
        p = _cli("plan-llm", "--hf-config", str(path), "--seq-len", "4096", "--steps", "10", "--global-batch", "64",
                 "--gpu-type", "H100", "--gpu-count", "8")
        assert p.returncode == 2 and "Traceback" not in p.stderr
        err = [ln for ln in p.stderr.splitlines() if ln.startswith("perfmodel: error:")]
        assert len(err) == 1 and __import__("re").search(match, err[0]), p.stderr

    @pytest.mark.parametrize("args, match", [
        (["--params", "7e9", "--tokens", "1e9", "--seq-len", "4096", "--global-batch", "1000", "--gpu-type", "H100",
          "--gpu-count", "64"], "multiple of the data-parallel degree"),
        (["--params", "-1", "--tokens", "1e9", "--seq-len", "4096", "--global-batch", "64", "--gpu-type", "H100",
          "--gpu-count", "64"], "'params'"),
        (["--params", "7e9", "--tokens", "1e9", "--seq-len", "4096", "--global-batch", "64", "--gpu-type", "H100"],
         "needs the devices"),
        (["--params", "7e9", "--seq-len", "4096", "--global-batch", "64", "--gpu-type", "H100", "--gpu-count", "8"],
         "one of the arguments --tokens --samples --steps is required"),
        (["--params", "7e9", "--tokens", "1e9", "--seq-len", "4096", "--global-batch", "64", "--gpu-type", "H999",
          "--gpu-count", "8"], "H999"),
        (["--params", "7e9", "--tokens", "1e9", "--seq-len", "4096", "--global-batch", "64", "--gpu-type", "MI300X",
          "--nodes", "2", "--gpus-per-node", "8", "--tensor-parallel", "16"],
         "spans nodes.*no inter-node bandwidth.*inter_node_gbps"),
        (["--params", "7e9", "--tokens", "1e9", "--seq-len", "4096", "--global-batch", "64", "--gpu-type", "H100",
          "--gpu-count", "8", "--inter-node-gbps", "0"], "'inter_node_gbps'"),
    ])
    def test_bad_input_is_one_line(self, args, match):
        p = _cli("plan-llm", *args)
        assert p.returncode == 2 and "Traceback" not in p.stderr
        err = [ln for ln in p.stderr.splitlines() if ln.startswith("perfmodel: error:")]
        assert len(err) == 1 and __import__("re").search(match, err[0]), p.stderr


def test_docs_page_quotes_what_the_example_prints():
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, str(root / "examples" / "plan_llm_job.py")], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    page = (root / "docs" / "guide" / "llm.md").read_text(encoding="utf-8")
    quoted = re.search(r"```text\n(.*?)\n```", page[page.index("## Example"):], re.S).group(1)
    assert quoted == p.stdout.rstrip(), "docs/guide/llm.md is stale: paste the output of examples/plan_llm_job.py"
