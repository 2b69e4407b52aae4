"""Bring-your-own factories, Hugging Face models from a config, precision, gradient accumulation, optimizer."""

import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from perfmodel.io import load_runs, read_raw_history  # noqa: E402
from perfmodel.measure import RunConfig, run_sweep  # noqa: E402
from perfmodel.measure._worker import measure_config  # noqa: E402
from perfmodel.measure.sweep import done_keys  # noqa: E402
from perfmodel.measure.workload import check_model_spec, factory_spec, resolve_workload  # noqa: E402
from perfmodel.schema import COLUMNS  # noqa: E402

BYO_DIR = Path(__file__).parent / "_byo"
BYO_FILE = str(BYO_DIR / "byo_factories.py")
TINY = dict(steps=3, warmup_steps=1)
TINY_GPT2 = "hf:gpt2?n_layer=1&n_embd=32&n_head=2&vocab_size=128&n_positions=32"


@pytest.fixture
def byo_on_path(monkeypatch):
    """The test factories importable as the module ``byo_factories`` here and in worker processes."""
    monkeypatch.syspath_prepend(str(BYO_DIR))
    monkeypatch.setenv("PYTHONPATH", str(BYO_DIR) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    import byo_factories

    return byo_factories


def _in_process(model, **fields):
    cfg = RunConfig(model, fields.pop("batch_size", 4), **{**TINY, **fields})
    import time
    from dataclasses import asdict

    return measure_config({**asdict(cfg), "launched_at": time.time()}, device=torch.device("cpu"))


class TestSpecs:
    def test_forms(self):
        assert check_model_spec("gpt-124m") == "gpt-124m"
        assert check_model_spec("pkg.mod:make") == "pkg.mod:make"
        with pytest.raises(ValueError, match="Unknown zoo model 'gpt-xxl'"):
            check_model_spec("gpt-xxl")
        with pytest.raises(ValueError, match="pkg.module:function"):
            check_model_spec("pkg.mod:")
        with pytest.raises(ValueError, match="would need a download"):
            RunConfig("hf:meta-llama/Llama-3-8B", 2)
        with pytest.raises(ValueError, match="key=value"):
            RunConfig("hf:llama?hidden_size", 2)
        with pytest.raises(ValueError, match="optimizer"):
            RunConfig("mlp-xs", 2, optimizer="lion")
        with pytest.raises(ValueError, match="grad_accum"):
            RunConfig("mlp-xs", 2, grad_accum=0)
        with pytest.raises(ValueError, match="not supported on CPU"):
            RunConfig("mlp-xs", 2, precision="fp16")
        with pytest.raises(ValueError, match="'fp8' cannot be measured"):
            RunConfig("mlp-xs", 2, precision="fp8", device="cuda")

    def test_factory_spec_of_callables(self, byo_on_path):
        assert factory_spec(byo_on_path.mlp) == "byo_factories:mlp"
        with pytest.raises(TypeError, match="not importable by name"):
            factory_spec(lambda: None)
        assert RunConfig(byo_on_path.mlp, 2).model == "byo_factories:mlp"

    def test_contract_errors(self):
        with pytest.raises(TypeError, match=r"must return \(module, make_batch\)"):
            resolve_workload(f"{BYO_FILE}:wrong_shape")
        wl = resolve_workload(f"{BYO_FILE}:bad_batch")
        with pytest.raises(TypeError, match="tensor or a tuple of tensors"):
            wl.make_inputs(2, "cpu")
        with pytest.raises(FileNotFoundError):
            resolve_workload("no/such/file.py:f")

    def test_schema_has_the_job_columns(self):
        kinds = {c.name: c.kind for c in COLUMNS}
        assert kinds["grad_accum"] == "int" and kinds["optimizer"] == "str" and kinds["compiled"] == "int"
        assert kinds["activation_checkpointing"] == "int" and kinds["seq_len"] == "int"
        assert kinds["model_source"] == "str" and kinds["launcher"] == "str" and kinds["job_id"] == "str"


class TestInProcess:
    def test_grad_accum_runs_k_micro_batches_per_step(self):
        rec = _in_process(f"{BYO_FILE}:probe", grad_accum=3)
        calls = sys.modules["perfmodel_user_byo_factories"].CALLS
        # one FLOP-count forward, then (1 first + 1 warm-up + 3 timed) optimizer steps of 3 micro-batches
        assert calls["forward"] == 1 + (1 + 1 + 3) * 3
        assert rec["grad_accum"] == 3 and rec["steps_timed"] == 3
        assert rec["samples_per_s"] == pytest.approx(4 * 3 / rec["step_time_s"])
        assert rec["flops_per_sample"] == 2 * 16 * 16 * 2  # forward + weight grads (no input grad)

    def test_bf16_autocast_on_cpu(self):
        calls = sys.modules.get("perfmodel_user_byo_factories")
        if calls is not None:
            calls.CALLS.update(forward=0, autocast=[], dtype=[])
        rec = _in_process(f"{BYO_FILE}:probe", precision="bf16")
        calls = sys.modules["perfmodel_user_byo_factories"].CALLS
        assert rec["precision"] == "bf16" and "bf16 autocast" in rec["protocol"]
        assert calls["autocast"][0] is False  # the FLOP count runs in fp32
        assert all(calls["autocast"][1:]) and all(d == torch.bfloat16 for d in calls["dtype"][1:])

    def test_fp32_is_not_autocast(self):
        rec = _in_process("mlp-xs")
        assert rec["precision"] == "fp32" and "autocast" not in rec["protocol"]

    def test_sgd_and_tuple_inputs_with_loss(self):
        rec = _in_process(f"{BYO_FILE}:two_inputs_with_loss", optimizer="sgd")
        assert rec["optimizer"] == "sgd" and rec["protocol"].startswith("SGD step")
        assert rec["params"] == 16 * 32 + 32 + 8 * 32 + 32 + 32 * 4 + 4

    def test_flops_the_counter_cannot_see_are_left_empty(self):
        rec = _in_process(f"{BYO_FILE}:no_flops")
        assert rec["flops_per_sample"] is None and rec["flops_method"] == "none" and rec["params"] == 16

    def test_activation_checkpointing_where_supported(self):
        assert _in_process("gpt-s", activation_checkpointing=True)["activation_checkpointing"] == 1
        assert _in_process(f"{BYO_FILE}:mlp", activation_checkpointing=True)["activation_checkpointing"] == 0


class TestByoSweep:
    @pytest.mark.slow
    def test_factory_end_to_end_with_failures_recorded(self, tmp_path, byo_on_path):
        out = tmp_path / "runs.csv"
        models = [byo_on_path.mlp, "byo_factories:raises", "no_such_module:factory", "byo_factories:wrong_shape"]
        done = run_sweep(models=models, output=out, batch_sizes=[4], progress=False, **TINY)
        assert list(done["status"]) == ["ok", "error", "error", "error"]
        runs = read_raw_history(out)
        ok = runs.iloc[0]
        assert ok["model"] == "byo_factories:mlp" and ok["model_source"] == "factory"
        assert ok["params"] == 16 * 32 + 32 + 32 * 4 + 4
        fwd = 2 * (16 * 32 + 32 * 4)
        assert ok["flops_per_sample"] == fwd + 2 * 16 * 32 + 2 * 2 * 32 * 4 and ok["flops_method"] == "flop_counter"
        assert runs.loc[1, "error"] == "RuntimeError: factory exploded"
        assert runs.loc[2, "error"].startswith("ModuleNotFoundError: No module named 'no_such_module'")
        assert "must return (module, make_batch)" in runs.loc[3, "error"]
        assert len(load_runs(out)) == 1

    def test_name_and_resume_keys(self, tmp_path, byo_on_path):
        out = tmp_path / "runs.parquet"
        run_sweep(models=["byo_factories:mlp"], output=out, batch_sizes=[2], grad_accum=2, name="my-net",
                  progress=False, **TINY)
        runs = read_raw_history(out)
        assert runs.loc[0, "model"] == "my-net" and runs.loc[0, "grad_accum"] == 2
        again = run_sweep(models=["byo_factories:mlp"], output=out, batch_sizes=[2], grad_accum=2, name="my-net",
                          progress=False, **TINY)
        assert len(again) == 0
        assert RunConfig("byo_factories:mlp", 2, grad_accum=1, name="my-net").key("cpu") not in done_keys(out, False)
        with pytest.raises(ValueError, match="names one model"):
            run_sweep(models=["mlp-xs", "gpt-s"], output=out, name="x")

    def test_old_history_resumes(self, tmp_path):
        out = tmp_path / "old.csv"
        # a record written before the job columns existed: AdamW, no accumulation, zoo length 32
        from perfmodel.io import append_runs

        append_runs({"model": "gpt-s", "params": 10, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu",
                     "precision": "fp32", "repeat": 0, "step_time_s": 0.1}, out)
        assert RunConfig("gpt-s", 8).key("cpu") in done_keys(out, False)


class TestHuggingFace:
    @pytest.mark.slow
    def test_tiny_config_end_to_end(self, tmp_path):
        pytest.importorskip("transformers")
        out = tmp_path / "runs.csv"
        done = run_sweep(models=[TINY_GPT2, "hf:lama"], output=out, batch_sizes=[2], seq_len=16,
                         progress=False, **TINY)
        assert list(done["status"]) == ["ok", "error"]
        rec = read_raw_history(out).iloc[0]
        assert rec["model"] == TINY_GPT2 and rec["model_source"] == "hf" and rec["family"] == "decoder"
        assert rec["seq_len"] == 16 and rec["flops_per_sample"] > 0
        assert "Did you mean llama" in read_raw_history(out).loc[1, "error"]

    def test_local_config_json_and_heads(self, tmp_path):
        transformers = pytest.importorskip("transformers")
        path = tmp_path / "config.json"
        transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                vocab_size=100, max_position_embeddings=32).to_json_file(str(path))
        wl = resolve_workload(f"hf:{path}", seq_len=8)
        assert type(wl.module).__name__ == "BertForMaskedLM" and wl.family == "encoder"
        cls = resolve_workload(f"hf:{path}?head=classification", seq_len=8)
        assert type(cls.module).__name__ == "BertForSequenceClassification"
        rec = _in_process(f"hf:{path}", batch_size=2, seq_len=8)
        assert rec["seq_len"] == 8 and rec["model_source"] == "hf"
        with pytest.raises(ValueError, match="exceeds the model's 32 positions"):
            resolve_workload(f"hf:{path}", seq_len=64)
        with pytest.raises(ValueError, match="has no attribute"):
            resolve_workload("hf:bert?no_such_knob=3")


def test_tf32_switch_keeps_torch_precision_readable():
    """The TF32 switch must leave torch.get_float32_matmul_precision() working (torch.compile reads it)."""
    from perfmodel.measure._worker import _set_tf32

    try:
        _set_tf32(torch, True)
        assert torch.get_float32_matmul_precision() == "high" and torch.backends.cudnn.allow_tf32
        _set_tf32(torch, False)
        assert torch.get_float32_matmul_precision() == "highest" and not torch.backends.cudnn.allow_tf32
        assert torch.backends.cuda.matmul.allow_tf32 is False
    finally:
        torch.set_float32_matmul_precision("highest")
        torch.backends.cudnn.allow_tf32 = True  # torch's default


def test_grad_accum_multiplies_the_work_of_a_step():
    """features: an optimizer step of k micro-batches does k times the FLOPs; its all-reduce is unchanged."""
    import pandas as pd

    from perfmodel.features import run_quantities

    runs = pd.DataFrame({"params": [1e6, 1e6], "batch_size": [8, 8], "gpu_count": [2, 2], "gpu_type": ["cpu", "cpu"],
                         "flops_per_sample": [1e9, 1e9], "grad_accum": [1, 4]})
    q = run_quantities(runs)
    assert q["flops_per_step_device"].tolist() == [8e9, 32e9] and q["global_batch"].tolist() == [16, 64]
    assert q["allreduce_bytes"].iloc[0] == q["allreduce_bytes"].iloc[1]
