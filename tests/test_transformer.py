"""perfmodel.transformer: shapes, parameter counts and FLOPs against closed forms and published counts."""

from __future__ import annotations

import pytest

from perfmodel.transformer import TransformerShape, standard_shape, transformer_flops

LLAMA2_7B = TransformerShape(n_layers=32, d_model=4096, n_heads=32, vocab=32000, ffn_hidden=11008, gated_mlp=True,
                             tied_embeddings=False)
LLAMA3_70B = TransformerShape(n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, ffn_hidden=28672, vocab=128256,
                              gated_mlp=True, tied_embeddings=False)
# DeepSeek-V3's routed experts: 256 of width 2048, 8 per token, one shared, 3 leading dense layers (its config)
DEEPSEEK_LIKE = TransformerShape(n_layers=61, d_model=7168, n_heads=128, vocab=129280, ffn_hidden=18432,
                                 gated_mlp=True, tied_embeddings=False, n_experts=256, experts_per_token=8,
                                 moe_ffn_hidden=2048, n_shared_experts=1, n_dense_layers=3)


class TestCounts:
    def test_llama2_7b(self):
        per_layer = 4 * 4096**2 + 3 * 4096 * 11008
        assert LLAMA2_7B.params() == 32 * per_layer + 2 * 32000 * 4096
        # the published 6,738,415,616 adds 2 RMSNorms per layer and a final one
        assert LLAMA2_7B.params() + 32 * 2 * 4096 + 4096 == 6_738_415_616
        assert LLAMA2_7B.matmul_params() == 32 * per_layer + 32000 * 4096  # the input embedding is a lookup

    def test_grouped_query_attention(self):
        # Q and O are 8192 wide, K and V 8 heads of 128: d·hd·(2h + 2kv)
        assert LLAMA3_70B.attention_params() == 8192 * 128 * (2 * 64 + 2 * 8)
        assert round(LLAMA3_70B.params() / 1e9, 1) == 70.6  # Llama 3 70B's card: 70.6B

    def test_mixture_of_experts(self):
        s = DEEPSEEK_LIKE
        expert = 3 * 7168 * 2048
        moe_layers = 61 - 3
        assert s.moe_layers == moe_layers and s.is_moe
        assert s.params() - s.active_params() == moe_layers * (256 - 8) * expert
        # DeepSeek-V3: 671B total, 37B active (its attention is latent; counted here as plain attention)
        assert 600e9 < s.params() < 720e9 and 30e9 < s.active_params() < 45e9

    @pytest.mark.parametrize("kwargs, match", [
        ({"n_heads": 30}, "not a multiple of n_heads"),
        ({"n_kv_heads": 5}, "must divide n_heads"),
        ({"n_experts": 8}, "needs experts_per_token"),
        ({"n_experts": 8, "experts_per_token": 9}, "exceeds n_experts"),
        ({"experts_per_token": 2}, "give n_experts too"),
        ({"n_layers": 0}, "'n_layers'.*positive"),
        ({"gated_mlp": 1}, "'gated_mlp'.*bool"),
    ])
    def test_bad_shapes_name_the_problem(self, kwargs, match):
        with pytest.raises((ValueError, TypeError), match=match):
            TransformerShape(**{"n_layers": 2, "d_model": 64, "n_heads": 4, **kwargs})


class TestFlops:
    def test_dense_closed_form(self):
        s = TransformerShape(n_layers=32, d_model=4096, n_heads=32)  # N = 12·L·d²
        f = transformer_flops(s, 4096)
        assert f.dense == 6 * 12 * 32 * 4096**2 * 4096
        assert f.attention == 12 * 32 * 4096 * 4096**2
        assert f.model == f.hardware and f.recompute == 0

    def test_recomputation(self):
        s = TransformerShape(n_layers=4, d_model=256, n_heads=4)
        base = transformer_flops(s, 512)
        full = transformer_flops(s, 512, recompute="full")
        sel = transformer_flops(s, 512, recompute="selective")
        assert full.hardware == pytest.approx(base.model * 4 / 3)  # one more forward pass
        assert sel.recompute == pytest.approx(base.attention / 3)  # the attention core's forward
        assert full.model == base.model  # model FLOPs leave recomputation out

    def test_frozen_weights_and_given_size(self):
        s = TransformerShape(n_layers=2, d_model=64, n_heads=4)
        assert transformer_flops(s, 8, frozen_weights=True).dense == 4 * s.matmul_params() * 8
        assert transformer_flops(None, 8, matmul_params=1e6).model == 6e6 * 8  # no shape: no attention term
        with pytest.raises(ValueError, match="needs a shape, or matmul_params"):
            transformer_flops(None, 8)

    def test_experts_count_what_a_token_visits(self):
        s = DEEPSEEK_LIKE
        assert transformer_flops(s, 4096).dense == 6 * s.matmul_params() * 4096
        assert s.matmul_params() == s.layer_params(active=True) + s.vocab * s.d_model


class TestStandardShape:
    @pytest.mark.parametrize("size", [1.3e9, 7e9, 70e9, 175e9, 405e9])
    def test_size_kept_and_heads_divide_over_tp(self, size):
        s = standard_shape(size)
        assert abs(s.params() / size - 1) < 0.03
        assert s.n_heads % 4 == 0 and s.d_model % 128 == 0 and s.gated_mlp
        assert 64 <= s.d_model / s.n_layers <= 200  # the aspect ratio of published decoders

    def test_gpt3_size_gets_gpt3_width(self):
        s = standard_shape(175e9)
        assert (s.d_model, s.n_layers) == (12288, 96)  # GPT-3 175B: d = 12288, 96 layers
