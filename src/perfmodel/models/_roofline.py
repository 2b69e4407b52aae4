"""A hierarchical roofline model that carries step times across devices, models and device counts.

On the log scale, with ``t_peak`` = FLOPs per device-step / the device's peak at the run's precision (the step
time at 100 % of peak) and ``ridge`` = log(peak / memory bandwidth) (the device's ridge point)::

    log T = log t_peak + a + κ_m · (ridge − ridge̅) + ψ · tf32_gap
            + β · (log n, log nodes, log batch, log(1 + t_comm/t_peak), log(1 + t_opt/t_peak), log work)
            + u_family + u_model + u_vendor + u_architecture + u_device + u_precision + u_model×architecture + ε

* ``κ_m`` is the model's *memory-bound share*: a roofline mixture ``T ∝ work / (peak^(1−κ) · bandwidth^κ)``, so
  a compute-bound model (κ≈0) scales with the peak at the run's precision and a memory-bound one with the
  bandwidth. ``κ_m = κ̅ + δ_m`` is partially pooled across models.
* ``u_*`` are efficiencies (log slow-downs against the roofline) with Gaussian priors centred on zero —
  partial pooling, fitted as one ridge-penalised least-squares problem (the MAP of the hierarchical model).
  A device the history has never seen gets ``u_device = 0`` but keeps what its vendor and architecture share
  with devices the history has; a model never seen keeps its family's effect. ``u_model×architecture`` is how
  well one model's software uses one architecture (kernels, fusions, fp8 engines differ by generation): a new
  device of a known architecture inherits it from its siblings.
* ``tf32_gap`` = log(TF32 peak / FP32 peak) on fp32-labelled runs of devices with TF32 tensor cores: PyTorch
  runs fp32 convolutions (and, with ``allow_tf32``, matmuls) in TF32, so how much of that gap fp32 runs get is
  learned, not assumed.

Prediction intervals are cross-conformal on the log scale, with conformity scores from the refit that matches
the query: random K-fold (a configuration whose model has run on this device), leave-one-(model, device)-out (a
known model on a known device it has not run on), leave-one-device-type-out (a device the history lacks),
leave-one-model-out (a new model) and leave-one-device-count-out (a count outside the fitted range). Queries that
are new in two ways combine the two quantiles in quadrature.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.model_selection import GroupKFold, KFold
from sklearn.utils.validation import check_is_fitted

from .._validation import check_confidence
from ..metrics import r2
from ..features import ROOFLINE_COLUMNS
from ._gbm import conformal_quantile

__all__ = ["RooflineRegressor", "QUERY_KINDS"]

_COL = {name: i for i, name in enumerate(ROOFLINE_COLUMNS)}
_FIXED = ("ridge", "tf32_gap", "log_n", "log_nodes", "log_batch", "comm_rel", "opt_rel", "log_work", "log_peak")
_GROUPS = ("family_code", "model_code", "vendor_code", "arch_code", "device_code", "precision_code")
#: Kinds of query, each with its own conformity scores (see the module docstring).
QUERY_KINDS = ("seen", "new_pair", "new_device", "new_model", "new_count")


def _column(X: np.ndarray, name: str) -> np.ndarray:
    if name == "log_peak":  # log FLOP/s of the device at the run's precision: log work − log t_peak
        return X[:, _COL["log_work"]] - X[:, _COL["log_t_peak"]]
    return X[:, _COL[name]]


class RooflineRegressor(RegressorMixin, BaseEstimator):
    """Fit the hierarchical roofline form on the columns of ``RunFeaturizer(kind="roofline")``.

    Parameters
    ----------
    tau_model, tau_family, tau_device, tau_arch, tau_vendor, tau_precision, tau_kappa, tau_model_arch : float
        Prior standard deviations (log scale) of the partially pooled effects: how far a model's, family's,
        device's, architecture's, vendor's or precision's efficiency may stray from the pooled value before
        the data must pay for it, of a model's memory-bound share around the pooled one, and of a model's
        efficiency on one architecture. The defaults were chosen by leave-one-device-type-out error on the
        bundled MLPerf table (benchmarks/cross_hardware.py); they are priors on log slow-downs, not fitted
        constants of any one device.
    cv : int, default=5
        Folds of the random K-fold conformity scores.
    conformal : bool, default=True
        Compute the conformity scores (the refits); False fits the point model only (for model selection).
    random_state : int, default=0
    """

    def __init__(self, *, tau_model: float = 1.0, tau_family: float = 1.0, tau_device: float = 0.2,
                 tau_arch: float = 0.25, tau_vendor: float = 0.4, tau_precision: float = 0.5,
                 tau_kappa: float = 0.3, tau_model_arch: float = 0.5, cv: int = 5, conformal: bool = True, random_state: int | None = 0):
        self.tau_model = tau_model
        self.tau_family = tau_family
        self.tau_device = tau_device
        self.tau_arch = tau_arch
        self.tau_vendor = tau_vendor
        self.tau_precision = tau_precision
        self.tau_kappa = tau_kappa
        self.tau_model_arch = tau_model_arch
        self.cv = cv
        self.conformal = conformal
        self.random_state = random_state

    # ------------------------------------------------------------------------------------------ design
    def _design(self, X: np.ndarray) -> np.ndarray:
        """Design matrix: intercept, centred fixed covariates, one-hot effects, model × ridge slopes."""
        n = len(X)
        cols = [np.ones((n, 1))]
        fixed = np.column_stack([_column(X, c) for c in _FIXED]) - self.center_
        cols.append(fixed)
        for g, size in zip(_GROUPS, self.n_levels_):
            code = X[:, _COL[g]].astype(int)
            block = np.zeros((n, size))
            ok = (code >= 0) & (code < size)
            block[np.flatnonzero(ok), code[ok]] = 1.0
            cols.append(block)
            if g == "model_code":
                slope = block * fixed[:, [0]]  # δ_m · (ridge − ridge̅)
                cols.append(slope)
        # model × architecture: how well a benchmark's software uses one architecture, shared by its devices
        m = X[:, _COL["model_code"]].astype(int)
        a = X[:, _COL["arch_code"]].astype(int)
        n_m, n_a = self.n_levels_[_GROUPS.index("model_code")], self.n_levels_[_GROUPS.index("arch_code")]
        inter = np.zeros((n, n_m * n_a))
        ok = (m >= 0) & (a >= 0) & (m < n_m) & (a < n_a)
        inter[np.flatnonzero(ok), (m * n_a + a)[ok]] = 1.0
        cols.append(inter)
        return np.hstack(cols)

    def _penalty(self) -> np.ndarray:
        taus = {"family_code": self.tau_family, "model_code": self.tau_model, "vendor_code": self.tau_vendor,
                "arch_code": self.tau_arch, "device_code": self.tau_device, "precision_code": self.tau_precision}
        pen = [np.zeros(1), np.full(len(_FIXED), 1e-6)]
        for g, size in zip(_GROUPS, self.n_levels_):
            pen.append(np.full(size, 1.0 / taus[g] ** 2))
            if g == "model_code":
                pen.append(np.full(size, 1.0 / self.tau_kappa ** 2))
        n_m, n_a = self.n_levels_[_GROUPS.index("model_code")], self.n_levels_[_GROUPS.index("arch_code")]
        pen.append(np.full(n_m * n_a, 1.0 / self.tau_model_arch ** 2))
        return np.concatenate(pen)

    def _solve(self, Z, r, sigma2):
        A = Z.T @ Z + np.diag(self._pen * sigma2)
        return np.linalg.solve(A, Z.T @ r)

    def _fit_theta(self, Z, r):
        """MAP fit with the residual variance estimated alongside (two passes)."""
        sigma2 = max(float(np.var(r)) * 0.05, 1e-4)
        for _ in range(3):
            theta = self._solve(Z, r, sigma2)
            resid = r - Z @ theta
            sigma2 = max(float(np.mean(resid ** 2)), 1e-4)
        return theta, sigma2

    # ---------------------------------------------------------------------------------------------- fit
    def fit(self, X, y):
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        if X.ndim != 2 or X.shape[1] != len(ROOFLINE_COLUMNS):
            raise ValueError(f"RooflineRegressor expects the {len(ROOFLINE_COLUMNS)} columns {ROOFLINE_COLUMNS}.")
        if len(y) < 3 or np.any(y <= 0) or not np.all(np.isfinite(y)):
            raise ValueError("RooflineRegressor needs at least 3 positive, finite step times.")
        if not np.all(np.isfinite(X[:, :_COL["model_code"]])):
            raise ValueError("RooflineRegressor got non-finite features (a device without a peak at the run's "
                             "precision or without a memory bandwidth?).")
        self.n_features_in_ = X.shape[1]
        self.n_levels_ = tuple(int(max(X[:, _COL[g]].max(), -1)) + 1 for g in _GROUPS)
        self.center_ = np.array([_column(X, c).mean() for c in _FIXED])
        self._pen = self._penalty()
        r = np.log(y) - X[:, _COL["log_t_peak"]]
        Z = self._design(X)
        self.coef_, self.sigma2_ = self._fit_theta(Z, r)
        resid = r - Z @ self.coef_
        logy = np.log(y)
        self.resid_std_ = float(np.std(resid, ddof=1)) if len(y) > 1 else 0.0
        self.rsquared_ = r2(logy, logy - resid)
        codes = {g: X[:, _COL[g]].astype(int) for g in _GROUPS}
        self.known_pairs_ = np.unique(codes["model_code"] * 100_003 + codes["device_code"])
        self.count_range_ = (float(np.exp(X[:, _COL["log_n"]].min())), float(np.exp(X[:, _COL["log_n"]].max())))
        self.scores_ = {}
        self.oof_pred_ = np.exp(X[:, _COL["log_t_peak"]] + Z @ self.coef_)
        if not self.conformal:
            return self
        # conformity scores, each from the refits matching one kind of query
        k = max(2, min(int(self.cv), len(y)))
        oof = np.empty_like(r)
        for tr, te in KFold(k, shuffle=True, random_state=self.random_state).split(X):
            oof[te] = Z[te] @ self._fit_theta(Z[tr], r[tr])[0]
        self.scores_["seen"] = np.sort(np.abs(r - oof))
        self.oof_pred_ = np.exp(X[:, _COL["log_t_peak"]] + oof)
        groups = {
            "new_pair": codes["model_code"] * 100_003 + codes["device_code"],
            "new_device": codes["device_code"],
            "new_model": codes["model_code"],
            "new_count": np.round(X[:, _COL["log_n"]], 6),
        }
        for kind, g in groups.items():
            scores = self._group_scores(Z, r, g)
            self.scores_[kind] = self.scores_["seen"] if scores is None else scores
        return self

    def _group_scores(self, Z, r, groups):
        uniq = np.unique(groups)
        if len(uniq) < 3:
            return None
        out = np.empty_like(r)
        folds = min(len(uniq), 25)
        splitter = GroupKFold(folds)
        for tr, te in splitter.split(Z, groups=groups):
            # columns with no training rows are effects of the held-out level: their estimate is the prior (0)
            out[te] = Z[te] @ self._fit_theta(Z[tr], r[tr])[0]
        return np.sort(np.abs(r - out))

    # ------------------------------------------------------------------------------------------ predict
    def predict(self, X):
        check_is_fitted(self, "coef_")
        X = np.asarray(X, dtype=float)
        return np.exp(X[:, _COL["log_t_peak"]] + self._design(X) @ self.coef_)

    def query_kind(self, X) -> np.ndarray:
        """The kind of each query (one of :data:`QUERY_KINDS`; a count outside the fitted range is reported
        separately by :meth:`predict_interval`)."""
        X = np.asarray(X, dtype=float)
        model = X[:, _COL["model_code"]].astype(int)
        dev = X[:, _COL["device_code"]].astype(int)
        pair = np.isin(model * 100_003 + dev, self.known_pairs_) & (model >= 0) & (dev >= 0)
        return np.where(dev < 0, "new_device", np.where(model < 0, "new_model",
                                                         np.where(pair, "seen", "new_pair")))

    def predict_interval(self, X, confidence: float = 0.9):
        """Point prediction and a cross-conformal interval with the scores matching each query's kind."""
        check_is_fitted(self, "coef_")
        confidence = check_confidence(confidence, "RooflineRegressor.predict_interval")
        X = np.asarray(X, dtype=float)
        pred = self.predict(X)
        q = {k: conformal_quantile(s, confidence) for k, s in self.scores_.items()} if self.scores_ else {}
        if not q:
            return pred, np.full(len(X), np.nan), np.full(len(X), np.nan)
        kind = self.query_kind(X)
        model_new = X[:, _COL["model_code"]] < 0
        n = np.exp(X[:, _COL["log_n"]])
        out_count = (n < self.count_range_[0] * 0.999) | (n > self.count_range_[1] * 1.001)
        half = np.array([q[k] for k in kind])
        both = (kind == "new_device") & model_new
        half = np.where(both, np.hypot(q["new_device"], q["new_model"]), half)
        half = np.where(out_count, np.hypot(half, q["new_count"]), half)
        return pred, pred * np.exp(-half), pred * np.exp(half)

    def effects(self, feature_names: dict | None = None):
        """The fitted coefficients as a table (fixed slopes, then each pooled effect by level)."""
        import pandas as pd

        check_is_fitted(self, "coef_")
        names = ["intercept"] + [f"slope[{c}]" for c in _FIXED]
        names[1] = "kappa_memory_share (pooled)"
        feature_names = feature_names or {}
        for g, size in zip(_GROUPS, self.n_levels_):
            labels = feature_names.get(g) or [str(i) for i in range(size)]
            base = g.replace("_code", "")
            names += [f"efficiency_log[{base}={lab}]" for lab in labels]
            if g == "model_code":
                names += [f"kappa_delta[model={lab}]" for lab in labels]
        n_m, n_a = self.n_levels_[_GROUPS.index("model_code")], self.n_levels_[_GROUPS.index("arch_code")]
        models = feature_names.get("model_code") or [str(i) for i in range(n_m)]
        archs = feature_names.get("arch_code") or [str(i) for i in range(n_a)]
        names += [f"efficiency_log[model={m} x arch={a}]" for m in models for a in archs]
        return pd.DataFrame({"value": self.coef_}, index=names)
