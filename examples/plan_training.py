"""Plan a training job: predicted wall-clock time, 90% interval and cost for several device counts.

Uses the bundled CPU history (data/runs_cpu.csv); with your own history (``HISTORY = "my_runs.parquet"``) add the
GPU types it has runs on to GPU_TYPES.
"""

import warnings

import pandas as pd

import perfmodel
from perfmodel import plan

HISTORY = None  # the bundled runs
MODEL = "gpt-m"  # a model in the history, or {"params": ..., "flops_per_sample": ...}
DATASET_SIZE = 200_000  # samples
EPOCHS = 3
BATCH_SIZE = 32  # per device
GPU_TYPES = ["cpu"]
GPU_COUNTS = [1, 2, 4]

rows = []
for gpu_type in GPU_TYPES:
    for n in GPU_COUNTS:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r = perfmodel.predict_training_time(MODEL, batch_size=BATCH_SIZE, gpu_count=n, gpu_type=gpu_type,
                                                epochs=EPOCHS, dataset_size=DATASET_SIZE, history=HISTORY)
        cost = plan.estimate_cost(r)
        rows.append({"gpu_type": gpu_type, "gpu_count": n, "steps": r.steps, "hours": r.seconds / 3600,
                     "hours_90_lo": r.lower / 3600, "hours_90_hi": r.upper / 3600, "cost_usd": cost.dollars,
                     "inside_domain": r.inside_domain, "method": r.method})
table = pd.DataFrame(rows)
print(f"{MODEL}: {EPOCHS} epochs of {DATASET_SIZE:,} samples, batch {BATCH_SIZE} per device")
print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
print("inside_domain=False: the device count lies outside the measured runs; the interval is widened.")
