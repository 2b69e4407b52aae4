"""An op-level step-time model: per op class, compute at a fitted efficiency plus memory traffic at a fitted
bandwidth share, with a launch overhead per kernel (method ``"ops"``).

    T_step = λ·K + m_s·t_step_bytes + m_o·t_opt_bytes + Σ_c [ t_flops_c · e^(μ_f + δ_c) + t_bytes_c ·
             e^(μ_m + ε_c) ] + 1[n > 1] · (c0 + c1 · t_comm),    g = (GFLOP per sample)^-γ_s · batch^-γ_b

* ``t_flops_c`` = FLOPs of op class ``c`` per device-step over the device peak, ``t_bytes_c`` = its bytes over the
  memory bandwidth (seconds at 100%; on CPU the nominal per-thread peak and bandwidth of :mod:`perfmodel.features`);
  ``K`` = kernels per step; ``t_step_bytes`` the batch-independent weight/gradient traffic, ``t_opt_bytes`` the
  optimizer's (columns of ``RunFeaturizer(kind="ops")``, from the history's ``op_*`` columns). There is no
  constant per-step overhead beside ``λ·K``: the framework's fixed cost is per op dispatched (with a constant
  term, a held-out model smaller than every fitted one inherited the overhead of the smallest fitted model;
  without it, leave-one-model-out MAPE on the bundled CPU history fell from about 20% to 13%).
* ``g`` lets the compute efficiency rise with the work per sample and the batch (small kernels run far from peak),
  ``γ_s, γ_b`` in [0, 0.6], as in the physics model.
* ``e^(μ_f + δ_c)`` is the inverse compute efficiency of class ``c`` and ``e^(μ_m + ε_c)`` its inverse memory
  efficiency. They are **shared by every model** (not per model or family): a new architecture that mixes known
  op classes gets their efficiencies. They are **partially pooled**: a ridge penalty ``shrinkage · (δ_c, ε_c)``
  pulls each class toward the pooled efficiency ``μ``, so a class the history barely exercises (say depthwise
  convolution in a history without one) keeps the pooled value rather than an unidentified one. The recurrent
  class's compute efficiency is pooled toward matmul's instead (``δ_recurrent − δ_matmul`` is penalised): its
  FLOPs are the cells' GEMMs, run by the same GEMM routines, while the pooled value is the centre of all
  classes, depthwise and grouped convolution (far from peak) included. Fitted on the whole bundled CPU history
  without this (feature set 2), the recurrent class's efficiency is 0.67 of nominal, matmul's 0.87 and the pooled
  value 0.37.
* All multipliers are positive (fitted on the log scale); least squares on log step time (relative errors), with
  the same weak prior as the physics model for terms the data cannot identify (communication on one device).

Prediction intervals come from :class:`~perfmodel.models.TrainingTimeModel`'s conformity scores
(:mod:`perfmodel.models._conformal`), like every method's.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import least_squares
from sklearn.utils.validation import check_is_fitted

from ..features import OPS_COLUMNS
from ..schema import OP_TRACED_CLASSES
from ._physics import PRIOR_WEIGHT, PhysicsRegressor

__all__ = ["OpsRegressor", "OPS_COLUMNS"]

_C = len(OP_TRACED_CLASSES)
_I = {name: i for i, name in enumerate(OPS_COLUMNS)}
_F0 = _I[f"t_flops_{OP_TRACED_CLASSES[0]}_s"]
_M0 = _I[f"t_bytes_{OP_TRACED_CLASSES[0]}_s"]
_S = 9  # first per-class parameter
#: Classes whose compute efficiency is pooled toward another class's rather than the pooled value: a recurrent
#: cell's FLOPs are its GEMMs (``x·W_ih^T`` and ``h·W_hh^T``, :mod:`perfmodel.measure.opcount`), run by the same
#: GEMM routines as ``matmul``; the pooled value is the centre of every class, the convolutions' included.
_PARENT = {"recurrent": "matmul"}
#: The per-class columns (an ops fit needs at least one).
_CLASS_COLUMNS = tuple(c for c in OPS_COLUMNS if c.startswith(("t_flops_", "t_bytes_")))


class OpsRegressor(PhysicsRegressor):
    """Fit the op-level step-time form (module docstring) on the columns of ``RunFeaturizer(kind="ops")``.

    Parameters
    ----------
    shrinkage : float, default=0.5
        Ridge weight pulling each class's log inverse efficiency toward the pooled one (0: no pooling). Chosen on
        the bundled CPU history's leave-one-model-out and leave-one-family-out splits: 0.3 to 1 give nearly the
        same errors there, 0 (no pooling) overfits the classes a family alone exercises (leave-one-family-out
        median APE ~30% instead of ~15%).
    columns : dict of str to str, optional
        Where each quantity of the form is in ``X``: ``{quantity: column name}``, the quantities being
        :data:`~perfmodel.features.OPS_COLUMNS` (at least one op class's ``t_flops_*_s`` or ``t_bytes_*_s`` is
        required). A quantity left out is the same in every run: times, bytes, kernels and flags 0, batch size,
        device count and work 1, one model family. A plain array's columns are named ``"x0"``, ``"x1"``, ...
        None (the default): every quantity in the column of its own name, by name in a DataFrame, in
        :data:`~perfmodel.features.OPS_COLUMNS` order in a plain array (:mod:`perfmodel.models._columns`).

    Attributes
    ----------
    params_ : ndarray
        ``[log λ, log m_s, log m_o, log c0, log c1, μ_f, μ_m, γ_s, γ_b, δ_0..δ_{C-1}, ε_0..ε_{C-1}]``.
    resid_std_, rsquared_ : float
        In-sample residual standard deviation and R² of log step time.
    columns_ : dict
        The column read for each quantity (None: absent, the same in every run).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        The column names of ``X``, when it was a DataFrame.
    """

    _QUANTITIES = OPS_COLUMNS
    _FEATURE_SET = "ops"
    _ABSENT = {**{c: 0.0 for c in OPS_COLUMNS}, "batch_size": 1.0, "gpu_count": 1.0, "work_gflop": 1.0}
    _REQUIRED = ()
    _REQUIRED_ONE_OF = _CLASS_COLUMNS
    _CODES = ("family_code", "model_code")
    _NONNEGATIVE = tuple(c for c in OPS_COLUMNS if c not in ("family_code", "model_code"))
    _AT = _I
    # parameters: [log λ, log m_s, log m_o, log c0, log c1, μ_f, μ_m, γ_s, γ_b, δ_0..δ_{C-1}, ε_0..ε_{C-1}]
    _N_SHARED = _S

    def __init__(self, *, shrinkage: float = 0.5, columns: dict | None = None):
        self.shrinkage = shrinkage
        self.columns = columns

    def _start(self):
        return np.r_[math.log(1e-5), math.log(2.0), math.log(2.0), math.log(1e-3), 0.0,
                     math.log(5.0), math.log(2.0), 0.0, 0.0, np.zeros(2 * _C)]

    def _terms(self, p, X):
        lam, ms, mo, c0, c1 = (math.exp(v) for v in p[:5])
        kf = np.exp(p[5] + p[_S:_S + _C])
        km = np.exp(p[6] + p[_S + _C:_S + 2 * _C])
        batch = np.maximum(X[:, _I["batch_size"]], 1.0)
        per_sample = np.maximum(X[:, _I["work_gflop"]] / batch, 1e-12)
        # efficiency rises with the work per sample and the batch (small kernels run far from peak)
        scale = np.exp(-(p[7] * np.log(per_sample) + p[8] * np.log(batch)))
        compute = (X[:, _F0:_F0 + _C] @ kf) * scale
        memory = X[:, _M0:_M0 + _C] @ km
        fixed = lam * X[:, _I["kernels"]]
        weights = ms * X[:, _I["t_step_bytes_s"]] + mo * X[:, _I["t_opt_bytes_s"]]
        comm = X[:, _I["data_parallel"]] * (c0 + c1 * X[:, _I["t_comm_s"]])
        return fixed, weights, compute, memory, comm

    def _predict_raw(self, p, X):
        return np.maximum(sum(self._terms(p, X)), 1e-12)

    def _fit_params(self, X, y):
        p0 = self._start()
        lo, hi = np.full(len(p0), -40.0), np.full(len(p0), 20.0)
        lo[7:9], hi[7:9] = 0.0, 0.6
        p0 = np.clip(p0, lo + 1e-9, hi - 1e-9)
        logy = np.log(y)
        w = PRIOR_WEIGHT
        s = float(self.shrinkage)
        if not (np.isfinite(s) and s >= 0):
            raise ValueError(f"The 'shrinkage' parameter of OpsRegressor must be a non-negative float. Got {s!r}.")

        # a class with a parent (_PARENT) is pooled toward the parent's compute efficiency, the others toward
        # the pooled value
        parent = np.arange(2 * _C)
        for child, par in _PARENT.items():
            parent[OP_TRACED_CLASSES.index(child)] = OP_TRACED_CLASSES.index(par)
        has_parent = parent != np.arange(2 * _C)

        def resid(p):
            d = p[_S:]
            return np.r_[np.log(self._predict_raw(p, X)) - logy, w * (p[:_S] - p0[:_S]),
                         s * np.where(has_parent, d - d[parent], d)]

        return least_squares(resid, p0, bounds=(lo, hi), method="trf", x_scale="jac", max_nfev=3000).x

    def decompose(self, X):
        """The fitted terms of each step in seconds: launches, weights/optimizer traffic, compute and memory time
        of every op class, communication.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_runs, n_features)
            The design, with the columns the fit read.

        Returns
        -------
        DataFrame
            Columns ``launch_s``, ``weights_optimizer_s``, one ``<class>_s`` per op class
            (:data:`~perfmodel.schema.OP_TRACED_CLASSES`) and ``communication_s``; one row per run, in order
            (a fresh 0-based index). Their sum is :meth:`predict` (before its floor at 1e-12 s).
        """
        import pandas as pd

        X = self._validate_predict(X, "params_")
        p = self.params_
        fixed, weights, _, _, comm = self._terms(p, X)
        out = {"launch_s": fixed, "weights_optimizer_s": weights}
        kf = np.exp(p[5] + p[_S:_S + _C])
        km = np.exp(p[6] + p[_S + _C:_S + 2 * _C])
        batch = np.maximum(X[:, _I["batch_size"]], 1.0)
        per_sample = np.maximum(X[:, _I["work_gflop"]] / batch, 1e-12)
        scale = np.exp(-(p[7] * np.log(per_sample) + p[8] * np.log(batch)))
        for i, c in enumerate(OP_TRACED_CLASSES):
            out[f"{c}_s"] = X[:, _F0 + i] * kf[i] * scale + X[:, _M0 + i] * km[i]
        out["communication_s"] = comm
        return pd.DataFrame(out)

    def coef_table(self, family_names=None):
        """Fitted constants: seconds per kernel, traffic factors, communication, and each op class's compute and
        memory efficiency (fractions of the nominal peak and bandwidth; on CPU relative to nominal figures, so
        they may exceed 1).

        Parameters
        ----------
        family_names : list of str, optional
            Not used (the op-level efficiencies are shared by every family); accepted so that every physical
            form's table is asked for the same way.

        Returns
        -------
        DataFrame
            One column, ``value``, indexed by constant name.
        """
        import pandas as pd

        check_is_fitted(self, "params_")
        p = self.params_
        names = ["launch_s_per_kernel", "weights_traffic_factor", "optimizer_traffic_factor",
                 "c0_comm_latency_s", "c1_comm", "pooled_compute_efficiency", "pooled_memory_efficiency",
                 "gamma_per_sample_gflop", "gamma_batch"]
        values = [math.exp(v) for v in p[:5]] + [math.exp(-p[5]), math.exp(-p[6]), p[7], p[8]]
        for i, c in enumerate(OP_TRACED_CLASSES):
            names += [f"compute_efficiency[{c}]", f"memory_efficiency[{c}]"]
            values += [math.exp(-(p[5] + p[_S + i])), math.exp(-(p[6] + p[_S + _C + i]))]
        return pd.DataFrame({"value": values}, index=names)
