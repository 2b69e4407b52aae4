"""Saving and loading fitted models.

Files are joblib (pickle) files wrapped with the perfmodel version and the feature schema. Unpickling can run
code: load only model files you made or trust.
"""

from __future__ import annotations

import os
from pathlib import Path

import joblib

from . import __version__

__all__ = ["save_model", "load_model"]

_FORMAT = "perfmodel-model/1"


def save_model(model, path) -> Path:
    """Write a fitted :class:`~perfmodel.models.TrainingTimeModel` to ``path`` (atomically)."""
    from .models import TrainingTimeModel

    if not isinstance(model, TrainingTimeModel):
        raise TypeError(f"save_model expects a fitted TrainingTimeModel. Got {type(model).__name__}.")
    model._check()
    path = Path(path)
    payload = {"format": _FORMAT, "perfmodel_version": __version__, "method": model.method,
               "features": model.feature_names_, "model": model}
    tmp = path.with_name(f".{path.name}.tmp")
    joblib.dump(payload, tmp)
    os.replace(tmp, path)
    return path


def load_model(path):
    """Load a model written by :func:`save_model`.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not a perfmodel model file, or was written by an incompatible perfmodel version.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Model file {str(path)!r} does not exist.")
    try:
        payload = joblib.load(path)
    except Exception as exc:
        raise ValueError(f"{str(path)!r} is not a readable perfmodel model file ({type(exc).__name__}: {exc}).") from None
    if not isinstance(payload, dict) or payload.get("format") != _FORMAT:
        raise ValueError(f"{str(path)!r} is not a perfmodel model file (expected format {_FORMAT}).")
    saved = str(payload.get("perfmodel_version", "?"))
    if saved.split(".")[:2] != __version__.split(".")[:2]:
        raise ValueError(
            f"{str(path)!r} was saved by perfmodel {saved}; this is perfmodel {__version__}. Refit the model "
            "with this version (perfmodel fit RUNS -o MODEL)."
        )
    return payload["model"]
