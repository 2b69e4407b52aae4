"""Grouped cross-validation of training-time predictors, with baselines and the measured noise floor.

Splits hold out one whole group at a time (scikit-learn ``LeaveOneGroupOut``): every run of one model
(``leave-one-model-out``), of one per-device batch size, of one device count, or of one device type. A held-out
group never appears in the training fold. Metrics per split and method: MAPE, median APE, R² on log time,
coverage of the prediction interval at ``confidence`` and its mean relative width ``(upper - lower) / predicted``.

The noise floor is the leave-one-repeat-out error of repeated runs of one configuration: the best any predictor
can do on this data. An error below it is not a real improvement.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.model_selection import LeaveOneGroupOut

from ._deprecation import renamed
from ._format import to_plain
from ._methods import METHOD_CHOICES
from ._validation import check_confidence
from .exceptions import SchemaError, UnsupportedQueryError
from .features import run_quantities
from .fitting import fit_history
from .kinds import KINDS, group_keys
from .metrics import coverage, mean_relative_width, r2_log
from .models import METHODS, TrainingTimeModel
from .schema import validate_runs

__all__ = ["SPLITS", "DEFAULT_SPLITS", "CONFIG_KEYS", "noise_floor", "NoiseFloor", "grouped_folds", "evaluate",
           "Evaluation", "coverage", "mean_relative_width", "r2_log", "AnalyticBaseline", "PeakRatioBaseline",
           "EVALUATION_BASELINES", "SPLIT_KINDS", "DEFAULT_EVAL_METHODS",
           "fold_predictions"]

#: split name -> what is held out one group at a time (a run column, or ``pair``: model and device type), one per
#: kind of query (:mod:`perfmodel.kinds`).
SPLITS = {k.split: k.column for k in KINDS if k.column is not None}
#: split name -> the kind of query it scores (what ``method="auto"`` chooses for; see perfmodel.fitting).
SPLIT_KINDS = {k.split: k.name for k in KINDS if k.column is not None}
#: The splits :func:`evaluate` runs when none are named (``leave-one-pair-out`` is asked for by name).
DEFAULT_SPLITS = ("leave-one-model-out", "leave-one-batch-size-out", "leave-one-gpu-count-out",
                  "leave-one-gpu-type-out")
#: Columns that identify one configuration (its repeats share them).
CONFIG_KEYS = ("model", "batch_size", "gpu_count", "gpu_type", "precision")
#: The methods :func:`evaluate` (and ``perfmodel evaluate``) compares when none are named.
DEFAULT_EVAL_METHODS = ("linear", "loglinear", "gbm", "physics", "roofline", "auto")


@dataclass(frozen=True)
class NoiseFloor:
    """Leave-one-repeat-out error of repeated configurations, in percent (what :func:`noise_floor` returns).

    Attributes
    ----------
    median_ape : float
        Median absolute percentage error of each repeat predicted by the mean of the other repeats of its
        configuration; nan when no configuration is repeated.
    mean_ape : float
        The mean of the same errors; nan when no configuration is repeated.
    n_configs : int
        Configurations with two or more runs.
    n_runs : int
        Runs in those configurations.
    """

    median_ape: float
    mean_ape: float
    n_configs: int
    n_runs: int

    def __str__(self) -> str:
        if self.n_configs == 0:
            return "noise floor: no repeated configurations in the history"
        return (f"noise floor: {self.median_ape:.1f}% median APE ({self.mean_ape:.1f}% mean) predicting a run by "
                f"the mean of its repeats; {self.n_configs} configurations, {self.n_runs} runs")

    def to_dict(self) -> dict:
        """The fields as plain JSON types.

        Returns
        -------
        dict
            ``{"median_ape", "mean_ape", "n_configs", "n_runs"}``; NaN becomes None.
        """
        return to_plain(self)


def noise_floor(runs: pd.DataFrame, keys=CONFIG_KEYS) -> NoiseFloor:
    """Run-to-run noise: each repeat predicted by the mean of the other repeats of its configuration.

    Parameters
    ----------
    runs : pandas.DataFrame
        A run history (validated with :func:`perfmodel.schema.validate_runs`).
    keys : sequence of str, default=CONFIG_KEYS
        The columns whose values identify one configuration; those the history lacks are left out.

    Returns
    -------
    NoiseFloor
        The errors over every configuration with two or more runs (nan and zero counts when there is none).

    Examples
    --------
    >>> import pandas as pd
    >>> runs = pd.DataFrame({"model": ["a"] * 3, "params": 1, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu",
    ...                      "step_time_s": [1.0, 1.1, 0.9]})
    >>> round(noise_floor(runs).median_ape, 2)  # 0.9 s against the others' mean 1.05 s: |0.9 / 1.05 - 1|
    14.29
    """
    runs = validate_runs(runs)
    keys = [k for k in keys if k in runs.columns]
    apes, configs, n = [], 0, 0
    for _, grp in runs.groupby(keys, dropna=False):
        t = grp["step_time_s"].to_numpy(dtype=float)
        if len(t) < 2:
            continue
        configs += 1
        n += len(t)
        for i in range(len(t)):
            apes.append(abs(t[i] / np.delete(t, i).mean() - 1) * 100)
    if not apes:
        return NoiseFloor(math.nan, math.nan, 0, 0)
    return NoiseFloor(float(np.median(apes)), float(np.mean(apes)), configs, n)


def grouped_folds(runs: pd.DataFrame, column: str):
    """The folds of a leave-one-group-out split (scikit-learn ``LeaveOneGroupOut``).

    Parameters
    ----------
    runs : pandas.DataFrame
        A run history.
    column : str
        What one fold holds out: a value of :data:`SPLITS` (``model``, ``batch_size``, ``gpu_count``,
        ``gpu_type``, or ``pair``: each model and device type together), grouped as
        :func:`perfmodel.kinds.group_keys` groups it.

    Yields
    ------
    held_out : str
        The group key of the held-out runs.
    train_index, test_index : numpy.ndarray of int
        Positions (not labels) of the training and held-out runs.
    """
    kind = next(k for k in KINDS if k.column == column)
    groups = group_keys(runs, kind).astype(str)
    for train, test in LeaveOneGroupOut().split(runs, groups=groups):
        yield groups[test[0]], train, test


# ---------------------------------------------------------------------------------------------- baselines
class AnalyticBaseline:
    """The "6·N·D"-style estimate: ``T = FLOPs per device-step / (peak FLOP/s × utilisation)``.

    The peak of a device is the spec table's dense peak for the run's precision (through
    :func:`perfmodel.features.run_quantities`); for ``cpu`` it is ``host_peak_flops`` split over the worker
    processes. Intervals: for the fitted variant, a conformal quantile of the training runs' absolute
    log-utilisation residuals; none (NaN) for the fixed one.

    Parameters
    ----------
    utilisation : float or "fit", default=0.4
        A number is the fraction of peak assumed achieved (0.4 is the calculators' assumption); ``"fit"`` fits
        one constant on the training runs (the geometric mean of achieved / peak).
    host_peak_flops : float, optional
        Measured FLOP/s of the whole host (a CPU matmul peak), the peak of ``cpu`` runs. Without it a fixed
        utilisation predicts NaN for them; the fitted one needs no absolute peak (its constant absorbs it).
    """

    def __init__(self, utilisation=0.4, host_peak_flops: float | None = None):
        self.utilisation = utilisation
        self.host_peak_flops = host_peak_flops

    def _peak(self, runs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        q = run_quantities(runs)
        peak = q["peak_tflops"].to_numpy(dtype=float) * 1e12
        cpu = (q["gpu_type"] == "cpu").to_numpy()
        if cpu.any():
            if self.host_peak_flops is None:
                # the fitted variant needs no absolute peak (its constant absorbs the scale); the fixed one does
                peak[cpu] = 1.0 if self.utilisation == "fit" else np.nan
            else:
                peak[cpu] = self.host_peak_flops / q["gpu_count"].to_numpy(dtype=float)[cpu]
        return q["flops_per_step_device"].to_numpy(dtype=float), peak

    def fit(self, runs: pd.DataFrame, y=None):
        """Fit the utilisation constant (``"fit"``) or take the fixed one.

        Parameters
        ----------
        runs : pandas.DataFrame
            Training runs (their FLOPs, devices and precisions).
        y : array-like of float, optional
            Step times in seconds; by default ``runs["step_time_s"]``.

        Returns
        -------
        AnalyticBaseline
            ``self``, with ``log_u_`` (log utilisation) and ``resid_`` (sorted absolute residuals, or None).
        """
        flops, peak = self._peak(runs)
        y = runs["step_time_s"].to_numpy(dtype=float) if y is None else np.asarray(y, float)
        log_u = np.log(flops / (peak * y))
        if self.utilisation == "fit":
            self.log_u_ = float(np.mean(log_u))
            resid = log_u - self.log_u_
            self.resid_: np.ndarray | None = np.sort(np.abs(resid))
        else:
            self.log_u_ = math.log(float(self.utilisation))
            self.resid_ = None
        return self

    def predict_interval(self, runs: pd.DataFrame, confidence: float = 0.9) -> pd.DataFrame:
        """Predicted step time of each run, with an interval for the fitted variant.

        Parameters
        ----------
        runs : pandas.DataFrame
            The configurations to predict.
        confidence : float, default=0.9
            Level of the interval (the fitted variant only).

        Returns
        -------
        pandas.DataFrame
            ``step_time_s``, ``step_lower``, ``step_upper`` (seconds; the bounds NaN for a fixed utilisation),
            indexed like ``runs``.
        """
        flops, peak = self._peak(runs)
        pred = flops / (peak * math.exp(self.log_u_))
        if self.resid_ is None:
            lo = hi = np.full(len(pred), np.nan)
        else:
            from .models import conformal_quantile

            q = conformal_quantile(self.resid_, confidence)
            lo, hi = pred * math.exp(-q), pred * math.exp(q)
        return pd.DataFrame({"step_time_s": pred, "step_lower": lo, "step_upper": hi}, index=runs.index)


class PeakRatioBaseline:
    """Naive cross-hardware scaling: the nearest training run of the same model (closest device count, then
    per-device batch), scaled by the work per device-step and by the ratio of the devices' peaks at the run's
    precision: ``T = T_ref · (work / work_ref) · (peak_ref / peak)``. No prediction (NaN) where the model has no
    training run or a device has no datasheet peak (CPU). No interval. The method ``ratio``
    (:class:`perfmodel.models.RatioRegressor`) generalises it: peak and bandwidth ratios, a fallback for unseen
    models, and intervals. It takes no parameters.
    """

    def fit(self, runs: pd.DataFrame, y=None):
        """Keep the training runs as references.

        Parameters
        ----------
        runs : pandas.DataFrame
            Training runs (model, device count, batch, FLOPs, device and precision).
        y : array-like of float, optional
            Step times in seconds; by default ``runs["step_time_s"]``.

        Returns
        -------
        PeakRatioBaseline
            ``self``, with the references in ``ref_``.
        """
        q = run_quantities(runs)
        self.ref_ = pd.DataFrame({
            "model": runs["model"].astype(str).to_numpy(),
            "log_n": np.log(q["gpu_count"].to_numpy(dtype=float)),
            "log_b": np.log(q["batch_size"].to_numpy(dtype=float)),
            "t": runs["step_time_s"].to_numpy(dtype=float) if y is None else np.asarray(y, float),
            "work": q["flops_per_step_device"].to_numpy(dtype=float),
            "peak": q["peak_tflops"].to_numpy(dtype=float),
        })
        return self

    def predict_interval(self, runs: pd.DataFrame, confidence: float = 0.9) -> pd.DataFrame:
        """Predicted step time of each run, scaled from its nearest reference run.

        Parameters
        ----------
        runs : pandas.DataFrame
            The configurations to predict.
        confidence : float, default=0.9
            Accepted for the common interface and ignored: this baseline has no interval.

        Returns
        -------
        pandas.DataFrame
            ``step_time_s`` (NaN where the model has no reference run or a device no peak), and
            ``step_lower``, ``step_upper`` all NaN; indexed like ``runs``.
        """
        q = run_quantities(runs)
        pred = np.full(len(runs), np.nan)
        by_model = {m: g for m, g in self.ref_.groupby("model")}
        for i, (m, n, b, work, peak) in enumerate(zip(runs["model"].astype(str), q["gpu_count"], q["batch_size"],
                                                      q["flops_per_step_device"], q["peak_tflops"])):
            g = by_model.get(m)
            if g is None or not np.isfinite(peak):
                continue
            g = g[np.isfinite(g["peak"])]
            if g.empty:
                continue
            d = (g["log_n"] - math.log(n)).abs() * 10 + (g["log_b"] - math.log(b)).abs()
            near = g[d <= d.min() + 1e-9]
            pred[i] = float(np.median(near["t"] * (work / near["work"]) * (near["peak"] / peak)))
        nan = np.full(len(runs), np.nan)
        return pd.DataFrame({"step_time_s": pred, "step_lower": nan, "step_upper": nan}, index=runs.index)


#: What a table row with n = 0 means.
REFUSED_NOTE = ("n = 0: the method refused every held-out run (e.g. linear, loglinear and gbm cannot predict a "
                "device count their training runs never varied)")
#: Baselines measured beside perfmodel's methods: (a) the seed formula, (b) the analytic estimate, two ways,
#: (c) naive peak-ratio scaling across devices, (d) the two baseline *methods* (:mod:`perfmodel.models._baselines`,
#: intervals from the score book like every method's): ``ratio`` (spec-ratio scaling of the same workload,
#: peak and bandwidth) and ``mfu`` (pooled median utilisation).
EVALUATION_BASELINES = ("seed-linear", "6ND-util0.4", "6ND-fitted-util", "peak-ratio", "ratio", "mfu")


def _make(method: str, host_peak_flops):
    if method == "seed-linear":
        return TrainingTimeModel(method="linear")
    if method == "6ND-util0.4":
        return AnalyticBaseline(0.4, host_peak_flops)
    if method == "6ND-fitted-util":
        return AnalyticBaseline("fit", host_peak_flops)
    if method == "peak-ratio":
        return PeakRatioBaseline()
    if method == "auto":
        return "auto"
    return TrainingTimeModel(method=method)


def fold_predictions(method, runs, train, test, confidence=0.9, host_peak_flops=None, kind="seen") -> pd.DataFrame:
    """Fit ``method`` on the ``train`` rows of ``runs`` and predict the ``test`` rows: one fold of :func:`evaluate`,
    for a split of one's own.

    Parameters
    ----------
    method : str
        A method of :data:`~perfmodel.models.METHODS`, ``"auto"`` or one of :data:`EVALUATION_BASELINES`.
    runs : pandas.DataFrame
        A validated history (:func:`perfmodel.io.load_runs`).
    train, test : array of int
        Positions of the training and held-out rows (e.g. from :func:`grouped_folds`).
    confidence : float, default=0.9
        Level of the intervals.
    host_peak_flops : float, optional
        Peak FLOP/s the 6·N·D baselines divide by where the history's device has none.
    kind : str, default="seen"
        The kind of query the held-out rows are (:data:`perfmodel.kinds.KINDS`): the conformity scores used.

    Returns
    -------
    pandas.DataFrame
        One row per held-out run: ``pred``, ``step_lower``, ``step_upper``, ``y`` (measured), ``row`` (its
        position), ``method`` and ``chosen`` (what ``auto`` chose); NaN predictions where the method refuses
        the query (:class:`~perfmodel.exceptions.UnsupportedQueryError`).
    """
    import warnings

    with warnings.catch_warnings():
        # the seed formula is singular when a fold holds one batch size or device count: expected, not news
        warnings.simplefilter("ignore", category=UserWarning)
        return _fit_predict_inner(method, runs, train, test, confidence, host_peak_flops, kind)


def _fit_predict_inner(method, runs, train, test, confidence, host_peak_flops, kind="seen"):
    tr, te = runs.iloc[train], runs.iloc[test]
    est = _make(method, host_peak_flops)
    chosen = method
    if est == "auto":
        est = fit_history(tr.reset_index(drop=True), "auto", kind=kind)
        chosen = est.method
    elif method in METHODS:  # as predict fits it for this kind of query: the matching conformity scores
        est.set_params(held_out=(kind,)).fit(tr.reset_index(drop=True))
    else:
        est.fit(tr.reset_index(drop=True))
    query = te.reset_index(drop=True)
    try:
        pi = est.predict_interval(query, confidence)
    except UnsupportedQueryError:  # e.g. gbm asked a device count its training runs never varied: refused
        pi = pd.DataFrame({c: np.full(len(te), np.nan) for c in ("step_time_s", "step_lower", "step_upper",
                                                                 "nearest_run_distance")})
        if method == "seed-linear":  # the seed design's naive answer, even at a count its runs never varied
            pi["step_time_s"] = est.pipeline_.predict(query)
    out = pi.rename(columns={"step_time_s": "pred"})
    out["y"] = te["step_time_s"].to_numpy(dtype=float)
    out["row"] = test
    out["method"] = method
    out["chosen"] = chosen
    return out


@dataclass
class Evaluation:
    """Results of :func:`evaluate`: per-row predictions, the metric table and the noise floor.

    Attributes
    ----------
    predictions : pandas.DataFrame
        One row per held-out run, split and method: ``pred``, ``step_lower``, ``step_upper`` (seconds), ``y``
        (the measured step time), ``row`` (its position in the history), ``method``, ``chosen`` (the method
        ``auto`` chose on that fold), ``split`` and ``held_out`` (the fold's group), and whatever else the
        method's ``predict_interval`` returns.
    table : pandas.DataFrame
        One row per split and method: ``split``, ``method``, ``folds``, ``n`` (held-out runs predicted),
        ``mape``, ``median_ape`` (percent), ``r2_log``, ``coverage`` and ``rel_width`` (NaN for a method
        without intervals).
    noise : NoiseFloor
        The noise floor of the same history.
    confidence : float
        The level of the intervals scored.
    """

    predictions: pd.DataFrame
    table: pd.DataFrame
    noise: NoiseFloor
    confidence: float

    def to_dict(self) -> dict:
        """The level, the noise floor and the metric table in plain JSON types.

        Returns
        -------
        dict
            ``{"confidence", "noise_floor", "table"}`` (the table as a list of row dicts; NaN becomes None);
            the per-row predictions stay in :attr:`predictions`.
        """
        return to_plain({"confidence": self.confidence, "noise_floor": self.noise, "table": self.table})

    def to_json(self, **kwargs) -> str:
        """:meth:`to_dict` as JSON (strict: no NaN).

        Parameters
        ----------
        **kwargs
            Passed to :func:`json.dumps` (``indent=2``, ...).

        Returns
        -------
        str
            The JSON text.
        """
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    def __str__(self) -> str:
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            text = self.table.to_string(index=False, float_format=lambda v: f"{v:.3g}")
        if (self.table["n"] == 0).any():
            text += "\n" + REFUSED_NOTE
        return f"{text}\n{self.noise}"


def evaluate(runs, *, methods=DEFAULT_EVAL_METHODS, splits=DEFAULT_SPLITS, baselines=True,
             confidence: float = 0.9, n_jobs: int = 1, host_peak_flops: float | None = None) -> Evaluation:
    """Grouped cross-validation of each method (and the baselines) on the same splits of the same runs.

    Parameters
    ----------
    runs : path or DataFrame
        A run history.
    methods : sequence of str
        perfmodel methods (:data:`~perfmodel.models.METHODS` and ``"auto"``).
    splits : sequence of str
        Keys of :data:`SPLITS`; a split whose column has fewer than two groups is skipped.
    baselines : bool, default=True
        Also score :data:`EVALUATION_BASELINES`.
    confidence : float, default=0.9
        Level of the prediction intervals whose coverage and width are scored.
    n_jobs : int, default=1
        Folds × methods run in parallel with joblib.
    host_peak_flops : float, optional
        Measured FLOP/s of the host, the CPU "peak" of the ``6ND-util0.4`` baseline (``NaN`` without it).

    Returns
    -------
    Evaluation
        The per-row predictions, the metric table and the noise floor.
    """
    from .io import load_runs

    confidence = check_confidence(confidence, "evaluate")
    runs = load_runs(runs).reset_index(drop=True)
    unknown = [m for m in methods if m not in METHOD_CHOICES]
    if unknown:
        raise ValueError(f"evaluate: unknown method(s) {unknown}; choose from {(*METHODS, 'auto')}.")
    bad = [s for s in splits if s not in SPLITS]
    if bad:
        raise ValueError(f"evaluate: unknown split(s) {bad}; choose from {tuple(SPLITS)}.")
    all_methods = list(methods) + ([b for b in EVALUATION_BASELINES if b not in methods] if baselines else [])
    jobs = []
    for split in splits:
        col = SPLITS[split]
        if len(np.unique(group_keys(runs, SPLIT_KINDS[split]))) < 2:
            continue
        for held, train, test in grouped_folds(runs, col):
            for method in all_methods:
                jobs.append((split, held, method, train, test))
    if not jobs:
        varying = [s for s in splits if len(np.unique(group_keys(runs, SPLIT_KINDS[s]))) >= 2]
        raise SchemaError(
            f"evaluate: nothing to cross-validate. Each split holds out one value of its column, so the history "
            f"needs two or more distinct values in at least one of {', '.join(SPLITS[s] for s in splits)}; it has "
            f"{len(runs)} runs{'' if varying else ' and none varies'}."
        )
    results = Parallel(n_jobs=n_jobs)(
        delayed(fold_predictions)(m, runs, tr, te, confidence, host_peak_flops, SPLIT_KINDS[split])
        for split, _, m, tr, te in jobs
    )
    frames = []
    for (split, held, *_), res in zip(jobs, results):
        frames.append(res.assign(split=split, held_out=held))
    preds = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    rows = []
    groups = preds.groupby(["split", "method"], sort=False) if len(preds) else []
    for (split, method), g in groups:
        g = g[np.isfinite(g["pred"].to_numpy(dtype=float))]  # baselines that cannot predict a row skip it
        if g.empty:  # every fold refused (a method asked what its training runs cannot show): n = 0
            if method not in methods:  # a baseline that needs what the history lacks (FLOPs, other devices)
                continue
            rows.append({"split": split, "method": method, "folds": 0, "n": 0, "mape": np.nan, "median_ape": np.nan,
                         "r2_log": np.nan, "coverage": np.nan, "rel_width": np.nan})
            continue
        has_pi = g["step_lower"].notna().all()
        ape = np.abs(g["pred"] / g["y"] - 1) * 100
        rows.append({
            "split": split, "method": method, "folds": g["held_out"].nunique(), "n": len(g),
            "mape": float(ape.mean()), "median_ape": float(ape.median()), "r2_log": r2_log(g["y"], g["pred"]),
            "coverage": coverage(g["y"], g["step_lower"], g["step_upper"]) if has_pi else np.nan,
            "rel_width": mean_relative_width(g["pred"], g["step_lower"], g["step_upper"]) if has_pi else np.nan,
        })
    columns = ["split", "method", "folds", "n", "mape", "median_ape", "r2_log", "coverage", "rel_width"]
    return Evaluation(preds, pd.DataFrame(rows, columns=columns), noise_floor(runs), confidence)


# the old name still answers, with a DeprecationWarning, until perfmodel 0.4
__getattr__ = renamed(__name__, {"BASELINES": ("EVALUATION_BASELINES", "perfmodel.fitting.BASELINES is auto's"
                                                    " baselines, another thing")})
