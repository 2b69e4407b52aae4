"""A disk cache of fitted models, so that ``perfmodel predict`` does not refit the same history every time.

Models fitted on history *files* (the bundled runs, or your own CSV/Parquet) are saved in perfmodel's safe,
pickle-free format (:mod:`perfmodel.persistence`) under the cache directory, keyed by a SHA-256 of the files'
contents, the perfmodel version, the method and the kind of query the method was chosen for. A changed file, a
new perfmodel version or another method gives another key, so a stale model is never used. A file that cannot be
read back (damaged, other version) is ignored and refitted.

The key also holds a digest of the effective hardware spec table (:func:`perfmodel.hardware.table_digest`:
built-in rows, registered devices and those of ``PERFMODEL_DEVICES``), so a fit made with one device table is
never served after a device's figures changed.

Where: ``$PERFMODEL_CACHE_DIR`` if set (``off`` disables the cache), else the platform's user cache directory as
:mod:`platformdirs` gives it (``$XDG_CACHE_HOME/perfmodel`` or ``~/.cache/perfmodel`` on Linux,
``~/Library/Caches/perfmodel`` on macOS, ``%LOCALAPPDATA%\\perfmodel\\Cache`` on Windows). ``perfmodel cache
info`` shows it; ``perfmodel cache clear`` empties it. A cache directory that cannot be written warns once per
process (:class:`~perfmodel.exceptions.CacheWarning`) and every fit is then made afresh.
"""

from __future__ import annotations

import hashlib
import logging
import os
import warnings
from pathlib import Path

from ._version import __version__
from .exceptions import CacheWarning
from .hardware import table_digest

__all__ = ["cache_dir", "cache_key", "load_cached", "load_if_readable", "store", "clear", "info"]

_SUFFIX = ".perfmodel"
#: Bumped when fitted state changes meaning within one perfmodel version (part of every key).
_LAYOUT = 12  # 12: the mfu baseline splits attention (an attn_share column, split_by_pair_); 11: the mfu baseline pools by op class (a conv_share column); 10: one score book per model (perfmodel.models._conformal), keyed by history digest; 4: per-model new-device scores; 5: threads_shared_; 6: ops pools the recurrent class toward matmul; 7: held-out device scores per model; 8: interpolation scores for held-out batch sizes / counts, physics count extrapolation by distance; 9: per-model new-device scores from 2-8 device types widen
log = logging.getLogger("perfmodel")


def cache_dir() -> Path | None:
    """Where the cache is (it need not exist yet).

    Returns
    -------
    pathlib.Path or None
        ``$PERFMODEL_CACHE_DIR`` (with ``~`` expanded) if set, else the platform's user cache directory; None
        when the cache is off (``PERFMODEL_CACHE_DIR`` empty, ``off``, ``0`` or ``none``).
    """
    env = os.environ.get("PERFMODEL_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("perfmodel", appauthor=False))


def cache_key(digest: str, method: str, kind: str, fit_format: int | None = None) -> str:
    """The cache key of one fit.

    Parameters
    ----------
    digest : str
        The history's content digest (:attr:`perfmodel.history.LoadedHistory.digest`).
    method : str
        The method fitted (``auto`` included).
    kind : str
        The kind of query the method was chosen for (:data:`perfmodel.kinds.KIND_NAMES`).
    fit_format : int, optional
        :data:`perfmodel.models.FIT_FORMAT` of the fit: a model cached by code that computed fits otherwise is
        never found.

    Returns
    -------
    str
        32 hex digits of a SHA-256 of those, perfmodel's version, the cache layout and the hardware spec table
        in effect (:func:`perfmodel.hardware.table_digest`).
    """
    fmt = "" if fit_format is None else f"fit format {fit_format}\n"
    h = hashlib.sha256(f"perfmodel {__version__}/{_LAYOUT}\n{method}\n{kind}\n{digest}\n"
                       f"devices {table_digest()}\n{fmt}".encode())
    return h.hexdigest()[:32]


_WARNED: set[str] = set()  # cache directories already warned about in this process


def _warn_unwritable(where: Path, exc: BaseException) -> None:
    key = str(where)
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(f"the model cache directory {key} cannot be written ({' '.join(str(exc).split())}): every fit is "
                  "made afresh. Set PERFMODEL_CACHE_DIR to a writable directory, or to 'off'.", CacheWarning,
                  stacklevel=3)


def load_cached(key: str):
    """The cached model for ``key``.

    Parameters
    ----------
    key : str
        A key from :func:`cache_key`.

    Returns
    -------
    TrainingTimeModel or None
        The model, or None when it is absent, the cache is off, or the file is unreadable (never an error).
    """
    where = cache_dir()
    return None if where is None else load_if_readable(where / f"{key}{_SUFFIX}", "cached")


def load_if_readable(path: Path, what: str = "cached", *, probe: bool = True):
    """The model in a file that may be absent or unreadable (safe format only: never unpickles).

    Parameters
    ----------
    path : pathlib.Path
        The model file.
    what : str, default="cached"
        What the file is, for the log message when it is ignored (``cached``, ``shipped``...).
    probe : bool, default=True
        As in :func:`perfmodel.persistence.load_model` (False only for perfmodel's shipped models).

    Returns
    -------
    TrainingTimeModel or None
        The model, or None when the file is absent or cannot be loaded (logged at INFO, never an error).
    """
    if not path.is_file():
        return None
    from .persistence import load_model

    try:
        return load_model(path, probe=probe)
    except (ValueError, TypeError, OSError, KeyError) as exc:
        log.info("ignoring unreadable %s model %s (%s)", what, path, exc)
        return None


def store(key: str, model) -> Path | None:
    """Save ``model`` under ``key`` (atomically, safe format); a failure is never an error.

    A cache directory that cannot be created or written warns once per process
    (:class:`~perfmodel.exceptions.CacheWarning`); a model the safe format cannot hold is only logged.

    Parameters
    ----------
    key : str
        A key from :func:`cache_key`.
    model : TrainingTimeModel
        A fitted model.

    Returns
    -------
    pathlib.Path or None
        The file written, or None when the cache is off or the model could not be saved.
    """
    where = cache_dir()
    if where is None:
        return None
    from .persistence import save_model

    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _warn_unwritable(where, exc)
        return None
    try:
        return save_model(model, where / f"{key}{_SUFFIX}", force=True)  # the cache's own entry, damaged or not
    except OSError as exc:
        _warn_unwritable(where, exc)
        return None
    except (TypeError, ValueError) as exc:  # a model the safe format cannot hold: not the directory's fault
        log.info("could not cache the fitted model in %s (%s)", where, exc)
        return None


def info() -> dict:
    """What the cache holds.

    Returns
    -------
    dict
        ``directory`` (str, or None when the cache is off), ``enabled`` (bool), ``models`` (how many cached
        files) and ``bytes`` (their total size).
    """
    where = cache_dir()
    files = _entries(where)
    sizes = []
    for f in files:
        try:
            sizes.append(f.stat().st_size)
        except OSError:  # removed meanwhile
            pass
    return {"directory": None if where is None else str(where), "enabled": where is not None,
            "models": len(sizes), "bytes": sum(sizes)}


def _entries(where: Path | None) -> list[Path]:
    """The cached model entries: files (or links) named ``*.perfmodel``; a directory of that name is not one."""
    if where is None or not where.is_dir():
        return []
    return sorted(f for f in where.glob(f"*{_SUFFIX}") if f.is_symlink() or f.is_file())


def clear() -> int:
    """Delete the cached models (``*.perfmodel`` files in :func:`cache_dir`; nothing else there).

    Returns
    -------
    int
        How many were removed (0 when the cache is off or empty).
    """
    n = 0
    for f in _entries(cache_dir()):
        try:
            f.unlink()
            n += 1
        except FileNotFoundError:
            pass
    return n
