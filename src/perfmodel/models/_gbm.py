"""Gradient boosting with cross-conformal prediction intervals."""

from __future__ import annotations

import math

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.model_selection import KFold
from sklearn.utils.validation import check_is_fitted, validate_data

from .._validation import check_confidence

__all__ = ["GBMRegressor", "conformal_quantile"]


def conformal_quantile(scores: np.ndarray, confidence: float) -> float:
    """The split-conformal quantile: the ceil((n+1)·confidence)-th smallest score (inf if that exceeds n)."""
    scores = np.sort(np.asarray(scores, dtype=float))
    n = len(scores)
    k = math.ceil((n + 1) * confidence)
    if n == 0 or k > n:
        return math.inf
    return float(scores[k - 1])


class GBMRegressor(RegressorMixin, BaseEstimator):
    """scikit-learn gradient boosting on (log) time, with conformal prediction intervals.

    Intervals are cross-conformal: the model is refitted on ``cv`` folds, the absolute out-of-fold residuals
    (on the log scale when ``log_target``) are the conformity scores, and the interval is the prediction plus
    or minus their conformal quantile at the requested ``confidence`` (MAPIE's "CV" method; the out-of-fold
    predictions also give the cross-validated error).

    Parameters
    ----------
    n_estimators, learning_rate, max_depth, min_samples_leaf, subsample
        Passed to :class:`sklearn.ensemble.GradientBoostingRegressor`.
    log_target : bool, default=True
        Fit ``log(y)``; predictions and intervals are back-transformed.
    cv : int, default=5
        Folds for the conformity scores (at most the number of samples).
    random_state : int, default=0

    Attributes
    ----------
    estimator_ : GradientBoostingRegressor
    oof_pred_ : ndarray
        Out-of-fold predictions of the training targets (original scale).
    scores_ : ndarray
        Sorted conformity scores.
    """

    def __init__(self, *, n_estimators: int = 300, learning_rate: float = 0.05, max_depth: int = 3,
                 min_samples_leaf: int = 3, subsample: float = 1.0, log_target: bool = True, cv: int = 5,
                 random_state: int | None = 0):
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.subsample = subsample
        self.log_target = log_target
        self.cv = cv
        self.random_state = random_state

    def _base(self):
        return GradientBoostingRegressor(
            n_estimators=self.n_estimators, learning_rate=self.learning_rate, max_depth=self.max_depth,
            min_samples_leaf=self.min_samples_leaf, subsample=self.subsample, random_state=self.random_state,
        )

    def fit(self, X, y):
        X, y = validate_data(self, X, y, y_numeric=True, ensure_min_samples=2)
        y = np.asarray(y, dtype=float)
        if self.log_target:
            if np.any(y <= 0):
                raise ValueError("GBMRegressor(log_target=True) needs a positive target; got values <= 0.")
            t = np.log(y)
        else:
            t = y
        self._X_fit_, self._t_fit_ = np.asarray(X, dtype=float), t  # for rebuilding from a safe model file
        self.estimator_ = clone(self._base()).fit(X, t)
        k = max(2, min(int(self.cv), len(y)))
        oof = np.empty_like(t)
        for train, test in KFold(k, shuffle=True, random_state=self.random_state).split(X):
            oof[test] = clone(self._base()).fit(X[train], t[train]).predict(X[test])
        self.scores_ = np.sort(np.abs(t - oof))
        self.oof_pred_ = np.exp(oof) if self.log_target else oof
        fitted = self.estimator_.predict(X)
        resid = t - fitted
        self.resid_std_ = float(np.std(resid, ddof=1)) if len(t) > 1 else np.nan
        ss_tot = float(np.sum((t - t.mean()) ** 2))
        self.rsquared_ = 1 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else np.nan
        self.feature_importances_ = self.estimator_.feature_importances_
        return self

    def _restore(self) -> None:
        """Refit the trees after loading a safe model file (same data and random_state: the same trees)."""
        self.estimator_ = clone(self._base()).fit(self._X_fit_, self._t_fit_)

    def _raw(self, X):
        check_is_fitted(self, "estimator_")
        X = validate_data(self, X, reset=False)
        return self.estimator_.predict(X)

    def predict(self, X):
        t = self._raw(X)
        return np.exp(t) if self.log_target else t

    def predict_interval(self, X, confidence: float = 0.9):
        """Point prediction and the cross-conformal prediction interval at ``confidence``."""
        confidence = check_confidence(confidence, "GBMRegressor.predict_interval")
        t = self._raw(X)
        q = conformal_quantile(self.scores_, confidence)
        lo, hi = t - q, t + q
        if self.log_target:
            return np.exp(t), np.exp(lo), np.exp(hi)
        return t, lo, hi

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = bool(self.log_target)
        return tags
