"""The run histories bundled with perfmodel (measured by its own measurement code; see data/README.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pandas as pd

__all__ = ["bundled_runs_path", "load_bundled_runs", "BUNDLED_FILE"]

#: File name of the default history: CPU runs measured with ``perfmodel measure`` (data/README.md).
BUNDLED_FILE = "runs_cpu.csv"


def _candidates(name: str) -> list[Path]:
    here = Path(__file__).resolve()
    out = []
    if os.environ.get("PERFMODEL_DATA"):
        out.append(Path(os.environ["PERFMODEL_DATA"]) / name)
    out.append(here.parents[2] / "data" / name)  # a source checkout / editable install
    out.append(Path(sys.prefix) / "share" / "perfmodel" / "data" / name)  # pip install (data-files)
    return out


def bundled_runs_path(name: str = BUNDLED_FILE) -> Path:
    """Path of a bundled history file (``$PERFMODEL_DATA`` first, then the checkout, then the install prefix)."""
    for path in _candidates(name):
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"Bundled run history {name!r} not found; looked in: {', '.join(str(p) for p in _candidates(name))}. "
        "Set PERFMODEL_DATA to the folder holding it, or pass history=... explicitly."
    )


def load_bundled_runs(name: str = BUNDLED_FILE, *, include_failed: bool = False) -> pd.DataFrame:
    """Load and validate a bundled history."""
    from .io import load_runs

    return load_runs(bundled_runs_path(name), include_failed=include_failed)
