"""Host facts and GPU telemetry through NVML (package ``nvidia-ml-py``, imported as ``pynvml``).

Without NVML (no GPU, no driver, package missing) every GPU column is left empty and one line is logged: the run
still records normally.
"""

from __future__ import annotations

import logging
import os
import platform
import socket
import threading
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["host_facts", "NvmlSampler", "nvml_device_facts"]

_NVML_WARNED = False


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_facts() -> dict:
    """CPU model, logical cores, host name, Python version (torch version is added by the caller).

    Returns
    -------
    dict
        Keys ``cpu_model``, ``cpu_cores``, ``hostname`` and ``python_version``.
    """
    return {
        "cpu_model": _cpu_model(),
        "cpu_cores": os.cpu_count() or 1,
        "hostname": socket.gethostname(),
        "python_version": platform.python_version(),
    }


def _nvml():
    """Import and initialise NVML; None (with one log line per process) when it is unavailable."""
    global _NVML_WARNED
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception as exc:  # ImportError or pynvml.NVMLError (library/driver not found)
        if not _NVML_WARNED:
            logger.info("NVML unavailable (%s); GPU telemetry columns stay empty.", exc)
            _NVML_WARNED = True
        return None


def nvml_device_facts(index: int = 0) -> dict:
    """Device name, memory total and driver version of GPU ``index``; empty dict without NVML.

    Parameters
    ----------
    index : int, default=0
        The NVML index of the GPU.

    Returns
    -------
    dict
        Keys ``gpu_name``, ``gpu_mem_total_bytes`` and ``driver_version``; empty when NVML is unavailable or the
        query fails (logged).
    """
    nv = _nvml()
    if nv is None:
        return {}
    try:
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        name = nv.nvmlDeviceGetName(handle)
        name = name.decode() if isinstance(name, bytes) else name
        driver = nv.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        return {
            "gpu_name": name,
            "gpu_mem_total_bytes": float(nv.nvmlDeviceGetMemoryInfo(handle).total),
            "driver_version": driver,
        }
    except nv.NVMLError as exc:
        logger.info("NVML query failed (%s); GPU facts left empty.", exc)
        return {}


class NvmlSampler:
    """Sample utilisation, memory use and power of one GPU in a background thread.

    Use as a context manager around the timed window; :meth:`summary` gives the record's telemetry columns.
    Without NVML, or without a handle for the GPU, no thread is started and the summary is empty.

    Parameters
    ----------
    index : int, default=0
        The NVML index of the GPU to sample.
    interval_s : float, default=0.1
        Seconds between samples.
    """

    def __init__(self, index: int = 0, interval_s: float = 0.1):
        self.index = index
        self.interval_s = interval_s
        self._samples: list[tuple[float, float, float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nv: Any = None  # the pynvml module once NVML is initialised
        self._handle: Any = None

    def __enter__(self):
        self._nv = _nvml()
        if self._nv is not None:
            try:
                self._handle = self._nv.nvmlDeviceGetHandleByIndex(self.index)
            except self._nv.NVMLError as exc:
                logger.info("NVML handle unavailable (%s); no telemetry.", exc)
                self._nv = None
        if self._nv is not None:
            self._thread = threading.Thread(target=self._run, name="perfmodel-nvml", daemon=True)
            self._thread.start()
        return self

    def _run(self):
        nv = self._nv
        while not self._stop.is_set():
            try:
                util = nv.nvmlDeviceGetUtilizationRates(self._handle)
                mem = nv.nvmlDeviceGetMemoryInfo(self._handle)
                power = nv.nvmlDeviceGetPowerUsage(self._handle) / 1000.0
                self._samples.append((float(util.gpu), float(util.memory), float(mem.used), power))
            except nv.NVMLError:
                break
            self._stop.wait(self.interval_s)

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        return False

    def summary(self) -> dict:
        """The telemetry columns of the samples taken.

        Returns
        -------
        dict
            ``gpu_util_mean_pct``, ``mem_util_mean_pct``, ``power_mean_w`` (means) and ``gpu_mem_peak_bytes``
            (the largest memory use sampled); empty when no sample was taken.
        """
        if not self._samples:
            return {}
        n = len(self._samples)
        return {
            "gpu_util_mean_pct": sum(s[0] for s in self._samples) / n,
            "mem_util_mean_pct": sum(s[1] for s in self._samples) / n,
            "gpu_mem_peak_bytes": max(s[2] for s in self._samples),
            "power_mean_w": sum(s[3] for s in self._samples) / n,
        }
