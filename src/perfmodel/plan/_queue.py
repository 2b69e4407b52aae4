"""Cluster queueing: the M/M/c (Erlang C) formulas and a discrete-event simulation (FCFS / shortest-job-first)."""

from __future__ import annotations

import heapq
import math
import numbers
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

from .._format import to_plain
from .._validation import check_positive_float, check_positive_int

#: The most servers :func:`erlang_c` and :func:`simulate_queue` take, and the most jobs a simulation runs
#: (a Python event loop: about a million jobs a few seconds); larger values are refused with a message.
MAX_SERVERS = 10**9
MAX_JOBS = 10**7

__all__ = ["erlang_c", "QueueResult", "simulate_queue", "SimulationResult"]


@dataclass(frozen=True)
class QueueResult:
    """M/M/c steady state (what :func:`erlang_c` returns), times in the unit of its inputs.

    Attributes
    ----------
    p_wait : float
        Probability that an arriving job waits (Erlang C).
    mean_wait : float
        Mean time a job waits before it starts.
    mean_response : float
        Mean wait plus the mean service time.
    utilisation : float
        Offered load per server, ``arrival_rate * service_time / servers`` (below 1).
    """

    p_wait: float
    mean_wait: float
    mean_response: float
    utilisation: float

    def to_dict(self) -> dict:
        """The fields in plain JSON types.

        Returns
        -------
        dict
            ``{"p_wait", "mean_wait", "mean_response", "utilisation"}``.
        """
        return to_plain(self)


def erlang_c(arrival_rate: float, service_time: float, servers: int) -> QueueResult:
    """The M/M/c queue (Erlang C) for a cluster of ``servers`` GPU slots.

    Parameters
    ----------
    arrival_rate : float
        Jobs per unit time (e.g. per hour).
    service_time : float
        Mean job duration in the same unit (e.g. the predicted hours).
    servers : int
        Slots (jobs that can run at once), at most :data:`MAX_SERVERS`.

    Returns
    -------
    QueueResult
        Probability of waiting, mean wait, mean response and utilisation.

    Raises
    ------
    ValueError
        If the utilisation ``arrival_rate * service_time / servers`` is 1 or more (the queue grows without
        bound), or the inputs are beyond the formula's numeric range.

    Notes
    -----
    Computed in log space (Erlang B through the incomplete gamma function), so it holds for any number of
    servers without a loop over them.

    Examples
    --------
    >>> r = erlang_c(arrival_rate=2.0, service_time=1.0, servers=3)
    >>> round(r.p_wait, 4), round(r.mean_wait, 4)
    (0.4444, 0.4444)
    """
    arrival_rate = check_positive_float(arrival_rate, "arrival_rate", "erlang_c")
    service_time = check_positive_float(service_time, "service_time", "erlang_c")
    c = check_positive_int(servers, "servers", "erlang_c", maximum=MAX_SERVERS)
    a = arrival_rate * service_time  # offered load (Erlangs)
    rho = a / c
    if not math.isfinite(a) or rho >= 1:
        raise ValueError(f"erlang_c: utilisation arrival_rate * service_time / servers = {rho:.3g} >= 1; the queue "
                         "grows without bound. Add servers or lower the load.")
    if a == 0.0:  # an offered load below the float range: nobody waits
        return QueueResult(0.0, 0.0, service_time, 0.0)
    # In log space, without a loop over the servers: the Erlang B probability
    # B = (a^c / c!) / sum_{k<=c} a^k / k!, where sum_{k<=c} a^k / k! = e^a Q(c + 1, a) (Q: the regularised upper
    # incomplete gamma function); then C = B / (1 - rho (1 - B)).
    log_b = c * math.log(a) - math.lgamma(c + 1) - a - math.log(float(special.gammaincc(c + 1, a)))
    b = math.exp(min(log_b, 0.0))
    p_wait = b / (1 - rho * (1 - b))
    mean_wait = p_wait * service_time / (c - a)
    out = QueueResult(p_wait, mean_wait, mean_wait + service_time, rho)
    if not all(math.isfinite(v) for v in (p_wait, mean_wait, mean_wait + service_time)):
        raise ValueError(f"erlang_c: arrival_rate={arrival_rate!r}, service_time={service_time!r}, servers={c} "
                         "are beyond the numeric range of the formula.")
    return out


@dataclass(frozen=True)
class SimulationResult:
    """A simulated queue (what :func:`simulate_queue` returns), times in the unit of its inputs.

    Attributes
    ----------
    policy : {"fcfs", "sjf"}
        The scheduling policy simulated.
    n_arrivals : int
        Jobs simulated (the warm-up jobs left out of the averages included).
    mean_wait : float
        Mean time from arrival to start.
    mean_response : float
        Mean time from arrival to finish, as in :class:`QueueResult`.
    utilisation : float
        Busy server-time over the servers times the simulated time span.
    stderr_wait : float
        Batch-means standard error of ``mean_wait``; nan (None in :meth:`to_dict`) with fewer than 20 jobs
        averaged.
    """

    policy: str
    n_arrivals: int
    mean_wait: float
    mean_response: float
    utilisation: float
    stderr_wait: float

    def to_dict(self) -> dict:
        """The fields in plain JSON types.

        Returns
        -------
        dict
            One entry per field (an undefined standard error is None).
        """
        return to_plain(self)


def simulate_queue(arrival_rate=None, service_time=None, servers=1, *, policy="fcfs", jobs=None, n_arrivals=20000,
                   seed=0, warmup_fraction: float = 0.1) -> SimulationResult:
    """Discrete-event simulation of a GPU cluster: FCFS or shortest-job-first (non-preemptive).

    Either exponential arrivals and services (``arrival_rate``, mean ``service_time``, ``n_arrivals`` jobs), or a
    list/DataFrame of ``jobs`` with ``arrival``, ``duration`` (e.g. predicted) and optionally ``size`` (GPUs a
    job needs at once; ``servers`` is then the cluster's GPU count). FCFS starts jobs strictly in arrival order;
    SJF starts, whenever capacity frees, the shortest waiting job that fits. ``mean_response`` is the mean time
    from arrival to finish. The first ``warmup_fraction`` of jobs is left out of the averages; ``stderr_wait``
    is a batch-means standard error of the mean wait (None with fewer than 20 jobs averaged).

    Limits: ``n_arrivals`` and the number of ``jobs`` at most :data:`MAX_JOBS` (10⁷), ``servers`` at most
    :data:`MAX_SERVERS`, ``warmup_fraction`` in [0, 1) (at least one job is always averaged); jobs must not be
    empty.

    Parameters
    ----------
    arrival_rate : float, optional
        Jobs per unit time of the exponential arrivals; needed without ``jobs``, ignored with them.
    service_time : float, optional
        Mean of the exponential job durations, same unit; needed without ``jobs``, ignored with them.
    servers : int, default=1
        Slots, or with sized ``jobs`` the cluster's GPU count.
    policy : {"fcfs", "sjf"}, default="fcfs"
        First come first served, or shortest job first (non-preemptive).
    jobs : pandas.DataFrame or list of dict, optional
        Jobs to replay: ``arrival`` (non-negative), ``duration`` (positive) and optionally ``size`` (whole
        GPUs, 1 to ``servers``); sorted by arrival.
    n_arrivals : int, default=20000
        Jobs to draw without ``jobs``.
    seed : int, default=0
        Seed of the drawn arrivals and durations.
    warmup_fraction : float, default=0.1
        Fraction of the first jobs left out of the averages, in [0, 1).

    Returns
    -------
    SimulationResult
        Mean wait, mean response, utilisation and the standard error of the mean wait.

    Raises
    ------
    ValueError
        For a value outside the limits, jobs without ``arrival``/``duration`` or with bad values, or times
        beyond the numeric range.
    """
    if policy not in ("fcfs", "sjf"):
        raise ValueError(f"The 'policy' parameter of simulate_queue must be 'fcfs' or 'sjf'. Got {policy!r}.")
    servers = check_positive_int(servers, "servers", "simulate_queue", maximum=MAX_SERVERS)
    if isinstance(warmup_fraction, bool) or not isinstance(warmup_fraction, numbers.Real) \
            or not 0 <= warmup_fraction < 1:
        raise ValueError(f"The 'warmup_fraction' parameter of simulate_queue must be a number in [0, 1). "
                         f"Got {warmup_fraction!r} instead.")
    if jobs is None:
        arrivals, durations, sizes = _drawn_jobs(arrival_rate, service_time, n_arrivals, seed)
    else:
        arrivals, durations, sizes = _replayed_jobs(jobs, servers)
    # drawn times too: a tiny arrival_rate or a huge service_time draws infinite times (the loop would then
    # pop an empty heap)
    with np.errstate(over="ignore", invalid="ignore"):
        horizon = float(arrivals.max()) + float(durations.sum())
    if not horizon <= 1e300:
        raise ValueError("simulate_queue: the job times are beyond the numeric range (the last arrival plus "
                         "all durations exceed 1e300); give arrivals and durations (or arrival_rate and "
                         "service_time) in a larger unit.")
    start, busy_area, now = _run_events(arrivals, durations, sizes, servers, policy)
    n = len(arrivals)
    wait = start - arrivals
    done = start + durations - arrivals
    k0 = min(int(n * warmup_fraction), n - 1)  # at least one job is averaged
    w = wait[k0:]
    batches = np.array_split(w, 20) if len(w) >= 20 else [w]
    se = float(np.std([b.mean() for b in batches], ddof=1) / math.sqrt(len(batches))) if len(batches) > 1 else math.nan
    with np.errstate(over="ignore", invalid="ignore"):
        result = SimulationResult(policy, n, float(w.mean()), float(done[k0:].mean()),
                                  float(busy_area / (servers * now)) if now > 0 else 0.0, se)
    if not all(math.isfinite(v) for v in (result.mean_wait, result.mean_response, result.utilisation)):
        raise ValueError("simulate_queue: the job times are beyond the numeric range (the mean wait or response "
                         "is not finite); give arrivals and durations in a unit that keeps them below ~1e300.")
    return result


def _drawn_jobs(arrival_rate, service_time, n_arrivals, seed) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(arrivals, durations, sizes)`` of ``n_arrivals`` jobs with exponential arrivals and services."""
    arrival_rate = check_positive_float(arrival_rate, "arrival_rate", "simulate_queue")
    service_time = check_positive_float(service_time, "service_time", "simulate_queue")
    n_arrivals = check_positive_int(n_arrivals, "n_arrivals", "simulate_queue", maximum=MAX_JOBS)
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):  # infinite draws are refused below, with the reason
        arrivals = np.cumsum(rng.exponential(1 / arrival_rate, n_arrivals))
        durations = rng.exponential(service_time, n_arrivals)
    sizes = np.ones(n_arrivals, dtype=int)
    return arrivals, durations, sizes


def _replayed_jobs(jobs, servers: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(arrivals, durations, sizes)`` of the given jobs, checked and sorted by arrival."""
    df = pd.DataFrame(jobs) if not isinstance(jobs, pd.DataFrame) else jobs
    if len(df) == 0:
        raise ValueError("The 'jobs' parameter of simulate_queue is empty: give at least one job (arrival, "
                         "duration), or arrival_rate and service_time instead.")
    if len(df) > MAX_JOBS:
        raise ValueError(f"The 'jobs' parameter of simulate_queue holds {len(df)} jobs; at most {MAX_JOBS} are "
                         "simulated. Simulate a sample.")
    if not {"arrival", "duration"} <= set(df.columns):
        raise ValueError("simulate_queue: jobs need 'arrival' and 'duration' (and optionally 'size').")
    try:
        arrivals = df["arrival"].to_numpy(dtype=float)
        durations = df["duration"].to_numpy(dtype=float)
        size_f = df["size"].to_numpy(dtype=float) if "size" in df.columns else np.ones(len(df))
    except (TypeError, ValueError, OverflowError):
        raise ValueError("simulate_queue: job arrivals, durations and sizes must be numbers.") from None
    order = np.argsort(arrivals, kind="stable")  # sorted as numbers (text in the column cannot be compared)
    arrivals, durations, size_f = arrivals[order], durations[order], size_f[order]
    if not (np.isfinite(size_f).all() and (size_f == np.round(size_f)).all()):
        raise ValueError("simulate_queue: job sizes must be whole numbers of GPUs.")
    sizes = size_f.astype(np.int64) if (np.abs(size_f) < 2**62).all() else np.full(len(df), servers + 1)
    if not (np.isfinite(durations).all() and np.isfinite(arrivals).all()) or (durations <= 0).any() \
            or (arrivals < 0).any():
        raise ValueError("simulate_queue: job durations must be finite and positive, arrivals finite and "
                         "non-negative.")
    if (sizes < 1).any() or (sizes > servers).any():
        raise ValueError(f"simulate_queue: job sizes must be between 1 and servers={servers}.")
    return arrivals, durations, sizes


def _run_events(arrivals: np.ndarray, durations: np.ndarray, sizes: np.ndarray, servers: int,
                policy: str) -> tuple[np.ndarray, float, float]:
    """The event loop: each job's start time, the busy server-time and the time the last job finished."""
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
    return start, busy_area, now
