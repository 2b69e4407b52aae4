"""Turn run history that lives elsewhere into perfmodel run records (pure Python + pandas, no torch).

- :func:`from_mlperf` — MLPerf Training results (``:::MLLOG`` logs + ``systems/*.json``).
- :func:`from_mlflow` — finished runs of an MLflow tracking store or server (extra ``mlflow``).
- :func:`from_hf_output_dirs` — Hugging Face Trainer output dirs (plain JSON; no extra).

``from_mlflow`` and ``from_hf_output_dirs`` return an :class:`ImportResult` (the records, and a reason for every
run they skipped) and, given ``output=``, append the new records to a history atomically, once per source run.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "from_mlperf": "perfmodel.importers.mlperf",
    "from_mlflow": "perfmodel.importers.mlflow",
    "from_hf_output_dirs": "perfmodel.importers.hf_output",
    "ImportResult": "perfmodel.importers._records",
}

__all__ = sorted(_EXPORTS)  # noqa: PLE0605 (a list, built from the lazy table)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'perfmodel.importers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
