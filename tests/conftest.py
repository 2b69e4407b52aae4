"""Shared fixtures. Generated histories here are for tests only (never bundled as measurements)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest


def make_history(n_models: int = 8, seed: int = 0, noise: float = 0.05, noise_seed: int | None = None) -> pd.DataFrame:
    """A generated history with a known power law: step = 2e-9 * flops_step^0.9 * n^0.1 * lognormal noise.

    ``seed`` draws the models; ``noise_seed`` (default: ``seed``) the noise, so two calls with one ``seed`` and
    two ``noise_seed`` give the same configurations measured twice.
    """
    rng = np.random.default_rng(seed)
    nrng = np.random.default_rng(seed if noise_seed is None else noise_seed + 10_000)
    rows = []
    for m in range(n_models):
        params = int(10 ** rng.uniform(4, 7))
        fps = 6.0 * params * rng.uniform(5, 50)
        for b in (8, 16, 32, 64):
            for n in (1, 2, 4):
                t = 2e-9 * (fps * b) ** 0.9 * n**0.1 * np.exp(nrng.normal(0, noise))
                rows.append({"model": f"m{m}", "params": params, "flops_per_sample": fps, "batch_size": b,
                             "gpu_count": n, "gpu_type": "A100", "precision": "fp32", "step_time_s": t})
    return pd.DataFrame(rows)


#: The package's source folder, put first on the ``PYTHONPATH`` of the subprocesses the tests start.
SRC = str(Path(__file__).resolve().parents[1] / "src")


def cli(*args, **kw):
    """Run ``python -m perfmodel ARGS`` from the source tree; the completed process (text output captured)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "perfmodel", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=kw.get("timeout", 300))


def assert_one_line_error(proc, pattern=""):
    """The CLI failed with exit status 2 and one ``perfmodel: error:`` line (matching ``pattern``), no traceback."""
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("perfmodel: error:"), proc.stderr
    assert "Traceback" not in proc.stderr
    if pattern:
        import re

        assert re.search(pattern, lines[0]), lines[0]


#: A tiny real sweep (4 configurations, 3 timed steps each) run through the CLI.
def tiny_sweep_command(output) -> list:
    import sys

    return [sys.executable, "-m", "perfmodel", "measure", "--models", "mlp-xs,lstm-s", "--batch-sizes", "2,4",
            "--steps", "3", "--output", str(output)]


def wait_for_records(path, n: int = 1, timeout: float = 120.0) -> None:
    """Poll a history file until it holds at least ``n`` records (or the timeout passes)."""
    import time

    from perfmodel.io import read_raw_history

    deadline = time.time() + timeout
    while time.time() < deadline and not (path.exists() and len(read_raw_history(path)) >= n):
        time.sleep(0.1)


@pytest.fixture
def history() -> pd.DataFrame:
    return make_history()


@pytest.fixture(autouse=True, scope="session")
def _private_model_cache(tmp_path_factory):
    """Fitted-model disk cache in a temporary directory (never the user's), inherited by CLI subprocesses."""
    import os

    old = os.environ.get("PERFMODEL_CACHE_DIR")
    os.environ["PERFMODEL_CACHE_DIR"] = str(tmp_path_factory.mktemp("model_cache"))
    yield
    if old is None:
        os.environ.pop("PERFMODEL_CACHE_DIR", None)
    else:
        os.environ["PERFMODEL_CACHE_DIR"] = old


@pytest.fixture(autouse=True, scope="session")
def _private_default_store(tmp_path_factory):
    """The default history store (``PERFMODEL_HISTORY``) in a temporary directory, never the user's data folder."""
    import os

    old = os.environ.get("PERFMODEL_HISTORY")
    os.environ["PERFMODEL_HISTORY"] = str(tmp_path_factory.mktemp("default_store") / "runs.db")
    yield
    if old is None:
        os.environ.pop("PERFMODEL_HISTORY", None)
    else:
        os.environ["PERFMODEL_HISTORY"] = old
