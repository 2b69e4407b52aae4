"""The :class:`Workload` record: what one training step needs. Its own module so that ``workload`` (which
dispatches to ``hf``) and ``hf`` (which builds Workloads) do not import each other."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Workload"]


@dataclass
class Workload:
    """One training step's ingredients, whatever the model's origin.

    Attributes
    ----------
    name : str
        The workload's name, as recorded in the history's ``model`` column.
    source : {"zoo", "hf", "factory"}
        Where the model came from: the built-in zoo, a ``hf:`` spec or a user's factory.
    family : str or None
        The model family (e.g. ``"decoder"``, ``"encoder"``), None where unknown.
    module : torch.nn.Module
        The model to train.
    make_inputs : callable
        ``(batch_size, device) -> (inputs tuple, target or None)``: one batch of inputs.
    loss : callable
        ``(output, inputs tuple, target) -> scalar tensor``: the loss to back-propagate.
    analytic_flops : float, optional
        Forward+backward FLOPs per sample from a closed form, where the model has one.
    seq_len : int, optional
        Tokens per sample for sequence models.
    checkpointing_supported : bool, default=False
        Whether :meth:`enable_checkpointing` can turn activation checkpointing on.
    """

    name: str
    source: str  # zoo | hf | factory
    family: str | None
    module: Any
    make_inputs: Callable  # (batch_size, device) -> (inputs tuple, target or None)
    loss: Callable  # (output, inputs tuple, target) -> scalar
    analytic_flops: float | None = None
    seq_len: int | None = None
    checkpointing_supported: bool = False

    def enable_checkpointing(self) -> bool:
        """Turn on activation checkpointing if the module supports it.

        Calls the module's ``activation_checkpointing_enable`` (transformers >= 5) or
        ``gradient_checkpointing_enable``; a ``hf`` module must also declare ``supports_gradient_checkpointing``.

        Returns
        -------
        bool
            Whether checkpointing is now on (False: the module has no such method, nothing was changed).
        """
        fn = (getattr(self.module, "activation_checkpointing_enable", None)  # transformers >= 5
              or getattr(self.module, "gradient_checkpointing_enable", None))
        if fn is None or (self.source == "hf" and not getattr(self.module, "supports_gradient_checkpointing", False)):
            return False
        fn()
        return True
