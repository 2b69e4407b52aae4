"""Remaining and total time of a running job, updated with each observed step."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .._format import to_plain
from .._validation import check_confidence, check_nonnegative_float, check_positive_float, check_positive_int

__all__ = ["OnlineEstimator", "OnlineEstimate", "DEFAULT_STEP_NOISE", "DEFAULT_DRIFT"]

#: Prior log-sd of one step around the run's level (the median step-time CV of the bundled CPU runs, 0.089).
DEFAULT_STEP_NOISE = 0.09
#: Log-sd of a run's level drifting over the run (level shifts, contention); chosen so that the benchmark's
#: 90% intervals cover 85-95% at every number of steps seen (benchmarks/online_remaining.py: grid over drift and
#: drift_steps on the bundled CPU history's 126 runs with >= 20 steps; was 0.09 on its first 41 runs). For
#: steadier machines (a dedicated GPU node) pass a smaller one: benchmarks/online_mlperf.py.
DEFAULT_DRIFT = 0.075
#: Limits of the parameters (a value outside them is refused with a ValueError): log-sds (``step_noise``,
#: ``drift``) at most 3 (a factor e³ ≈ 20 per standard deviation), a step from 10⁻⁹ s to 10⁷ s, at most 10¹²
#: steps.
MAX_LOG_SD = 3.0
MIN_STEP_SECONDS = 1e-9
MAX_STEP_SECONDS = 1e7
MAX_STEPS = 10**12


def _check_step(value, name: str, where: str) -> float:
    value = check_positive_float(value, name, where, maximum=MAX_STEP_SECONDS)
    if value < MIN_STEP_SECONDS:
        raise ValueError(f"The {name!r} parameter of {where} must be a step time of at least {MIN_STEP_SECONDS:g} s. "
                         f"Got {value!r} instead.")
    return value
#: Steps over which the drift builds up: the remaining steps' mean level moves by drift² · m / (m + drift_steps).
DEFAULT_DRIFT_STEPS = 40.0


@dataclass(frozen=True)
class OnlineEstimate:
    """Remaining and total time of a running job after ``steps_done`` steps, with its interval (seconds).

    Dict-style access (``est["total"]``) works as well as attributes.

    Attributes
    ----------
    steps_done : int
        Steps observed (warm-up steps included).
    elapsed : float
        Their total time.
    remaining, remaining_lower, remaining_upper : float
        Time left for the remaining steps, and its interval at ``confidence`` (0 when no step is left).
    total, total_lower, total_upper : float
        ``elapsed`` plus the remaining time and its bounds.
    confidence : float
        The level of the intervals.
    changepoint : int or None
        Index (0-based, warm-up steps counted) of the first step after a detected change of level, whose steps
        alone then inform the level; None when no change was detected.
    """

    steps_done: int
    elapsed: float
    remaining: float
    remaining_lower: float
    remaining_upper: float
    total: float
    total_lower: float
    total_upper: float
    confidence: float
    changepoint: int | None = None

    def __getitem__(self, key: str):
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def keys(self):
        """The field names, for dict-style use (``dict(est)``, ``est["total"]``).

        Returns
        -------
        KeysView of str
            ``steps_done``, ``elapsed``, ``remaining``... in field order.
        """
        return self.__dataclass_fields__.keys()

    def to_dict(self) -> dict:
        """The fields in plain JSON types.

        Returns
        -------
        dict
            One entry per field.
        """
        return to_plain(self)


class OnlineEstimator:
    """Remaining and total time of a running job, updated with each observed step; drift- and changepoint-aware.

    Model, on the log scale: step ``i`` takes ``log t_i = μ + d_i + ε_i`` — the job's level ``μ``, a slow drift
    ``d`` of the level over the run (contention, thermal, data) with log-sd ``drift``, and per-step noise ``ε``
    with log-sd ``s``.

    * ``μ`` starts from the fitted model's prediction (log-normal prior: centre at the predicted step time,
      spread from its interval). The mean of the steps seen is an observation of ``μ`` with variance
      ``s²/k_eff + drift²``: k autocorrelated steps count as ``k_eff = k(1 − r)/(1 + r)`` independent ones, and
      however many steps are seen, the level they show may still drift by ``drift``.
    * ``s²`` is a scaled-inverse-χ² combination of a prior (``step_noise``, 4 pseudo-steps) and the sample
      variance of the steps seen.
    * Changepoints: once 8 steps are seen, the split that best separates an earlier and a later level is tested
      (two-sample t on the logs, |t| > 4); if the level changed, only the steps after the change inform ``μ``.
    * The remaining time is ``m · exp(μ + s²/2)`` with ``m = N − k`` steps left; its interval on the log scale
      has variance ``Var(μ) + s²/m + drift² · m/(m + drift_steps)`` (the level drifts less over a short rest).

    Use it directly (``update(step_seconds)``, ``estimate()``), or as a recorder callback:
    ``rec.add_callback(estimator.callback)``.

    Parameters
    ----------
    prior_step_seconds : float
        The predicted step time (seconds): the centre of the prior on the level.
    prior_lower, prior_upper : float
        The predicted step time's interval at ``prior_confidence``: its width sets the prior's spread. Needs
        ``0 < prior_lower <= prior_step_seconds <= prior_upper``; every step time is between
        :data:`MIN_STEP_SECONDS` and :data:`MAX_STEP_SECONDS`.
    total_steps : int
        Steps the job will run in all (at most :data:`MAX_STEPS`).
    confidence : float, default=0.9
        Level of the intervals of the estimates.
    prior_confidence : float, default=0.9
        Level of ``[prior_lower, prior_upper]``, in [1e-6, 1) (a level near 0 says nothing about the width).
    warmup_steps : int, default=0
        Steps observed first that count in ``elapsed`` but do not inform the level (compilation, caches).
    step_noise : float, default=DEFAULT_STEP_NOISE
        Prior log-sd of one step around the level (worth 4 pseudo-steps), at most :data:`MAX_LOG_SD`.
    drift : float, default=DEFAULT_DRIFT
        Log-sd of the level's drift over the run; 0 for none. At most :data:`MAX_LOG_SD`.
    drift_steps : float, default=DEFAULT_DRIFT_STEPS
        Steps over which the drift builds up: over ``m`` remaining steps the level moves by
        ``drift² · m / (m + drift_steps)`` (as a variance).

    Raises
    ------
    ValueError
        For a value outside these limits, or prior bounds out of order.
    """

    def __init__(self, prior_step_seconds: float, prior_lower: float, prior_upper: float, total_steps: int, *,
                 confidence: float = 0.9, prior_confidence: float = 0.9, warmup_steps: int = 0,
                 step_noise: float = DEFAULT_STEP_NOISE, drift: float = DEFAULT_DRIFT,
                 drift_steps: float = DEFAULT_DRIFT_STEPS):
        where = "OnlineEstimator"
        self.total_steps = check_positive_int(total_steps, "total_steps", where, maximum=MAX_STEPS)
        self.confidence = check_confidence(confidence, where)
        prior_confidence = check_confidence(prior_confidence, where)
        prior_step_seconds = _check_step(prior_step_seconds, "prior_step_seconds", where)
        prior_lower = _check_step(prior_lower, "prior_lower", where)
        prior_upper = _check_step(prior_upper, "prior_upper", where)
        if not (0 < prior_lower <= prior_step_seconds <= prior_upper):
            raise ValueError("OnlineEstimator needs 0 < prior_lower <= prior_step_seconds <= prior_upper. "
                             f"Got {prior_lower!r}, {prior_step_seconds!r}, {prior_upper!r}.")
        self.step_noise = check_positive_float(step_noise, "step_noise", where, maximum=MAX_LOG_SD)
        self.drift = check_nonnegative_float(drift, "drift", where, maximum=MAX_LOG_SD)
        self.drift_steps = check_positive_float(drift_steps, "drift_steps", where, maximum=float(MAX_STEPS))
        if not prior_confidence >= 1e-6:  # (1 + 1e-308) / 2 is 0.5: no width can be read from the prior interval
            raise ValueError(f"The 'prior_confidence' parameter of {where} must be at least 1e-6 (the prior interval "
                             f"at that level gives the prior's width). Got {prior_confidence!r} instead.")
        z = NormalDist().inv_cdf((1 + prior_confidence) / 2)
        self.mu0 = math.log(prior_step_seconds)
        self.tau0 = max((math.log(prior_upper) - math.log(prior_lower)) / (2 * z), 1e-6)
        self.warmup_steps = check_positive_int(warmup_steps + 1, "warmup_steps", "OnlineEstimator") - 1
        self._z = NormalDist().inv_cdf((1 + self.confidence) / 2)
        self.times: list[float] = []

    @classmethod
    def from_prediction(cls, prediction, **kwargs) -> OnlineEstimator:
        """An estimator whose prior is a prediction.

        Parameters
        ----------
        prediction : TrainingTimePrediction
            Its ``step_seconds``, ``step_lower``, ``step_upper`` and ``steps`` give the prior and the total
            steps; its ``confidence`` is the default ``confidence`` and ``prior_confidence``.
        **kwargs
            Other parameters of :class:`OnlineEstimator` (``warmup_steps``, ``drift``...).

        Returns
        -------
        OnlineEstimator
            The estimator, with no step observed yet.
        """
        kwargs.setdefault("confidence", prediction.confidence)
        kwargs.setdefault("prior_confidence", prediction.confidence)
        return cls(prediction.step_seconds, prediction.step_lower, prediction.step_upper, prediction.steps, **kwargs)

    def update(self, step_seconds: float) -> None:
        """Record one observed optimizer step.

        Parameters
        ----------
        step_seconds : float
            Its duration in seconds, from :data:`MIN_STEP_SECONDS` to :data:`MAX_STEP_SECONDS` (ValueError
            otherwise).
        """
        step_seconds = _check_step(step_seconds, "step_seconds", "OnlineEstimator.update")
        self.times.append(step_seconds)

    def callback(self, recorder) -> None:
        """Record the recorder's last step: for :meth:`perfmodel.measure.recorder.Recorder.add_callback`.

        Parameters
        ----------
        recorder : Recorder
            The recorder that just timed a step (its ``times[-1]``).
        """
        self.update(recorder.times[-1])

    @staticmethod
    def _changepoint(logs: np.ndarray) -> int | None:
        k = len(logs)
        if k < 8:
            return None
        best, where = 0.0, None
        for c in range(3, k - 2):  # at least 3 steps on each side
            a, b = logs[:c], logs[c:]
            se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
            t = abs(a.mean() - b.mean()) / max(se, 1e-12)
            if t > best:
                best, where = t, c
        return where if best > 4.0 else None

    def estimate(self) -> OnlineEstimate:
        """The estimate from the steps observed so far (the prior alone before any).

        Returns
        -------
        OnlineEstimate
            Steps done, elapsed, remaining and total time with intervals (seconds).

        Raises
        ------
        ValueError
            If the upper bound of the remaining time is beyond the float range (step times or a prior that
            spread over many orders of magnitude).
        """
        seen = np.asarray(self.times[self.warmup_steps:], dtype=float)
        elapsed = float(sum(self.times))
        logs = np.log(seen) if len(seen) else np.array([])
        cp = self._changepoint(logs)
        if cp is not None:
            logs = logs[cp:]
        k = len(logs)
        nu0 = 4.0
        s2_obs = float(np.var(logs, ddof=1)) if k >= 2 else 0.0
        s2 = (nu0 * self.step_noise**2 + max(k - 1, 0) * s2_obs) / (nu0 + max(k - 1, 0))
        k_eff = float(k)
        if k >= 5:
            d = logs - logs.mean()
            r = float(np.dot(d[1:], d[:-1]) / max(np.dot(d, d), 1e-300))
            k_eff = k * (1 - min(max(r, 0.0), 0.95)) / (1 + min(max(r, 0.0), 0.95))
        prior_var = self.tau0**2 + (self.drift**2 if cp is not None else 0.0)
        if k:
            obs_var = s2 / k_eff + self.drift**2
            post_var = 1 / (1 / prior_var + 1 / obs_var)
            mu = post_var * (self.mu0 / prior_var + float(logs.mean()) / obs_var)
        else:
            post_var, mu = prior_var, self.mu0
        left = max(self.total_steps - len(self.times), 0)
        # the level drifts over the remaining steps: their mean moves by up to drift², less when few remain
        future_drift2 = self.drift**2 * left / (left + self.drift_steps)
        sd = math.sqrt(post_var + s2 / max(left, 1) + future_drift2)
        # in log space: exp(mu + s2/2) is the mean of a log-normal step around exp(mu)
        if left:
            log_mid = math.log(left) + mu + s2 / 2
            if log_mid + self._z * sd > 700:
                raise ValueError(
                    f"OnlineEstimator: the upper bound of the remaining time is beyond the numeric range (e^"
                    f"{log_mid + self._z * sd:.0f} s): the step times seen spread over many orders of magnitude or "
                    "the prior interval is far too wide. Check the prior and the step times (seconds).")
            rem, lo, hi = (math.exp(log_mid), math.exp(log_mid - self._z * sd), math.exp(log_mid + self._z * sd))
        else:
            rem = lo = hi = 0.0
        return OnlineEstimate(steps_done=len(self.times), elapsed=elapsed, remaining=rem, remaining_lower=lo,
                              remaining_upper=hi, total=elapsed + rem, total_lower=elapsed + lo,
                              total_upper=elapsed + hi, confidence=self.confidence,
                              changepoint=None if cp is None else cp + self.warmup_steps)

    def __call__(self) -> OnlineEstimate:
        return self.estimate()
