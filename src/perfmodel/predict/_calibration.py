"""The layout model calibrated on a history's own transformer runs, with the bundled LLM history's fit as its
prior (:func:`calibrated_layout`)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
import pandas as pd

from ..exceptions import UnsupportedQueryError
from ..fitting import fit_history
from ..history import LoadedHistory
from ..layout_features import layout_priceable
from ..models import CALIBRATION_PRIOR_WEIGHT, TrainingTimeModel
from ..schema import step_global_batch
from ._support import LAYOUT_METHOD


def calibrated_layout(loaded: LoadedHistory, kind: str,
                      bundled: Callable[[], TrainingTimeModel]) -> TrainingTimeModel:
    """The layout model on a history's transformer runs, the bundled LLM fit's coefficients as the prior
    (:meth:`perfmodel.models.LayoutRegressor.with_prior`): few runs move the coefficients as far as they show.
    ``bundled`` gives the bundled LLM history's layout model (:func:`~perfmodel.predict.bundled_layout_model`)."""
    runs = loaded.runs.loc[layout_priceable(loaded.runs)].reset_index(drop=True)
    if not len(runs):
        raise UnsupportedQueryError("The history has no transformer runs with a sequence length and a shape or "
                                    "family (decoder, moe), on a device with a peak at their precision and a memory "
                                    "bandwidth, to calibrate the layout model on; leave history out to answer from "
                                    "the bundled LLM history, add such runs, or give the device's figures "
                                    "(perfmodel.hardware.register_device).")
    prior = dict(bundled().pipeline_.named_steps["regressor"].coef_)
    sub = LoadedHistory(runs, loaded.labels, np.ones(len(runs), dtype=bool),
                        hashlib.sha256(f"layout runs of {loaded.digest}".encode()).hexdigest())
    fitted = fit_history(sub, LAYOUT_METHOD, kind=kind,
                          regressor_params={"prior": prior, "prior_weight": CALIBRATION_PRIOR_WEIGHT})
    # the error book is indexed by distinct jobs calibrated on: repeats of one configuration teach one job
    config = [c for c in ("model", "seq_len", "gpu_count", "gpu_type", "precision", "micro_batch_size", "grad_accum",
                          "tp", "pp", "vp", "cp", "ep", "zero_stage", "recompute") if c in runs]
    jobs = runs[config].assign(**({"grad_accum": pd.to_numeric(runs["grad_accum"], errors="coerce").fillna(1)}
                                  if "grad_accum" in config else {}))
    jobs = jobs.astype(str).assign(step=step_global_batch(runs))  # the step's batch, however it is written
    fitted.calibration_runs_ = int(len(jobs.drop_duplicates()))
    return fitted
