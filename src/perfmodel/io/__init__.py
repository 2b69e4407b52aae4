"""Reading and writing run histories: stores (:mod:`perfmodel.store`) and CSV or Parquet files.

Every function here takes a history store (``runs.db``, ``sqlite:///...``, ``postgresql://...``, ``"default"``)
as well as a file: a store is appended to in one transaction (:mod:`perfmodel.store`), and is the writable
history; CSV and Parquet files are read everywhere, are how a history moves in and out of a store
(:func:`export_history`, :func:`import_history`), and are still appended to for histories of earlier versions.
The rest of this docstring is about the files.

Every write goes through :func:`perfmodel._atomic.atomic_write` (a uniquely named temporary file in the same
folder, flushed, ``fsync``-ed and renamed over the target), so a crash or Ctrl-C leaves either the old history or
the new one, never half a file. Appends take a file lock (``<path>.lock``) so that several sweeps or recorders can
append to one history at once.

Round-trip fidelity (CSV)
-------------------------
A CSV history is read as text first and each known column is converted by the schema's own rules
(:func:`perfmodel.schema.coerce_dtypes`), never by sniffing: text columns keep their text exactly (``"1.10"``,
``"01234567"``, ``"NA"`` and ``"null"`` stay strings), numbers are written with ``repr`` precision and read back
exactly, and an empty field is a missing value (so an empty string and a missing value are the same in CSV;
Parquet keeps them apart). Columns perfmodel does not know stay text unless every value reads back losslessly as
a number. A header with a repeated or empty column name, or a row with too few or too many fields, is refused
with the line number.

Row checks (CSV)
----------------
Every row perfmodel writes ends in a ``row_crc32`` column: the CRC-32 (a decimal integer) of the row's other
fields, as text, joined by ``"\x1f"`` and encoded as UTF-8. A row cut short anywhere (a crash or a full disk
mid-write, a truncated copy) has either too few fields or a cut ``row_crc32``, which does not match: ``12.345``
cut to ``14.`` can no longer load as 14.0. pandas and spreadsheets read the column as one more number. On reading,
the column is checked and dropped (it never appears in a loaded frame); an empty ``row_crc32`` cell marks a row
added or edited by hand and is not checked; the next perfmodel write seals every row. The name is reserved: a
``row_crc32`` column in a frame being written (e.g. one read with ``pd.read_csv``) is replaced by fresh checks. A file without the column
(written by perfmodel before 0.1, or by hand) loads as before: its rows are checked for their field count only,
so a cut inside its last field cannot be seen, and :func:`recover_runs` reports a last row without a line end as
possibly cut.

Unknown columns
---------------
A column perfmodel does not know keeps exactly the text it was written with. In CSV it is read as numbers only
when every value reads back to the same text (``"1.5"``, ``"42"``, but not ``"-0"``, ``"1e5"``, ``"nan"`` or
``"007"``, which stay text), so a rewrite writes the same characters. Bytes cannot be stored in a CSV history;
in Parquet a column keeps one type: text, bytes and numbers are not mixed in one column (a value that would
change an existing one is refused with a :class:`~perfmodel.exceptions.SchemaError`).

Symbolic links
--------------
Every write resolves symbolic links first: appending to (or saving over) a link updates the file it points to,
under that file's lock (``<real file>.lock``), and leaves the link in place.

Parquet
-------
Parquet needs ``pyarrow`` (``pip install "perfmodel[parquet]"``); CSV does not. A Parquet history is read from a
single open file handle, so a reader racing a rewrite sees the old file or the new one whole.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from filelock import FileLock

from .._atomic import atomic_write, lock_path, real_target
from .._deprecation import renamed
from ..exceptions import MissingDependencyError, SchemaError
from ..schema import COLUMNS, coerce_dtypes, validate_runs
from ..store import is_store, open_store
from ..store._frames import as_frame, with_run_ids
from ._csv_text import ROW_CHECK, csv_bytes, read_csv_text, row_check

__all__ = ["load_runs", "save_runs", "append_runs", "append_new_runs", "read_raw_history", "write_history",
           "recover_runs", "export_history", "import_history", "check_history_target", "ROW_CHECK", "row_check",
           "MissingDependencyError"]


def _parquet():
    """``pyarrow.parquet``, or a :class:`MissingDependencyError` naming the extra to install."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingDependencyError(
            'Parquet histories need pyarrow, which is not installed: pip install "perfmodel[parquet]" '
            "(or use a .csv history).") from None
    return pq


_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def _format(path: Path) -> str:
    fmt = _FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(
            f"Run history {str(path)!r} must end in .csv or .parquet, or be a history store (.db, sqlite:///..., "
            f"postgresql://...) (got suffix {path.suffix!r})."
        )
    return fmt


def check_history_target(target, where: str = "output") -> str:
    """Refuse now a history a writer could not append to later: return ``"store"``, ``"csv"`` or ``"parquet"``.

    Parameters
    ----------
    target : str, path-like or HistoryStore
        A store (path ending in ``.db``/``.sqlite``/``.sqlite3``, ``sqlite:///`` or ``postgresql://`` URL,
        ``"default"``) or a ``.csv``/``.parquet`` file.
    where : str, default="output"
        What the target is called in the message.

    Returns
    -------
    str
        The kind of history.

    Raises
    ------
    ValueError
        For anything else (the message names the accepted forms).
    """
    if is_store(target):
        return "store"
    if not isinstance(target, (str, os.PathLike)):
        raise TypeError(f"The {where} history must be a path or URL. Got {type(target).__name__}.")
    return _format(Path(target))


def read_raw_history(path) -> pd.DataFrame:
    """Read a history as it is (a store, or CSV or Parquet by suffix), with the schema's dtypes but no validation.

    Parameters
    ----------
    path : str, path-like or HistoryStore
        A store (:mod:`perfmodel.store`: ``runs.db``, ``sqlite:///...``, ``postgresql://...``, ``"default"``) or
        a ``.csv``, ``.parquet`` or ``.pq`` file.

    Returns
    -------
    pandas.DataFrame
        Every row (failed runs included), known columns with the schema's dtypes; a CSV's ``row_crc32`` column
        is checked and dropped.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    SchemaError
        If the file cannot be parsed (a truncated Parquet file, a CSV row with the wrong number of fields, a
        repeated column name, a value that is not of its column's type); the message names the file and, for
        CSV, the line or rows.
    """
    if is_store(path):
        with open_store(path, create=False) as store:
            return store.read()
    path = Path(path)
    fmt = _format(path)
    if not path.exists():
        raise FileNotFoundError(f"Run history {str(path)!r} does not exist.")
    if fmt == "csv":
        return coerce_dtypes(read_csv_text(path))
    _parquet()
    try:
        # one open handle: a rewrite that renames a new file over this one cannot mix the two files' bytes
        with open(path, "rb") as fh:
            df = pd.read_parquet(fh)
    except OSError:
        raise
    except Exception as exc:  # pyarrow raises its own types for torn files
        raise SchemaError(
            f"Run history {str(path)!r} is not a readable Parquet file ({type(exc).__name__}: {exc})."
        ) from None
    if df.columns.duplicated().any():
        dup = df.columns[df.columns.duplicated()][0]
        raise SchemaError(f"Run history {str(path)!r} names column {dup!r} twice.")
    return coerce_dtypes(df)


def load_runs(source, *, include_failed: bool = False) -> pd.DataFrame:
    """Load and validate a run history.

    Parameters
    ----------
    source : str, path-like, HistoryStore or DataFrame
        A store (``runs.db``, ``sqlite:///...``, ``postgresql://...``, ``"default"``; :mod:`perfmodel.store`), a
        ``.csv`` or ``.parquet`` file, or a DataFrame with one row per run.
    include_failed : bool, default=False
        Keep runs whose ``status`` is ``oom``/``error``/``timeout``.

    Returns
    -------
    DataFrame
        The validated history (see :func:`perfmodel.schema.validate_runs`).

    Examples
    --------
    >>> import pandas as pd, perfmodel
    >>> runs = perfmodel.load_runs(pd.DataFrame({"model": ["m"], "params": [1000], "batch_size": [8],
    ...     "gpu_count": [1], "gpu_type": ["NVIDIA A100-SXM4-80GB"], "step_time_s": [0.1]}))
    >>> runs.loc[0, "gpu_type"]
    'A100-SXM4-80GB'
    """
    if isinstance(source, pd.DataFrame):
        return validate_runs(source, include_failed=include_failed)
    if isinstance(source, (str, os.PathLike)) or is_store(source):
        return validate_runs(read_raw_history(source), include_failed=include_failed)
    raise TypeError(
        f"load_runs expects a history store, a path to a .csv/.parquet file or a DataFrame. Got "
        f"{type(source).__name__} instead."
    )


def _ordered(df: pd.DataFrame) -> pd.DataFrame:
    known = [c.name for c in COLUMNS if c.name in df.columns]
    extra = [c for c in df.columns if c not in known]
    return df[known + extra]


def _value_kind(v) -> str | None:
    if v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and v != v):
        return None
    if isinstance(v, str):
        return "text"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "bytes"
    if isinstance(v, (bool, np.bool_)):
        return "booleans"
    if isinstance(v, (int, np.integer)):
        return "integers"
    if isinstance(v, (float, np.floating)):
        return "floats"
    return type(v).__name__


def _check_parquet_columns(df: pd.DataFrame) -> None:
    """Each object column holds one kind of value: pyarrow would turn text into bytes (or fail) in a column that
    mixes them, changing values already in the history."""
    for name in df.columns:
        col = df[name]
        if not pd.api.types.is_object_dtype(col.dtype):
            continue
        values = col.to_numpy(dtype=object)
        try:
            values = pd.unique(values)
        except TypeError:  # unhashable values (lists, dicts)
            pass
        kinds = {k for k in map(_value_kind, values) if k is not None}
        # pyarrow stores a bool among numbers as a number, and integers among floats as floats (2**60 + 1
        # would lose its last digits): refused below
        if "booleans" in kinds and kinds & {"integers", "floats"}:
            kinds -= {"booleans", "integers", "floats"}
            kinds.add("booleans and numbers")
        if len(kinds) > 1:
            raise SchemaError(f"Column {str(name)!r} would mix {' and '.join(sorted(kinds))} in one Parquet column, "
                              "which would change the values already stored; give the column one type (e.g. "
                              "text throughout).")


def _write_atomic(df: pd.DataFrame, path: Path, *, checks: bool = True) -> None:
    fmt = _format(path)
    # a frame read with pd.read_csv carries the old checks: every write computes them afresh
    df = df.drop(columns=ROW_CHECK, errors="ignore")
    if fmt == "csv":
        data = csv_bytes(df, checks=checks)
        with atomic_write(path) as fh:
            fh.write(data)
        return
    pq = _parquet()
    _check_parquet_columns(df)
    import pyarrow as pa

    try:
        table = pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(f"The history cannot be stored as Parquet ({type(exc).__name__}: {exc}).") from None
    with atomic_write(path) as fh:
        pq.write_table(table, fh)


def write_history(runs: pd.DataFrame, path: str | os.PathLike) -> Path | str:
    """Write a history frame as it is (no validation; columns in schema order), atomically under the file lock.

    For tools that rewrite a file they read with :func:`read_raw_history` and must change nothing but what they add
    (``perfmodel features add-ops``).

    Parameters
    ----------
    runs : pandas.DataFrame
        The frame to write.
    path : str, path-like or HistoryStore
        A ``.csv`` or ``.parquet`` file (a symbolic link is followed: the file it points to is rewritten), or a
        store, whose runs are replaced in one transaction.

    Returns
    -------
    pathlib.Path or str
        The path written (the link's target, for a link), or the store's label.
    """
    if is_store(path):
        with open_store(path) as store:
            store.replace(runs, validate=False)
            return _written(store)
    path = real_target(path)
    with FileLock(lock_path(path)):
        _write_atomic(_ordered(runs), path)
    return path


def save_runs(runs: pd.DataFrame, path: str | os.PathLike) -> Path | str:
    """Write a whole history atomically (temp file + rename), under the file lock. Failed runs are kept.

    Parameters
    ----------
    runs : pandas.DataFrame
        The runs; validated first (failed runs allowed).
    path : str, path-like or HistoryStore
        A ``.csv`` or ``.parquet`` file (a symbolic link is followed: the file it points to is replaced), or a
        store (:mod:`perfmodel.store`), whose runs are replaced in one transaction.

    Returns
    -------
    pathlib.Path or str
        The path written (the link's target, for a link; a SQLite store's file), or a PostgreSQL store's URL
        (without its password).

    Raises
    ------
    ValueError
        If ``path`` is not a store and does not end in ``.csv``, ``.parquet`` or ``.pq``.
    SchemaError
        If the runs fail validation.
    """
    if is_store(path):
        with open_store(path) as store:
            store.replace(runs)
            return _written(store)
    path = real_target(path)
    _format(path)
    df = validate_runs(runs, include_failed=True)
    with FileLock(lock_path(path)):
        _write_atomic(_ordered(df), path)
    return path


def _written(store) -> Path | str:
    """What a write to ``store`` returns: a SQLite store's file, else the store's label."""
    path = getattr(store, "path", None)
    return Path(path) if path is not None else store.label


def _combined(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """``old`` and ``new`` rows in one frame, every value as it was: a column the schema does not know whose type
    differs between the two (integers, then floats) becomes a column of Python objects, so that the rewrite
    writes each earlier value as it was (``1`` stays ``1``, 2**60 + 1 keeps its digits) instead of converting
    the whole column."""
    old, new = coerce_dtypes(old), coerce_dtypes(new)
    known = {c.name for c in COLUMNS}
    for name in set(old.columns) & set(new.columns) - known:
        if old[name].dtype != new[name].dtype:
            old[name] = pd.Series(old[name].to_numpy(dtype=object, na_value=None), index=old.index, dtype=object)
            new[name] = pd.Series(new[name].to_numpy(dtype=object, na_value=None), index=new.index, dtype=object)
    frames = [f for f in (old, new) if len(f)]
    return pd.concat(frames, ignore_index=True, sort=False) if len(frames) > 1 else frames[0]


def append_runs(records, path: str | os.PathLike, *, validate: bool = True) -> Path | str:
    """Append run records to a history file, creating it if needed.

    The append holds ``<path>.lock`` (so concurrent writers serialise) and rewrites the file atomically, so an
    interruption loses at most the records being appended, never the history already on disk.

    Parameters
    ----------
    records : dict, list of dict or DataFrame
        New runs.
    path : str, path-like or HistoryStore
        A store (:mod:`perfmodel.store`: ``runs.db``, ``sqlite:///...``, ``postgresql://...``, ``"default"``),
        appended to in one transaction whatever its size; or a ``.csv`` or ``.parquet`` file, rewritten whole
        (kept for histories of earlier versions: a store is the writable history).
    validate : bool, default=True
        Validate the new records (failed runs allowed) before writing.

    Returns
    -------
    pathlib.Path or str
        The path written (the link's target, for a symbolic link; a SQLite store's file), or a PostgreSQL
        store's URL without its password.
    """
    if is_store(path):
        with open_store(path) as store:
            store.append(records, validate=validate)
            return _written(store)
    path = real_target(path)
    _format(path)
    new = with_run_ids(as_frame(records))
    if validate:
        new = validate_runs(new, include_failed=True)
    with FileLock(lock_path(path)):
        if path.exists() and path.stat().st_size > 0:
            combined = _combined(read_raw_history(path), new)
        else:
            combined = coerce_dtypes(new)
        _write_atomic(_ordered(combined), path)
    return path


def append_new_runs(records, path: str | os.PathLike, *, key: str = "source_id") -> tuple[int, int]:
    """Append only the records whose ``key`` is not in the history yet (an idempotent import).

    Under the same lock and atomic rewrite as :func:`append_runs`: importing one source twice, or from two
    processes at once, stores each run once. Records without a ``key`` value are always appended.

    Parameters
    ----------
    records : dict, list of dict or DataFrame
        New runs (validated, failed runs allowed).
    path : str, path-like or HistoryStore
        A store (one transaction) or a ``.csv`` or ``.parquet`` history, created if needed.
    key : str, default="source_id"
        The column that identifies a run across imports; the records must have it.

    Returns
    -------
    added : int
        Records written.
    skipped : int
        Records left out because their ``key`` was already in the history (or appeared earlier in
        ``records``).

    Raises
    ------
    ValueError
        If the records have no ``key`` column.
    """
    if is_store(path):
        with open_store(path) as store:
            return store.append_new(records, key=key)
    path = real_target(path)
    _format(path)
    new = validate_runs(as_frame(records, "append_new_runs"), include_failed=True)
    if key not in new.columns:
        raise ValueError(f"append_new_runs: the records have no {key!r} column to deduplicate on.")
    with FileLock(lock_path(path)):
        old = read_raw_history(path) if path.exists() and path.stat().st_size > 0 else None
        seen = set() if old is None or key not in old.columns else set(old[key].dropna().astype(str))
        keys = new[key].astype("string")
        fresh = keys.isna() | ~keys.isin(seen)
        fresh &= ~(keys.duplicated() & keys.notna())
        fresh = fresh.to_numpy(dtype=bool)
        new = new.loc[fresh]
        if len(new):
            combined = _combined(old, new) if old is not None else coerce_dtypes(new)
            _write_atomic(_ordered(combined), path)
    return int(fresh.sum()), int((~fresh).sum())


def recover_runs(path: str | os.PathLike) -> tuple[pd.DataFrame, list[str]]:
    """Read the good rows of a damaged history and say what was dropped.

    perfmodel's own writes are atomic and never tear a file; this is for files damaged elsewhere (a copy cut
    short, a hand edit). CSV: rows with the wrong number of fields, or whose ``row_crc32`` check does not match
    (a row cut short or changed), are skipped and reported by line number; in a file without row checks, a last
    row without a line end is kept and reported as possibly cut.
    Parquet: row groups that read are kept; a file whose footer is gone has no readable row groups and raises.

    Parameters
    ----------
    path : str, path-like or HistoryStore
        A ``.csv`` or ``.parquet`` history, or a store (whose transactions never leave a torn row: its rows are
        read, and a SQLite file's ``PRAGMA integrity_check`` findings reported).

    Returns
    -------
    runs : pandas.DataFrame
        The readable rows, unvalidated (pass them to :func:`load_runs`).
    problems : list of str
        One message per dropped row or row group (or row kept but possibly cut).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    SchemaError
        If a Parquet file's footer is unreadable.

    Examples
    --------
    ::

        good, problems = perfmodel.io.recover_runs("runs.csv")
        print("\\n".join(problems))
        perfmodel.save_runs(perfmodel.load_runs(good, include_failed=True), "runs.repaired.csv")
    """
    if is_store(path):
        with open_store(path, create=False) as store:
            return store.read(), store.check()
    path = Path(path)
    fmt = _format(path)
    if not path.exists():
        raise FileNotFoundError(f"Run history {str(path)!r} does not exist.")
    problems: list[str] = []
    if fmt == "csv":
        bad: list = []
        df = read_csv_text(path, skip_bad=bad)
        problems += [(f"line {line}: {why}: {text!r}" if why.startswith("kept")
                      else f"dropped row at line {line}: it {why}: {text!r}") for line, why, text in bad]
        return df, problems
    pq = _parquet()
    with open(path, "rb") as fh:
        try:
            pf = pq.ParquetFile(fh)
        except Exception as exc:
            raise SchemaError(f"{str(path)!r}: the Parquet footer is unreadable ({type(exc).__name__}); no row "
                              "group can be located. Restore the file from a backup or re-measure.") from None
        frames = []
        for i in range(pf.num_row_groups):
            try:
                frames.append(pf.read_row_group(i).to_pandas())
            except Exception as exc:
                problems.append(f"dropped row group {i}: {type(exc).__name__}: {exc}")
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return df, problems


def export_history(source, path: str | os.PathLike, *, force: bool = False) -> int:
    """Write a history (a store, or a CSV or Parquet file) to a plain CSV or a Parquet file.

    The CSV is plain: no ``row_crc32`` column, text quoted, numbers with ``repr`` precision, missing values
    empty, so that pandas and spreadsheets read and write it as they like; :func:`import_history` reads it back
    with the same values. A CSV cell has no type of its own: a column the schema does not know comes back as
    numbers when every value reads back as written, else as text (booleans, and a column mixing integers and
    floats, come back as text). A Parquet export keeps those types, and holds bytes, which CSV cannot.

    Parameters
    ----------
    source : str, path-like or HistoryStore
        The history to export (every run, failed runs included, in append order).
    path : str or path-like
        A ``.csv`` or ``.parquet`` file; written atomically.
    force : bool, default=False
        Replace ``path`` if it exists (by default an existing file is refused).

    Returns
    -------
    int
        The runs written.

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``force`` is not given.
    SchemaError
        For a value the format cannot hold (bytes in a CSV, a Parquet column mixing types).
    """
    target = real_target(path)
    _format(target)
    if is_store(path):
        raise ValueError(f"export_history writes a .csv or .parquet file, not a store ({os.fspath(path)!r}); "
                         "use import_history to copy runs into a store.")
    if target.exists() and not force:
        raise FileExistsError(f"{os.fspath(path)!r} exists; pass force=True (perfmodel history export --force) "
                              "to replace it.")
    runs = read_raw_history(source)
    with FileLock(lock_path(target)):
        _write_atomic(_ordered(runs), target, checks=False)
    return len(runs)


def import_history(sources, target="default") -> tuple[int, int]:
    """Copy the runs of CSV or Parquet files (or another store) into a store, each run once.

    Files written by every perfmodel version load (a ``row_crc32`` column is checked and dropped). A run whose
    ``run_id`` is already in the store is skipped, so importing a file again adds nothing; rows without a
    ``run_id`` get a new one (and are added by every import). Runs that repeat a ``run_id`` inside a file are all
    imported. Each file is validated whole (failed runs kept) before anything is written, and goes in in one
    transaction.

    Parameters
    ----------
    sources : str, path-like, HistoryStore, or list of these
        The histories to import.
    target : str, path-like or HistoryStore, default="default"
        The store to import into (:func:`perfmodel.store.default_store` by default), created if needed.

    Returns
    -------
    added, skipped : int
        Runs written, and runs already in the store.
    """
    if not is_store(target):
        raise ValueError(f"import_history imports into a store (runs.db, sqlite:///..., postgresql://..., "
                         f"'default'); {os.fspath(target)!r} is not one. export_history writes CSV or Parquet.")
    sources = list(sources) if isinstance(sources, (list, tuple)) else [sources]
    frames = [with_run_ids(read_raw_history(src)) for src in sources]
    frames = [validate_runs(f, include_failed=True) for f in frames]
    added = skipped = 0
    with open_store(target) as store:
        for frame in frames:
            a, s = store.append_new(frame, key="run_id", repeats=True)
            added, skipped = added + a, skipped + s
    return added, skipped


# the old name still answers, with a DeprecationWarning, until perfmodel 0.4
__getattr__ = renamed(__name__, {"read_history": ("read_raw_history", "perfmodel.history.read_history is the validated"
                                                    " reader, returning a LoadedHistory")})
