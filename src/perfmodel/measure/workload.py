"""What a measured run trains: a zoo model, a Hugging Face model from a config, or the user's own factory.

A model is named by a *spec* string, so that it can travel to a worker process:

* a zoo name (``gpt-s``, ``resnet50``; see :func:`perfmodel.measure.zoo.known_models`);
* ``hf:<model type or local config.json>[?key=value&...]`` (see :mod:`perfmodel.measure.hf`);
* ``pkg.module:factory`` or ``path/to/file.py:factory`` — a bring-your-own factory.

The bring-your-own contract
---------------------------
``factory()`` returns ``(module, make_batch)`` or ``(module, make_batch, loss_fn)``:

* ``module`` is a ``torch.nn.Module``;
* ``make_batch(batch_size)`` returns the positional inputs of one batch — a tensor or a tuple of tensors, on the
  CPU (perfmodel moves them to the device, once per run: the data are synthetic);
* ``loss_fn(output, inputs)`` returns a scalar tensor; ``inputs`` is what ``make_batch`` returned, on the device.
  Default: ``output.loss`` when the output has one, else ``output.float().mean()`` (for a tuple output, its first
  element; for an output with ``logits``, those).

Optional: ``module.gradient_checkpointing_enable()`` (the Hugging Face name) is called for activation
checkpointing, and a ``perfmodel_family`` attribute on the module names its family (``decoder``, ``cnn``, ...).
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["Workload", "model_kind", "factory_spec", "check_model_spec", "resolve_workload", "count_workload_flops",
           "FACTORY_CONTRACT"]

FACTORY_CONTRACT = ("factory() must return (module, make_batch) or (module, make_batch, loss_fn): a "
                    "torch.nn.Module, make_batch(batch_size) -> tensor or tuple of tensors, and optionally "
                    "loss_fn(output, inputs) -> scalar tensor")


def model_kind(spec: str) -> str:
    """``"hf"``, ``"factory"`` or ``"zoo"`` for a model spec string (no import, no validation of the target).

    Parameters
    ----------
    spec : str
        A model spec.

    Returns
    -------
    str
        ``"hf"`` for a ``hf:`` prefix, ``"factory"`` for any other spec with a ``:``, else ``"zoo"``.
    """
    if spec.startswith("hf:"):
        return "hf"
    if ":" in spec:
        return "factory"
    return "zoo"


def check_model_spec(spec: Any, where: str = "RunConfig") -> str:
    """Validate the *form* of a model spec (cheap; importing a factory happens in the worker).

    A zoo name must be known, a ``hf:`` spec must parse (:func:`~perfmodel.measure.hf.parse_hf_spec`), and a
    factory must read ``target:function``.

    Parameters
    ----------
    spec : object
        The model spec to check.
    where : str, default="RunConfig"
        What the spec was given to, for the error message.

    Returns
    -------
    str
        ``spec``, unchanged.

    Raises
    ------
    TypeError
        ``spec`` is not a non-empty string.
    ValueError
        An unknown zoo name, a malformed ``hf:`` spec or a malformed factory spec.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise TypeError(f"The 'model' parameter of {where} must be a non-empty str (a zoo name, 'hf:<type>' or "
                        f"'module:factory'). Got {spec!r}.")
    kind = model_kind(spec)
    if kind == "zoo":
        from .layouts import LAYOUT_MODELS
        from .zoo import known_models

        names = known_models() + list(LAYOUT_MODELS)  # the layout decoders run split over ranks (.layouts)
        if spec not in names:
            import difflib

            close = difflib.get_close_matches(spec, names, n=3, cutoff=0.3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ValueError(f"Unknown zoo model {spec!r}.{hint} Known: {', '.join(names)}; or give "
                             "'hf:<model type>' or 'pkg.module:factory'.")
    elif kind == "hf":
        from .hf import parse_hf_spec

        parse_hf_spec(spec)
    else:
        target, _, attr = spec.rpartition(":")
        if not target or not attr or not attr.replace(".", "_").isidentifier():
            raise ValueError(f"A model factory must be given as 'pkg.module:function' or 'path/to/file.py:function'. "
                             f"Got {spec!r}.")
    return spec


def factory_spec(fn: Callable) -> str:
    """The spec string of a factory callable: ``module:qualname`` (``file.py:qualname`` for a script's ``__main__``).

    Each run is its own process, so the factory must be importable there: a top-level function of a module (or of
    the script being run). Lambdas and nested functions are refused with a TypeError.

    Parameters
    ----------
    fn : callable
        A top-level factory function (see the module docstring for the contract).

    Returns
    -------
    str
        ``module:qualname``, or ``/absolute/path/to/script.py:qualname`` for a function of ``__main__``.

    Raises
    ------
    TypeError
        ``fn`` is not callable, or not importable by name (a lambda, a nested function, an interactive session's).
    """
    if not callable(fn):
        raise TypeError(f"A model must be a spec string or a factory callable. Got {type(fn).__name__}.")
    qual = getattr(fn, "__qualname__", None)
    mod = getattr(fn, "__module__", None)
    if not qual or not mod or "<" in qual:
        raise TypeError(f"The factory {fn!r} is not importable by name (a lambda, a nested function or a bound "
                        "object): each run is a separate process, so pass a top-level function of a module.")
    if mod == "__main__":
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)
        if not main_file:
            raise TypeError(f"The factory {qual} is defined in an interactive session; put it in a module or a "
                            "file and pass 'file.py:function'.")
        return f"{os.path.abspath(main_file)}:{qual}"
    return f"{mod}:{qual}"


def default_model_name(spec: str) -> str:
    """The record's ``model`` for a spec: the dotted name for a factory (``file.py:f`` keeps the file's stem)."""
    if model_kind(spec) == "factory":
        target, _, attr = spec.rpartition(":")
        if target.endswith(".py"):
            return f"{os.path.splitext(os.path.basename(target))[0]}:{attr}"
    return spec


from ._workload_types import Workload  # noqa: E402  (defined below hf's layer: hf builds Workloads)


def _load_factory(spec: str) -> Callable:
    target, _, attr = spec.rpartition(":")
    if target.endswith(".py") or os.sep in target:
        path = os.path.abspath(target)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"factory file {target!r} does not exist")
        name = "perfmodel_user_" + os.path.splitext(os.path.basename(path))[0]
        mod_spec = importlib.util.spec_from_file_location(name, path)
        if mod_spec is None or mod_spec.loader is None:  # not a file Python can import (a .txt, say)
            raise ImportError(f"factory file {target!r} cannot be imported as a Python module")
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[name] = module
        mod_spec.loader.exec_module(module)
    else:
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())
        module = importlib.import_module(target)
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AttributeError(f"{target!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{spec!r} is not callable")
    return obj


def _default_loss(output, inputs):
    loss = getattr(output, "loss", None)
    if loss is not None:
        return loss
    if isinstance(output, (tuple, list)):
        output = output[0]
    logits = getattr(output, "logits", None)
    if logits is not None:
        output = logits
    return output.float().mean()


def _as_inputs(batch) -> tuple:
    import torch

    inputs = tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)
    if not inputs or not all(isinstance(t, torch.Tensor) for t in inputs):
        got = type(batch).__name__
        if isinstance(batch, (tuple, list)):
            got += " of " + ", ".join(type(t).__name__ for t in batch)
        raise TypeError(f"make_batch(batch_size) must return a tensor or a tuple of tensors. Got {got}.")
    return inputs


def _factory_workload(spec: str, name: str) -> Workload:
    import torch

    fn = _load_factory(spec)
    out = fn()
    if not isinstance(out, (tuple, list)) or len(out) not in (2, 3):
        raise TypeError(f"{FACTORY_CONTRACT}. Got {type(out).__name__}"
                        f"{' of length ' + str(len(out)) if isinstance(out, (tuple, list)) else ''}.")
    module, make_batch = out[0], out[1]
    loss_fn = out[2] if len(out) == 3 else None
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"{FACTORY_CONTRACT}. Its first element is a {type(module).__name__}, not a Module.")
    if not callable(make_batch) or (loss_fn is not None and not callable(loss_fn)):
        raise TypeError(f"{FACTORY_CONTRACT}. make_batch and loss_fn must be callables.")
    single = {}

    def make_inputs(batch_size, device):
        batch = make_batch(int(batch_size))
        single["tensor"] = not isinstance(batch, (tuple, list))
        return tuple(t.to(device) for t in _as_inputs(batch)), None

    def loss(output, inputs, _target):
        given = inputs[0] if single.get("tensor") else inputs
        value = loss_fn(output, given) if loss_fn is not None else _default_loss(output, given)
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            raise TypeError(f"loss_fn(output, inputs) must return a scalar tensor. Got "
                            f"{type(value).__name__}{tuple(value.shape) if isinstance(value, torch.Tensor) else ''}.")
        return value.reshape(())

    family = getattr(module, "perfmodel_family", None)
    return Workload(name, "factory", family, module, make_inputs, loss,
                    checkpointing_supported=hasattr(module, "gradient_checkpointing_enable"))


def _zoo_workload(spec: str, name: str, knobs: dict, seq_len: int | None) -> Workload:
    from .zoo import build, default_seq_len

    knobs = dict(knobs)
    seq = default_seq_len(spec, knobs)
    if seq_len is not None and seq is not None:
        knobs["seq"] = int(seq_len)
        seq = int(seq_len)
    bundle = build(spec, **knobs)

    def make_inputs(batch_size, device):
        x, y = bundle.make_batch(int(batch_size), device)
        return (x,), y

    def loss(output, _inputs, target):
        return bundle.loss_fn(output, target)

    return Workload(name, "zoo", bundle.family, bundle.module, make_inputs, loss, bundle.analytic_flops, seq,
                    checkpointing_supported=hasattr(bundle.module, "gradient_checkpointing_enable"))


def resolve_workload(spec: str, *, name: str | None = None, knobs: dict | None = None,
                     seq_len: int | None = None) -> Workload:
    """Build the workload a spec names (imports the factory / transformers; raises on any failure).

    Parameters
    ----------
    spec : str
        A zoo name, a ``hf:`` spec or a ``target:factory`` spec.
    name : str, optional
        The workload's name; default the spec (a factory file's stem in place of its path).
    knobs : dict, optional
        Zoo models only: keyword arguments for :func:`perfmodel.measure.zoo.build`.
    seq_len : int, optional
        Tokens per sample, for zoo sequence models and ``hf:`` models (a factory's batch fixes its own).

    Returns
    -------
    Workload
        The module, its input maker and loss, and what is known of it (family, analytic FLOPs, sequence length).
    """
    name = name or default_model_name(spec)
    kind = model_kind(spec)
    if kind == "zoo":
        return _zoo_workload(spec, name, knobs or {}, seq_len)
    if kind == "hf":
        from .hf import hf_workload

        return hf_workload(spec, name=name, seq_len=seq_len)
    return _factory_workload(spec, name)


def count_workload_flops(wl: Workload, device) -> tuple[float | None, str]:
    """Forward+backward FLOPs of one sample (FlopCounterMode over a batch of one, on ``device``).

    Falls back to the workload's analytic count where the counter sees too little (aten LSTM kernels); returns
    ``(None, "none")`` when it sees nothing at all (say, a model made only of ops the counter does not know).
    The module's gradients are cleared afterwards and its training mode restored.

    Parameters
    ----------
    wl : Workload
        The workload to count (its module already on ``device``).
    device : str or torch.device
        Where the batch of one is made.

    Returns
    -------
    flops : float or None
        Forward+backward FLOPs of one sample.
    source : {"flop_counter", "analytic", "none"}
        Where the figure came from: the counter, the analytic count (the counter saw under half of it), or
        nowhere.
    """
    from torch.utils.flop_counter import FlopCounterMode

    module = wl.module
    inputs, target = wl.make_inputs(1, device)
    was_training = module.training
    module.train()
    with FlopCounterMode(display=False) as counter:
        wl.loss(module(*inputs), inputs, target).backward()
    module.zero_grad(set_to_none=True)
    module.train(was_training)
    total = float(counter.get_total_flops())
    if wl.analytic_flops is not None and total < 0.5 * wl.analytic_flops:
        return float(wl.analytic_flops), "analytic"
    if total > 0 and math.isfinite(total):
        return total, "flop_counter"
    return None, "none"
