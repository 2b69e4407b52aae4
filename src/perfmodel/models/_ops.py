"""An op-level step-time model: per op class, compute at a fitted efficiency plus memory traffic at a fitted
bandwidth share, with a launch overhead per kernel (method ``"ops"``).

    T_step = a0 + λ·K + m_s·t_step_bytes + m_o·t_opt_bytes + Σ_c [ t_flops_c · e^(μ_f + δ_c) + t_bytes_c ·
             e^(μ_m + ε_c) ] + 1[n > 1] · (c0 + c1 · t_comm)

* ``t_flops_c`` = FLOPs of op class ``c`` per device-step over the device peak, ``t_bytes_c`` = its bytes over the
  memory bandwidth (seconds at 100%; on CPU the nominal per-thread peak and bandwidth of :mod:`perfmodel.features`);
  ``K`` = kernels per step; ``t_step_bytes`` the batch-independent weight/gradient traffic, ``t_opt_bytes`` the
  optimizer's (columns of ``RunFeaturizer(kind="ops")``, from the history's ``op_*`` columns).
* ``e^(μ_f + δ_c)`` is the inverse compute efficiency of class ``c`` and ``e^(μ_m + ε_c)`` its inverse memory
  efficiency. They are **shared by every model** (not per model or family): a new architecture that mixes known
  op classes gets their efficiencies. They are **partially pooled**: a ridge penalty ``shrinkage · (δ_c, ε_c)``
  pulls each class toward the pooled efficiency ``μ``, so a class the history barely exercises (say depthwise
  convolution in a history without one) keeps the pooled value rather than an unidentified one.
* All multipliers are positive (fitted on the log scale); least squares on log step time (relative errors), with
  the same weak prior as the physics model for terms the data cannot identify (communication on one device).

Prediction intervals are the physics model's cross-conformal scores (random K-fold for a seen configuration,
leave-one-batch-size-out, leave-one-model-out split by whether the family had a sibling in the refit), chosen by
the query's kind.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import least_squares

from ..features import OPS_COLUMNS
from ..schema import OP_TRACED_CLASSES
from ._physics import _PRIOR_WEIGHT, PhysicsRegressor

__all__ = ["OpsRegressor", "OPS_COLUMNS"]

_C = len(OP_TRACED_CLASSES)
_I = {name: i for i, name in enumerate(OPS_COLUMNS)}
_F0 = _I[f"t_flops_{OP_TRACED_CLASSES[0]}_s"]
_M0 = _I[f"t_bytes_{OP_TRACED_CLASSES[0]}_s"]


class OpsRegressor(PhysicsRegressor):
    """Fit the op-level step-time form on the columns of ``RunFeaturizer(kind="ops")``.

    Parameters
    ----------
    shrinkage : float, default=0.3
        Ridge weight pulling each class's log inverse efficiency toward the pooled one (0: no pooling).
    cv : int, default=5
        Folds of the random K-fold conformity scores.
    conformal : bool, default=True
        Compute the conformity scores (the refits); False fits the point model only.
    random_state : int, default=0
    """

    _COLUMNS = OPS_COLUMNS
    _FAM, _MODEL, _BATCH, _COUNT = _I["family_code"], _I["model_code"], _I["batch_size"], _I["gpu_count"]
    # parameters: [log a0, log λ, log m_s, log m_o, log c0, log c1, μ_f, μ_m, δ_0..δ_{C-1}, ε_0..ε_{C-1}]
    _N_SHARED = 8

    def __init__(self, *, shrinkage: float = 0.3, cv: int = 5, conformal: bool = True,
                 random_state: int | None = 0):
        self.shrinkage = shrinkage
        self.cv = cv
        self.conformal = conformal
        self.random_state = random_state

    def _start(self):
        return np.r_[math.log(1e-3), math.log(1e-5), math.log(2.0), math.log(2.0), math.log(1e-3), 0.0,
                     math.log(5.0), math.log(2.0), np.zeros(2 * _C)]

    def _terms(self, p, X):
        a0, lam, ms, mo, c0, c1 = (math.exp(v) for v in p[:6])
        kf = np.exp(p[6] + p[8:8 + _C])
        km = np.exp(p[7] + p[8 + _C:8 + 2 * _C])
        compute = X[:, _F0:_F0 + _C] @ kf
        memory = X[:, _M0:_M0 + _C] @ km
        fixed = a0 + lam * X[:, _I["kernels"]]
        weights = ms * X[:, _I["t_step_bytes_s"]] + mo * X[:, _I["t_opt_bytes_s"]]
        comm = X[:, _I["data_parallel"]] * (c0 + c1 * X[:, _I["t_comm_s"]])
        return fixed, weights, compute, memory, comm

    def _predict_raw(self, p, X):
        return np.maximum(sum(self._terms(p, X)), 1e-12)

    def _fit_params(self, X, y):
        p0 = self._start()
        lo, hi = np.full(len(p0), -40.0), np.full(len(p0), 20.0)
        logy = np.log(y)
        w = _PRIOR_WEIGHT
        s = float(self.shrinkage)
        if not (np.isfinite(s) and s >= 0):
            raise ValueError(f"The 'shrinkage' parameter of OpsRegressor must be a non-negative float. Got {s!r}.")

        def resid(p):
            return np.r_[np.log(self._predict_raw(p, X)) - logy, w * (p[:8] - p0[:8]), s * p[8:]]

        return least_squares(resid, p0, bounds=(lo, hi), method="trf", x_scale="jac", max_nfev=3000).x

    def decompose(self, X):
        """The fitted terms of each step in seconds: overhead + launches, weights/optimizer traffic, compute and
        memory time of every op class, communication."""
        import pandas as pd

        X = np.asarray(X, dtype=float)
        p = self.params_
        fixed, weights, _, _, comm = self._terms(p, X)
        out = {"overhead_launch_s": fixed, "weights_optimizer_s": weights}
        kf = np.exp(p[6] + p[8:8 + _C])
        km = np.exp(p[7] + p[8 + _C:8 + 2 * _C])
        for i, c in enumerate(OP_TRACED_CLASSES):
            out[f"{c}_s"] = X[:, _F0 + i] * kf[i] + X[:, _M0 + i] * km[i]
        out["communication_s"] = comm
        return pd.DataFrame(out)

    def coef_table(self, family_names=None):
        """Fitted constants: overhead, seconds per kernel, and each op class's compute and memory efficiency
        (fractions of the nominal peak and bandwidth; on CPU relative to nominal figures, so they may exceed 1)."""
        import pandas as pd

        p = self.params_
        names = ["a0_overhead_s", "launch_s_per_kernel", "weights_traffic_factor", "optimizer_traffic_factor",
                 "c0_comm_latency_s", "c1_comm", "pooled_compute_efficiency", "pooled_memory_efficiency"]
        values = [math.exp(v) for v in p[:6]] + [math.exp(-p[6]), math.exp(-p[7])]
        for i, c in enumerate(OP_TRACED_CLASSES):
            names += [f"compute_efficiency[{c}]", f"memory_efficiency[{c}]"]
            values += [math.exp(-(p[6] + p[8 + i])), math.exp(-(p[7] + p[8 + _C + i]))]
        return pd.DataFrame({"value": values}, index=names)
