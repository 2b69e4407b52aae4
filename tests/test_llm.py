"""Job-shaped LLM queries (perfmodel.plan.plan_llm_job) and the memory estimate (perfmodel.plan.estimate_memory):
closed-form checks of parameters, FLOPs, steps and bytes on known configurations, and the CLI's plan-llm."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import perfmodel
from perfmodel.exceptions import DoesNotFitError
from perfmodel.plan import decoder_flops_per_sample, decoder_params, estimate_memory, plan_llm_job, recommend
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
        # Megatron-LM's accounting: 16-bit weights, fp32 gradient buffers, fp32 master + Adam moments
        m = estimate_memory(params=1e9, precision="bf16")
        assert (m.weights_bytes, m.gradients_bytes, m.optimizer_bytes) == (2e9, 4e9, 12e9)
        m = estimate_memory(params=1e9, precision="fp32", optimizer="sgd")
        assert (m.weights_bytes, m.gradients_bytes, m.optimizer_bytes) == (4e9, 4e9, 4e9)
        assert m.activations_bytes is None and m.lower_bound

    @pytest.mark.parametrize("stage, expected", [(0, (2, 4, 12)), (1, (2, 4, 1.5)), (2, (2, 0.5, 1.5)),
                                                 (3, (0.5, 0.5, 1.0))])  # FSDP: fp32 weights, no separate master
    def test_zero_stages_divide_by_dp(self, stage, expected):
        m = estimate_memory(params=1e9, precision="bf16", zero_stage=stage, data_parallel=8)
        assert (m.weights_bytes / 1e9, m.gradients_bytes / 1e9, m.optimizer_bytes / 1e9) == expected

    def test_context_parallel_ranks_share_the_sharding(self):
        # Megatron's distributed optimizer shards over dp x cp
        m = estimate_memory(params=1e9, precision="bf16", zero_stage=1, data_parallel=4, context_parallel=2)
        assert m.optimizer_bytes == pytest.approx(12e9 / 8)

    def test_tp_pp_divide_model_state(self):
        m = estimate_memory(params=8e9, precision="bf16", tensor_parallel=2, pipeline_parallel=4)
        assert m.weights_bytes + m.gradients_bytes + m.optimizer_bytes == 18e9

    def test_activations_korthikanti(self):
        # multi-head attention, a plain 4d MLP: Korthikanti et al.'s 34·s·b·h (+ 5·a·s²·b without flash kernels)
        s, b, h, a, L = 2048, 4, 2048, 16, 24
        kw = dict(params=1e9, micro_batch=b, seq_len=s, n_layers=L, d_model=h, n_heads=a, overhead_bytes=0)
        m = estimate_memory(**kw, flash_attention=False)
        assert m.activations_bytes == pytest.approx(L * s * b * h * (34 + 5 * a * s / h))
        ck = estimate_memory(**kw, flash_attention=False, activation_checkpointing=True)
        assert ck.activations_bytes == pytest.approx(L * 2 * s * b * h + s * b * h * 34)  # selective inside
        fa = estimate_memory(**kw)  # FlashAttention-style kernels are the default
        assert fa.activations_bytes == pytest.approx(L * s * b * h * 34)
        tp = estimate_memory(**kw, flash_attention=False, tensor_parallel=4, sequence_parallel=False)
        assert tp.activations_bytes == pytest.approx(L * s * b * h * (10 + 24 / 4 + 5 * a * s / (h * 4)))
        sp = estimate_memory(**kw, tensor_parallel=4)  # sequence parallelism (on with tp) splits the 10 too
        assert sp.sequence_parallel and sp.activations_bytes == pytest.approx(L * s * b * h * 34 / 4)

    def test_pipeline_holds_micro_batches_in_flight(self):
        s, b, h, L = 2048, 1, 2048, 24
        kw = dict(params=1e9, micro_batch=b, seq_len=s, n_layers=L, d_model=h, overhead_bytes=0)
        one = estimate_memory(**kw).activations_bytes
        # 1F1B: the first of 4 stages holds 4 micro-batches of its 6 layers: as much as all 24 layers of one
        pp = estimate_memory(**kw, pipeline_parallel=4, global_batch=64)
        assert pp.in_flight == 4 and pp.activations_bytes == pytest.approx(one)
        # fewer micro-batches than stages: only those are in flight
        few = estimate_memory(**kw, pipeline_parallel=4, global_batch=2)
        assert few.in_flight == 2 and few.activations_bytes == pytest.approx(one / 2)
        # interleaved: (1 + (pp−1)/(pp·vp)) more
        vp = estimate_memory(**kw, pipeline_parallel=4, virtual_stages=2, global_batch=64)
        assert vp.activations_bytes == pytest.approx(one * (1 + 3 / 8))

    def test_1p3b_adamw_on_l4_does_not_fit(self):
        m = estimate_memory(params=1.3e9, gpu_type="L4", precision="fp16", micro_batch=16, seq_len=2048,
                            n_layers=24, d_model=2048)
        assert m.weights_bytes + m.gradients_bytes + m.optimizer_bytes == pytest.approx(18 * 24 * 12 * 2048**2)
        assert m.device_bytes == 24e9 and m.fits is False
        assert "does NOT fit" in str(m) and "of 24 GB" in m.short()

    def test_a_lower_bound_never_reads_fits(self):
        # 1.3B with AdamW on a 24 GB card, no sequence length: the model state alone (23.4 GB + 2 GB) does not fit
        assert estimate_memory(params=1.3e9, gpu_type="L4", precision="fp16").fits is False
        small = estimate_memory(params=1e8, gpu_type="L4", precision="fp16")
        assert small.lower_bound and small.fits is None and "unknown" in small.short()

    def test_a_size_alone_gets_the_standard_shape(self):
        m = estimate_memory(params=7e9, seq_len=4096, gpu_type="H100", precision="bf16")
        assert m.activations_bytes and "standard shape of a 7e+09-parameter decoder" in m.notes[0]

    def test_device_without_memory_figure(self):
        assert estimate_memory(params=1e6, gpu_type="cpu").fits is None

    @pytest.mark.parametrize("kwargs, err, match", [
        ({"params": 0}, ValueError, "'params'"),
        ({"params": 1e9, "zero_stage": 4}, ValueError, "'zero_stage'.*0, 1, 2 or 3"),
        ({"params": 1e9, "precision": "fp33"}, ValueError, "'precision'"),
        ({"params": 1e9, "optimizer": "lion"}, ValueError, "'optimizer'"),
        ({"params": 1e9, "micro_batch": 0}, ValueError, "'micro_batch'"),
        ({"params": 1e9, "recompute": "most"}, ValueError, "'recompute'"),
        ({}, ValueError, "needs the model"),
        ({"params": 1e9, "activation_checkpointing": "yes"}, TypeError, "activation_checkpointing"),
    ])
    def test_bad_input(self, kwargs, err, match):
        with pytest.raises(err, match=match):
            estimate_memory(**kwargs)


@pytest.fixture(scope="module")
def llama_job():
    with pytest.warns(Warning, match="precision not given|bundled"):
        return plan_llm_job(**LLAMA2_7B, seq_len=4096, tokens=100e9, global_batch=1024, gpu_type="H100",
                            nodes=8, gpus_per_node=8, tensor_parallel=2, micro_batch=2)


class TestPlanLLMJob:
    def test_derivation(self, llama_job):
        j = llama_job
        assert j.params == 12 * 32 * 4096**2 + 32000 * 4096 == j.shape.params()
        matmul = 12 * 32 * 4096**2 + 32000 * 4096  # tied: the head multiplies, the input embedding looks up
        assert j.flops_per_sample == 6 * matmul * 4096 + 12 * 32 * 4096 * 4096**2 == j.flops.model
        assert j.steps == -(-100_000_000_000 // (1024 * 4096)) == 23_842
        assert (j.devices, j.tensor_parallel, j.data_parallel, j.micro_batch, j.accumulation) == (64, 2, 32, 2, 16)
        assert j.layout.sequence_parallel and j.layout.zero_stage == 1 and j.batch_size_per_device == 16
        q = j.prediction.query
        assert (q["tp"], q["dp"], q["micro_batch_size"], q["global_batch_size"], q["seq_len"]) == (2, 32, 2, 1024,
                                                                                                   4096)
        assert j.prediction.method == "layout" and j.prediction.steps == j.steps
        assert (j.seconds, j.lower, j.upper) == (j.prediction.seconds, j.prediction.lower, j.prediction.upper)
        assert j.breakdown["total"] == pytest.approx(j.prediction.step_seconds)

    def test_one_answer_per_job(self, llama_job):
        # the same job through predict_training_time: the same prediction
        j = llama_job
        r = perfmodel.predict_training_time({"shape": j.shape, "params": j.params, "name": "llm"}, seq_len=4096,
                                            global_batch=1024, gpu_count=64, gpu_type="H100", steps=j.steps,
                                            precision=j.precision, layout=j.layout, gpus_per_node=8)
        assert (r.seconds, r.lower, r.upper) == (j.seconds, j.lower, j.upper)
        out = recommend({**LLAMA2_7B}, seq_len=4096, batch_size=1024, steps=j.steps, gpu_types=["H100"],
                        gpu_counts=[64], precision=j.precision, gpus_per_node=8,
                        layout={"tensor_parallel": 2, "micro_batch": 2})
        assert out["seconds"].iloc[0] == j.seconds and out["layout"].iloc[0] == j.layout.describe()

    def test_precision_memory_and_text(self, llama_job):
        j = llama_job
        assert j.precision_assumed and j.fits is True
        text = str(j)
        assert "(assumed)" in text and "6·N_a·seq + 12·L·h·hd·seq²" in text and "tp 2 × dp 32" in text
        assert "step: pipeline" in text and "per micro-batch gemm" in text
        d = json.loads(json.dumps(j.to_dict(), allow_nan=False))
        assert d["memory"]["fits"] is True and d["steps"] == 23_842 and d["layout"]["tp"] == 2
        assert d["shape"]["n_layers"] == 32 and d["prediction"]["seconds"] > 0

    def test_a_plan_that_does_not_fit_is_refused_with_one_that_does(self):
        with pytest.raises(DoesNotFitError, match=r"does not fit in memory.*The fastest layout that fits: .*"
                                                  r"search=True plans it.*allow_no_fit=True") as info:
            plan_llm_job(**LLAMA2_7B, seq_len=4096, steps=10, global_batch=1024, gpu_type="H100", gpu_count=64,
                         micro_batch=16, precision="bf16")
        assert info.value.memory.fits is False and info.value.suggestion
        j = plan_llm_job(**LLAMA2_7B, seq_len=4096, steps=10, global_batch=1024, gpu_type="H100", gpu_count=64,
                         micro_batch=16, precision="bf16", allow_no_fit=True)
        assert j.fits is False and any("allow_no_fit" in n for n in j.notes)

    def test_search_plans_the_fastest_layout_that_fits(self):
        j = plan_llm_job(**LLAMA2_7B, seq_len=4096, steps=10, global_batch=512, gpu_type="H100", gpu_count=16,
                         precision="bf16", search=True)
        table = j.layouts
        assert len(table) > 20 and table["fits"].all() and table["step_time_s"].is_monotonic_increasing
        assert table["layout"].iloc[0] == j.layout.describe() and j.fits
        assert table["step_time_s"].iloc[0] == pytest.approx(j.prediction.step_seconds)
        assert "layouts searched" in str(j) and "fastest of" in j.notes[-1]
        # how close to the fastest a layout may be before the model cannot tell them apart (the layout book)
        from perfmodel.models import layout_tie_factor

        tie = layout_tie_factor(0.9)
        assert tie is not None and tie > 1.0
        assert table["vs_fastest"].iloc[0] == 1.0 and (table["vs_fastest"] >= 1.0).all()
        assert list(table["told_apart"]) == [bool(v > tie) for v in table["vs_fastest"]]
        tied = int((table["vs_fastest"] <= tie).sum())
        assert (f"{tied} layouts within x" in str(j)) == (tied > 1)

    def test_size_alone_gets_a_standard_shape(self):
        j = plan_llm_job(params=7e9, seq_len=4096, steps=10, global_batch=512, gpu_type="H100", gpu_count=16,
                         precision="bf16", zero_stage=3)
        assert j.shape.d_model == 4096 and j.memory.activations_bytes > 0 and not j.memory.lower_bound
        assert any("standard shape" in n for n in j.notes)

    def test_mixture_of_experts_from_a_config(self):
        cfg = {"model_type": "mixtral", "num_hidden_layers": 8, "hidden_size": 1024, "intermediate_size": 2048,
               "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 32000,
               "num_local_experts": 8, "num_experts_per_tok": 2, "rms_norm_eps": 1e-5}
        j = plan_llm_job(hf_config=cfg, seq_len=2048, steps=10, global_batch=64, gpu_type="H100", gpu_count=8,
                         expert_parallel=8, precision="bf16")
        assert j.shape.is_moe and j.layout.ep == 8 and j.prediction.query["n_experts"] == 8
        assert j.flops_per_sample == pytest.approx(6 * j.shape.matmul_params() * 2048 + 12 * 8 * 1024 * 2048**2)

    @pytest.mark.parametrize("kwargs, match", [
        ({}, "needs the model"),
        ({"params": 1e9, "tokens": 1e9, "steps": 10}, "exactly one of 'tokens', 'samples' or 'steps'"),
        ({"params": 1e9, "tokens": 1e9, "global_batch": 1001},
         "global_batch 1001 is not a multiple of the data-parallel degree x micro_batch = 8 x 1"),
        ({"params": 1e9, "tokens": 1e9, "tensor_parallel": 3}, "8 devices do not divide into tensor_parallel"),
        ({"n_layers": 4, "d_model": 768, "n_heads": 6, "tokens": 1e9, "tensor_parallel": 4, "global_batch": 8},
         "6 attention heads do not divide over tensor_parallel 4"),
        ({"params": 1e9, "tokens": 1.5, "seq_len": 1}, "'tokens'.*whole number"),
        ({"params": 1e9, "tokens": 1e9, "nodes": 2}, "'nodes' and 'gpus_per_node' together"),
        ({"params": 1e9, "tokens": 1e9, "nodes": 2, "gpus_per_node": 2}, "not nodes x gpus_per_node"),
        ({"params": 1e9, "tokens": 1e9, "zero_stage": 5}, "'zero_stage'"),
        ({"params": 1e9, "tokens": 1e9, "precision": "int4"}, "'precision'"),
        ({"params": 1e9, "tokens": 1e9, "recompute": "most"}, "'recompute'"),
        ({"params": 1e9, "tokens": 1e9, "inter_node_gbps": -1}, "'inter_node_gbps'"),
    ])
    def test_bad_input(self, kwargs, match):
        base = {"seq_len": 2048, "global_batch": 64, "gpu_type": "H100", "gpu_count": 8}
        args = {**base, **kwargs}
        if not {"tokens", "samples", "steps"} & set(args):
            args["steps"] = 10
        with pytest.raises((ValueError, TypeError), match=match):
            plan_llm_job(**args)

    def test_published_layouts_are_not_refused(self):
        # Llama 3.1 405B on 16,384 H100: tp 8, pp 16, dp 128, global batch 2,048 (fewer sequences than devices)
        j = plan_llm_job(n_layers=126, d_model=16384, n_heads=128, n_kv_heads=8, ffn_hidden=53248, vocab=128256,
                         seq_len=8192, steps=10, global_batch=2048, gpu_type="H100", gpu_count=16384,
                         tensor_parallel=8, pipeline_parallel=16, precision="bf16", allow_no_fit=True)
        assert (j.data_parallel, j.accumulation, j.batch_size_per_device) == (128, 16, 0.125)


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
                precision="bf16", micro_batch=1)
    return plan_llm_job(**{**args, **kw})


class TestLayoutPhysicsInPlans:
    """What the layout model makes a plan do as its layout or cluster changes (directions, not fitted values)."""

    def test_a_slower_network_lengthens_a_multi_node_step(self):
        ref, slow = _job(zero_stage=3), _job(zero_stage=3, inter_node_gbps=1.0)
        assert slow.prediction.step_seconds > ref.prediction.step_seconds
        assert slow.breakdown["dp_exposed"] > ref.breakdown["dp_exposed"]
        one_node = _job(nodes=1, global_batch=128)
        assert one_node.prediction.query["gpus_per_node"] == 8

    def test_tensor_groups_across_nodes_cost_more_than_within(self):
        within = _job(tensor_parallel=8, global_batch=64)
        across = _job(tensor_parallel=16, global_batch=64, gpus_per_node=8)
        assert across.breakdown["layer_comm"] > within.breakdown["layer_comm"]

    def test_pipeline_bubble_shrinks_with_more_micro_batches(self):
        few = _job(pipeline_parallel=4, global_batch=64)
        many = _job(pipeline_parallel=4, global_batch=512)
        assert few.breakdown["bubble"] / few.breakdown["pipeline"] > many.breakdown["bubble"] / many.breakdown[
            "pipeline"]

    def test_fp8_is_faster_but_not_twice(self):
        bf16, fp8 = _job(), _job(precision="fp8")
        assert 1.0 < bf16.prediction.step_seconds / fp8.prediction.step_seconds < 2.0


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
        assert out["memory_lower_bound"].all() and out["fits_memory"].isna().all()  # never "fits" from a bound
        assert out["memory_gb"].iloc[0] == pytest.approx(1.3e9 * 18 / 1e9 + 2)

    def test_bad_memory_keys(self):
        with pytest.raises(ValueError, match="unknown keys"):
            recommend("gpt-s", batch_size=8, steps=10, gpu_types=["cpu"], gpu_counts=[1], memory={"seqlen": 1})

    def test_llm_recommend_searches_each_configuration(self):
        out = recommend({**LLAMA2_7B}, seq_len=4096, batch_size=512, steps=10, gpu_types=["H100", "A100"],
                        gpu_counts=[8, 16], precision="bf16")
        assert len(out) == 4 and out["fits_memory"].all() and out["layout"].str.contains("dp").all()
        with pytest.raises(ValueError, match="layout=, gpus_per_node= and inter_node_gbps= plan LLM jobs"):
            recommend({**LLAMA2_7B}, batch_size=512, steps=10, gpu_types=["H100"], layout={"tensor_parallel": 2})


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "perfmodel", *args], capture_output=True, text=True, timeout=600)


class TestCLI:
    def test_plan_llm(self):
        p = _cli("plan-llm", "--params", "7e9", "--tokens", "100e9", "--seq-len", "4096", "--global-batch", "1024",
                 "--gpu-type", "H100", "--gpu-count", "64", "--zero-stage", "3")
        assert p.returncode == 0, p.stderr
        first = p.stdout.splitlines()[0]
        assert "90% PI" in first and "(assumed)" in first and "layout, " in first
        assert "23,842 steps" in p.stdout and "standard shape" in p.stdout and "cost: $" in p.stdout
        assert "dp 64, micro-batch 1, FSDP/ZeRO-3" in p.stdout

    def test_plan_llm_json_and_verdicts(self):
        p = _cli("plan-llm", "--n-layers", "24", "--d-model", "2048", "--seq-len", "2048", "--steps", "10",
                 "--global-batch", "128", "--gpu-type", "L4", "--gpu-count", "8", "--allow-no-fit",
                 "--zero-stage", "0", "--micro-batch", "16", "--deadline-hours", "1000", "--budget", "1e9", "--json")
        assert p.returncode == 0, p.stderr
        d = json.loads(p.stdout)
        assert d["memory"]["fits"] is False and d["cost"]["provider"] == "gcp"
        assert d["meets_deadline"] is True and d["within_budget"] is True

    def test_plan_that_does_not_fit_exits_1_naming_the_flags(self):
        p = _cli("plan-llm", "--params", "70e9", "--steps", "10", "--seq-len", "4096", "--global-batch", "1024",
                 "--gpu-type", "H100", "--gpu-count", "64")
        assert p.returncode == 1 and "Traceback" not in p.stderr
        assert "does not fit in memory" in p.stderr and "--search-layouts plans it" in p.stderr
        assert "--allow-no-fit" in p.stderr

    def test_search_layouts_prints_the_ranking(self):
        p = _cli("plan-llm", "--params", "7e9", "--steps", "10", "--seq-len", "4096", "--global-batch", "256",
                 "--gpu-type", "H100", "--gpu-count", "16", "--search-layouts", "--precision", "bf16")
        assert p.returncode == 0, p.stderr
        assert "layouts searched:" in p.stdout and "fastest first" in p.stdout

    def test_plan_llm_hf_config_and_network(self, tmp_path):
        cfg = tmp_path / "config.json"
        cfg.write_text(json.dumps(LLAMA2_7B_HF))
        args = ["plan-llm", "--hf-config", str(cfg), "--seq-len", "4096", "--steps", "10", "--global-batch", "1024",
                "--gpu-type", "H100", "--nodes", "8", "--gpus-per-node", "8", "--precision", "bf16",
                "--zero-stage", "3", "--json"]
        fast, slow = _cli(*args), _cli(*args, "--inter-node-gbps", "1")
        assert fast.returncode == 0 and slow.returncode == 0, fast.stderr + slow.stderr
        d, e = json.loads(fast.stdout), json.loads(slow.stdout)
        assert d["params"] == 6_738_415_616 and d["hf_config"]["n_layers"] == 32
        assert e["prediction"]["query"]["inter_node_gbps"] == 1
        assert e["breakdown"]["dp_exposed"] > d["breakdown"]["dp_exposed"]
        t = _cli("plan-llm", "--hf-config", str(tmp_path), "--seq-len", "4096", "--steps", "10", "--global-batch",
                 "1024", "--gpu-type", "H100", "--nodes", "8", "--gpus-per-node", "8", "--zero-stage", "3")
        assert t.returncode == 0 and "HF config (llama)" in t.stdout and "step: pipeline" in t.stdout

    def test_recommend_plans_llm_jobs(self):
        p = _cli("recommend", "--seq-len", "4096", "--n-layers", "32", "--d-model", "4096", "--vocab", "32000",
                 "--batch-size", "512", "--steps", "100", "--gpu-types", "H100", "--gpu-counts", "16",
                 "--precision", "bf16", "--tensor-parallel", "2", "--json")
        assert p.returncode == 0, p.stderr
        row = json.loads(p.stdout)[0]
        assert row["layout"].startswith("tp 2 × dp 8")
        plan = _cli("plan-llm", "--seq-len", "4096", "--n-layers", "32", "--d-model", "4096", "--vocab", "32000",
                    "--global-batch", "512", "--steps", "100", "--gpu-type", "H100", "--gpu-count", "16",
                    "--precision", "bf16", "--tensor-parallel", "2", "--json")
        assert json.loads(plan.stdout)["seconds"] == pytest.approx(row["seconds"], rel=1e-12)

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
          "--gpu-count", "64"], "--global-batch 1000 is not a multiple of the data-parallel degree x --micro-batch"),
        (["--params", "7e9", "--tokens", "1e9", "--seq-len", "4096", "--global-batch", "64", "--gpu-type", "H100",
          "--gpu-count", "64", "--tensor-parallel", "3"], "do not divide into --tensor-parallel x --pipeline-parallel"),
        (["--params", "-1", "--tokens", "1e9", "--seq-len", "4096", "--global-batch", "64", "--gpu-type", "H100",
          "--gpu-count", "64"], "'params'"),
        (["--params", "7e9", "--tokens", "1e9", "--seq-len", "4096", "--global-batch", "64", "--gpu-type", "H100"],
         "needs the devices"),
        (["--params", "7e9", "--seq-len", "4096", "--global-batch", "64", "--gpu-type", "H100", "--gpu-count", "8"],
         "one of the arguments --tokens --samples --steps is required"),
        (["--params", "7e9", "--tokens", "1e9", "--seq-len", "4096", "--global-batch", "64", "--gpu-type", "H999",
          "--gpu-count", "8"], "H999"),
        (["--params", "7e9", "--tokens", "1e9", "--seq-len", "4096", "--global-batch", "64", "--gpu-type", "H100",
          "--gpu-count", "8", "--inter-node-gbps", "0"], "'inter_node_gbps'"),
        (["--params", "7e9", "--tokens", "1e9", "--seq-len", "4096", "--global-batch", "64", "--gpu-type", "H100",
          "--gpu-count", "8", "--deadline-hours", "-1"], "--deadline-hours must be a positive number"),
    ])
    def test_bad_input_is_one_line(self, args, match):
        p = _cli("plan-llm", *args)
        assert p.returncode == 2 and "Traceback" not in p.stderr
        err = [ln for ln in p.stderr.splitlines() if ln.startswith("perfmodel: error:")]
        assert len(err) == 1 and __import__("re").search(match, err[0]), p.stderr


@pytest.mark.slow
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
