"""Sweeps of measured training runs: each configuration in its own process, appended to the history at once.

* Each run is a subprocess (``python -m perfmodel.measure._worker``, or ``torchrun --standalone`` for
  ``gpu_count > 1``), so a crash, an out-of-memory error or a hang is recorded (``status`` ``error``/``oom``/
  ``timeout``) and the sweep goes on.
* Each finished run is appended atomically to the output history: Ctrl-C or a crash loses at most the run in
  flight. Per-step times go into the store (``perfmodel_steps``), or for a CSV/Parquet history to a sidecar
  ``<output>.steps.jsonl``, keyed by ``run_id``.
* Re-running the same sweep resumes: configurations already in the output (same model, batch size, device
  count, precision, device type, repeat index, gradient accumulation, optimizer, compile, activation
  checkpointing and sequence length) are skipped.
* A model is a zoo name, ``hf:<type>[?overrides]`` or a bring-your-own ``pkg.module:factory`` (see
  :mod:`perfmodel.measure.workload` for the factory contract); :func:`perfmodel.measure.run_sweep` (in
  :mod:`perfmodel.measure.launch`) also takes factory callables.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from .._atomic import check_writable
from .._validation import check_positive_float, check_positive_int
from .._version import __version__
from ..exceptions import LayoutError
from ..hardware import PRECISIONS, resolve_gpu_type
from ..io import append_runs, check_history_target
from ..store import history_target
from . import _lifeline

# the history a sweep resumes from and keeps per-step times beside (importable from here, as before)
from ._resume import append_steps, done_keys, flag_timing, read_existing, repeat_medians
from ._worker import ERROR_PREFIX
from .layouts import LAYOUT_MODELS, PP_SCHEDULES, is_layout_model, layout_run_problems, layout_shape
from .workload import check_model_spec, default_model_name, factory_spec, model_kind
from .zoo import ZOO, default_seq_len

__all__ = ["RunConfig", "measure_run", "run_local", "sweep_configs", "default_sweep_configs", "DEFAULT_SWEEP"]

logger = logging.getLogger(__name__)

_RECORD_KEYS = (
    "params", "flops_per_sample", "flops_method", "family", "threads_per_worker", "step_time_s",
    "step_time_median_s", "step_time_std_s", "step_time_cv", "step_time_ci_rel", "timing_flag", "steps_timed",
    "warmup_steps", "stop_reason", "samples_per_s", "startup_s", "wall_time_s", "steps", "gpu_name", "gpu_mem_total_bytes",
    "gpu_mem_peak_bytes", "peak_mem_bytes", "mem_source", "gpu_util_mean_pct", "mem_util_mean_pct",
    "power_mean_w", "driver_version",
    "cuda_version", "cpu_model", "cpu_cores", "hostname", "torch_version", "python_version", "protocol",
    "model_source", "seq_len", "precision", "grad_accum", "optimizer", "compiled", "activation_checkpointing",
    "nodes", "launcher",
    # layout runs (perfmodel.measure.layouts): the layout and shape columns of perfmodel.schema
    "global_batch_size", "micro_batch_size", "tp", "pp", "vp", "cp", "ep", "dp", "zero_stage", "sequence_parallel",
    "recompute", "gpus_per_node", "n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "ffn_hidden",
    "gated_mlp", "tied_embeddings", "vocab", "n_experts", "active_params",
)
OPTIMIZERS = ("adamw", "sgd")


@dataclass(frozen=True)
class RunConfig:
    """One measured run. ``batch_size`` is per device (per micro-batch with ``grad_accum``); ``gpu_count`` is
    devices (CPU: worker processes).

    A layout decoder (:data:`perfmodel.measure.layouts.LAYOUT_MODELS`) runs split ``tp x pp x dp`` over the
    ``gpu_count`` processes (:mod:`perfmodel.measure.layouts`); its ``batch_size`` is the micro-batch of one model
    replica (``tp x pp`` devices) and ``grad_accum`` the micro-batches per step (the pipeline's micro-batches when
    ``pp > 1``), so that the global batch is ``batch_size x grad_accum x dp``.

    ``model`` is a zoo name, ``hf:<type>[?k=v&...]`` or ``pkg.module:factory``; ``name`` replaces it in the
    record. ``seq_len`` sets the sequence length of Hugging Face models (default 128) and of the zoo's sequence
    models. ``grad_accum`` is micro-batches per optimizer step; ``optimizer`` is ``adamw`` or ``sgd``;
    ``compile`` wraps the model in ``torch.compile`` (compilation counts to ``startup_s``);
    ``activation_checkpointing`` turns it on where the model supports it (the record says whether it ran).

    Attributes
    ----------
    model : str
        A zoo name, ``hf:<type>[?k=v&...]`` or ``pkg.module:factory`` spec; a factory callable given here is
        turned into its spec (:func:`~perfmodel.measure.workload.factory_spec`).
    batch_size : int
        Samples per device per micro-batch.
    gpu_count : int, default=1
        Devices over all nodes (on the CPU: worker processes).
    precision : str, default="fp32"
        One of ``perfmodel.hardware.PRECISIONS`` except ``fp8``; on the CPU only ``fp32`` or ``bf16``.
    device : {"cpu", "cuda"}, default="cpu"
        The device type of the run.
    repeat : int, default=0
        The repeat index (part of the resume key: repeats are distinct runs).
    steps : int, optional
        Exactly this many timed steps; by default timing stops by ``ci_target``, ``max_steps`` or ``max_seconds``.
    max_seconds : float, default=30.0
        Stop timing once the timed steps add up to this many seconds (and at least two were timed).
    ci_target : float, default=0.02
        Stop timing once the 95% confidence half-width of the mean step time is this fraction of the mean.
    min_steps : int, default=5
        Timed steps before ``ci_target`` may stop the timing.
    max_steps : int, default=500
        At most this many timed steps.
    warmup_steps : int, default=3
        Untimed steps before timing starts.
    threads : int, optional
        Torch threads per CPU worker; default the host's cores divided by the workers on the node.
    knobs : dict
        Size parameters for a zoo model (:func:`perfmodel.measure.zoo.build`).
    name : str, optional
        The record's ``model`` in place of the spec.
    seq_len : int, optional
        Sequence length of a Hugging Face model (default 128) or a zoo sequence model (default its own).
    grad_accum : int, default=1
        Micro-batches per optimizer step.
    optimizer : {"adamw", "sgd"}, default="adamw"
        The optimizer stepped.
    compile : bool, default=False
        Wrap the model in ``torch.compile`` (compilation counts to ``startup_s``).
    activation_checkpointing : bool, default=False
        Turn activation checkpointing on where the model supports it.
    nnodes : int, default=1
        Nodes the run spans; ``gpu_count`` must be a multiple of it.
    rdzv_endpoint : str, optional
        ``host:port`` of torchrun's c10d rendezvous; required with ``nnodes > 1``, refused otherwise.
    rdzv_id : str, default="perfmodel"
        torchrun's rendezvous id for a multi-node run.
    tp : int, default=1
        Tensor-parallel degree (layout decoders only).
    pp : int, default=1
        Pipeline-parallel degree (layout decoders only).
    sequence_parallel : bool, default=False
        Sequence parallelism in the tensor-parallel norms (layout decoders with ``tp > 1``).
    pp_schedule : {"1f1b", "gpipe"}, default="1f1b"
        The pipeline schedule (``torch.distributed.pipelining``'s ``Schedule1F1B`` or ``ScheduleGPipe``); 1F1B
        needs at least ``pp`` micro-batches (``grad_accum``). Not part of the resume key (no column records it;
        the record's ``protocol`` names it).

    Raises
    ------
    TypeError, ValueError
        A field out of range or of the wrong type (checked on construction).
    """

    model: str
    batch_size: int
    gpu_count: int = 1
    precision: str = "fp32"
    device: str = "cpu"
    repeat: int = 0
    steps: int | None = None
    max_seconds: float = 30.0
    ci_target: float = 0.02
    min_steps: int = 5
    max_steps: int = 500
    warmup_steps: int = 3
    threads: int | None = None
    knobs: dict = field(default_factory=dict)
    name: str | None = None
    seq_len: int | None = None
    grad_accum: int = 1
    optimizer: str = "adamw"
    compile: bool = False
    activation_checkpointing: bool = False
    nnodes: int = 1
    rdzv_endpoint: str | None = None
    rdzv_id: str = "perfmodel"
    tp: int = 1
    pp: int = 1
    sequence_parallel: bool = False
    pp_schedule: str = "1f1b"

    def __post_init__(self):
        where = "RunConfig"
        if callable(self.model) and not isinstance(self.model, str):
            object.__setattr__(self, "model", factory_spec(self.model))
        check_model_spec(self.model, where)
        if self.name is not None and (not isinstance(self.name, str) or not self.name.strip()):
            raise TypeError(f"The 'name' parameter of {where} must be a non-empty str or None. Got {self.name!r}.")
        check_positive_int(self.seq_len, "seq_len", where, allow_none=True)
        check_positive_int(self.grad_accum, "grad_accum", where)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"The 'optimizer' parameter of {where} must be one of {', '.join(OPTIMIZERS)}. "
                             f"Got {self.optimizer!r}.")
        check_positive_int(self.nnodes, "nnodes", where)
        if self.nnodes > 1:
            if not self.rdzv_endpoint or ":" not in str(self.rdzv_endpoint):
                raise ValueError(f"A run on {self.nnodes} nodes needs rdzv_endpoint='host:port' (the c10d rendezvous "
                                 f"of torchrun). Got {self.rdzv_endpoint!r}.")
            if self.gpu_count % self.nnodes:
                raise ValueError(f"gpu_count ({self.gpu_count}) must be nnodes ({self.nnodes}) x processes per node.")
        elif self.rdzv_endpoint is not None:
            raise ValueError("rdzv_endpoint is for multi-node runs (nnodes > 1); a one-node run rendezvous locally.")
        check_positive_int(self.batch_size, "batch_size", where)
        check_positive_int(self.gpu_count, "gpu_count", where)
        check_positive_int(self.steps, "steps", where, allow_none=True)
        check_positive_float(self.max_seconds, "max_seconds", where)
        check_positive_float(self.ci_target, "ci_target", where)
        check_positive_int(self.min_steps, "min_steps", where)
        check_positive_int(self.max_steps, "max_steps", where)
        if isinstance(self.warmup_steps, bool) or not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise ValueError(f"The 'warmup_steps' parameter of {where} must be a non-negative int. "
                             f"Got {self.warmup_steps!r} instead.")
        check_positive_int(self.threads, "threads", where, allow_none=True)
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}. Got {self.precision!r}.")
        if self.precision == "fp8":
            raise ValueError("precision 'fp8' cannot be measured by the zoo (torch autocast has no fp8); record fp8 "
                             "jobs (e.g. Transformer Engine) with perfmodel.measure.recorder.Recorder instead.")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda'. Got {self.device!r}.")
        if self.device == "cpu" and self.precision in ("fp16", "tf32"):
            raise ValueError(f"precision {self.precision!r} is not supported on CPU; use fp32 or bf16.")
        self._check_layout(where)

    def _check_layout(self, where: str) -> None:
        check_positive_int(self.tp, "tp", where)
        check_positive_int(self.pp, "pp", where)
        if not isinstance(self.sequence_parallel, bool):
            raise TypeError(f"The 'sequence_parallel' parameter of {where} must be a bool. Got "
                            f"{self.sequence_parallel!r}.")
        if self.pp_schedule not in PP_SCHEDULES:
            raise LayoutError(f"The 'pp_schedule' parameter of {where} must be one of {', '.join(PP_SCHEDULES)}. "
                              f"Got {self.pp_schedule!r}.")
        if not self.is_layout:
            if self.tp > 1 or self.pp > 1 or self.sequence_parallel:
                raise LayoutError(f"tp, pp and sequence_parallel are for the layout decoders "
                                  f"({', '.join(LAYOUT_MODELS)}); {self.model!r} runs data-parallel only.")
            return
        unsupported = [f for f, on in (("compile", self.compile), ("activation_checkpointing",
                                                                     self.activation_checkpointing),
                                       ("precision fp16", self.precision == "fp16")) if on]
        if unsupported:
            raise LayoutError(f"{where}: a layout run of {self.model} does not support {', '.join(unsupported)}.")
        problems = layout_run_problems(self.model, gpu_count=self.gpu_count, tp=self.tp, pp=self.pp,
                                   micro_batches=self.grad_accum, sequence_parallel=self.sequence_parallel,
                                   pp_schedule=self.pp_schedule, knobs=self.knobs, seq_len=self.seq_len)
        if problems:
            raise LayoutError(f"{where}: " + " ".join(problems))

    @property
    def is_layout(self) -> bool:
        """Whether the run is a layout run (a layout decoder, split ``tp x pp x dp``)."""
        return is_layout_model(self.model)

    @property
    def dp(self) -> int:
        """The data-parallel degree: ``gpu_count / (tp x pp)``."""
        return self.gpu_count // (self.tp * self.pp)

    @property
    def global_batch(self) -> int:
        """Samples per optimizer step over all devices: ``batch_size x grad_accum x dp``."""
        return self.batch_size * self.grad_accum * self.dp

    @property
    def record_batch_size(self) -> float:
        """The record's ``batch_size``: per device per step for a layout run (``global_batch / gpu_count``,
        possibly fractional), else the configured per-device (micro-)batch."""
        if self.is_layout:
            share = self.global_batch / self.gpu_count
            return int(share) if float(share).is_integer() else share
        return self.batch_size

    @property
    def record_name(self) -> str:
        """The record's ``model``: ``name`` if given, else the spec (a factory's dotted name)."""
        return self.name or default_model_name(self.model)

    @property
    def effective_seq_len(self) -> int | None:
        """The sequence length the run will use (None for a factory, or an image/vector zoo model)."""
        if self.is_layout:
            return int(layout_shape(self.model, self.knobs, self.seq_len)["seq"])
        kind = model_kind(self.model)
        if kind == "hf":
            from .hf import DEFAULT_SEQ_LEN

            return int(self.seq_len or DEFAULT_SEQ_LEN)
        if kind == "zoo":
            seq = default_seq_len(self.model, self.knobs)
            return None if seq is None else int(self.seq_len or seq)
        return None

    def key(self, gpu_type: str) -> tuple:
        """The resume key: what makes two runs the same configuration (records with it are skipped).

        Parameters
        ----------
        gpu_type : str
            The device type the run is on (as the history's ``gpu_type`` column spells it).

        Returns
        -------
        tuple
            ``(record_name, batch_size, gpu_count, precision, gpu_type, repeat, grad_accum, optimizer, compile,
            activation_checkpointing, effective_seq_len, nnodes)``, booleans as 0/1; a layout run's adds
            ``(tp, pp, sequence_parallel)`` (its ``batch_size`` is the micro-batch, the record's
            ``micro_batch_size``).
        """
        key: tuple = (self.record_name, int(self.batch_size), int(self.gpu_count), self.precision, gpu_type,
               int(self.repeat), int(self.grad_accum), self.optimizer, int(bool(self.compile)),
               int(bool(self.activation_checkpointing)), self.effective_seq_len, int(self.nnodes))
        if self.is_layout:
            key += (int(self.tp), int(self.pp), int(bool(self.sequence_parallel)))
        return key

    @property
    def launcher(self) -> str:
        """``torchrun`` for data-parallel or multi-node runs, else ``local`` (one worker process)."""
        return "torchrun" if (self.gpu_count > 1 or self.nnodes > 1) else "local"

    def digest(self) -> str:
        """A short id of the configuration, the same on every node (rendezvous ids, Slurm record files).

        Returns
        -------
        str
            The first 12 hex digits of the SHA-1 of :meth:`key` without its device type.
        """
        import hashlib

        key = self.key("*")
        return hashlib.sha1(json.dumps([*key[:4], *key[5:]], default=str).encode()).hexdigest()[:12]


def _detect_gpu_type(device: str) -> str:
    if device == "cpu":
        return "cpu"
    import torch

    if not torch.cuda.is_available():
        raise ValueError(f"device 'cuda' was requested but this torch ({torch.__version__}) sees no CUDA device "
                         "(a CPU-only build, or no GPU visible); measure with device 'cpu'.")
    from .telemetry import nvml_device_facts

    name = nvml_device_facts(0).get("gpu_name")
    if not name:
        import torch

        name = torch.cuda.get_device_name(0)
    return resolve_gpu_type(name)


def _classify_failure(returncode: int, stderr: str) -> tuple[str, str]:
    text = stderr.lower()
    lines = stderr.strip().splitlines()
    tail = "\n".join(lines[-3:])[-500:]
    own = [ln[len(ERROR_PREFIX):] for ln in lines if ln.startswith(ERROR_PREFIX)]
    if own:  # the worker's one-line summary: exception type and the message's first line
        tail = own[-1][:500]
    if "out of memory" in text or "outofmemoryerror" in text or "can't allocate memory" in text:
        return "oom", tail or "out of memory"
    if returncode in (-signal.SIGKILL, 137):
        return "oom", f"worker killed by SIGKILL (likely the OOM killer). {tail}".strip()
    return "error", tail or f"worker exited with status {returncode}"


def _launch_command(cfg: RunConfig, config_path: str, result_path: str) -> list[str]:
    worker = ["-m", "perfmodel.measure._worker", config_path, result_path]
    if cfg.gpu_count == 1 and cfg.nnodes == 1:
        return [sys.executable, *worker]
    run = [sys.executable, "-m", "torch.distributed.run", "--log-dir", os.path.dirname(config_path)]
    if cfg.nnodes == 1:
        return [*run, "--standalone", f"--nproc_per_node={cfg.gpu_count}", *worker]
    # every node runs the same sweep: the rendezvous id is derived from the configuration, so it is the same there
    return [*run, f"--nnodes={cfg.nnodes}", f"--nproc_per_node={cfg.gpu_count // cfg.nnodes}",
            "--rdzv_backend=c10d", f"--rdzv_endpoint={cfg.rdzv_endpoint}",
            f"--rdzv_id={cfg.rdzv_id}-{cfg.digest()}-r{cfg.repeat}", *worker]


def measure_run(cfg: RunConfig, *, timeout_s: float = 600.0, gpu_type: str | None = None,
                sweep_id: str | None = None) -> tuple[dict | None, list[float]]:
    """Measure one configuration in a subprocess; return ``(record, per_step_times)``.

    Never raises for a failed run: the record's ``status`` says ``oom``, ``error`` or ``timeout`` and ``error``
    holds the message. ``KeyboardInterrupt`` kills the worker and propagates. In a multi-node run only the node
    that hosts global rank 0 gets a record; on the others the record is ``None``.

    Parameters
    ----------
    cfg : RunConfig
        The configuration to run.
    timeout_s : float, default=600.0
        The worker is killed after this many seconds and the record's ``status`` is ``timeout``.
    gpu_type : str, optional
        The device type to record; default detected from ``cfg.device``.
    sweep_id : str, optional
        The id of the sweep the run belongs to, recorded with it.

    Returns
    -------
    record : dict or None
        The history record (None on a multi-node follower).
    per_step_times : list of float
        Seconds of each timed step (empty for a failed run or a follower).
    """
    timeout_s = check_positive_float(timeout_s, "timeout_s", "measure_run")
    gpu_type = gpu_type or _detect_gpu_type(cfg.device)
    record = base_record(cfg, gpu_type, sweep_id)
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="perfmodel-run-") as tmp:
        config_path = os.path.join(tmp, "config.json")
        result_path = os.path.join(tmp, "result.json")
        payload = {k: v for k, v in asdict(cfg).items()}
        payload["flops_per_sample"], payload["flops_method"] = _flops_for(cfg)
        payload["launched_at"] = time.time()
        with open(config_path, "w", encoding="utf-8") as fh:
            json.dump(payload, fh)
        env = dict(os.environ)
        if cfg.device == "cpu":
            per_node = cfg.gpu_count // cfg.nnodes
            env["OMP_NUM_THREADS"] = str(cfg.threads or max(1, (os.cpu_count() or 1) // per_node))
        src_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = src_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env[_lifeline.SWEEP_PID_ENV] = str(os.getpid())  # workers exit when this process dies
        proc = subprocess.Popen(_launch_command(cfg, config_path, result_path), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
                                preexec_fn=_lifeline.preexec())
        _lifeline.register(tmp, proc.pid)
        try:
            _, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            record.update(status="timeout", error=f"run exceeded {timeout_s:g} s and was killed")
            return finish_record(record), times
        except BaseException:
            _kill(proc)
            raise
        role = _read_role(result_path)
        if role == "follower":  # another node hosts rank 0 and records the run
            if proc.returncode != 0:
                logger.warning("multi-node run %s: this node's workers exited with status %s (the node with "
                               "rank 0 records the run)", cfg.record_name, proc.returncode)
            return None, []
        if proc.returncode == 0 and os.path.exists(result_path):
            with open(result_path, encoding="utf-8") as fh:
                result = json.load(fh)
            times = result.pop("step_times_s", [])
            record.update({k: result[k] for k in _RECORD_KEYS if k in result})
            record.update({k: v for k, v in result.items() if k.startswith("op_")})  # op-level features
        else:
            status, message = _classify_failure(proc.returncode, stderr or "")
            if cfg.nnodes > 1:
                message = f"{message} (node {socket.gethostname()})"
            record.update(status=status, error=message)
    return finish_record(record), times


def _read_role(result_path: str) -> str | None:
    try:
        with open(result_path + ".role", encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return None


def base_record(cfg: RunConfig, gpu_type: str, sweep_id: str | None) -> dict:
    """The record of a configuration before it runs: what was asked for, every measured column empty."""
    return {
        "run_id": uuid.uuid4().hex[:12],
        "status": "ok",
        "error": None,
        "model": cfg.record_name,
        "batch_size": cfg.batch_size,
        "gpu_count": cfg.gpu_count,
        "gpu_type": gpu_type,
        "repeat": cfg.repeat,
        "perfmodel_version": __version__,
        "source": "sweep",
        "sweep_id": sweep_id,
        **{k: None for k in _RECORD_KEYS},
        "precision": cfg.precision,
        "nodes": cfg.nnodes,
        "launcher": cfg.launcher,
        "job_id": None,
        "model_source": model_kind(cfg.model),
        "seq_len": cfg.effective_seq_len,
        "grad_accum": cfg.grad_accum,
        "optimizer": cfg.optimizer,
        "compiled": int(bool(cfg.compile)),
        "activation_checkpointing": int(bool(cfg.activation_checkpointing)),
        **(_layout_record(cfg) if cfg.is_layout else {}),
    }


def _layout_record(cfg: RunConfig) -> dict:
    """A layout run's columns known before it runs: its batch, layout and shape (a failed run keeps them)."""
    shape = layout_shape(cfg.model, cfg.knobs, cfg.seq_len)
    return {
        "batch_size": cfg.record_batch_size, "global_batch_size": cfg.global_batch, "micro_batch_size": cfg.batch_size,
        "tp": cfg.tp, "pp": cfg.pp, "vp": 1, "cp": 1, "ep": 1, "dp": cfg.dp, "zero_stage": 0,
        "sequence_parallel": int(bool(cfg.sequence_parallel) and cfg.tp > 1), "recompute": "none",
        "flash_attention": 1,  # the layout models' attention is torch's scaled_dot_product_attention (fused)
        "gpus_per_node": cfg.gpu_count // cfg.nnodes, "family": "decoder",
        "n_layers": shape["n_layers"], "d_model": shape["d_model"], "n_heads": shape["n_heads"],
        "n_kv_heads": shape["n_heads"], "head_dim": shape["d_model"] // shape["n_heads"],
        "ffn_hidden": shape["ffn_hidden"], "gated_mlp": 0, "tied_embeddings": 0, "vocab": shape["vocab"],
        "n_experts": 0,
    }


_FLOPS_CACHE: dict[tuple, tuple[float | None, str]] = {}


def _flops_for(cfg: RunConfig) -> tuple[float | None, str | None]:
    """Forward+backward FLOPs per sample of a CPU-sized zoo model, counted once per model in this process
    (FlopCounterMode's first use costs seconds, which would otherwise be paid by every worker). Other models are
    counted by the worker, on its device: the parent never imports a user's factory or builds a large model."""
    if cfg.is_layout:
        key: tuple = (cfg.model, json.dumps(cfg.knobs, sort_keys=True), cfg.seq_len)
        if key not in _FLOPS_CACHE:
            from ._layout_worker import layout_flops_per_sample

            _FLOPS_CACHE[key] = (layout_flops_per_sample(cfg.model, cfg.knobs, cfg.seq_len), "flop_counter")
        return _FLOPS_CACHE[key]
    if cfg.model not in ZOO or cfg.seq_len is not None:
        return None, None
    key = (cfg.model, json.dumps(cfg.knobs, sort_keys=True))
    if key not in _FLOPS_CACHE:
        import math as _m

        from .zoo import build, count_flops_per_sample

        try:
            flops, method = count_flops_per_sample(build(cfg.model, **cfg.knobs), "cpu")
        except Exception as exc:  # a broken configuration: the worker will fail and the run is recorded
            logger.info("FLOP count failed for %s (%s); left to the worker.", cfg.model, exc)
            return None, None
        _FLOPS_CACHE[key] = (None if _m.isnan(flops) else flops, method)
    return _FLOPS_CACHE[key]


def finish_record(record: dict) -> dict:
    record["timestamp"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return record


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def sweep_configs(models: Sequence, batch_sizes: Sequence[int], gpu_counts: Sequence[int] = (1,), *,
                  precisions: Sequence[str] = ("fp32",), repeats: int = 1, device: str = "cpu",
                  **run_options) -> list[RunConfig]:
    """The grid of configurations, repeat index outermost (so repeats are spread over the sweep).

    Parameters
    ----------
    models : sequence of str or callable
        Spec strings (zoo name, ``hf:...``, ``pkg.module:factory``) or factory callables; one string or callable
        alone is taken as a list of one.
    batch_sizes : sequence of int
        Per-device batch sizes.
    gpu_counts : sequence of int, default=(1,)
        Device counts.
    precisions : sequence of str, default=("fp32",)
        Precisions.
    repeats : int, default=1
        Repeat indices ``0 .. repeats-1``, outermost.
    device : str, default="cpu"
        The device type of every run.
    **run_options
        Further :class:`RunConfig` fields for every configuration (``name`` only with one model).

    Returns
    -------
    list of RunConfig
        Ordered by repeat, model, device count, batch size, precision.
    """
    check_positive_int(repeats, "repeats", "sweep_configs")
    if isinstance(models, str) or callable(models):
        models = [models]
    models = [m if isinstance(m, str) else factory_spec(m) for m in models]
    if run_options.get("name") is not None and len(models) != 1:
        raise ValueError(f"'name' names one model's records; got {len(models)} models. Drop name or sweep one "
                         "model at a time.")
    return [
        RunConfig(model=m, batch_size=int(b), gpu_count=int(n), precision=p, device=device, repeat=r,
                  **run_options)
        for r in range(repeats) for m in models for n in gpu_counts for b in batch_sizes for p in precisions
    ]


#: The default sweep: ten zoo models (five families) at 4 batch sizes on 1 and 2 CPU workers, plus 2 more repeats of 2 models
#: to measure run-to-run noise: 112 runs, about fifteen minutes on 2 CPU cores.
DEFAULT_SWEEP: dict[str, Any] = {
    "models": ["mlp-xs", "mlp-m", "cnn-s", "cnn-m", "bert-s", "bert-m", "gpt-s", "gpt-m", "lstm-s", "lstm-m"],
    "batch_sizes": (8, 16, 32, 64),
    "gpu_counts": (1, 2),
    "repeat_models": ("cnn-s", "gpt-s"),
    "repeats": 3,
    "run_options": {"max_seconds": 1.0, "warmup_steps": 2, "min_steps": 5, "max_steps": 200},
}


def default_sweep_configs(device: str = "cpu", **overrides) -> list[RunConfig]:
    """The default sweep (:data:`DEFAULT_SWEEP`); ``overrides`` replace its run options.

    Parameters
    ----------
    device : str, default="cpu"
        The device type of every run.
    **overrides
        Run options (:class:`RunConfig` fields) that replace the sweep's own.

    Returns
    -------
    list of RunConfig
        The full grid (repeat 0), then repeats 1.. of the repeated models.
    """
    opts = {**DEFAULT_SWEEP["run_options"], **overrides}
    d = DEFAULT_SWEEP
    configs = sweep_configs(d["models"], d["batch_sizes"], d["gpu_counts"], device=device, **opts)
    repeats = sweep_configs(d["repeat_models"], d["batch_sizes"], d["gpu_counts"], repeats=d["repeats"],
                            device=device, **opts)
    return configs + [c for c in repeats if c.repeat > 0]


def _fmt_eta(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


def run_local(configs: list[RunConfig], output: Path, *, timeout_s: float = 600.0, retry_failed: bool = False,
              progress: bool = True) -> pd.DataFrame:
    """Run each configuration here, one after the other, appending each record to ``output`` as it finishes.

    The engine behind :func:`perfmodel.measure.run_sweep` with ``launcher="local"`` (which builds ``configs``
    from model names and checks the arguments); the Slurm launcher is :mod:`perfmodel.measure.slurm`.
    Configurations whose key is already in ``output`` are skipped; each finished run's per-step times go to the
    ``<output>.steps.jsonl`` sidecar.

    Parameters
    ----------
    configs : list of RunConfig
        The configurations, all on one device type (the first one's).
    output : path, URL or HistoryStore
        A history store (``runs.db``, ``postgresql://...``) or a ``.csv``/``.parquet`` file; created if absent,
        appended to otherwise.
    timeout_s : float, default=600.0
        A run still going after this long is killed and recorded with ``status="timeout"``.
    retry_failed : bool, default=False
        Run again configurations whose earlier record failed.
    progress : bool, default=True
        Print a progress line per run (with an ETA) to stderr.

    Returns
    -------
    DataFrame
        The records written by this call.
    """
    output = history_target(output)
    timeout_s = check_positive_float(timeout_s, "timeout_s", "run_sweep")
    check_history_target(output)
    if isinstance(output, Path):
        check_writable(output)  # before the first run is measured, not after
    _lifeline.check_stale_workers()
    device = configs[0].device if configs else "cpu"
    gpu_type = _detect_gpu_type(device)
    existing = read_existing(output)  # read once: what to skip, and the earlier repeats' medians
    done = done_keys(output, retry_failed, existing)
    medians = repeat_medians(output, existing)
    todo = [c for c in configs if c.key(gpu_type) not in done]
    skipped = len(configs) - len(todo)
    sweep_id = uuid.uuid4().hex[:8]
    written: list[dict] = []
    started = time.monotonic()
    if progress and skipped:
        print(f"resuming: {skipped} of {len(configs)} configurations already in {output}", file=sys.stderr)
    for i, cfg in enumerate(todo):
        record, times = measure_run(cfg, timeout_s=timeout_s, gpu_type=gpu_type, sweep_id=sweep_id)
        if record is None:  # a multi-node run recorded by the node with rank 0
            if progress:
                print(f"[{skipped + i + 1:>4}/{len(configs)}] {cfg.record_name} batch={cfg.batch_size} "
                      f"n={cfg.gpu_count}: ran as a follower node (recorded by rank 0's node)", file=sys.stderr)
            continue
        noisy = flag_timing(record, medians)
        append_runs(record, output)
        append_steps(output, record["run_id"], times)
        written.append(record)
        if progress:
            elapsed = time.monotonic() - started
            eta = elapsed / (i + 1) * (len(todo) - i - 1)
            what = (f"{record['step_time_s']:.4g} s/step" if record["status"] == "ok"
                    else f"{record['status']}: {str(record['error'])[:60]}")
            if record["status"] == "ok" and record.get("flops_method") == "none":
                what += " (FlopCounterMode saw no FLOPs: flops_per_sample left empty)"
            if noisy:
                what += f" (timing flagged: {record['timing_flag']})"
            lay = (f" tp={cfg.tp} pp={cfg.pp} dp={cfg.dp}{' sp' if cfg.sequence_parallel else ''} "
                   f"micro-batches={cfg.grad_accum}" if cfg.is_layout else "")
            print(f"[{skipped + i + 1:>4}/{len(configs)}] {cfg.record_name} batch={cfg.batch_size} n={cfg.gpu_count}"
                  f"{lay} {cfg.precision} rep={cfg.repeat}: {what}  (ETA {_fmt_eta(eta)})", file=sys.stderr, flush=True)
    return pd.DataFrame(written)
