"""Record real training jobs: a step hook a user adds to their own loop, writing one run record at the end.

Example
-------
::

    import perfmodel
    model = MyNet().cuda()
    opt = torch.optim.AdamW(model.parameters())
    with perfmodel.record("my-net", module=model, batch_size=64, output="runs.db") as rec:
        for x, y in loader:
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            rec.step()          # one call per optimizer step
    print(rec.result["step_time_s"])

The first ``warmup_steps`` steps are left out of the step-time statistics (the first step's end gives
``startup_s``). ``peak_mem_bytes`` is the peak memory between entering and leaving: on a GPU
``torch.cuda.max_memory_allocated`` (reset on entry); on the CPU, with ``module=``, the module's parameters and
buffers plus the peak growth of the process's anonymous resident memory (Linux; see
:mod:`perfmodel.measure._peakmem`: optimizer state that existed before entering is not counted, what the loop
itself allocates, the data loader's batches included, is). On a GPU the clock is read after ``torch.cuda.synchronize()``. Under DDP only rank 0 writes. If the
loop is interrupted (Ctrl-C, an exception) the record is still written with ``stop_reason="interrupted"``; the
exception then propagates.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
import warnings
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from .._validation import check_positive_int
from .._version import __version__
from ..exceptions import NoisyTimingWarning
from ..hardware import resolve_gpu_type
from ..io import append_runs
from ._timing import explain_timing_flag, summarise_steps
from .flops import count_params
from .telemetry import NvmlSampler, host_facts, nvml_device_facts

if TYPE_CHECKING:
    from ._peakmem import CpuPeakMemory

__all__ = ["Recorder", "record"]

logger = logging.getLogger(__name__)


class Recorder:
    """Times optimizer steps of a user's loop and appends one run record on exit. See :func:`record`.

    Parameters
    ----------
    model : str
        A name for the model (the history's ``model`` column).
    batch_size : int
        Per-device batch size (of one micro-batch, with gradient accumulation).
    output : path or URL, optional
        History to append the record to on exit: a store (``runs.db``, ``postgresql://...``, ``"default"``) or a
        ``.csv``/``.parquet`` file; without it the record is only in ``result``.
    module : torch.nn.Module, optional
        The trained model: its trainable parameters are counted when ``params`` is not given, its device tells
        whether to synchronize CUDA, and on the CPU its tensors count to ``peak_mem_bytes``.
    params : int, optional
        Trainable parameters; required without ``module``.
    flops_per_sample : float, optional
        Forward+backward FLOPs per sample, recorded with ``flops_method="user"``.
    gpu_count : int, optional
        Devices of the job; default ``$WORLD_SIZE`` or 1.
    gpu_type : str, optional
        The device type (resolved through the hardware table); default detected (NVML or torch), ``cpu`` without
        CUDA.
    precision : str, default="fp32"
        The precision the loop trains in, recorded as given.
    warmup_steps : int, default=3
        Steps left out of the step-time statistics.
    family : str, optional
        The model family, recorded as given.
    synchronize : bool, optional
        Call ``torch.cuda.synchronize()`` before reading the clock; default whether ``module`` is on CUDA.
    rank : int, optional
        This process's rank; default ``$RANK`` or 0. Only rank 0 writes the record and samples telemetry.
    grad_accum : int, default=1
        Micro-batches per optimizer step (call :meth:`step` once per optimizer step).
    extra : dict, optional
        Columns added to, or replacing, the record's own.

    Raises
    ------
    TypeError, ValueError
        An empty model name, no model size, or a parameter out of range.
    """

    def __init__(self, model: str, *, batch_size: int, output=None, module=None, params: int | None = None,
                 flops_per_sample: float | None = None, gpu_count: int | None = None, gpu_type: str | None = None,
                 precision: str = "fp32", warmup_steps: int = 3, family: str | None = None,
                 synchronize: bool | None = None, rank: int | None = None, grad_accum: int = 1,
                 extra: dict | None = None):
        if not isinstance(model, str) or not model:
            raise TypeError(f"The 'model' parameter of record must be a non-empty str. Got {model!r}.")
        self.model = model
        self.batch_size = check_positive_int(batch_size, "batch_size", "record")
        self.grad_accum = check_positive_int(grad_accum, "grad_accum", "record")
        self.output = output
        self.module = module
        if params is None and module is not None:
            params = count_params(module)
        if params is None:
            raise ValueError("record needs the model size: pass module=<torch.nn.Module> or params=<int>.")
        self.params = check_positive_int(params, "params", "record")
        self.flops_per_sample = flops_per_sample
        self.world = int(os.environ.get("WORLD_SIZE", "1")) if gpu_count is None else \
            check_positive_int(gpu_count, "gpu_count", "record")
        self.rank = int(os.environ.get("RANK", "0")) if rank is None else int(rank)
        self.extra = dict(extra or {})
        self.precision = precision
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"The 'warmup_steps' parameter of record must be an int >= 0. Got {warmup_steps!r}.")
        self.warmup_steps = warmup_steps
        self.family = family
        self._cuda = self._uses_cuda() if synchronize is None else bool(synchronize)
        self.gpu_type = resolve_gpu_type(gpu_type) if gpu_type is not None else self._detect_gpu_type()
        self.times: list[float] = []
        self.result: dict | None = None
        self._callbacks: list[Callable[[Recorder], object]] = []
        self._sampler: NvmlSampler | None = None
        self._cpu_mem: CpuPeakMemory | None = None

    def _uses_cuda(self) -> bool:
        if self.module is None:
            return False
        try:
            return next(self.module.parameters()).is_cuda
        except StopIteration:
            return False

    def _detect_gpu_type(self) -> str:
        if not self._cuda:
            return "cpu"
        name = nvml_device_facts(0).get("gpu_name")
        if not name:
            import torch

            name = torch.cuda.get_device_name()
        return resolve_gpu_type(name)

    def _sync(self):
        if self._cuda:
            import torch

            torch.cuda.synchronize()

    def add_callback(self, fn) -> None:
        """Call ``fn(recorder)`` after every step (e.g. an online remaining-time display).

        Parameters
        ----------
        fn : callable
            Called with this recorder after each :meth:`step`.
        """
        self._callbacks.append(fn)

    def __enter__(self):
        return self.start()

    def start(self) -> Recorder:
        """Start the clock (what ``with`` does); for trainer callbacks that cannot wrap the loop in ``with``.

        Also opens the peak-memory window and, on CUDA rank 0, starts the NVML telemetry sampler.

        Returns
        -------
        Recorder
            This recorder.
        """
        self._t_start = time.perf_counter()
        self._t_last = self._t_start
        self._wall0 = time.time()
        if self._cuda and self.rank == 0:
            self._sampler = NvmlSampler().__enter__()
        self._start_peak_memory()
        return self

    def _start_peak_memory(self) -> None:
        """Open the peak-memory window (``peak_mem_bytes``): the CUDA allocator's peak, or on the CPU the module's
        tensors plus the growth of anonymous resident memory (:mod:`perfmodel.measure._peakmem`)."""
        if self.rank != 0:
            return
        if self._cuda:
            import torch

            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
        elif self.module is not None:  # without the module its resident weights are unknown: nothing recorded
            from ._peakmem import CpuPeakMemory, tensor_bytes

            self._cpu_mem = CpuPeakMemory()
            self._cpu_mem.start(tensor_bytes(self.module))

    def _peak_memory(self) -> dict:
        if self.rank != 0:
            return {}
        if self._cuda:
            import torch

            if torch.cuda.is_available() and torch.cuda.is_initialized():
                return {"peak_mem_bytes": float(torch.cuda.max_memory_allocated()),
                        "mem_source": "cuda_max_allocated"}
            return {}
        if self._cpu_mem is None:
            return {}
        peak = self._cpu_mem.peak_bytes()
        return {} if peak is None else {"peak_mem_bytes": peak, "mem_source": self._cpu_mem.source}

    def step(self) -> None:
        """Mark the end of one optimizer step."""
        self._sync()
        now = time.perf_counter()
        if not self.times:
            self._t_first_end = now
        self.times.append(now - self._t_last)
        self._t_last = now
        for fn in self._callbacks:
            fn(self)

    def mark(self) -> None:
        """Restart the step clock: the time since the last step (evaluation, checkpointing) is not a step's.

        The next :meth:`step` then times only from here. Wall time and ``startup_s`` are unaffected.
        """
        self._sync()
        self._t_last = time.perf_counter()

    @property
    def steady_times(self) -> list[float]:
        """Per-step times after warm-up (the first ``warmup_steps`` steps are left out)."""
        return self.times[self.warmup_steps:]

    def __exit__(self, exc_type, exc, tb):
        self.finish(interrupted=exc_type is not None)
        return False

    def finish(self, *, interrupted: bool = False) -> dict:
        """Build the record, append it to ``output`` (rank 0 only) and return it (what leaving ``with`` does).

        With no step after the warm-up the record's ``status`` is ``error``. A noisy timing warns with
        ``NoisyTimingWarning``.

        Parameters
        ----------
        interrupted : bool, default=False
            Whether the loop ended early (an exception); recorded as ``stop_reason="interrupted"`` instead of
            ``"loop_end"``.

        Returns
        -------
        dict
            The run record (also kept in ``result``).
        """
        if self._sampler is not None:
            self._sampler.__exit__(None, None, None)
            self._sampler = None
        peak_mem = self._peak_memory()
        steady = self.steady_times
        rec = {
            "run_id": uuid.uuid4().hex[:12],
            "model": self.model,
            "family": self.family,
            "params": self.params,
            "flops_per_sample": self.flops_per_sample,
            "flops_method": "user" if self.flops_per_sample is not None else None,
            "batch_size": self.batch_size,
            "grad_accum": self.grad_accum,
            "gpu_count": self.world,
            "gpu_type": self.gpu_type,
            "precision": self.precision,
            "warmup_steps": self.warmup_steps,
            "steps": len(self.times),
            "wall_time_s": time.perf_counter() - self._t_start,
            "startup_s": self._t_first_end - self._t_start if self.times else None,
            "stop_reason": "interrupted" if interrupted else "loop_end",
            "source": "recorder",
            "perfmodel_version": __version__,
            "protocol": f"recorder: user loop, first {self.warmup_steps} steps excluded",
            "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            **peak_mem,
            **host_facts(),
        }
        if len(steady) >= 1:
            stats = summarise_steps(steady)
            rec.update(stats.to_record())
            if rec["timing_flag"]:
                warnings.warn(f"{self.model}: {explain_timing_flag(rec['timing_flag'], stats.cv)}",
                              NoisyTimingWarning, stacklevel=3)
            rec["samples_per_s"] = self.batch_size * self.grad_accum * self.world / stats.mean
            rec["status"] = "ok"
        else:
            rec["status"] = "error"
            rec["error"] = f"only {len(self.times)} steps recorded, none after the {self.warmup_steps} warm-up steps"
        try:
            import torch

            rec["torch_version"] = torch.__version__
        except ImportError:
            pass
        if self._cuda:
            rec.update(nvml_device_facts(0))
            if self._sampler is not None:
                rec.update(self._sampler.summary())
        rec.update(self.extra)
        self.result = rec
        if self.output is not None and self.rank == 0:
            append_runs(rec, self.output)
        return rec


def record(model: str, *, batch_size: int, output=None, **kwargs) -> Recorder:
    """Record a user's training loop as one run.

    Parameters
    ----------
    model : str
        A name for the model (the history's ``model`` column).
    batch_size : int
        Per-device batch size (of one micro-batch, with gradient accumulation).
    output : path, optional
        History to append the record to on exit (``.csv``/``.parquet``); without it the record is only in
        ``recorder.result``.
    **kwargs
        ``module`` (to count parameters and detect CUDA) or ``params``; ``flops_per_sample``, ``gpu_count``
        (default ``$WORLD_SIZE`` or 1), ``gpu_type`` (default: detected; ``cpu`` without CUDA), ``precision``,
        ``warmup_steps`` (default 3), ``family``, ``synchronize``, ``rank`` (default ``$RANK`` or 0; only rank 0
        writes), ``grad_accum`` (micro-batches per optimizer step, default 1; call ``.step()`` once per optimizer
        step), ``extra`` (columns added to, or replacing, the record's own).

    Returns
    -------
    Recorder
        A context manager; call ``.step()`` once per optimizer step.
    """
    return Recorder(model, batch_size=batch_size, output=output, **kwargs)
