"""The run histories bundled with perfmodel (measured by its own measurement code; see data/README.md).

The files are package data in ``perfmodel/data/`` and are found through :mod:`importlib.resources`, so they are
found the same way for ``pip install .``, ``pip install --user``, editable installs and a source checkout (whose
``data/`` is a link to ``src/perfmodel/data``). ``$PERFMODEL_DATA``, when set, names a folder searched first.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import pandas as pd

__all__ = ["bundled_runs_path", "bundled_data_dir", "load_bundled_runs", "BUNDLED_FILE"]

#: File name of the default history: CPU runs measured with ``perfmodel measure`` (data/README.md).
BUNDLED_FILE = "runs_cpu.csv"


def bundled_data_dir() -> Path:
    """Folder of the data files shipped inside the package (``perfmodel/data``).

    Returns
    -------
    pathlib.Path
        The folder, resolved through :func:`importlib.resources.files`.
    """
    return Path(str(resources.files("perfmodel").joinpath("data")))


def _candidates(name: str) -> list[Path]:
    out = []
    if os.environ.get("PERFMODEL_DATA"):
        out.append(Path(os.environ["PERFMODEL_DATA"]) / name)
    out.append(bundled_data_dir() / name)
    return out


def bundled_runs_path(name: str = BUNDLED_FILE) -> Path:
    """Path of a bundled data file.

    Parameters
    ----------
    name : str, default "runs_cpu.csv"
        File name inside the bundled data folder, e.g. ``"mlperf_steps.csv"`` or ``"prices.csv"``.

    Returns
    -------
    pathlib.Path
        The resolved path: ``$PERFMODEL_DATA/<name>`` when that file exists, else the package's own copy.

    Raises
    ------
    FileNotFoundError
        When neither holds the file; the message lists where it looked.
    """
    for path in _candidates(name):
        if path.is_file():
            return path.resolve()
    raise FileNotFoundError(
        f"Bundled run history {name!r} not found; looked in: {', '.join(str(p) for p in _candidates(name))}. "
        "Set PERFMODEL_DATA to the folder holding it, or pass history=... explicitly."
    )


def load_bundled_runs(name: str = BUNDLED_FILE, *, include_failed: bool = False) -> pd.DataFrame:
    """Load and validate a bundled history.

    Parameters
    ----------
    name : str, default "runs_cpu.csv"
        File name of the bundled history (see :func:`bundled_runs_path`).
    include_failed : bool, default False
        Keep runs whose ``status`` is not ``ok`` (out of memory, errors, timeouts).

    Returns
    -------
    pandas.DataFrame
        The validated runs, one row per run.
    """
    from .io import load_runs

    return load_runs(bundled_runs_path(name), include_failed=include_failed)
