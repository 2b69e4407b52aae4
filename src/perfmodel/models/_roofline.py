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

* ``u_model×software`` is what one software generation of a benchmark gained on every device (MLPerf rounds:
  vendors' kernels improve from round to round); rows without a round (your runs, queries) get none.
* Each model's batch elasticity departs from the pooled one (partially pooled): batching helps a small-kernel
  model more than a large-matmul one.

Prediction intervals are cross-conformal on the log scale, with conformity scores from the refit that matches
the query (:data:`QUERY_KINDS`): random K-fold (``seen``: this model, device, batch and count have run),
leave-one-batch-size-out and leave-one-device-count-out (``new_batch``/``new_count``: a known model on a known
device at a batch or count it has not run there), leave-one-(model, device)-out (``new_pair``), a few-shot refit
(``sparse_model``: a model the history knows from runs on one device type only, asked on another — a user's model
calibrated with a few own runs: each model is refitted from 1, 2, 3 or 5 of its runs on one device and scored
on the others; a query uses the set that kept as many runs as its model has, every model weighing the same),
leave-one-device-type-out (``new_device``) and leave-one-model-out (``new_model``; each held-out model's
scores weigh the same, whatever its run count: the models are the exchangeable units). A count outside the
fitted range takes the wider of its kind's and the count's quantiles on a known pair, and adds the count's in
quadrature otherwise; a new device and a new model at once combine the two in quadrature. A known model on a
new device takes its own runs' ``new_device`` scores where they span >= 9 held-out device types
(``device_scores_by_model_``, keyed by model code), and with 2-8 the larger of the pooled quantile and its own
(``device_scores_by_model_few_``: they only widen); see :func:`perfmodel.models._gbm.group_quantiles`.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.model_selection import GroupKFold, KFold
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from .._validation import check_confidence, check_fit_arrays
from ..metrics import r2
from ..features import ROOFLINE_COLUMNS
from ._gbm import balanced_scores, conformal_quantile, few_unit_scores, group_quantiles, scores_by_group

__all__ = ["RooflineRegressor", "QUERY_KINDS"]

_COL = {name: i for i, name in enumerate(ROOFLINE_COLUMNS)}
_FIXED = ("ridge", "tf32_gap", "log_n", "log_nodes", "log_batch", "comm_rel", "opt_rel", "log_work", "log_peak")
_GROUPS = ("family_code", "model_code", "vendor_code", "arch_code", "device_code", "precision_code", "software_code")
#: Fixed slopes each model may depart from (partially pooled): its memory-bound share and its batch elasticity
#: (a per-model count elasticity was tried in a one-off check and made leave-one-device-type-out error worse).
_MODEL_SLOPES = ("ridge", "log_batch")
#: Pairs of effects with a pooled interaction (model × architecture, model × software generation).
_INTERACTIONS = (("model_code", "arch_code"), ("model_code", "software_code"))
#: Kinds of query, each with its own conformity scores (see the module docstring).
QUERY_KINDS = ("seen", "new_batch", "new_count", "new_pair", "sparse_model", "new_device", "new_model")
#: Runs of a held-out model kept (on one device) when scoring ``sparse_model`` queries: "a few own runs". A
#: query's model with n runs in the history gets the scores of the largest keep <= n (the fewer runs, the wider).
_SPARSE_KEEPS = (1, 2, 3, 5)
#: Devices of each model the sparse refits start from (drawn at random).
_SPARSE_DEVICES = 4


def _key(pair: np.ndarray, value: np.ndarray) -> np.ndarray:
    """One hashable key per (model-device pair, value on the log scale)."""
    return np.char.add(np.asarray(pair, dtype=np.int64).astype(str),
                       np.char.add(":", np.round(np.asarray(value, float), 6).astype(str)))


def _unknown(pair: np.ndarray, value: np.ndarray, known: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """``~np.isin(_key(pair, value), known)``, with the text keys built once per distinct (pair, value) among
    ``rows`` (all rows when None; rows outside are reported unknown): queries repeat configurations, and building
    100,000 text keys costs a second."""
    out = np.ones(len(pair), dtype=bool)
    at = np.arange(len(pair)) if rows is None else np.flatnonzero(rows)
    if len(at) == 0:
        return out
    both = np.column_stack([np.asarray(pair, dtype=np.int64)[at].astype(float),
                            np.round(np.asarray(value, float)[at], 6)])
    uniq, inverse = np.unique(both, axis=0, return_inverse=True)
    out[at] = ~np.isin(_key(uniq[:, 0].astype(np.int64), uniq[:, 1]), known)[inverse.ravel()]
    return out


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

    #: Query kinds (by the history column they go beyond) whose intervals this regressor scores itself: all.
    scored_columns = ("gpu_type", "model", "gpu_count", "batch_size")

    def __init__(self, *, tau_model: float = 1.0, tau_family: float = 1.0, tau_device: float = 0.2,
                 tau_arch: float = 0.25, tau_vendor: float = 0.4, tau_precision: float = 0.5,
                 tau_kappa: float = 0.3, tau_model_arch: float = 0.5, tau_software: float = 0.2,
                 tau_model_software: float = 0.2, tau_batch_slope: float = 0.2, cv: int = 5, conformal: bool = True, random_state: int | None = 0):
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
        pen = [np.zeros(1), np.full(len(_FIXED), 1e-6)]
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
            theta = np.linalg.solve(G + np.diag(self._pen * sigma2), b)
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
    def fit(self, X, y):
        X, y = check_fit_arrays(X, y, ROOFLINE_COLUMNS, "RooflineRegressor")
        if not np.all(np.isfinite(X[:, :_COL["model_code"]])):
            raise ValueError("RooflineRegressor got non-finite features (a device without a peak at the run's "
                             "precision or without a memory bandwidth?).")
        self.n_features_in_ = X.shape[1]
        self.n_levels_ = tuple(int(max(X[:, _COL[g]].max(), -1)) + 1 for g in _GROUPS)
        self.center_ = np.array([_column(X, c).mean() for c in _FIXED])
        mcode = X[:, _COL["model_code"]].astype(int)
        lb = _column(X, "log_batch")
        self.model_batch_center_ = np.array([lb[mcode == m].mean() if np.any(mcode == m) else 0.0
                                             for m in range(self.n_levels_[_GROUPS.index("model_code")])])
        self._pen = self._penalty()
        r = np.log(y) - X[:, _COL["log_t_peak"]]
        Z = self._design(X)
        self._G, self._b, self._rr = Z.T @ Z, Z.T @ r, float(r @ r)
        # hundreds of small solves: one BLAS thread each (threaded BLAS on a few-hundred-row system is slower,
        # and 50–100× slower on a busy machine)
        with threadpool_limits(limits=1, user_api="blas"):
            return self._fit_all(X, y, Z, r)

    def _fit_all(self, X, y, Z, r):
        try:
            self.coef_, self.sigma2_ = self._fit_gram(self._G, self._b, self._rr, len(r), float(np.var(r)))
            return self._fit_rest(X, y, Z, r)
        finally:
            del self._G, self._b, self._rr  # scratch of the refits, not fitted state

    def _fit_rest(self, X, y, Z, r):
        resid = r - Z @ self.coef_
        logy = np.log(y)
        self.resid_std_ = float(np.std(resid, ddof=1)) if len(y) > 1 else 0.0
        self.rsquared_ = r2(logy, logy - resid)
        codes = {g: X[:, _COL[g]].astype(int) for g in _GROUPS}
        pair = codes["model_code"] * 100_003 + codes["device_code"]
        self.known_pairs_ = np.unique(pair)
        self.known_pair_batches_ = np.unique(_key(pair, X[:, _COL["log_batch"]]))
        self.known_pair_counts_ = np.unique(_key(pair, X[:, _COL["log_n"]]))
        # models the history has run on a single device type only (a user's own model, calibrated on one device)
        m_codes, dev_codes = codes["model_code"], codes["device_code"]
        self.sparse_models_ = np.array(sorted(int(m) for m in np.unique(m_codes)
                                              if len(np.unique(dev_codes[m_codes == m])) == 1), dtype=int)
        self.sparse_runs_ = np.array([int(np.sum(m_codes == m)) for m in self.sparse_models_], dtype=int)
        self.sparse_scores_ = {}
        self.count_range_ = (float(np.exp(X[:, _COL["log_n"]].min())), float(np.exp(X[:, _COL["log_n"]].max())))
        self.scores_ = {}
        self.oof_pred_ = np.exp(X[:, _COL["log_t_peak"]] + Z @ self.coef_)
        if not self.conformal:
            return self
        # conformity scores, each from the refits matching one kind of query
        k = max(2, min(int(self.cv), len(y)))
        oof = np.empty_like(r)
        for tr, te in KFold(k, shuffle=True, random_state=self.random_state).split(X):
            oof[te] = Z[te] @ self._fit_without(Z, r, te)
        self.scores_["seen"] = np.sort(np.abs(r - oof))
        self.oof_pred_ = np.exp(X[:, _COL["log_t_peak"]] + oof)
        groups = {
            "new_pair": pair,
            "new_device": codes["device_code"],
            "new_model": codes["model_code"],
            "new_count": np.round(X[:, _COL["log_n"]], 6),
            "new_batch": np.round(X[:, _COL["log_batch"]], 6),
        }
        self.device_scores_by_model_, self.device_scores_by_model_few_ = {}, {}
        for kind, g in groups.items():
            # a new model: the held-out benchmarks are the exchangeable units, whatever their run counts
            scores = self._group_scores(Z, r, g, balanced=(kind == "new_model"), raw=(kind == "new_device"))
            if kind == "new_device" and scores is not None:
                # a known model on a new device takes its own runs' scores where enough device types were held out
                self.device_scores_by_model_ = scores_by_group(scores, m_codes, dev_codes)
                self.device_scores_by_model_few_ = few_unit_scores(scores, m_codes, dev_codes,
                                                                   self.device_scores_by_model_)
                scores = np.sort(scores)
            self.scores_[kind] = self.scores_["seen"] if scores is None else scores
        for keep in _SPARSE_KEEPS:
            sparse = self._sparse_scores(Z, r, m_codes, dev_codes, keep)
            self.sparse_scores_[keep] = self.scores_["new_pair"] if sparse is None else sparse
        self.scores_["sparse_model"] = self.sparse_scores_[3]
        return self

    def _sparse_scores(self, Z, r, models, devices, keep: int):
        """Scores of a model known from ``keep`` runs on one device, asked on another: for each model run on
        several devices and each of up to :data:`_SPARSE_DEVICES` of its devices, refit with all other models
        plus ``keep`` random runs of it on that device, and score its runs on the other devices. Every model
        weighs the same (a user's model is one draw of a model)."""
        rng = np.random.default_rng(self.random_state)
        out, owner = [], []
        for m in np.unique(models):
            own = models == m
            devs = np.unique(devices[own])
            if len(devs) < 2:
                continue
            for d in rng.permutation(devs)[:_SPARSE_DEVICES]:
                on_d = np.flatnonzero(own & (devices == d))
                kept = rng.permutation(on_d)[:keep]
                drop = np.setdiff1d(np.flatnonzero(own), kept)
                te = np.flatnonzero(own & (devices != d))
                theta = self._fit_without(Z, r, drop)
                out.append(np.abs(r[te] - Z[te] @ theta))
                owner.append(np.full(len(te), m))
        if len(out) < 3:
            return None
        return balanced_scores(np.concatenate(out), np.concatenate(owner))

    def _group_scores(self, Z, r, groups, balanced: bool = False, raw: bool = False):
        """Leave-group-out conformity scores |log residual| (sorted; ``raw``: per row, in row order)."""
        uniq = np.unique(groups)
        if len(uniq) < 3:
            return None
        out = np.empty_like(r)
        folds = min(len(uniq), 25)
        splitter = GroupKFold(folds)
        for tr, te in splitter.split(Z, groups=groups):
            # columns with no training rows are effects of the held-out level: their estimate is the prior (0)
            out[te] = Z[te] @ self._fit_without(Z, r, te)
        scores = np.abs(r - out)
        if raw:
            return scores
        if balanced:  # every held-out group weighs the same: 200 quantiles of each group's scores
            return balanced_scores(scores, groups)
        return np.sort(scores)

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
        key = model * 100_003 + dev
        pair = np.isin(key, self.known_pairs_) & (model >= 0) & (dev >= 0)
        # batch and count matter only within a known pair
        new_batch = _unknown(key, X[:, _COL["log_batch"]], self.known_pair_batches_, pair)
        new_count = _unknown(key, X[:, _COL["log_n"]], self.known_pair_counts_, pair)
        seen = np.where(new_count, "new_count", np.where(new_batch, "new_batch", "seen"))
        unseen = np.where(np.isin(model, self.sparse_models_), "sparse_model", "new_pair")
        return np.where(dev < 0, "new_device", np.where(model < 0, "new_model", np.where(pair, seen, unseen)))

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
        kinds, at = np.unique(kind, return_inverse=True)  # one lookup per kind, not per row
        half = np.array([q[k] for k in kinds], dtype=float)[at.ravel()]
        sparse = kind == "sparse_model"
        if sparse.any() and getattr(self, "sparse_scores_", None):
            # the scores of refits that kept as many of the model's runs as the history has (or fewer)
            runs = dict(zip(self.sparse_models_.tolist(), self.sparse_runs_.tolist()))
            n_own = np.array([runs.get(int(m), 1) for m in X[sparse, _COL["model_code"]]])
            keeps = np.array(sorted(self.sparse_scores_))
            use = keeps[np.maximum(np.searchsorted(keeps, n_own, side="right") - 1, 0)]
            qs = {k: conformal_quantile(s, confidence) for k, s in self.sparse_scores_.items()}
            half[sparse] = [qs[int(k)] for k in use]
        by_model = getattr(self, "device_scores_by_model_", None)  # absent in models saved before it existed
        few = getattr(self, "device_scores_by_model_few_", None)
        if by_model or few:
            new_dev = kind == "new_device"
            half[new_dev] = group_quantiles(by_model, X[new_dev, _COL["model_code"]].astype(int), half[new_dev],
                                            confidence, widen_only=few)
        both = (kind == "new_device") & model_new
        half = np.where(both, np.hypot(q["new_device"], q["new_model"]), half)
        # a known pair at a new batch and a new count: the wider of the two
        pair = X[:, _COL["model_code"]].astype(int) * 100_003 + X[:, _COL["device_code"]].astype(int)
        new_both = (kind == "new_count") & _unknown(pair, X[:, _COL["log_batch"]], self.known_pair_batches_,
                                                    kind == "new_count")
        half = np.where(new_both, np.maximum(half, q["new_batch"]), half)
        # a count outside the fitted range adds the count's uncertainty to a query new in another way
        within_pair = np.isin(kind, ("seen", "new_batch", "new_count"))
        half = np.where(out_count & within_pair, np.maximum(half, q["new_count"]), half)
        half = np.where(out_count & ~within_pair, np.hypot(half, q["new_count"]), half)
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
                names += [f"batch_slope_delta[model={lab}]" for lab in labels]
        for ga, gb in _INTERACTIONS:
            la = feature_names.get(ga) or [str(i) for i in range(self.n_levels_[_GROUPS.index(ga)])]
            lb = feature_names.get(gb) or [str(i) for i in range(self.n_levels_[_GROUPS.index(gb)])]
            na, nb = ga.replace("_code", ""), gb.replace("_code", "")
            names += [f"efficiency_log[{na}={x} x {nb}={z}]" for x in la for z in lb]
        return pd.DataFrame({"value": self.coef_}, index=names)
