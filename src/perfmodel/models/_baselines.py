"""The one-line rules a careful user applies in a spreadsheet, as methods (``ratio``, ``mfu``).

Both are point regressors on the columns of ``RunFeaturizer(kind="baseline")`` (:data:`BASELINE_COLUMNS`: log
work per device-step, log peak FLOP/s and log memory bandwidth at the precision the run used, log device count,
log per-device batch, model, device-type and precision codes, whether the FLOPs were imputed, the convolution
share, the attention share). Their prediction intervals come from
:class:`~perfmodel.models.TrainingTimeModel`'s conformity scores like every method's
(:mod:`perfmodel.models._conformal`).

``mfu``
    ``T = work / (peak · u)``: FLOPs per device-step over the device's peak at the run's precision times a pooled
    utilisation ``u``, the median achieved MFU (``work / (peak · T)``) of the training runs of the same op class
    (convolutions or matmuls: :func:`~perfmodel.features.conv_share` at least 0.5 or not; a run whose family and
    op columns are unknown has no class and uses the class-blind pools) on the same device type
    at the same precision (the median of the logs: with an even count, the geometric mean of the middle two);
    failing that, of the runs of that class at that precision on any device; then of the runs on that device at
    that precision; then of the runs at that precision; then of all runs. Convolutions and matmuls reach
    different fractions of the peak (MLPerf's CNNs a few times less than its transformers), so a transformer
    is not given a CNN's utilisation where the runs hold transformers.

    Attention, split out. A matmul-class run whose FLOPs say how much of them is attention's score and value
    products (``attn_share``, :func:`~perfmodel.features.attention_share`) is priced in two parts when the
    runs of its device type and precision carry that share too: ``T = work / peak · ((1 − a) / u_dense +
    a / u_attn)``, with ``a`` the share and the two utilisations fitted on those runs (non-negative least
    squares on the relative error). Attention kernels (FlashAttention, SDPA) run at a different fraction of the
    peak than the dense GEMMs around them, and their share grows with the sequence length, so one pooled
    utilisation misprices a long sequence. The split is fitted only where some model of the pool ran at two
    sequence lengths: across models alone the share falls as the model grows, and the fit would take a small
    model's slower GEMMs for slower attention. A pool of fewer than 4 such runs, without such a model, or whose
    fit is not physical (a utilisation zero or above 1), keeps the single utilisation.
``ratio``
    A workload seen on other devices, scaled: the nearest training runs of the same model (distance
    ``10·|Δlog n| + |Δlog batch| + 0.5·[other device type] + 0.5·[other precision]``), each scaled by the work per
    device-step and by the devices' spec ratios at the precisions used,
    ``T = T_ref · (work / work_ref) · sqrt(peak_ref / peak · bw_ref / bw)``, and the median taken over every run
    within :data:`RATIO_BAND` of the nearest distance. The band is narrower than one mismatch (0.5) and than a
    device-count step (``10·log 2``), so it only pools runs at nearby batch sizes: a same-device run at the same
    batch still comes before any other device's, a run at the same count before any at another count, and one run
    that happens to be nearest in batch (another vendor's stack, another framework) does not set the answer
    alone. A model the runs lack gets the ``mfu`` rule, so the method always
    answers.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.optimize import nnls
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ..features import BASELINE_COLUMNS
from ..metrics import r2
from ._columns import NamedColumnsMixin

__all__ = ["MFURegressor", "RatioRegressor", "RATIO_COUNT_WEIGHT", "RATIO_MISMATCH_COST", "RATIO_BAND"]

_COL = {name: i for i, name in enumerate(BASELINE_COLUMNS)}
#: ``ratio``: weight of a device-count difference (log) against a batch difference (log) in the nearest-run
#: distance: the same count first, then the nearest batch.
RATIO_COUNT_WEIGHT = 10.0
#: ``ratio``: distance added for a reference on another device type or at another precision (a same-device run
#: at a nearby batch beats another device's run at the same batch).
RATIO_MISMATCH_COST = 0.5
#: ``ratio``: the references pooled (their median) are those within this distance of the nearest. Chosen on the
#: development sets among 0, 0.1, 0.3 and 0.5 by ``benchmarks/ratio_band.py`` (its output:
#: benchmarks/results/ratio_band.txt); below :data:`RATIO_MISMATCH_COST`, so it pools nearby batch sizes only.
RATIO_BAND = 0.3
#: ``mfu``: runs of one device type and precision with a known attention share needed to split their utilisation
#: into dense and attention parts (two utilisations from fewer runs would be a fit to noise).
_SPLIT_MIN_RUNS = 4


class _Baseline(NamedColumnsMixin):
    """What both rules read: the columns of ``RunFeaturizer(kind="baseline")``; runs without a finite work, peak
    or bandwidth are left out of the pools and references rather than refused."""

    _QUANTITIES = BASELINE_COLUMNS
    _FEATURE_SET = "baseline"
    _ABSENT = {c: 0.0 for c in BASELINE_COLUMNS}
    _REQUIRED = ("log_work",)
    _CODES = ("model_code", "device_code", "precision_code")
    _FINITE_FIT = False

    def __init__(self, *, columns: dict | None = None):  # both rules: only where each quantity is
        self.columns = columns


def _in_sample(reg, X, y) -> None:
    """In-sample residual std and R² of log step time (``X``: the design, quantities in order)."""
    logy = np.log(y)
    pred = reg._predict_design(X)
    ok = np.isfinite(pred) & (pred > 0)
    resid = logy[ok] - np.log(pred[ok])
    reg.resid_std_ = float(np.std(resid, ddof=1)) if len(resid) > 1 else 0.0
    reg.rsquared_ = r2(logy[ok], logy[ok] - resid) if len(resid) > 1 else float("nan")


def _op_class(X) -> np.ndarray:
    """1.0 for a run whose FLOPs are mostly convolutions (``conv_share`` at least 0.5), 0.0 for matmuls, NaN where
    the share is unknown (no family, no op columns: such a row uses and feeds only the class-blind pools)."""
    share = X[:, _COL["conv_share"]]
    return np.where(np.isfinite(share), (share >= 0.5).astype(float), np.nan)


def _share_varies_within_a_model(X) -> bool:
    """Whether some model of these runs ran at two attention shares (two sequence lengths). Across models alone the
    share falls as the model grows, so a split fitted on it would take a small model's slower GEMMs for slower
    attention; within one model only the sequence length moves it."""
    frame = pd.DataFrame({"model": X[:, _COL["model_code"]], "share": X[:, _COL["attn_share"]].round(6)})
    frame = frame[frame["model"] >= 0]
    return bool(len(frame)) and bool((frame.groupby("model")["share"].nunique() >= 2).any())


class MFURegressor(_Baseline, RegressorMixin, BaseEstimator):
    """``T = FLOPs per device-step / (peak at the run's precision × pooled median utilisation)`` (module
    docstring), on the columns of ``RunFeaturizer(kind="baseline")``.

    Parameters
    ----------
    columns : dict of str to str, optional
        Where each quantity of the rule is in ``X``: ``{quantity: column name}``, the quantities being
        :data:`~perfmodel.features.BASELINE_COLUMNS` (``log_work`` is required). A quantity left out is the
        same in every run: a log 0 (the same peak, bandwidth, count or batch), a code 0 (one model, one device
        type, one precision), FLOPs counted. A plain array's columns are named ``"x0"``, ``"x1"``, ... None
        (the default): every quantity in the column of its own name, by name in a DataFrame, in
        :data:`~perfmodel.features.BASELINE_COLUMNS` order in a plain array (:mod:`perfmodel.models._columns`).

    Attributes
    ----------
    log_u_by_class_pair_ : dict
        ``(device code, precision code, op class) -> log median utilisation`` (op class 1: convolutions, 0:
        matmuls).
    log_u_by_class_ : dict
        ``(precision code, op class) -> log median utilisation``.
    log_u_by_pair_ : dict
        ``(device code, precision code) -> log median utilisation`` of the training runs.
    log_u_by_precision_ : dict
        ``precision code -> log median utilisation``.
    log_u_ : float
        Log median utilisation of all training runs.
    log_u_by_model_ : dict
        ``model code -> log median utilisation`` of the runs whose FLOPs were imputed (not counted): they are
        left out of the pools above, and a query of such a model takes its own.
    split_by_pair_ : dict
        ``(device code, precision code) -> (u_dense, u_attn)``: the utilisations of the dense and the attention
        FLOPs of the matmul-class runs with a known attention share (module docstring), where the fit is
        physical.
    resid_std_, rsquared_ : float
        In-sample residual standard deviation and R² of log step time (runs with a finite prediction).
    columns_ : dict
        The column read for each quantity (None: absent, the same in every run).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        The column names of ``X``, when it was a DataFrame.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[np.log(4e12), np.log(1e13), 0, 0, 0, 0, 0, 0, 0, 0, np.nan]] * 3)  # 4 TFLOP, 10 TFLOP/s
    >>> MFURegressor().fit(X, [0.8, 1.0, 2.0]).predict(X[:1]).round(3)  # median MFU 0.4 -> 1 s
    array([1.])
    """

    def fit(self, X, y):
        """Pool the achieved utilisations of the runs.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_runs, n_features)
            The design: the columns of ``RunFeaturizer(kind="baseline")``, or those named by ``columns``.
        y : array-like of shape (n_runs,)
            Step times in seconds (positive; at least 3 runs, one of them with a finite work and peak).

        Returns
        -------
        self : MFURegressor
            Fitted.
        """
        X, y = self._validate_fit(X, y)
        self._fit_design(X, y)
        return self

    def _fit_design(self, X, y) -> None:
        log_u = X[:, _COL["log_work"]] - X[:, _COL["log_peak"]] - np.log(y)
        ok = np.isfinite(log_u)
        if not ok.any():
            raise ValueError("MFURegressor needs runs with a finite work and peak (FLOPs and a datasheet peak).")
        # a run whose FLOPs were imputed (none counted) has no utilisation to pool with the others'; its own
        # model's runs, imputed alike, still share one
        imputed = X[:, _COL["flops_imputed"]] > 0
        self.log_u_by_model_ = {float(m): float(v) for m, v in pd.Series(log_u[ok & imputed]).groupby(
            X[ok & imputed, _COL["model_code"]]).median().items() if m >= 0}
        if (ok & ~imputed).any():
            ok &= ~imputed
        dev, prec = X[:, _COL["device_code"]], X[:, _COL["precision_code"]]
        frame = pd.DataFrame({"dev": dev[ok], "prec": prec[ok], "cls": _op_class(X)[ok], "log_u": log_u[ok]})
        known = frame.dropna(subset=["cls"])  # groupby drops NaN keys too; explicit: unknown class, no class pool
        self.log_u_by_class_pair_ = {(float(d), float(p), float(c)): float(v) for (d, p, c), v in
                                     known.groupby(["dev", "prec", "cls"])["log_u"].median().items()}
        self.log_u_by_class_ = {(float(p), float(c)): float(v)
                                for (p, c), v in known.groupby(["prec", "cls"])["log_u"].median().items()}
        self.log_u_by_pair_ = {(float(d), float(p)): float(v)
                               for (d, p), v in frame.groupby(["dev", "prec"])["log_u"].median().items()}
        self.log_u_by_precision_ = {float(p): float(v) for p, v in frame.groupby("prec")["log_u"].median().items()}
        self.log_u_ = float(np.median(log_u[ok]))
        self.split_by_pair_ = {}
        share = X[:, _COL["attn_share"]]
        split = ok & np.isfinite(share) & (_op_class(X) == 0.0) & (dev >= 0)
        t_peak = np.exp(X[:, _COL["log_work"]] - X[:, _COL["log_peak"]])
        for key in sorted(set(zip(dev[split].tolist(), prec[split].tolist()))):
            rows = np.flatnonzero(split & (dev == key[0]) & (prec == key[1]))
            if len(rows) < _SPLIT_MIN_RUNS or not _share_varies_within_a_model(X[rows]):
                continue
            # T / t_peak = (1 - a) / u_dense + a / u_attn, each run weighted by 1 / T (relative error)
            design = np.column_stack([1.0 - share[rows], share[rows]]) * (t_peak[rows] / y[rows])[:, None]
            inv, _ = nnls(design, np.ones(len(rows)))
            if np.all(inv >= 1.0):  # both utilisations in (0, 1]: a physical split (module docstring)
                self.split_by_pair_[(float(key[0]), float(key[1]))] = (float(1 / inv[0]), float(1 / inv[1]))
        _in_sample(self, X, y)

    def log_utilisation(self, X) -> np.ndarray:
        """The pooled log utilisation of each row: its (device, precision, op class) pool, else the next pool of
        the module docstring's order (a row whose FLOPs were imputed: its model's own, when the runs have it);
        a matmul row with a known attention share on a device and precision with a split fit: the effective
        utilisation of its dense and attention parts, ``1 / ((1 − a) / u_dense + a / u_attn)``.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_runs, n_features)
            The design, with the columns the fit read.

        Returns
        -------
        ndarray of shape (n_runs,)
            Natural log of the utilisation (fraction of the peak).
        """
        return self._log_utilisation(self._validate_predict(X, "log_u_"))

    def _log_pooled(self, X) -> np.ndarray:
        out = np.full(len(X), self.log_u_)
        by_model = getattr(self, "log_u_by_model_", {})
        by_class_pair = getattr(self, "log_u_by_class_pair_", {})
        by_class = getattr(self, "log_u_by_class_", {})
        for i, (d, p, m, imp, c) in enumerate(zip(X[:, _COL["device_code"]], X[:, _COL["precision_code"]],
                                                  X[:, _COL["model_code"]], X[:, _COL["flops_imputed"]],
                                                  _op_class(X))):
            key = (float(d), float(p))
            if imp > 0 and float(m) in by_model:  # imputed FLOPs: the model's own runs' utilisation
                out[i] = by_model[float(m)]
            elif d >= 0 and (*key, float(c)) in by_class_pair:  # a NaN class matches no key
                out[i] = by_class_pair[(*key, float(c))]
            elif (float(p), float(c)) in by_class:
                out[i] = by_class[(float(p), float(c))]
            elif d >= 0 and key in self.log_u_by_pair_:
                out[i] = self.log_u_by_pair_[key]
            elif float(p) in self.log_u_by_precision_:
                out[i] = self.log_u_by_precision_[float(p)]
        return out

    def predict(self, X):
        """Predicted step time of each run: its work over its peak times its pooled utilisation.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_runs, n_features)
            The design, with the columns the fit read.

        Returns
        -------
        ndarray of shape (n_runs,)
            Seconds per step (NaN where the work or peak is not finite).
        """
        return self._predict_design(self._validate_predict(X, "log_u_"))

    def _predict_design(self, X) -> np.ndarray:
        return np.exp(X[:, _COL["log_work"]] - X[:, _COL["log_peak"]] - self._log_utilisation(X))

    def _log_utilisation(self, X) -> np.ndarray:
        out = self._log_pooled(X)
        split = getattr(self, "split_by_pair_", {})
        if not split:
            return out
        share = X[:, _COL["attn_share"]]
        rows = np.isfinite(share) & (_op_class(X) == 0.0) & (X[:, _COL["flops_imputed"]] <= 0)
        dev, prec = X[:, _COL["device_code"]], X[:, _COL["precision_code"]]
        for (d, p), (u_d, u_a) in split.items():  # the effective utilisation: 1 / ((1 - a) / u_d + a / u_a)
            i = rows & (dev == d) & (prec == p)
            out[i] = -np.log((1.0 - share[i]) / u_d + share[i] / u_a)
        return out

    def utilisation_table(self, device_names=None, precision_names=None) -> pd.DataFrame:
        """The pooled utilisations (median achieved MFU): by device type, precision and op class; by precision and
        op class; by device type and precision; by precision; the dense and attention parts of a split fit; and
        all.

        Parameters
        ----------
        device_names, precision_names : list of str, optional
            The device type and precision of each code (``RunFeaturizer.gpu_types_``, ``.precisions_``);
            default ``code 0``, ``code 1``, ...

        Returns
        -------
        DataFrame
            One column, ``value`` (a fraction of the peak), indexed ``utilisation[<device>, <precision>,
            <conv|matmul>]``, ``utilisation[<precision>, <conv|matmul>]``, ``utilisation[<device>, <precision>]``,
            ``utilisation[<precision>]``, ``utilisation[<device>, <precision>, dense matmul|attention]`` and
            ``utilisation[all runs]``.
        """
        check_is_fitted(self, "log_u_")

        def name(names, code):
            return names[int(code)] if names is not None and 0 <= code < len(names) else f"code {code:g}"

        cls = {0.0: "matmul", 1.0: "conv"}
        by_class_pair = getattr(self, "log_u_by_class_pair_", {})
        by_class = getattr(self, "log_u_by_class_", {})
        idx = [f"utilisation[{name(device_names, d)}, {name(precision_names, p)}, {cls[c]}]"
               for d, p, c in by_class_pair]
        idx += [f"utilisation[{name(precision_names, p)}, {cls[c]}]" for p, c in by_class]
        idx += [f"utilisation[{name(device_names, d)}, {name(precision_names, p)}]" for d, p in self.log_u_by_pair_]
        idx += [f"utilisation[{name(precision_names, p)}]" for p in self.log_u_by_precision_]
        vals = [math.exp(v) for pool in (by_class_pair, by_class, self.log_u_by_pair_, self.log_u_by_precision_)
                for v in pool.values()]
        split = getattr(self, "split_by_pair_", {})
        for (d, p), parts in split.items():
            idx += [f"utilisation[{name(device_names, d)}, {name(precision_names, p)}, {part}]"
                    for part in ("dense matmul", "attention")]
            vals += list(parts)
        return pd.DataFrame({"value": vals + [math.exp(self.log_u_)]}, index=idx + ["utilisation[all runs]"])


class RatioRegressor(_Baseline, RegressorMixin, BaseEstimator):
    """The nearest runs of the same model scaled by work and the devices' spec ratios (module docstring), on the
    columns of ``RunFeaturizer(kind="baseline")``; a model the runs lack gets :class:`MFURegressor`'s answer.

    Parameters
    ----------
    band : float, default=RATIO_BAND
        The references pooled by their median are those within ``band`` of the nearest one's distance (module
        docstring); 0: only the nearest (and runs tied with it). Non-negative.
    columns : dict of str to str, optional
        Where each quantity of the rule is in ``X``: ``{quantity: column name}``, the quantities being
        :data:`~perfmodel.features.BASELINE_COLUMNS` (``log_work`` is required). A quantity left out is the
        same in every run: a log 0 (the same peak, bandwidth, count or batch), a code 0 (one model, one device
        type, one precision), FLOPs counted. A plain array's columns are named ``"x0"``, ``"x1"``, ... None
        (the default): every quantity in the column of its own name, by name in a DataFrame, in
        :data:`~perfmodel.features.BASELINE_COLUMNS` order in a plain array (:mod:`perfmodel.models._columns`).

    Attributes
    ----------
    ref_ : ndarray, shape (n_refs, 11)
        The reference runs: the training design (quantities in :data:`~perfmodel.features.BASELINE_COLUMNS`
        order) of the runs with a finite work, peak and bandwidth and a model code.
    ref_y_ : ndarray, shape (n_refs,)
        Their step times.
    fallback_ : MFURegressor
        The ``mfu`` rule for models without a reference run.
    resid_std_, rsquared_ : float
        In-sample residual standard deviation and R² of log step time (runs with a finite prediction).
    columns_ : dict
        The column read for each quantity (None: absent, the same in every run).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        The column names of ``X``, when it was a DataFrame.

    Examples
    --------
    >>> import numpy as np
    >>> ref = [np.log(1e12), np.log(1e14), np.log(1e12), 0.0, np.log(8), 0, 0, 0, 0, 0, np.nan]  # 100 TFLOP/s, 1 TB/s
    >>> X = np.array([ref] * 3)
    >>> q = np.array([[np.log(2e12), np.log(4e14), np.log(4e12), 0.0, np.log(16), 0, 1, 0, 0, 0, np.nan]])  # 2x, 4x
    >>> RatioRegressor().fit(X, [1.0, 1.0, 1.0]).predict(q).round(3)  # 1 s x 2 x sqrt(1/4 x 1/4)
    array([0.5])
    """

    def __init__(self, *, band: float = RATIO_BAND, columns: dict | None = None):
        self.band = band
        self.columns = columns

    def fit(self, X, y):
        """Keep the runs as references, and fit the ``mfu`` rule for models they lack.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_runs, n_features)
            The design: the columns of ``RunFeaturizer(kind="baseline")``, or those named by ``columns``.
        y : array-like of shape (n_runs,)
            Step times in seconds (positive; at least 3 runs, one of them with a finite work and peak).

        Returns
        -------
        self : RatioRegressor
            Fitted.
        """
        band = self.band
        if isinstance(band, bool) or not isinstance(band, (int, float, np.integer, np.floating)):
            raise TypeError(f"RatioRegressor: band must be a number (a distance, e.g. {RATIO_BAND}). "
                            f"Got {type(band).__name__}.")
        if not (math.isfinite(band) and band >= 0):
            raise ValueError(f"RatioRegressor: band must be finite and non-negative (a distance). Got {band}.")
        X_in = X
        X, y = self._validate_fit(X, y)
        self.fallback_ = MFURegressor(columns=self.columns).fit(X_in, y)
        ok = np.isfinite(X[:, [_COL["log_work"], _COL["log_peak"], _COL["log_bw"]]]).all(axis=1) & \
            (X[:, _COL["model_code"]] >= 0)
        self.ref_, self.ref_y_ = X[ok], y[ok]
        _in_sample(self, X, y)
        return self

    def predict(self, X):
        """Predicted step time of each run: its nearest reference run of the same model, scaled.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_runs, n_features)
            The design, with the columns the fit read.

        Returns
        -------
        ndarray of shape (n_runs,)
            Seconds per step (the ``mfu`` rule's for a model without a reference run).
        """
        return self._predict_design(self._validate_predict(X, "ref_"))

    def _predict_design(self, X) -> np.ndarray:
        out = self.fallback_._predict_design(X)
        ref, ref_y = self.ref_, self.ref_y_
        codes = X[:, _COL["model_code"]]
        for code in np.unique(codes[codes >= 0]):
            rows = np.flatnonzero(codes == code)
            r = ref[ref[:, _COL["model_code"]] == code]
            if not len(r):
                continue
            t = ref_y[ref[:, _COL["model_code"]] == code]
            q = X[rows]
            dist = (RATIO_COUNT_WEIGHT * np.abs(q[:, None, _COL["log_n"]] - r[None, :, _COL["log_n"]])
                    + np.abs(q[:, None, _COL["log_batch"]] - r[None, :, _COL["log_batch"]])
                    + RATIO_MISMATCH_COST * (q[:, None, _COL["device_code"]] != r[None, :, _COL["device_code"]])
                    + RATIO_MISMATCH_COST * (q[:, None, _COL["precision_code"]]
                                             != r[None, :, _COL["precision_code"]]))
            log_t = (np.log(t)[None, :] + q[:, None, _COL["log_work"]] - r[None, :, _COL["log_work"]]
                     + 0.5 * (r[None, :, _COL["log_peak"]] - q[:, None, _COL["log_peak"]]
                              + r[None, :, _COL["log_bw"]] - q[:, None, _COL["log_bw"]]))
            # models saved before the band pooled only the nearest: they predict as they did
            near = dist <= dist.min(axis=1, keepdims=True) + float(getattr(self, "band", 0.0)) + 1e-9
            med = np.array([np.median(lt[m]) for lt, m in zip(log_t, near)])
            good = np.isfinite(med)
            out[rows[good]] = np.exp(med[good])
        return out
