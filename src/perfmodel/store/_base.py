"""The history store interface and what SQLite and PostgreSQL share: the layout, transactions, appends, reads.

Layout (schema version :data:`SCHEMA_VERSION`)
----------------------------------------------
``perfmodel_runs``
    One row per run: ``seq`` (the order of appends), one typed column per schema column (text, 64-bit integer,
    double), and ``extra``, a JSON object with the fields the schema does not know (:mod:`._frames`).
``perfmodel_columns``
    The columns the history has, in the order they first appeared: a read returns these columns and no others,
    as a CSV history would.
``perfmodel_meta``
    ``format``, ``schema_version``, ``store_id`` (random, made with the store) and ``revision`` (one more at
    every append; triggers add one at any other change of ``perfmodel_runs``, e.g. an ``UPDATE`` by hand).
``perfmodel_steps``
    Per-step times of measured runs (``run_id``, a JSON list), where a sweep writes them.

Every append is one transaction: it is stored whole or not at all, whatever kills the writer. Writers take the
store's write lock for the transaction only (SQLite ``BEGIN IMMEDIATE``; on PostgreSQL a row lock on
``revision``), after the records are validated; readers read a snapshot and never wait for a writer. The digest
(:meth:`HistoryStore.digest`) names ``store_id`` and ``revision``, read with the rows in one snapshot, so a cached
fit is never served for other rows and the rows are never hashed.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import uuid
from collections.abc import Iterator, Mapping

import numpy as np
import pandas as pd

from .._version import __version__
from ..exceptions import SchemaError
from ..schema import COLUMNS, coerce_dtypes, validate_runs
from ._frames import KINDS, as_frame, column_values, decode_extras, encode_extras, known_array, with_run_ids

__all__ = ["HistoryStore", "SCHEMA_VERSION", "FORMAT", "RUNS", "StoreSnapshot"]

#: Layout version written in ``perfmodel_meta``; a store of a later version is refused, an earlier one migrated.
SCHEMA_VERSION = 1
#: ``perfmodel_meta.format`` of a perfmodel history store.
FORMAT = "perfmodel-history"
#: The table of runs.
RUNS = "perfmodel_runs"
_CHUNK = 500  # values per IN (...) list


class StoreSnapshot(tuple):
    """``(runs, digest)``: the rows of one read and the digest of the same snapshot."""

    __slots__ = ()

    def __new__(cls, runs: pd.DataFrame, digest: str):
        return super().__new__(cls, (runs, digest))

    @property
    def runs(self) -> pd.DataFrame:
        """The rows read (schema dtypes, no validation)."""
        return self[0]

    @property
    def digest(self) -> str:
        """The store's digest in the snapshot the rows were read from."""
        return self[1]


class HistoryStore:
    """A run history in a database: append, read with filters, count, digest, migrate.

    Open one with :func:`perfmodel.store.open_store` (a path ending in ``.db``, ``.sqlite`` or ``.sqlite3``, a
    ``sqlite:///`` URL, or a ``postgresql://`` URL); it is also a context manager that closes its connection.
    One object serves one process (open a new one after ``fork``).

    Parameters
    ----------
    target : str
        What the store was opened from, as given (the path or URL).
    create : bool, default=True
        Create the store (its file, or its tables in the database) on the first write if it does not exist.
        A read of a store that does not exist raises ``FileNotFoundError`` either way.
    """

    dialect = ""
    _P = "?"  # the driver's placeholder
    _TYPES = {"str": "TEXT", "int": "INTEGER", "float": "REAL"}

    def __init__(self, target, *, create: bool = True):
        self.target = target
        self.create = create
        self._conn = None
        self._ready = False

    # ------------------------------------------------------------------------------------------ subclass hooks
    @property
    def label(self) -> str:
        """The store as shown in messages and provenance (a URL without its password)."""
        return str(self.target)

    def _connect(self, write: bool):  # pragma: no cover - overridden
        raise NotImplementedError

    def _begin(self, cur, write: bool) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _lock(self, cur) -> None:
        """Take the write lock (SQLite's BEGIN IMMEDIATE already holds it)."""

    def _exists(self, cur) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError

    def _table_columns(self, cur) -> set:  # pragma: no cover - overridden
        raise NotImplementedError

    def _create(self, cur) -> bool:  # pragma: no cover - overridden
        """Create the tables; False when another writer created them first."""
        raise NotImplementedError

    def _errors(self):  # pragma: no cover - overridden
        """Context manager turning the driver's errors into perfmodel's (one sentence naming the store)."""
        raise NotImplementedError

    def _check_text(self, frame: pd.DataFrame, names: list) -> None:
        """Refuse text the database cannot hold (PostgreSQL: NUL characters)."""

    # ------------------------------------------------------------------------------------------ connection
    def _connection(self, write: bool):
        if self._conn is None:
            self._conn = self._connect(write)
        return self._conn

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None
            self._ready = False

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label!r})"

    @contextlib.contextmanager
    def _tx(self, write: bool) -> Iterator:
        with self._errors():
            conn = self._connection(write)
            cur = conn.cursor()
            self._begin(cur, write)
            try:
                yield cur
            except BaseException:
                with contextlib.suppress(Exception):
                    cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    def _q(self, sql: str) -> str:
        return sql.replace("?", self._P)

    # ------------------------------------------------------------------------------------------ layout
    def _layout_sql(self) -> list[str]:
        """The tables of a new store (the subclass adds its key column and triggers)."""
        return []

    def _meta(self, cur) -> dict:
        cur.execute("SELECT key, value FROM perfmodel_meta")
        return dict(cur.fetchall())

    def _check_meta(self, meta: dict) -> None:
        if meta.get("format") != FORMAT:
            raise SchemaError(f"{self.label!r} has perfmodel's tables but is not a perfmodel history store "
                              f"(format {meta.get('format')!r}).")
        version = int(meta.get("schema_version", "0"))
        if version > SCHEMA_VERSION:
            raise SchemaError(f"History store {self.label!r} has layout version {version}, written by a newer "
                              f"perfmodel (this one, {__version__}, reads up to {SCHEMA_VERSION}); upgrade "
                              "perfmodel.")

    def _prepare(self, cur, write: bool) -> None:
        """Make sure the layout is there (creating it for a write where allowed) and current (migrating it)."""
        if self._ready:
            return
        if not self._exists(cur):
            if not (write and self.create):
                raise FileNotFoundError(f"History store {self.label!r} does not exist (no perfmodel history "
                                        "in it yet).")
            if self._create(cur):  # False: another writer made it meanwhile
                cur.executemany(self._q("INSERT INTO perfmodel_meta (key, value) VALUES (?, ?)"),
                                [("format", FORMAT), ("schema_version", str(SCHEMA_VERSION)),
                                 ("store_id", uuid.uuid4().hex), ("revision", "0"),
                                 ("created_by", f"perfmodel {__version__}")])
        self._check_meta(self._meta(cur))
        if write:
            self._lock(cur)  # before any change of the layout: writers migrate one at a time
            self._migrate(cur)
        self._ready = write

    def _migrate(self, cur) -> list[str]:
        """Add the schema columns a store made by an earlier version lacks, moving their values out of
        ``extra`` (checked by the schema's rules: a value that does not fit its column is refused, naming it)."""
        have = self._table_columns(cur)
        missing = [c for c in COLUMNS if c.name not in have]
        notes = []
        for c in missing:
            cur.execute(f'ALTER TABLE {RUNS} ADD COLUMN "{c.name}" {self._TYPES[c.kind]}')
            cur.execute(self._q(f"SELECT seq, extra FROM {RUNS} WHERE extra LIKE ?"), (f'%"{c.name}":%',))
            found = [(seq, json.loads(text)) for seq, text in cur.fetchall()]
            found = [(seq, obj) for seq, obj in found if c.name in obj]
            if found:
                frame = pd.DataFrame({c.name: decode_extras([json.dumps({c.name: o[c.name]}) for _, o in found],
                                                            [c.name])[c.name]})
                values = column_values(coerce_dtypes(frame)[c.name], c.kind)
                rows = []
                for (seq, obj), v in zip(found, values):
                    del obj[c.name]
                    rows.append((v, json.dumps(obj, ensure_ascii=True, separators=(",", ":")) if obj else None, seq))
                cur.executemany(self._q(f'UPDATE {RUNS} SET "{c.name}" = ?, extra = ? WHERE seq = ?'), rows)
            notes.append(f"added column {c.name!r}" + (f" (moved {len(found)} values out of extra)" if found else ""))
        if missing:
            cur.execute(self._q("UPDATE perfmodel_meta SET value = ? WHERE key = 'schema_version'"),
                        (str(SCHEMA_VERSION),))
        return notes

    def migrate(self) -> list[str]:
        """Bring the store's layout up to this version's schema (also done before every write).

        Returns
        -------
        list of str
            What changed (an empty list when nothing had to).
        """
        with self._tx(write=True) as cur:
            if not self._exists(cur):
                raise FileNotFoundError(f"History store {self.label!r} does not exist.")
            self._check_meta(self._meta(cur))
            self._lock(cur)
            notes = self._migrate(cur)
        return notes

    # ------------------------------------------------------------------------------------------ writing
    def _frame(self, records, validate: bool, where: str) -> pd.DataFrame:
        frame = with_run_ids(as_frame(records, where))
        frame = validate_runs(frame, include_failed=True) if validate else coerce_dtypes(frame)
        if frame.columns.duplicated().any():
            raise SchemaError(f"The records name column {frame.columns[frame.columns.duplicated()][0]!r} twice.")
        return frame

    def _rows(self, frame: pd.DataFrame) -> tuple[list, list, list]:
        names = [str(c) for c in frame.columns]
        known = [n for n in names if n in KINDS]
        unknown = [n for n in names if n not in KINDS]
        self._check_text(frame, known)
        cols = [column_values(frame[n], KINDS[n]) for n in known] + [encode_extras(frame, unknown)]
        return names, known, list(zip(*cols))

    def _register(self, cur, names: list) -> None:
        cur.execute("SELECT name FROM perfmodel_columns")
        have = {r[0] for r in cur.fetchall()}
        new = [(n,) for n in names if n not in have]
        if new:
            cur.executemany(self._q("INSERT INTO perfmodel_columns (name) VALUES (?)"), new)

    def _insert(self, cur, names: list, known: list, rows: list) -> None:
        self._register(cur, names)
        cols = ", ".join(f'"{n}"' for n in known + ["extra"])
        marks = ", ".join([self._P] * (len(known) + 1))
        cur.executemany(f"INSERT INTO {RUNS} ({cols}) VALUES ({marks})", rows)

    def _bump(self, cur) -> None:
        cur.execute("UPDATE perfmodel_meta SET value = CAST(CAST(value AS BIGINT) + 1 AS TEXT) "
                    "WHERE key = 'revision'")

    def append(self, records, *, validate: bool = True) -> int:
        """Append runs in one transaction.

        Parameters
        ----------
        records : dict, list of dict or pandas.DataFrame
            New runs; a run without a ``run_id`` gets a unique one.
        validate : bool, default=True
            Validate them first (:func:`perfmodel.schema.validate_runs`, failed runs allowed); without it the
            schema's columns are still coerced to their types.

        Returns
        -------
        int
            The runs appended.
        """
        frame = self._frame(records, validate, "append_runs")
        names, known, rows = self._rows(frame)
        with self._tx(write=True) as cur:
            self._prepare(cur, write=True)
            self._lock(cur)
            self._insert(cur, names, known, rows)
            self._bump(cur)
        return len(rows)

    def append_new(self, records, *, key: str = "source_id", repeats: bool = False) -> tuple[int, int]:
        """Append only the records whose ``key`` is not in the store yet, in one transaction (an idempotent import).

        Parameters
        ----------
        records : dict, list of dict or pandas.DataFrame
            New runs (validated, failed runs allowed).
        key : str, default="source_id"
            A schema column that identifies a run across imports; records without a value are always appended.
        repeats : bool, default=False
            Keep records whose key repeats one earlier in ``records`` (a file being imported may hold such
            rows); by default only the first is appended.

        Returns
        -------
        added, skipped : int
            Records written, and records left out because their key was already stored (or came earlier in
            ``records``).
        """
        frame = self._frame(records, True, "append_new_runs")
        if key not in frame.columns:
            raise ValueError(f"append_new_runs: the records have no {key!r} column to deduplicate on.")
        if key not in KINDS:
            raise ValueError(f"append_new_runs: key {key!r} must be a schema column (e.g. source_id or run_id).")
        keys = frame[key].astype("string")
        wanted = sorted(set(keys.dropna()))
        with self._tx(write=True) as cur:
            self._prepare(cur, write=True)
            self._lock(cur)
            seen: set = set()
            for i in range(0, len(wanted), _CHUNK):
                part = wanted[i:i + _CHUNK]
                cur.execute(self._q(f'SELECT DISTINCT "{key}" FROM {RUNS} WHERE "{key}" IN '
                                    f"({', '.join('?' * len(part))})"), part)
                seen.update(str(r[0]) for r in cur.fetchall())
            fresh = keys.isna() | ~keys.isin(seen)
            if not repeats:
                fresh &= ~(keys.duplicated() & keys.notna())
            fresh = fresh.to_numpy(dtype=bool)
            if fresh.any():
                names, known, rows = self._rows(frame.loc[fresh].reset_index(drop=True))
                self._insert(cur, names, known, rows)
                self._bump(cur)
        return int(fresh.sum()), int((~fresh).sum())

    def replace(self, records, *, validate: bool = True) -> int:
        """Replace every run of the store with ``records``, in one transaction (what ``save_runs`` does).

        Parameters
        ----------
        records : dict, list of dict or pandas.DataFrame
            The runs the store will hold.
        validate : bool, default=True
            Validate them first (failed runs allowed); without it the schema's columns are still coerced.

        Returns
        -------
        int
            The runs written.
        """
        frame = self._frame(records, validate, "save_runs")
        names, known, rows = self._rows(frame)
        with self._tx(write=True) as cur:
            self._prepare(cur, write=True)
            self._lock(cur)
            cur.execute(f"DELETE FROM {RUNS}")
            cur.execute("DELETE FROM perfmodel_columns")
            self._insert(cur, names, known, rows)
            self._bump(cur)
        return len(rows)

    def append_steps(self, run_id: str, step_times) -> None:
        """Store the per-step times of a measured run.

        Parameters
        ----------
        run_id : str
            The run's ``run_id``.
        step_times : iterable of float
            Seconds of each timed step, in order.
        """
        text = json.dumps([float(t) for t in step_times])
        with self._tx(write=True) as cur:
            self._prepare(cur, write=True)
            cur.execute(self._q("INSERT INTO perfmodel_steps (run_id, step_times_s) VALUES (?, ?)"),
                        (str(run_id), text))

    def read_steps(self) -> dict:
        """Per-step times stored with :meth:`append_steps`.

        Returns
        -------
        dict
            ``run_id`` -> list of seconds.
        """
        with self._tx(write=False) as cur:
            self._prepare(cur, write=False)
            cur.execute("SELECT run_id, step_times_s FROM perfmodel_steps ORDER BY seq")
            return {rid: json.loads(text) for rid, text in cur.fetchall()}

    # ------------------------------------------------------------------------------------------ reading
    def _where(self, where: Mapping | None) -> tuple[str, list]:
        if not where:
            return "", []
        if not isinstance(where, Mapping):
            raise TypeError(f"where must be a mapping of column -> value(s). Got {type(where).__name__}.")
        parts, params = [], []
        for name, value in where.items():
            if name not in KINDS:
                raise ValueError(f"where: {name!r} is not a schema column; filters take the schema's columns.")
            values = list(value) if isinstance(value, (list, tuple, set, frozenset, np.ndarray, pd.Series)) \
                else [value]
            present = [v.item() if isinstance(v, np.generic) else v for v in values if not pd.isna(v)]
            terms = []
            if present:
                terms.append(f'"{name}" IN ({", ".join([self._P] * len(present))})')
                params += present
            if len(present) < len(values):
                terms.append(f'"{name}" IS NULL')
            parts.append("(" + (" OR ".join(terms) or "FALSE") + ")")
        return " WHERE " + " AND ".join(parts), params

    def _digest(self, cur, meta: dict) -> str:
        cur.execute(f"SELECT max(seq) FROM {RUNS}")
        top = cur.fetchone()[0]
        text = f"perfmodel-store {meta.get('store_id')} revision {meta.get('revision')} seq {top}"
        return hashlib.sha256(text.encode()).hexdigest()

    def snapshot(self, where: Mapping | None = None) -> StoreSnapshot:
        """The runs and the store's digest, read in one snapshot.

        Parameters
        ----------
        where : mapping, optional
            ``{column: value or list of values}`` over schema columns (None matches a missing value): only the
            runs that match every entry.

        Returns
        -------
        StoreSnapshot
            ``(runs, digest)``: every matching run in append order (failed runs included), the known columns in
            the schema's dtypes (unvalidated: :func:`perfmodel.load_runs` validates), the others as written.
        """
        clause, params = self._where(where)
        with self._tx(write=False) as cur:
            self._prepare(cur, write=False)
            meta = self._meta(cur)
            self._check_meta(meta)
            digest = self._digest(cur, meta)
            cur.execute("SELECT name FROM perfmodel_columns ORDER BY position")
            names = [r[0] for r in cur.fetchall()]
            have = self._table_columns(cur)
            known = [c.name for c in COLUMNS if c.name in names and c.name in have]
            unknown = [n for n in names if n not in known]
            data = {}
            collecting = gc.isenabled()
            gc.disable()  # millions of new row tuples would start full collections over and over
            try:
                # each column becomes its array as it arrives, so one column's Python values live at a time
                for name, values in self._fetch_columns(cur, known, clause, params):
                    if name == "extra":
                        data.update(decode_extras(values, unknown))
                    else:
                        data[name] = known_array(values, KINDS[name])
                    del values
            finally:
                if collecting:
                    gc.enable()
        order = [c.name for c in COLUMNS if c.name in data] + [n for n in names if n not in KINDS]
        frame = pd.DataFrame({n: data[n] for n in order}, columns=order)
        if any(n in KINDS for n in unknown):  # a schema column still in extra (a layout not yet migrated)
            frame = coerce_dtypes(frame)
        return StoreSnapshot(frame, digest)

    def _fetch_columns(self, cur, known: list, clause: str, params: list):
        """``(name, values)`` for each of ``known`` and ``extra``, values a list in append order."""
        select = ", ".join(f'"{n}"' for n in known + ["extra"])
        cur.execute(self._q(f"SELECT {select} FROM {RUNS}{clause} ORDER BY seq"), params)
        rows = cur.fetchall()
        columns = [list(v) for v in zip(*rows)] if rows else [[] for _ in range(len(known) + 1)]
        del rows
        yield from zip(known + ["extra"], columns)

    def read(self, where: Mapping | None = None) -> pd.DataFrame:
        """The runs (see :meth:`snapshot`), without the digest.

        Parameters
        ----------
        where : mapping, optional
            ``{column: value or list of values}`` over schema columns.

        Returns
        -------
        pandas.DataFrame
            The matching runs in append order.
        """
        return self.snapshot(where).runs

    def count(self, where: Mapping | None = None) -> int:
        """How many runs match ``where``.

        Parameters
        ----------
        where : mapping, optional
            ``{column: value or list of values}`` over schema columns (default: every run).

        Returns
        -------
        int
            The count.
        """
        clause, params = self._where(where)
        with self._tx(write=False) as cur:
            self._prepare(cur, write=False)
            cur.execute(self._q(f"SELECT count(*) FROM {RUNS}{clause}"), params)
            return int(cur.fetchone()[0])

    def digest(self) -> str:
        """What identifies the store's content now: its id, revision and last row, not a hash of the rows.

        Returns
        -------
        str
            A SHA-256 hex digest; it changes with every append and with any other change of the runs.
        """
        with self._tx(write=False) as cur:
            self._prepare(cur, write=False)
            meta = self._meta(cur)
            self._check_meta(meta)
            return self._digest(cur, meta)

    def check(self) -> list[str]:
        """Problems the database itself reports with its storage (SQLite's integrity check); empty when none.

        Returns
        -------
        list of str
            One message per problem.
        """
        return []

    def info(self) -> dict:
        """What the store is and holds.

        Returns
        -------
        dict
            ``store`` (label), ``kind``, ``schema_version``, ``store_id``, ``revision``, ``runs``, ``columns``,
            ``digest``.
        """
        with self._tx(write=False) as cur:
            self._prepare(cur, write=False)
            meta = self._meta(cur)
            cur.execute(f"SELECT count(*) FROM {RUNS}")
            n = int(cur.fetchone()[0])
            cur.execute("SELECT name FROM perfmodel_columns ORDER BY position")
            names = [r[0] for r in cur.fetchall()]
            digest = self._digest(cur, meta)
        return {"store": self.label, "kind": self.dialect, "schema_version": int(meta.get("schema_version", 0)),
                "store_id": meta.get("store_id"), "revision": int(meta.get("revision", 0)), "runs": n,
                "columns": names, "digest": digest}
