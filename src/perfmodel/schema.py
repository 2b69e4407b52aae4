"""The run-record schema: one tidy row per training run, units in the column names.

This module owns the columns, their dtypes and units, and the validation every history goes through. A user's
own history needs only :data:`MINIMAL_COLUMNS` plus either ``step_time_s`` or ``wall_time_s`` and ``steps``;
perfmodel's measurement code writes every column of :data:`COLUMNS`.

Conventions
-----------
* ``batch_size`` is **per device** (like torchrun/DDP scripts and Hugging Face's ``per_device_train_batch_size``);
  the global batch is ``batch_size * gpu_count``.
* ``gpu_count`` is the number of data-parallel devices; on CPU it is the number of worker processes.
* ``gpu_type`` is a canonical name from :mod:`perfmodel.hardware` (aliases such as ``"NVIDIA A100-SXM4-80GB"`` are
  resolved on load), or ``"cpu"``.
* ``step_time_s`` is the mean wall-clock seconds of one optimizer step in steady state (warm-up excluded). When a
  history gives only ``wall_time_s`` and ``steps``, ``step_time_s = wall_time_s / steps`` (start-up included).
* ``step_time_s`` is per *optimizer* step: with ``grad_accum`` k it covers k micro-batches of ``batch_size``.
* ``status`` is ``ok`` for a completed run, or ``oom`` / ``error`` / ``timeout``; failed runs stay in the file as
  evidence but are left out of fitting.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .exceptions import SchemaError, UnknownHardwareError
from .hardware import PRECISIONS, resolve_gpu_type

__all__ = ["Column", "COLUMNS", "MINIMAL_COLUMNS", "STATUSES", "validate_runs", "coerce_dtypes", "describe_schema"]

logger = logging.getLogger(__name__)

STATUSES = ("ok", "oom", "error", "timeout")


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # "str", "int", "float"
    description: str


_C = Column
#: Every column perfmodel knows, in the order records are written.
COLUMNS: tuple[Column, ...] = (
    _C("run_id", "str", "unique id of the run"),
    _C("status", "str", "ok | oom | error | timeout"),
    _C("error", "str", "error message of a failed run"),
    _C("model", "str", "model name (a zoo name, or the user's own)"),
    _C("family", "str", "model family: mlp, cnn, encoder, decoder, rnn, ... (optional)"),
    _C("params", "int", "trainable parameters"),
    _C("flops_per_sample", "float", "forward+backward FLOPs for one sample (nullable)"),
    _C("flops_method", "str", "how flops_per_sample was counted: flop_counter | analytic | user"),
    _C("batch_size", "int", "samples per device per optimizer step"),
    _C("gpu_count", "int", "data-parallel devices (on CPU: worker processes)"),
    _C("gpu_type", "str", "canonical device name from perfmodel.hardware, or cpu"),
    _C("precision", "str", "fp32 | tf32 | fp16 | bf16 | fp8: what ran (compute dtype: autocast for bf16/fp16, "
                           "TF32 matmul/cuDNN flags for tf32; fp8 e.g. Transformer Engine)"),
    _C("grad_accum", "int", "micro-batches per optimizer step (gradient accumulation; default 1)"),
    _C("optimizer", "str", "optimizer of the timed step: adamw | sgd (default adamw)"),
    _C("compiled", "int", "1 if the model ran under torch.compile (compile time is in startup_s), else 0"),
    _C("activation_checkpointing", "int", "1 if activation checkpointing ran, else 0"),
    _C("seq_len", "int", "tokens per sample of a sequence model (nullable)"),
    _C("model_source", "str", "where the model came from: zoo | hf | factory (bring-your-own) | user"),
    _C("threads_per_worker", "int", "torch intra-op threads per worker process"),
    _C("step_time_s", "float", "mean seconds per optimizer step, steady state"),
    _C("step_time_median_s", "float", "median seconds per optimizer step"),
    _C("step_time_std_s", "float", "standard deviation of the per-step times"),
    _C("step_time_cv", "float", "coefficient of variation of the per-step times"),
    _C("step_time_ci_rel", "float", "95% CI half-width of the mean step time, relative to the mean"),
    _C("steps_timed", "int", "steps timed after warm-up"),
    _C("warmup_steps", "int", "steps run before timing"),
    _C("stop_reason", "str", "why timing stopped: ci_target | max_steps | max_seconds | fixed_steps | loop_end"),
    _C("samples_per_s", "float", "global samples per second (batch_size * gpu_count / step_time_s)"),
    _C("startup_s", "float", "seconds from process start to the end of the first step"),
    _C("wall_time_s", "float", "wall-clock seconds of the whole run"),
    _C("steps", "int", "optimizer steps in the whole run"),
    _C("repeat", "int", "repeat index of the same configuration within a sweep"),
    _C("gpu_name", "str", "device name as reported by NVML"),
    _C("gpu_mem_total_bytes", "float", "device memory (NVML)"),
    _C("gpu_mem_peak_bytes", "float", "peak device memory used during the timed window (NVML)"),
    _C("gpu_util_mean_pct", "float", "mean GPU utilisation in the timed window (NVML)"),
    _C("mem_util_mean_pct", "float", "mean memory-controller utilisation in the timed window (NVML)"),
    _C("power_mean_w", "float", "mean power draw in the timed window (NVML)"),
    _C("driver_version", "str", "GPU driver version"),
    _C("cuda_version", "str", "CUDA version torch was built with"),
    _C("cpu_model", "str", "host CPU model"),
    _C("cpu_cores", "int", "logical CPUs of the host"),
    _C("hostname", "str", "host name"),
    _C("nodes", "int", "machines in the run"),
    _C("launcher", "str", "how the run was started: local | torchrun | slurm"),
    _C("job_id", "str", "scheduler job id of the run (Slurm/submitit), if any"),
    _C("torch_version", "str", "torch version"),
    _C("perfmodel_version", "str", "perfmodel version that measured the run"),
    _C("python_version", "str", "Python version"),
    _C("source", "str", "where the record came from: sweep | recorder | user | hf_callback | lightning_callback "
       "| mlflow | hf_output"),
    _C("source_id", "str", "id of the run where it was imported from (MLflow run id, output dir + mtime)"),
    _C("protocol", "str", "measurement protocol (warm-up, stopping rule)"),
    _C("sweep_id", "str", "id of the sweep that produced the run"),
    _C("timestamp", "str", "ISO-8601 UTC time the run finished"),
)
_KIND = {c.name: c.kind for c in COLUMNS}

#: The columns a user's own history must have (plus a time, see module docstring).
MINIMAL_COLUMNS = ("model", "params", "batch_size", "gpu_count", "gpu_type")
_POSITIVE = ("params", "batch_size", "gpu_count", "step_time_s", "wall_time_s", "steps")


def describe_schema() -> pd.DataFrame:
    """The schema as a table (column, dtype, description)."""
    return pd.DataFrame([(c.name, c.kind, c.description) for c in COLUMNS], columns=["column", "dtype", "description"])


def _where(df: pd.DataFrame, mask: np.ndarray, limit: int = 5) -> str:
    rows = np.flatnonzero(mask)
    if "run_id" in df.columns:
        ids = [str(v) for v in df["run_id"].to_numpy()[rows[:limit]]]
        label = "run_id " + ", ".join(ids)
    else:
        label = "rows " + ", ".join(str(int(r)) for r in rows[:limit])
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return f"{label}{more}"


def coerce_dtypes(df: pd.DataFrame) -> pd.DataFrame:
    """Cast known columns to their schema dtypes (nullable), leaving unknown columns as they are.

    Values that cannot be read as the column's type raise :class:`SchemaError` naming the column and rows.
    """
    out = df.copy()
    for name in out.columns:
        kind = _KIND.get(name)
        if kind is None:
            continue
        col = out[name]
        if kind == "str":
            out[name] = col.astype("string")
            continue
        numeric = pd.to_numeric(col, errors="coerce")
        bad = numeric.isna().to_numpy() & ~col.isna().to_numpy()
        if bad.any():
            raise SchemaError(
                f"Column {name!r} must be numeric ({kind}); {int(bad.sum())} rows have non-numeric values "
                f"({_where(out, bad)}), e.g. {col[bad].iloc[0]!r}."
            )
        if kind == "int":
            finite = numeric.dropna()
            if len(finite) and not np.all(np.isfinite(finite)):
                badi = ~np.isfinite(numeric.to_numpy(dtype=float, na_value=np.nan)) & numeric.notna().to_numpy()
                raise SchemaError(f"Column {name!r} must hold integers; rows {_where(out, badi)} are infinite.")
            huge = (finite.abs() > 2**62).to_numpy()
            if huge.any():
                badh = numeric.notna().to_numpy().copy()
                badh[badh] = huge
                raise SchemaError(f"Column {name!r} holds integers too large to store ({_where(out, badh)}).")
            frac = (finite % 1 != 0).to_numpy()
            if frac.any():
                badi = numeric.notna().to_numpy().copy()
                badi[badi] = frac
                raise SchemaError(
                    f"Column {name!r} must hold integers; {int(frac.sum())} rows are fractional ({_where(out, badi)})."
                )
            out[name] = numeric.astype("Int64")
        else:
            out[name] = numeric.astype("float64")
    return out


def validate_runs(df: pd.DataFrame, *, include_failed: bool = False) -> pd.DataFrame:
    """Check a run history against the schema and return a normalised copy.

    Parameters
    ----------
    df : DataFrame
        One row per run.
    include_failed : bool, default=False
        Keep rows whose ``status`` is not ``ok`` (their times are not checked). By default they are dropped,
        since they carry no time to learn from.

    Returns
    -------
    DataFrame
        With canonical ``gpu_type`` names, schema dtypes, ``precision`` (default ``fp32``), ``status`` (default
        ``ok``), ``run_id`` (default ``row-<i>``) and ``step_time_s`` (derived from ``wall_time_s / steps`` when
        absent).

    Raises
    ------
    SchemaError
        Naming the column and the offending rows: a missing column, a non-numeric value, NaN or infinity, a
        non-positive time, batch or count, an unknown precision or status.
    UnknownHardwareError
        For a ``gpu_type`` not in the spec table, naming the rows and the closest known names.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"A run history must be a pandas DataFrame. Got {type(df).__name__} instead.")
    if len(df) == 0:
        raise SchemaError("The run history is empty: it has no rows to fit or predict from.")
    df = df.reset_index(drop=True)
    missing = [c for c in MINIMAL_COLUMNS if c not in df.columns]
    if missing:
        raise SchemaError(
            f"The run history is missing required column(s) {', '.join(map(repr, missing))}. Required: "
            f"{', '.join(MINIMAL_COLUMNS)}, and either step_time_s or wall_time_s + steps. "
            f"Found: {', '.join(map(str, df.columns))}."
        )
    if "step_time_s" not in df.columns and not {"wall_time_s", "steps"} <= set(df.columns):
        raise SchemaError(
            "The run history needs a time: a 'step_time_s' column, or both 'wall_time_s' and 'steps'. "
            f"Found: {', '.join(map(str, df.columns))}."
        )
    df = coerce_dtypes(df)
    if "run_id" not in df.columns:
        df.insert(0, "run_id", pd.array([f"row-{i}" for i in range(len(df))], dtype="string"))
    if "status" not in df.columns:
        df["status"] = pd.array(["ok"] * len(df), dtype="string")
    status = df["status"].fillna("ok")
    bad = ~status.isin(STATUSES).to_numpy()
    if bad.any():
        raise SchemaError(
            f"Column 'status' must be one of {', '.join(STATUSES)}; {int(bad.sum())} rows are not ({_where(df, bad)})."
        )
    df["status"] = status
    if not include_failed:
        failed = (status != "ok").to_numpy()
        if failed.any():
            logger.info("Leaving out %d failed runs (status oom/error/timeout).", int(failed.sum()))
            df = df.loc[~failed].reset_index(drop=True)
            if len(df) == 0:
                raise SchemaError("The run history has no successful runs (every status is oom/error/timeout).")
    ok = (df["status"] == "ok").to_numpy()

    if "step_time_s" not in df.columns:
        df["step_time_s"] = df["wall_time_s"] / df["steps"]
    elif {"wall_time_s", "steps"} <= set(df.columns):
        fill = df["step_time_s"].isna() & df["wall_time_s"].notna() & df["steps"].notna()
        df.loc[fill, "step_time_s"] = df.loc[fill, "wall_time_s"] / df.loc[fill, "steps"].astype(float)

    for name in ("model", "gpu_type"):  # needed even for failed runs: they name the configuration
        isna = df[name].isna().to_numpy() | (df[name].astype("string").str.strip() == "").fillna(True).to_numpy()
        if isna.any():
            raise SchemaError(f"Column {name!r} has {int(isna.sum())} empty values ({_where(df, isna)}).")
    for name in ("params", "batch_size", "gpu_count", "step_time_s"):
        values = df[name].to_numpy(dtype=float, na_value=np.nan)
        check = ok  # failed runs are kept as evidence; they may lack a size or a time
        nan = np.isnan(values) & check
        if nan.any():
            raise SchemaError(
                f"Column {name!r} has NaN in {int(nan.sum())} rows ({_where(df, nan)}); drop or fill those rows."
            )
        nonpos = ~np.isnan(values) & ((values <= 0) | ~np.isfinite(values)) & check
        if nonpos.any():
            raise SchemaError(
                f"Column {name!r} must be finite and positive; {int(nonpos.sum())} rows are not "
                f"({_where(df, nonpos)}), e.g. {values[nonpos][0]!r}."
            )
    for name in ("wall_time_s", "steps", "flops_per_sample"):
        if name in df.columns:
            values = df[name].to_numpy(dtype=float, na_value=np.nan)
            nonpos = ~np.isnan(values) & ((values <= 0) | ~np.isfinite(values))
            if nonpos.any():
                raise SchemaError(
                    f"Column {name!r} must be finite and positive where given; {int(nonpos.sum())} rows are not "
                    f"({_where(df, nonpos)})."
                )

    canonical = {}
    for raw in pd.unique(df["gpu_type"]):
        try:
            canonical[raw] = resolve_gpu_type(str(raw))
        except UnknownHardwareError as exc:
            rows = (df["gpu_type"] == raw).to_numpy()
            raise UnknownHardwareError(f"Column 'gpu_type', {_where(df, rows)}: {exc}") from None
    df["gpu_type"] = df["gpu_type"].map(canonical).astype("string")

    if "precision" not in df.columns:
        df["precision"] = pd.array(["fp32"] * len(df), dtype="string")
    prec = df["precision"].fillna("fp32").str.lower()
    bad = ~prec.isin(PRECISIONS).to_numpy()
    if bad.any():
        raise SchemaError(
            f"Column 'precision' must be one of {', '.join(PRECISIONS)}; {int(bad.sum())} rows are not "
            f"({_where(df, bad)}), e.g. {df['precision'][bad].iloc[0]!r}."
        )
    df["precision"] = prec
    return df
