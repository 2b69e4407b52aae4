"""Late binding of a fitted model's convenience methods to the layers above it.

``TrainingTimeModel.save`` and ``.plot_fit``/``.plot_residuals``/``.plot_batch_curves`` are documented
conveniences, but the model layer must not know how it is saved or drawn (persistence and plotting sit above
it and import it). So the model asks this registry for the function by name; the *package root*
(``perfmodel/__init__.py``, the composition root above every layer) registers which module provides each one,
as a dotted path resolved on first use. No module below ``persistence``/``plot`` names them; the import-layer
test checks that.
"""

from __future__ import annotations

import importlib

__all__ = ["register", "resolve"]

_TARGETS: dict[str, str] = {}


def register(name: str, target: str) -> None:
    """Say that ``name`` is provided by ``target`` (``"package.module:function"``)."""
    _TARGETS[name] = target


def resolve(name: str):
    """The function registered for ``name``."""
    try:
        target = _TARGETS[name]
    except KeyError:
        raise LookupError(f"nothing provides {name!r}; import perfmodel (the package) first") from None
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)
