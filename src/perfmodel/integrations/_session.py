"""One recorded training run driven by a trainer's callback hooks (shared by the HF and Lightning callbacks).

The timing itself is :class:`perfmodel.measure.recorder.Recorder`'s: a callback marks the start of an optimizer
step (``mark``) and its end (``step``), so data loading, evaluation and checkpointing between steps are left out,
and the recorder's warm-up, statistics, provenance and atomic append do the rest. A run that never reaches its
trainer's end hook (Ctrl-C, an exception) is written when the next run starts or when the interpreter exits,
with ``stop_reason="interrupted"``.
"""

from __future__ import annotations

import atexit

from ..hardware import resolve_gpu_type
from ..io import append_runs
from ..measure.recorder import Recorder
from ..measure.telemetry import nvml_device_facts

__all__ = ["RecordingSession", "CallbackState", "device_gpu_type"]


def device_gpu_type(device, gpu_type: str | None = None) -> tuple[str, bool]:
    """``(gpu_type, is_cuda)`` for a torch device: the user's name, NVML's (or torch's) for CUDA, ``cpu`` for CPU.

    Any other device type (``mps``, ``xla``) must be named with ``gpu_type=``; otherwise
    :class:`~perfmodel.exceptions.UnknownHardwareError` is raised, before training starts.
    """
    kind = getattr(device, "type", str(device))
    cuda = kind == "cuda"
    if gpu_type is not None:
        return resolve_gpu_type(gpu_type), cuda
    if kind == "cpu":
        return "cpu", False
    if cuda:
        index = getattr(device, "index", None) or 0
        name = nvml_device_facts(index).get("gpu_name")
        if not name:
            import torch

            name = torch.cuda.get_device_name(index)
        return resolve_gpu_type(name), True
    return resolve_gpu_type(kind), cuda  # raises UnknownHardwareError naming the device


class RecordingSession:
    """A :class:`Recorder` started and stopped by hooks, writing to ``history`` from the writing rank only."""

    def __init__(self, recorder: Recorder, history, *, writer: bool):
        self.recorder = recorder
        self.history = history
        self.writer = writer
        self.done = False
        recorder.start()
        atexit.register(self._at_exit)

    def _at_exit(self):
        if not self.done:
            self.finish(interrupted=True)

    def finish(self, *, interrupted: bool = False, **columns) -> dict | None:
        """Finish the record (adding ``columns``), append it if this process writes, and return it."""
        if self.done:
            return self.recorder.result
        self.done = True
        atexit.unregister(self._at_exit)
        self.recorder.extra.update({k: v for k, v in columns.items() if v is not None})
        rec = self.recorder.finish(interrupted=interrupted)
        self.recorder.module = None  # the record is built: do not keep the model alive through the callback
        if self.writer and self.history is not None:
            append_runs(rec, self.history)
        return rec


class CallbackState:
    """What the HF and Lightning callbacks share: their common arguments, checked once, the last record written
    (``result``) and the :class:`RecordingSession` of the run in progress."""

    def __init__(self, history="default", model_name: str | None = None, *, warmup_steps: int = 3,
                 gpu_type: str | None = None, family: str | None = None):
        if model_name is not None and (not isinstance(model_name, str) or not model_name):
            raise TypeError(f"The 'model_name' parameter of PerfModelCallback must be a non-empty str. "
                            f"Got {model_name!r}.")
        self.history = history
        self.model_name = model_name
        self.warmup_steps = warmup_steps
        self.gpu_type = gpu_type
        self.family = family
        self.result: dict | None = None
        self._session: RecordingSession | None = None

    def _finish_unended(self) -> None:
        """Write a run that never reached its end hook (an earlier fit that raised) as interrupted."""
        if self._session is not None and not self._session.done:
            self.result = self._session.finish(interrupted=True)
