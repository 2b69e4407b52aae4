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

from ..features import CPU_THREAD_NOMINAL_FLOPS, PHYSICS_COLUMNS
from ..metrics import r2
from ._columns import NamedColumnsMixin

__all__ = ["PhysicsRegressor", "PHYSICS_COLUMNS", "CPU_THREAD_NOMINAL_FLOPS", "PRIOR_WEIGHT"]

#: Weight of the weak prior that keeps parameters the data cannot identify at their starting values.
PRIOR_WEIGHT = 0.003

_P = {name: i for i, name in enumerate(PHYSICS_COLUMNS)}


class PhysicsRegressor(NamedColumnsMixin, RegressorMixin, BaseEstimator):
    """Fit the physics-informed step-time form (module docstring) on the columns of
    ``RunFeaturizer(kind="physics")``.

    Parameters
    ----------
    fit_gamma : bool, default=True
        Let the efficiency rise with the work per step (``γ`` in [0, 0.6]); False fixes ``γ = 0``.
    columns : dict of str to str, optional
        Where each quantity of the form is in ``X``: ``{quantity: column name}``, the quantities being
        :data:`~perfmodel.features.PHYSICS_COLUMNS` (``t_compute_s`` is required). A quantity left out is the
        same in every run: the optimizer, communication and data-parallel terms 0, batch size, device count and
        work 1, one model family. A plain array's columns are named ``"x0"``, ``"x1"``, ... None (the default):
        every quantity in the column of its own name, by name in a DataFrame, in
        :data:`~perfmodel.features.PHYSICS_COLUMNS` order in a plain array (:mod:`perfmodel.models._columns`).

    Attributes
    ----------
    params_ : ndarray
        ``[log a0, log a1, log c0, log c1, γ_sample, γ_batch, log θ_0, ..., log θ_{F-1}]``.
    n_families_ : int
        Model families fitted (codes 0 to F-1; another code gets the geometric mean of their efficiencies).
    resid_std_, rsquared_ : float
        In-sample residual standard deviation and R² of log step time.
    columns_ : dict
        The column read for each quantity (None: absent, the same in every run).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        The column names of ``X``, when it was a DataFrame.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> t = rng.uniform(0.01, 1.0, 40)  # seconds at 100% of peak
    >>> X = np.column_stack([t, np.full(40, 8.0)])  # and the batch size
    >>> reg = PhysicsRegressor(fit_gamma=False, columns={"t_compute_s": "x0", "batch_size": "x1"})
    >>> table = reg.fit(X, 0.002 + t / 0.25).coef_table()["value"]  # 2 ms overhead, 25% of peak
    >>> round(float(table["a0_overhead_s"]), 4), round(float(table["efficiency[family_0]"]), 3)
    (0.002, 0.25)
    """

    _QUANTITIES: tuple[str, ...] = PHYSICS_COLUMNS
    _FEATURE_SET = "physics"
    _ABSENT = {"work_gflop": 1.0, "t_opt_s": 0.0, "t_comm_s": 0.0, "data_parallel": 0.0, "family_code": 0.0,
               "model_code": 0.0, "batch_size": 1.0, "gpu_count": 1.0}
    _REQUIRED: tuple[str, ...] = ("t_compute_s",)
    _CODES = ("family_code", "model_code")
    _NONNEGATIVE: tuple[str, ...] = ("t_compute_s", "work_gflop", "t_opt_s", "t_comm_s", "data_parallel",
                                     "batch_size", "gpu_count")
    #: Position of each quantity in the design (a subclass with another design, e.g.
    #: :class:`~perfmodel.models._ops.OpsRegressor`, sets its own).
    _AT = _P

    def __init__(self, *, fit_gamma: bool = True, columns: dict | None = None):
        self.fit_gamma = fit_gamma
        self.columns = columns

    # parameters: [log a0, log a1, log c0, log c1, gamma_sample, gamma_batch, log theta_0 .. log theta_{F-1}]
    _N_SHARED = 6

    def _start(self):
        return np.r_[math.log(1e-3), 0.0, math.log(1e-3), 0.0, 0.0, 0.0, np.full(self.n_families_, math.log(0.2))]

    def _predict_raw(self, p, X):
        a0, a1, c0, c1 = math.exp(p[0]), math.exp(p[1]), math.exp(p[2]), math.exp(p[3])
        g_sample, g_batch = p[4], p[5]
        log_theta = p[self._N_SHARED:]
        fam = X[:, _P["family_code"]].astype(int)
        known = (fam >= 0) & (fam < len(log_theta))
        lt = np.where(known, log_theta[np.clip(fam, 0, len(log_theta) - 1)], np.mean(log_theta))
        batch = np.maximum(X[:, _P["batch_size"]], 1.0)
        per_sample = np.maximum(X[:, _P["work_gflop"]] / batch, 1e-12)
        eff = np.exp(lt) * np.power(per_sample, g_sample) * np.power(batch, g_batch)
        return (a0 + a1 * X[:, _P["t_opt_s"]] + X[:, _P["t_compute_s"]] / eff
                + X[:, _P["data_parallel"]] * (c0 + c1 * X[:, _P["t_comm_s"]]))

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

        # start strictly inside the bounds (fit_gamma=False leaves γ a width of 2e-12: start it at 0)
        margin = np.minimum(1e-9, (hi - lo) / 4)
        x0 = np.clip(p0, lo + margin, hi - margin)
        return least_squares(resid, x0, bounds=(lo, hi), method="trf", x_scale="jac", max_nfev=2000).x

    def fit(self, X, y):
        """Fit the form by least squares on log step time.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_runs, n_features)
            The design: the columns of ``RunFeaturizer(kind="physics")``, or those named by ``columns``.
        y : array-like of shape (n_runs,)
            Step times in seconds (positive; at least 3 runs).

        Returns
        -------
        self : PhysicsRegressor
            Fitted.
        """
        X, y = self._validate_fit(X, y)
        # codes 0..F-1 from the featurizer; -1 = unknown
        self.n_families_ = int(max(X[:, self._AT["family_code"]].max(), 0)) + 1
        self.params_ = self._fit_params(X, y)
        logy = np.log(y)
        resid = logy - np.log(self._predict_raw(self.params_, X))
        self.resid_std_ = float(np.std(resid, ddof=1))
        self.rsquared_ = r2(logy, logy - resid)
        return self

    def predict(self, X):
        """Predicted step time of each run.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_runs, n_features)
            The design, with the columns the fit read.

        Returns
        -------
        ndarray of shape (n_runs,)
            Seconds per step (NaN where a quantity is NaN).
        """
        X = self._validate_predict(X, "params_")
        return self._predict_raw(self.params_, X)

    def decompose(self, X):
        """The fitted terms of each step in seconds: overhead, optimizer, compute, communication.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_runs, n_features)
            The design, with the columns the fit read.

        Returns
        -------
        DataFrame
            Columns ``overhead_s``, ``optimizer_s``, ``compute_s``, ``communication_s``; one row per run, in
            order (a fresh 0-based index); they add up to :meth:`predict`.
        """
        import pandas as pd

        X = self._validate_predict(X, "params_")
        p = self.params_
        total = self._predict_raw(p, X)
        comm = X[:, _P["data_parallel"]] * (math.exp(p[2]) + math.exp(p[3]) * X[:, _P["t_comm_s"]])
        opt = math.exp(p[1]) * X[:, _P["t_opt_s"]]
        over = np.full(len(X), math.exp(p[0]))
        return pd.DataFrame({"overhead_s": over, "optimizer_s": opt, "compute_s": total - over - opt - comm,
                             "communication_s": comm})

    def coef_table(self, family_names=None):
        """The fitted constants: overhead, optimizer and communication factors, the γ exponents and each
        family's efficiency (fraction of the peak).

        Parameters
        ----------
        family_names : list of str, optional
            The family of each code (``RunFeaturizer.families_``); default ``family_0``, ``family_1``, ...

        Returns
        -------
        DataFrame
            One column, ``value``, indexed by constant name.
        """
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
