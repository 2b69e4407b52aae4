"""A hierarchical roofline model that carries step times across devices, models and device counts.

On the log scale, with ``t_peak`` = FLOPs per device-step / the device's peak at the run's precision (the step
time at 100 % of peak) and ``ridge`` = log(peak / memory bandwidth) (the device's ridge point)::

    log T = log t_peak + a + κ_m · (ridge − ridge̅) + ψ · tf32_gap
            + β · (log n, log nodes, log batch, log(1 + t_comm/t_peak), log(1 + t_opt/t_peak), log work)
            + u_family + u_model + u_vendor + u_architecture + u_device + u_precision + u_model×architecture + ε

* ``κ_m`` is the model's *memory-bound share*: a roofline mixture ``T ∝ work / (peak^(1−κ) · bandwidth^κ)``, so
  a compute-bound model (κ≈0) scales with the peak at the run's precision and a memory-bound one with the
  bandwidth. ``κ_m = κ̅ + δ_m`` is partially pooled across models.
* The slopes ``β`` (and ``ψ``, ``κ̅``) have a Gaussian prior too (``tau_slope``), centred on the physical form: time =
  compute at the roofline + communication + optimizer traffic (``β`` 1 on the two shares, 0 elsewhere). Hundreds
  of runs overrule it; a handful cannot throw the slopes, and runs of one device count keep communication's.
* ``u_*`` are efficiencies (log slow-downs against the roofline) with Gaussian priors centred on zero —
  partial pooling, fitted as one ridge-penalised least-squares problem (the MAP of the hierarchical model).
  A device the history has never seen gets ``u_device = 0`` but keeps what its vendor and architecture share
  with devices the history has; a model never seen keeps its family's effect. ``u_model×architecture`` is how
  well one model's software uses one architecture (kernels, fusions, fp8 engines differ by generation): a new
  device of a known architecture inherits it from its siblings.
* ``tf32_gap`` = log(TF32 peak / FP32 peak) on fp32-labelled runs of devices with TF32 tensor cores: PyTorch
  runs fp32 convolutions (and, with ``allow_tf32``, matmuls) in TF32, so how much of that gap fp32 runs get is
  learned, not assumed.

* ``u_model×software`` is what one software generation of a benchmark gained on every device (MLPerf rounds:
  vendors' kernels improve from round to round); rows without a round (your runs, queries) get none.
* Each model's batch elasticity departs from the pooled one (partially pooled): batching helps a small-kernel
  model more than a large-matmul one.

Prediction intervals come from :class:`~perfmodel.models.TrainingTimeModel`'s conformity scores
(:mod:`perfmodel.models._conformal`), like every method's; :meth:`RooflineRegressor.cross_predict` computes the
refits they need from the full fit's Gram matrix (the same solutions, a fraction of the time).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from .._validation import check_positive_float
from ..features import ROOFLINE_COLUMNS
from ..metrics import r2
from ._columns import NamedColumnsMixin

__all__ = ["RooflineRegressor"]

_COL = {name: i for i, name in enumerate(ROOFLINE_COLUMNS)}
_FIXED = ("ridge", "tf32_gap", "log_n", "log_nodes", "log_batch", "comm_rel", "opt_rel", "log_work", "log_peak")
_GROUPS = ("family_code", "model_code", "vendor_code", "arch_code", "device_code", "precision_code", "software_code")
#: Fixed slopes each model may depart from (partially pooled): its memory-bound share and its batch elasticity
#: (a per-model count elasticity was tried in a one-off check and made leave-one-device-type-out error worse).
_MODEL_SLOPES = ("ridge", "log_batch")
#: Where the slope prior (``tau_slope``) is centred: the physical form, in which a step's time is its compute at the
#: roofline plus its communication plus its optimizer traffic (``log(1 + t_comm/t_peak)`` and
#: ``log(1 + t_opt/t_peak)`` with slope 1), and nothing else moves it (every other slope 0).
_SLOPE_CENTRE = {"comm_rel": 1.0, "opt_rel": 1.0}
_TAUS = ("tau_model", "tau_family", "tau_device", "tau_arch", "tau_vendor", "tau_precision", "tau_kappa",
         "tau_model_arch", "tau_software", "tau_model_software", "tau_batch_slope")
#: Pairs of effects with a pooled interaction (model × architecture, model × software generation).
_INTERACTIONS = (("model_code", "arch_code"), ("model_code", "software_code"))


def _column(X: np.ndarray, name: str) -> np.ndarray:
    if name == "log_peak":  # log FLOP/s of the device at the run's precision: log work − log t_peak
        return X[:, _COL["log_work"]] - X[:, _COL["log_t_peak"]]
    return X[:, _COL[name]]


class RooflineRegressor(NamedColumnsMixin, RegressorMixin, BaseEstimator):
    """Fit the hierarchical roofline form (module docstring) on the columns of ``RunFeaturizer(kind="roofline")``.

    Parameters
    ----------
    tau_model, tau_family, tau_device, tau_arch, tau_vendor, tau_precision, tau_kappa, tau_model_arch : float
        Prior standard deviations (log scale) of the partially pooled effects: how far a model's, family's,
        device's, architecture's, vendor's or precision's efficiency may stray from the pooled value before
        the data must pay for it, of a model's memory-bound share around the pooled one, and of a model's
        efficiency on one architecture. The defaults were chosen by leave-one-device-type-out error on the
        bundled MLPerf table (benchmarks/cross_hardware.py); they are priors on log slow-downs, not fitted
        constants of any one device.
    tau_software, tau_model_software : float
        Prior standard deviations of a software generation's effect (an MLPerf round) on every device, and of
        one model's gain in one generation.
    tau_batch_slope : float
        Prior standard deviation of a model's batch elasticity around the pooled one.
    tau_slope : float or None, default=0.5
        Prior standard deviation of each fixed slope (device count, nodes, batch, communication and optimizer
        shares, work, peak, ridge point, TF32 gap), per unit of its log covariate, around the physical form: time =
        compute at the roofline + communication + optimizer traffic (slope 1 on ``log(1 + t_comm/t_peak)`` and on
        ``log(1 + t_opt/t_peak)``, 0 on the others). Elasticities of order one, which hundreds of runs overrule and
        a handful cannot; a history of one device count keeps the communication term at its physical slope.
        Without it (None) a history of a few runs leaves the slopes unidentified, and a refit on seven runs
        predicted a held-out one at 10^47 times its time. Chosen on the development sets, confirmed on Lambda's
        table: ``benchmarks/roofline_slope_prior.py`` (benchmarks/results/roofline_slope_prior.txt).
    columns : dict of str to str, optional
        Where each quantity of the form is in ``X``: ``{quantity: column name}``, the quantities being
        :data:`~perfmodel.features.ROOFLINE_COLUMNS` (``log_t_peak`` is required). A quantity left out is the
        same in every run: a covariate 0 (no slope to fit), a code 0 (one level, one pooled effect). A plain
        array's columns are named ``"x0"``, ``"x1"``, ... None (the default): every quantity in the column of
        its own name, by name in a DataFrame, in :data:`~perfmodel.features.ROOFLINE_COLUMNS` order in a plain
        array (:mod:`perfmodel.models._columns`).

    Attributes
    ----------
    coef_ : ndarray
        The MAP coefficients (:meth:`effects` names them).
    sigma2_ : float
        Residual variance estimated alongside them.
    n_levels_ : tuple of int
        Levels of each pooled effect (family, model, vendor, architecture, device, precision, software).
    center_ : ndarray
        Means of the fixed covariates over the runs (the design centres them).
    model_batch_center_ : ndarray
        Each model's mean log batch.
    resid_std_, rsquared_ : float
        In-sample residual standard deviation and R² of log step time.
    columns_ : dict
        The column read for each quantity (None: absent, the same in every run).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        The column names of ``X``, when it was a DataFrame.
    """

    _QUANTITIES = ROOFLINE_COLUMNS
    _FEATURE_SET = "roofline"
    _ABSENT = {c: 0.0 for c in ROOFLINE_COLUMNS}
    _REQUIRED = ("log_t_peak",)
    _CODES = _GROUPS

    def __init__(self, *, tau_model: float = 1.0, tau_family: float = 1.0, tau_device: float = 0.2,
                 tau_arch: float = 0.25, tau_vendor: float = 0.4, tau_precision: float = 0.5,
                 tau_kappa: float = 0.3, tau_model_arch: float = 0.5, tau_software: float = 0.2,
                 tau_model_software: float = 0.2, tau_batch_slope: float = 0.2, tau_slope: float | None = 0.5,
                 columns: dict | None = None):
        self.tau_model = tau_model
        self.tau_family = tau_family
        self.tau_device = tau_device
        self.tau_arch = tau_arch
        self.tau_vendor = tau_vendor
        self.tau_precision = tau_precision
        self.tau_kappa = tau_kappa
        self.tau_model_arch = tau_model_arch
        self.tau_software = tau_software
        self.tau_model_software = tau_model_software
        self.tau_batch_slope = tau_batch_slope
        self.tau_slope = tau_slope
        self.columns = columns

    # ------------------------------------------------------------------------------------------ design
    def _matrix(self, X: np.ndarray) -> np.ndarray:
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
            if g == "model_code":  # δ_m · (ridge − ridge̅), then the model's own batch and count elasticities
                cols.append(block * fixed[:, [_FIXED.index("ridge")]])
                # the batch elasticity around the model's own mean batch: within-model only, so the pooled
                # slope keeps what batch says across models (a new model has no mean of its own: 0)
                mean_b = np.zeros(len(X))
                mean_b[np.flatnonzero(ok)] = self.model_batch_center_[code[ok]]
                cols.append(block * (_column(X, "log_batch") - mean_b)[:, None])
        # model × architecture: how well a benchmark's software uses one architecture, shared by its devices;
        # model × software generation: how much one release of a benchmark's software gained on every device
        for ga, gb in _INTERACTIONS:
            a = X[:, _COL[ga]].astype(int)
            b = X[:, _COL[gb]].astype(int)
            n_a, n_b = self.n_levels_[_GROUPS.index(ga)], self.n_levels_[_GROUPS.index(gb)]
            inter = np.zeros((n, n_a * n_b))
            ok = (a >= 0) & (b >= 0) & (a < n_a) & (b < n_b)
            inter[np.flatnonzero(ok), (a * n_b + b)[ok]] = 1.0
            cols.append(inter)
        return np.hstack(cols)

    def _penalty(self) -> np.ndarray:
        taus = {"family_code": self.tau_family, "model_code": self.tau_model, "vendor_code": self.tau_vendor,
                "arch_code": self.tau_arch, "device_code": self.tau_device, "precision_code": self.tau_precision,
                "software_code": self.tau_software}
        tau_inter = {("model_code", "arch_code"): self.tau_model_arch,
                     ("model_code", "software_code"): self.tau_model_software}
        tau_slope = getattr(self, "tau_slope", None)  # absent in a regressor pickled before it existed: no prior
        pen = [np.zeros(1), np.full(len(_FIXED), 1e-6 if tau_slope is None else 1.0 / tau_slope ** 2)]
        for g, size in zip(_GROUPS, self.n_levels_):
            pen.append(np.full(size, 1.0 / taus[g] ** 2))
            if g == "model_code":
                for tau in (self.tau_kappa, self.tau_batch_slope):
                    pen.append(np.full(size, 1.0 / tau ** 2))
        for ga, gb in _INTERACTIONS:
            size = self.n_levels_[_GROUPS.index(ga)] * self.n_levels_[_GROUPS.index(gb)]
            pen.append(np.full(size, 1.0 / tau_inter[(ga, gb)] ** 2))
        return np.concatenate(pen)

    def _fit_gram(self, G, b, rr, n, var_r):
        """MAP fit with the residual variance estimated alongside (three passes), from the Gram matrix ``G = ZᵀZ``, ``b = Zᵀr`` and ``rr = rᵀr`` of the rows: the
        refits of the conformity scores subtract the held-out rows' Gram from the full one instead of
        rebuilding it (same solution, a fraction of the time)."""
        sigma2 = max(var_r * 0.05, 1e-4)
        for _ in range(3):
            # the Gaussian prior N(mu, 1 / pen) of every coefficient (sd tau): (G + sigma2 P) theta = b + sigma2 P mu
            theta = np.linalg.solve(G + np.diag(self._pen * sigma2), b + self._pen * sigma2 * self._mu)
            sse = rr - 2 * theta @ b + theta @ G @ theta
            sigma2 = max(float(sse) / max(n, 1), 1e-4)
        return theta, sigma2

    def _fit_without(self, Z, r, te):
        """The MAP fit on every row but ``te`` (an index array), through the full Gram matrix."""
        Zt, rt = Z[te], r[te]
        keep = np.ones(len(r), bool)
        keep[te] = False
        return self._fit_gram(self._G - Zt.T @ Zt, self._b - Zt.T @ rt, self._rr - float(rt @ rt),
                              int(keep.sum()), float(np.var(r[keep])))[0]

    # ---------------------------------------------------------------------------------------------- fit
    def _prepare(self, X, y):
        """The residual target ``r = log y − log t_peak`` and the design matrix of the fitted levels."""
        r = np.log(y) - X[:, _COL["log_t_peak"]]
        return self._matrix(X), r

    def fit(self, X, y):
        """Fit the MAP of the hierarchical form: one ridge-penalised least-squares problem on log step time.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_runs, n_features)
            The design: the columns of ``RunFeaturizer(kind="roofline")``, or those named by ``columns``
            (finite: a device without a peak at the run's precision has no roofline).
        y : array-like of shape (n_runs,)
            Step times in seconds (positive; at least 3 runs).

        Returns
        -------
        self : RooflineRegressor
            Fitted.
        """
        for name in _TAUS:
            check_positive_float(getattr(self, name), name, "RooflineRegressor")
        check_positive_float(self.tau_slope, "tau_slope", "RooflineRegressor", allow_none=True)
        X, y = self._validate_fit(X, y)
        self.n_levels_ = tuple(int(max(X[:, _COL[g]].max(), -1)) + 1 for g in _GROUPS)
        self.center_ = np.array([_column(X, c).mean() for c in _FIXED])
        mcode = X[:, _COL["model_code"]].astype(int)
        lb = _column(X, "log_batch")
        self.model_batch_center_ = np.array([lb[mcode == m].mean() if np.any(mcode == m) else 0.0
                                             for m in range(self.n_levels_[_GROUPS.index("model_code")])])
        self._pen = self._penalty()
        self._mu = np.zeros(len(self._pen))  # the prior's centre: 0 for every effect, the physical form's slopes
        if self.tau_slope is not None:
            for name, value in _SLOPE_CENTRE.items():
                self._mu[1 + _FIXED.index(name)] = value
        Z, r = self._prepare(X, y)
        # small solves: one BLAS thread each (threaded BLAS on a few-hundred-row system is slower, and 50–100×
        # slower on a busy machine)
        with threadpool_limits(limits=1, user_api="blas"):
            self.coef_, self.sigma2_ = self._fit_gram(Z.T @ Z, Z.T @ r, float(r @ r), len(r), float(np.var(r)))
        resid = r - Z @ self.coef_
        logy = np.log(y)
        self.resid_std_ = float(np.std(resid, ddof=1)) if len(y) > 1 else 0.0
        self.rsquared_ = r2(logy, logy - resid)
        return self

    def cross_predict(self, X, y, folds) -> np.ndarray:
        """Out-of-fold predictions for ``folds``: each fold's MAP fit on its training rows, from the full Gram
        matrix minus the test rows'.

        Columns of the levels only the test rows have get no data and keep their prior (0): the held-out group's
        effect is unknown to the refit, as it would be to a new query.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_runs, n_features)
            The design of the runs this model was fitted on, in the same order.
        y : array-like of shape (n_runs,)
            Their step times.
        folds : iterable of (train, test) index arrays
            The splits over those rows.

        Returns
        -------
        ndarray of shape (n_runs,)
            Each test row's prediction by the fit without its fold (NaN for a row in no test fold).
        """
        X = self._validate_predict(X, "coef_")
        y = np.asarray(y, dtype=float)
        Z, r = self._prepare(X, y)
        out = np.full(len(y), np.nan)
        with threadpool_limits(limits=1, user_api="blas"):
            self._G, self._b, self._rr = Z.T @ Z, Z.T @ r, float(r @ r)
            try:
                for _, te in folds:
                    out[te] = Z[te] @ self._fit_without(Z, r, te)
            finally:
                del self._G, self._b, self._rr  # scratch, not fitted state
        return np.exp(X[:, _COL["log_t_peak"]] + out)

    # ------------------------------------------------------------------------------------------ predict
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
        X = self._validate_predict(X, "coef_")
        return np.exp(X[:, _COL["log_t_peak"]] + self._matrix(X) @ self.coef_)

    def effects(self, feature_names: dict | None = None):
        """The fitted coefficients as a table: intercept, fixed slopes, then each pooled effect by level.

        Parameters
        ----------
        feature_names : dict, optional
            ``{code column: labels}`` naming the levels of each pooled effect (e.g. ``{"device_code":
            RunFeaturizer.gpu_types_}``); levels without labels are numbered.

        Returns
        -------
        DataFrame
            One column, ``value``, indexed by coefficient name.
        """
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
                names += [f"batch_slope_delta[model={lab}]" for lab in labels]
        for ga, gb in _INTERACTIONS:
            la = feature_names.get(ga) or [str(i) for i in range(self.n_levels_[_GROUPS.index(ga)])]
            lb = feature_names.get(gb) or [str(i) for i in range(self.n_levels_[_GROUPS.index(gb)])]
            na, nb = ga.replace("_code", ""), gb.replace("_code", "")
            names += [f"efficiency_log[{na}={x} x {nb}={z}]" for x in la for z in lb]
        return pd.DataFrame({"value": self.coef_}, index=names)
