"""Importers: turn other tools' training logs into perfmodel run records (pure Python + pandas, no torch).

- :func:`from_mlperf` — MLPerf Training results (``:::MLLOG`` logs + ``systems/*.json``).
"""

from __future__ import annotations

from .mlperf import from_mlperf

__all__ = ["from_mlperf"]
