"""A physics-informed step-time model: overhead + optimizer + compute at a fitted efficiency + communication.

    T_step = a0 + a1 · t_opt + t_compute / eff + 1[n > 1] · (c0 + c1 · t_comm)

* ``t_compute`` = FLOPs per device-step / device peak (seconds at 100% of peak). On CPU, where no datasheet peak
  applies, the peak is taken as ``threads_per_worker × CPU_THREAD_NOMINAL_FLOPS`` so that splitting the cores
  between more workers slows each one down, as it does.
* ``eff`` = ``θ_family · (GFLOP per sample) ** γ_s · batch ** γ_b`` — the achieved fraction of peak, per model
  family (unknown families get the geometric mean), rising with the model's size and the batch (small kernels
  run far from peak); ``γ_s, γ_b`` in [0, 0.6].
* ``t_opt`` = AdamW traffic (16 bytes per parameter) / memory bandwidth; ``t_comm`` = ring all-reduce volume
  ``2(n-1)/n · params · 4 B`` / interconnect bandwidth.
* ``a0, a1, c0, c1, θ > 0``; fitted by least squares on log time (multiplicative errors), with a weak prior
  that keeps parameters the data cannot identify (e.g. the communication terms of a single-device history)
  at their starting values rather than letting them drift.

Prediction intervals come from :class:`~perfmodel.models.TrainingTimeModel`'s conformity scores
(:mod:`perfmodel.models._conformal`), like every method's.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import least_squares
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from .._validation import check_fit_arrays
from ..metrics import r2
from ..features import CPU_THREAD_NOMINAL_FLOPS, PHYSICS_COLUMNS

__all__ = ["PhysicsRegressor", "PHYSICS_COLUMNS", "CPU_THREAD_NOMINAL_FLOPS", "PRIOR_WEIGHT"]

#: Weight of the weak prior that keeps parameters the data cannot identify at their starting values.
PRIOR_WEIGHT = 0.003


class PhysicsRegressor(RegressorMixin, BaseEstimator):
    """Fit the physics-informed step-time form on the columns of ``RunFeaturizer(kind="physics")``.

    Parameters
    ----------
    fit_gamma : bool, default=True
        Let the efficiency rise with the work per step (``γ`` in [0, 0.6]); False fixes ``γ = 0``.
    """

    def __init__(self, *, fit_gamma: bool = True):
        self.fit_gamma = fit_gamma

    #: Columns of the design matrix, and where the family code, model code and batch size sit in it
    #: (a subclass with another design, e.g. :class:`~perfmodel.models._ops.OpsRegressor`, sets its own).
    _COLUMNS = PHYSICS_COLUMNS
    _FAM, _MODEL, _BATCH = 5, 6, 7

    # parameters: [log a0, log a1, log c0, log c1, gamma_sample, gamma_batch, log theta_0 .. log theta_{F-1}]
    _N_SHARED = 6

    def _start(self):
        return np.r_[math.log(1e-3), 0.0, math.log(1e-3), 0.0, 0.0, 0.0, np.full(self.n_families_, math.log(0.2))]

    def _predict_raw(self, p, X):
        a0, a1, c0, c1 = math.exp(p[0]), math.exp(p[1]), math.exp(p[2]), math.exp(p[3])
        g_sample, g_batch = p[4], p[5]
        log_theta = p[self._N_SHARED:]
        fam = X[:, 5].astype(int)
        known = (fam >= 0) & (fam < len(log_theta))
        lt = np.where(known, log_theta[np.clip(fam, 0, len(log_theta) - 1)], np.mean(log_theta))
        batch = np.maximum(X[:, 7], 1.0)
        per_sample = np.maximum(X[:, 1] / batch, 1e-12)
        eff = np.exp(lt) * np.power(per_sample, g_sample) * np.power(batch, g_batch)
        return a0 + a1 * X[:, 2] + X[:, 0] / eff + X[:, 4] * (c0 + c1 * X[:, 3])

    def _fit_params(self, X, y):
        p0 = self._start()
        g_hi = 0.6 if self.fit_gamma else 1e-12
        g_lo = 0.0 if self.fit_gamma else -1e-12
        lo = np.r_[[-40.0] * 4, g_lo, g_lo, [-40.0] * self.n_families_]
        hi = np.r_[[20.0] * 4, g_hi, g_hi, [20.0] * self.n_families_]
        logy = np.log(y)
        w = PRIOR_WEIGHT

        def resid(p):
            return np.r_[np.log(self._predict_raw(p, X)) - logy, w * (p - p0)]

        x0 = np.clip(p0, lo + 1e-9, hi - 1e-9)
        return least_squares(resid, x0, bounds=(lo, hi), method="trf", x_scale="jac", max_nfev=2000).x

    def fit(self, X, y):
        X, y = check_fit_arrays(X, y, self._COLUMNS, type(self).__name__)
        self.n_features_in_ = X.shape[1]
        self.n_families_ = int(max(X[:, self._FAM].max(), 0)) + 1  # codes 0..F-1 from the featurizer; -1 = unknown
        self.params_ = self._fit_params(X, y)
        logy = np.log(y)
        resid = logy - np.log(self._predict_raw(self.params_, X))
        self.resid_std_ = float(np.std(resid, ddof=1))
        self.rsquared_ = r2(logy, logy - resid)
        return self

    def predict(self, X):
        check_is_fitted(self, "params_")
        return self._predict_raw(self.params_, np.asarray(X, dtype=float))

    def decompose(self, X):
        """The fitted terms of each step in seconds: overhead, optimizer, compute, communication."""
        import pandas as pd

        check_is_fitted(self, "params_")
        X = np.asarray(X, dtype=float)
        p = self.params_
        total = self._predict_raw(p, X)
        comm = X[:, 4] * (math.exp(p[2]) + math.exp(p[3]) * X[:, 3])
        opt = math.exp(p[1]) * X[:, 2]
        over = np.full(len(X), math.exp(p[0]))
        return pd.DataFrame({"overhead_s": over, "optimizer_s": opt, "compute_s": total - over - opt - comm,
                             "communication_s": comm})

    def coef_table(self, family_names=None):
        import pandas as pd

        check_is_fitted(self, "params_")
        p = self.params_
        names = ["a0_overhead_s", "a1_optimizer", "c0_comm_latency_s", "c1_comm", "gamma_per_sample_gflop",
                 "gamma_batch"]
        values = [math.exp(p[0]), math.exp(p[1]), math.exp(p[2]), math.exp(p[3]), p[4], p[5]]
        fams = family_names or [f"family_{i}" for i in range(self.n_families_)]
        names += [f"efficiency[{f}]" for f in fams]
        values += list(np.exp(p[self._N_SHARED:]))
        return pd.DataFrame({"value": values}, index=names)
