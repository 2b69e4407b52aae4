"""Turn run history that lives elsewhere into perfmodel run records.

- :func:`from_mlflow` — finished runs of an MLflow tracking store or server (extra ``mlflow``).
- :func:`from_hf_output_dirs` — Hugging Face Trainer output dirs (plain JSON; no extra).

Each returns an :class:`ImportResult` (the records, and a reason for every run it skipped) and, given
``output=``, appends the new records to a history atomically, once per source run.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "from_mlflow": "perfmodel.importers.mlflow",
    "from_hf_output_dirs": "perfmodel.importers.hf_output",
    "ImportResult": "perfmodel.importers._records",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'perfmodel.importers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
