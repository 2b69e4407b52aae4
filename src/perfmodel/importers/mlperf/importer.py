"""Importing whole trees of MLPerf results: every ``result_<n>.txt`` under some folders, with its system
description and its benchmark's implementation files (:func:`from_mlperf`), into a run table."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from ...exceptions import MLPerfFormatError
from .._records import read_json_file
from .catalogue import SKIPPED_BENCHMARKS
from .configs import MAX_PY_CHARS, MAX_SH_CHARS, implementation_text, is_implementation_file
from .run import summarize_run

__all__ = ["find_result_files", "frame", "from_mlperf", "loadable", "make_run_id"]

logger = logging.getLogger("perfmodel.importers.mlperf")

_RESULT = re.compile(r"result_\d+\.txt$")
_ROUND = re.compile(r"(?:^|/|_)(v\d+\.\d+)(?=/)")

def find_result_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Every ``result_<n>.txt`` under the given files/folders (sorted), or the files themselves.

    Parameters
    ----------
    paths : iterable of str or path-like
        Result files (taken as they are, whatever their name) and folders (searched recursively).

    Returns
    -------
    list of pathlib.Path
        The files, in the order of ``paths``; each folder's logs sorted.

    Raises
    ------
    FileNotFoundError
        For a path that does not exist.
    MLPerfFormatError
        For a folder with no result logs.
    """
    out = []
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise FileNotFoundError(f"MLPerf results path {str(p)!r} does not exist.")
        if p.is_file():
            out.append(p)
            continue
        found = sorted(f for f in p.rglob("result_*.txt") if _RESULT.search(f.name))
        if not found:
            raise MLPerfFormatError(f"{str(p)!r} holds no MLPerf result logs (result_<n>.txt).")
        out.extend(found)
    return out


def _tree_parts(path: Path):
    """(submitter dir, system, benchmark) for .../<submitter>/results/<system>/<benchmark>/result_n.txt."""
    parts = path.resolve().parts
    if len(parts) >= 5 and parts[-4] == "results":
        return Path(*parts[:-4]), parts[-3], parts[-2]
    return None, None, path.parent.name or None


def _system_json(submitter_dir: Path | None, system: str | None, explicit: Mapping | None):
    if explicit is not None:
        return dict(explicit)
    if submitter_dir is None or system is None:
        return None
    f = submitter_dir / "systems" / f"{system}.json"
    if not f.is_file():
        return None
    try:
        data = json.loads(f.read_text(encoding="utf-8", errors="replace"))
    except (ValueError, RecursionError):
        logger.warning("System description %s is not valid JSON; ignoring it.", f)
        return None
    if not isinstance(data, dict):
        logger.warning("System description %s is not a JSON object; ignoring it.", f)
        return None
    return data


def from_mlperf(paths_or_dirs, *, system: Mapping | str | os.PathLike | None = None, round: str | None = None,
                source_commit: str | None = None) -> pd.DataFrame:
    """Read MLPerf Training result logs into a run table, one row per ``result_<n>.txt``.

    Parameters
    ----------
    paths_or_dirs : path or list of paths
        Result logs, or folders searched recursively for ``result_<n>.txt`` (a submitter folder, a round's
        checkout, ...). The system description is read from ``<submitter>/systems/<system>.json`` next to the
        ``results/`` folder.
    system : mapping or path, optional
        A system description to use for every log instead (for logs outside the usual layout).
    round : str, optional
        MLPerf round (``"v4.0"``), recorded in the ``round`` column; by default read from the path (a folder
        named ``v4.0`` or ``training_results_v4.0``).
    source_commit : str, optional
        Commit of the results repository, recorded in ``source_commit``.

    Returns
    -------
    DataFrame
        Run records (perfmodel's schema columns plus MLPerf provenance columns). Rows whose
        ``excluded_reason`` is set cannot be fitted yet (unsourced size, unresolved accelerator, ...); use
        :func:`loadable` to keep the rest.

    Raises
    ------
    FileNotFoundError, MLPerfFormatError
        For a path that does not exist, a folder without result logs, or a file that is not an MLPerf log.
    """
    if isinstance(paths_or_dirs, (str, os.PathLike)):
        paths_or_dirs = [paths_or_dirs]
    if not isinstance(paths_or_dirs, Iterable):
        raise TypeError(f"from_mlperf expects a path or a list of paths. Got {type(paths_or_dirs).__name__}.")
    explicit = None
    if isinstance(system, (str, os.PathLike)):
        explicit = read_json_file(system, "System description", MLPerfFormatError)
    elif system is not None:
        explicit = system
    rows = []
    impl_cache: dict = {}
    for f in find_result_files(list(paths_or_dirs)):
        sub_dir, sys_name, bench = _tree_parts(f)
        if bench in SKIPPED_BENCHMARKS:
            logger.info("Skipping %s: %s", f, SKIPPED_BENCHMARKS[bench])
            continue
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise MLPerfFormatError(f"Cannot read {str(f)!r}: {exc}") from None
        sysd = _system_json(sub_dir, sys_name, explicit)
        rnd = round
        if rnd is None:  # a checkout named training_results_v4.0, or a folder named v4.0, on the path
            m = _ROUND.search(f.resolve().as_posix())
            rnd = m.group(1) if m else None
        submitter = sysd.get("submitter") if sysd else (sub_dir.name if sub_dir else None)
        submitter = None if submitter is None else str(submitter)
        try:
            impl = _implementation_files(sub_dir, bench, impl_cache)
            row = summarize_run(text, sysd, benchmark=bench, source_path=str(f), implementation=impl, round=rnd,
                                submitter=submitter, system=sys_name, source_commit=source_commit)
        except MLPerfFormatError:
            raise
        except (ValueError, TypeError, ArithmeticError, KeyError, AttributeError, RecursionError) as exc:
            # one unreadable log never aborts the import: it is listed with the reason and left out
            row = {"status": "error", "error": f"unreadable MLPerf log ({type(exc).__name__}: {exc})",
                   "source": "mlperf", "benchmark": bench, "submitter": submitter, "system": sys_name,
                   "round": rnd, "source_path": str(f), "source_commit": source_commit,
                   "excluded_reason": f"the log could not be read ({type(exc).__name__}: "
                                      f"{' '.join(str(exc).split())[:200]})"}
        row["run_id"] = make_run_id(rnd, row["submitter"], sys_name, row["benchmark"], f.name)
        # What identifies the run is its log's content: the same log imported twice, or from a copy, is one run.
        row["source_id"] = "mlperf:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        rows.append(row)
    return _mark_invalid(frame(rows))


def _implementation_files(submitter_dir: Path | None, benchmark: str | None, cache: dict) -> dict[str, str]:
    """The files the precision and the layout are read from, ``<submitter>/benchmarks/<benchmark>/
    implementations/`` (paths from the submitter folder, its name included, as in the results repository),
    read once per folder."""
    if submitter_dir is None or not benchmark:
        return {}
    key = (submitter_dir, benchmark)
    if key not in cache:
        root = submitter_dir / "benchmarks" / benchmark / "implementations"
        files: dict[str, str] = {}
        if root.is_dir():
            for f in sorted(root.rglob("*")):
                if not f.is_file() or not is_implementation_file(f.name):
                    continue
                try:
                    if f.suffix in (".py", ".yaml", ".yml") and f.stat().st_size > MAX_PY_CHARS:
                        continue
                    # no more than the caps (and one more character, to tell a file was over)
                    with f.open(encoding="utf-8", errors="replace") as fh:
                        text = fh.read((MAX_SH_CHARS if f.suffix == ".sh" else MAX_PY_CHARS) + 1)
                except OSError:
                    continue
                kept = implementation_text(f.name, text)
                if kept is not None:
                    files[f"{submitter_dir.name}/{f.relative_to(submitter_dir).as_posix()}"] = kept
        cache[key] = files
    return cache[key]


def _mark_invalid(runs: pd.DataFrame) -> pd.DataFrame:
    """Give every row that is not excluded yet but that the schema refuses an ``excluded_reason`` (the schema's
    message), so that one bad log is left out with its reason instead of failing the whole import."""
    from ...exceptions import SchemaError
    from ...schema import validate_runs

    if runs.empty or "excluded_reason" not in runs.columns:
        return runs
    ok = runs["excluded_reason"].isna()
    if not ok.any():
        return runs
    try:
        validate_runs(runs.loc[ok], include_failed=True)
        return runs
    except (SchemaError, ValueError, TypeError):
        pass
    runs = runs.copy()
    for i in runs.index[ok]:
        try:
            validate_runs(runs.loc[[i]], include_failed=True)
        except (SchemaError, ValueError, TypeError) as exc:
            runs.loc[i, "excluded_reason"] = "the schema refuses it: " + " ".join(str(exc).split())[:300]
    return runs


def make_run_id(round, submitter, system, benchmark, filename) -> str:
    """The ``run_id`` of an MLPerf run: ``mlperf-<round>/<submitter>/<system>/<benchmark>/<log stem>``.

    Parameters
    ----------
    round, submitter, system : str or None
        The MLPerf round (``v4.0``), submitter and system (``?`` where unknown).
    benchmark : str
        The benchmark.
    filename : str
        The log's file name (``result_0.txt``; its ``.txt`` is dropped).

    Returns
    -------
    str
        The id.
    """
    stem = re.sub(r"\.txt$", "", str(filename))
    return "mlperf-" + "/".join(str(x) for x in (round or "?", submitter or "?", system or "?", benchmark, stem))


def frame(rows: list[dict]) -> pd.DataFrame:
    """Run records as a table, ``run_id`` first.

    Parameters
    ----------
    rows : list of dict
        Records from :func:`summarize_run`, each with a ``run_id``.

    Returns
    -------
    pandas.DataFrame
        One row per record, the columns in the order they first appear.
    """
    df = pd.DataFrame(rows)
    if len(df):
        df = df[["run_id"] + [c for c in df.columns if c != "run_id"]]
    return df


def loadable(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`from_mlperf`'s table that :func:`perfmodel.load_runs` accepts.

    Parameters
    ----------
    runs : pandas.DataFrame
        A table from :func:`from_mlperf`.

    Returns
    -------
    pandas.DataFrame
        The rows without an ``excluded_reason`` (every row when the column is absent), re-indexed from 0.
    """
    keep = runs["excluded_reason"].isna() if "excluded_reason" in runs.columns else pd.Series(True, runs.index)
    return runs.loc[keep].reset_index(drop=True)
