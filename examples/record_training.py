"""Instrument a plain torch training loop with perfmodel.record, then fit on what it recorded."""

import tempfile
from pathlib import Path

import torch

import perfmodel

history = Path(tempfile.mkdtemp()) / "my_runs.csv"
torch.manual_seed(0)

# ten batch sizes: a 90% split-conformal interval needs at least 9 runs (ceil(0.9 (n + 1)) <= n)
for batch_size in (8, 12, 16, 24, 32, 48, 64, 96, 128, 192):
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(batch_size, 128), torch.randint(0, 10, (batch_size,))
    with perfmodel.record("my-mlp", module=model, batch_size=batch_size, output=history, family="mlp") as rec:
        for _ in range(30):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            rec.step()  # one call per optimizer step
    print(f"batch {batch_size}: {rec.result['step_time_s'] * 1e3:.2f} ms/step over {rec.result['steps_timed']} steps")

fitted = perfmodel.fit(history, method="loglinear")
print(fitted.summary())
print(perfmodel.predict_training_time("my-mlp", batch_size=48, gpu_type="cpu", steps=10_000, history=fitted))
