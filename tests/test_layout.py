"""perfmodel.layout: the training frameworks' rules for a parallel layout, and the layouts of a job."""

from __future__ import annotations

import pandas as pd
import pytest

from perfmodel.exceptions import LayoutError
from perfmodel.layout import (
    ParallelLayout,
    check_layout,
    divisors,
    enumerate_layouts,
    is_layout_job,
    layout_problems,
)
from perfmodel.transformer import TransformerShape

LLAMA3_70B = TransformerShape(n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, ffn_hidden=28672, vocab=128256,
                              gated_mlp=True, tied_embeddings=False)
MOE = TransformerShape(n_layers=24, d_model=2048, n_heads=16, ffn_hidden=8192, n_experts=64, experts_per_token=4,
                       moe_ffn_hidden=1024, gated_mlp=True)


class TestRules:
    def test_valid_published_layouts(self):
        # Llama 3.1 405B on 16,384 H100 (Dubey et al. 2024, Table 4): tp 8, cp 1, pp 16, dp 128, global batch 2,048
        # sequences: fewer sequences than devices, a multiple of dp x micro-batch
        shape = TransformerShape(n_layers=126, d_model=16384, n_heads=128, n_kv_heads=8)
        lay = ParallelLayout(tp=8, pp=16, dp=128, vp=1, micro_batch=1)
        assert check_layout(lay, devices=16384, global_batch=2048, shape=shape, seq_len=8192) is lay
        # and its 126 layers on 16 x 8 virtual stages, the embedding and the loss counting as one each (Megatron-Bridge)
        assert not layout_problems(lay.with_(vp=8), devices=16384, global_batch=2048, shape=shape, seq_len=8192)
        # DeepSeek-V3's 61 layers on 16 pipeline stages: an uneven split, which Megatron-Bridge runs
        assert not layout_problems(ParallelLayout(pp=16, dp=16, ep=16), devices=256, global_batch=4096,
                                   shape=MOE.with_(n_layers=61, n_dense_layers=3), seq_len=4096)

    @pytest.mark.parametrize("layout, devices, batch, match", [
        (ParallelLayout(tp=8, dp=2), 32, 64, "= 16 is not the 32 devices"),
        (ParallelLayout(tp=8, dp=2, micro_batch=4), 16, 12, "12 is not a multiple of dp x micro_batch = 2 x 4"),
        (ParallelLayout(tp=3, dp=1), 3, 4, "64 attention heads do not divide over tp 3"),
        (ParallelLayout(pp=8, vp=16, dp=1), 8, 8, r"80 layers \(and the embedding and loss\) cannot fill pp x vp = 128"),
        (ParallelLayout(cp=3, dp=1), 3, 3, "not a multiple of 2 x cp = 6"),
        (ParallelLayout(dp=4, ep=2), 4, 4, "ep 2: the model has no experts"),
    ])
    def test_broken_rules_are_named(self, layout, devices, batch, match):
        with pytest.raises(LayoutError, match=match):
            check_layout(layout, devices=devices, global_batch=batch, shape=LLAMA3_70B, seq_len=8188)

    def test_expert_rules(self):
        assert "64 experts do not divide over ep 3" in " ".join(
            layout_problems(ParallelLayout(dp=6, ep=3), devices=6, global_batch=6, shape=MOE))
        assert "ep 16 does not divide the 8 devices" in " ".join(
            layout_problems(ParallelLayout(dp=8, ep=16), devices=8, global_batch=8, shape=MOE))

    def test_names_for_a_cli(self):
        with pytest.raises(LayoutError, match="--global-batch 6 is not a multiple of .* x --micro-batch"):
            check_layout(ParallelLayout(dp=4, micro_batch=1), devices=4, global_batch=6,
                         names={"global_batch": "--global-batch", "micro_batch": "--micro-batch"})

    @pytest.mark.parametrize("kwargs, match", [({"tp": 0}, "'tp'"), ({"zero_stage": 4}, "'zero_stage'"),
                                               ({"recompute": "some"}, "'recompute'"),
                                               ({"vp": 2}, "virtual stages need pipeline parallelism"),
                                               ({"sequence_parallel": 1}, "'sequence_parallel'.*bool")])
    def test_bad_fields(self, kwargs, match):
        with pytest.raises((ValueError, TypeError), match=match):
            ParallelLayout(**kwargs)


class TestEnumerate:
    def test_every_layout_is_valid_and_devices_add_up(self):
        layouts = list(enumerate_layouts(devices=64, global_batch=256, shape=LLAMA3_70B, seq_len=8192,
                                         recompute=("none",), zero_stages=(1,)))
        assert layouts and len(set(layouts)) == len(layouts)
        for lay in layouts:
            assert lay.devices == 64 and not layout_problems(lay, devices=64, global_batch=256, shape=LLAMA3_70B,
                                                              seq_len=8192)
            assert lay.tp <= 8 and (lay.tp == 1) != lay.sequence_parallel
        # the familiar ones are among them
        assert ParallelLayout(tp=8, pp=8, dp=1, micro_batch=1, zero_stage=1, sequence_parallel=True) in layouts
        assert ParallelLayout(tp=4, pp=2, dp=8, micro_batch=2, zero_stage=1, sequence_parallel=True) in layouts

    def test_experts_are_split_among_a_stage(self):
        layouts = list(enumerate_layouts(devices=16, global_batch=64, shape=MOE, seq_len=4096, recompute=("none",),
                                         zero_stages=(1,), micro_batches=(1,)))
        assert {lay.ep for lay in layouts} >= {1, 2, 4, 8, 16}
        assert all(lay.stage_devices % lay.ep == 0 for lay in layouts)

    def test_divisors(self):
        assert divisors(1) == [1] and divisors(36) == [1, 2, 3, 4, 6, 9, 12, 18, 36]


def test_is_layout_job():
    runs = pd.DataFrame({"seq_len": [2048, None, 2048, 2048], "family": ["decoder", "decoder", "cnn", None],
                         "n_layers": [None, 2, None, 4], "d_model": [None, 64, None, 64]})
    assert is_layout_job(runs).tolist() == [True, False, False, True]
