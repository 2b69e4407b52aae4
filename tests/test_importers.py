"""Importers: what each source field maps to, and the runs that must be skipped rather than guessed.

Output dirs here are written in the exact layout a real Trainer run leaves (see test_integrations.py for one made
by transformers itself); MLflow runs are logged through the real MLflow client into a file store.
"""

from __future__ import annotations

import json
import os
import time

import pytest

import perfmodel
from perfmodel.importers import from_hf_output_dirs
from perfmodel.importers._hf import params_from_config, precision_from_flags, world_from_throughput
from perfmodel.io import append_new_runs, read_raw_history

GPT2 = {"model_type": "gpt2", "n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": 128, "n_positions": 32,
        "tie_word_embeddings": True}


def write_run(path, *, runtime=20.0, steps=40, per_process=4, samples_per_s=8.0, card=None, config=GPT2,
              results=True, extra_results=None):
    """An output dir as Trainer.save_state / save_metrics / save_pretrained / create_model_card leave it."""
    path.mkdir(parents=True, exist_ok=True)
    speed = {"train_runtime": runtime, "train_samples_per_second": samples_per_s,
             "train_steps_per_second": round(steps / runtime, 3), "total_flos": 1.0e9}
    state = {"global_step": steps, "train_batch_size": per_process, "total_flos": 1.0e9, "max_steps": steps,
             "log_history": [{"loss": 4.5, "step": steps // 2}] + ([{"step": steps, **speed}] if results else [])}
    (path / "trainer_state.json").write_text(json.dumps(state))
    if results:
        (path / "all_results.json").write_text(json.dumps({**speed, "epoch": 1.0, **(extra_results or {})}))
    if config is not None:
        (path / "config.json").write_text(json.dumps(config))
    if card is not None:
        lines = "\n".join(f"- {k}: {v}" for k, v in card.items())
        (path / "README.md").write_text(f"# run\n\n### Training hyperparameters\n\nThe following hyperparameters "
                                        f"were used during training:\n{lines}\n\n### Training results\n")
    (path / "training_args.bin").write_bytes(b"\x80\x04 a pickle perfmodel never opens")
    return path


class TestConfigParams:
    @pytest.mark.parametrize("kind", ["gpt2", "gpt2-untied", "llama", "llama-bias-tied", "mistral", "qwen2"])
    def test_matches_transformers(self, kind):
        transformers = pytest.importorskip("transformers")
        small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     intermediate_size=64, vocab_size=100)
        cls, cfg = {
            "gpt2": ("GPT2LMHeadModel", transformers.GPT2Config(**{k: v for k, v in GPT2.items() if k != "model_type"})),
            "gpt2-untied": ("GPT2LMHeadModel", transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64,
                                                                       n_inner=48, tie_word_embeddings=False)),
            "llama": ("LlamaForCausalLM", transformers.LlamaConfig(**small)),
            "llama-bias-tied": ("LlamaForCausalLM", transformers.LlamaConfig(**small, attention_bias=True,
                                                                             mlp_bias=True, tie_word_embeddings=True)),
            "mistral": ("MistralForCausalLM", transformers.MistralConfig(**small, head_dim=16)),
            "qwen2": ("Qwen2ForCausalLM", transformers.Qwen2Config(**small)),
        }[kind]
        model = getattr(transformers, cls)(cfg)
        counted = sum(p.numel() for p in model.parameters())
        assert params_from_config(cfg.to_dict()) == counted
        # MLflow stores every param as a string
        assert params_from_config({k: str(v) for k, v in cfg.to_dict().items()}) == counted

    def test_unknown_architecture(self):
        assert params_from_config({"model_type": "bert", "hidden_size": 32}) is None
        assert params_from_config({"model_type": "gpt2", "n_layer": 2}) is None


class TestDerivations:
    def test_world_from_throughput(self):
        assert world_from_throughput(32.0, 2.0, 4) == 4
        assert world_from_throughput("12.41", "3.102", 4) == 1  # rounded metrics of a real 1-process run
        assert world_from_throughput(10.0, 2.0, 4) is None      # 1.25 x: not a whole number of processes
        assert world_from_throughput(None, 2.0, 4) is None
        assert world_from_throughput(0.0, 2.0, 4) is None

    def test_precision(self):
        assert precision_from_flags(bf16="True", fp16="False") == "bf16"
        assert precision_from_flags(bf16=False, fp16=True) == "fp16"
        assert precision_from_flags(bf16="False", fp16="False", tf32="None") == "fp32"
        assert precision_from_flags(bf16="False", fp16="False", tf32="True") == "tf32"
        assert precision_from_flags() is None


class TestHFOutputDirs:
    def test_one_process_no_card(self, tmp_path):
        run = write_run(tmp_path / "a", samples_per_s=8.0)  # 2 steps/s x 4 per process: 1 process, no accumulation
        res = from_hf_output_dirs(run, values={"gpu_type": "A100"})
        row = res.runs.iloc[0]
        assert (row["model"], row["params"], row["batch_size"], row["grad_accum"], row["gpu_count"]) == \
            ("gpt2-2x32", 30592, 4, 1, 1)
        assert row["gpu_type"] == "A100-SXM4-80GB" and row["steps"] == 40 and row["wall_time_s"] == 20.0
        assert row["step_time_s"] == pytest.approx(0.5)
        assert row["flops_per_sample"] == pytest.approx(1.0e9 / (40 * 4))

    def test_ambiguous_accumulation_is_skipped_not_guessed(self, tmp_path):
        run = write_run(tmp_path / "a", samples_per_s=16.0)  # 8 samples per step = 4 x (accum x processes = 2)
        res = from_hf_output_dirs(run, values={"gpu_type": "A100"})
        assert len(res.runs) == 0
        assert "could be either" in res.skipped[0][1]
        # the model card says which: 2 micro-batches per step on one process
        write_run(run, samples_per_s=16.0, card={"train_batch_size": 4, "gradient_accumulation_steps": 2,
                                                 "total_train_batch_size": 8, "mixed_precision_training": "Native AMP"})
        row = from_hf_output_dirs(run, values={"gpu_type": "A100"}).runs.iloc[0]
        assert (row["batch_size"], row["grad_accum"], row["gpu_count"], row["precision"]) == (4, 2, 1, "fp16")
        # or the user states it
        run2 = write_run(tmp_path / "b", samples_per_s=16.0)
        row = from_hf_output_dirs(run2, values={"gpu_type": "A100", "gpu_count": 2}).runs.iloc[0]
        assert (row["batch_size"], row["grad_accum"], row["gpu_count"]) == (4, 1, 2)
        assert row["flops_per_sample"] == pytest.approx(1.0e9 / (40 * 4 * 2))

    def test_card_devices(self, tmp_path):
        run = write_run(tmp_path / "a", samples_per_s=32.0, card={"train_batch_size": 4, "num_devices": 4,
                                                                 "total_train_batch_size": 16})
        row = from_hf_output_dirs(run, values={"gpu_type": "H100"}).runs.iloc[0]
        assert (row["batch_size"], row["gpu_count"]) == (4, 4)

    def test_unfinished_run_skipped_with_reason(self, tmp_path):
        write_run(tmp_path / "done")
        write_run(tmp_path / "crashed", results=False)
        res = from_hf_output_dirs(tmp_path, values={"gpu_type": "A100"})
        assert len(res.runs) == 1
        (sid, reason), = res.skipped
        assert "crashed" in sid and "no train_runtime" in reason
        assert "skipped 1" in res.summary() and reason in res.summary()

    def test_params_unknown_skipped_or_given(self, tmp_path):
        run = write_run(tmp_path / "a", config={"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2})
        res = from_hf_output_dirs(run, values={"gpu_type": "A100"})
        assert "parameter count unknown" in res.skipped[0][1] and "'bert'" in res.skipped[0][1]
        row = from_hf_output_dirs(run, values={"gpu_type": "A100", "params": 123456}).runs.iloc[0]
        assert (row["model"], row["params"]) == ("bert-2x32", 123456)

    def test_mapping_reads_a_results_key(self, tmp_path):
        run = write_run(tmp_path / "a", extra_results={"accelerator": "NVIDIA H100 80GB HBM3"})
        res = from_hf_output_dirs(run, mapping={"accelerator": "gpu_type"})
        assert res.runs.loc[0, "gpu_type"] == "H100-SXM5-80GB"
        res = from_hf_output_dirs(run, mapping={"accelerator": "gpu_type"}, values={"gpu_type": "A100"})
        assert res.runs.loc[0, "gpu_type"] == "A100-SXM4-80GB"  # a value set for every run wins

    def test_gpu_name_in_results_is_read(self, tmp_path):
        run = write_run(tmp_path / "a", extra_results={"gpu_name": "NVIDIA A100-SXM4-40GB"})
        assert from_hf_output_dirs(run).runs.loc[0, "gpu_type"] == "A100-SXM4-40GB"

    def test_dedupe_on_content_not_mtime(self, tmp_path):
        """Issue 26 #9: a touched or copied output dir was imported again (the id held the path and mtime)."""
        import shutil

        run = write_run(tmp_path / "a")
        out = tmp_path / "runs.csv"
        first = from_hf_output_dirs(run, values={"gpu_type": "A100"}, output=out)
        again = from_hf_output_dirs(run, values={"gpu_type": "A100"}, output=out)
        assert (first.added, first.duplicates, again.added, again.duplicates) == (1, 0, 0, 1)
        later = time.time() + 5
        for name in ("all_results.json", "trainer_state.json"):
            os.utime(run / name, (later, later))  # touched: the same run
        assert from_hf_output_dirs(run, values={"gpu_type": "A100"}, output=out).added == 0
        shutil.copytree(run, tmp_path / "copy" / "a")  # copied elsewhere: the same run
        assert from_hf_output_dirs(tmp_path / "copy", values={"gpu_type": "A100"}, output=out).added == 0
        assert len(perfmodel.load_runs(out)) == 1
        assert first.runs.loc[0, "source_id"].startswith("hf_output:")
        assert read_raw_history(out).loc[0, "source_path"] == str(run.resolve())

    def test_trained_again_is_imported_again(self, tmp_path):
        run = write_run(tmp_path / "a")
        out = tmp_path / "runs.csv"
        assert from_hf_output_dirs(run, values={"gpu_type": "A100"}, output=out).added == 1
        write_run(run, runtime=40.0, samples_per_s=4.0)  # new results in the same dir
        assert from_hf_output_dirs(run, values={"gpu_type": "A100"}, output=out).added == 1
        assert len(perfmodel.load_runs(out)) == 2

    @pytest.mark.parametrize("accum", [0, -1, -3])
    def test_card_accumulation_not_positive_is_skipped(self, tmp_path, accum):
        """Issue 26 #8: gradient_accumulation_steps=0 in the model card raised ZeroDivisionError; -1 was written."""
        run = write_run(tmp_path / "a", card={"train_batch_size": 4, "gradient_accumulation_steps": accum,
                                              "num_devices": 2})
        res = from_hf_output_dirs(run, values={"gpu_type": "A100"}, output=tmp_path / "r.csv")
        assert len(res.runs) == 0 and len(res.skipped) == 1
        assert f"gradient_accumulation_steps={accum}" in res.skipped[0][1]
        assert not (tmp_path / "r.csv").exists() or len(read_raw_history(tmp_path / "r.csv")) == 0

    @pytest.mark.parametrize("name", ["all_results.json", "trainer_state.json", "config.json"])
    def test_deeply_nested_json_is_skipped_with_a_reason(self, tmp_path, name):
        """Issue 26 #8: RecursionError on a deeply nested all_results.json."""
        run = write_run(tmp_path / "a")
        (run / name).write_text("[" * 100_000 + "]" * 100_000)
        res = from_hf_output_dirs(run, values={"gpu_type": "A100"})
        assert len(res.runs) == 0 and "nested too deeply" in res.skipped[0][1]

    def test_huge_and_odd_values_are_skipped_not_raised(self, tmp_path):
        run = write_run(tmp_path / "a", extra_results={"train_runtime": 10**400})
        (run / "trainer_state.json").write_text(json.dumps({"global_step": 10**400, "train_batch_size": "x",
                                                            "log_history": 7}))
        res = from_hf_output_dirs(run, values={"gpu_type": "A100"})
        assert len(res.runs) == 0 and len(res.skipped) == 1

    def test_bad_input(self, tmp_path):
        with pytest.raises(FileNotFoundError, match="does not exist"):
            from_hf_output_dirs(tmp_path / "nope")
        with pytest.raises(ValueError, match="No Hugging Face output dir"):
            from_hf_output_dirs(tmp_path)
        run = write_run(tmp_path / "a")
        with pytest.raises(ValueError, match="not a run-history column"):
            from_hf_output_dirs(run, mapping={"x": "gpu"})
        with pytest.raises(ValueError, match="not a run-history column"):
            from_hf_output_dirs(run, values={"device": "A100"})
        with pytest.raises(ValueError, match="gpu_count must be int"):
            from_hf_output_dirs(run, values={"gpu_count": "two"})
        (run / "trainer_state.json").write_text("{not json")
        res = from_hf_output_dirs(run, values={"gpu_type": "A100"})
        assert "not readable JSON" in res.skipped[0][1]

    def test_cli_errors_are_one_line(self, tmp_path, capsys):
        from perfmodel.cli import main

        assert main(["import", "hf-output", str(tmp_path / "nope"), "-o", str(tmp_path / "r.csv")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("perfmodel: error: Output dir") and err.count("\n") == 1
        run = write_run(tmp_path / "a")
        (tmp_path / "map.json").write_text(json.dumps({"train_batch_size": "batch_size"}))
        assert main(["import", "hf-output", str(run), "--mapping-file", str(tmp_path / "map.json"),
                     "--set", "gpu_type=cpu", "-o", str(tmp_path / "r.csv")]) == 0
        assert read_raw_history(tmp_path / "r.csv").loc[0, "batch_size"] == 4
        (tmp_path / "bad.json").write_text("[1, 2]")
        assert main(["import", "hf-output", str(run), "--mapping-file", str(tmp_path / "bad.json"),
                     "-o", str(tmp_path / "r.csv")]) == 2
        assert "must hold a JSON object" in capsys.readouterr().err


class TestAppendNewRuns:
    def test_key_dedupes_within_and_across(self, tmp_path):
        base = {"model": "m", "params": 10, "batch_size": 1, "gpu_count": 1, "gpu_type": "cpu", "step_time_s": 0.1}
        recs = [{**base, "run_id": "a", "source_id": "s1"}, {**base, "run_id": "b", "source_id": "s1"},
                {**base, "run_id": "c", "source_id": "s2"}]
        out = tmp_path / "h.parquet"
        assert append_new_runs(recs, out) == (2, 1)
        assert append_new_runs(recs, out) == (0, 3)
        assert list(read_raw_history(out)["run_id"]) == ["a", "c"]
        with pytest.raises(ValueError, match="no 'source_id' column"):
            append_new_runs([base], out)


@pytest.fixture
def file_store(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = f"file:{tmp_path / 'mlruns'}"
    client = mlflow.MlflowClient(uri)
    experiment = client.create_experiment("edge")

    def log(params, metrics=None, tags=None, status="FINISHED", step=200):
        run = client.create_run(experiment, tags=tags or {})
        for k, v in params.items():
            client.log_param(run.info.run_id, k, v)
        for k, v in (metrics or {}).items():
            client.log_metric(run.info.run_id, k, v, step=step)
        client.set_terminated(run.info.run_id, status=status)
        return run.info.run_id

    return uri, log


HF_PARAMS = {**GPT2, "per_device_train_batch_size": 4, "gradient_accumulation_steps": 1, "bf16": True, "fp16": False,
             "use_cpu": False}
HF_METRICS = {"train_runtime": 100.0, "train_samples_per_second": 64.0, "train_steps_per_second": 2.0,
              "total_flos": 1e12}


class TestMlflow:
    def test_maps_trainer_logs(self, file_store):
        from perfmodel.importers import from_mlflow

        uri, log = file_store
        run_id = log(HF_PARAMS, HF_METRICS, tags={"gpu_name": "NVIDIA H100 80GB HBM3"})
        res = from_mlflow(uri)
        row = res.runs.iloc[0]
        assert row["run_id"] == run_id and row["source_id"] == f"mlflow:{run_id}"
        # 64 samples/s / 2 steps/s = 32 samples per step = 4 per device x 8 processes
        assert (row["batch_size"], row["gpu_count"], row["gpu_type"], row["precision"]) == \
            (4, 8, "H100-SXM5-80GB", "bf16")
        assert (row["steps"], row["step_time_s"], row["params"]) == (200, 0.5, 30592)

    def test_skips_with_reasons(self, file_store):
        from perfmodel.importers import from_mlflow

        uri, log = file_store
        log(HF_PARAMS, HF_METRICS)                                           # no device named
        log(HF_PARAMS, HF_METRICS, tags={"gpu": "A100"}, status="FAILED")    # not finished
        log({**HF_PARAMS, "world_size": 8, "model_type": "t5"}, HF_METRICS, tags={"gpu": "A100"})
        log({"lr": 0.1}, {"loss": 1.0})                                      # not a training-time run at all
        res = from_mlflow(uri)
        reasons = sorted(r for _, r in res.skipped)
        assert len(res.runs) == 0 and len(reasons) == 4
        assert any("device type unknown" in r for r in reasons)
        assert any("FAILED" in r for r in reasons)
        assert any("parameter count unknown" in r and "'t5'" in r for r in reasons)
        assert any("no train_runtime" in r and "no per_device_train_batch_size" in r for r in reasons)

    def test_map_and_set(self, file_store):
        from perfmodel.importers import from_mlflow

        uri, log = file_store
        log({"batch": 32, "n_params": 5e6, "name": "resnet", "world": 2}, {"runtime_s": 50.0, "n_steps": 100.0},
            tags={"device": "A10"})
        mapping = {"batch": "batch_size", "name": "model", "world": "gpu_count", "device": "gpu_type",
                   "runtime_s": "wall_time_s", "n_steps": "steps", "n_params": "params"}
        row = from_mlflow(uri, mapping=mapping).runs.iloc[0]
        assert (row["model"], row["params"], row["batch_size"], row["gpu_count"], row["gpu_type"]) == \
            ("resnet", 5_000_000, 32, 2, "A10")
        assert row["step_time_s"] == pytest.approx(0.5)

    @pytest.mark.parametrize("accum", ["0", "-1"])
    def test_accumulation_not_positive_is_skipped(self, file_store, accum):
        """Issue 26 #8: ZeroDivisionError on gradient_accumulation_steps=0; -1 gave grad_accum=-1."""
        from perfmodel.importers import from_mlflow

        uri, log = file_store
        log({**HF_PARAMS, "gradient_accumulation_steps": accum}, HF_METRICS, tags={"gpu": "A100"})
        log({**HF_PARAMS, "world_size": "-1"}, HF_METRICS, tags={"gpu": "A100"})
        res = from_mlflow(uri)
        assert len(res.runs) == 0 and len(res.skipped) == 2
        reasons = " ".join(r for _, r in res.skipped)
        assert f"gradient_accumulation_steps={int(accum)}" in reasons and "process count=-1" in reasons

    def test_unreachable_server_fails_in_seconds_with_one_line(self, capsys):
        """Issue 26 #8: a closed port was retried for 4 min 10 s, then a 111-line traceback."""
        import socket

        from perfmodel.cli import main
        from perfmodel.importers import from_mlflow

        with socket.socket() as s:  # a port that nothing listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(ConnectionError, match=f"127.0.0.1:{port} is not reachable"):
            from_mlflow(f"http://127.0.0.1:{port}")
        assert main(["import", "mlflow", "--tracking-uri", f"http://127.0.0.1:{port}", "-o", "x.csv"]) == 2
        err = capsys.readouterr().err
        assert time.monotonic() - t0 < 15
        assert err.startswith("perfmodel: error: MLflow tracking server") and err.count("\n") == 1

    def test_server_that_drops_connections_fails_in_seconds(self):
        import socket
        import threading

        from perfmodel.importers import from_mlflow

        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(50)

        def serve():
            while True:
                try:
                    conn, _ = srv.accept()
                except OSError:
                    return
                conn.close()

        threading.Thread(target=serve, daemon=True).start()
        t0 = time.monotonic()
        try:
            with pytest.raises(ConnectionError, match="MLflow at http://127.0.0.1.* failed"):
                from_mlflow(f"http://127.0.0.1:{srv.getsockname()[1]}")
        finally:
            srv.close()
        assert time.monotonic() - t0 < 30
        assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ  # the import's settings are undone

    def test_errors(self, file_store, tmp_path):
        from perfmodel.importers import from_mlflow

        uri, _ = file_store
        with pytest.raises(ValueError, match="No MLflow experiment named 'nope'.*Known: .*edge"):
            from_mlflow(uri, experiment="nope")
        with pytest.raises(FileNotFoundError, match="does not exist"):
            from_mlflow(f"sqlite:///{tmp_path / 'missing.db'}")
        assert not (tmp_path / "missing.db").exists()
        with pytest.raises(ValueError, match="max_runs"):
            from_mlflow(uri, max_runs=0)


class TestMlflowLoggedSteps:
    def test_step_time_comes_from_the_logged_steps_not_runtime_over_steps(self, file_store):
        # a 40-step run: 30 s of start-up, then 0.5 s per step, loss logged every 5 steps (timestamps in ms)
        from mlflow.entities import Metric

        from perfmodel.importers import from_mlflow

        uri, log = file_store
        run_id = log(HF_PARAMS, {**HF_METRICS, "train_runtime": 50.0, "train_steps_per_second": 0.8,
                                 "train_samples_per_second": 25.6}, tags={"gpu_name": "NVIDIA H100 80GB HBM3"}, step=40)
        import mlflow

        client = mlflow.MlflowClient(uri)
        t0 = 1_700_000_000_000
        client.log_batch(run_id, metrics=[Metric("loss", 1.0 / s, t0 + 30_000 + 500 * s, s) for s in range(5, 41, 5)])
        result = from_mlflow(uri)
        rec = result.runs.set_index("source_id").loc[f"mlflow:{run_id}"]
        assert rec["step_time_s"] == pytest.approx(0.5)
        assert rec["wall_time_s"] / rec["steps"] == pytest.approx(1.25)  # runtime / steps: 2.5x the step time
        assert "median seconds per optimizer step" in rec["protocol"]

    def test_runtime_over_steps_without_a_logged_history(self, file_store):
        from perfmodel.importers import from_mlflow

        uri, log = file_store
        log(HF_PARAMS, HF_METRICS, tags={"gpu_name": "NVIDIA H100 80GB HBM3"})
        rec = from_mlflow(uri).runs.iloc[0]
        assert "train_runtime over the run's optimizer steps" in rec["protocol"]
