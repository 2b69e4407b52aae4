"""The run-record schema: one tidy row per training run, units in the column names.

This module owns the columns, their dtypes and units, and the validation every history goes through. A user's
own history needs only :data:`MINIMAL_COLUMNS` plus either ``step_time_s`` or ``wall_time_s`` and ``steps``;
perfmodel's measurement code writes every column of :data:`COLUMNS`.

Conventions
-----------
* ``batch_size`` is **per device** (like torchrun/DDP scripts and Hugging Face's ``per_device_train_batch_size``):
  the samples of one forward/backward pass, so that with ``grad_accum`` k an optimizer step covers k of them and
  the global batch is ``batch_size * grad_accum * gpu_count``. A run that states ``global_batch_size`` (a layout
  run) may give ``global_batch_size / gpu_count`` instead; where given, ``global_batch_size`` is what a step covers
  (:func:`step_global_batch`).
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
import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .exceptions import SchemaError, UnknownHardwareError
from .hardware import PRECISIONS, resolve_gpu_type

__all__ = ["Column", "COLUMNS", "OP_COLUMNS", "LAYOUT_COLUMNS", "SHAPE_COLUMNS", "RECOMPUTE", "OP_TRACED_CLASSES", "OP_FEATURE_VERSION", "MINIMAL_COLUMNS", "STATUSES", "LIMITS", "validate_runs", "describe_range", "coerce_dtypes",
           "check_queries", "describe_schema", "step_global_batch"]

logger = logging.getLogger(__name__)

STATUSES = ("ok", "oom", "error", "timeout")
#: Values of the ``recompute`` column.
RECOMPUTE = ("none", "selective", "full")


@dataclass(frozen=True)
class Column:
    """One column of the run-record schema (an entry of :data:`COLUMNS`).

    Attributes
    ----------
    name : str
        The column name, with its unit (``step_time_s``).
    kind : {"str", "int", "float"}
        Its type: text (pandas ``string``), nullable integer (``Int64``) or float.
    description : str
        What it holds, in one line.
    """

    name: str
    kind: str  # "str", "int", "float"
    description: str


_C = Column
#: Op classes of the op-level feature set (:mod:`perfmodel.measure.opcount`, version :data:`OP_FEATURE_VERSION`);
#: the measurement layer owns the counting, the schema owns the column names (kept in step by a test).
OP_TRACED_CLASSES = ("matmul", "conv_dense", "conv_depthwise", "conv_grouped", "attention", "recurrent", "norm",
                     "elementwise", "embedding", "reduction", "other")
OP_FEATURE_VERSION = 2
#: Optional, nullable op-level columns (feature set version :data:`OP_FEATURE_VERSION`): a history without them loads as before.
OP_COLUMNS: tuple[Column, ...] = tuple(
    _C(f"op_{c}_{q}", "float", f"{'FLOPs' if q == 'flops' else 'bytes moved'} per sample in {c} ops, "
       "forward+backward (op-level feature set, nullable)")
    for c in OP_TRACED_CLASSES for q in ("flops", "bytes")
) + (
    _C("op_step_bytes", "float", "batch-independent bytes per step over traced ops: weights, gradients (op features)"),
    _C("op_optimizer_flops", "float", "optimizer update FLOPs per step, analytic per parameter (op features)"),
    _C("op_optimizer_bytes", "float", "optimizer update bytes per step, analytic per parameter (op features)"),
    _C("op_kernels", "float", "kernels (aten ops) dispatched per optimizer step: launch-overhead proxy (op features; "
       "from version 2, GRU/RNN cells count their per-time-step ops)"),
    _C("op_act_bytes", "float", "activation memory: bytes saved for backward per sample, params excluded (op features)"),
    _C("op_feature_version", "int", "version of the op-level feature set the op_* columns follow"),
)
#: Optional, nullable columns of a model-parallel job's layout (``perfmodel.layout``): how its devices split the
#: work. A history without them loads as before; a run without them ran data-parallel only (tp = pp = cp = 1).
LAYOUT_COLUMNS: tuple[Column, ...] = (
    _C("global_batch_size", "int", "samples (sequences) per optimizer step over all devices (nullable; default "
       "batch_size x grad_accum x gpu_count)"),
    _C("micro_batch_size", "int", "samples per forward/backward pass on one model replica (nullable; default: "
       "the replica's whole share of the step, no accumulation)"),
    _C("tp", "int", "tensor-parallel degree (Megatron-LM; 1 = none)"),
    _C("pp", "int", "pipeline-parallel degree (stages)"),
    _C("vp", "int", "virtual pipeline stages per pipeline rank (interleaved 1F1B schedule; 1 = plain 1F1B)"),
    _C("cp", "int", "context-parallel degree (the sequence split over devices)"),
    _C("ep", "int", "expert-parallel degree (mixture-of-experts; experts split within the data-parallel ranks)"),
    _C("dp", "int", "data-parallel degree, sharded (FSDP/ZeRO) or not: gpu_count / (tp x pp x cp)"),
    _C("zero_stage", "int", "sharding over the data-parallel ranks: 0 none | 1 optimizer state (Megatron's "
       "distributed optimizer) | 2 + gradients (FSDP SHARD_GRAD_OP) | 3 + weights (FSDP FULL_SHARD, ZeRO-3)"),
    _C("sequence_parallel", "int", "1 if tensor-parallel ranks also split the sequence in norms and dropout "
       "(Megatron sequence parallelism), else 0"),
    _C("recompute", "str", "activation recomputation: none | selective (attention core) | full (every layer)"),
    _C("flash_attention", "int", "1 if attention runs in fused kernels that keep the score matrix on chip "
       "(FlashAttention, cuDNN fused attention, PyTorch SDPA's flash and memory-efficient paths), 0 if the scores "
       "pass through memory (nullable; default 1)"),
    _C("gpus_per_node", "int", "devices per node (per NVLink domain: 72 on a GB200 NVL72 rack)"),
    _C("inter_node_gbps", "float", "the cluster's scale-out network per device, GB/s in one direction (e.g. 50 for "
       "one 400 Gb/s NIC per GPU)"),
)
#: Optional, nullable columns of a transformer's shape (``perfmodel.transformer``): what a layout divides.
SHAPE_COLUMNS: tuple[Column, ...] = (
    _C("n_layers", "int", "transformer layers"),
    _C("d_model", "int", "hidden size"),
    _C("n_heads", "int", "attention (query) heads"),
    _C("n_kv_heads", "int", "key/value heads (grouped-query attention; default n_heads)"),
    _C("head_dim", "int", "size of one attention head (default d_model / n_heads)"),
    _C("ffn_hidden", "int", "MLP hidden size of a dense layer"),
    _C("gated_mlp", "int", "1 for a gated MLP (SwiGLU/GeGLU: three matrices), 0 for two (default: guessed, gated "
       "where ffn_hidden is not a multiple of d_model)"),
    _C("tied_embeddings", "int", "1 if the output head shares the input embedding's weights, 0 if not"),
    _C("vocab", "int", "vocabulary size"),
    _C("n_experts", "int", "routed experts per mixture-of-experts layer (0 or empty: dense)"),
    _C("experts_per_token", "int", "routed experts each token visits (top-k)"),
    _C("moe_ffn_hidden", "int", "MLP hidden size of one expert"),
    _C("active_params", "int", "parameters one token passes through (a mixture of experts' activated parameters)"),
)
#: Every column perfmodel knows, in the order records are written.
COLUMNS: tuple[Column, ...] = (
    _C("run_id", "str", "unique id of the run"),
    _C("status", "str", "ok | oom | error | timeout"),
    _C("error", "str", "error message of a failed run"),
    _C("model", "str", "model name (a zoo name, or the user's own)"),
    _C("family", "str", "model family: mlp, cnn, encoder, decoder, rnn, ... (optional)"),
    _C("params", "int", "trainable parameters"),
    _C("flops_per_sample", "float", "forward+backward FLOPs for one sample (nullable)"),
    _C("flops_method", "str", "how flops_per_sample was counted: flop_counter | analytic | reported | user"),
    _C("batch_size", "float", "samples per device per pass (grad_accum passes a step), or, beside "
       "global_batch_size, global batch / devices (a model-parallel job whose step has fewer sequences than "
       "devices takes a fraction)"),
    _C("gpu_count", "int", "data-parallel devices (on CPU: worker processes)"),
    _C("gpu_type", "str", "canonical device name from perfmodel.hardware, or cpu"),
    _C("precision", "str", "fp32 | tf32 | fp16 | bf16 | fp8: what ran (compute dtype: autocast for bf16/fp16, "
                           "TF32 matmul/cuDNN flags for tf32; fp8 e.g. Transformer Engine)"),
    _C("grad_accum", "int", "micro-batches per optimizer step (gradient accumulation; default 1)"),
    _C("optimizer", "str", "optimizer of the timed step: adamw | sgd (default adamw)"),
    _C("compiled", "int", "1 if the model ran under torch.compile (compile time is in startup_s), else 0"),
    _C("activation_checkpointing", "int", "1 if activation checkpointing ran, else 0"),
    _C("seq_len", "int", "tokens per sample of a sequence model (nullable)"),
    *LAYOUT_COLUMNS,
    *SHAPE_COLUMNS,
    _C("model_source", "str", "where the model came from: zoo | hf | factory (bring-your-own) | user"),
    _C("threads_per_worker", "int", "torch intra-op threads per worker process"),
    _C("step_time_s", "float", "mean seconds per optimizer step, steady state"),
    _C("step_time_median_s", "float", "median seconds per optimizer step"),
    _C("step_time_std_s", "float", "standard deviation of the per-step times"),
    _C("step_time_cv", "float", "coefficient of variation of the per-step times"),
    _C("step_time_ci_rel", "float", "95% CI half-width of the mean step time, relative to the mean"),
    _C("timing_flag", "str", "why the timing says the machine was busy, empty if nothing does: high_step_cv (step "
       "CV > 0.3) | repeat_spread (median step time > 50% from the earlier repeat's, or from the median of the "
       "earlier repeats' and its own), ';'-joined"),
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
    _C("peak_mem_bytes", "float", "peak memory of the training steps on one device (rank 0), how it was measured in "
       "mem_source (nullable)"),
    _C("mem_source", "str", "how peak_mem_bytes was measured: cuda_max_allocated (torch.cuda.max_memory_allocated: "
       "live tensors, no CUDA context or cached blocks) | rss_delta (CPU: the tensors resident when the steps began "
       "plus the peak growth of anonymous resident memory; perfmodel.measure._peakmem)"),
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
    _C("source_id", "str", "id of the run where it was imported from (MLflow run id; for a Hugging Face output "
       "dir, a digest of its result files)"),
    _C("protocol", "str", "measurement protocol (warm-up, stopping rule)"),
    _C("sweep_id", "str", "id of the sweep that produced the run"),
    _C("timestamp", "str", "ISO-8601 UTC time the run finished"),
) + OP_COLUMNS
_KIND = {c.name: c.kind for c in COLUMNS}

#: The columns a user's own history must have (plus a time, see module docstring).
MINIMAL_COLUMNS = ("model", "params", "batch_size", "gpu_count", "gpu_type")
_POSITIVE = ("params", "batch_size", "gpu_count", "step_time_s", "wall_time_s", "steps")


#: Layout and shape columns that are 0/1 flags.
_FLAG_COLUMNS = ("sequence_parallel", "flash_attention", "gated_mlp", "tied_embeddings")

#: Plausibility limits: ``(low, low_inclusive, high)`` per numeric column, checked where a value is given. They
#: are far beyond any real run (a 10^15-parameter model, a million-second optimizer step) and keep every product
#: the models form (steps × step time, FLOPs × batch) finite in float64.
LIMITS: dict[str, tuple[float, bool, float]] = {
    "params": (0.0, False, 1e15),
    "flops_per_sample": (0.0, False, 1e24),
    "batch_size": (0.0, False, 1e9),
    "gpu_count": (0.0, False, 1e7),
    "nodes": (0.0, False, 1e6),
    "threads_per_worker": (0.0, False, 1e5),
    "cpu_cores": (0.0, False, 1e6),
    "step_time_s": (0.0, False, 1e6),
    "step_time_median_s": (0.0, False, 1e6),
    "step_time_std_s": (0.0, True, 1e6),
    "step_time_cv": (0.0, True, 1e3),
    "step_time_ci_rel": (0.0, True, 1e3),
    "steps_timed": (0.0, True, 1e13),
    "warmup_steps": (0.0, True, 1e13),
    "samples_per_s": (0.0, False, 1e15),
    "startup_s": (0.0, True, 1e7),
    "wall_time_s": (0.0, False, 1e10),
    "steps": (0.0, False, 1e13),
    "repeat": (0.0, True, 1e9),
    "gpu_mem_total_bytes": (0.0, True, 1e16),
    "gpu_mem_peak_bytes": (0.0, True, 1e16),
    "peak_mem_bytes": (0.0, True, 1e16),
    "gpu_util_mean_pct": (0.0, True, 100.0),
    "mem_util_mean_pct": (0.0, True, 100.0),
    "power_mean_w": (0.0, True, 1e5),
    "grad_accum": (0.0, False, 1e6),
    "compiled": (0.0, True, 1.0),
    "activation_checkpointing": (0.0, True, 1.0),
    "seq_len": (0.0, False, 1e9),
    **{c.name: (0.0, False, 1e9) for c in LAYOUT_COLUMNS + SHAPE_COLUMNS if c.kind == "int"
       and c.name not in ("zero_stage", "active_params", "n_experts") + _FLAG_COLUMNS},
    **{name: (0.0, True, 1.0) for name in _FLAG_COLUMNS},
    "zero_stage": (0.0, True, 3.0),
    "inter_node_gbps": (0.0, False, 1e6),
    "n_experts": (0.0, True, 1e9),
    "active_params": (0.0, False, 1e15),
    # op-level features: per-sample FLOPs and bytes as for flops_per_sample; zero is a class with no ops
    **{c.name: (0.0, True, 1e24) for c in OP_COLUMNS if c.kind == "float" and c.name != "op_kernels"},
    "op_kernels": (0.0, True, 1e12),
    "op_feature_version": (0.0, False, 1e6),
}
#: Flag columns: 0 or 1 (their LIMITS range is [0, 1] and they are integers).
_FLAGS = ("compiled", "activation_checkpointing") + _FLAG_COLUMNS
#: Columns that must be present (not NaN) in every successful run.
_REQUIRED_OK = ("params", "batch_size", "gpu_count", "step_time_s")


def _range_message(name: str) -> str:
    lo, inclusive, hi = LIMITS[name]
    if name in _FLAGS:
        return "must be 0 or 1"
    return f"must be finite and {'non-negative' if inclusive else 'positive'} (at most {hi:g})"


def describe_range(name: str) -> str:
    """The documented range of a numeric schema column, as text.

    Parameters
    ----------
    name : str
        A schema column.

    Returns
    -------
    str
        E.g. ``"number > 0 and <= 1e+24"``, ``"0 or 1"`` for a flag; ``""`` for a column without limits
        (text).
    """
    if name not in LIMITS:
        return ""
    lo, inclusive, hi = LIMITS[name]
    if name in _FLAGS:
        return "0 or 1"
    kind = "integer" if _KIND.get(name) == "int" else "number"
    return f"{kind} {'>=' if inclusive else '>'} {lo:g} and <= {hi:g}"


def _out_of_range(name: str, values: np.ndarray) -> np.ndarray:
    lo, inclusive, hi = LIMITS[name]
    with np.errstate(invalid="ignore"):
        above = (values >= lo) if inclusive else (values > lo)
        return ~np.isnan(values) & ~(np.isfinite(values) & above & (values <= hi))


def _check_ranges(df: pd.DataFrame, ok: np.ndarray) -> None:
    """Every numeric column perfmodel knows is finite and within :data:`LIMITS` where given. Failed runs are
    checked too, except for the sizes and times that a failed run may hold as partial values."""
    for name in LIMITS:
        if name not in df.columns:
            continue
        values = df[name].to_numpy(dtype=float, na_value=np.nan)
        bad = _out_of_range(name, values)
        if name in _REQUIRED_OK or name in ("wall_time_s", "steps"):
            bad &= ok if name not in ("params", "batch_size", "gpu_count") else np.ones_like(bad)
        if bad.any():
            raise SchemaError(
                f"Column {name!r} {_range_message(name)} where given; {_rows_are_not(bad)} "
                f"({_where(df, bad)}), e.g. {float(values[bad][0])!r}."
            )


def _first_non_text(col: pd.Series) -> int | None:
    """Position of the first value that is neither text nor missing (None, NaN, NA), or None. Checks each
    distinct value once, so 100,000 queries over a few names cost a hash pass, not 100,000 Python calls."""
    if isinstance(col.dtype, pd.StringDtype):
        return None
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes, uniq = col.cat.codes.to_numpy(), col.cat.categories
    else:
        codes, uniq = pd.factorize(col, use_na_sentinel=True)  # missing values get code -1
    bad = np.isin(codes, [k for k, v in enumerate(uniq) if not isinstance(v, str)])
    missing = np.flatnonzero(codes < 0)  # None, NaN and NA are fine; other missing markers (NaT) are not
    if len(missing):
        values = col.to_numpy(dtype=object)[missing]
        bad[missing] = [not (v is None or v is pd.NA or (isinstance(v, float) and v != v)) for v in values]
    return int(np.flatnonzero(bad)[0]) if bad.any() else None


def check_queries(q: pd.DataFrame, where: str, positions=None) -> None:
    """Check prediction queries like :func:`validate_runs` checks runs: ``params``, ``batch_size``,
    ``gpu_count``, ``steps`` (and ``flops_per_sample`` and ``grad_accum`` where given) finite, positive and within
    :data:`LIMITS`, and the counts whole numbers; ``precision``, ``gpu_type`` and ``model`` text where given.

    Parameters
    ----------
    q : pandas.DataFrame
        The queries (left unchanged).
    where : str
        The caller's name, for the messages.
    positions : array-like of int, optional
        Each row's 0-based position in the caller's queries, when ``q`` is a part of them: a bad row is named
        by it. Default: the row's position in ``q``.

    Raises
    ------
    SchemaError
        Naming the column and the first bad row, counted from 1.
    """
    def row(i: int) -> str:
        return f"row {int(positions[i] if positions is not None else i) + 1}, counting from 1"

    for name in ("precision", "gpu_type", "model"):
        if name in q.columns:
            i = _first_non_text(q[name])
            if i is not None:
                raise SchemaError(f"{where}: column {name!r} must hold text; {row(i)}, holds "
                                  f"{q[name].iloc[i]!r} of type {type(q[name].iloc[i]).__name__}.")
    optional = ("flops_per_sample", "grad_accum")
    for name in ("params", "batch_size", "gpu_count", "steps", *optional):
        if name not in q.columns:
            if name in optional:
                continue
            raise SchemaError(f"{where} needs a {name!r} column in the queries.")
        tmp = pd.DataFrame({name: q[name].reset_index(drop=True)})
        tmp.attrs["row_positions"] = np.arange(len(q)) if positions is None else np.asarray(positions)
        kind = _KIND.get(name, "int")
        try:
            values, _ = _numeric(tmp, name, kind)
        except SchemaError as exc:
            raise SchemaError(f"{where}: {exc}") from None
        missing = np.isnan(values)
        if name not in optional and missing.any():
            raise SchemaError(f"{where}: column {name!r} is missing in {_rows(int(missing.sum()))} (first: "
                              f"{row(int(np.flatnonzero(missing)[0]))}).")
        bad = _out_of_range(name, values)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise SchemaError(f"{where}: column {name!r} {_range_message(name)}; {_rows_are_not(bad)} "
                              f"(first: {row(i)}: {float(values[i])!r}).")
        if kind == "int" or name == "batch_size":
            with np.errstate(invalid="ignore"):
                frac = ~missing & (np.mod(values, 1) != 0)
            if name == "batch_size":  # a device's share of a model-parallel job's batch may be a fraction
                split = np.ones(len(q))
                for c in ("tp", "pp", "cp"):
                    if c in q.columns:
                        split = split * pd.to_numeric(q[c], errors="coerce").fillna(1).to_numpy(dtype=float)
                frac &= split <= 1
            if frac.any():
                i = int(np.flatnonzero(frac)[0])
                raise SchemaError(f"{where}: column {name!r} must hold whole numbers; {_rows_are_not(frac)} whole "
                                  f"(first: {row(i)}: {float(values[i])!r}).")


def step_global_batch(runs) -> np.ndarray:
    """Samples per optimizer step over all devices, per row: ``global_batch_size`` where given, else
    ``batch_size × grad_accum × gpu_count`` (``grad_accum`` 1 where missing) — the one definition of what a step
    covers (module docstring).

    Parameters
    ----------
    runs : pandas.DataFrame or mapping
        Runs or queries with ``batch_size`` and ``gpu_count`` (and ``grad_accum``, ``global_batch_size`` where
        known); a mapping is one row (missing values None or NaN).

    Returns
    -------
    numpy.ndarray of float, shape (len(runs),), or (1,) for a mapping
    """
    one = not isinstance(runs, pd.DataFrame)

    def col(name: str, default: float) -> np.ndarray:
        if name not in runs:
            return np.full(1 if one else len(runs), default)
        if one:  # one row: no Series to build (the layout jobs ask once per distinct row)
            try:
                return np.array([float(runs[name])])
            except (TypeError, ValueError):
                return np.array([np.nan])
        return pd.to_numeric(runs[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)

    accum = col("grad_accum", 1.0)
    own = col("batch_size", np.nan) * col("gpu_count", 1.0) * np.where(np.isnan(accum), 1.0, accum)
    given = col("global_batch_size", np.nan)
    return np.where(np.isnan(given), own, given)


def describe_schema() -> pd.DataFrame:
    """The schema as a table (column, dtype, range, description).

    ``range`` is the documented range of a numeric column (:data:`LIMITS`), checked on load where a value is
    given; it is empty for text columns.

    Returns
    -------
    pandas.DataFrame
        One row per column of :data:`COLUMNS`: ``column``, ``dtype``, ``range`` and ``description``.
    """
    return pd.DataFrame([(c.name, c.kind, describe_range(c.name), c.description) for c in COLUMNS],
                        columns=["column", "dtype", "range", "description"])


def _rows(n: int) -> str:
    return f"{n} row{'' if n == 1 else 's'}"


def _rows_are_not(mask: np.ndarray) -> str:
    n = int(np.sum(mask))
    return f"{_rows(n)} {'is' if n == 1 else 'are'} not"


def _where(df: pd.DataFrame, mask: np.ndarray, limit: int = 5) -> str:
    rows = np.flatnonzero(mask)
    if "run_id" in df.columns:
        ids = [str(v) for v in df["run_id"].to_numpy()[rows[:limit]]]
        label = "run_id " + ", ".join(ids)
    else:
        at = df.attrs.get("row_positions")  # the rows' places in the caller's frame, when df is a part of it
        at = rows[:limit] if at is None else np.asarray(at)[rows[:limit]]
        label = "rows " + ", ".join(str(int(r) + 1) for r in at)  # data rows counted from 1
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return f"{label}{more}"


_NUMBER_TEXT = re.compile(r"\s*[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)\s*",
                          re.IGNORECASE)
_INT_TEXT = re.compile(r"\s*[+-]?[0-9]+(?:\.0*)?\s*")


def _bad(out: pd.DataFrame, name: str, mask: np.ndarray, what: str, example) -> SchemaError:
    return SchemaError(f"Column {name!r} {what}; {_rows_are_not(mask)} ({_where(out, mask)}), "
                       f"e.g. {example!r}.")


def _numeric(out: pd.DataFrame, name: str, kind: str) -> tuple[np.ndarray, pd.Series | None]:
    """One known numeric column, read strictly: numbers and number-shaped text only (no booleans, durations,
    dates or bytes, which pandas would silently turn into 1.0 or nanoseconds).

    Returns the values as float64 (NaN = missing) and, for an integer column, the exact integers (Int64) when
    the source held integers (floats lose precision above 2**53)."""
    col = out[name]
    dtype = col.dtype
    if pd.api.types.is_bool_dtype(dtype):
        raise SchemaError(f"Column {name!r} must be numeric ({kind}); it holds booleans (True/False).")
    if dtype.kind in "mM" or isinstance(dtype, pd.DatetimeTZDtype):
        raise SchemaError(f"Column {name!r} must be numeric ({kind}); it holds {dtype} values. Store plain "
                          "numbers (seconds for times).")
    if pd.api.types.is_integer_dtype(dtype):
        as_float = col.to_numpy(dtype=float, na_value=np.nan)
        if np.nanmax(np.abs(as_float), initial=0.0) > 2**62:  # uint64 beyond int64: too large, said below
            return as_float, None
        ints = col.astype("Int64")
        return ints.to_numpy(dtype=float, na_value=np.nan), ints
    if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_complex_dtype(dtype):
        return col.to_numpy(dtype=float, na_value=np.nan), None
    values = col.to_numpy(dtype=object)
    result = np.full(len(values), np.nan)
    bad = np.zeros(len(values), dtype=bool)
    pattern = _INT_TEXT if kind == "int" else _NUMBER_TEXT
    exact: list = [None] * len(values) if kind == "int" else []
    for i, v in enumerate(values):
        if v is None or v is pd.NA or v is pd.NaT:
            continue
        if isinstance(v, (bool, np.bool_)):
            bad[i] = True
        elif isinstance(v, (int, np.integer)):
            result[i] = float(v) if abs(int(v)) < 2**1023 else (math.inf if v > 0 else -math.inf)
            if kind == "int" and abs(int(v)) <= 2**62:
                exact[i] = int(v)
        elif isinstance(v, (float, np.floating)):
            result[i] = float(v)
        elif isinstance(v, str):
            if v.strip() == "":
                continue
            if not pattern.fullmatch(v):
                # an integer column also takes a whole number in scientific notation ("25.6e6")
                if kind == "int" and _NUMBER_TEXT.fullmatch(v) and float(v).is_integer():
                    result[i] = float(v)
                else:
                    bad[i] = True
            elif kind == "int":
                exact[i] = int(v.strip().split(".")[0].lstrip("+") or "0")
                result[i] = float(exact[i])
            else:
                result[i] = float(v)
        else:
            bad[i] = True
    if bad.any():
        ex = values[bad][0]
        raise SchemaError(
            f"Column {name!r} must be numeric ({kind}); {_rows_are_not(bad)} ({_where(out, bad)}), "
            f"e.g. {ex!r} of type {type(ex).__name__}."
        )
    if kind == "int" and any(e is not None for e in exact) and all(
            e is not None or np.isnan(r) or float(r).is_integer() for e, r in zip(exact, result)):
        big = np.array([e is not None and abs(e) > 2**62 for e in exact])
        if big.any():
            raise SchemaError(f"Column {name!r} holds integers too large to store ({_where(out, big)}).")
        if any(e is None and np.isfinite(r) and abs(r) > 2**62 for e, r in zip(exact, result)):
            return result, None  # a whole float beyond int64 (1e308): kept as a float, the range checks name it
        ints = [e if e is not None else (None if np.isnan(r) else int(r)) for e, r in zip(exact, result)]
        return result, pd.Series(pd.array(ints, dtype="Int64"), index=col.index)
    return result, None


def _text(out: pd.DataFrame, name: str) -> pd.Series:
    """One known text column: strings as they are; bytes and unencodable strings refused."""
    col = out[name]
    if not (pd.api.types.is_object_dtype(col.dtype) or pd.api.types.is_string_dtype(col.dtype)):
        return col.astype("string")

    def problem(v) -> str:
        if isinstance(v, (bytes, bytearray, memoryview)):
            return "holds binary (bytes) values; store text"
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return "holds text that is not valid Unicode (lone surrogates)"
        return ""

    if isinstance(col.dtype, pd.StringDtype) and col.dtype.storage == "pyarrow":
        return col.astype("string")  # Arrow text is valid UTF-8 by construction
    uniq = pd.unique(col.to_numpy(dtype=object))
    if isinstance(col.dtype, pd.StringDtype):  # text already: only a string that is not valid Unicode is wrong
        try:
            "".join(v for v in uniq if isinstance(v, str)).encode("utf-8")
            return col.astype("string")
        except UnicodeEncodeError:
            pass
    whys = [w for w in map(problem, uniq) if w]
    if whys:
        bad = np.array([problem(v) != "" for v in col.to_numpy(dtype=object)])
        raise SchemaError(f"Column {name!r} {whys[0]} ({_where(out, bad)}).")
    return col.astype("string")


def coerce_dtypes(df: pd.DataFrame) -> pd.DataFrame:
    """Cast known columns to their schema dtypes (nullable), leaving unknown columns as they are.

    Numeric columns accept numbers and number-shaped text only: booleans, durations, timestamps, bytes and other
    objects raise :class:`SchemaError` naming the column and rows (pandas would read ``True`` as 1.0 and a
    duration as nanoseconds). Text columns keep their strings exactly; bytes are refused.

    Parameters
    ----------
    df : pandas.DataFrame
        A history or query frame (not changed).

    Returns
    -------
    pandas.DataFrame
        A copy: text columns as ``string``, integer columns as ``Int64``, float columns as ``float64``
        (missing: NaN), unknown columns as they were.

    Raises
    ------
    SchemaError
        For a repeated column name or a value that is not of its column's type.
    """
    if df.columns.duplicated().any():
        dup = df.columns[df.columns.duplicated()][0]
        raise SchemaError(f"The run history names column {dup!r} twice.")
    out = df.copy()
    for name in out.columns:
        kind = _KIND.get(name)
        if kind is None:
            continue
        if kind == "str":
            out[name] = _text(out, name)
            continue
        as_float, exact = _numeric(out, name, kind)
        if kind == "int":
            present = ~np.isnan(as_float)
            badi = present & ~np.isfinite(as_float)
            if badi.any():
                raise SchemaError(f"Column {name!r} must hold integers; rows {_where(out, badi)} are infinite.")
            safe = np.where(present, as_float, 0.0)
            huge = present & (np.abs(safe) > 2**62)
            if huge.any():
                raise SchemaError(f"Column {name!r} holds integers too large to store ({_where(out, huge)}).")
            frac = present & (np.mod(safe, 1) != 0)
            if frac.any():
                raise SchemaError(
                    f"Column {name!r} must hold integers; {int(frac.sum())} rows are fractional ({_where(out, frac)})."
                )
            if exact is None:
                exact = pd.Series(pd.array(safe.astype(np.int64), dtype="Int64"), index=out.index).mask(~present)
            out[name] = exact.astype("Int64")
        else:
            out[name] = pd.Series(as_float, index=out.index, dtype="float64")
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
        # a generated id names the data row, counted from 1 as in every error message
        df.insert(0, "run_id", pd.array([f"row-{i + 1}" for i in range(len(df))], dtype="string"))
    if "status" not in df.columns:
        df["status"] = pd.array(["ok"] * len(df), dtype="string")
    status = df["status"].fillna("ok")
    bad = ~status.isin(STATUSES).to_numpy()
    if bad.any():
        raise SchemaError(
            f"Column 'status' must be one of {', '.join(STATUSES)}; {_rows_are_not(bad)} ({_where(df, bad)})."
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
                f"Column {name!r} has NaN in {_rows(int(nan.sum()))} ({_where(df, nan)}); drop or fill those rows."
            )
    _check_ranges(df, ok)
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
            f"Column 'precision' must be one of {', '.join(PRECISIONS)}; {_rows_are_not(bad)} "
            f"({_where(df, bad)}), e.g. {df['precision'][bad].iloc[0]!r}."
        )
    df["precision"] = prec
    _check_layout(df)
    return df


def _check_layout(df: pd.DataFrame) -> None:
    """The layout columns, where given, agree with each other and with the run: ``recompute`` is one of
    :data:`RECOMPUTE`, and ``tp·pp·cp·dp`` is the device count."""
    if "recompute" in df.columns:
        given = df["recompute"].notna().to_numpy()
        bad = given & ~df["recompute"].astype("string").str.lower().isin(RECOMPUTE).fillna(False).to_numpy()
        if bad.any():
            raise SchemaError(f"Column 'recompute' must be one of {', '.join(RECOMPUTE)}; {_rows_are_not(bad)} "
                              f"({_where(df, bad)}), e.g. {df['recompute'][bad].iloc[0]!r}.")
        df["recompute"] = df["recompute"].astype("string").str.lower()
    split = np.ones(len(df))  # devices per model replica
    for c in ("tp", "pp", "cp"):
        if c in df.columns:
            split = split * df[c].to_numpy(dtype=float, na_value=1.0)
    batch = df["batch_size"].to_numpy(dtype=float, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        frac = ~np.isnan(batch) & (np.mod(batch, 1) != 0) & (split <= 1)
    if frac.any():
        raise SchemaError(f"Column 'batch_size' must hold integers where each device holds a whole model replica "
                          f"(tp x pp x cp = 1); {int(frac.sum())} rows are fractional ({_where(df, frac)}).")
    degrees = [c for c in ("tp", "pp", "cp", "dp") if c in df.columns]
    if "dp" in degrees:
        prod = np.ones(len(df))
        for c in degrees:
            prod = prod * df[c].to_numpy(dtype=float, na_value=1.0)
        dp_given = df["dp"].notna().to_numpy()
        bad = dp_given & (np.abs(prod - df["gpu_count"].to_numpy(dtype=float, na_value=np.nan)) > 0.5)
        if bad.any():
            raise SchemaError(f"Columns tp x pp x cp x dp must multiply to gpu_count; {_rows_are_not(bad)} "
                              f"({_where(df, bad)}).")
