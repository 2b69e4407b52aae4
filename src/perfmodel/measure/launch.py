"""Where a sweep runs: here (:func:`perfmodel.measure.sweep.run_local`) or on Slurm (:mod:`.slurm`).

The one public entry point, :func:`run_sweep`, sits above both launchers, so that the Slurm launcher depends on
the sweep (its ``RunConfig``, ``measure_run`` and record helpers) and nothing depends back on it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import pandas as pd

from ..store import history_target
from .sweep import RunConfig, run_local, sweep_configs

__all__ = ["run_sweep", "LAUNCHERS"]

LAUNCHERS = ("local", "slurm")


def run_sweep(configs: Iterable[RunConfig] | None = None, output: str | os.PathLike | None = None, *,
              models: Sequence | None = None, batch_sizes: Sequence[int] = (8,), gpu_counts: Sequence[int] = (1,),
              precisions: Sequence[str] = ("fp32",), repeats: int = 1, device: str = "cpu",
              timeout_s: float = 600.0, retry_failed: bool = False, progress: bool = True,
              launcher: str = "local", slurm=None, **run_options) -> pd.DataFrame:
    """Run each configuration and append its record to ``output`` as soon as it finishes.

    Parameters
    ----------
    configs : iterable of RunConfig, optional
        From :func:`sweep_configs` or :func:`default_sweep_configs`. Or give ``models`` instead.
    output : path or URL
        A history store (``runs.db``, ``postgresql://...``, ``"default"``) or a ``.csv``/``.parquet`` history;
        created if absent, appended to otherwise.
    models : sequence of str or callable, optional
        Instead of ``configs``: zoo names, ``hf:...`` specs, ``pkg.module:factory`` strings or factory callables
        (top-level functions; see :mod:`perfmodel.measure.workload` for the contract), swept over
        ``batch_sizes`` x ``gpu_counts`` x ``precisions`` x ``repeats`` on ``device`` with ``run_options``
        (:class:`RunConfig` fields such as ``steps``, ``max_seconds``, ``grad_accum``, ``optimizer``, ``name``).
    batch_sizes : sequence of int, default=(8,)
        With ``models``: the per-device batch sizes to sweep.
    gpu_counts : sequence of int, default=(1,)
        With ``models``: the device counts to sweep.
    precisions : sequence of str, default=("fp32",)
        With ``models``: the precisions to sweep.
    repeats : int, default=1
        With ``models``: how many times each configuration is run.
    device : str, default="cpu"
        With ``models``: the device type the runs use (``"cpu"``, ``"cuda"``, ...).
    timeout_s : float, default=600
        A run still going after this long is killed and recorded with ``status="timeout"``.
    retry_failed : bool, default=False
        Run again configurations whose earlier record failed (by default every recorded one is skipped).
    progress : bool, default=True
        Print a progress line (runs done, ETA) to stderr.
    launcher : {"local", "slurm"}, default="local"
        ``local`` runs each configuration here, one after the other (``torchrun`` for several devices or
        nodes); ``slurm`` submits each as a job through submitit (:mod:`perfmodel.measure.slurm`) and gathers
        the records as they finish.
    slurm : SlurmOptions, optional
        Partition, time limit, GPUs per node, account, ... (required with ``launcher="slurm"``).
    **run_options
        With ``models``: further :class:`RunConfig` fields for every configuration.

    Returns
    -------
    DataFrame
        The records written by this call.
    """
    if output is None:
        raise TypeError("run_sweep needs an output history path (output=...).")
    if (configs is None) == (models is None):
        raise TypeError("run_sweep takes either configs or models=[...], not both and not neither.")
    if configs is None:
        assert models is not None  # exactly one of configs and models (checked above)
        configs = sweep_configs(models, batch_sizes, gpu_counts, precisions=precisions, repeats=repeats,
                                device=device, **run_options)
    elif run_options:
        raise TypeError(f"run_sweep got run options {sorted(run_options)} with configs; they belong in RunConfig.")
    target = history_target(output)  # a Path for a file, else the URL or the store
    configs = list(configs)
    if launcher not in LAUNCHERS:
        raise ValueError(f"launcher must be 'local' or 'slurm'. Got {launcher!r}.")
    if launcher == "slurm":
        from .slurm import run_sweep_slurm

        return run_sweep_slurm(configs, target, slurm, timeout_s=timeout_s, retry_failed=retry_failed,
                               progress=progress)
    if slurm is not None:
        raise ValueError("slurm options are for launcher='slurm'.")
    return run_local(configs, target, timeout_s=timeout_s, retry_failed=retry_failed, progress=progress)
