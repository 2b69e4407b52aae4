"""Record Hugging Face ``transformers.Trainer`` runs into a perfmodel history (extra ``hf``).

Example
-------
::

    from perfmodel.integrations.hf import PerfModelCallback

    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[PerfModelCallback("runs.db")])
    trainer.train()            # appends one record to runs.db at the end (or when interrupted)

The record is :func:`perfmodel.record`'s, filled from the Trainer: ``batch_size`` is
``per_device_train_batch_size`` and ``grad_accum`` is ``gradient_accumulation_steps`` (one optimizer step covers
``grad_accum`` micro-batches of ``batch_size`` per device), ``gpu_count`` is ``world_size × max(1, n_gpu)``, ``precision`` follows the
``bf16``/``fp16``/``tf32`` flags, ``gpu_type`` is the device's NVML name (``cpu`` on CPU), ``params`` counts the
trainable parameters, and ``flops_per_sample`` is the Trainer's own ``total_flos`` (``6 · non-embedding params ·
tokens``) over the samples trained, where the model reports FLOPs. Each optimizer step is timed from
``on_step_begin`` to ``on_step_end``: data loading, logging, evaluation and checkpointing are left out, and so are
the first ``warmup_steps``; ``wall_time_s`` covers the whole ``train()`` call. Only the main process writes.
"""

from __future__ import annotations

from transformers import TrainerCallback

from ..importers._hf import FLOPS_METHOD, model_name_from_config, precision_from_flags
from ..measure.recorder import Recorder
from ._session import CallbackState, RecordingSession, device_gpu_type

__all__ = ["PerfModelCallback"]


class PerfModelCallback(CallbackState, TrainerCallback):
    """A ``transformers`` callback that appends one perfmodel run record per ``Trainer.train()`` call.

    Parameters
    ----------
    history : str or path-like, default="default"
        History to append to: a store (``"default"``: ``$PERFMODEL_HISTORY``, else ``runs.db`` in the user data
        folder; ``runs.db``; ``postgresql://...``) or a ``.csv``/``.parquet`` file; ``None`` keeps the record
        only in :attr:`result`.
    model_name : str, optional
        The record's ``model``; default: the config's ``_name_or_path``, else ``<model_type>-<layers>x<width>``.
    warmup_steps : int, default=3
        Optimizer steps left out of the step-time statistics.
    gpu_type : str, optional
        Device name, for devices NVML does not name (default: detected; ``cpu`` on CPU).
    family : str, optional
        The record's ``family`` (e.g. ``"decoder"``).

    Attributes
    ----------
    result : dict or None
        The last record written.
    """

    def __init__(self, history="default", model_name: str | None = None, *, warmup_steps: int = 3,
                 gpu_type: str | None = None, family: str | None = None):
        CallbackState.__init__(self, history, model_name, warmup_steps=warmup_steps, gpu_type=gpu_type,
                               family=family)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        """Start a record: write a run that never ended as interrupted, read the setup, start the recorder.

        Parameters
        ----------
        args : transformers.TrainingArguments
            The Trainer's arguments: batch, accumulation, world size, device, precision flags.
        state : transformers.TrainerState
            The Trainer's state (which process writes).
        control : transformers.TrainerControl
            Ignored (nothing here changes the training loop).
        model : torch.nn.Module, optional
            The model being trained: its config names it, its trainable parameters are counted.
        **kwargs
            The other objects the Trainer passes (ignored).
        """
        self._finish_unended()  # an earlier train() that never ended
        cfg = model.config.to_dict() if hasattr(model, "config") and hasattr(model.config, "to_dict") else {}
        name = self.model_name or model_name_from_config(cfg) or type(model).__name__
        accum = int(args.gradient_accumulation_steps)
        world = int(args.world_size) * max(1, int(args.n_gpu))
        gpu_type, cuda = device_gpu_type(args.device, self.gpu_type)
        precision = precision_from_flags(bf16=args.bf16, fp16=args.fp16, tf32=getattr(args, "tf32", None))
        recorder = Recorder(
            name, batch_size=int(args.per_device_train_batch_size), grad_accum=accum, module=model, gpu_count=world,
            gpu_type=gpu_type, precision=precision or "fp32", warmup_steps=self.warmup_steps, family=self.family,
            synchronize=cuda, rank=int(args.process_index),
            extra={"source": "hf_callback",
                   "protocol": f"hf_callback: Trainer optimizer steps timed on_step_begin to on_step_end (data "
                               f"loading, logging, evaluation and saving excluded), first {self.warmup_steps} "
                               "steps excluded"},
        )
        self._per_step_samples = recorder.batch_size * accum * world
        self._session = RecordingSession(recorder, self.history, writer=bool(state.is_world_process_zero))

    def on_step_begin(self, args, state, control, **kwargs):
        """Mark the start of an optimizer step.

        Parameters
        ----------
        args : transformers.TrainingArguments
            The Trainer's arguments.
        state : transformers.TrainerState
            The Trainer's state.
        control : transformers.TrainerControl
            Ignored (nothing here changes the training loop).
        **kwargs
            The other objects the Trainer passes (ignored).
        """
        if self._session is not None and not self._session.done:
            self._session.recorder.mark()

    def on_step_end(self, args, state, control, **kwargs):
        """Time the optimizer step that :meth:`on_step_begin` marked.

        Parameters
        ----------
        args : transformers.TrainingArguments
            The Trainer's arguments.
        state : transformers.TrainerState
            The Trainer's state.
        control : transformers.TrainerControl
            Ignored (nothing here changes the training loop).
        **kwargs
            The other objects the Trainer passes (ignored).
        """
        if self._session is not None and not self._session.done:
            self._session.recorder.step()

    def on_train_end(self, args, state, control, **kwargs):
        """Finish the record and append it to ``history`` (main process only); it is kept in :attr:`result`.

        ``flops_per_sample`` is the Trainer's ``total_flos`` over the samples trained, where it is reported.

        Parameters
        ----------
        args : transformers.TrainingArguments
            The Trainer's arguments.
        state : transformers.TrainerState
            The Trainer's state (``total_flos`` and ``global_step``).
        control : transformers.TrainerControl
            Ignored (nothing here changes the training loop).
        **kwargs
            The other objects the Trainer passes (ignored).
        """
        if self._session is None or self._session.done:
            return
        flops = None
        if state.total_flos and state.global_step:
            flops = float(state.total_flos) / (state.global_step * self._per_step_samples)
        self._session.recorder.flops_per_sample = flops
        self.result = self._session.finish(flops_method=FLOPS_METHOD if flops else None)
