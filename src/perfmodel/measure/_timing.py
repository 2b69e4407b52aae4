"""Step-time statistics and the adaptive stopping rule (plain Python: shared by the worker and the recorder)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

__all__ = ["StepStats", "StopRule", "summarise_steps", "t_quantile_975", "NOISY_STEP_CV", "NOISY_REPEAT_SPREAD",
           "timing_flag", "explain_timing_flag", "config_key", "CONFIG_COLUMNS"]

#: A run whose per-step times have a coefficient of variation above this was likely measured on a busy machine.
#: Steady runs sit far below it: the bundled CPU history's step CV has median 0.053 and 95th percentile 0.17 on a
#: shared 2-core machine; a loop sharing its cores with another job reaches 1 and more.
NOISY_STEP_CV = 0.30
#: A run whose median step time lies more than this (relative, either way) from its earlier repeats' (see
#: :func:`timing_flag`) was likely measured while something else ran: quiet repeats differ by ~7% in the median, and by
#: 2-3x when anything else runs (the bundled CPU history's repeats: median 17%, 90th percentile 47%).
NOISY_REPEAT_SPREAD = 0.50

# Student t 0.975 quantiles for 1..30 degrees of freedom (scipy.stats.t.ppf(0.975, df)); kept here so that the
# worker does not import scipy (over a second of start-up per measured run).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (table, then a 1/df expansion)."""
    if df < 1:
        raise ValueError(f"df must be >= 1. Got {df!r}.")
    if df <= 30:
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass(frozen=True)
class StepStats:
    mean: float
    median: float
    std: float
    cv: float
    ci_rel: float
    n: int

    def to_record(self) -> dict:
        return {
            "step_time_s": self.mean,
            "step_time_median_s": self.median,
            "step_time_std_s": self.std,
            "step_time_cv": self.cv,
            "step_time_ci_rel": self.ci_rel,
            "steps_timed": self.n,
            "timing_flag": timing_flag(self.cv),
        }


def timing_flag(cv: float | None, median: float | None = None, earlier_medians=()) -> str:
    """Why a run's timing says the machine was busy, ``""`` when nothing does: ``"high_step_cv"`` (the per-step
    times' CV above :data:`NOISY_STEP_CV`), ``"repeat_spread"`` (``median`` lies more than
    :data:`NOISY_REPEAT_SPREAD` from the earlier repeat's median step time, or, with two or more earlier repeats,
    from the median of theirs and its own), or both, ``;``-joined."""
    reasons = []
    if cv is not None and math.isfinite(cv) and cv > NOISY_STEP_CV:
        reasons.append("high_step_cv")
    if median is not None and math.isfinite(median) and median > 0:
        others = [m for m in earlier_medians if m is not None and math.isfinite(m) and m > 0]
        if others:
            # against the one earlier repeat, or the median of all of them with this one: one busy repeat does
            # not make every later, steady one look busy
            ref = others[0] if len(others) == 1 else statistics.median(others + [median])
            if max(median / ref, ref / median) - 1 > NOISY_REPEAT_SPREAD:
                reasons.append("repeat_spread")
    return ";".join(reasons)


def explain_timing_flag(flag: str, cv: float | None, median: float | None = None, earlier_medians=()) -> str:
    """One sentence for a :func:`timing_flag`: what was seen, and what to do."""
    seen = []
    if "high_step_cv" in flag:
        seen.append(f"its per-step times vary with CV {cv:.2f} (above {NOISY_STEP_CV:g}; a steady run stays far below)")
    if "repeat_spread" in flag:
        others = ", ".join(f"{m:.4g}" for m in earlier_medians)
        seen.append(f"its median step time {median:.4g} s lies more than {NOISY_REPEAT_SPREAD:.0%} from its earlier "
                    f"repeats' ({others} s)")
    return (" and ".join(seen) + ": the machine was likely busy. The run is recorded with timing_flag="
            f"{flag!r}; measure it again with nothing else running, or drop such rows from the history before fitting.")


#: The record columns that identify one configuration (its repeats share them); the layout columns tell apart
#: layout runs of one model on as many devices (empty, and so equal, in runs without them).
CONFIG_COLUMNS = ("model", "batch_size", "gpu_count", "gpu_type", "precision", "grad_accum", "optimizer", "compiled",
                   "activation_checkpointing", "seq_len", "threads_per_worker", "nodes", "micro_batch_size", "tp", "pp",
                   "sequence_parallel")


def config_key(record) -> tuple:
    """The configuration a record measured, repeat index aside (missing columns and NaN count as empty): runs
    spread over another number of nodes, or (on CPU, where every processor is gpu_type ``cpu``) on another CPU
    model, are not repeats of it. Repeats on other hosts with the same device are (a 2x slower node is worth a
    flag)."""
    def norm(v):
        if v is None or type(v).__name__ == "NAType" or (isinstance(v, float) and math.isnan(v)):
            return ""  # None, NaN, pandas' NA (no pandas import: the worker stays light)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer():
            return str(int(v))  # 32 and 32.0 (a CSV read back) are one batch size
        return str(v)

    # every CPU is gpu_type "cpu": runs on another CPU model are another device, not a repeat
    cpu = norm(record.get("cpu_model")) if norm(record.get("gpu_type")) == "cpu" else ""
    return tuple(norm(record.get(c)) for c in CONFIG_COLUMNS) + (cpu,)


def summarise_steps(times: list[float]) -> StepStats:
    """Mean, median, std, CV and the relative 95% CI half-width (Student t) of per-step times."""
    n = len(times)
    if n == 0:
        raise ValueError("No timed steps to summarise.")
    mean = statistics.fmean(times)
    median = statistics.median(times)
    std = statistics.stdev(times) if n > 1 else 0.0
    ci = t_quantile_975(n - 1) * std / math.sqrt(n) / mean if n > 1 else math.inf
    return StepStats(mean, median, std, std / mean if mean > 0 else math.nan, ci, n)


@dataclass(frozen=True)
class StopRule:
    """When to stop timing.

    With ``steps`` set, exactly that many timed steps. Otherwise stop at the first of: the 95% CI half-width of
    the mean below ``ci_target`` (relative, after ``min_steps``), ``max_steps`` timed steps, or ``max_seconds``
    of timed steps.
    """

    steps: int | None = None
    ci_target: float = 0.02
    min_steps: int = 5
    max_steps: int = 500
    max_seconds: float = 30.0

    def __post_init__(self):
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"steps must be a positive int. Got {self.steps!r}.")
        if not (0 < self.ci_target < 1):
            raise ValueError(f"ci_target must be in (0, 1). Got {self.ci_target!r}.")
        if self.min_steps < 2 or self.max_steps < self.min_steps:
            raise ValueError(f"need 2 <= min_steps <= max_steps. Got {self.min_steps!r}, {self.max_steps!r}.")
        if self.max_seconds <= 0:
            raise ValueError(f"max_seconds must be positive. Got {self.max_seconds!r}.")

    def reason(self, times: list[float]) -> str | None:
        """The stop reason after these times, or None to go on."""
        n = len(times)
        if self.steps is not None:
            return "fixed_steps" if n >= self.steps else None
        if n >= self.min_steps and summarise_steps(times).ci_rel <= self.ci_target:
            return "ci_target"
        if n >= self.max_steps:
            return "max_steps"
        if n >= 2 and sum(times) >= self.max_seconds:
            return "max_seconds"
        return None

    def describe(self) -> str:
        if self.steps is not None:
            return f"fixed {self.steps} timed steps"
        return (f"until 95% CI half-width <= {self.ci_target:.0%} of mean (min {self.min_steps} steps), "
                f"or {self.max_steps} steps, or {self.max_seconds:g} s timed")
