"""The :class:`Workload` record: what one training step needs. Its own module so that ``workload`` (which
dispatches to ``hf``) and ``hf`` (which builds Workloads) do not import each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Workload"]


@dataclass
class Workload:
    """One training step's ingredients, whatever the model's origin."""

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
        """Turn on activation checkpointing if the module supports it; return whether it is on."""
        fn = (getattr(self.module, "activation_checkpointing_enable", None)  # transformers >= 5
              or getattr(self.module, "gradient_checkpointing_enable", None))
        if fn is None or (self.source == "hf" and not getattr(self.module, "supports_gradient_checkpointing", False)):
            return False
        fn()
        return True
