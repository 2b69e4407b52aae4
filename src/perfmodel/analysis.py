"""History-level statistics of measured runs: scaling efficiency and utilisation diagnostics.

These read a run history only (no fitted model): they sit beside planning, above io/schema/hardware/features,
and below plotting and reporting (``plot.plot_scaling`` draws :func:`scaling`). ``perfmodel.plan`` re-exports
:func:`scaling` and :func:`diagnose` for convenience.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ._format import to_plain
from ._validation import check_nonnegative_float, check_positive_float
from .features import run_quantities
from .io import load_runs
from .schema import step_global_batch

__all__ = ["scaling", "diagnose", "Diagnosis", "Finding", "DEFAULT_EFFICIENCY_THRESHOLD"]

#: The seeds' rule of thumb: 8 devices should give at least 7x.
DEFAULT_EFFICIENCY_THRESHOLD = 7 / 8


# -------------------------------------------------------------------------------------------------- scaling
def scaling(runs, *, mode: str = "weak", threshold: float = DEFAULT_EFFICIENCY_THRESHOLD) -> pd.DataFrame:
    """Speedup and parallel efficiency vs device count from measured runs.

    ``mode="weak"``: fixed per-device batch; speedup = throughput(n) / throughput(1).
    ``mode="strong"``: fixed global batch B; compares 1 device at batch B with n devices at B/n per device;
    speedup = step_time(1, B) / step_time(n, B/n).
    Efficiency = speedup / n; ``below_threshold`` flags efficiency under ``threshold`` (default 7/8).
    Repeats are averaged (mean step time) first. Only configurations whose 1-device baseline was measured
    (same model, device type and precision) get a row.

    Parameters
    ----------
    runs : path or pandas.DataFrame
        A run history (read and validated with :func:`perfmodel.io.load_runs`).
    mode : {"weak", "strong"}, default="weak"
        Weak scaling (fixed per-device batch) or strong scaling (fixed global batch).
    threshold : float, default=DEFAULT_EFFICIENCY_THRESHOLD
        The efficiency below which ``below_threshold`` is True.

    Returns
    -------
    pandas.DataFrame
        One row per (model, gpu_type, precision, per-device batch, device count > 1): ``model``,
        ``gpu_type``, ``precision``, ``gpu_count``, ``batch_size`` (per device per optimizer step:
        :func:`perfmodel.schema.step_global_batch` over the devices), ``global_batch``,
        ``speedup``, ``efficiency`` and ``below_threshold``.

    Raises
    ------
    ValueError
        For a ``mode`` other than ``weak`` or ``strong``, or a ``threshold`` that is not a finite positive number.
    """
    if mode not in ("weak", "strong"):
        raise ValueError(f"The 'mode' parameter of scaling must be 'weak' or 'strong'. Got {mode!r} instead.")
    threshold = check_positive_float(threshold, "threshold", "scaling")
    runs = load_runs(runs)
    # a device's samples per optimizer step (with gradient accumulation, all its passes): runs that accumulate
    # differently are different batches, not repeats
    runs = runs.assign(batch_size=step_global_batch(runs) / runs["gpu_count"].to_numpy(dtype=float))
    keys = ["model", "gpu_type", "precision"]
    mean = runs.groupby(keys + ["batch_size", "gpu_count"], as_index=False)["step_time_s"].mean()
    rows = []
    for key, g in mean.groupby(keys):
        t = {(_batch_key(b), int(n)): s for b, n, s in zip(g["batch_size"], g["gpu_count"], g["step_time_s"])}
        for (b, n), s in t.items():
            if n == 1:
                continue
            if mode == "weak":
                base = t.get((b, 1))
                speed = None if base is None else (b * n / s) / (b / base)
                gb = b * n
            else:
                base = t.get((_batch_key(b * n), 1))
                speed = None if base is None else base / s
                gb = b * n
            if speed is None:
                continue
            rows.append({**dict(zip(keys, key)), "gpu_count": n, "batch_size": b, "global_batch": gb,
                         "speedup": speed, "efficiency": speed / n, "below_threshold": speed / n < threshold})
    return pd.DataFrame(rows, columns=keys + ["gpu_count", "batch_size", "global_batch", "speedup", "efficiency",
                                              "below_threshold"])



def _batch_key(b) -> float | int:
    """A batch as a comparable key: whole numbers as ints, fractions to 9 significant digits."""
    b = float(f"{float(b):.9g}")
    return int(b) if b.is_integer() else b


# ---------------------------------------------------------------------------------------------- diagnose
@dataclass(frozen=True)
class Finding:
    """One rule that fired: what it says, its threshold, and the runs that triggered it.

    Attributes
    ----------
    rule : str
        What the rule concludes (e.g. "GPU utilisation low: input pipeline or I/O bottleneck likely").
    threshold : str
        The threshold it applied, as text (``utilisation < 60%``).
    evidence : str
        How many runs triggered it, with an example.
    """

    rule: str
    threshold: str
    evidence: str

    def to_dict(self) -> dict:
        """The fields as plain JSON types.

        Returns
        -------
        dict
            ``{"rule", "threshold", "evidence"}``.
        """
        return to_plain(self)


@dataclass
class Diagnosis:
    """Utilisation diagnostics of one run (or each run of a history): MFU, telemetry and findings.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per run: ``run_id``, ``model``, ``gpu_type``, ``gpu_count``, ``batch_size``,
        ``achieved_tflops`` (per device), ``mfu`` (a fraction; NaN without a peak), ``gpu_util_mean_pct`` and
        ``mem_util_mean_pct`` (NaN where not recorded).
    findings : list of Finding
        The rules that fired (empty when none did).
    """

    table: pd.DataFrame
    findings: list = field(default_factory=list)

    def to_dict(self) -> dict:
        """The table and the findings in plain JSON types.

        Returns
        -------
        dict
            ``{"runs": [...per-run rows...], "findings": [{"rule", "threshold", "evidence"}, ...]}`` (NaN
            becomes None).
        """
        return {"runs": to_plain(self.table), "findings": [to_plain(f) for f in self.findings]}

    def __str__(self) -> str:
        lines = [f"{len(self.table)} runs; median MFU "
                 + ("n/a" if self.table["mfu"].isna().all() else f"{self.table['mfu'].median():.1%}")]
        lines += [f"- {f.rule} ({f.threshold}): {f.evidence}" for f in self.findings] or ["- no findings"]
        return "\n".join(lines)


def diagnose(runs, *, host_peak_flops: float | None = None, util_threshold: float = 60.0, gap_threshold: float = 20.0,
             efficiency_threshold: float = DEFAULT_EFFICIENCY_THRESHOLD) -> Diagnosis:
    """MFU and rules of thumb from the design documents, each with its threshold and the evidence.

    * MFU = FLOPs per device-step / step time / dense peak for the run's precision (``host_peak_flops`` split
      over the workers for CPU runs, whose peak the spec table leaves empty).
    * GPU utilisation under ``util_threshold`` (60%) suggests an input/I-O bottleneck.
    * A gap over ``gap_threshold`` (20) points between compute and memory utilisation.
    * Weak-scaling efficiency under ``efficiency_threshold`` (7/8).

    Parameters
    ----------
    runs : path, pandas.DataFrame, pandas.Series or dict
        A run history, or one run (a Series or a dict of its fields); validated with
        :func:`perfmodel.io.load_runs`.
    host_peak_flops : float, optional
        Measured FLOP/s of the whole host, the peak of ``cpu`` runs (split over their workers); without it
        their MFU is NaN.
    util_threshold : float, default=60.0
        Mean GPU utilisation (percent) under which a run counts as input- or I/O-bound.
    gap_threshold : float, default=20.0
        Gap (percentage points) between mean compute and memory utilisation above which a run counts as
        compute- or memory-bound.
    efficiency_threshold : float, default=DEFAULT_EFFICIENCY_THRESHOLD
        Weak-scaling efficiency under which a configuration counts as scaling poorly (see :func:`scaling`).

    Returns
    -------
    Diagnosis
        The per-run table and the findings.

    Raises
    ------
    ValueError
        For a threshold or peak that is not a finite number in its range (the thresholds in percent at most
        100), before the runs are read.
    TypeError
        For a threshold or peak that is not a number.
    """
    host_peak_flops = check_positive_float(host_peak_flops, "host_peak_flops", "diagnose", allow_none=True)
    util_threshold = check_nonnegative_float(util_threshold, "util_threshold", "diagnose", maximum=100.0)
    gap_threshold = check_nonnegative_float(gap_threshold, "gap_threshold", "diagnose", maximum=100.0)
    efficiency_threshold = check_positive_float(efficiency_threshold, "efficiency_threshold", "diagnose")
    if isinstance(runs, pd.Series):
        runs = runs.to_frame().T
    elif isinstance(runs, dict):
        runs = pd.DataFrame([runs])
    runs = load_runs(runs)
    q = run_quantities(runs)
    peak = q["peak_tflops"].to_numpy(dtype=float) * 1e12
    cpu = (q["gpu_type"] == "cpu").to_numpy()
    if host_peak_flops is not None:
        peak = np.where(cpu, host_peak_flops / q["gpu_count"].to_numpy(dtype=float), peak)
    achieved = q["flops_per_step_device"].to_numpy() / runs["step_time_s"].to_numpy(dtype=float)
    table = pd.DataFrame({"run_id": runs["run_id"], "model": runs["model"], "gpu_type": runs["gpu_type"],
                          "gpu_count": runs["gpu_count"], "batch_size": runs["batch_size"],
                          "achieved_tflops": achieved / 1e12, "mfu": achieved / peak})
    for col in ("gpu_util_mean_pct", "mem_util_mean_pct"):
        table[col] = pd.to_numeric(runs[col], errors="coerce") if col in runs.columns else np.nan
    findings = []
    low = table[table["gpu_util_mean_pct"] < util_threshold]
    if len(low):
        findings.append(Finding("GPU utilisation low: input pipeline or I/O bottleneck likely",
                                f"utilisation < {util_threshold:g}%",
                                f"{len(low)} runs, e.g. {low['run_id'].iloc[0]} at {low['gpu_util_mean_pct'].iloc[0]:.0f}%"))
    gap = (table["gpu_util_mean_pct"] - table["mem_util_mean_pct"]).abs()
    big = table[gap > gap_threshold]
    if len(big):
        findings.append(Finding("compute and memory utilisation far apart (compute- or memory-bound)",
                                f"gap > {gap_threshold:g} points",
                                f"{len(big)} runs, e.g. {big['run_id'].iloc[0]}: {gap[big.index[0]]:.0f} points"))
    sc = scaling(runs, mode="weak", threshold=efficiency_threshold)
    bad = sc[sc["below_threshold"]]
    if len(bad):
        worst = bad.loc[bad["efficiency"].idxmin()]
        findings.append(Finding("data-parallel scaling below target", f"efficiency < {efficiency_threshold:.3g}",
                                f"{len(bad)} of {len(sc)} configurations; worst {worst['model']} batch "
                                f"{worst['batch_size']} on {worst['gpu_count']}: {worst['efficiency']:.2f}"))
    return Diagnosis(table, findings)
