"""The bridges with the real libraries: a tiny GPT-2 trained by transformers.Trainer with perfmodel's callback and
the Trainer's own MLflow logging (SQLite store), imported back from MLflow and from its output dir; a Lightning
Trainer with perfmodel's callback; predictions logged to MLflow. Skipped only where a library is absent."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import perfmodel
from perfmodel.io import read_raw_history

ROOT = Path(__file__).resolve().parents[1]
SEQ = 16
CONFIG = dict(n_layer=2, n_head=2, n_embd=32, vocab_size=128, n_positions=32)


def _gpt2_params(c=CONFIG) -> int:
    """GPT-2's parameter count by hand (tied output embedding)."""
    d, L, V, P = c["n_embd"], c["n_layer"], c["vocab_size"], c["n_positions"]
    return V * d + P * d + L * (2 * d + 3 * d * d + 3 * d + d * d + d + 2 * d + 4 * d * d + 4 * d + 4 * d * d + d) + 2 * d


@pytest.fixture(scope="module")
def hf_run(tmp_path_factory):
    """Train a 2-layer GPT-2 for 6 optimizer steps (2 micro-batches each) on CPU, logged three ways."""
    pytest.importorskip("accelerate")
    pytest.importorskip("mlflow")
    transformers = pytest.importorskip("transformers")
    import torch

    from perfmodel.integrations.hf import PerfModelCallback

    tmp = tmp_path_factory.mktemp("hf")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    old = {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME")}
    os.environ.update(MLFLOW_TRACKING_URI=uri, MLFLOW_EXPERIMENT_NAME="tiny-gpt2")
    try:
        torch.manual_seed(0)
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**CONFIG))

        class Tokens(torch.utils.data.Dataset):
            def __len__(self):
                return 256

            def __getitem__(self, i):
                x = torch.randint(0, CONFIG["vocab_size"], (SEQ,), generator=torch.Generator().manual_seed(i))
                return {"input_ids": x, "labels": x}

        callback = PerfModelCallback(tmp / "runs.csv")
        args = transformers.TrainingArguments(
            output_dir=str(tmp / "out"), max_steps=6, per_device_train_batch_size=4, gradient_accumulation_steps=2,
            report_to=["mlflow"], logging_steps=2, save_strategy="no", use_cpu=True, disable_tqdm=True, seed=0)
        trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[callback])
        result = trainer.train()
        trainer.save_model()
        trainer.save_state()
        trainer.save_metrics("train", result.metrics)
        trainer.create_model_card()  # README.md: the hyperparameters the example scripts record
        (tmp / "out" / "training_args.bin").write_bytes(b"not a pickle: perfmodel must never read this file")
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {"tmp": tmp, "uri": uri, "out": tmp / "out", "history": tmp / "runs.csv", "record": callback.result,
            "params": sum(p.numel() for p in model.parameters() if p.requires_grad)}


SAME = ("model", "params", "batch_size", "grad_accum", "gpu_count", "gpu_type", "precision", "steps")


class TestHFCallback:
    def test_record(self, hf_run):
        rec = hf_run["record"]
        assert rec["params"] == hf_run["params"] == _gpt2_params()
        assert rec["model"] == "gpt2-2x32"
        assert (rec["batch_size"], rec["grad_accum"], rec["gpu_count"]) == (4, 2, 1)  # 2 micro-batches of 4
        assert (rec["gpu_type"], rec["precision"], rec["source"]) == ("cpu", "fp32", "hf_callback")
        assert rec["steps"] == 6 and rec["steps_timed"] == 3 and rec["stop_reason"] == "loop_end"
        # The Trainer's FLOPs estimate: 6 x non-embedding parameters x tokens of one sample
        d, V, P = CONFIG["n_embd"], CONFIG["vocab_size"], CONFIG["n_positions"]
        assert rec["flops_per_sample"] == pytest.approx(6 * (_gpt2_params() - V * d - P * d) * SEQ)
        assert 0 < rec["step_time_s"] < rec["wall_time_s"] and 0 < rec["startup_s"] < rec["wall_time_s"]

    def test_history_written_and_loads(self, hf_run):
        runs = perfmodel.load_runs(hf_run["history"])
        assert len(runs) == 1 and runs.loc[0, "run_id"] == hf_run["record"]["run_id"]
        assert runs.loc[0, "step_time_s"] == pytest.approx(hf_run["record"]["step_time_s"])


class TestImportMlflow:
    def test_matches_callback(self, hf_run):
        from perfmodel.importers import from_mlflow

        result = from_mlflow(hf_run["uri"], experiment="tiny-gpt2")
        assert result.skipped == [] and len(result.runs) == 1
        got, rec = result.runs.iloc[0], hf_run["record"]
        for col in SAME:
            assert got[col] == rec[col], col
        assert got["flops_per_sample"] == pytest.approx(rec["flops_per_sample"])
        assert got["source"] == "mlflow" and got["source_id"] == f"mlflow:{got['run_id']}"
        # train_runtime spans the callback's wall clock and more: it starts before the callbacks' on_train_begin,
        # which here includes MLflow creating its SQLite store
        assert 0 < rec["wall_time_s"] <= got["wall_time_s"] + 0.5

    def test_cli_appends_once(self, hf_run, tmp_path, capsys):
        from perfmodel.cli import main

        out = tmp_path / "imported.csv"
        argv = ["import", "mlflow", "--tracking-uri", hf_run["uri"], "--experiment", "tiny-gpt2", "-o", str(out)]
        assert main(argv) == 0
        assert "imported 1 runs (1 new, 0 already in the history); skipped 0" in capsys.readouterr().out
        assert main(argv) == 0
        assert "(0 new, 1 already in the history)" in capsys.readouterr().out
        runs = perfmodel.load_runs(out)
        assert len(runs) == 1 and runs.loc[0, "model"] == "gpt2-2x32"


class TestImportHFOutput:
    def test_matches_callback(self, hf_run):
        from perfmodel.importers import from_hf_output_dirs

        result = from_hf_output_dirs(hf_run["tmp"], values={"gpu_type": "cpu"})  # found below the folder
        assert result.skipped == [] and len(result.runs) == 1
        got, rec = result.runs.iloc[0], hf_run["record"]
        for col in SAME:
            assert got[col] == rec[col], col
        assert got["flops_per_sample"] == pytest.approx(rec["flops_per_sample"])
        # the id is the content digest of the files read (a touched or copied folder is the same run); the folder
        # is recorded beside it
        assert got["source_id"].startswith("hf_output:") and len(got["source_id"]) > len("hf_output:") + 16
        assert str(hf_run["out"].resolve()) in str(got.get("source_path", ""))

    def test_params_counted_from_safetensors(self, hf_run):
        from perfmodel.importers._hf import count_safetensors_params

        assert count_safetensors_params(hf_run["out"]) == hf_run["params"]

    def test_device_must_be_given(self, hf_run):
        from perfmodel.importers import from_hf_output_dirs

        result = from_hf_output_dirs(hf_run["out"])
        assert len(result.runs) == 0 and len(result.skipped) == 1
        assert "does not record its device" in result.skipped[0][1]

    def test_cli(self, hf_run, tmp_path, capsys):
        from perfmodel.cli import main

        out = tmp_path / "runs.parquet"
        assert main(["import", "hf-output", str(hf_run["out"]), "--set", "gpu_type=cpu", "-o", str(out)]) == 0
        assert "imported 1 runs (1 new" in capsys.readouterr().out
        assert read_raw_history(out).loc[0, "grad_accum"] == 2


class TestLogPrediction:
    @pytest.fixture
    def prediction(self, history):
        model = perfmodel.fit(history, method="loglinear", cv=None)
        return perfmodel.predict_training_time("m0", batch_size=16, gpu_type="A100", steps=1000, history=model)

    def test_logs_to_active_run(self, prediction, hf_run):
        import mlflow

        from perfmodel.integrations.mlflow import log_prediction

        uri = hf_run["uri"]  # creating a second SQLite store costs seconds of migrations
        mlflow.set_tracking_uri(uri)
        try:
            experiment = mlflow.MlflowClient(uri).create_experiment("predictions")
            with mlflow.start_run(experiment_id=experiment) as run:
                logged = log_prediction(prediction)
            data = mlflow.MlflowClient(uri).get_run(run.info.run_id).data
        finally:
            mlflow.set_tracking_uri(None)
        assert logged["run_id"] == run.info.run_id
        assert data.metrics["perfmodel.predicted_seconds"] == pytest.approx(prediction.seconds)
        assert data.metrics["perfmodel.predicted_lower_s"] == pytest.approx(prediction.lower)
        assert data.metrics["perfmodel.predicted_upper_s"] == pytest.approx(prediction.upper)
        assert data.metrics["perfmodel.confidence"] == pytest.approx(0.9)
        assert data.tags["perfmodel.method"] == "loglinear"
        assert data.tags["perfmodel.version"] == perfmodel.__version__
        assert data.tags["perfmodel.query_kind"] == prediction.query_kind
        assert data.tags["perfmodel.history"] == ", ".join(prediction.provenance)

    def test_beside_the_imported_run(self, hf_run, prediction):
        """Logged next to the Trainer's train_runtime, and the run still imports (a re-logged prediction too)."""
        from perfmodel.importers import from_mlflow
        from perfmodel.integrations.mlflow import log_prediction

        run_id = from_mlflow(hf_run["uri"]).runs.loc[0, "run_id"]
        log_prediction(prediction, run_id=run_id, tracking_uri=hf_run["uri"])
        log_prediction(prediction, run_id=run_id, tracking_uri=hf_run["uri"])
        import mlflow

        metrics = mlflow.MlflowClient(hf_run["uri"]).get_run(run_id).data.metrics
        assert "train_runtime" in metrics and "perfmodel.predicted_seconds" in metrics
        assert len(from_mlflow(hf_run["uri"]).runs) == 1

    def test_errors(self, prediction):
        pytest.importorskip("mlflow")
        from perfmodel.integrations.mlflow import log_prediction

        with pytest.raises(TypeError, match="TrainingTimePrediction"):
            log_prediction({"seconds": 1.0})
        with pytest.raises(ValueError, match="no active MLflow run"):
            log_prediction(prediction)


class TestRecorderMark:
    def test_mark_excludes_time_between_steps(self):
        pytest.importorskip("torch")
        from perfmodel.measure.recorder import Recorder

        rec = Recorder("m", batch_size=1, params=10, warmup_steps=0, gpu_type="cpu").start()
        time.sleep(0.3)  # what a trainer does between steps (evaluation, saving)
        rec.mark()
        rec.step()
        result = rec.finish()
        assert result["step_time_s"] < 0.25 <= result["startup_s"] <= result["wall_time_s"]


@pytest.mark.slow
def test_hf_callback_records_an_interrupted_run(tmp_path):
    pytest.importorskip("accelerate")
    pytest.importorskip("transformers")
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import torch, transformers
        from perfmodel.integrations.hf import PerfModelCallback

        class Stop(transformers.TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                if state.global_step == 5:
                    raise KeyboardInterrupt

        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**{CONFIG!r}))
        data = [{{"input_ids": torch.arange(16) % 128, "labels": torch.arange(16) % 128}}] * 64
        args = transformers.TrainingArguments(output_dir={str(tmp_path / 'out')!r}, max_steps=50,
            per_device_train_batch_size=2, report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True)
        transformers.Trainer(model=model, args=args, train_dataset=data,
                             callbacks=[PerfModelCallback({str(tmp_path / 'runs.csv')!r}), Stop()]).train()
    """))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode != 0 and "KeyboardInterrupt" in proc.stderr
    runs = read_raw_history(tmp_path / "runs.csv")
    assert len(runs) == 1
    assert runs.loc[0, "stop_reason"] == "interrupted" and runs.loc[0, "steps"] == 5


class TestLightningCallback:
    def test_record_with_accumulation_and_validation_excluded(self, tmp_path):
        L = pytest.importorskip("lightning")
        import torch

        from perfmodel.integrations.lightning import PerfModelCallback

        class Net(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))

            def training_step(self, batch, i):
                x, y = batch
                return torch.nn.functional.mse_loss(self.net(x), y)

            def validation_step(self, batch, i):
                time.sleep(0.4)  # a slow validation: it must not count as training time

            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters(), lr=1e-3)

        torch.manual_seed(0)
        data = torch.utils.data.TensorDataset(torch.randn(256, 16), torch.randn(256, 1))
        train = torch.utils.data.DataLoader(data, batch_size=8)
        val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 16)), batch_size=8)
        callback = PerfModelCallback(tmp_path / "runs.csv", "tiny-mlp", warmup_steps=2)
        trainer = L.Trainer(max_steps=10, accelerator="cpu", devices=1, accumulate_grad_batches=2,
                            val_check_interval=4, num_sanity_val_steps=0, limit_val_batches=1, logger=False,
                            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                            callbacks=[callback])
        trainer.fit(Net(), train, val)
        rec = callback.result
        assert (rec["model"], rec["params"]) == ("tiny-mlp", 16 * 32 + 32 + 32 + 1)
        assert (rec["batch_size"], rec["grad_accum"], rec["gpu_count"], rec["gpu_type"]) == (8, 2, 1, "cpu")
        assert rec["steps"] == 10 and rec["steps_timed"] == 8 and rec["source"] == "lightning_callback"
        # validation ran (5 times x 0.4 s) inside fit, but outside every timed step
        assert rec["wall_time_s"] > 1.6
        assert max(callback._session.recorder.times) < 0.4
        runs = perfmodel.load_runs(tmp_path / "runs.csv")
        assert len(runs) == 1 and runs.loc[0, "precision"] == "fp32"

    def test_exception_writes_interrupted_record(self, tmp_path):
        L = pytest.importorskip("lightning")
        import torch

        from perfmodel.integrations.lightning import PerfModelCallback

        class Boom(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 1)

            def training_step(self, batch, i):
                if self.global_step == 4:
                    raise RuntimeError("boom")
                return self.lin(batch[0]).sum()

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.1)

        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 4)), batch_size=4)
        callback = PerfModelCallback(tmp_path / "runs.csv", warmup_steps=1)
        trainer = L.Trainer(max_steps=20, accelerator="cpu", logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False, callbacks=[callback])
        with pytest.raises(RuntimeError, match="boom"):
            trainer.fit(Boom(), loader)
        runs = read_raw_history(tmp_path / "runs.csv")
        assert runs.loc[0, "stop_reason"] == "interrupted" and runs.loc[0, "steps"] == 4
        assert runs.loc[0, "model"] == "Boom" and runs.loc[0, "batch_size"] == 4


@pytest.mark.slow
def test_example_hf_mlflow_history(tmp_path):
    for name in ("accelerate", "transformers", "mlflow"):
        pytest.importorskip(name)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "hf_mlflow_history.py")], capture_output=True,
                          text=True, timeout=900, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "imported 10 runs (10 new, 0 already in the history); skipped 0" in proc.stdout
    assert proc.stdout.count("90% PI") == 2 and "logged 11 metrics and 8 tags" in proc.stdout


def _cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    return torch


class TestOnGPU:
    """The CUDA paths (device name through NVML, synchronised clock, bf16 flags); skipped without a GPU."""

    def test_hf_callback_bf16(self, tmp_path):
        torch = _cuda()
        transformers = pytest.importorskip("transformers")
        pytest.importorskip("accelerate")
        from perfmodel.hardware import resolve_gpu_type
        from perfmodel.integrations.hf import PerfModelCallback

        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**CONFIG))
        data = [{"input_ids": torch.arange(SEQ) % 128, "labels": torch.arange(SEQ) % 128}] * 64
        callback = PerfModelCallback(tmp_path / "runs.csv")
        args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=8, bf16=True,
                                              per_device_train_batch_size=4, report_to=[], save_strategy="no",
                                              disable_tqdm=True)
        transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=[callback]).train()
        rec = perfmodel.load_runs(tmp_path / "runs.csv").iloc[0]
        assert rec["gpu_type"] == resolve_gpu_type(torch.cuda.get_device_name())
        assert (rec["precision"], rec["gpu_count"], rec["steps"], rec["steps_timed"]) == ("bf16", 1, 8, 5)
        assert rec["step_time_s"] > 0 and rec["source"] == "hf_callback"

    def test_lightning_callback_bf16(self, tmp_path):
        torch = _cuda()
        L = pytest.importorskip("lightning")
        from perfmodel.hardware import resolve_gpu_type
        from perfmodel.integrations.lightning import PerfModelCallback

        class Net(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(64, 64)

            def training_step(self, batch, i):
                return self.lin(batch[0]).float().pow(2).mean()

            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters())

        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(512, 64)), batch_size=32)
        callback = PerfModelCallback(tmp_path / "runs.csv", "lin64")
        L.Trainer(max_steps=10, accelerator="gpu", devices=1, precision="bf16-mixed", logger=False,
                  enable_checkpointing=False, enable_progress_bar=False, callbacks=[callback]).fit(Net(), loader)
        rec = perfmodel.load_runs(tmp_path / "runs.csv").iloc[0]
        assert rec["gpu_type"] == resolve_gpu_type(torch.cuda.get_device_name())
        assert (rec["precision"], rec["batch_size"], rec["steps"]) == ("bf16", 32, 10)


@pytest.mark.slow
def test_lightning_ddp_rank0_writes_once(tmp_path):
    """Two CPU processes under Lightning's DDP (gloo): both time, one record, gpu_count 2."""
    pytest.importorskip("lightning")
    script = tmp_path / "ddp.py"
    script.write_text(textwrap.dedent(f"""
        import torch, lightning as L
        from perfmodel.integrations.lightning import PerfModelCallback

        class Net(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(8, 1)

            def training_step(self, batch, i):
                return self.lin(batch[0]).pow(2).mean()

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.01)

        if __name__ == "__main__":
            data = torch.utils.data.TensorDataset(torch.randn(256, 8))
            trainer = L.Trainer(max_steps=8, accelerator="cpu", devices=2, strategy="ddp", logger=False,
                                enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                                callbacks=[PerfModelCallback({str(tmp_path / 'runs.csv')!r}, "lin8")])
            trainer.fit(Net(), torch.utils.data.DataLoader(data, batch_size=4))
    """))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = read_raw_history(tmp_path / "runs.csv")
    assert len(runs) == 1
    assert (runs.loc[0, "gpu_count"], runs.loc[0, "batch_size"], runs.loc[0, "steps"]) == (2, 4, 8)
