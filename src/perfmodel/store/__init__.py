"""Run history in a database: SQLite by default, PostgreSQL for a team.

A store is named by a path or a URL wherever a history is (``history=``, ``--history``, ``append_runs``,
``load_runs``, ``perfmodel measure -o``):

* ``runs.db`` (also ``.sqlite``, ``.sqlite3``) or ``sqlite:///runs.db`` (``sqlite:////abs/path.db``): a SQLite
  file (:class:`SQLiteStore`), the default writable history;
* ``postgresql://user:password@host/database``: a PostgreSQL database (:class:`PostgresStore`; the
  ``postgres`` extra), for a history that many machines append to;
* ``"default"``: :func:`default_store`, i.e. ``$PERFMODEL_HISTORY`` when set, else ``runs.db`` in the user's data
  directory (:mod:`platformdirs`).

CSV and Parquet files stay readable everywhere and are how a history moves in and out of a store
(``perfmodel history import/export``, :func:`perfmodel.io.export_history`, :func:`perfmodel.io.import_history`).
Every append is one transaction, and appends cost the same whatever the size of the history; readers read a
snapshot while writers append; the digest that keys cached fits comes from the store (:meth:`HistoryStore.digest`)
instead of hashing the rows. The layout is described in :mod:`perfmodel.store._base`.

Examples
--------
::

    from perfmodel.store import open_store
    with open_store("runs.db") as store:
        store.append({"model": "m", "params": 1000, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu",
                      "step_time_s": 0.5})
        store.count(), store.read(where={"gpu_type": "cpu"})
"""

from __future__ import annotations

import os
from pathlib import Path

from ._base import SCHEMA_VERSION, HistoryStore, StoreSnapshot

__all__ = ["HistoryStore", "StoreSnapshot", "open_store", "is_store", "default_store", "DEFAULT_NAME",
           "SQLITE_SUFFIXES", "SCHEMA_VERSION", "store_label", "history_target"]

#: File suffixes of a SQLite history store.
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
#: The name that stands for :func:`default_store` in ``history=``, ``--history`` and ``-o``.
DEFAULT_NAME = "default"
_PG = ("postgresql://", "postgres://", "postgresql+")
_SQLITE_URL = "sqlite://"


def default_store(*, make_folder: bool = False) -> str:
    """The default writable history: ``$PERFMODEL_HISTORY`` if set, else ``runs.db`` in the user data directory.

    Parameters
    ----------
    make_folder : bool, default=False
        Create the user data directory if it does not exist (when the default is ``runs.db`` there).

    Returns
    -------
    str
        A path or URL (``~`` expanded). The data directory is :func:`platformdirs.user_data_dir`
        (``~/.local/share/perfmodel`` on Linux).
    """
    env = os.environ.get("PERFMODEL_HISTORY", "").strip()
    if env:
        return env if "://" in env else os.path.expanduser(env)
    import platformdirs

    folder = Path(platformdirs.user_data_dir("perfmodel", appauthor=False))
    if make_folder:
        folder.mkdir(parents=True, exist_ok=True)
    return str(folder / "runs.db")


def _resolve(target, make_folder: bool = False):
    """``default`` replaced by :func:`default_store`; anything else as it is."""
    if isinstance(target, str) and target == DEFAULT_NAME:
        return default_store(make_folder=make_folder)
    return target


def is_store(target) -> bool:
    """Whether ``target`` names a history store (rather than a CSV or Parquet file).

    Parameters
    ----------
    target : object
        A :class:`HistoryStore`, or a path or URL.

    Returns
    -------
    bool
        True for a store object, ``"default"``, a ``sqlite://`` or ``postgresql://`` URL, or a path ending in
        ``.db``, ``.sqlite`` or ``.sqlite3``.
    """
    if isinstance(target, HistoryStore):
        return True
    if not isinstance(target, (str, os.PathLike)):
        return False
    text = os.fspath(target)
    if not isinstance(text, str):
        return False
    if text == DEFAULT_NAME:
        return True
    lower = text.lower()
    if lower.startswith(_PG) or lower.startswith(_SQLITE_URL):
        return True
    return "://" not in text and Path(text).suffix.lower() in SQLITE_SUFFIXES


def history_target(target):
    """Where a writer appends: ``"default"`` resolved (its folder created), a URL or store as it is, a path as a
    :class:`pathlib.Path`.

    Parameters
    ----------
    target : str, path-like or HistoryStore
        A store or a history file.

    Returns
    -------
    pathlib.Path, str or HistoryStore
        A ``Path`` for a file (CSV, Parquet or SQLite), else the URL or the store.
    """
    target = _resolve(target, make_folder=True)
    if isinstance(target, HistoryStore) or "://" in os.fspath(target):
        return target
    return Path(target)


def store_label(target) -> str:
    """How a store target is named in messages and provenance.

    Parameters
    ----------
    target : str, path-like or HistoryStore
        A store.

    Returns
    -------
    str
        Its path, or its URL without the password.
    """
    if isinstance(target, HistoryStore):
        return target.label
    text = os.fspath(_resolve(target))
    if text.lower().startswith(_PG):
        from .postgres import masked

        return masked(text)
    return text


def open_store(target, *, create: bool = True) -> HistoryStore:
    """Open a history store by path or URL (nothing is read or created until it is used).

    Parameters
    ----------
    target : str, path-like or HistoryStore
        ``runs.db`` (``.sqlite``, ``.sqlite3``), ``sqlite:///path``, ``postgresql://...``, ``"default"``
        (:func:`default_store`), or a store (returned as it is).
    create : bool, default=True
        Create the store on its first write if it does not exist.

    Returns
    -------
    HistoryStore
        A :class:`~perfmodel.store.sqlite.SQLiteStore` or :class:`~perfmodel.store.postgres.PostgresStore`,
        usable as a context manager.

    Raises
    ------
    ValueError
        If ``target`` names no store (e.g. a ``.csv`` file).
    """
    if isinstance(target, HistoryStore):
        return target
    given = target
    target = _resolve(target, make_folder=create)
    if not is_store(target):
        raise ValueError(f"{os.fspath(given)!r} is not a history store: give a path ending in "
                         f"{', '.join(SQLITE_SUFFIXES)}, a sqlite:/// or postgresql:// URL, or 'default'.")
    text = os.fspath(target)
    if text.lower().startswith(_PG):
        from .postgres import PostgresStore

        return PostgresStore(text, create=create)
    from .sqlite import SQLiteStore

    if text.lower().startswith(_SQLITE_URL):
        path = text[len(_SQLITE_URL):]
        if not path.startswith("/"):
            raise ValueError(f"{text!r}: a SQLite URL is sqlite:///relative/path.db or sqlite:////absolute/path.db.")
        return SQLiteStore(path[1:] or ":memory:", create=create, label=text)
    return SQLiteStore(text, create=create, label=os.fspath(given) if given != DEFAULT_NAME else text)
