"""The SQLite history store: one file (``runs.db``), the standard library's :mod:`sqlite3`, write-ahead logging.

Write-ahead logging (WAL) lets readers read while a writer appends; writers queue on the file's write lock for
the length of one transaction (up to ``timeout`` seconds, default 60). Commits are ``fsync``-ed
(``synchronous=FULL``). SQLite's locks need one machine: several processes on one host share a store safely,
but a store on a network file system (NFS, Lustre) shared by several machines is not safe; a team shares a
PostgreSQL history instead (:mod:`perfmodel.store.postgres`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path

from ..exceptions import SchemaError
from ..schema import COLUMNS
from ._base import RUNS, HistoryStore
from ._frames import KINDS

__all__ = ["SQLiteStore"]

_TRIGGER = ("CREATE TRIGGER perfmodel_runs_{what}d AFTER {WHAT} ON perfmodel_runs BEGIN UPDATE perfmodel_meta "
            "SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'revision'; END")


class SQLiteStore(HistoryStore):
    """A run history in a SQLite file (see :class:`~perfmodel.store.HistoryStore` for the methods).

    Parameters
    ----------
    path : str or path-like
        The database file (a symbolic link is followed). Created, with its tables, on the first write.
    create : bool, default=True
        Create the file on the first write if it does not exist.
    timeout : float, default=60
        Seconds a writer waits for another writer's transaction before giving up (``TimeoutError``).
    label : str, optional
        How the store is named in messages (default: the path as given).
    """

    dialect = "sqlite"

    def __init__(self, path, *, create: bool = True, timeout: float = 60.0, label: str | None = None):
        super().__init__(path, create=create)
        self.path = Path(os.path.realpath(os.fspath(path)))
        self.timeout = float(timeout)
        self._label = label or os.fspath(path)

    @property
    def label(self) -> str:
        return self._label

    def _connect(self, write: bool):
        if not self.path.exists() or self.path.is_dir():
            if self.path.is_dir():
                raise IsADirectoryError(f"History store {self.label!r} is a directory, not a file.")
            if not (write and self.create):
                raise FileNotFoundError(f"Run history {self.label!r} does not exist.")
            if not self.path.parent.is_dir():
                raise FileNotFoundError(f"The folder of history store {self.label!r} does not exist: "
                                        f"{str(self.path.parent)!r}; create it first.")
        conn = sqlite3.connect(str(self.path), timeout=self.timeout, isolation_level=None, check_same_thread=False)
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if mode != "wal" and write:
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
        except BaseException:
            conn.close()
            raise
        return conn

    def _begin(self, cur, write: bool) -> None:
        cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")

    def _exists(self, cur) -> bool:
        cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        tables = {r[0] for r in cur.fetchall()}
        if "perfmodel_meta" in tables and RUNS in tables:
            return True
        others = sorted(t for t in tables if not t.startswith("sqlite_"))
        if others:
            raise SchemaError(f"{self.label!r} is a SQLite database but not a perfmodel run history (it holds "
                              f"tables {', '.join(others[:5])}); give a new file for the history.")
        return False

    def _table_columns(self, cur) -> set:
        cur.execute(f"PRAGMA table_info({RUNS})")
        return {r[1] for r in cur.fetchall()}

    def _create(self, cur) -> bool:
        cols = ", ".join(f'"{c.name}" {self._TYPES[c.kind]}' for c in COLUMNS)
        for sql in ("CREATE TABLE perfmodel_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                    "CREATE TABLE perfmodel_columns (position INTEGER PRIMARY KEY AUTOINCREMENT, "
                    "name TEXT UNIQUE NOT NULL)",
                    f"CREATE TABLE {RUNS} (seq INTEGER PRIMARY KEY AUTOINCREMENT, {cols}, extra TEXT)",
                    f"CREATE INDEX perfmodel_runs_run_id ON {RUNS} (run_id)",
                    f"CREATE INDEX perfmodel_runs_source_id ON {RUNS} (source_id)",
                    "CREATE TABLE perfmodel_steps (seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, "
                    "step_times_s TEXT NOT NULL)",
                    _TRIGGER.format(what="update", WHAT="UPDATE"),
                    _TRIGGER.format(what="delete", WHAT="DELETE")):
            cur.execute(sql)
        return True

    def _fetch_columns(self, cur, known: list, clause: str, params: list):
        """Column by column: text and integers as one JSON array (built by SQLite and parsed by json.loads,
        both in C, and exact for text and integers), floats through the driver (exact); a million rows are never
        a million Python tuples of every column."""
        for name in known + ["extra"]:
            sub = f'SELECT "{name}" AS v FROM {RUNS}{clause} ORDER BY seq'
            if KINDS.get(name) == "float":
                cur.execute(sub, params)
                yield name, [r[0] for r in cur.fetchall()]
                continue
            try:
                cur.execute(f"SELECT json_group_array(v) FROM ({sub})", params)
            except sqlite3.OperationalError as exc:  # a SQLite built without its JSON functions
                if "json_group_array" not in str(exc):
                    raise
                cur.execute(sub, params)
                yield name, [r[0] for r in cur.fetchall()]
                continue
            yield name, json.loads(cur.fetchone()[0])

    def check(self) -> list[str]:
        """``PRAGMA integrity_check`` of the file.

        Returns
        -------
        list of str
            One message per problem it finds (empty: none).
        """
        with self._tx(write=False) as cur:
            cur.execute("PRAGMA integrity_check")
            found = [r[0] for r in cur.fetchall()]
        return [] if found == ["ok"] else [f"integrity check: {f}" for f in found]

    @contextlib.contextmanager
    def _errors(self):
        try:
            yield
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" in text or "busy" in text:
                raise TimeoutError(f"History store {self.label!r} stayed locked by another writer for "
                                   f"{self.timeout:g} s; try again.") from None
            if "unable to open" in text:
                raise FileNotFoundError(f"History store {self.label!r} cannot be opened ({text}).") from None
            raise SchemaError(f"History store {self.label!r}: {text}.") from None
        except sqlite3.DatabaseError as exc:
            raise SchemaError(f"{self.label!r} is not a readable SQLite history ({exc}).") from None
