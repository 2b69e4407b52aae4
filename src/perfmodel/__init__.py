"""perfmodel: predict the wall-clock time of deep-learning training jobs, with honest prediction intervals.

Public API (loaded lazily, so ``import perfmodel`` stays fast and never imports torch):

- :class:`Predictor` — a history, validated once and fitted lazily per kind of query: ``.predict()``,
  ``.predict_many()``, ``.recommend()``, ``.evaluate()``.
- :func:`predict_training_time`, :func:`predict_many` — plan a job (thin wrappers over a cached Predictor).
- :func:`fit`, :class:`TrainingTimeModel`, :func:`save_model`, :func:`load_model` — fit on a run history, save
  and load.
- :func:`load_runs`, :func:`save_runs`, :func:`append_runs` — read, validate and write run histories.
- :func:`get_spec`, :func:`resolve_gpu_type` — the hardware spec table.
- :func:`record` — record a real training loop (needs torch; ``perfmodel[measure]``).
"""

from __future__ import annotations

import importlib

from ._version import __version__  # noqa: E402,F401  (re-exported)

_EXPORTS = {
    "Predictor": "perfmodel.predictor",
    "predict_training_time": "perfmodel.predict",
    "predict_many": "perfmodel.predict",
    "fit": "perfmodel.predict",
    "TrainingTimePrediction": "perfmodel.predict",
    "TrainingTimeModel": "perfmodel.models",
    "load_model": "perfmodel.persistence",
    "save_model": "perfmodel.persistence",
    "load_runs": "perfmodel.io",
    "save_runs": "perfmodel.io",
    "append_runs": "perfmodel.io",
    "validate_runs": "perfmodel.schema",
    "get_spec": "perfmodel.hardware",
    "resolve_gpu_type": "perfmodel.hardware",
    "load_bundled_runs": "perfmodel.datasets",
    "record": "perfmodel.measure.recorder",
    "PerfModelError": "perfmodel.exceptions",
    "SchemaError": "perfmodel.exceptions",
    "UnknownHardwareError": "perfmodel.exceptions",
    "NotFittedError": "perfmodel.exceptions",
    "PredictionError": "perfmodel.exceptions",
    "ExtrapolationWarning": "perfmodel.exceptions",
    "DataQualityWarning": "perfmodel.exceptions",
}

__all__ = sorted(_EXPORTS) + ["__version__"]  # noqa: PLE0605 (a list, built from the lazy table)

#: Submodules reachable as attributes after ``import perfmodel`` (imported on first use: ``perfmodel.io``).
_SUBMODULES = ("io",)


def __getattr__(name: str):
    if name in _SUBMODULES:
        value = importlib.import_module(f"perfmodel.{name}")
        globals()[name] = value
        return value
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'perfmodel' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))
