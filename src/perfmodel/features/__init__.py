"""Run records -> design matrix.

:func:`run_quantities` derives the physical quantities of each run (work per step, global batch, the all-reduce
volume, the device's peaks for the run's precision); :class:`RunFeaturizer` turns them into the columns a
regressor sees, with inspectable names (``get_feature_names_out``).

Feature sets
------------
``"seed"``
    ``params, batch_size, gpu_count``: exactly the seed design's linear formula.
``"ops"``
    Op-level terms (:data:`OPS_COLUMNS`, see :mod:`perfmodel.models._ops`): per op class, the step's FLOPs over
    the device peak and its bytes over the memory bandwidth (seconds at 100%), batch-independent bytes, the
    optimizer's bytes, kernels per step and the all-reduce time. Read from the history's ``op_*`` columns
    (:data:`perfmodel.schema.OP_COLUMNS`, written by the measuring worker or ``perfmodel features add-ops``). A
    row without them (a spreadsheet with params and FLOPs only) gets its op mix **imputed** and
    ``op_imputed = 1``: each op quantity is the median ratio, over the fitted history's rows that have op columns,
    of that quantity to ``flops_per_sample`` (per-step quantities: to ``params``; kernels: the median count); if
    no fitted row has op columns, all FLOPs count as matmul, batch-independent bytes are 12 per parameter
    (weights read forward and backward, gradients written, fp32) and there are no per-sample bytes or kernels.
``"baseline"``
    :data:`BASELINE_COLUMNS`: log work per device-step, log peak FLOP/s and log memory bandwidth of the device at
    the run's precision (CPU: the nominal figures), log device count and batch, and model, device-type and
    precision codes, the convolution share and the attention share of the FLOPs (:func:`attention_share`): what
    the one-line rules of :mod:`perfmodel.models._baselines` (``ratio``, ``mfu``) need.
``"log"``
    Logs of the work per device per step (FLOPs), params, per-device batch and device count; an indicator of
    data-parallel runs and the log all-reduce volume; precision indicators; and, when the history spans two or
    more device types with known peaks, the log peak TFLOPS and memory bandwidth (the bandwidth from three
    devices with distinct datasheet figures on: B200 and B300 are one point). Columns that are constant in the
    training runs are dropped at ``fit`` (they are absorbed by the intercept), and so is a column the columns
    before it explain but for :data:`COLLINEAR_TOL` of its spread (rounding, not information).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ..hardware import ELEMENT_BYTES, PRECISIONS, get_spec, resolve_gpu_type
from ..layout_features import LAYOUT_FEATURES, layout_components
from ..schema import OP_TRACED_CLASSES, step_global_batch
from ._flop_mix import (
    CONV_FAMILIES,
    FP32_MODES,
    attention_share,
    conv_share,
    fp32_basis,
    fp32_modes,
    known_conv_share,
    per_distinct,
)

__all__ = ["run_quantities", "RunFeaturizer", "FEATURE_SETS", "FP32_GRAD_BYTES", "ROOFLINE_COLUMNS", "OPS_COLUMNS",
           "GPUS_PER_NODE", "COLLINEAR_TOL", "BASELINE_COLUMNS", "FP32_MODES", "CONV_FAMILIES", "fp32_modes",
           "conv_share", "attention_share", "fp32_basis", "peak_basis"]

FEATURE_SETS = ("seed", "log", "physics", "roofline", "ops", "baseline", "layout")
#: The columns RunFeaturizer(kind="baseline") produces, in order (see :mod:`perfmodel.models._baselines`).
BASELINE_COLUMNS = ("log_work", "log_peak", "log_bw", "log_n", "log_batch", "model_code", "device_code",
                    "precision_code", "flops_imputed", "conv_share", "attn_share")
#: Nominal bandwidths that put CPU optimizer and gloo all-reduce traffic on a seconds scale (fitted factors
#: absorb them); GPUs use the spec table's memory and interconnect bandwidths.
CPU_NOMINAL_MEMORY_GBPS = 20.0
#: Interconnect assumed by the roofline features for a device whose spec row has none (GB/s).
UNKNOWN_INTERCONNECT_GBPS = 100.0
#: Nominal per-thread CPU FLOP/s used only to put CPU compute on a seconds scale (fitted efficiencies absorb it).
CPU_THREAD_NOMINAL_FLOPS = 50e9
CPU_NOMINAL_INTERCONNECT_GBPS = 5.0
#: AdamW traffic per parameter: read/write param, grad, two moments in fp32.
ADAMW_BYTES_PER_PARAM = 16
#: Bytes per gradient element in the all-reduce (DDP keeps fp32 gradients under autocast).
FP32_GRAD_BYTES = 4
#: ``kind="log"``: a column is dropped at ``fit`` when the part of it the columns kept before it do not explain is
#: below this share of its spread (``RunFeaturizer._independent``): it carries no information of its own, only
#: rounding, and its coefficient would be set by that rounding.
COLLINEAR_TOL = 1e-3
#: Devices per machine assumed when a record or query does not say how many nodes it spans.
GPUS_PER_NODE = 8
#: The columns RunFeaturizer(kind="physics") produces, in order (see :mod:`perfmodel.models._physics`).
PHYSICS_COLUMNS = ("t_compute_s", "work_gflop", "t_opt_s", "t_comm_s", "data_parallel", "family_code",
                   "model_code", "batch_size", "gpu_count")
#: The columns RunFeaturizer(kind="roofline") produces, in order (see :mod:`perfmodel.models._roofline`).
ROOFLINE_COLUMNS = ("log_t_peak", "ridge", "tf32_gap", "log_n", "log_nodes", "log_batch", "comm_rel", "opt_rel",
                    "log_work", "model_code", "family_code", "device_code", "arch_code", "vendor_code",
                    "precision_code", "software_code")
#: The run column that names a run's software generation for the roofline form (MLPerf results carry their
#: round: vendors' kernels and fusions improve from round to round, on every device at once). Rows without it
#: (your own runs, queries) get no software effect.
SOFTWARE_COLUMN = "round"


def _software(X: pd.DataFrame) -> pd.Series:
    """The software generation of each run (see :data:`SOFTWARE_COLUMN`); "" where unknown."""
    if SOFTWARE_COLUMN not in X.columns:
        return pd.Series("", index=X.index, dtype=object)
    return X[SOFTWARE_COLUMN].astype("string").fillna("").astype(object)

#: The columns RunFeaturizer(kind="ops") produces, in order (see :mod:`perfmodel.models._ops`).
OPS_COLUMNS = (("family_code", "model_code", "batch_size", "gpu_count", "data_parallel", "t_comm_s", "t_step_bytes_s",
                "t_opt_bytes_s", "kernels", "op_imputed", "work_gflop")
               + tuple(f"t_flops_{c}_s" for c in OP_TRACED_CLASSES) + tuple(f"t_bytes_{c}_s" for c in OP_TRACED_CLASSES))
#: Fallback when no fitted row has op columns: batch-independent bytes per parameter (fp32 weights read forward
#: and backward, gradients written).
OPS_FALLBACK_STEP_BYTES_PER_PARAM = 12.0
#: Optimizer bytes per parameter assumed for an imputed row without a fitted ratio (AdamW, fp32).
OPS_FALLBACK_OPT_BYTES_PER_PARAM = 28.0
_PER_SAMPLE_OPS = tuple(f"op_{c}_{q}" for c in OP_TRACED_CLASSES for q in ("flops", "bytes"))
_PER_STEP_OPS = ("op_step_bytes", "op_optimizer_bytes")


def _codes(values, known) -> np.ndarray:
    """Position of each value in ``known`` as float (-1: unknown; missing counts as ""), looked up once per
    distinct value: 100,000 query rows cost one factorize, not 100,000 string comparisons."""
    codes, uniq = pd.factorize(pd.Series(values) if not isinstance(values, pd.Series) else values)
    index = pd.Index(list(known), dtype=object)
    look = index.get_indexer(np.asarray([str(u) for u in uniq], dtype=object))
    missing = index.get_indexer(np.asarray([""], dtype=object))[0]
    return np.where(codes >= 0, look[np.maximum(codes, 0)] if len(look) else -1, missing).astype(float)


def _canonical(values) -> np.ndarray:
    """Device names as the spec table spells them (``a10`` and ``A10`` are one device); an unknown name as given."""
    def one(name):
        try:
            return resolve_gpu_type(str(name))
        except (ValueError, TypeError):
            return str(name)

    return per_distinct(values, one).astype(object)


def _spec_columns(gpu_type: pd.Series, precision: pd.Series) -> pd.DataFrame:
    """Peak, memory and interconnect bandwidth per row, looked up once per distinct (device, precision)."""
    g_codes, g_uniq = pd.factorize(gpu_type)
    p_codes, p_uniq = pd.factorize(precision)
    codes = g_codes * len(p_uniq) + p_codes
    table = np.full((len(g_uniq) * len(p_uniq), 4), np.nan)
    for gi, g in enumerate(g_uniq):
        spec = get_spec(str(g))
        tf32 = spec.peak_tflops("tf32")
        for pi, p in enumerate(p_uniq):
            peak = spec.peak_tflops(str(p))
            table[gi * len(p_uniq) + pi] = (
                np.nan if peak is None else float(peak),
                np.nan if spec.memory_bandwidth_gbps is None else float(spec.memory_bandwidth_gbps),
                np.nan if spec.interconnect_gbps is None else float(spec.interconnect_gbps),
                np.nan if tf32 is None else float(tf32),
            )
    return pd.DataFrame(table[codes], columns=["peak_tflops", "memory_bandwidth_gbps", "interconnect_gbps",
                                               "tf32_peak_tflops"], index=gpu_type.index)


def peak_basis(runs: pd.DataFrame) -> np.ndarray:
    """One line per row naming the peak its prediction assumes.

    Parameters
    ----------
    runs : pandas.DataFrame
        Runs or query rows (``precision``, ``gpu_type``, and what :func:`fp32_basis` reads).

    Returns
    -------
    numpy.ndarray of object, shape (len(runs),)
        E.g. ``"fp32 full (no TF32; matmul share 1.00, conv share 0.00)"``, ``"fp32 PyTorch defaults (no
        fp32_mode): conv share 0.95 at TF32, matmul share 0.05 at full fp32"``, ``"bf16"``; plain ``"fp32"``
        on a device without a TF32 peak above its fp32 one (CPU, V100, most AMD parts).
    """
    basis = fp32_basis(runs)
    precision = (runs["precision"].astype(str).to_numpy(dtype=object) if "precision" in runs.columns
                 else np.full(len(runs), "fp32", dtype=object))
    devices = (runs["gpu_type"].astype(str).to_numpy(dtype=object) if "gpu_type" in runs.columns
               else np.full(len(runs), "", dtype=object))
    keys = pd.Series([f"{p}\x1f{m}\x1f{c:.2f}\x1f{g}" for p, m, c, g in zip(precision, basis["fp32_mode"],
                                                                           basis["conv_share"], devices)],
                     dtype=object)

    def tf32_capable(device: str) -> bool:
        try:
            return _device_info(device)["tf32_gap"] > 0
        except (ValueError, TypeError):
            return True

    def text(key: str) -> str:
        p, m, share, g = key.split("\x1f")
        c = float(share)
        if p != "fp32" or not tf32_capable(g):  # a device with no TF32 peak above fp32 has one fp32 peak
            return p
        if m == "tf32":
            return "fp32 as TF32 (fp32_mode tf32: matmuls and convolutions at the TF32 peak)"
        if m == "full":
            return f"fp32 full (no TF32; matmul share {1 - c:.2f}, conv share {c:.2f})"
        return (f"fp32 PyTorch defaults (no fp32_mode): conv share {c:.2f} at TF32, matmul share {1 - c:.2f} at "
                "full fp32")

    return per_distinct(keys, text).astype(object)


def _spec_point(gpu_type: str) -> tuple:
    """A device's datasheet figures that the hardware columns read (peaks and memory bandwidth); CPU: its name."""
    if str(gpu_type) == "cpu":
        return ("cpu",)
    spec = get_spec(str(gpu_type))
    return (spec.fp32_tflops, spec.tf32_tflops, spec.fp16_tflops, spec.bf16_tflops, spec.fp8_tflops,
            spec.memory_bandwidth_gbps)


def _device_info(gpu_type: str) -> dict:
    """Architecture, vendor and the log TF32/FP32 peak ratio of a device (CPU: its own architecture)."""
    spec = get_spec(str(gpu_type))
    fp32, tf32 = spec.fp32_tflops, getattr(spec, "tf32_tflops", None)
    gap = float(np.log(tf32 / fp32)) if fp32 and tf32 and tf32 > fp32 else 0.0
    arch = getattr(spec, "architecture", None) or f"{spec.vendor}:{spec.name}"
    return {"architecture": str(arch), "vendor": str(spec.vendor), "tf32_gap": gap}


def run_quantities(runs: pd.DataFrame) -> pd.DataFrame:
    """Physical quantities of each run (validated history or query rows).

    ``flops_per_sample`` falls back to ``6 * params`` (the "6·N" rule per sample-token) where it is missing;
    ``flops_imputed`` says where. With gradient accumulation (``grad_accum`` k, default 1) one optimizer step
    computes k micro-batches: the step's FLOPs and global batch are k times larger, its all-reduce is not.

    Parameters
    ----------
    runs : pandas.DataFrame
        Runs or query rows: ``params``, ``batch_size``, ``gpu_count``, ``gpu_type``, and ``flops_per_sample``,
        ``precision`` (default fp32), ``grad_accum`` where known.

    Returns
    -------
    pandas.DataFrame
        Indexed like ``runs``: ``params``, ``batch_size``, ``gpu_count``, ``global_batch``,
        ``flops_per_sample``, ``flops_imputed``, ``flops_per_step_device``, ``allreduce_bytes`` (ring
        all-reduce bytes per device of fp32 gradients), ``fp32_full_share``, the device's ``peak_tflops`` (at
        the run's precision; for fp32 the mix of TF32 and full-fp32 peaks :func:`fp32_basis` describes),
        ``memory_bandwidth_gbps`` and ``interconnect_gbps``, and ``precision`` and ``gpu_type`` as given.

    Raises
    ------
    UnknownHardwareError
        For a ``gpu_type`` the spec table does not know.
    """
    params = runs["params"].to_numpy(dtype=float)
    batch = runs["batch_size"].to_numpy(dtype=float)
    n = runs["gpu_count"].to_numpy(dtype=float)
    step = step_global_batch(runs)  # global_batch_size where given, else batch x grad_accum x devices
    if "flops_per_sample" in runs.columns:
        fps = runs["flops_per_sample"].to_numpy(dtype=float, na_value=np.nan)
    else:
        fps = np.full(len(runs), np.nan)
    imputed = np.isnan(fps)
    fps = np.where(imputed, 6.0 * params, fps)
    precision = runs["precision"] if "precision" in runs.columns else pd.Series(["fp32"] * len(runs),
                                                                               index=runs.index)
    out = pd.DataFrame(
        {
            "params": params,
            "batch_size": batch,
            "gpu_count": n,
            "global_batch": step,
            "flops_per_sample": fps,
            "flops_imputed": imputed,
            "flops_per_step_device": fps * step / n,
            "allreduce_bytes": 2.0 * (n - 1.0) / n * params * FP32_GRAD_BYTES,
        },
        index=runs.index,
    )
    spec = _spec_columns(runs["gpu_type"], precision)
    is_fp32 = np.asarray(precision.astype(str) == "fp32")
    if is_fp32.any():  # the fp32 peak as the run used it (module docstring: fp32 precision semantics)
        full = fp32_basis(runs)["full_share"].to_numpy(dtype=float)
        p32, ptf = spec["peak_tflops"].to_numpy(dtype=float), spec["tf32_peak_tflops"].to_numpy(dtype=float)
        ptf = np.where(np.isfinite(ptf) & (ptf > p32), ptf, p32)
        spec["peak_tflops"] = np.where(is_fp32, 1.0 / (full / p32 + (1.0 - full) / ptf), p32)
        out["fp32_full_share"] = np.where(is_fp32, full, 0.0)
    else:
        out["fp32_full_share"] = 0.0
    out = pd.concat([out, spec.drop(columns="tf32_peak_tflops")], axis=1)
    out["precision"] = precision.array  # keep the dtype: no per-row string conversion
    out["gpu_type"] = runs["gpu_type"].array
    return out


class RunFeaturizer(TransformerMixin, BaseEstimator):
    """Transform run records (a DataFrame) into a numeric design matrix.

    Parameters
    ----------
    kind : {"log", "seed", "physics", "roofline", "ops", "baseline", "layout"}, default="log"
        Feature set (see module docstring).

    Attributes
    ----------
    feature_names_out_ : ndarray of str
        Names of the columns produced, in order.
    hardware_features_ : bool
        Whether device peaks are features (the history spans several device types with known peaks).
    precisions_ : list of str
        Precisions seen in training.
    """

    def __init__(self, *, kind: str = "log"):
        self.kind = kind

    def _rates(self, X: pd.DataFrame, q: pd.DataFrame):
        """Per row: whether it ran on CPU, the device count, and the peak FLOP/s (at the run's precision),
        memory bandwidth and interconnect in bytes/s of one device. CPU rows use the nominal per-thread figures;
        a device whose datasheet gives no interconnect figure (e.g. TPU v4) a nominal link, so that its
        communication term stays defined (its efficiencies absorb the difference)."""
        cpu = (q["gpu_type"] == "cpu").to_numpy()
        n = q["gpu_count"].to_numpy(dtype=float)
        threads = self._threads(X, n)
        peak = q["peak_tflops"].to_numpy(dtype=float) * 1e12
        peak = np.where(cpu, threads * CPU_THREAD_NOMINAL_FLOPS, peak)
        mem = np.where(cpu, CPU_NOMINAL_MEMORY_GBPS, q["memory_bandwidth_gbps"].to_numpy(dtype=float)) * 1e9
        link = np.where(cpu, CPU_NOMINAL_INTERCONNECT_GBPS, q["interconnect_gbps"].to_numpy(dtype=float)) * 1e9
        link = np.where(np.isfinite(link) & (link > 0), link, UNKNOWN_INTERCONNECT_GBPS * 1e9)
        return cpu, n, peak, mem, link

    def _physics_columns(self, X: pd.DataFrame, q: pd.DataFrame) -> pd.DataFrame:
        cpu, n, peak, mem, link = self._rates(X, q)
        work = q["flops_per_step_device"].to_numpy(dtype=float)
        fam_code = (_codes(X["family"], self.families_) if "family" in X.columns
                    else _codes(np.full(len(X), "", dtype=object), self.families_))  # -1: unknown
        model_code = _codes(X["model"], self.model_names_) if "model" in X.columns else np.full(len(X), -1.0)
        return pd.DataFrame({
            "t_compute_s": work / peak,
            "work_gflop": work / 1e9,
            "t_opt_s": q["params"].to_numpy(dtype=float) * ADAMW_BYTES_PER_PARAM / mem,
            "t_comm_s": q["allreduce_bytes"].to_numpy(dtype=float) / link,
            "data_parallel": (n > 1).astype(float),
            "family_code": fam_code,
            "model_code": model_code,
            "batch_size": q["batch_size"].to_numpy(dtype=float),
            "gpu_count": n,
        }, index=X.index)

    def _roofline_columns(self, X: pd.DataFrame, q: pd.DataFrame) -> pd.DataFrame:
        cpu, n, peak, mem, link = self._rates(X, q)
        work = q["flops_per_step_device"].to_numpy(dtype=float)
        t_peak = work / peak
        # fp32-labelled runs on devices with TF32 tensor cores: PyTorch runs convolutions (and, before 1.12 or
        # with allow_tf32, matmuls) in TF32, so the effective peak lies between the two; the fit learns how far
        gpu, prec = q["gpu_type"], q["precision"]
        info = per_distinct(gpu, lambda g: _device_info(str(g)))
        # the share of the run's FLOPs decided to run at full fp32 (fp32_basis) keeps the gap, scaled by it
        gap = np.where(np.asarray(prec.astype(str) == "fp32"), [i["tf32_gap"] for i in info], 0.0) \
            * q["fp32_full_share"].to_numpy(dtype=float)
        if "nodes" in X.columns:
            nodes = pd.to_numeric(X["nodes"], errors="coerce").to_numpy(dtype=float)
        else:
            nodes = np.full(len(X), np.nan)
        nodes = np.where(np.isfinite(nodes) & (nodes >= 1), nodes,
                         np.where(cpu, 1.0, np.ceil(n / GPUS_PER_NODE)))
        comm = np.where(n > 1, q["allreduce_bytes"].to_numpy(dtype=float) / link / t_peak, 0.0)
        opt = q["params"].to_numpy(dtype=float) * ADAMW_BYTES_PER_PARAM / mem / t_peak

        codes = _codes
        fam = X["family"] if "family" in X.columns else np.full(len(X), "", dtype=object)
        model = X["model"] if "model" in X.columns else np.full(len(X), "", dtype=object)
        return pd.DataFrame({
            "log_t_peak": np.log(t_peak),
            "ridge": np.log(peak / mem),
            "tf32_gap": gap,
            "log_n": np.log(n),
            "log_nodes": np.log(nodes),
            "log_batch": np.log(q["batch_size"].to_numpy(dtype=float)),
            "comm_rel": np.log1p(comm),
            "opt_rel": np.log1p(opt),
            "log_work": np.log(work),
            "model_code": codes(model, self.model_names_),
            "family_code": codes(fam, self.families_),
            "device_code": codes(_canonical(gpu), self.gpu_types_),
            "arch_code": codes([i["architecture"] for i in info], self.architectures_),
            "vendor_code": codes([i["vendor"] for i in info], self.vendors_),
            "precision_code": codes(prec, self.precisions_),
            "software_code": codes(_software(X), self.software_),
        }, index=X.index)

    def _baseline_columns(self, X: pd.DataFrame, q: pd.DataFrame) -> pd.DataFrame:
        cpu, n, peak, mem, link = self._rates(X, q)
        model = X["model"] if "model" in X.columns else np.full(len(X), "", dtype=object)
        # the bandwidth in 16-bit elements per second: an fp32 run's memory-bound kernels move twice the bytes
        size = q["precision"].astype(str).map(ELEMENT_BYTES).astype(float).fillna(2.0).to_numpy()
        with np.errstate(divide="ignore", invalid="ignore"):
            return pd.DataFrame({
                "log_work": np.log(q["flops_per_step_device"].to_numpy(dtype=float)),
                "log_peak": np.log(peak),
                "log_bw": np.log(mem * 2.0 / size),
                "log_n": np.log(n),
                "log_batch": np.log(q["batch_size"].to_numpy(dtype=float)),
                "model_code": _codes(model, self.model_names_),
                "device_code": _codes(_canonical(q["gpu_type"]), self.gpu_types_),
                "precision_code": _codes(q["precision"], self.precisions_),
                "flops_imputed": q["flops_imputed"].to_numpy(dtype=float),
                "conv_share": known_conv_share(X),
                "attn_share": attention_share(X),
            }, index=X.index)

    @staticmethod
    def _op_frame(X: pd.DataFrame) -> pd.DataFrame:
        cols = _PER_SAMPLE_OPS + _PER_STEP_OPS + ("op_kernels",)
        return pd.DataFrame({c: (pd.to_numeric(X[c], errors="coerce").astype(float) if c in X.columns
                                 else np.full(len(X), np.nan)) for c in cols}, index=X.index)

    def _fit_op_imputation(self, X: pd.DataFrame, q: pd.DataFrame) -> None:
        """Median op mix of the fitted rows that have op columns (for rows without them; module docstring)."""
        ops = self._op_frame(X)
        have = ops.notna().all(axis=1).to_numpy()
        fps = q["flops_per_sample"].to_numpy(dtype=float)
        params = q["params"].to_numpy(dtype=float)
        self.op_rows_fitted_ = int(have.sum())
        if have.any():
            self.op_ratio_ = {c: float(np.median(ops[c].to_numpy()[have] / fps[have])) for c in _PER_SAMPLE_OPS}
            self.op_ratio_.update({c: float(np.median(ops[c].to_numpy()[have] / params[have])) for c in _PER_STEP_OPS})
            self.op_ratio_["op_kernels"] = float(np.median(ops["op_kernels"].to_numpy()[have]))
        else:
            self.op_ratio_ = {c: 0.0 for c in _PER_SAMPLE_OPS}
            self.op_ratio_["op_matmul_flops"] = 1.0
            self.op_ratio_["op_step_bytes"] = OPS_FALLBACK_STEP_BYTES_PER_PARAM
            self.op_ratio_["op_optimizer_bytes"] = OPS_FALLBACK_OPT_BYTES_PER_PARAM
            self.op_ratio_["op_kernels"] = 0.0

    def _ops_columns(self, X: pd.DataFrame, q: pd.DataFrame) -> pd.DataFrame:
        cpu, n, peak, mem, link = self._rates(X, q)
        ops = self._op_frame(X)
        imputed = ~ops.notna().all(axis=1).to_numpy()
        fps = q["flops_per_sample"].to_numpy(dtype=float)
        params = q["params"].to_numpy(dtype=float)
        for c in _PER_SAMPLE_OPS:
            ops[c] = np.where(imputed, self.op_ratio_[c] * fps, ops[c].to_numpy())
        for c in _PER_STEP_OPS:
            ops[c] = np.where(imputed, self.op_ratio_[c] * params, ops[c].to_numpy())
        ops["op_kernels"] = np.where(imputed, self.op_ratio_["op_kernels"], ops["op_kernels"].to_numpy())
        # samples per device per optimizer step (micro-batches x batch); per-micro-batch quantities x accum
        samples = q["flops_per_step_device"].to_numpy(dtype=float) / np.where(fps > 0, fps, 1.0)
        accum = samples / np.maximum(q["batch_size"].to_numpy(dtype=float), 1.0)
        fam = X["family"] if "family" in X.columns else np.full(len(X), "", dtype=object)
        model = X["model"] if "model" in X.columns else np.full(len(X), "", dtype=object)
        cols = {
            "family_code": _codes(fam, self.families_),
            "model_code": _codes(model, self.model_names_),
            "batch_size": q["batch_size"].to_numpy(dtype=float),
            "gpu_count": n,
            "data_parallel": (n > 1).astype(float),
            "t_comm_s": q["allreduce_bytes"].to_numpy(dtype=float) / link,
            "t_step_bytes_s": accum * ops["op_step_bytes"].to_numpy() / mem,
            "t_opt_bytes_s": ops["op_optimizer_bytes"].to_numpy() / mem,
            "kernels": accum * ops["op_kernels"].to_numpy(),
            "op_imputed": imputed.astype(float),
            "work_gflop": q["flops_per_step_device"].to_numpy(dtype=float) / 1e9,
        }
        for c in OP_TRACED_CLASSES:
            cols[f"t_flops_{c}_s"] = samples * ops[f"op_{c}_flops"].to_numpy() / peak
        for c in OP_TRACED_CLASSES:
            cols[f"t_bytes_{c}_s"] = samples * ops[f"op_{c}_bytes"].to_numpy() / mem
        return pd.DataFrame(cols, index=X.index)

    def _threads(self, X: pd.DataFrame, n: np.ndarray) -> np.ndarray:
        """Threads per worker: the record's own, else what the training runs used at that device count (a
        history without thread counts: the host's nominal total shared by the run's workers)."""
        own = (pd.to_numeric(X["threads_per_worker"], errors="coerce").to_numpy(dtype=float)
               if "threads_per_worker" in X.columns else np.full(len(X), np.nan))
        uniq, inv = np.unique(n, return_inverse=True)
        if getattr(self, "threads_shared_", False):
            # no thread counts in the history: a CPU run's workers share one host, whose capacity does not grow
            # with them, so each worker has 1/n of it (the nominal total is absorbed by the fitted efficiencies;
            # a query's own thread count would be on another scale, so it is not used)
            return np.array([self.total_threads_ / c for c in uniq])[np.ravel(inv)]
        per = np.array([self.threads_by_count_.get(int(c), max(1.0, self.total_threads_ / c)) for c in uniq])
        default = per[np.ravel(inv)]
        return np.where(np.isfinite(own) & (own > 0), own, default)

    def _all_columns(self, q: pd.DataFrame) -> pd.DataFrame:
        if self.kind == "seed":
            return q[["params", "batch_size", "gpu_count"]].astype(float)
        cols = {
            "log_flops_per_step": np.log(q["flops_per_step_device"]),
            "log_params": np.log(q["params"]),
            "log_batch_size": np.log(q["batch_size"]),
            "log_gpu_count": np.log(q["gpu_count"]),
            "data_parallel": (q["gpu_count"] > 1).astype(float),
            "log_allreduce_mb": np.log1p(q["allreduce_bytes"] / 1e6),
        }
        for p in PRECISIONS[1:]:  # indicators against fp32
            cols[f"precision_{p}"] = (q["precision"] == p).astype(float)
        cols["log_peak_tflops"] = np.log(q["peak_tflops"])
        cols["log_memory_bandwidth"] = np.log(q["memory_bandwidth_gbps"])
        return pd.DataFrame(cols, index=q.index)

    def fit(self, X: pd.DataFrame, y=None):
        """Learn what the feature set needs from the training runs (devices, precisions, codes, kept columns).

        Parameters
        ----------
        X : pandas.DataFrame
            Training runs.
        y : None
            Ignored (scikit-learn's transformer interface).

        Returns
        -------
        RunFeaturizer
            ``self``, fitted.

        Raises
        ------
        ValueError
            For an unknown ``kind``.
        TypeError
            If ``X`` is not a DataFrame.
        """
        if self.kind not in FEATURE_SETS:
            raise ValueError(f"The 'kind' parameter of RunFeaturizer must be one of {FEATURE_SETS}. Got {self.kind!r}.")
        if not isinstance(X, pd.DataFrame):
            raise TypeError(f"RunFeaturizer expects a DataFrame of runs. Got {type(X).__name__}.")
        if self.kind == "layout":  # the physical parts of a transformer's step (perfmodel.layout_features)
            self.gpu_types_ = sorted(map(str, pd.unique(_canonical(X["gpu_type"]))))
            prec = X["precision"] if "precision" in X.columns else pd.Series("fp32", index=X.index)
            self.precisions_ = sorted(map(str, pd.unique(prec.astype(str))))
            self.hardware_features_ = True  # a device enters through its datasheet figures
            self.feature_names_out_ = np.array(LAYOUT_FEATURES, dtype=object)
            self.n_features_in_ = X.shape[1]
            return self
        q = run_quantities(X)
        self.gpu_types_ = sorted(map(str, pd.unique(_canonical(q["gpu_type"]))))
        self.precisions_ = sorted(map(str, pd.unique(q["precision"])))
        if self.kind in ("physics", "roofline", "ops", "baseline"):
            fam = X["family"].astype("string").dropna() if "family" in X.columns else pd.Series([], dtype="string")
            self.families_ = sorted(str(f) for f in pd.unique(fam) if f)
            self.model_names_ = sorted(map(str, pd.unique(X["model"])))
            thr = (pd.to_numeric(X["threads_per_worker"], errors="coerce").astype(float)
                   if "threads_per_worker" in X.columns
                   else pd.Series(np.nan, index=X.index))
            counts = q["gpu_count"].astype(int)
            self.threads_by_count_ = {int(k): float(v) for k, v in thr.groupby(counts.to_numpy()).median().dropna().items()}
            total = (thr * counts).median()
            # a history without thread counts: the workers of a CPU run are taken to share one host's cores
            self.threads_shared_ = not bool(np.isfinite(total))
            self.total_threads_ = float(total) if np.isfinite(total) else float(max(counts.max(), 1))
            # peaks enter through t_compute_s; they carry timings to another device only when the history
            # itself spans several device types with datasheet peaks
            gpu_rows = q["gpu_type"] != "cpu"
            self.hardware_features_ = bool(q.loc[gpu_rows, "gpu_type"].nunique() > 1
                                           and np.isfinite(q.loc[gpu_rows, "peak_tflops"]).all())
            self.feature_names_out_ = np.array(["t_compute_s", "work_gflop", "t_opt_s", "t_comm_s",
                                                "data_parallel", "family_code", "model_code", "batch_size",
                                                "gpu_count"], dtype=object)
            if self.kind == "baseline":
                self.feature_names_out_ = np.array(BASELINE_COLUMNS, dtype=object)
            if self.kind == "ops":
                self._fit_op_imputation(X, q)
                self.feature_names_out_ = np.array(OPS_COLUMNS, dtype=object)
            if self.kind == "roofline":
                info = [_device_info(g) for g in self.gpu_types_]
                self.architectures_ = sorted({i["architecture"] for i in info})
                self.vendors_ = sorted({i["vendor"] for i in info})
                self.software_ = sorted(str(v) for v in pd.unique(_software(X)) if v)
                self.feature_names_out_ = np.array(ROOFLINE_COLUMNS, dtype=object)
            self.n_features_in_ = X.shape[1]
            return self
        full = self._all_columns(q)
        hw = ["log_peak_tflops", "log_memory_bandwidth"]
        # devices with the same datasheet figures (B200 and B300, GB200 and GB300) are one point of the hardware
        # columns: what identifies their coefficients is the number of distinct figures, not of names
        n_points = len({_spec_point(g) for g in self.gpu_types_})
        self.hardware_features_ = bool(
            self.kind == "log" and n_points > 1 and np.isfinite(full[hw].to_numpy()).all()
        )
        keep = []
        for name in full.columns:
            if name in hw and not self.hardware_features_:
                continue
            # With k distinct devices, at most k - 1 hardware columns are identifiable beside the intercept.
            if name == "log_memory_bandwidth" and n_points < 3:
                continue
            col = full[name].to_numpy(dtype=float)
            if self.kind == "log" and (not np.isfinite(col).all() or np.ptp(col) == 0):
                continue
            keep.append(name)
        if self.kind == "log":
            keep = self._independent(full, keep)
        self.feature_names_out_ = np.array(keep, dtype=object)
        self.n_features_in_ = X.shape[1]
        return self

    @staticmethod
    def _independent(full: pd.DataFrame, names: list[str]) -> list[str]:
        """Greedily keep columns that add rank beside the intercept (e.g. with devices 1 and 2 only,
        ``data_parallel`` is ``log_gpu_count / log 2`` and is dropped): a column whose part not explained by the
        columns kept before it is below :data:`COLLINEAR_TOL` of its spread is dropped. Such a column is a
        combination of the others but for rounding (two datasheets' fp8/bf16 ratios of 2.0001 and 2), and its
        coefficient would be set by that rounding: thousands, which a new device turns into e^400."""
        if len(full) > 50_000:  # the rank of a random sample is the rank of the data, almost surely
            full = full.sample(50_000, random_state=0)
        kept = np.ones((len(full), 1))
        out = []
        for name in names:
            col = full[name].to_numpy(dtype=float)
            trial = np.column_stack([kept, col])
            scaled = trial / np.maximum(np.abs(trial).max(axis=0), 1e-300)
            if np.linalg.matrix_rank(scaled, tol=1e-8 * max(scaled.shape)) < trial.shape[1]:
                continue  # no rank of its own (a column that varies by float noise only, or an exact combination)
            coef = np.linalg.lstsq(kept, col, rcond=None)[0]
            if np.linalg.norm(col - kept @ coef) > COLLINEAR_TOL * np.linalg.norm(col - col.mean()):
                kept = trial
                out.append(name)
        return out

    def transform(self, X: pd.DataFrame) -> np.ndarray:
        """The design matrix of some runs.

        Parameters
        ----------
        X : pandas.DataFrame
            Runs or query rows, with the columns the training runs had.

        Returns
        -------
        numpy.ndarray of float, shape (len(X), len(feature_names_out_))
            One column per :meth:`get_feature_names_out` name.
        """
        check_is_fitted(self, "feature_names_out_")
        if self.kind == "layout":
            return layout_components(X).to_numpy(dtype=float)
        if self.kind == "physics":
            return self._physics_columns(X, run_quantities(X)).to_numpy(dtype=float)
        if self.kind == "roofline":
            return self._roofline_columns(X, run_quantities(X)).to_numpy(dtype=float)
        if self.kind == "ops":
            return self._ops_columns(X, run_quantities(X)).to_numpy(dtype=float)
        if self.kind == "baseline":  # the fitted columns (a model saved before attn_share existed has 10)
            return self._baseline_columns(X, run_quantities(X))[list(self.feature_names_out_)].to_numpy(dtype=float)
        full = self._all_columns(run_quantities(X))
        return full[list(self.feature_names_out_)].to_numpy(dtype=float)

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """The names of the columns :meth:`transform` produces.

        Parameters
        ----------
        input_features : None
            Ignored (scikit-learn's interface: the names do not depend on the input's).

        Returns
        -------
        numpy.ndarray of str
            A copy of ``feature_names_out_``.
        """
        check_is_fitted(self, "feature_names_out_")
        return self.feature_names_out_.copy()
