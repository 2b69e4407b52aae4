"""What a ``history`` argument is: the runs to learn from, read and validated once, with where they came from.

A history is one of

* a history store (:mod:`perfmodel.store`): ``runs.db``, ``sqlite:///...``, ``postgresql://...``, ``"default"``
  (``$PERFMODEL_HISTORY``, else the user's ``runs.db``), or a :class:`~perfmodel.store.HistoryStore`,
* a path to a ``.csv`` or ``.parquet`` run history,
* a DataFrame of runs,
* the name of a bundled history (:data:`BUNDLED_HISTORIES`: ``"cpu"``, ``"gpu"``, ``"mlperf"``),
* or a list of these, concatenated (e.g. ``["my_runs.csv", "gpu"]``: your runs beside the bundled public GPU runs).

:func:`read_history` turns any of them into a :class:`LoadedHistory`: the validated runs, a label per part
(``bundled:<file>`` for perfmodel's own data, else the path), which runs are the caller's own (not bundled), and a
content digest that identifies the runs (the cache key of every fit made from them: for a file, the hash of its
bytes; for a store, the store's own digest, read in the same snapshot as the runs, so no row is hashed). In a history that mixes
the caller's own runs with bundled ones, a bundled model named like one of the caller's own is renamed
``bundled:<name>``: the name means the caller's workload. This module also holds the
statistics of a history that prediction needs (:func:`model_table`, :func:`precision_by_device`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from .layout import is_layout_job
from .schema import SHAPE_COLUMNS
from .store import HistoryStore, is_store, open_store, store_label

__all__ = ["BUNDLED_HISTORIES", "LoadedHistory", "read_history", "HistoryFiles", "peek_history",
           "history_parts", "default_history", "model_table", "model_columns", "precision_by_device",
           "file_digest", "frame_digest", "part_digest", "part_label", "drop_noisy", "BUNDLED_PREFIX"]

#: Names of the bundled histories accepted in ``history=`` (alone or in a list with your own runs).
#: ``gpu`` is the public MLPerf table plus every GPU history perfmodel measured itself (``data/runs_<device>.csv``,
#: not the CPU ones: ``runs_cpu.csv`` is ``cpu``, ``runs_cpu_layouts.csv`` is read by its path);
#: ``llm`` the public LLM pre-training sets that record their parallel layouts (data/README.md), which answer
#: transformer jobs (:func:`perfmodel.layout.is_layout_job`).
BUNDLED_HISTORIES = {
    "cpu": ("runs_cpu.csv",),
    "mlperf": ("mlperf_steps.csv",),
    "gpu": ("mlperf_steps.csv", "runs_*.csv"),
    "llm": ("public_megatron_bridge.csv", "public_llmfoundry.csv", "public_torchtitan.csv", "public_bigscience.csv"),
}
#: Label prefix of the parts of a history that are perfmodel's bundled data (not the caller's own runs).
BUNDLED_PREFIX = "bundled:"


def _bundled_paths(name: str) -> list[Path]:
    from .datasets import bundled_runs_path

    out = []
    for file in BUNDLED_HISTORIES[name]:
        if "*" in file:  # perfmodel's own measured GPU histories, beside the first file
            folder = bundled_runs_path(BUNDLED_HISTORIES[name][0]).parent
            out += sorted(p for p in folder.glob(file) if not p.name.startswith("runs_cpu"))
        else:
            out.append(bundled_runs_path(file))
    return out


def history_parts(history) -> list:
    """The parts of a history, in order.

    Parameters
    ----------
    history : str, path-like, HistoryStore, pandas.DataFrame, or list or tuple of these
        A path or store URL, a store, a DataFrame, the name of a bundled history (:data:`BUNDLED_HISTORIES`),
        or a list of these (not nested).

    Returns
    -------
    list
        Paths and URLs (a bundled name expanded to the paths of its files, as str), stores and DataFrames.

    Raises
    ------
    ValueError
        For an empty list.
    TypeError
        For a nested list or anything else.
    """
    if isinstance(history, (list, tuple)):
        if not history:
            raise ValueError("history is an empty list; give at least one path, DataFrame or bundled name.")
        out = []
        for h in history:
            if isinstance(h, (list, tuple)):
                raise TypeError("history lists cannot be nested.")
            out += history_parts(h)
        return out
    if isinstance(history, str) and history in BUNDLED_HISTORIES:
        return [str(p) for p in _bundled_paths(history)]
    if isinstance(history, (str, os.PathLike, pd.DataFrame, HistoryStore)):
        return [history]
    raise TypeError(
        "history must be a path or store URL, a DataFrame, the name of a bundled history "
        f"({', '.join(map(repr, BUNDLED_HISTORIES))}) or a list of these. Got {type(history).__name__}."
    )


def part_label(part) -> str:
    """How a history part is named in labels and provenance.

    Parameters
    ----------
    part : str, path-like, HistoryStore or DataFrame
        One part of a history (:func:`history_parts`).

    Returns
    -------
    str
        ``bundled:<file>`` for a file of perfmodel's bundled data, the store's label, ``DataFrame (n runs)``, or
        the path as given.
    """
    if isinstance(part, pd.DataFrame):
        return f"DataFrame ({len(part)} runs)"
    if is_store(part):
        return store_label(part)
    p = Path(part)
    try:
        from .datasets import bundled_runs_path

        if bundled_runs_path(p.name) == p.resolve():
            return f"{BUNDLED_PREFIX}{p.name}"
    except (FileNotFoundError, OSError):
        pass
    return str(part)


def file_digest(path) -> str:
    """SHA-256 of a file's bytes.

    Parameters
    ----------
    path : str or path-like
        The file.

    Returns
    -------
    str
        The hex digest.
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def part_digest(part) -> str:
    """The content digest of one part of a history that is not a DataFrame: a store's own digest
    (:meth:`perfmodel.store.HistoryStore.digest`, no row read), or the SHA-256 of a file's bytes.

    Parameters
    ----------
    part : str, path-like or HistoryStore
        A store or a file.

    Returns
    -------
    str
        The hex digest.

    Raises
    ------
    OSError
        If the file or store cannot be read (``FileNotFoundError`` for one that does not exist).
    """
    if is_store(part):
        with open_store(part, create=False) as store:
            return store.digest()
    return file_digest(part)


def frame_digest(frame: pd.DataFrame) -> str:
    """SHA-256 of a DataFrame's content (values, column names and dtypes; not its index).

    Parameters
    ----------
    frame : pandas.DataFrame
        The frame; cells pandas cannot hash (lists, dicts) are digested as their CSV text.

    Returns
    -------
    str
        The hex digest.
    """
    h = hashlib.sha256(repr([(str(c), str(t)) for c, t in frame.dtypes.items()]).encode())
    try:
        h.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    except TypeError:  # cells pandas cannot hash (lists, dicts): their text
        h.update(frame.astype(str).to_csv(index=False).encode())
    return h.hexdigest()


class LoadedHistory(NamedTuple):
    """A history read and validated once.

    Attributes
    ----------
    runs : DataFrame
        The validated runs of every part, concatenated; ``history_source`` names each run's part.
    labels : list of str
        One per part: ``bundled:<file>`` or the path, or ``DataFrame (n runs)``.
    own : ndarray of bool
        Per run: from a part that is not perfmodel's bundled data (the caller's own runs).
    digest : str
        SHA-256 of the parts' contents (file bytes, frame values): what identifies these runs.
    """

    runs: pd.DataFrame
    labels: list
    own: np.ndarray
    digest: str

    @property
    def mixed(self) -> bool:
        """True when the history holds both the caller's own runs and perfmodel's bundled runs."""
        return bool(self.own.any() and not self.own.all())

    def own_runs(self) -> LoadedHistory:
        """The caller's own runs alone.

        Returns
        -------
        LoadedHistory
            The runs of the parts that are not bundled, their labels, and a digest of their own (derived from
            this history's).
        """
        runs = self.runs[self.own].reset_index(drop=True)
        labels = [lab for lab in self.labels if not lab.startswith(BUNDLED_PREFIX)]
        digest = hashlib.sha256(f"own runs of {self.digest}".encode()).hexdigest()
        return LoadedHistory(runs, labels, np.ones(len(runs), dtype=bool), digest)


def drop_noisy(loaded: LoadedHistory) -> tuple[LoadedHistory, int]:
    """The runs of a history without those whose ``timing_flag`` says the machine was busy while they were
    measured (:mod:`perfmodel.measure` flags a step CV above 0.3 or a median far from an earlier repeat's).

    Parameters
    ----------
    loaded : LoadedHistory
        A history read with :func:`read_history`.

    Returns
    -------
    history : LoadedHistory
        ``loaded`` itself when no run is flagged; else the unflagged runs, with the same labels and a digest of
        their own (derived from ``loaded``'s).
    dropped : int
        How many runs were left out.
    """
    if "timing_flag" not in loaded.runs.columns:
        return loaded, 0
    flag = loaded.runs["timing_flag"].astype("string").str.strip().fillna("")
    noisy = (flag != "").to_numpy(dtype=bool)
    if not noisy.any():
        return loaded, 0
    runs = loaded.runs.loc[~noisy].reset_index(drop=True)
    digest = hashlib.sha256(f"without noisy runs: {loaded.digest}".encode()).hexdigest()
    return LoadedHistory(runs, loaded.labels, loaded.own[~noisy], digest), int(noisy.sum())


def read_history(history) -> LoadedHistory:
    """Read and validate a history (see the module docstring) once.

    A file's digest is taken from the bytes read, so a file rewritten between reading and fitting is never fitted
    under the old content's key. Where the caller's own runs and bundled runs share a model name, the bundled
    model is renamed ``bundled:<name>``.

    Parameters
    ----------
    history : str, path-like, pandas.DataFrame, LoadedHistory, or list of these
        What :func:`history_parts` accepts; a :class:`LoadedHistory` is returned as it is.

    Returns
    -------
    LoadedHistory
        The validated runs (with a ``history_source`` column), their labels, which are the caller's own, and
        the content digest.

    Raises
    ------
    SchemaError
        If a part fails validation (:func:`perfmodel.io.load_runs`).
    OSError
        If a file kept changing while it was read.
    """
    from .io import load_runs

    if isinstance(history, LoadedHistory):
        return history
    frames, labels, own_parts, digest = [], [], [], hashlib.sha256()
    parts = history_parts(history)
    for part in parts:
        if isinstance(part, pd.DataFrame):
            digest.update(frame_digest(part).encode())
            runs = load_runs(part)
        else:
            runs, part_digest = _load_file(part, load_runs)
            digest.update(part_digest.encode())
        label = part_label(part)
        frames.append(runs.assign(history_source=label))
        labels.append(label)
        own_parts.append(np.full(len(runs), not label.startswith(BUNDLED_PREFIX)))
    runs = pd.concat(frames, ignore_index=True, sort=False) if len(frames) > 1 else frames[0]
    own = np.concatenate(own_parts)
    if own.any() and not own.all():
        runs = _own_names_win(runs, own)
    return LoadedHistory(runs, labels, own, digest.hexdigest())


class HistoryFiles(NamedTuple):
    """What :func:`read_history` would call a history of files, known from the files' bytes alone.

    Attributes
    ----------
    labels : list of str
        One per part, as :attr:`LoadedHistory.labels`.
    digest : str
        The content digest :func:`read_history` gives these files (:attr:`LoadedHistory.digest`): the key of
        the models fitted on them, shipped or cached.
    """

    labels: list
    digest: str

    @property
    def mixed(self) -> bool:
        """True when the files are both the caller's own and perfmodel's bundled ones (as
        :attr:`LoadedHistory.mixed`: every part of a history that reads holds at least one run)."""
        bundled = [label.startswith(BUNDLED_PREFIX) for label in self.labels]
        return any(bundled) and not all(bundled)


def peek_history(history) -> HistoryFiles | None:
    """The labels and content digest of a history made of files only, without parsing or validating them.

    Parameters
    ----------
    history : str, path-like, or list of these
        What :func:`history_parts` accepts.

    Returns
    -------
    HistoryFiles or None
        What :func:`read_history` would give as labels and digest (hashing each file's bytes once; a store's
        digest comes from the store); None for a history with a DataFrame part, a :class:`LoadedHistory`, or a
        file or store that cannot be read (then :func:`read_history` says what is wrong with it).
    """
    if isinstance(history, LoadedHistory):
        return None
    parts = history_parts(history)
    if any(isinstance(part, pd.DataFrame) for part in parts):
        return None
    digest = hashlib.sha256()
    for part in parts:
        try:
            digest.update(part_digest(part).encode())
        except (OSError, ValueError):
            return None
    return HistoryFiles([part_label(part) for part in parts], digest.hexdigest())


def _own_names_win(runs: pd.DataFrame, own: np.ndarray) -> pd.DataFrame:
    """A bundled model that shares its name with one of the caller's own models is another workload (another
    stack, another implementation): it is renamed ``bundled:<name>``, so the name means the caller's runs."""
    names = runs["model"].astype(str)
    clash = ~own & names.isin(set(names[own])).to_numpy()
    if not clash.any():
        return runs
    runs = runs.copy()
    runs["model"] = names.where(~clash, BUNDLED_PREFIX + names)
    return runs


def _load_file(path, load_runs) -> tuple[pd.DataFrame, str]:
    """The runs of a file and the digest of the very bytes they were read from: the digest is taken before and
    after reading, and a file rewritten meanwhile is read again. A store gives its runs and digest in one
    snapshot."""
    if is_store(path):
        with open_store(path, create=False) as store:
            raw, digest = store.snapshot()
        return load_runs(raw), digest
    for _ in range(5):
        try:
            before = file_digest(path)
        except OSError:
            return load_runs(path), ""  # a missing or misnamed file: load_runs says what is wrong with it
        runs = load_runs(path)
        if file_digest(path) == before:
            return runs, before
    raise OSError(f"{str(path)!r} kept changing while it was read; try again when nothing is writing to it.")


def default_history(query: pd.DataFrame) -> str:
    """The bundled history a query's devices are predicted from.

    Parameters
    ----------
    query : pandas.DataFrame
        The configurations to predict (its ``gpu_type`` column).

    Returns
    -------
    str
        ``"cpu"`` when every row is on ``cpu``; ``"llm"`` when every row is transformer training with a sequence
        length and shape or family (:func:`perfmodel.layout.is_layout_job`) on a GPU; else ``"gpu"``.
    """
    if set(map(str, query["gpu_type"])) <= {"cpu"}:
        return "cpu"
    return "llm" if len(query) and bool(is_layout_job(query).all()) else "gpu"


def model_columns(runs: pd.DataFrame) -> list[str]:
    """The columns of a history that describe a model rather than a run.

    A query naming a model of the history takes these from it.

    Parameters
    ----------
    runs : pandas.DataFrame
        A run history.

    Returns
    -------
    list of str
        ``family``, the transformer shape columns (:data:`perfmodel.schema.SHAPE_COLUMNS`) and the op-level counts
        (``op_*``, per sample or per step of that model) that ``runs`` has, in column order.
    """
    shape = {c.name for c in SHAPE_COLUMNS}
    return [c for c in runs.columns if c == "family" or c in shape or c.startswith("op_")]


def model_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per model name in a history: its size, work and description.

    Parameters
    ----------
    runs : pandas.DataFrame
        A run history (``model`` and ``params`` at least).

    Returns
    -------
    pandas.DataFrame
        Indexed by model name: ``params`` and ``flops_per_sample`` (medians; NaN FLOPs where not recorded),
        ``family`` (the first), ``runs`` (how many), and the median of each op count of :func:`model_columns`.
    """
    fps = runs["flops_per_sample"] if "flops_per_sample" in runs.columns else pd.Series(np.nan, index=runs.index)
    fam = runs["family"] if "family" in runs.columns else pd.Series(pd.NA, index=runs.index, dtype="string")
    frame = pd.DataFrame({"model": runs["model"].astype(str), "params": runs["params"].astype(float),
                          "flops_per_sample": pd.to_numeric(fps, errors="coerce"), "family": fam.astype("string")})
    ops = [c for c in model_columns(runs) if c != "family"]
    for c in ops:
        frame[c] = pd.to_numeric(runs[c], errors="coerce").to_numpy(dtype=float)
    return frame.groupby("model").agg(params=("params", "median"), flops_per_sample=("flops_per_sample", "median"),
                                      family=("family", "first"), runs=("params", "size"),
                                      **{c: (c, "median") for c in ops})


def precision_by_device(runs: pd.DataFrame) -> dict:
    """Per device type in a history, the precision its runs used.

    Parameters
    ----------
    runs : pandas.DataFrame
        A run history (a missing ``precision`` column counts as ``fp32`` throughout).

    Returns
    -------
    dict of str to (str, bool)
        ``gpu_type`` (as written in the runs) -> (the precision most of its runs used, whether all of them used
        it). fp8 is that precision only where every run used it.

    Notes
    -----
    fp8 training is an opt-in (Transformer Engine, torchao), never what a framework does by default: a device
    whose runs are mostly fp8 (vendor-tuned MLPerf submissions) still answers a query that names no precision
    at the precision most of its other runs used.
    """
    prec = runs["precision"] if "precision" in runs.columns else pd.Series("fp32", index=runs.index)
    frame = pd.DataFrame({"g": runs["gpu_type"].astype(str).to_numpy(), "p": prec.astype(str).to_numpy()})

    def usual(p: pd.Series) -> str:
        rest = p[p != "fp8"]
        return str((rest if len(rest) else p).mode().iloc[0])

    return {g: (usual(grp["p"]), bool(grp["p"].nunique() == 1)) for g, grp in frame.groupby("g")}
