"""Peak memory of a measured run: the ``peak_mem_bytes`` and ``mem_source`` columns.

Two sources, named in ``mem_source``:

``cuda_max_allocated``
    On a CUDA device, ``torch.cuda.max_memory_allocated`` after ``torch.cuda.reset_peak_memory_stats`` at the
    start of the window: the most bytes held by live tensors at any moment (weights, gradients, optimizer state,
    activations, temporaries). It leaves out the CUDA context, cuBLAS/cuDNN workspaces that are not tensors and
    the allocator's cached but free blocks, so it is below what NVML sees (``gpu_mem_peak_bytes``).
``rss_delta``
    On the CPU (Linux): the bytes of the tensors resident when the window opens (parameters, buffers and the
    input batch, each storage counted once) plus the growth of the process's *anonymous* resident memory above
    its level at that moment, at its highest in the window. The highest point is the kernel's resident
    high-water mark (``VmHWM`` in ``/proc/self/status``) less the file-backed and shared resident pages at the
    window's end (``RssFile`` + ``RssShmem``: library code paged in, not data). ``VmHWM`` is a lifetime maximum
    (as ``getrusage``'s ``ru_maxrss`` is), so when the window opens it is reset to the current resident size by
    writing ``5`` to ``/proc/self/clear_refs`` (Linux 4.0+), after freed heap memory has been returned to the
    system (``gc.collect()`` and glibc ``malloc_trim(0)``), so that memory the process freed earlier but the C
    allocator kept is not silently reused inside the window.

    Why not the resident size before the model is built as the baseline: between that moment and the first step
    the process also loads modules once per process (constructing the first ``torch.optim`` optimizer imports
    ``torch._dynamo``: about 70 MB of Python heap with torch 2.13) and, in the measurement worker, counts the
    model's ops (about 35 MB more); a small model's "peak" would then be mostly imports. What the window does
    count beyond the tensors: gradients, optimizer state (created in the first step), activations, the
    temporaries of the backward pass and the optimizer, oneDNN/MKL scratch buffers, thread stacks and allocator
    fragmentation, i.e. what the training steps cost. File-backed pages first touched after the peak make the
    figure slightly low. Under DDP the reducer's gradient buckets, allocated when the model is wrapped, are
    not counted.

Where neither works (a CPU run off Linux, or a kernel that refuses the reset) both columns stay empty: a
lifetime maximum would count whatever the process did before the run.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from typing import Literal

__all__ = ["CpuPeakMemory", "MEM_SOURCES", "tensor_bytes"]

#: Values of the ``mem_source`` column.
MEM_SOURCES = ("cuda_max_allocated", "rss_delta")

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"
_LIBC: ctypes.CDLL | Literal[False] | None = None  # libc once looked up; False where it has no malloc_trim


def _status_bytes(*keys: str) -> dict | None:
    """The given ``/proc/self/status`` fields (kB there) in bytes; None where the file cannot be read."""
    out = {}
    try:
        with open(_STATUS, encoding="ascii") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in keys:
                    out[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return out if len(out) == len(keys) else None


def _trim() -> None:
    """Collect garbage and return free heap memory to the system (glibc ``malloc_trim``; a no-op elsewhere)."""
    global _LIBC
    gc.collect()
    if _LIBC is None:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _LIBC = libc if hasattr(libc, "malloc_trim") else False
        except OSError:
            _LIBC = False
    if _LIBC:
        _LIBC.malloc_trim(0)


def _reset_hwm() -> bool:
    """Reset the kernel's resident high-water mark to the current resident size; False where refused."""
    try:
        with open(_CLEAR_REFS, "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        return False
    now = _status_bytes("VmHWM", "VmRSS")
    # the reset took if the mark is back at the resident size (a few pages may have been touched since)
    return now is not None and now["VmHWM"] - now["VmRSS"] < 1 << 20


def tensor_bytes(*objs) -> int:
    """Bytes of the distinct storages of the given tensors and of modules' parameters and buffers.

    Each storage is counted once (tied weights, views of one tensor); tuples and lists are walked."""
    import torch

    seen: dict = {}

    def add(t) -> None:
        if isinstance(t, torch.nn.Module):
            for x in (*t.parameters(), *t.buffers()):
                add(x)
        elif isinstance(t, (tuple, list)):
            for x in t:
                add(x)
        elif isinstance(t, torch.Tensor) and t.device.type != "meta":
            st = t.untyped_storage()
            seen[(t.device.type, st.data_ptr())] = st.nbytes()

    for obj in objs:
        add(obj)
    return int(sum(seen.values()))


class CpuPeakMemory:
    """Peak training memory of this process on the CPU over a window (``rss_delta``, see the module docstring).

    Call :meth:`start` with the bytes of the tensors already resident (:func:`tensor_bytes`) when the window
    opens, and :meth:`peak_bytes` when it closes. :attr:`available` is False where the method cannot work (no
    ``/proc/self/status``, or the high-water mark cannot be reset); :meth:`peak_bytes` is then None.
    """

    source = "rss_delta"

    def __init__(self):
        self._anon0 = None
        self._resident = 0
        self.available = _status_bytes("VmHWM", "RssAnon", "RssFile", "RssShmem") is not None

    def start(self, resident_bytes: int = 0) -> None:
        """Open the window: return free heap memory, read the anonymous resident size, reset the high-water mark.

        Parameters
        ----------
        resident_bytes : int, default=0
            Bytes of the tensors resident now that the peak should include (the model, the input batch).
        """
        if not self.available:
            return
        _trim()
        now = _status_bytes("RssAnon")
        if now is None or not _reset_hwm():
            self.available = False
            return
        self._anon0 = now["RssAnon"]
        self._resident = int(resident_bytes)

    def peak_bytes(self) -> float | None:
        """The window's peak: ``resident_bytes`` plus the highest anonymous resident growth (>= 0); or None.

        Returns
        -------
        float or None
        """
        if not self.available or self._anon0 is None:
            return None
        now = _status_bytes("VmHWM", "RssFile", "RssShmem")
        if now is None:
            return None
        growth = now["VmHWM"] - now["RssFile"] - now["RssShmem"] - self._anon0
        return float(self._resident + max(0, growth))
