"""Reading and writing run histories (CSV or Parquet), atomically and safely under concurrent writers.

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
"""

from __future__ import annotations

import csv
import os
import re
import uuid
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import pandas as pd
from filelock import FileLock

from ._atomic import atomic_write
from .exceptions import SchemaError
from .schema import COLUMNS, coerce_dtypes, validate_runs

__all__ = ["load_runs", "save_runs", "append_runs", "append_new_runs", "read_history", "recover_runs"]

_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def _format(path: Path) -> str:
    fmt = _FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(
            f"Run history {str(path)!r} must end in .csv or .parquet (got suffix {path.suffix!r})."
        )
    return fmt


_INT_TEXT = re.compile(r"^-?(?:0|[1-9][0-9]*)$")


def _lossless_column(values: list) -> pd.Series:
    """An unknown CSV column: numbers when every non-empty value reads back to the same text, else text."""
    filled = [v for v in values if v != ""]
    if filled and all(_INT_TEXT.match(v) for v in filled):
        ints = [int(v) for v in filled]
        if all(-(2**62) < i < 2**62 for i in ints):
            return pd.array([int(v) if v != "" else None for v in values], dtype="Int64")
    if filled:
        try:
            floats = [float(v) for v in filled]
        except ValueError:
            floats = None
        if floats is not None and all(repr(f) == v for f, v in zip(floats, filled)):
            return pd.array([float(v) if v != "" else None for v in values], dtype="Float64").astype("float64")
    return pd.array([v if v != "" else None for v in values], dtype="string")


def _read_csv_text(path: Path, *, skip_bad: list | None = None) -> pd.DataFrame:
    """Read a CSV history field by field, keeping every value as text ('' -> missing)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh, strict=True)
            try:
                header = next(reader)
            except StopIteration:
                raise SchemaError(f"Run history {str(path)!r} is empty (no header, no rows).") from None
            seen: set = set()
            for i, name in enumerate(header):
                if name.strip() == "":
                    raise SchemaError(f"Run history {str(path)!r}: column {i + 1} of the header has no name "
                                      "(a trailing comma?).")
                if name in seen:
                    raise SchemaError(f"Run history {str(path)!r}: the header names column {name!r} twice.")
                seen.add(name)
            n = len(header)
            rows: list = []
            for row in reader:
                if not row:  # a blank line
                    continue
                if len(row) != n:
                    if skip_bad is not None:
                        skip_bad.append((reader.line_num, ",".join(row)[:80]))
                        continue
                    hint = " (a trailing comma?)" if len(row) == n + 1 and row[-1] == "" else ""
                    raise SchemaError(
                        f"Run history {str(path)!r} cannot be parsed as CSV: line {reader.line_num} has "
                        f"{len(row)} fields but the header has {n}{hint}. perfmodel.io.recover_runs reads the "
                        "other rows.")
                rows.append(row)
    except UnicodeDecodeError as exc:
        raise SchemaError(f"Run history {str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start}).") from None
    except csv.Error as exc:
        raise SchemaError(f"Run history {str(path)!r} cannot be parsed as CSV: {exc}.") from None
    known = {c.name for c in COLUMNS}
    data = {}
    for j, name in enumerate(header):
        values = [r[j] for r in rows]
        if name in known:
            data[name] = pd.array([v if v != "" else None for v in values], dtype="string")
        else:
            data[name] = _lossless_column(values)
    return pd.DataFrame(data, columns=header) if data else pd.DataFrame(columns=header)


def read_history(path: str | os.PathLike) -> pd.DataFrame:
    """Read a history file as it is (CSV or Parquet by suffix), with the schema's dtypes but no validation.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    SchemaError
        If the file cannot be parsed (a truncated Parquet file, a CSV row with the wrong number of fields, a
        repeated column name, a value that is not of its column's type); the message names the file and, for
        CSV, the line or rows.
    """
    path = Path(path)
    fmt = _format(path)
    if not path.exists():
        raise FileNotFoundError(f"Run history {str(path)!r} does not exist.")
    if fmt == "csv":
        return coerce_dtypes(_read_csv_text(path))
    try:
        df = pd.read_parquet(path)
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
    source : str, path-like or DataFrame
        A ``.csv`` or ``.parquet`` file, or a DataFrame with one row per run.
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
    if isinstance(source, (str, os.PathLike)):
        return validate_runs(read_history(source), include_failed=include_failed)
    raise TypeError(
        f"load_runs expects a path to a .csv/.parquet file or a DataFrame. Got {type(source).__name__} instead."
    )


def _ordered(df: pd.DataFrame) -> pd.DataFrame:
    known = [c.name for c in COLUMNS if c.name in df.columns]
    extra = [c for c in df.columns if c not in known]
    return df[known + extra]


def _write_atomic(df: pd.DataFrame, path: Path) -> None:
    fmt = _format(path)
    with atomic_write(path) as fh:
        if fmt == "csv":
            # text quoted, numbers bare with repr precision: a '\r' or ',' inside text cannot split a row
            df.to_csv(fh, index=False, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n", encoding="utf-8")
        else:
            df.to_parquet(fh, index=False)


def write_history(runs: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write a history frame as it is (no validation; columns in schema order), atomically under the file lock.

    For tools that rewrite a file they read with :func:`read_history` and must change nothing but what they add
    (``perfmodel features add-ops``). Returns the path written.
    """
    path = Path(path)
    with FileLock(str(path) + ".lock"):
        _write_atomic(_ordered(runs), path)
    return path


def save_runs(runs: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write a whole history atomically (temp file + rename). Failed runs are kept.

    Returns the path written.
    """
    path = Path(path)
    df = validate_runs(runs, include_failed=True)
    with FileLock(str(path) + ".lock"):
        _write_atomic(_ordered(df), path)
    return path


def _as_frame(records) -> pd.DataFrame:
    if isinstance(records, pd.DataFrame):
        return records
    if isinstance(records, Mapping):
        return pd.DataFrame([dict(records)])
    if isinstance(records, Iterable):
        return pd.DataFrame([dict(r) for r in records])
    raise TypeError(f"append_runs expects a record dict, a list of dicts or a DataFrame. Got {type(records).__name__}.")


def _with_run_ids(new: pd.DataFrame) -> pd.DataFrame:
    """Give every record without a run_id a unique one (not ``row-<i>``, which would repeat across appends)."""
    missing = new["run_id"].isna().to_numpy() if "run_id" in new.columns else np.ones(len(new), dtype=bool)
    if not missing.any():
        return new
    new = new.copy()
    ids = pd.array([uuid.uuid4().hex[:12] if m else None for m in missing], dtype="string")
    if "run_id" in new.columns:
        new["run_id"] = new["run_id"].astype("string").mask(missing, ids)
    else:
        new.insert(0, "run_id", ids)
    return new


def append_runs(records, path: str | os.PathLike, *, validate: bool = True) -> Path:
    """Append run records to a history file, creating it if needed.

    The append holds ``<path>.lock`` (so concurrent writers serialise) and rewrites the file atomically, so an
    interruption loses at most the records being appended, never the history already on disk.

    Parameters
    ----------
    records : dict, list of dict or DataFrame
        New runs.
    path : str or path-like
        ``.csv`` or ``.parquet`` history.
    validate : bool, default=True
        Validate the new records (failed runs allowed) before writing.
    """
    path = Path(path)
    _format(path)
    new = _with_run_ids(_as_frame(records))
    if validate:
        new = validate_runs(new, include_failed=True)
    with FileLock(str(path) + ".lock"):
        if path.exists() and path.stat().st_size > 0:
            old = read_history(path)
            frames = [f for f in (coerce_dtypes(old), coerce_dtypes(new)) if len(f)]
            combined = pd.concat(frames, ignore_index=True, sort=False)
        else:
            combined = coerce_dtypes(new)
        _write_atomic(_ordered(combined), path)
    return path


def append_new_runs(records, path: str | os.PathLike, *, key: str = "source_id") -> tuple[int, int]:
    """Append only the records whose ``key`` is not in the history yet (an idempotent import).

    Under the same lock and atomic rewrite as :func:`append_runs`: importing one source twice, or from two
    processes at once, stores each run once. Records without a ``key`` value are always appended.

    Returns
    -------
    (added, skipped) : records written, and records left out because their ``key`` was already there (or
    appeared twice in ``records``).
    """
    path = Path(path)
    _format(path)
    new = validate_runs(_as_frame(records), include_failed=True)
    if key not in new.columns:
        raise ValueError(f"append_new_runs: the records have no {key!r} column to deduplicate on.")
    with FileLock(str(path) + ".lock"):
        old = read_history(path) if path.exists() and path.stat().st_size > 0 else None
        seen = set() if old is None or key not in old.columns else set(old[key].dropna().astype(str))
        keys = new[key].astype("string")
        fresh = keys.isna() | ~keys.isin(seen)
        fresh &= ~(keys.duplicated() & keys.notna())
        fresh = fresh.to_numpy(dtype=bool)
        new = new.loc[fresh]
        if len(new):
            frames = [f for f in ((coerce_dtypes(old) if old is not None else None), coerce_dtypes(new))
                      if f is not None and len(f)]
            _write_atomic(_ordered(pd.concat(frames, ignore_index=True, sort=False)), path)
    return int(fresh.sum()), int((~fresh).sum())


def recover_runs(path: str | os.PathLike) -> tuple[pd.DataFrame, list[str]]:
    """Read the good rows of a damaged history and say what was dropped.

    perfmodel's own writes are atomic and never tear a file; this is for files damaged elsewhere (a copy cut
    short, a hand edit). CSV: rows with the wrong number of fields are skipped and reported by line number.
    Parquet: row groups that read are kept; a file whose footer is gone has no readable row groups and raises.

    Returns
    -------
    (runs, problems) : the readable rows (unvalidated; pass them to :func:`load_runs`) and a list of messages.

    Examples
    --------
    ::

        good, problems = perfmodel.io.recover_runs("runs.csv")
        print("\\n".join(problems))
        perfmodel.save_runs(perfmodel.load_runs(good, include_failed=True), "runs.repaired.csv")
    """
    path = Path(path)
    fmt = _format(path)
    if not path.exists():
        raise FileNotFoundError(f"Run history {str(path)!r} does not exist.")
    problems: list[str] = []
    if fmt == "csv":
        bad: list = []
        df = _read_csv_text(path, skip_bad=bad)
        problems += [f"dropped malformed row at line {line}: {text!r}" for line, text in bad]
        return df, problems
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:
        raise SchemaError(f"{str(path)!r}: the Parquet footer is unreadable ({type(exc).__name__}); no row group "
                          "can be located. Restore the file from a backup or re-measure.") from None
    frames = []
    for i in range(pf.num_row_groups):
        try:
            frames.append(pf.read_row_group(i).to_pandas())
        except Exception as exc:
            problems.append(f"dropped row group {i}: {type(exc).__name__}: {exc}")
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return df, problems
