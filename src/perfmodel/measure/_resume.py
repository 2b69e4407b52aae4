"""What a sweep reads from and keeps beside its history (:mod:`perfmodel.measure.sweep` and the Slurm launcher,
:mod:`perfmodel.measure.slurm`): the configurations already recorded (resume), the earlier repeats' median step
times (the repeat-spread timing flag) and each run's per-step times.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import pandas as pd
from filelock import FileLock

from .._atomic import atomic_write
from ..exceptions import NoisyTimingWarning
from ..io import read_raw_history
from ..store import is_store, open_store
from ._timing import CONFIG_COLUMNS, config_key, explain_timing_flag, timing_flag
from .layouts import is_layout_model
from .zoo import ZOO, default_seq_len

if TYPE_CHECKING:
    from ..store import HistoryStore

__all__ = ["HistoryTarget", "read_existing", "done_keys", "repeat_medians", "flag_timing", "append_steps"]

#: Where a sweep's records go: a history file (a ``Path``), a store's URL, or an open store (what
#: :func:`perfmodel.store.history_target` makes of the ``output`` a user gives).
HistoryTarget: TypeAlias = "Path | str | HistoryStore"


def _history_seq(model: str, value) -> int | None:
    if value is not None and not pd.isna(value):
        return int(value)
    try:  # histories written before the seq_len column: zoo models ran at their default length
        return default_seq_len(model) if model in ZOO else None
    except KeyError:
        return None


def read_existing(output) -> pd.DataFrame | None:
    """The history already in ``output`` (None if there is none yet), read once for resuming and repeats."""
    if is_store(output):
        try:
            return read_raw_history(output)
        except FileNotFoundError:  # a store not created yet
            return None
    if not output.exists() or output.stat().st_size == 0:
        return None
    return read_raw_history(output)


def done_keys(output: HistoryTarget, retry_failed: bool, existing: pd.DataFrame | None = None) -> set[tuple]:
    """The configurations ``output`` holds (``existing``: its history, when the caller has read it)."""
    df = read_existing(output) if existing is None else existing
    if df is None or len(df) == 0:
        return set()
    if retry_failed and "status" in df.columns:
        df = df[df["status"].fillna("ok") == "ok"]

    def col(name, default):
        if name not in df.columns:
            return [default] * len(df)
        return [default if pd.isna(v) else v for v in df[name]]

    keys = set()
    for m, b, n, p, g, r, k, o, c, a, s, nn, mb, tp, pp, sp in zip(
            df["model"], df["batch_size"], df["gpu_count"], col("precision", "fp32"), df["gpu_type"],
            col("repeat", 0), col("grad_accum", 1), col("optimizer", "adamw"), col("compiled", 0),
            col("activation_checkpointing", 0), col("seq_len", None), col("nodes", 1), col("micro_batch_size", None),
            col("tp", 1), col("pp", 1), col("sequence_parallel", 0)):
        layout = is_layout_model(str(m))
        if layout and mb is not None:  # a layout run's configured batch_size is its micro-batch
            b = mb
        key = (str(m), int(b), int(n), str(p), str(g), int(r), int(k), str(o), int(c), int(a),
               _history_seq(str(m), s), int(nn))
        keys.add(key + (int(tp), int(pp), int(sp)) if layout else key)
    return keys


def repeat_medians(output: HistoryTarget, existing: pd.DataFrame | None = None) -> dict[tuple, list[float]]:
    """Median step times of the successful runs already in ``output``, per configuration (repeats together;
    ``existing``: its history, when the caller has read it)."""
    df = read_existing(output) if existing is None else existing
    if df is None or "step_time_median_s" not in df.columns or len(df) == 0:
        return {}
    if "status" in df.columns:
        df = df[df["status"].fillna("ok") == "ok"]
    columns = [c for c in (*CONFIG_COLUMNS, "cpu_model") if c in df.columns]  # what config_key reads
    out: dict[tuple, list[float]] = {}
    for rec, m in zip(df[columns].to_dict("records"), pd.to_numeric(df["step_time_median_s"], errors="coerce")):
        if pd.notna(m):
            out.setdefault(config_key(rec), []).append(float(m))
    return out


def flag_timing(record: dict, medians: dict[tuple, list[float]]) -> bool:
    """Set a successful record's ``timing_flag`` (its step CV, and its median against earlier repeats of the same
    configuration in ``medians``, which it joins), and warn once when the timing says the machine was busy."""
    if record.get("status") != "ok":
        return False
    key = config_key(record)
    median = record.get("step_time_median_s")
    earlier = list(medians.get(key, ()))
    record["timing_flag"] = timing_flag(record.get("step_time_cv"), median, earlier)
    if median is not None and math.isfinite(float(median)):
        medians.setdefault(key, []).append(float(median))
    if record["timing_flag"]:
        warnings.warn(f"{record.get('model')} batch={record.get('batch_size')} n={record.get('gpu_count')} "
                      f"repeat {record.get('repeat', 0)}: "
                      f"{explain_timing_flag(record['timing_flag'], record.get('step_time_cv'), median, earlier)}",
                      NoisyTimingWarning, stacklevel=3)
        return True
    return False



def append_steps(output, run_id: str, times: list[float]) -> None:
    """Keep a run's per-step times: in the store itself, or in the sidecar ``<output>.steps.jsonl`` of a CSV or
    Parquet history."""
    if not times:
        return
    if is_store(output):
        with open_store(output) as store:
            store.append_steps(run_id, [round(t, 7) for t in times])
        return
    output = Path(output)
    side = output.with_name(output.name + ".steps.jsonl")
    line = json.dumps({"run_id": run_id, "step_times_s": [round(t, 7) for t in times]}) + "\n"
    with FileLock(str(side) + ".lock"):
        old = side.read_bytes() if side.exists() else b""
        if old and not old.endswith(b"\n"):  # a torn last line written by an older perfmodel
            old = old[: old.rfind(b"\n") + 1]
        with atomic_write(side) as fh:
            fh.write(old + line.encode("utf-8"))
