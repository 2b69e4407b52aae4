"""Reading and writing run histories (CSV or Parquet), atomically and safely under concurrent writers.

Every write goes to a temporary file in the same folder, is flushed to disk and then renamed over the target
(``os.replace``), so a crash or Ctrl-C leaves either the old history or the new one, never half a file. Appends
take a file lock (``<path>.lock``) so that several sweeps or recorders can append to one history at once.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd
from filelock import FileLock

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


def read_history(path: str | os.PathLike) -> pd.DataFrame:
    """Read a history file as it is, without validation (CSV or Parquet by suffix).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    SchemaError
        If the file cannot be parsed (a truncated Parquet file, a CSV row with the wrong number of fields);
        the message names the file and, for CSV, the line.
    """
    path = Path(path)
    fmt = _format(path)
    if not path.exists():
        raise FileNotFoundError(f"Run history {str(path)!r} does not exist.")
    try:
        if fmt == "csv":
            return pd.read_csv(path, dtype={"run_id": "string"})
        return pd.read_parquet(path)
    except pd.errors.EmptyDataError:
        raise SchemaError(f"Run history {str(path)!r} is empty (no header, no rows).") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise SchemaError(f"Run history {str(path)!r} cannot be parsed as CSV: {exc}".strip()) from None
    except Exception as exc:  # pyarrow raises its own types for torn files
        if fmt == "parquet":
            raise SchemaError(
                f"Run history {str(path)!r} is not a readable Parquet file ({type(exc).__name__}: {exc})."
            ) from None
        raise


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
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp creates 0600; give the history the mode of the file it replaces, or the umask default.
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as fh:
            if fmt == "csv":
                df.to_csv(fh, index=False)
            else:
                df.to_parquet(fh, index=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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
    new = _as_frame(records)
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
        bad: list[str] = []

        def on_bad(fields):
            bad.append(",".join(map(str, fields))[:80])
            return None

        df = pd.read_csv(path, on_bad_lines=on_bad, engine="python", dtype={"run_id": "string"})
        problems += [f"dropped malformed row: {b!r}" for b in bad]
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
