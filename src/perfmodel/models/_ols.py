"""Ordinary least squares through statsmodels, as a scikit-learn regressor with prediction intervals."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._validation import check_confidence

__all__ = ["OLSRegressor"]


class OLSRegressor(RegressorMixin, BaseEstimator):
    """statsmodels OLS on ``X`` (an intercept is added), optionally on ``log(y)``.

    Parameters
    ----------
    log_target : bool, default=False
        Fit ``log(y)``; predictions are ``exp`` of the linear predictor (the median of a log-normal error) and
        intervals are back-transformed, so they stay positive and multiplicative.
    feature_names : list of str, optional
        Names for the coefficient table (default ``x0, x1, ...``).

    Attributes
    ----------
    results_ : statsmodels RegressionResults
        The fitted statsmodels results (``summary()``, ``conf_int()``, ...).
    coef_ : ndarray of shape (n_features,)
        Slopes.
    intercept_ : float
        The constant.
    rsquared_, rsquared_adj_ : float
        On the fitted scale (log time when ``log_target``).
    resid_std_ : float
        Residual standard deviation on the fitted scale.

    Examples
    --------
    >>> import numpy as np
    >>> from perfmodel.models import OLSRegressor
    >>> X = np.arange(20.0).reshape(-1, 1)
    >>> reg = OLSRegressor().fit(X, 3.0 + 2.0 * X[:, 0])
    >>> round(reg.intercept_, 6), np.round(reg.coef_, 6)
    (3.0, array([2.]))
    """

    def __init__(self, *, log_target: bool = False, feature_names=None):
        self.log_target = log_target
        self.feature_names = feature_names

    def _design(self, X):
        from statsmodels.tools.tools import add_constant  # statsmodels only when an OLS method is used

        return add_constant(np.asarray(X, dtype=float), has_constant="add")

    def fit(self, X, y):
        """Fit OLS (with an intercept) on ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The design (numeric; no constant column needed).
        y : array-like of shape (n_samples,)
            Targets (positive with ``log_target``); at least 2 samples.

        Returns
        -------
        self : OLSRegressor
            Fitted.
        """
        X, y = validate_data(self, X, y, y_numeric=True, ensure_min_samples=2)
        y = np.asarray(y, dtype=float)
        if self.log_target:
            if np.any(y <= 0):
                raise ValueError("OLSRegressor(log_target=True) needs a positive target; got values <= 0.")
            y = np.log(y)
        self._X_fit_, self._y_fit_ = np.asarray(X, dtype=float), y  # kept so a safe model file can rebuild results_
        from statsmodels.regression.linear_model import OLS

        self.results_ = OLS(y, self._design(X)).fit()
        m = self.results_.model
        # the fitted state as plain arrays: enough to rebuild results_ from a model file without fitting
        self._fit_state_ = {"params": np.asarray(self.results_.params, dtype=float),
                            "normalized_cov_params": np.asarray(self.results_.normalized_cov_params, dtype=float),
                            "scale": float(self.results_.scale), "rank": int(m.rank), "df_model": float(m.df_model), "df_resid": float(m.df_resid),
                            "wexog_singular_values": np.asarray(getattr(m, "wexog_singular_values", []), dtype=float)}
        params = np.asarray(self.results_.params)
        self.intercept_ = float(params[0])
        self.coef_ = params[1:]
        self.rsquared_ = float(self.results_.rsquared) if self.results_.df_resid > 0 else np.nan
        self.rsquared_adj_ = float(self.results_.rsquared_adj) if self.results_.df_resid > 0 else np.nan
        self.resid_std_ = float(np.sqrt(self.results_.scale)) if self.results_.df_resid > 0 else np.nan
        return self

    def _restore(self) -> None:
        """Rebuild the statsmodels results from the stored fitted state after loading a safe model file.

        No fitting: the coefficients, their normalised covariance and the degrees of freedom are the stored ones;
        statsmodels derives the rest (residuals, scale, standard errors) from them and the stored design, as it
        does after ``fit``.
        """
        from statsmodels.regression.linear_model import OLSResults, RegressionResultsWrapper

        st: dict[str, Any] = self._fit_state_
        X, y = np.asarray(self._X_fit_, dtype=float), np.asarray(self._y_fit_, dtype=float)
        p = X.shape[1] + 1
        params = np.asarray(st["params"], dtype=float)
        ncp = np.asarray(st["normalized_cov_params"], dtype=float)
        if X.ndim != 2 or y.shape != (X.shape[0],) or params.shape != (p,) or ncp.shape != (p, p):
            raise ValueError("the stored OLS state has inconsistent shapes")
        if not (np.all(np.isfinite(params)) and np.all(np.isfinite(ncp)) and np.all(np.isfinite(X))
                and np.all(np.isfinite(y))):
            raise ValueError("the stored OLS state holds non-finite numbers")
        from statsmodels.regression.linear_model import OLS

        model = OLS(y, self._design(X))
        model.rank, model.df_model, model.df_resid = int(st["rank"]), float(st["df_model"]), float(st["df_resid"])
        sv = np.asarray(st["wexog_singular_values"], dtype=float)
        if sv.size:
            model.wexog_singular_values = sv
        results = OLSResults(model, params, normalized_cov_params=ncp, scale=float(st["scale"]))
        results.scale = float(st["scale"])  # exactly the fitted value (recomputing it can differ in the last bit)
        self.results_ = RegressionResultsWrapper(results)

    def _linear(self, X):
        check_is_fitted(self, "results_")
        X = validate_data(self, X, reset=False)
        return X, self._design(X) @ np.asarray(self.results_.params)

    def predict(self, X):
        """Predicted target of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The design, with the features of the fit.

        Returns
        -------
        ndarray of shape (n_samples,)
            The linear predictor (``exp`` of it with ``log_target``: the median of a log-normal error).
        """
        _, eta = self._linear(X)
        return np.exp(eta) if self.log_target else eta

    def predict_interval(self, X, confidence: float = 0.9):
        """Point prediction and the prediction interval for one new observation.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The design, with the features of the fit.
        confidence : float, default=0.9
            The interval level, in (0, 1).

        Returns
        -------
        pred, lower, upper : ndarray of shape (n_samples,)
            The prediction and the interval's ends (t quantile on the residual degrees of freedom;
            back-transformed with ``log_target``).
        """
        confidence = check_confidence(confidence, "OLSRegressor.predict_interval")
        check_is_fitted(self, "results_")
        D = self._design(validate_data(self, X, reset=False))
        r = self.results_
        eta = D @ np.asarray(r.params)
        # statsmodels' get_prediction(...).summary_frame()'s obs_ci, without building its frames:
        # se_obs = sqrt(x' Cov x + scale), t quantile on the residual degrees of freedom
        var_mean = ((D @ np.asarray(r.cov_params())) * D).sum(axis=1)
        half = stats.t.ppf(1 - (1 - confidence) / 2, r.df_resid) * np.sqrt(var_mean + r.scale)
        lo, hi = eta - half, eta + half
        if self.log_target:
            return np.exp(eta), np.exp(lo), np.exp(hi)
        return eta, lo, hi

    def predict_mean_interval(self, X, confidence: float = 0.9):
        """Point prediction and the confidence interval of the mean (not of a new run).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The design, with the features of the fit.
        confidence : float, default=0.9
            The interval level, in (0, 1).

        Returns
        -------
        pred, lower, upper : ndarray of shape (n_samples,)
            The prediction and the ends of the mean's interval (back-transformed with ``log_target``).
        """
        confidence = check_confidence(confidence, "OLSRegressor.predict_mean_interval")
        X, eta = self._linear(X)
        frame = self.results_.get_prediction(self._design(X)).summary_frame(alpha=1 - confidence)
        lo, hi = frame["mean_ci_lower"].to_numpy(), frame["mean_ci_upper"].to_numpy()
        if self.log_target:
            return np.exp(eta), np.exp(lo), np.exp(hi)
        return eta, lo, hi

    def coef_table(self, confidence: float = 0.95) -> pd.DataFrame:
        """Coefficients with standard errors, t, p and a confidence interval.

        Parameters
        ----------
        confidence : float, default=0.95
            The level of the coefficients' intervals.

        Returns
        -------
        DataFrame
            Indexed ``const`` then ``feature_names`` (``x0, x1, ...`` without); columns ``coef``, ``std_err``,
            ``t``, ``p`` and the interval's ends (e.g. ``[0.025`` and ``0.975]``).
        """
        check_is_fitted(self, "results_")
        names = ["const"] + (list(self.feature_names) if self.feature_names is not None
                             else [f"x{i}" for i in range(len(self.coef_))])
        r = self.results_
        ci = np.asarray(r.conf_int(alpha=1 - confidence))
        lo_name, hi_name = f"[{(1 - confidence) / 2:.3g}", f"{1 - (1 - confidence) / 2:.3g}]"
        return pd.DataFrame(
            {"coef": np.asarray(r.params), "std_err": np.asarray(r.bse), "t": np.asarray(r.tvalues),
             "p": np.asarray(r.pvalues), lo_name: ci[:, 0], hi_name: ci[:, 1]},
            index=names,
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = bool(self.log_target)
        return tags
