"""Fit perfmodel on your own run history (minimal schema) and predict a new job.

past_jobs.csv has the minimal columns: model, params, batch_size, gpu_count, gpu_type, wall_time_s, steps.
(It holds real runs measured by perfmodel on the development machine; see README.md here.)
"""

from pathlib import Path

import perfmodel

runs = perfmodel.load_runs(Path(__file__).with_name("past_jobs.csv"))  # validates; step_time_s = wall / steps
model = perfmodel.fit(runs, method="loglinear")
print(model.summary())

new_job = {"params": 1_500_000, "flops_per_sample": 3e8, "name": "my-new-model"}
result = perfmodel.predict_training_time(new_job, batch_size=16, gpu_count=2, gpu_type="cpu", steps=5_000,
                                         history=model)
print("\nnew job:", result)
