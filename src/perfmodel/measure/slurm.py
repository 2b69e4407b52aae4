"""Sweeps fanned out over a Slurm cluster through ``submitit`` (optional extra ``slurm``).

Each configuration is one job. The job runs :func:`~perfmodel.measure.sweep.measure_run` on its node (the worker
process, or ``torchrun --standalone`` for several GPUs) and writes its record, with the Slurm job id, as JSON into
``<folder>/records/<config digest>.json``. The submitting process gathers those files into the history as they
appear (atomic appends under the history's lock), so the history never holds half a record. When the history is
a PostgreSQL store (``postgresql://...``), each job also appends its own record, from its node, in one
transaction: many nodes write to the one history at once, and a record is in it even if the submitting process
is gone; the gathering then appends by ``run_id``, so such a record is stored once.

Resume: the job ids go to ``<folder>/jobs.jsonl`` as they are submitted. A sweep started again after a crash
skips configurations already in the history, gathers records that finished while it was away, reattaches to jobs
still queued or running (on Slurm), and submits the rest.

A job that ends without a record (time limit, node failure, preemption) is recorded as ``timeout`` or ``error``
with the scheduler's state, and the sweep goes on.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._atomic import atomic_write_bytes
from .._validation import check_positive_int

__all__ = ["SlurmOptions", "run_slurm", "run_sweep_slurm"]

logger = logging.getLogger(__name__)

CLUSTERS = ("auto", "slurm", "local", "debug")


@dataclass(frozen=True)
class SlurmOptions:
    """Where and how the jobs run.

    Parameters
    ----------
    partition : str
        Slurm partition (``--partition``).
    time_min : int
        Time limit of each job, in minutes (``--time``); a run still going a minute before it is killed.
    gpus_per_node : int, default=1
        GPUs per job's node; a configuration gets ``min(gpu_count, gpus_per_node)``. Must cover ``gpu_count``.
    account : str, optional
        Slurm account (``--account``).
    cpus_per_task : int, default=8
        CPU cores per job.
    folder : path, optional
        Logs, job ids and records (default: ``<output>.slurm`` beside the history).
    cluster : {"auto", "slurm", "local", "debug"}, default="auto"
        submitit's executor: ``auto`` uses Slurm where ``sbatch`` exists; ``local`` runs the jobs as local processes
        (for tests and for a dry run of the whole path on one machine).
    gpu_type : str, optional
        The partition's GPU, used only for records of jobs that died without reporting their device.
    poll_s : float, default=5
        How often to look for finished jobs.
    """

    partition: str
    time_min: int
    gpus_per_node: int = 1
    account: str | None = None
    cpus_per_task: int = 8
    folder: str | None = None
    cluster: str = "auto"
    gpu_type: str | None = None
    poll_s: float = 5.0

    def __post_init__(self):
        where = "SlurmOptions"
        if not isinstance(self.partition, str) or not self.partition.strip():
            raise ValueError(f"The 'partition' parameter of {where} must be a non-empty str. Got {self.partition!r}.")
        check_positive_int(self.time_min, "time_min", where)
        check_positive_int(self.gpus_per_node, "gpus_per_node", where)
        check_positive_int(self.cpus_per_task, "cpus_per_task", where)
        if self.cluster not in CLUSTERS:
            raise ValueError(f"The 'cluster' parameter of {where} must be one of {', '.join(CLUSTERS)}. "
                             f"Got {self.cluster!r}.")
        if not (self.poll_s > 0):
            raise ValueError(f"The 'poll_s' parameter of {where} must be positive. Got {self.poll_s!r}.")


def _slurm_job(cfg_fields: dict, record_path: str, sweep_id: str, timeout_s: float, store: str | None = None) -> str:
    """What one job runs on its node: measure, append the record to ``store`` (a PostgreSQL URL) if given, then
    write the record (with the job id) atomically."""
    from .sweep import RunConfig, append_steps, flag_timing, measure_run, repeat_medians

    cfg = RunConfig(**cfg_fields)
    rec, times = measure_run(cfg, timeout_s=timeout_s, sweep_id=sweep_id)
    assert rec is not None  # one node (run_slurm refuses multi-node runs): never a follower's None
    try:
        import submitit

        rec["job_id"] = str(submitit.JobEnvironment().job_id)
    except Exception:  # not under submitit (called directly)
        rec["job_id"] = os.environ.get("SLURM_JOB_ID")
    rec["launcher"] = "slurm"
    if store is not None:
        from ..io import append_new_runs

        flag_timing(rec, repeat_medians(store))  # against the repeats already in the shared history
        append_new_runs(rec, store, key="run_id")
        append_steps(store, rec["run_id"], times)
        rec["stored"] = True
    rec["step_times_s"] = times
    atomic_write_bytes(record_path, json.dumps(rec).encode("utf-8"))
    return rec["status"]


def _executor(opts: SlurmOptions, folder: Path):
    try:
        import submitit
    except ImportError:
        raise ImportError("--launcher slurm needs the 'slurm' extra: pip install 'perfmodel[slurm]' "
                          "(installs submitit)") from None
    cluster = None if opts.cluster == "auto" else opts.cluster
    ex = submitit.AutoExecutor(folder=str(folder / "logs" / "%j"), cluster=cluster)
    params = {"timeout_min": int(opts.time_min), "nodes": 1, "tasks_per_node": 1,
              "cpus_per_task": int(opts.cpus_per_task), "name": "perfmodel-measure",
              "slurm_partition": opts.partition}
    if opts.account:
        params["slurm_account"] = opts.account
    ex.update_parameters(**params)
    return ex


def _reattach(opts: SlurmOptions, folder: Path, job_id: str):
    """A job submitted by an earlier (crashed) sweep, if the scheduler can still be asked about it."""
    if opts.cluster == "local" or opts.cluster == "debug":
        return None  # local jobs belong to the process that started them
    try:
        import submitit

        return submitit.SlurmJob(folder=str(folder / "logs" / "%j"), job_id=str(job_id))
    except Exception as exc:  # no sacct here, say
        logger.info("cannot reattach to job %s (%s); resubmitting", job_id, exc)
        return None


def _read_jobs(path: Path) -> dict[str, str]:
    jobs = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            jobs[entry["digest"]] = entry["job_id"]
    return jobs


def run_slurm(todo: list, output: Path, opts: SlurmOptions, *, sweep_id: str, timeout_s: float = 600.0,
              progress: bool = True, total: int | None = None, existing=None) -> list[dict]:
    """Submit each configuration of ``todo`` as a job, gather the records into ``output``; return them.

    Each configuration is one single-node job. A job submitted by an earlier, interrupted sweep (its id is in
    ``<folder>/jobs.jsonl``) is re-attached, and a record it already wrote is gathered, instead of submitting
    again. A job that ends without a record is recorded as ``status="timeout"`` or ``"error"``. Ctrl-C stops
    waiting (the jobs keep running; the same sweep run again gathers them) and propagates.

    Parameters
    ----------
    todo : list of RunConfig
        The configurations to run (none multi-node; on CUDA, none with more devices than ``gpus_per_node``).
    output : Path
        The history the records are appended to as they arrive.
    opts : SlurmOptions
        Partition, time limit, GPUs per node, ...
    sweep_id : str
        The sweep's id, recorded with each run.
    timeout_s : float, default=600.0
        Each run's time limit on its node, capped at the job's time limit less a minute (and at least 30 s).
    progress : bool, default=True
        Print a line per submitted job and per gathered record to stderr.
    total : int, optional
        The sweep's size, skipped configurations included, for the progress count; default ``len(todo)``.
    existing : DataFrame, optional
        The history already in ``output``, when the caller has read it (for the repeats' timing flag).

    Returns
    -------
    list of dict
        The records written by this call.

    Raises
    ------
    ValueError
        A multi-node configuration, or one needing more GPUs than a node has.
    """
    from .sweep import repeat_medians

    _check_single_node(todo, opts)
    folder = _job_folder(opts, output)
    records = folder / "records"
    records.mkdir(parents=True, exist_ok=True)
    jobs_file = folder / "jobs.jsonl"
    known_jobs = _read_jobs(jobs_file)
    job_timeout = max(30.0, min(timeout_s, opts.time_min * 60.0 - 60.0))
    ex = None
    pending: dict[str, tuple] = {}  # digest -> (cfg, job or None)
    total = total or len(todo)
    gather = _Gatherer(records, output, opts, sweep_id, medians=repeat_medians(output, existing),
                       progress=progress, total=total, done_before=total - len(todo))
    # a PostgreSQL store: every job appends its own record from its node (a SQLite file or CSV is appended to
    # here only: SQLite's locks need one machine)
    shared = output if isinstance(output, str) and output.lower().startswith(("postgres", "postgresql")) else None

    for cfg in todo:
        digest = cfg.digest() + f"-r{cfg.repeat}"
        if gather(cfg, digest, None):  # finished while an earlier sweep was away
            continue
        job = _reattach(opts, folder, known_jobs[digest]) if digest in known_jobs else None
        if job is not None and not job.done():
            pending[digest] = (cfg, job)
            continue
        if ex is None:
            ex = _executor(opts, folder)
        gpus = min(cfg.gpu_count, opts.gpus_per_node) if cfg.device == "cuda" else 0
        ex.update_parameters(gpus_per_node=gpus)
        job = ex.submit(_slurm_job, asdict(cfg), str(records / f"{digest}.json"), sweep_id, job_timeout, shared)
        _note_job(jobs_file, digest, cfg, job)
        pending[digest] = (cfg, job)
        if progress:
            print(f"submitted {cfg.record_name} batch={cfg.batch_size} n={cfg.gpu_count} {cfg.precision} "
                  f"rep={cfg.repeat}: job {job.job_id}", file=sys.stderr, flush=True)
    _wait(pending, gather, opts.poll_s, jobs_file, progress)
    return gather.written


def _check_single_node(todo: list, opts: SlurmOptions) -> None:
    """Refuse a multi-node configuration, or one needing more GPUs than a node has."""
    for cfg in todo:
        if cfg.nnodes > 1:
            raise ValueError("--launcher slurm runs each configuration on one node; multi-node runs go through "
                             "torchrun (--nnodes with --launcher local, started on every node).")
        if cfg.gpu_count > opts.gpus_per_node and cfg.device == "cuda":
            raise ValueError(f"gpu_count {cfg.gpu_count} exceeds gpus_per_node {opts.gpus_per_node}: each "
                             "configuration is one single-node job.")


def _job_folder(opts: SlurmOptions, output) -> Path:
    """The folder of the jobs' logs, ids and records."""
    if opts.folder:
        return Path(opts.folder)
    if isinstance(output, Path):
        return output.with_name(output.name + ".slurm")
    return Path.cwd() / "perfmodel.slurm"  # a store URL: the jobs' logs and records go here, where the sweep runs


def _note_job(jobs_file: Path, digest: str, cfg, job) -> None:
    """Append a submitted job's id to ``jobs.jsonl`` (what a resumed sweep reattaches to)."""
    with open(jobs_file, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"digest": digest, "job_id": str(job.job_id), "model": cfg.record_name,
                             "batch_size": cfg.batch_size, "submitted_at": time.time()}) + "\n")


def _wait(pending: dict[str, tuple], gather: _Gatherer, poll_s: float, jobs_file: Path, progress: bool) -> None:
    """Gather the pending jobs' records as they finish. Ctrl-C stops waiting (the jobs keep running) and
    propagates."""
    try:
        while pending:
            for digest, (cfg, job) in list(pending.items()):
                if gather(cfg, digest, job):
                    del pending[digest]
            if pending:
                time.sleep(poll_s)
    except KeyboardInterrupt:
        if progress:
            print(f"interrupted: {len(pending)} jobs still queued or running; run the same sweep again to gather "
                  "them (job ids in " + str(jobs_file) + ")", file=sys.stderr)
        raise


@dataclass
class _Gatherer:
    """Turns a job's record file, or a job that ended without one, into a history record: appended to
    ``output`` (unless the job stored it itself), timing-flagged against the earlier repeats in ``medians``,
    kept in :attr:`written` and reported on stderr."""

    records: Path
    output: Any  # the history: a Path, or a store URL
    opts: SlurmOptions
    sweep_id: str
    medians: dict[tuple, list[float]]
    progress: bool
    total: int
    done_before: int
    written: list[dict] = field(default_factory=list)

    def __call__(self, cfg, digest: str, job) -> bool:
        """Gather the record of ``cfg`` (``job``: its job, or None before any was submitted); False while there
        is none yet."""
        found = self._read(cfg, digest, job)
        if found is None:
            return False
        rec, times, stored = found
        self._keep(rec, times, stored)
        self.written.append(rec)
        if self.progress:
            what = (f"{rec['step_time_s']:.4g} s/step" if rec["status"] == "ok"
                    else f"{rec['status']}: {str(rec.get('error'))[:60]}")
            print(f"[{self.done_before + len(self.written):>4}/{self.total}] {cfg.record_name} "
                  f"batch={cfg.batch_size} n={cfg.gpu_count} {cfg.precision} rep={cfg.repeat} "
                  f"(job {rec.get('job_id')}): {what}", file=sys.stderr, flush=True)
        return True

    def _read(self, cfg, digest: str, job) -> tuple[dict, list, bool] | None:
        """``(record, step times, stored by the job)``: the job's record file, or a failure record for a job
        that is done without one; None while neither."""
        path = self.records / f"{digest}.json"
        if path.exists():
            with open(path, encoding="utf-8") as fh:
                rec = json.load(fh)
            return rec, rec.pop("step_times_s", []), rec.pop("stored", False)
        if job is not None and job.done():
            return self._failed(cfg, job), [], False
        return None

    def _failed(self, cfg, job) -> dict:
        """The record of a job that ended without writing one (time limit, node failure, preemption)."""
        from .sweep import base_record, finish_record

        state = getattr(job, "state", "UNKNOWN")
        rec = base_record(cfg, self.opts.gpu_type or ("cpu" if cfg.device == "cpu" else "unknown"), self.sweep_id)
        status = "timeout" if "TIMEOUT" in str(state).upper() else "error"
        try:
            exc = job.exception()
        except Exception as e:  # the scheduler could not say
            exc = e
        first = str(exc).strip().splitlines()[0] if exc else ""
        rec.update(status=status, error=f"job {job.job_id} ended in state {state} without a record"
                   + (f": {first[:300]}" if first else ""), job_id=str(job.job_id), launcher="slurm")
        return finish_record(rec)

    def _keep(self, rec: dict, times: list, stored: bool) -> None:
        """Append ``rec`` and its step times to the history, unless the job stored it itself."""
        from ..io import append_new_runs
        from ._timing import config_key
        from .sweep import append_steps, flag_timing

        if stored:  # the job appended it to the shared store itself (its timing flagged there): nothing twice
            median = rec.get("step_time_median_s")
            if rec.get("status") == "ok" and isinstance(median, (int, float)) and math.isfinite(median):
                self.medians.setdefault(config_key(rec), []).append(float(median))
            return
        flag_timing(rec, self.medians)
        if rec.get("gpu_type") == "unknown":  # a job that died before it knew its device: kept unvalidated
            from ..io import append_runs

            append_runs(rec, self.output, validate=False)
        elif append_new_runs(rec, self.output, key="run_id")[0]:
            append_steps(self.output, rec["run_id"], times)


def run_sweep_slurm(configs: list, output: Path, slurm, *, timeout_s: float, retry_failed: bool,
                    progress: bool):
    """Resume-aware Slurm sweep: skip configurations already in ``output``, submit the rest (:func:`run_slurm`).

    Parameters
    ----------
    configs : list of RunConfig
        The sweep's configurations.
    output : Path
        ``.csv`` or ``.parquet`` history; configurations already recorded there (on any device) are skipped.
    slurm : SlurmOptions
        Where and how the jobs run.
    timeout_s : float
        Each run's time limit (see :func:`run_slurm`).
    retry_failed : bool
        Run again configurations whose earlier record failed.
    progress : bool
        Print progress lines to stderr.

    Returns
    -------
    DataFrame
        The records written by this call (what :func:`perfmodel.measure.run_sweep` returns).

    Raises
    ------
    TypeError
        ``slurm`` is not a :class:`SlurmOptions`.
    """
    import pandas as pd

    from .sweep import done_keys, read_existing

    if not isinstance(slurm, SlurmOptions):
        raise TypeError("launcher='slurm' needs slurm=SlurmOptions(partition=..., time_min=...). "
                        f"Got {type(slurm).__name__}.")

    def anywhere(key: tuple) -> tuple:  # the device is known only on the compute node
        return key[:4] + key[5:]

    existing = read_existing(output)  # read once: what to skip, and (in run_slurm) the earlier repeats' medians
    done = {anywhere(k) for k in done_keys(output, retry_failed, existing)}
    todo = [c for c in configs if anywhere(c.key("*")) not in done]
    if progress and len(todo) < len(configs):
        print(f"resuming: {len(configs) - len(todo)} of {len(configs)} configurations already in {output}",
              file=sys.stderr)
    written = run_slurm(todo, output, slurm, sweep_id=uuid.uuid4().hex[:8], timeout_s=timeout_s,
                        progress=progress, total=len(configs), existing=existing)
    return pd.DataFrame(written)
