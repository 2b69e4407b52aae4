"""Bring your run history: train a tiny Hugging Face model with perfmodel's callback and the Trainer's own MLflow
logging, import the MLflow runs, and predict a longer run with an interval. Logs the prediction back to MLflow.

Needs the extras hf and mlflow: pip install "perfmodel[hf,mlflow]" (CPU is enough; a minute or two on 2 cores).
"""

import logging
import os
import tempfile
from pathlib import Path

import mlflow
import torch
import transformers

import perfmodel
from perfmodel.importers import from_mlflow
from perfmodel.integrations.hf import PerfModelCallback
from perfmodel.integrations.mlflow import log_prediction

transformers.logging.set_verbosity_error()
logging.getLogger("mlflow").setLevel(logging.WARNING)
work = Path(tempfile.mkdtemp())
uri = f"sqlite:///{work / 'mlflow.db'}"
os.environ.update(MLFLOW_TRACKING_URI=uri, MLFLOW_EXPERIMENT_NAME="tiny-gpt2")
mlflow.MlflowClient(uri).search_experiments()  # create the store now, not inside the first run's train_runtime

SEQ = 32


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        x = torch.randint(0, 512, (SEQ,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": x, "labels": x}


callback = PerfModelCallback(work / "callback_runs.csv")
# ten batch sizes: a 90% split-conformal interval needs at least 9 runs (ceil(0.9 (n + 1)) <= n)
for batch_size in (2, 3, 4, 5, 6, 8, 10, 16, 20, 24):
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=512,
                                                                 n_positions=SEQ))
    args = transformers.TrainingArguments(
        output_dir=str(work / f"out-b{batch_size}"), max_steps=30, per_device_train_batch_size=batch_size,
        report_to=["mlflow"], logging_steps=10, save_strategy="no", use_cpu=True, disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[callback])
    trainer.remove_callback(transformers.PrinterCallback)  # keep the example's output to its own lines
    trainer.train()
    r = callback.result
    print(f"trained batch {batch_size:>2}: callback {r['step_time_s'] * 1e3:.1f} ms/step (steady, "
          f"{r['steps_timed']} steps), wall {r['wall_time_s']:.2f} s")

imported = from_mlflow(uri, experiment="tiny-gpt2", output=work / "runs.csv")
print(imported.summary())
print(imported.runs[["model", "params", "batch_size", "gpu_count", "gpu_type", "steps", "wall_time_s",
                     "step_time_s"]].to_string(index=False))

fitted = perfmodel.fit(work / "runs.csv", method="loglinear", cv=None)
longer = perfmodel.predict_training_time("gpt2-2x64", batch_size=12, gpu_type="cpu", steps=20_000, history=fitted)
print(f"predicted, 20,000 steps at batch 12 (from the MLflow runs): {longer}")
from_callback = perfmodel.predict_training_time("gpt2-2x64", batch_size=12, gpu_type="cpu", steps=20_000,
                                                history=perfmodel.fit(work / "callback_runs.csv",
                                                                      method="loglinear", cv=None))
print(f"predicted, 20,000 steps at batch 12 (from the callback's records): {from_callback}")

with mlflow.start_run(run_name="plan: 20k steps at batch 12"):
    logged = log_prediction(longer)
print(f"logged {len(logged['metrics'])} metrics and {len(logged['tags'])} tags to MLflow run {logged['run_id']}")
