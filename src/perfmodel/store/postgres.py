"""The PostgreSQL history store: one history that the machines of a team or a cluster append to at once.

Needs ``psycopg`` 3 (``pip install "perfmodel[postgres]"``), imported only when a ``postgresql://`` store is
opened. The tables (``perfmodel_runs``, ``perfmodel_columns``, ``perfmodel_meta``, ``perfmodel_steps``; see
:mod:`perfmodel.store`) are created in the connection's current schema on the first write, so one database can
hold other tables too (an MLflow tracking store, say); to keep several histories in one database, give each
its own schema (``?options=-csearch_path%3Dteam_a`` in the URL). Writers serialise on a row lock for the length
of one transaction; readers read a snapshot (``REPEATABLE READ``) and never wait.
"""

from __future__ import annotations

import contextlib
import re

import pandas as pd

from ..exceptions import MissingDependencyError, SchemaError
from ..schema import COLUMNS
from ._base import RUNS, HistoryStore

__all__ = ["PostgresStore", "masked"]

_LOCK_ID = 0x7065726D  # pg_advisory_xact_lock key of the layout's creation ("perm")


def masked(url: str) -> str:
    """The URL without its password.

    Parameters
    ----------
    url : str
        A database URL.

    Returns
    -------
    str
        ``postgresql://user:***@host/db`` for ``postgresql://user:secret@host/db``.
    """
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", str(url))


def _conninfo(url: str) -> str:
    return re.sub(r"^postgres(?:ql)?(?:\+\w+)?://", "postgresql://", str(url))


class PostgresStore(HistoryStore):
    """A run history in a PostgreSQL database (see :class:`~perfmodel.store.HistoryStore` for the methods).

    Parameters
    ----------
    url : str
        ``postgresql://user:password@host:port/database`` (``postgres://`` and ``postgresql+psycopg://`` are
        accepted too, as are libpq's query parameters, e.g. ``?host=/run/postgresql`` for a socket).
    create : bool, default=True
        Create the tables on the first write if the database has none.
    connect_timeout : float, default=10
        Seconds to wait for the server.
    """

    dialect = "postgresql"
    _P = "%s"
    _TYPES = {"str": "TEXT", "int": "BIGINT", "float": "DOUBLE PRECISION"}

    def __init__(self, url: str, *, create: bool = True, connect_timeout: float = 10.0):
        super().__init__(url, create=create)
        self.url = str(url)
        self.connect_timeout = connect_timeout

    @property
    def label(self) -> str:
        return masked(self.url)

    def _driver(self):
        try:
            import psycopg
        except ImportError:
            raise MissingDependencyError('PostgreSQL histories need psycopg, which is not installed: pip install '
                                         '"perfmodel[postgres]".') from None
        return psycopg

    def _connect(self, write: bool):
        psycopg = self._driver()
        return psycopg.connect(_conninfo(self.url), autocommit=True,
                               connect_timeout=max(1, int(round(self.connect_timeout))))

    def _begin(self, cur, write: bool) -> None:
        cur.execute("BEGIN" if write else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def _lock(self, cur) -> None:
        cur.execute("SELECT value FROM perfmodel_meta WHERE key = 'revision' FOR UPDATE")

    def _exists(self, cur) -> bool:
        # pg_tables is read with the statement's snapshot (to_regclass's catalog cache can miss a table another
        # writer has just created and committed, while this one waited for the creation lock)
        cur.execute("SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = current_schema() "
                    "AND tablename IN ('perfmodel_meta', 'perfmodel_runs')")
        return cur.fetchone()[0] == 2

    def _table_columns(self, cur) -> set:
        cur.execute("SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                    "AND table_schema = current_schema()", (RUNS,))
        return {r[0] for r in cur.fetchall()}

    def _create(self, cur) -> bool:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
        if self._exists(cur):
            return False
        cols = ", ".join(f'"{c.name}" {self._TYPES[c.kind]}' for c in COLUMNS)
        for sql in ("CREATE TABLE perfmodel_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                    "CREATE TABLE perfmodel_columns (position BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
                    "name TEXT UNIQUE NOT NULL)",
                    f"CREATE TABLE {RUNS} (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, {cols}, extra TEXT)",
                    f"CREATE INDEX perfmodel_runs_run_id ON {RUNS} (run_id)",
                    f"CREATE INDEX perfmodel_runs_source_id ON {RUNS} (source_id)",
                    "CREATE TABLE perfmodel_steps (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
                    "run_id TEXT NOT NULL, step_times_s TEXT NOT NULL)",
                    "CREATE OR REPLACE FUNCTION perfmodel_bump_revision() RETURNS trigger LANGUAGE plpgsql AS $$ "
                    "BEGIN UPDATE perfmodel_meta SET value = (value::bigint + 1)::text WHERE key = 'revision'; "
                    "RETURN NULL; END $$",
                    f"CREATE TRIGGER perfmodel_runs_changed AFTER UPDATE OR DELETE OR TRUNCATE ON {RUNS} "
                    "FOR EACH STATEMENT EXECUTE FUNCTION perfmodel_bump_revision()"):
            cur.execute(sql)
        return True

    def _check_text(self, frame: pd.DataFrame, names: list) -> None:
        for name in names:
            col = frame[name]
            if isinstance(col.dtype, pd.StringDtype) and col.str.contains("\x00", regex=False).fillna(False).any():
                raise SchemaError(f"Column {name!r} holds text with a NUL character, which PostgreSQL text cannot "
                                  "store; remove it.")

    @contextlib.contextmanager
    def _errors(self):
        psycopg = self._driver()
        try:
            yield
        except psycopg.OperationalError as exc:
            first = " ".join(str(exc).split())[:300]
            raise ConnectionError(f"History store {self.label!r} cannot be reached: {first}") from None
        except psycopg.Error as exc:
            first = " ".join(str(exc).split())[:300]
            raise SchemaError(f"History store {self.label!r}: {first}") from None
