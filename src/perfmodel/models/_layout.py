"""The layout model: one optimizer step of transformer training, from the physical parts of
:mod:`perfmodel.layout_features` and fitted efficiencies and latencies.

Per micro-batch on the busiest pipeline stage::

    T_mb = Σ_g smax(F_g / (e_gemm · r8^fp8), B_g / e_bw)          GEMMs: layers, experts, head (a smooth roofline)
         + F_attn / e_attn                                         attention scores and values
         + κ_mem · T_mem + γ · T_acc + α · T_scores                memory-bound kernels, gradient accumulation,
         + τ · kernels + c_mb                                      unfused attention's scores, launches, scheduling
         + λ · n_calls                                             latency of each collective call and send (α–β's α)
         + x_layer · (C_nvl / η_nvl + C_net / η_net)               exposed tensor/context/expert collectives

and per step::

    T_pipe = (m + (pp−1)/vp) · T_mb + m · (S_nvl / η_nvl + S_net / η_net)     1F1B schedule and its sends
    D      = D_nvl / η_nvl + D_net / η_net                                   data-parallel / FSDP traffic
    T_step = (T_pipe + x_tail · D + smax0((1 − x_tail) · D − ω · T_pipe) + κ_mem · T_opt + c0) · (1 + j · √(2 ln N))

The last factor is synchronisation: a step ends when the slowest of its ``N`` devices does, and the largest of
``N`` draws of a device's step time lies about ``√(2 ln N)`` spreads above their mean, ``j`` being a device's
relative spread (fitted). It makes throughput per device fall, slowly, as a job grows.

``smax(a, b) = (a³ + b³)^(1/3)``; ``smax0(z)`` a smooth ``max(z, 0)``. The coefficients (:data:`COEFFICIENTS`) are
shared by every device, model and layout: a device enters only through its datasheet (peaks, memory bandwidth,
links), so B200 differs from A100 by what its datasheet says, and fp8 by a fitted GEMM speed-up ``2·r8`` (at most
the datasheet's 2), with attention and memory-bound kernels unchanged.

The fit is nonlinear least squares on log step time (multiplicative errors), each coefficient pulled towards a
prior (:data:`PRIOR`, or a fitted model's coefficients: :meth:`LayoutRegressor.with_prior`) by ``prior_weight``
per coefficient: a history that cannot identify a coefficient (no pipeline runs, one device) leaves it at the
prior, and an organisation's few own runs move the coefficients only as far as they show.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import least_squares
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ..layout_features import LAYOUT_FEATURES
from ..metrics import r2
from ._columns import NamedColumnsMixin

__all__ = ["LayoutRegressor", "COEFFICIENTS", "PRIOR", "PRIOR_WEIGHT", "CALIBRATION_PRIOR_WEIGHT"]

#: The fitted coefficients: name -> (prior value, lower bound, upper bound, what it is).
COEFFICIENTS = {
    "gemm_eff": (0.7, 0.3, 0.95, "fraction of the peak a large GEMM reaches"),
    "fp8_gemm_eff": (0.7, 0.3, 1.0, "fp8 GEMMs' fraction of gemm_eff at the fp8 peak (speed-up 2·r8 over 16-bit)"),
    "gemm_bw_eff": (0.5, 0.05, 1.0, "fraction of the memory bandwidth a bandwidth-bound GEMM reaches"),
    "attn_eff": (0.5, 0.15, 1.0, "fraction of the 16-bit peak attention kernels reach (counting no causal saving)"),
    "mem_factor": (2.0, 0.3, 10.0, "memory-bound traffic per activation byte (forward + backward passes)"),
    "grad_acc": (1.0, 0.05, 4.0, "passes over the stage's weights' fp32 gradients per micro-batch (accumulation)"),
    "attn_mem": (1.0, 0.2, 5.0, "share of the unfused attention's score-matrix passes that reach memory"),
    "launch_s": (5e-6, 1e-6, 2e-5, "seconds per kernel launched"),
    "collective_s": (2e-5, 1e-6, 1e-2, "seconds of latency per collective call and pipeline send, whatever its size "
                                       "(the α of an α–β model: ~10 µs in NCCL, milliseconds in gloo on a CPU)"),
    "microbatch_s": (2e-3, 1e-5, 0.05, "seconds per micro-batch on a stage outside its kernels (scheduling, syncs)"),
    "layer_comm_exposed": (0.6, 0.1, 1.0, "share of the in-layer collectives not hidden behind compute"),
    "nvlink_eff": (0.7, 0.4, 0.95, "fraction of the one-way NVLink bandwidth collectives reach"),
    "network_eff": (0.6, 0.3, 0.95, "fraction of the one-way network bandwidth collectives reach"),
    "dp_overlap": (0.8, 0.1, 1.0, "share of the step's compute data-parallel traffic can hide behind"),
    "dp_tail": (0.1, 0.01, 1.0, "share of the data-parallel traffic that is never hidden"),
    "jitter": (0.02, 1e-4, 0.2, "relative spread of one device's step time; the step waits for the slowest"),
    "step_overhead_s": (0.05, 1e-3, 2.0, "seconds per step outside the schedule (optimizer launch, logging, data)"),
}
#: The prior of every coefficient (its first value in :data:`COEFFICIENTS`).
PRIOR = {k: v[0] for k, v in COEFFICIENTS.items()}
#: The pull of each coefficient towards its prior in a fit of the bundled histories: one run's squared log error at
#: an e-fold miss (chosen on the development sets, leave-one-set-out: benchmarks/llm_layouts.py).
PRIOR_WEIGHT = 1.0
#: The pull towards a fitted model's coefficients when an organisation's own runs calibrate it: weak, so that a few
#: runs move what they show (chosen on the development sets, calibrating on 1, 3 and 9 runs of a held-out set).
CALIBRATION_PRIOR_WEIGHT = 0.05
_NAMES = tuple(COEFFICIENTS)
_LO = np.log([COEFFICIENTS[k][1] for k in _NAMES])
_HI = np.log([COEFFICIENTS[k][2] for k in _NAMES])
_F = {name: i for i, name in enumerate(LAYOUT_FEATURES)}
_Q = 3.0


def _smax(a, b):
    hi = np.maximum(np.maximum(a, b), 1e-300)
    return hi * np.power(np.power(a / hi, _Q) + np.power(b / hi, _Q), 1.0 / _Q)


class LayoutRegressor(NamedColumnsMixin, RegressorMixin, BaseEstimator):
    """Fit the layout model (module docstring) on the columns of ``RunFeaturizer(kind="layout")``
    (:data:`~perfmodel.layout_features.LAYOUT_FEATURES`).

    Parameters
    ----------
    prior : dict of str to float, optional
        The value each coefficient is pulled towards (default :data:`PRIOR`); a fitted model's ``coef_`` makes
        its calibration the prior of a refit on other runs.
    prior_weight : float, default=PRIOR_WEIGHT (1.0)
        Weight of each coefficient's pull, in units of one run's squared log error at a factor-of-e miss of the
        prior: a few hundred runs decide what they can identify; calibrations use
        :data:`CALIBRATION_PRIOR_WEIGHT`.
    columns : dict of str to str, optional
        Where each quantity is in ``X`` (:mod:`perfmodel.models._columns`); default by name.

    Attributes
    ----------
    coef_ : dict of str to float
        The fitted coefficients.
    resid_std_, rsquared_ : float
        In-sample residual standard deviation and R² of log step time.

    Examples
    --------
    >>> import numpy as np
    >>> from perfmodel.layout_features import LAYOUT_FEATURES
    >>> X = np.zeros((3, len(LAYOUT_FEATURES)))
    >>> X[:, LAYOUT_FEATURES.index("layer_flops_s")] = [0.1, 0.2, 0.4]
    >>> X[:, LAYOUT_FEATURES.index("microbatches")] = 1.0
    >>> reg = LayoutRegressor().fit(X, [0.18, 0.32, 0.6])
    >>> bool(reg.predict(X)[2] > reg.predict(X)[0])
    True
    """

    _QUANTITIES = LAYOUT_FEATURES
    _FEATURE_SET = "layout"
    _ABSENT = {name: 0.0 for name in LAYOUT_FEATURES}
    _ABSENT["microbatches"] = 1.0
    _ABSENT["source_weight"] = 1.0
    _REQUIRED = ("layer_flops_s",)
    _NONNEGATIVE = LAYOUT_FEATURES

    def __init__(self, *, prior: dict | None = None, prior_weight: float = PRIOR_WEIGHT, columns: dict | None = None):
        self.prior = prior
        self.prior_weight = prior_weight
        self.columns = columns

    # ------------------------------------------------------------------------------------------ the form
    @staticmethod
    def _parts(theta: np.ndarray, X: np.ndarray) -> dict:
        c = dict(zip(_NAMES, np.exp(theta)))
        col = lambda name: X[:, _F[name]]  # noqa: E731
        e_gemm = c["gemm_eff"] * np.where(col("fp8") > 0.5, c["fp8_gemm_eff"], 1.0)
        gemm = sum(_smax(col(f"{g}_flops_s") / e_gemm, col(f"{g}_bytes_s") / c["gemm_bw_eff"])
                   for g in ("layer", "expert", "head"))
        attn = col("attn_flops_s") / c["attn_eff"]
        mem = (c["mem_factor"] * col("mem_s") + c["grad_acc"] * col("grad_acc_s") + c["attn_mem"] * col("attn_bytes_s")
               + c["launch_s"] * col("kernels") + c["microbatch_s"])
        comm = c["layer_comm_exposed"] * (col("xl_nvl_s") / c["nvlink_eff"] + col("xl_net_s") / c["network_eff"])
        latency = c["collective_s"] * col("collectives")
        per_mb = gemm + attn + mem + comm + latency
        sends = col("p2p_nvl_s") / c["nvlink_eff"] + col("p2p_net_s") / c["network_eff"]
        pipe = (col("microbatches") + col("bubble")) * per_mb + col("microbatches") * sends
        dp = col("dp_nvl_s") / c["nvlink_eff"] + col("dp_net_s") / c["network_eff"]
        z = (1 - c["dp_tail"]) * dp - c["dp_overlap"] * pipe
        width = 0.02 * pipe + 1e-9
        hidden_miss = 0.5 * (z + np.sqrt(z * z + width * width)) - 0.5 * width
        dp_exposed = c["dp_tail"] * dp + np.maximum(hidden_miss, 0.0)
        opt = c["mem_factor"] * col("opt_s")
        base = pipe + dp_exposed + opt + c["step_overhead_s"]
        sync = base * c["jitter"] * col("sync_spread")
        return {"gemm": gemm, "attention": attn, "memory": mem, "layer_comm": comm, "latency": latency,
                "per_microbatch": per_mb,
                "pipeline": pipe, "bubble": col("bubble") * per_mb, "dp_exposed": dp_exposed, "optimizer": opt,
                "overhead": np.full(len(X), c["step_overhead_s"]), "sync": sync, "total": base + sync}

    def _prior_theta(self) -> np.ndarray:
        prior = dict(PRIOR)
        if self.prior is not None:
            unknown = set(self.prior) - set(_NAMES)
            if unknown:
                raise ValueError(f"The 'prior' parameter of LayoutRegressor names unknown coefficients "
                                 f"{sorted(unknown)}; known: {', '.join(_NAMES)}.")
            prior.update(self.prior)
        values = np.array([prior[k] for k in _NAMES], dtype=float)
        if not np.all(np.isfinite(values) & (values > 0)):
            raise ValueError("The 'prior' parameter of LayoutRegressor must give positive finite coefficients.")
        return np.clip(np.log(values), _LO, _HI)

    # ------------------------------------------------------------------------------------------ fit
    def fit(self, X, y, sample_weight=None):
        """Fit the coefficients by least squares on log step time.

        Parameters
        ----------
        X : array-like or DataFrame, shape (n_runs, n_features)
            The layout quantities.
        y : array-like, shape (n_runs,)
            Step times in seconds (positive).
        sample_weight : array-like, shape (n_runs,), optional
            Weight of each run's squared log error; default the ``source_weight`` column (every source of the
            history weighs the same), else 1.

        Returns
        -------
        LayoutRegressor
            self.
        """
        Z, y = self._validate_fit(X, y, min_runs=1 if self.prior is not None else 3)
        if not (isinstance(self.prior_weight, (int, float)) and not isinstance(self.prior_weight, bool)
                and math.isfinite(self.prior_weight) and self.prior_weight >= 0):
            raise ValueError(f"The 'prior_weight' parameter of LayoutRegressor must be a finite number >= 0. Got "
                             f"{self.prior_weight!r}.")
        if sample_weight is None and self.columns_.get("source_weight") is not None:
            given = Z[:, _F["source_weight"]]
            if np.all(np.isfinite(given) & (given > 0)):
                sample_weight = given  # every source of the history weighs the same
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        if w.shape != y.shape or not np.all(np.isfinite(w) & (w >= 0)):
            raise ValueError("sample_weight must be finite, >= 0 and one per run.")
        sw = np.sqrt(w / max(w.mean(), 1e-300))
        theta0 = self._prior_theta()
        pw = math.sqrt(self.prior_weight)
        ly = np.log(y)

        def resid(theta):
            pred = self._parts(theta, Z)["total"]
            return np.r_[sw * (np.log(np.maximum(pred, 1e-300)) - ly), pw * (theta - theta0)]

        res = least_squares(resid, theta0, bounds=(_LO, _HI), x_scale=1.0, method="trf", max_nfev=400)
        self.theta_ = res.x
        self.coef_ = {k: float(v) for k, v in zip(_NAMES, np.exp(res.x))}
        lp = np.log(self._parts(res.x, Z)["total"])
        self.resid_std_ = float(np.std(ly - lp, ddof=min(len(ly) - 1, 1))) if len(ly) > 1 else 0.0
        self.rsquared_ = float(r2(ly, lp)) if len(ly) > 1 else float("nan")
        self.n_fit_ = len(y)
        return self

    # ------------------------------------------------------------------------------------------ predict
    def predict(self, X) -> np.ndarray:
        """Predicted step times (seconds).

        Parameters
        ----------
        X : array-like or DataFrame, shape (n_queries, n_features)
            The layout quantities.

        Returns
        -------
        numpy.ndarray, shape (n_queries,)
        """
        check_is_fitted(self, "theta_")
        Z = self._validate_predict(X, "theta_")
        return self._parts(self.theta_, Z)["total"]

    def breakdown(self, X) -> dict:
        """Where each predicted step's time goes.

        Parameters
        ----------
        X : array-like or DataFrame, shape (n_queries, n_features)
            The layout quantities.

        Returns
        -------
        dict of str to numpy.ndarray
            Seconds per step: ``gemm``, ``attention``, ``memory`` (memory-bound kernels and launches),
            ``layer_comm`` (exposed in-layer collectives), ``latency`` (the collective calls' and sends'
            latency) — each per micro-batch, together ``per_microbatch`` —, and per step ``pipeline`` (the
            1F1B schedule with its bubble and sends), ``bubble``, ``dp_exposed``, ``optimizer``, ``overhead``,
            ``sync`` (waiting for the slowest device) and ``total``.
        """
        check_is_fitted(self, "theta_")
        return self._parts(self.theta_, self._validate_predict(X, "theta_"))

    def with_prior(self, *, prior_weight: float = CALIBRATION_PRIOR_WEIGHT) -> LayoutRegressor:
        """A new, unfitted regressor whose prior is this one's fitted coefficients.

        Parameters
        ----------
        prior_weight : float, default=CALIBRATION_PRIOR_WEIGHT
            Its prior weight.

        Returns
        -------
        LayoutRegressor
            For calibrating these coefficients on other runs (an organisation's own).
        """
        check_is_fitted(self, "theta_")
        return LayoutRegressor(prior=dict(self.coef_), prior_weight=prior_weight, columns=self.columns)

    def coef_table(self):
        """The coefficients, their priors and what they are.

        Returns
        -------
        pandas.DataFrame
            Indexed by coefficient: ``value``, ``prior``, ``meaning``.
        """
        import pandas as pd

        check_is_fitted(self, "theta_")
        prior = np.exp(self._prior_theta())
        return pd.DataFrame({"value": [self.coef_[k] for k in _NAMES], "prior": prior,
                             "meaning": [COEFFICIENTS[k][3] for k in _NAMES]}, index=list(_NAMES))
