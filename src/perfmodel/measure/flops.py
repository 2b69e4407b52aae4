"""Parameters and forward+backward FLOPs of a user's torch module (``torch.utils.flop_counter``)."""

from __future__ import annotations

import copy
import math

__all__ = ["count_module", "count_params", "host_peak_flops"]


def count_params(module) -> int:
    """Trainable parameters of a torch module — the one place perfmodel counts them (zoo, recorder and
    :func:`count_module` call it).

    Parameters
    ----------
    module : torch.nn.Module
        The model.

    Returns
    -------
    int
        The number of elements of its parameters with ``requires_grad``.
    """
    return int(sum(p.numel() for p in module.parameters() if p.requires_grad))


def count_module(module, example_input) -> tuple[int, float | None]:
    """Trainable parameters and forward+backward FLOPs for one sample.

    The loss is the sum of the output (its first element, or its ``logits``), so backward covers every
    parameter. The module is deep-copied: the caller's module and its gradients are untouched.

    Parameters
    ----------
    module : torch.nn.Module
        The model to count.
    example_input : torch.Tensor or tuple of torch.Tensor
        One sample without the batch dimension; a batch dimension of 1 is added.

    Returns
    -------
    params : int
        Trainable parameters (:func:`count_params`).
    flops : float or None
        Forward+backward FLOPs of the sample (``torch.utils.flop_counter``); None where the counter sees none
        (e.g. aten LSTM kernels).

    Raises
    ------
    TypeError
        ``module`` is not a ``torch.nn.Module`` or ``example_input`` is not a tensor or a tuple of tensors.
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"count_module expects a torch.nn.Module. Got {type(module).__name__}.")
    inputs = example_input if isinstance(example_input, (tuple, list)) else (example_input,)
    if not all(isinstance(t, torch.Tensor) for t in inputs):
        raise TypeError("example_input must be a torch.Tensor (one sample, no batch dimension) or a tuple of them.")
    params = count_params(module)
    clone = copy.deepcopy(module)
    clone.train()
    batch = tuple(t.unsqueeze(0) for t in inputs)
    with FlopCounterMode(display=False) as counter:
        out = clone(*batch)
        if isinstance(out, (tuple, list)):
            out = out[0]
        if hasattr(out, "logits"):
            out = out.logits
        loss = out.float().sum()
        if loss.requires_grad:
            loss.backward()
    total = float(counter.get_total_flops())
    return params, (total if total > 0 and math.isfinite(total) else None)


def host_peak_flops(size: int = 2048, repeats: int = 10, threads: int | None = None) -> float:
    """Achieved fp32 matmul FLOP/s of this host (best of ``repeats`` ``size``×``size`` products, all cores).

    A CPU has no datasheet peak that applies to every host; this measured figure stands in for it where a
    "FLOPs / (peak × utilisation)" estimate needs one (the 6·N·D baseline of ``benchmarks/accuracy.py``).

    Parameters
    ----------
    size : int, default=2048
        The side of the square fp32 matrices multiplied.
    repeats : int, default=10
        Timed products (after one warm-up); the fastest counts.
    threads : int, optional
        Torch threads to use during the measurement; default all cores (``os.cpu_count()``). The previous
        thread count is restored afterwards.

    Returns
    -------
    float
        ``2 * size**3`` divided by the fastest product's seconds: FLOP/s.
    """
    import os
    import time

    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(threads or os.cpu_count() or 1)
    try:
        a, b = torch.randn(size, size), torch.randn(size, size)
        a @ b  # warm-up
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(old)
    return 2.0 * size**3 / best
