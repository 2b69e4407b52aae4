"""Record ``lightning.Trainer`` runs into a perfmodel history (extra ``lightning``).

Example
-------
::

    from perfmodel.integrations.lightning import PerfModelCallback

    trainer = lightning.Trainer(max_steps=1000, callbacks=[PerfModelCallback("runs.db", "my-net")])
    trainer.fit(module, datamodule)      # appends one record at the end of fit (or on an exception)

The record is :func:`perfmodel.record`'s: ``batch_size`` is the per-device batch (read from the first batch, or
given), ``grad_accum`` is ``accumulate_grad_batches``; ``gpu_count`` is ``trainer.world_size``; ``precision`` follows
``trainer.precision`` (``bf16-mixed`` → bf16, ``16-mixed`` → fp16, ``transformer-engine`` → fp8, ``32-true`` → fp32,
or tf32 when CUDA matmuls run in TF32); ``gpu_type`` is the root device's NVML name (``cpu`` on CPU); ``params`` counts the module's
trainable parameters. An optimizer step is timed from the start of its first micro-batch to the end of the batch
that advanced ``trainer.global_step``: data loading, validation and checkpointing are left out, and so are the
first ``warmup_steps``. Under DDP every rank times, only global rank 0 writes.
"""

from __future__ import annotations

from lightning.pytorch.callbacks import Callback

from ..measure.recorder import Recorder
from ._session import CallbackState, RecordingSession, device_gpu_type

__all__ = ["PerfModelCallback"]


def _precision(trainer) -> str:
    text = str(trainer.precision)
    if text.startswith("transformer-engine"):
        return "fp8"
    if text.startswith("bf16"):
        return "bf16"
    if text.startswith("16"):
        return "fp16"
    if text.startswith("32"):
        import torch

        cuda = trainer.strategy.root_device.type == "cuda"
        return "tf32" if cuda and torch.backends.cuda.matmul.allow_tf32 else "fp32"
    raise ValueError(f"PerfModelCallback: trainer precision {text!r} is not one perfmodel records "
                     "(fp32, tf32, fp16, bf16, fp8).")


def _batch_len(batch) -> int | None:
    from lightning.pytorch.utilities.data import extract_batch_size

    try:
        return int(extract_batch_size(batch))
    except Exception:  # lightning raises MisconfigurationException for batches it cannot size
        return None


class PerfModelCallback(CallbackState, Callback):
    """A Lightning callback that appends one perfmodel run record per ``Trainer.fit``.

    Parameters
    ----------
    history : str or path-like, default="default"
        History to append to: a store (``"default"``: ``$PERFMODEL_HISTORY``, else ``runs.db`` in the user data
        folder; ``runs.db``; ``postgresql://...``) or a ``.csv``/``.parquet`` file; ``None`` keeps the record
        only in :attr:`result`.
    model_name : str, optional
        The record's ``model``; default: the LightningModule's class name.
    batch_size : int, optional
        Per-device batch of one micro-batch; default: the size of the first training batch.
    flops_per_sample : float, optional
        Forward+backward FLOPs per sample, if known.
    warmup_steps : int, default=3
        Optimizer steps left out of the step-time statistics.
    gpu_type : str, optional
        Device name, for devices NVML does not name (default: detected; ``cpu`` on CPU).
    family : str, optional
        The record's ``family``.
    """

    def __init__(self, history="default", model_name: str | None = None, *, batch_size: int | None = None,
                 flops_per_sample: float | None = None, warmup_steps: int = 3, gpu_type: str | None = None,
                 family: str | None = None):
        CallbackState.__init__(self, history, model_name, warmup_steps=warmup_steps, gpu_type=gpu_type,
                               family=family)
        self.batch_size = batch_size
        self.flops_per_sample = flops_per_sample

    def on_train_start(self, trainer, pl_module):
        """Start a record: write a run that never ended as interrupted, read the setup, start the recorder.

        Parameters
        ----------
        trainer : lightning.Trainer
            The trainer: its device, accumulation, world size, precision and rank.
        pl_module : lightning.LightningModule
            The module being trained: it names the record (without ``model_name``); its trainable parameters
            are counted.

        Raises
        ------
        ValueError
            For a trainer precision perfmodel does not record.
        """
        self._finish_unended()
        gpu_type, cuda = device_gpu_type(trainer.strategy.root_device, self.gpu_type)
        self._accum = int(trainer.accumulate_grad_batches)
        recorder = Recorder(
            self.model_name or type(pl_module).__name__, batch_size=self.batch_size or 1, grad_accum=self._accum,
            module=pl_module, gpu_count=int(trainer.world_size), gpu_type=gpu_type, precision=_precision(trainer),
            warmup_steps=self.warmup_steps, family=self.family, synchronize=cuda, rank=int(trainer.global_rank),
            flops_per_sample=self.flops_per_sample,
            extra={"source": "lightning_callback",
                   "protocol": f"lightning_callback: optimizer steps timed from the first micro-batch's start to "
                               f"the end of the batch that stepped (data loading, validation and checkpointing "
                               f"excluded), first {self.warmup_steps} steps excluded"},
        )
        self._sized = self.batch_size is not None
        self._in_step = False
        self._last_global_step = trainer.global_step
        self._session = RecordingSession(recorder, self.history, writer=bool(trainer.is_global_zero))

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        """Mark the start of an optimizer step at its first micro-batch (and read the batch size once).

        Parameters
        ----------
        trainer : lightning.Trainer
            The trainer.
        pl_module : lightning.LightningModule
            The module being trained.
        batch : object
            The training batch; without ``batch_size`` the first one gives the per-device batch size.
        batch_idx : int
            Ignored.

        Raises
        ------
        ValueError
            If no ``batch_size`` was given and Lightning cannot size the batch.
        """
        session = self._session
        if session is None or session.done:
            return
        if not self._sized:
            n = _batch_len(batch)
            if n is None:
                raise ValueError("PerfModelCallback cannot tell the batch size from the training batch; pass "
                                 "batch_size= (samples per device in one micro-batch).")
            session.recorder.batch_size = n
            self._sized = True
        if not self._in_step:
            session.recorder.mark()
            self._in_step = True

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        """Time the optimizer step if this batch advanced ``trainer.global_step``.

        Parameters
        ----------
        trainer : lightning.Trainer
            The trainer (its ``global_step``).
        pl_module : lightning.LightningModule
            Ignored.
        outputs : object
            Ignored.
        batch : object
            Ignored.
        batch_idx : int
            Ignored.
        """
        session = self._session
        if session is None or session.done or trainer.global_step == self._last_global_step:
            return
        self._last_global_step = trainer.global_step
        self._in_step = False
        session.recorder.step()

    def on_train_end(self, trainer, pl_module):
        """Finish the record and append it to ``history`` (global rank 0 only); it is kept in :attr:`result`.

        Parameters
        ----------
        trainer : lightning.Trainer
            The trainer.
        pl_module : lightning.LightningModule
            The module being trained.
        """
        if self._session is not None and not self._session.done:
            self.result = self._session.finish()

    def on_exception(self, trainer, pl_module, exception):
        """Write the run in progress as interrupted (``stop_reason="interrupted"``).

        Parameters
        ----------
        trainer : lightning.Trainer
            The trainer.
        pl_module : lightning.LightningModule
            The module being trained.
        exception : BaseException
            What was raised (not recorded).
        """
        self._finish_unended()
