"""Accuracy metrics — the one place perfmodel computes them (models, evaluate, fitting and benchmarks import
from here).

All take array-likes of positive times and return a Python ``float`` (``nan`` when undefined).

Examples
--------
>>> round(mape([1.0, 2.0], [1.1, 1.8]), 6)
10.0
>>> coverage([1.0, 2.0, 3.0], [0.5, 2.5, 2.0], [1.5, 3.0, 4.0])
0.6666666666666666
"""

from __future__ import annotations

import numpy as np

__all__ = ["r2", "r2_log", "mape", "median_ape", "coverage", "mean_relative_width"]


def r2(y, pred) -> float:
    """Coefficient of determination ``1 − SS_res / SS_tot`` (nan when ``y`` is constant)."""
    y, pred = np.asarray(y, float), np.asarray(pred, float)
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    return 1 - float(np.sum((y - pred) ** 2)) / ss_tot if ss_tot > 0 else float("nan")


def r2_log(y, pred) -> float:
    """R² of log predictions against log observations (predictions clipped at 1e-300 before the log)."""
    return r2(np.log(np.asarray(y, float)), np.log(np.maximum(np.asarray(pred, float), 1e-300)))


def mape(y_true, y_pred) -> float:
    """Mean absolute percentage error, in percent."""
    y_true, y_pred = np.asarray(y_true, float), np.asarray(y_pred, float)
    return float(np.mean(np.abs(y_pred - y_true) / np.abs(y_true)) * 100)


def median_ape(y_true, y_pred) -> float:
    """Median absolute percentage error, in percent."""
    y_true, y_pred = np.asarray(y_true, float), np.asarray(y_pred, float)
    return float(np.median(np.abs(y_pred - y_true) / np.abs(y_true)) * 100)


def coverage(y, lower, upper) -> float:
    """Fraction of ``y`` inside ``[lower, upper]``."""
    y, lower, upper = (np.asarray(a, float) for a in (y, lower, upper))
    return float(np.mean((y >= lower) & (y <= upper)))


def mean_relative_width(pred, lower, upper) -> float:
    """Mean of ``(upper − lower) / pred``: the interval's width relative to the prediction."""
    pred, lower, upper = (np.asarray(a, float) for a in (pred, lower, upper))
    return float(np.mean((upper - lower) / pred))
