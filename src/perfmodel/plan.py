"""Planning with predictions: cost, choice of hardware, scaling efficiency, utilisation diagnostics, cluster
queueing and online remaining-time estimates. Every figure carries the prediction's interval through.

The bundled price table (``data/prices.csv``) holds indicative on-demand list prices per device-hour with the
provider, the date and the source of each row; spot prices there are typical discounts, not quotes. Prices change
often: pass your own table (``prices=`` a DataFrame or a CSV path with the same columns) for real decisions.
"""

from __future__ import annotations

import heapq
import math
import numbers
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from ._validation import check_confidence, check_positive_float, check_positive_int
from .exceptions import ExtrapolationWarning
from .hardware import get_spec, resolve_gpu_type

__all__ = ["load_prices", "price_per_hour", "estimate_cost", "CostEstimate", "recommend", "scaling",
           "scaling_from_model", "diagnose", "Diagnosis", "Finding", "erlang_c", "QueueResult", "simulate_queue",
           "SimulationResult", "OnlineEstimator", "DEFAULT_EFFICIENCY_THRESHOLD"]

#: The seeds' rule of thumb: 8 devices should give at least 7x.
DEFAULT_EFFICIENCY_THRESHOLD = 7 / 8
_PRICE_COLUMNS = ("gpu_type", "provider", "on_demand_usd_per_hour", "spot_usd_per_hour")


# ------------------------------------------------------------------------------------------------ prices
def load_prices(prices=None) -> pd.DataFrame:
    """The price table: None (bundled), a CSV or YAML path (a list of rows) or a DataFrame with columns ``gpu_type, provider,
    on_demand_usd_per_hour`` and optionally ``spot_usd_per_hour``. Device names are resolved; negative or
    non-numeric prices raise ValueError."""
    if prices is None:
        from .datasets import bundled_runs_path

        prices = bundled_runs_path("prices.csv")
    if isinstance(prices, pd.DataFrame):
        df = prices.copy()
    elif str(prices).lower().endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:  # pragma: no cover - PyYAML is optional
            raise ImportError("Reading a YAML price table needs PyYAML (pip install pyyaml); or use CSV.") from None
        with open(prices, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
        rows = data.get("prices", data) if isinstance(data, dict) else data
        if not isinstance(rows, list):
            raise ValueError(f"The YAML price table {str(prices)!r} must be a list of rows (or {{prices: [...]}}).")
        df = pd.DataFrame(rows)
    else:
        df = pd.read_csv(prices)
    missing = [c for c in _PRICE_COLUMNS[:3] if c not in df.columns]
    if missing:
        raise ValueError(f"The price table is missing column(s) {missing}; needs {', '.join(_PRICE_COLUMNS)}.")
    if "spot_usd_per_hour" not in df.columns:
        df["spot_usd_per_hour"] = np.nan
    for col in ("on_demand_usd_per_hour", "spot_usd_per_hour"):
        vals = pd.to_numeric(df[col], errors="coerce")
        bad = (vals.isna() & df[col].notna()) | (vals < 0)
        if col == "on_demand_usd_per_hour":
            bad |= vals.isna()
        if bad.any():
            raise ValueError(f"The price table's {col!r} must be a non-negative number; rows "
                             f"{', '.join(map(str, np.flatnonzero(bad.to_numpy())[:5]))} are not "
                             f"(e.g. {df[col][bad].iloc[0]!r}).")
        df[col] = vals.astype(float)
    df["gpu_type"] = [resolve_gpu_type(str(g)) for g in df["gpu_type"]]
    df["provider"] = df["provider"].astype(str)
    return df


def price_per_hour(gpu_type: str, *, provider: str | None = None, spot: bool = False, prices=None) -> float:
    """Dollars per device-hour (per worker-hour for ``cpu``); the cheapest provider unless ``provider`` is given.

    Raises ValueError naming the device (and the ones that have prices) when the table has no price for it.
    """
    table = load_prices(prices)
    g = resolve_gpu_type(gpu_type)
    rows = table[table["gpu_type"] == g]
    if provider is not None:
        rows = rows[rows["provider"] == provider]
    col = "spot_usd_per_hour" if spot else "on_demand_usd_per_hour"
    rows = rows[rows[col].notna()]
    if rows.empty:
        have = sorted(set(table.loc[table[col].notna(), "gpu_type"]))
        where = f" from provider {provider!r}" if provider else ""
        raise ValueError(f"No {'spot' if spot else 'on-demand'} price for {g!r}{where} in the price table; it has "
                         f"prices for: {', '.join(have)}. Pass prices= with your own table.")
    return float(rows[col].min())


@dataclass
class CostEstimate:
    """Dollars for one job, with the interval carried from the time prediction."""

    dollars: float
    lower: float
    upper: float
    hours: float
    usd_per_device_hour: float
    devices: int
    spot: bool
    overhead_fraction: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        kind = "spot" if self.spot else "on-demand"
        return (f"${self.dollars:,.2f} ({kind}; interval ${self.lower:,.2f} – ${self.upper:,.2f}; "
                f"{self.devices} x ${self.usd_per_device_hour:.3g}/h)")


def _spot_factor(*, checkpoint_interval_s: float, checkpoint_cost_s: float, restart_s: float,
                 interruptions_per_hour: float) -> float:
    """Expected wall-clock multiplier of a spot job: checkpoint writes, plus for each interruption the restart
    and on average half a checkpoint interval of lost work; interruptions arrive at a constant rate over the
    (longer) effective time, so ``T_eff = T·(1 + c/I) / (1 − λ·(R + I/2))``."""
    loss_per_interrupt_h = (restart_s + checkpoint_interval_s / 2) / 3600
    denom = 1 - interruptions_per_hour * loss_per_interrupt_h
    if denom <= 0:
        raise ValueError("With this interruption rate the job loses more time to restarts than it runs: lower "
                         "interruptions_per_hour or checkpoint_interval_s.")
    return (1 + checkpoint_cost_s / checkpoint_interval_s) / denom


def estimate_cost(prediction=None, *, seconds=None, lower=None, upper=None, gpu_type=None, gpu_count=None,
                  provider=None, prices=None, spot=False, checkpoint_interval_s=1800.0, checkpoint_cost_s=30.0,
                  restart_s=300.0, interruptions_per_hour=0.05) -> CostEstimate:
    """Dollars for a job: devices × hours × price, with the time interval carried through.

    Parameters
    ----------
    prediction : TrainingTimePrediction, optional
        From :func:`perfmodel.predict_training_time` (gives seconds, interval, device type and count); or pass
        ``seconds`` (and optionally ``lower``/``upper``), ``gpu_type`` and ``gpu_count``.
    provider : str, optional
        Price from this provider; default the cheapest in the table.
    prices : DataFrame or path, optional
        Your own price table (see :func:`load_prices`).
    spot : bool, default=False
        Spot pricing, with the interruption overhead below added to the time.
    checkpoint_interval_s : float, default=1800
        Seconds between checkpoints (spot only).
    checkpoint_cost_s : float, default=30
        Seconds to write one checkpoint.
    restart_s : float, default=300
        Seconds to get a new instance and resume after an interruption.
    interruptions_per_hour : float, default=0.05
        Spot interruption rate (AWS reports most instance types under 5% interruptions per month; 0.05/h is a
        deliberately cautious default).
    """
    if prediction is not None:
        seconds, lower, upper = prediction.seconds, prediction.lower, prediction.upper
        gpu_type = gpu_type or prediction.query.get("gpu_type")
        gpu_count = gpu_count or prediction.query.get("gpu_count")
    seconds = check_positive_float(seconds, "seconds", "estimate_cost")
    lower = seconds if lower is None else float(lower)
    upper = seconds if upper is None else float(upper)
    if not (0 <= lower <= seconds <= upper) or not np.isfinite(upper):
        raise ValueError(f"estimate_cost needs 0 <= lower <= seconds <= upper (finite). Got lower={lower!r}, "
                         f"seconds={seconds!r}, upper={upper!r}.")
    if gpu_type is None:
        raise ValueError("estimate_cost needs gpu_type (or a prediction that carries it).")
    gpu_count = check_positive_int(1 if gpu_count is None else int(gpu_count), "gpu_count", "estimate_cost")
    for name, val in (("checkpoint_interval_s", checkpoint_interval_s), ("checkpoint_cost_s", checkpoint_cost_s),
                      ("restart_s", restart_s)):
        check_positive_float(val, name, "estimate_cost")
    if not isinstance(interruptions_per_hour, numbers.Real) or interruptions_per_hour < 0:
        raise ValueError(f"The 'interruptions_per_hour' parameter of estimate_cost must be >= 0. "
                         f"Got {interruptions_per_hour!r} instead.")
    rate = price_per_hour(gpu_type, provider=provider, spot=spot, prices=prices)
    factor = _spot_factor(checkpoint_interval_s=checkpoint_interval_s, checkpoint_cost_s=checkpoint_cost_s,
                          restart_s=restart_s, interruptions_per_hour=interruptions_per_hour) if spot else 1.0
    per_s = rate * gpu_count / 3600 * factor
    return CostEstimate(dollars=seconds * per_s, lower=lower * per_s, upper=upper * per_s,
                        hours=seconds * factor / 3600, usd_per_device_hour=rate, devices=gpu_count, spot=spot,
                        overhead_fraction=factor - 1)


# ------------------------------------------------------------------------------------------------ recommend
def recommend(model, *, batch_size, steps=None, epochs=None, dataset_size=None, gpu_types=("cpu",),
              gpu_counts=(1, 2, 4, 8), history=None, deadline=None, budget=None, confidence=0.9, precision=None,
              provider=None, prices=None, spot=False, method="auto") -> pd.DataFrame:
    """Rank configurations (device type × count) by cost, with predicted time, interval and cost interval.

    ``meets_deadline`` uses the interval's upper bound (the job finishes by ``deadline`` seconds with probability
    at least about ``(1 + confidence) / 2``), not the point; ``within_budget`` uses the cost's upper bound.
    Configurations that cannot be predicted (a device the history has no runs on) or priced are left out with
    a warning that names them. Rows are sorted: feasible first (deadline and budget met), then by cost.

    Returns
    -------
    DataFrame
        ``gpu_type, gpu_count, seconds, lower, upper, cost, cost_lower, cost_upper, useful_pflop_per_dollar,
        meets_deadline, within_budget, inside_domain``.
    """
    from .predict import predict_training_time, resolve_history

    confidence = check_confidence(confidence, "recommend")
    if deadline is not None:
        check_positive_float(deadline, "deadline", "recommend")
    if budget is not None:
        check_positive_float(budget, "budget", "recommend")
    if isinstance(gpu_types, str) or isinstance(gpu_counts, (int, np.integer)):
        raise TypeError("recommend takes lists: gpu_types=[...], gpu_counts=[...].")
    types = [resolve_gpu_type(g) for g in gpu_types]
    if history is None:
        history = "cpu" if set(types) <= {"cpu"} else ("gpu" if "cpu" not in types else ["cpu", "gpu"])
    query = pd.DataFrame([{"model": model if isinstance(model, str) else "", "gpu_type": g, "gpu_count": n,
                           "batch_size": batch_size} for g in types for n in gpu_counts])
    fitted = resolve_history(history, method, query=query)
    prices = load_prices(prices)  # read and check once, not once per configuration
    rows, skipped = [], []
    for g in gpu_types:
        for n in gpu_counts:
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", ExtrapolationWarning)
                    r = predict_training_time(model, batch_size=batch_size, gpu_count=n, gpu_type=g, steps=steps,
                                              epochs=epochs, dataset_size=dataset_size, precision=precision,
                                              history=fitted, confidence=confidence)
                cost = estimate_cost(r, provider=provider, prices=prices, spot=spot)
            except ValueError as exc:
                if "gpu_type" in str(exc) or "price" in str(exc) or "precision" in str(exc):
                    skipped.append(f"{g} x{n}: {exc}")
                    continue
                raise
            fps = r.query.get("flops_per_sample")
            useful = (fps or 6 * r.query["params"]) * batch_size * n * r.steps
            rows.append({
                "gpu_type": r.query["gpu_type"], "gpu_count": n, "seconds": r.seconds, "lower": r.lower,
                "upper": r.upper, "cost": cost.dollars, "cost_lower": cost.lower, "cost_upper": cost.upper,
                "useful_pflop_per_dollar": useful / 1e15 / cost.dollars if cost.dollars > 0 else np.inf,
                "meets_deadline": True if deadline is None else bool(r.upper <= deadline),
                "within_budget": True if budget is None else bool(cost.upper <= budget),
                "inside_domain": r.inside_domain,
            })
    if skipped:
        warnings.warn("recommend left out: " + "; ".join(skipped), ExtrapolationWarning, stacklevel=2)
    cols = ["gpu_type", "gpu_count", "seconds", "lower", "upper", "cost", "cost_lower", "cost_upper",
            "useful_pflop_per_dollar", "meets_deadline", "within_budget", "inside_domain"]
    out = pd.DataFrame(rows, columns=cols)
    if len(out):
        out["_feasible"] = out["meets_deadline"] & out["within_budget"]
        out = out.sort_values(["_feasible", "cost", "seconds"], ascending=[False, True, True]).drop(columns="_feasible")
    return out.reset_index(drop=True)


# -------------------------------------------------------------------------------------------------- scaling
def scaling(runs, *, mode: str = "weak", threshold: float = DEFAULT_EFFICIENCY_THRESHOLD) -> pd.DataFrame:
    """Speedup and parallel efficiency vs device count from measured runs.

    ``mode="weak"``: fixed per-device batch; speedup = throughput(n) / throughput(1).
    ``mode="strong"``: fixed global batch B; compares 1 device at batch B with n devices at B/n per device;
    speedup = step_time(1, B) / step_time(n, B/n).
    Efficiency = speedup / n; ``below_threshold`` flags efficiency under ``threshold`` (default 7/8).
    Repeats are averaged (mean step time) first.
    """
    from .io import load_runs

    if mode not in ("weak", "strong"):
        raise ValueError(f"The 'mode' parameter of scaling must be 'weak' or 'strong'. Got {mode!r} instead.")
    runs = load_runs(runs)
    keys = ["model", "gpu_type", "precision"]
    mean = runs.groupby(keys + ["batch_size", "gpu_count"], as_index=False)["step_time_s"].mean()
    rows = []
    for key, g in mean.groupby(keys):
        t = {(int(b), int(n)): s for b, n, s in zip(g["batch_size"], g["gpu_count"], g["step_time_s"])}
        for (b, n), s in t.items():
            if n == 1:
                continue
            if mode == "weak":
                base = t.get((b, 1))
                speed = None if base is None else (b * n / s) / (b / base)
                gb = b * n
            else:
                base = t.get((b * n, 1))
                speed = None if base is None else base / s
                gb = b * n
            if speed is None:
                continue
            rows.append({**dict(zip(keys, key)), "gpu_count": n, "batch_size": b, "global_batch": gb,
                         "speedup": speed, "efficiency": speed / n, "below_threshold": speed / n < threshold})
    return pd.DataFrame(rows, columns=keys + ["gpu_count", "batch_size", "global_batch", "speedup", "efficiency",
                                              "below_threshold"])


def scaling_from_model(model, *, batch_size, gpu_type, gpu_counts=(1, 2, 4, 8), mode="weak", history=None,
                       threshold=DEFAULT_EFFICIENCY_THRESHOLD, precision=None) -> pd.DataFrame:
    """Predicted speedup and efficiency vs device count (with the interval of the step time), and, for the
    physics method, the communication share of each step."""
    from .predict import predict_many, resolve_history

    if history is None:
        history = "cpu" if resolve_gpu_type(gpu_type) == "cpu" else "gpu"
    fitted = resolve_history(history, "auto", query=pd.DataFrame({
        "model": [model if isinstance(model, str) else ""], "gpu_type": [resolve_gpu_type(gpu_type)],
        "gpu_count": [max(gpu_counts)], "batch_size": [batch_size]}))
    counts = [check_positive_int(n, "gpu_counts", "scaling_from_model") for n in gpu_counts]
    if 1 not in counts:
        counts = [1] + counts
    if mode not in ("weak", "strong"):
        raise ValueError(f"The 'mode' parameter of scaling_from_model must be 'weak' or 'strong'. Got {mode!r}.")
    per_device = [batch_size if mode == "weak" else max(1, batch_size // n) for n in counts]
    from .predict import _resolve_model

    spec = _resolve_model(model, None, fitted)
    g = resolve_gpu_type(gpu_type)
    if precision is None:
        from .predict import _default_precision

        precision = _default_precision(fitted.precision_by_device_, g)[0]
    q = pd.DataFrame({"model": spec["model"], "params": spec["params"], "flops_per_sample": spec["flops_per_sample"],
                      "batch_size": per_device, "gpu_count": counts, "gpu_type": g,
                      "precision": precision, "steps": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExtrapolationWarning)
        pred = predict_many(q, history=fitted)
    t = pred["step_time_s"].to_numpy()
    base = t[counts.index(1)]
    gb = np.array(per_device) * np.array(counts)
    if mode == "weak":
        speed = (gb / t) / (per_device[counts.index(1)] / base)
    else:
        speed = base / t
    out = pd.DataFrame({"gpu_count": counts, "batch_size": per_device, "global_batch": gb, "step_time_s": t,
                        "step_lower": pred["step_lower"].to_numpy(), "step_upper": pred["step_upper"].to_numpy(),
                        "speedup": speed, "efficiency": speed / np.array(counts)})
    out["below_threshold"] = out["efficiency"] < threshold
    reg = fitted.pipeline_.named_steps["regressor"]
    if hasattr(reg, "decompose"):
        parts = reg.decompose(fitted.pipeline_.named_steps["features"].transform(q))
        out["comm_share"] = parts["communication_s"].to_numpy() / t
    out["outside_domain"] = pred["outside_domain"].to_numpy()
    return out


# ---------------------------------------------------------------------------------------------- diagnose
@dataclass(frozen=True)
class Finding:
    rule: str
    threshold: str
    evidence: str


@dataclass
class Diagnosis:
    """Utilisation diagnostics of one run (or each run of a history): MFU, telemetry and findings."""

    table: pd.DataFrame
    findings: list = field(default_factory=list)

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
    """
    from .features import run_quantities
    from .io import load_runs

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


# ------------------------------------------------------------------------------------------------- queueing
@dataclass(frozen=True)
class QueueResult:
    """M/M/c steady state: probability of waiting, mean wait, mean response (wait + service), utilisation."""

    p_wait: float
    mean_wait: float
    mean_response: float
    utilisation: float


def erlang_c(arrival_rate: float, service_time: float, servers: int) -> QueueResult:
    """The M/M/c queue (Erlang C) for a cluster of ``servers`` GPU slots.

    Parameters
    ----------
    arrival_rate : float
        Jobs per unit time (e.g. per hour).
    service_time : float
        Mean job duration in the same unit (e.g. the predicted hours).
    servers : int
        Slots (jobs that can run at once).

    Examples
    --------
    >>> r = erlang_c(arrival_rate=2.0, service_time=1.0, servers=3)
    >>> round(r.p_wait, 4), round(r.mean_wait, 4)
    (0.4444, 0.4444)
    """
    arrival_rate = check_positive_float(arrival_rate, "arrival_rate", "erlang_c")
    service_time = check_positive_float(service_time, "service_time", "erlang_c")
    c = check_positive_int(servers, "servers", "erlang_c")
    a = arrival_rate * service_time  # offered load (Erlangs)
    rho = a / c
    if rho >= 1:
        raise ValueError(f"erlang_c: utilisation arrival_rate * service_time / servers = {rho:.3g} >= 1; the queue "
                         "grows without bound. Add servers or lower the load.")
    # numerically stable: sum a^k/k! via running terms
    term, total = 1.0, 1.0
    for k in range(1, c):
        term *= a / k
        total += term
    last = term * a / c  # a^c / c!
    top = last / (1 - rho)
    p_wait = top / (total + top)
    mean_wait = p_wait * service_time / (c - a)
    return QueueResult(p_wait, mean_wait, mean_wait + service_time, rho)


@dataclass(frozen=True)
class SimulationResult:
    policy: str
    jobs: int
    mean_wait: float
    mean_completion: float
    utilisation: float
    stderr_wait: float


def simulate_queue(arrival_rate=None, service_time=None, servers=1, *, policy="fcfs", jobs=None, n_jobs=20000,
                   seed=0, warmup_fraction=0.1) -> SimulationResult:
    """Discrete-event simulation of a GPU cluster: FCFS or shortest-job-first (non-preemptive).

    Either exponential arrivals and services (``arrival_rate``, mean ``service_time``, ``n_jobs`` jobs), or a
    list/DataFrame of ``jobs`` with ``arrival``, ``duration`` (e.g. predicted) and optionally ``size`` (GPUs a
    job needs at once; ``servers`` is then the cluster's GPU count). FCFS starts jobs strictly in arrival order;
    SJF starts, whenever capacity frees, the shortest waiting job that fits. ``mean_completion`` is the mean time
    from arrival to finish. The first ``warmup_fraction`` of jobs is left out of the averages; ``stderr_wait``
    is a batch-means standard error of the mean wait.
    """
    if policy not in ("fcfs", "sjf"):
        raise ValueError(f"The 'policy' parameter of simulate_queue must be 'fcfs' or 'sjf'. Got {policy!r}.")
    servers = check_positive_int(servers, "servers", "simulate_queue")
    if jobs is None:
        arrival_rate = check_positive_float(arrival_rate, "arrival_rate", "simulate_queue")
        service_time = check_positive_float(service_time, "service_time", "simulate_queue")
        n_jobs = check_positive_int(n_jobs, "n_jobs", "simulate_queue")
        rng = np.random.default_rng(seed)
        arrivals = np.cumsum(rng.exponential(1 / arrival_rate, n_jobs))
        durations = rng.exponential(service_time, n_jobs)
        sizes = np.ones(n_jobs, dtype=int)
    else:
        df = pd.DataFrame(jobs) if not isinstance(jobs, pd.DataFrame) else jobs
        if not {"arrival", "duration"} <= set(df.columns):
            raise ValueError("simulate_queue: jobs need 'arrival' and 'duration' (and optionally 'size').")
        df = df.sort_values("arrival", kind="stable")
        arrivals = df["arrival"].to_numpy(dtype=float)
        durations = df["duration"].to_numpy(dtype=float)
        sizes = df["size"].to_numpy(dtype=int) if "size" in df.columns else np.ones(len(df), dtype=int)
        if not (np.isfinite(durations).all() and np.isfinite(arrivals).all()) or (durations <= 0).any() \
                or (arrivals < 0).any():
            raise ValueError("simulate_queue: job durations must be finite and positive, arrivals finite and "
                             "non-negative.")
        if (sizes < 1).any() or (sizes > servers).any():
            raise ValueError(f"simulate_queue: job sizes must be between 1 and servers={servers}.")
    n = len(arrivals)
    start = np.empty(n)
    free = servers
    running: list[tuple[float, int]] = []  # (finish time, size)
    waiting: list = []  # SJF: heap of (duration, index)
    fcfs_queue: list[int] = []  # FCFS: arrival order, consumed from ``head``
    head = 0
    i = 0
    now = 0.0
    busy_area = 0.0
    while i < n or running or (head < len(fcfs_queue) if policy == "fcfs" else waiting):
        next_arrival = arrivals[i] if i < n else math.inf
        next_finish = running[0][0] if running else math.inf
        t = min(next_arrival, next_finish)
        busy_area += (servers - free) * (t - now)
        now = t
        if next_finish <= next_arrival:
            _, size = heapq.heappop(running)
            free += size
        else:
            if policy == "fcfs":
                fcfs_queue.append(i)
            else:
                heapq.heappush(waiting, (durations[i], i))
            i += 1
        # start what can start
        if policy == "fcfs":
            while head < len(fcfs_queue) and sizes[fcfs_queue[head]] <= free:
                j = fcfs_queue[head]
                head += 1
                start[j] = now
                free -= sizes[j]
                heapq.heappush(running, (now + durations[j], sizes[j]))
        else:
            skipped = []
            while waiting and free > 0:
                d, j = heapq.heappop(waiting)
                if sizes[j] <= free:
                    start[j] = now
                    free -= sizes[j]
                    heapq.heappush(running, (now + durations[j], sizes[j]))
                else:
                    skipped.append((d, j))
            for item in skipped:
                heapq.heappush(waiting, item)
    wait = start - arrivals
    done = start + durations - arrivals
    k0 = int(n * warmup_fraction)
    w = wait[k0:]
    batches = np.array_split(w, 20) if len(w) >= 20 else [w]
    se = float(np.std([b.mean() for b in batches], ddof=1) / math.sqrt(len(batches))) if len(batches) > 1 else math.nan
    return SimulationResult(policy, n, float(w.mean()), float(done[k0:].mean()),
                            float(busy_area / (servers * now)) if now > 0 else 0.0, se)


# ------------------------------------------------------------------------------------------ online estimate
class OnlineEstimator:
    """Remaining and total time of a running job, updated with each observed step (conjugate normal update).

    The prior is the fitted model's prediction for the job's mean step time (log-normal: centre at the
    prediction, spread from its interval). Each observed step time updates the posterior of the job's log mean
    step level ``μ`` (known-variance normal-normal update; the per-step variance ``s²`` is estimated from the steps
    seen, and k autocorrelated steps count as ``k(1 − r)/(1 + r)`` independent ones). The remaining time is
    ``(N − k) · exp(μ + s²/2)``; its interval adds to the posterior variance of ``μ`` the noise of the remaining
    steps and the drift of the step level over the run (variance of block means): it narrows as steps
    accumulate, but not below what the run's own drift allows.

    Use it directly (``update(step_seconds)``, ``estimate()``), or as a recorder callback:
    ``rec.add_callback(estimator.callback)``.
    """

    def __init__(self, prior_step_seconds: float, prior_lower: float, prior_upper: float, total_steps: int, *,
                 confidence: float = 0.9, prior_confidence: float = 0.9, warmup_steps: int = 0):
        from statistics import NormalDist

        self.total_steps = check_positive_int(total_steps, "total_steps", "OnlineEstimator")
        self.confidence = check_confidence(confidence, "OnlineEstimator")
        check_positive_float(prior_step_seconds, "prior_step_seconds", "OnlineEstimator")
        if not (0 < prior_lower <= prior_step_seconds <= prior_upper):
            raise ValueError("OnlineEstimator needs 0 < prior_lower <= prior_step_seconds <= prior_upper.")
        z = NormalDist().inv_cdf((1 + prior_confidence) / 2)
        self.mu0 = math.log(prior_step_seconds)
        self.tau0 = max((math.log(prior_upper) - math.log(prior_lower)) / (2 * z), 1e-6)
        self.warmup_steps = warmup_steps
        self._z = NormalDist().inv_cdf((1 + self.confidence) / 2)
        self.times: list[float] = []

    @classmethod
    def from_prediction(cls, prediction, **kwargs) -> "OnlineEstimator":
        """From a :class:`~perfmodel.predict.TrainingTimePrediction` (its step time and interval, and steps)."""
        kwargs.setdefault("confidence", prediction.confidence)
        kwargs.setdefault("prior_confidence", prediction.confidence)
        return cls(prediction.step_seconds, prediction.step_lower, prediction.step_upper, prediction.steps, **kwargs)

    def update(self, step_seconds: float) -> None:
        check_positive_float(step_seconds, "step_seconds", "OnlineEstimator.update")
        self.times.append(float(step_seconds))

    def callback(self, recorder) -> None:
        """For :meth:`perfmodel.measure.recorder.Recorder.add_callback`: reads the recorder's last step."""
        self.update(recorder.times[-1])

    def estimate(self) -> dict:
        """``{"steps_done", "elapsed", "remaining", "remaining_lower", "remaining_upper", "total", "total_lower",
        "total_upper"}`` in seconds."""
        seen = self.times[self.warmup_steps:]
        elapsed = float(sum(self.times))
        k = len(seen)
        logs = np.log(seen) if k else np.array([])
        s2 = float(np.var(logs, ddof=1)) if k >= 3 else self.tau0**2
        s2 = max(s2, 1e-8)
        # step times are autocorrelated (drift, contention): k correlated steps carry the information of fewer
        # independent ones, k_eff = k (1 - r) / (1 + r) with r the lag-1 autocorrelation of the log times
        k_eff = float(k)
        if k >= 5:
            d = logs - logs.mean()
            r = float(np.dot(d[1:], d[:-1]) / max(np.dot(d, d), 1e-300))
            r = min(max(r, 0.0), 0.95)
            k_eff = k * (1 - r) / (1 + r)
        prec = 1 / self.tau0**2 + k_eff / s2
        mu = (self.mu0 / self.tau0**2 + (logs.mean() * k_eff if k else 0.0) / s2) / prec
        left = max(self.total_steps - len(self.times), 0)
        # predictive spread of the remaining steps' mean: uncertainty of mu, their own noise, and drift of the
        # step level over the run (variance of block means beyond what per-step noise explains; one step's
        # variance until 8 steps give blocks to measure it)
        drift2 = 0.0
        if 3 <= k < 8:
            drift2 = s2
        elif k >= 8:
            m = max(2, int(math.sqrt(k)))
            blocks = [logs[i:i + m].mean() for i in range(0, k - m + 1, m)]
            drift2 = max(float(np.var(blocks, ddof=1)) - s2 / m, 0.0) if len(blocks) > 1 else s2
        sd = math.sqrt(1 / prec + (s2 / max(left, 1) + drift2 if k >= 3 else 0.0))
        level = math.exp(s2 / 2) if k >= 3 else 1.0  # mean of a log-normal step around exp(mu)
        rem = left * math.exp(mu) * level
        lo = left * math.exp(mu - self._z * sd) * level
        hi = left * math.exp(mu + self._z * sd) * level
        return {"steps_done": len(self.times), "elapsed": elapsed, "remaining": rem, "remaining_lower": lo,
                "remaining_upper": hi, "total": elapsed + rem, "total_lower": elapsed + lo, "total_upper": elapsed + hi}

    def __call__(self) -> dict:
        return self.estimate()
