"""Measurement workers die with their sweep, and a sweep never measures beside a stale worker.

A sweep starts each run in its own session (so that Ctrl-C reaches the sweep, which then kills the run), which
also means that killing the sweep's process group does not reach the worker: without more it would run on,
loading the CPU or GPU that the next sweep measures on. Three things prevent that:

* On Linux the worker (and ``torchrun``) is started with a parent-death signal (``prctl(PR_SET_PDEATHSIG,
  SIGKILL)``): when the sweep dies, the kernel kills it; ``torchrun``'s ranks set the same on themselves, so
  the chain sweep -> torchrun -> ranks comes down together.
* Every worker process also watches the sweep's pid (``PERFMODEL_SWEEP_PID``) from a daemon thread and exits
  within a second of the sweep's death (all platforms; covers the race before ``prctl`` takes effect).
* Each run's temporary directory (``perfmodel-run-*``) holds ``owner.json`` (sweep pid, worker process group).
  A new sweep removes the directories of dead sweeps and refuses to start, naming the pid, while a process of
  a dead sweep is still running.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from .._atomic import atomic_write_bytes, pid_alive, signal_reaches
from ..exceptions import MeasurementError

__all__ = ["preexec", "watch_sweep", "register", "check_stale_workers", "SWEEP_PID_ENV"]

SWEEP_PID_ENV = "PERFMODEL_SWEEP_PID"
_PR_SET_PDEATHSIG = 1
_OWNER = "owner.json"
_PREFIX = "perfmodel-run-"

_libc = None
if sys.platform.startswith("linux"):
    try:
        import ctypes

        _libc = ctypes.CDLL(None, use_errno=True)  # loaded here, not in the forked child
        _libc.prctl  # noqa: B018 - fail now if absent
    except (OSError, AttributeError):  # pragma: no cover - every Linux libc has prctl
        _libc = None


def _set_pdeathsig() -> None:
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def preexec():
    """``preexec_fn`` for a worker's Popen: die with the parent (Linux); None elsewhere."""
    if _libc is None:
        return None
    parent = os.getpid()

    def _child():
        _set_pdeathsig()
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return _child




def watch_sweep(interval_s: float = 0.5) -> None:
    """In a worker process: die with the parent (Linux) and exit as soon as the sweep is gone."""
    _set_pdeathsig()
    try:
        sweep = int(os.environ.get(SWEEP_PID_ENV, "0"))
    except ValueError:
        sweep = 0
    if sweep <= 0:
        return
    if not pid_alive(sweep):
        os._exit(1)

    def _watch():
        while True:
            time.sleep(interval_s)
            if not pid_alive(sweep):
                os._exit(1)

    threading.Thread(target=_watch, name="perfmodel-sweep-watch", daemon=True).start()


def register(run_dir: str | os.PathLike, worker_pid: int) -> None:
    """Record in a run's temporary directory which sweep and which worker process group own it."""
    info = {"sweep_pid": os.getpid(), "worker_pgid": int(worker_pid), "started": time.time()}
    atomic_write_bytes(Path(run_dir) / _OWNER, json.dumps(info).encode())


def _procs_mentioning(text: str) -> list[int]:
    """Pids whose command line contains ``text`` (Linux /proc; empty elsewhere)."""
    out: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return out
    needle = text.encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "cmdline").read_bytes():
                out.append(int(entry.name))
        except OSError:
            continue
    return out


def _group_alive(pgid: int) -> bool:
    return signal_reaches(os.killpg, pgid)


def check_stale_workers(tmpdir: str | os.PathLike | None = None) -> list[Path]:
    """Remove the run directories of dead sweeps; raise if a process of a dead sweep is still running.

    Returns the directories removed. Directories of live sweeps (a concurrent ``perfmodel measure``) are left
    alone.

    Raises
    ------
    MeasurementError
        Naming the live worker and how to stop it.
    """
    base = Path(tmpdir or tempfile.gettempdir())
    removed: list[Path] = []
    for d in sorted(base.glob(_PREFIX + "*")):
        if not d.is_dir():
            continue
        try:
            info = json.loads((d / _OWNER).read_text(encoding="utf-8"))
            sweep, pgid = int(info["sweep_pid"]), int(info["worker_pgid"])
        except (OSError, ValueError, KeyError, TypeError):
            # no owner file: a run directory being set up right now, or one from an older perfmodel
            try:
                old = time.time() - d.stat().st_mtime > 3600
            except OSError:
                continue
            if old and not _procs_mentioning(str(d)):
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d)
            continue
        if pid_alive(sweep):
            continue
        live = _procs_mentioning(str(d)) or ([pgid] if _group_alive(pgid) else [])
        if live:
            raise MeasurementError(
                f"a worker of an earlier, dead sweep is still running (pid {live[0]}, run directory {d}); "
                f"measuring beside it would slow both. Wait for it to end or stop it (kill -- -{pgid}; "
                f"kill {' '.join(map(str, live))}), then rerun."
            )
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed
