"""Measure real torch training runs (needs the ``measure`` extra: torch, nvidia-ml-py).

This subpackage is the only part of perfmodel that imports torch, and it does so lazily: importing
``perfmodel.measure`` is cheap; the zoo, the worker and the recorder import torch when used.
"""

from __future__ import annotations

__all__ = ["RunConfig", "measure_run", "run_sweep", "sweep_configs", "default_sweep_configs", "DEFAULT_SWEEP",
           "record", "SlurmOptions", "add_op_features", "count_ops", "OpFeatures", "ZOO_SWEEP", "CALIBRATION_SWEEP",
           "zoo_sweep_configs", "calibration_configs", "describe_layout_model"]

_PLANS = ("ZOO_SWEEP", "CALIBRATION_SWEEP", "zoo_sweep_configs", "calibration_configs")


def __getattr__(name):
    if name == "record":
        from .recorder import record

        return record
    if name == "run_sweep":
        from .launch import run_sweep

        return run_sweep
    if name in ("add_op_features", "count_ops", "OpFeatures"):
        from . import opcount

        return getattr(opcount, name)
    if name == "describe_layout_model":
        from ._layout_worker import describe_layout_model

        return describe_layout_model
    if name == "SlurmOptions":
        from .slurm import SlurmOptions

        return SlurmOptions
    if name in _PLANS:
        from . import plans

        return getattr(plans, name)
    if name in __all__:
        from . import sweep

        return getattr(sweep, name)
    raise AttributeError(f"module 'perfmodel.measure' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
