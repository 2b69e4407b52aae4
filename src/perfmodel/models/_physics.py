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

Prediction intervals are cross-conformal on the log scale, with three sets of conformity scores, each the
out-of-fold residuals of one kind of generalisation: random K-fold (a seen model at a batch size and device count
the fit has seen), leave-one-batch-size-out (a seen model at a new batch size) and leave-one-model-out (a new
model) — split into the rows whose family still had another model in the refit (a new model of a known family)
and all rows (a new family). Each query uses the set matching its kind of model and batch size. A device count
outside the fitted range is not a kind of its own here: :meth:`TrainingTimeModel.predict_interval` widens every
interval with the query's distance to the runs (``nearest_run_distance``, calibrated on held-out splits by
``benchmarks/extrapolation.py``), and a new count is exactly such a distance. (Taking the new-family scores as
well counted the extrapolation twice: the bundled CPU runs' leave-one-count-out intervals covered 1.000 at a
mean relative width of 5.6.)
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import least_squares
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.model_selection import GroupKFold, KFold, LeaveOneGroupOut
from sklearn.utils.validation import check_is_fitted

from .._validation import check_confidence, check_fit_arrays
from ..metrics import r2
from ..features import CPU_THREAD_NOMINAL_FLOPS, PHYSICS_COLUMNS
from ._gbm import balanced_scores, conformal_quantile

__all__ = ["PhysicsRegressor", "PHYSICS_COLUMNS", "CPU_THREAD_NOMINAL_FLOPS"]

#: The columns RunFeaturizer(kind="physics") produces, in order.
_PRIOR_WEIGHT = 0.003


class PhysicsRegressor(RegressorMixin, BaseEstimator):
    """Fit the physics-informed step-time form on the columns of ``RunFeaturizer(kind="physics")``.

    Parameters
    ----------
    fit_gamma : bool, default=True
        Let the efficiency rise with the work per step (``γ`` in [0, 0.6]); False fixes ``γ = 0``.
    cv : int, default=5
        Folds of the random K-fold conformity scores.
    conformal : bool, default=True
        Compute the conformity scores (the refits); False fits the point model only (for model selection).
    random_state : int, default=0
    """

    def __init__(self, *, fit_gamma: bool = True, cv: int = 5, conformal: bool = True,
                 random_state: int | None = 0):
        self.fit_gamma = fit_gamma
        self.cv = cv
        self.conformal = conformal
        self.random_state = random_state

    #: Columns of the design matrix, and where the family code, model code and batch size sit in it
    #: (a subclass with another design, e.g. :class:`~perfmodel.models._ops.OpsRegressor`, sets its own).
    _COLUMNS = PHYSICS_COLUMNS
    #: Query kinds (by the history column they go beyond) this regressor's intervals score themselves.
    scored_columns = ("model", "batch_size")
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
        w = _PRIOR_WEIGHT

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
        fam = X[:, self._FAM].astype(int)
        models = X[:, self._MODEL].astype(int)
        self.known_families_ = np.unique(fam[fam >= 0])
        self.known_models_ = np.unique(models[models >= 0])
        self.batch_sizes_ = np.unique(X[:, self._BATCH])
        if not getattr(self, "conformal", True):
            self.scores_seen_ = self.scores_new_ = self.scores_new_known_family_ = self.scores_batch_ = np.sort(
                np.abs(resid))
            self.oof_pred_ = np.exp(logy - resid)
            return self
        # conformity scores: random K-fold (seen models) and leave-one-model-out (new models)
        k = max(2, min(int(self.cv), len(y)))
        oof = np.empty_like(logy)
        for tr, te in KFold(k, shuffle=True, random_state=self.random_state).split(X):
            oof[te] = np.log(self._predict_raw(self._fit_params(X[tr], y[tr]), X[te]))
        self.scores_seen_ = np.sort(np.abs(logy - oof))
        self.oof_pred_ = np.exp(oof)
        self.scores_new_, sibling = self._group_scores(X, y, models, blank_model=True)
        # rows whose held-out model still had a sibling of its family in the refit: the situation of a new model
        # of a family the fit knows (its scores are smaller than those of a new family)
        self.scores_new_known_family_ = self.scores_new_ if sibling is None else balanced_scores(
            self._last_oof_abs[sibling], models[sibling]) if sibling.sum() >= 10 else self.scores_new_
        self.scores_batch_, _ = self._group_scores(X, y, X[:, self._BATCH], blank_model=False)
        return self

    def _group_scores(self, X, y, groups, *, blank_model: bool):
        """Absolute log residuals of leave-one-group-out refits (the seen-model scores if < 3 groups; for model
        or family groups, ``blank_model``, balanced so that every group weighs the same), and a mask of the rows
        whose family still had another model in their refit (None if not computed)."""
        if len(np.unique(groups)) < 3:
            return self.scores_seen_, None
        logy = np.log(y)
        out = np.empty_like(logy)
        sibling = np.zeros(len(y), dtype=bool)
        fam = X[:, self._FAM].astype(int)
        # one group out at a time; with many groups (say 1,000 models) ten folds of whole groups instead
        splitter = LeaveOneGroupOut() if len(np.unique(groups)) <= 20 else GroupKFold(10)
        for tr, te in splitter.split(X, groups=groups):
            Xte = X[te].copy()
            if blank_model:
                Xte[:, self._MODEL] = -1
            out[te] = np.log(self._predict_raw(self._fit_params(X[tr], y[tr]), Xte))
            sibling[te] = (fam[te] >= 0) & np.isin(fam[te], fam[tr])
        self._last_oof_abs = np.abs(logy - out)
        if blank_model:  # a new model (or family) is one draw of a group: every held-out group weighs the same
            return balanced_scores(self._last_oof_abs, groups), sibling
        return np.sort(self._last_oof_abs), sibling

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

    def predict_interval(self, X, confidence: float = 0.9):
        """Point prediction and cross-conformal interval (scores chosen by whether the model was seen)."""
        confidence = check_confidence(confidence, "PhysicsRegressor.predict_interval")
        X = np.asarray(X, dtype=float)
        pred = self.predict(X)
        seen_model = np.isin(X[:, self._MODEL].astype(int), self.known_models_)
        seen_batch = np.isin(X[:, self._BATCH], self.batch_sizes_)
        known_family = np.isin(X[:, self._FAM].astype(int), self.known_families_)
        q_seen, q_batch, q_fam, q_new = (
            conformal_quantile(s, confidence)
            for s in (self.scores_seen_, self.scores_batch_, self.scores_new_known_family_, self.scores_new_))
        q = np.where(seen_model, np.where(seen_batch, q_seen, q_batch), np.where(known_family, q_fam, q_new))
        return pred, pred * np.exp(-q), pred * np.exp(q)

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
