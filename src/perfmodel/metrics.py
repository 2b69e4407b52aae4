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
    """Coefficient of determination ``1 − SS_res / SS_tot``.

    Parameters
    ----------
    y : array-like of float
        Observed values.
    pred : array-like of float, same length as y
        Predicted values.

    Returns
    -------
    float
        The R²; nan when ``y`` is constant (``SS_tot`` is 0).
    """
    y, pred = np.asarray(y, float), np.asarray(pred, float)
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    return 1 - float(np.sum((y - pred) ** 2)) / ss_tot if ss_tot > 0 else float("nan")


def r2_log(y, pred) -> float:
    """R² of log predictions against log observations.

    Parameters
    ----------
    y : array-like of float
        Observed values, positive.
    pred : array-like of float, same length as y
        Predicted values; clipped at 1e-300 before the log, so a non-positive prediction scores as a very
        small one.

    Returns
    -------
    float
        :func:`r2` of ``log(pred)`` against ``log(y)``; nan when ``y`` is constant.
    """
    return r2(np.log(np.asarray(y, float)), np.log(np.maximum(np.asarray(pred, float), 1e-300)))


def mape(y_true, y_pred) -> float:
    """Mean absolute percentage error, in percent.

    Parameters
    ----------
    y_true : array-like of float
        Observed values (the denominators: none may be 0).
    y_pred : array-like of float, same length as y_true
        Predicted values.

    Returns
    -------
    float
        ``100 · mean(|y_pred − y_true| / |y_true|)``.
    """
    y_true, y_pred = np.asarray(y_true, float), np.asarray(y_pred, float)
    return float(np.mean(np.abs(y_pred - y_true) / np.abs(y_true)) * 100)


def median_ape(y_true, y_pred) -> float:
    """Median absolute percentage error, in percent.

    Parameters
    ----------
    y_true : array-like of float
        Observed values (the denominators: none may be 0).
    y_pred : array-like of float, same length as y_true
        Predicted values.

    Returns
    -------
    float
        ``100 · median(|y_pred − y_true| / |y_true|)``.
    """
    y_true, y_pred = np.asarray(y_true, float), np.asarray(y_pred, float)
    return float(np.median(np.abs(y_pred - y_true) / np.abs(y_true)) * 100)


def coverage(y, lower, upper) -> float:
    """Fraction of ``y`` inside ``[lower, upper]`` (both ends included).

    Parameters
    ----------
    y : array-like of float
        Observed values.
    lower, upper : array-like of float, same length as y
        The interval around each observation's prediction.

    Returns
    -------
    float
        The fraction in [0, 1]; nan for empty input.
    """
    y, lower, upper = (np.asarray(a, float) for a in (y, lower, upper))
    return float(np.mean((y >= lower) & (y <= upper)))


def mean_relative_width(pred, lower, upper) -> float:
    """Mean of ``(upper − lower) / pred``: the interval's width relative to the prediction.

    Parameters
    ----------
    pred : array-like of float
        Point predictions (the denominators).
    lower, upper : array-like of float, same length as pred
        The interval around each prediction.

    Returns
    -------
    float
        The mean relative width; nan for empty input.
    """
    pred, lower, upper = (np.asarray(a, float) for a in (pred, lower, upper))
    return float(np.mean((upper - lower) / pred))
