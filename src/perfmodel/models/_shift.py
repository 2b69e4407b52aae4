"""How far a caller's own runs sit from a prior's answers: the shift that calibrates a prior to one's own stack.

perfmodel's bundled runs were measured on someone else's stack (MLPerf's tuned submissions; one CPU host). A
user's runs on their own framework and cluster come out slower or faster by a factor that is mostly theirs: the
*stack shift*. :class:`StackShift` estimates it from the log residuals ``r = log(measured / prior answer)`` of the
user's runs, by empirical Bayes in two levels:

* over all their runs, a location (the median residual) shrunk toward no shift:
  ``delta = n / (n + k) * median(r)``, with ``k = within / between``;
* per device type, the median of what is left shrunk toward none the same way, and per model the median of what
  is left after that (a device type or model with no own runs adds nothing).

``between`` is the variance of the shifts between whole public sets and ``within`` the scatter of one set's rows
around its own shift, both measured on the sets of the transfer error book
(``scripts/build_transfer_error_book.py``, the book's ``shift`` entry; they were measured on GPU sets and serve
CPU histories too). The user's own residual scatter (from three runs on) widens ``within`` where it is larger,
never narrows it. So one run moves the answer part of the way, and a few consistent runs move it most of the way.

The interval of a shifted answer is the normal band of what is still unknown, ``z * sqrt(within + posterior
variance of the overall shift)``, the same for every row.
Its record, :meth:`StackShift.record`, is the median of the leave-one-model-out scores ``|r_i - delta_{-model(i)}|``:
how far the shifted prior misses a model the own runs do not have.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from .._validation import check_confidence
from ._books import TRANSFER_BOOK, read_error_book

__all__ = ["StackShift", "shift_scales", "DEFAULT_SHIFT_SCALES"]

#: ``(between, within)`` variances of log time when the transfer book is not installed: the values it held when
#: this default was written (the book rebuilds them).
DEFAULT_SHIFT_SCALES = (0.30, 0.40)


def shift_scales() -> tuple[float, float]:
    """The prior scales of a stack shift: ``(between, within)`` variances of log step time.

    Returns
    -------
    tuple of float
        From the transfer error book's ``shift`` entry (measured on whole public sets), else
        :data:`DEFAULT_SHIFT_SCALES`.
    """
    book = read_error_book(TRANSFER_BOOK)
    entry = (book or {}).get("shift") or {}
    try:
        between, within = float(entry["between_var"]), float(entry["within_var"])
    except (KeyError, TypeError, ValueError):
        return DEFAULT_SHIFT_SCALES
    if not (between > 0 and within > 0 and math.isfinite(between) and math.isfinite(within)):
        return DEFAULT_SHIFT_SCALES
    return between, within


def _robust_var(r: np.ndarray) -> float:
    """Variance from the median absolute deviation (1.4826 MAD, squared); nan for fewer than two values."""
    if len(r) < 2:
        return math.nan
    return float((1.4826 * np.median(np.abs(r - np.median(r)))) ** 2)


def _shrunk(r: np.ndarray, toward: float, k: float) -> float:
    n = len(r)
    if n == 0:
        return toward
    return toward + n / (n + k) * (float(np.median(r)) - toward)


@dataclass(frozen=True)
class StackShift:
    """The shift of a caller's stack from a prior's answers, per device type (see the module docstring).

    Build it with :meth:`fit`; :meth:`offset` and :meth:`half_width` answer rows.

    Attributes
    ----------
    n : int
        Own runs it rests on.
    overall : float
        The shrunk log shift over all of them.
    by_device, by_model : dict
        Per device type and per model of the own runs: its shrunk log effect beyond the overall shift (the model's
        beyond its device's).
    counts, model_counts : dict
        Per device type and per model: its own runs.
    within, between : float
        The scatter of runs around their shift and the variance of shifts between stacks (log time).
    loo_scores : ndarray
        ``|r_i - delta_{-model(i)}|`` for each own run: the shifted prior's leave-one-model-out record.
    """

    n: int
    overall: float
    by_device: dict
    by_model: dict
    counts: dict
    model_counts: dict
    within: float
    between: float
    loo_scores: np.ndarray = field(repr=False)

    @classmethod
    def fit(cls, residuals, devices, models, *, between: float | None = None,
            within: float | None = None) -> StackShift:
        """Estimate the shift from own runs' log residuals.

        Parameters
        ----------
        residuals : array-like of shape (n,)
            ``log(measured / prior answer)`` of each own run (non-finite values are dropped).
        devices, models : array-like of shape (n,)
            Each run's device type and model name.
        between, within : float, optional
            The prior variances (default :func:`shift_scales`).

        Returns
        -------
        StackShift
        """
        r = np.asarray(residuals, dtype=float)
        devices, models = np.asarray(devices).astype(str), np.asarray(models).astype(str)
        if not (len(r) == len(devices) == len(models)):
            raise ValueError("StackShift.fit: residuals, devices and models must have the same length.")
        keep = np.isfinite(r)
        r, devices, models = r[keep], devices[keep], models[keep]
        b0, w0 = shift_scales()
        between = b0 if between is None else float(between)
        within0 = w0 if within is None else float(within)
        n = len(r)
        # the own runs' scatter around their location (devices' differences included: a device of one run has no
        # scatter) may widen the book's, never narrow it: a few runs that happen to agree say little of the next
        own_var = _robust_var(r) if n >= 3 else math.nan
        within = max(within0, own_var) if math.isfinite(own_var) else within0
        k = within / between
        overall, by_device, by_model = cls._locations(r, devices, models, k)
        loo = np.empty(n)
        for m in np.unique(models):  # leave each model out: how well the shifted prior does on a model it never saw
            out = models == m
            o, b, _ = cls._locations(r[~out], devices[~out], models[~out], k)
            loo[out] = np.abs(r[out] - o - np.array([b.get(str(g), 0.0) for g in devices[out]]))
        counts = {str(g): int((devices == g).sum()) for g in np.unique(devices)}
        model_counts = {str(m): int((models == m).sum()) for m in np.unique(models)}
        return cls(n=n, overall=overall, by_device=by_device, by_model=by_model, counts=counts,
                   model_counts=model_counts, within=within, between=between, loo_scores=loo)

    @staticmethod
    def _locations(r: np.ndarray, devices: np.ndarray, models: np.ndarray, k: float) -> tuple[float, dict, dict]:
        """The overall shift, then each device type's effect on what is left, then each model's on what is left
        after both: every level a median shrunk toward none by ``n / (n + k)``."""
        overall = _shrunk(r, 0.0, k)
        left = r - overall
        device_effect = {str(g): _shrunk(left[devices == g], 0.0, k) for g in np.unique(devices)}
        if len(r):
            left = left - np.array([device_effect[str(g)] for g in devices])
        model_effect = {str(m): _shrunk(left[models == m], 0.0, k) for m in np.unique(models)}
        return overall, device_effect, model_effect

    def offset(self, devices, models=None) -> np.ndarray:
        """Per row: the log shift to add to the prior's log answer: the overall shift, plus its device type's and
        its model's effects where the own runs have them.

        Parameters
        ----------
        devices : array-like of str
        models : array-like of str, optional
            The rows' model names (None: no model effect).

        Returns
        -------
        ndarray of float
        """
        devices = np.asarray(devices).astype(str)
        models = np.full(len(devices), None) if models is None else np.asarray(models).astype(str)
        return np.array([self.overall + self.by_device.get(g, 0.0) + self.by_model.get(m, 0.0)
                         for g, m in zip(devices, models)], dtype=float)

    def _posterior_var(self) -> float:
        """The posterior variance of the overall shift (``within`` already holds the scatter of devices and models
        around a stack's shift, so the device and model effects do not narrow the band: no run counts twice)."""
        return 1.0 / (1.0 / self.between + self.n / self.within)

    def half_width(self, devices, confidence: float) -> np.ndarray:
        """Per row: the log half-width of the shifted answer's interval at ``confidence``.

        Parameters
        ----------
        devices : array-like of str
            The rows' device types (one half-width each).
        confidence : float in (0, 1)

        Returns
        -------
        ndarray of float
            ``z * sqrt(within + posterior variance of the overall shift)``, the same for every row.
        """
        z = float(stats.norm.ppf(0.5 + check_confidence(confidence, "StackShift.half_width") / 2))
        return np.full(len(np.asarray(devices)), z * math.sqrt(self.within + self._posterior_var()), dtype=float)

    def record(self) -> float:
        """How far a shifted prior typically misses a model the own runs did not show it.

        Returns
        -------
        float
            The median of :attr:`loo_scores` (nan without runs).
        """
        return float(np.median(self.loo_scores)) if self.n else math.nan

    def describe(self) -> str:
        """What a shifted answer rests on, for its ``interval_rule``.

        Returns
        -------
        str
            The overall shift and the number of own runs.
        """
        return (f"the bundled answer shifted x{math.exp(self.overall):.2f} by {self.n} own run"
                f"{'s' if self.n != 1 else ''} (empirical Bayes, per device type and model)")
