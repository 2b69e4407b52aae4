"""The fitted training-time model: features + regressor, fit on a run history, with its fit statistics."""

from __future__ import annotations

import html
import warnings

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.model_selection import GroupKFold, KFold, cross_val_predict
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from .._delegates import resolve
from .._rows import distinct_rows
from .._validation import check_choice, check_confidence
from ..exceptions import DataQualityWarning, NotFittedError, UnsupportedQueryError
from ..features import RunFeaturizer
from ..hardware import resolve_gpu_type
from ..metrics import mape, median_ape, r2
from ..schema import validate_runs
from ._gbm import (GBMRegressor, balanced_scores, conformal_quantile, few_unit_scores, group_quantiles,
                   scores_by_group)
from ._ols import OLSRegressor
from ._ops import OpsRegressor
from ._physics import PhysicsRegressor
from ._roofline import RooflineRegressor

__all__ = ["TrainingTimeModel", "METHODS", "HELD_OUT_COLUMNS", "Summary", "model_table",
           "precision_by_device"]

#: Methods: name -> (description, feature set).
METHODS = {
    "linear": ("statsmodels OLS, T = b0 + b1*params + b2*batch_size + b3*gpu_count (seed design)", "seed"),
    "loglinear": ("statsmodels OLS on log step time (power law in FLOPs, params, batch, devices, hardware)", "log"),
    "gbm": ("scikit-learn gradient boosting on log step time, cross-conformal intervals", "log"),
    "physics": ("overhead + optimizer + FLOPs at a fitted per-family efficiency + all-reduce, least squares on "
                "log time, cross-conformal intervals", "physics"),
    "roofline": ("hierarchical roofline: FLOPs over the device's peak with a pooled memory-bound share, partially "
                 "pooled model/family/device/architecture/vendor/precision efficiencies, scaling terms; "
                 "cross-conformal intervals matched to the query (new device, new model, new pair, new count)",
                 "roofline"),
    "ops": ("op-level: per op class FLOPs at a fitted compute efficiency + bytes at a fitted memory efficiency "
            "(shared across models, pooled toward a common value), + launch overhead per kernel + all-reduce; "
            "least squares on log time, cross-conformal intervals; rows without op columns get an imputed op mix",
            "ops"),
}


#: History columns a fit can hold out to score queries beyond them (``TrainingTimeModel.fit(held_out=...)``).
HELD_OUT_COLUMNS = ("gpu_type", "model", "gpu_count", "batch_size")
_NUMERIC_GROUPS = ("gpu_count", "batch_size")
_MAX_GROUP_FOLDS = 10


def _group_keys(values, column: str) -> np.ndarray:
    """Values of a held-out column as comparable strings (2 and 2.0 devices are one group)."""
    s = pd.Series(np.asarray(values, dtype=object))
    if column in _NUMERIC_GROUPS:
        return pd.to_numeric(s, errors="coerce").astype(float).map(repr).to_numpy(dtype=object)
    s = s.astype(str)
    if column == "gpu_type":  # a device spelled as a user, NVML or a cloud spells it is the device the runs name
        s = s.map({raw: _canonical_device(raw) for raw in pd.unique(s)})
    return s.to_numpy(dtype=object)


def _canonical_device(name: str) -> str:
    try:
        return resolve_gpu_type(name)
    except (ValueError, TypeError):  # an unknown device is beyond the runs whatever it is called
        return name


def _bracket_gap(values: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Log ratio of the nearest ``known`` value above to the nearest below each value (inf where one side has
    none, or the value is not positive and finite)."""
    known = np.unique(np.asarray(known, dtype=float))
    known = known[np.isfinite(known) & (known > 0)]
    values = np.asarray(values, dtype=float)
    out = np.full(len(values), np.inf)
    ok = np.isfinite(values) & (values > 0)
    if len(known) < 2 or not ok.any():
        return out
    i = np.searchsorted(known, values[ok], side="right")  # known[i-1] <= v < known[i]
    below = known[np.clip(i - 1, 0, len(known) - 1)]
    above = known[np.clip(i, 0, len(known) - 1)]
    inside = (i > 0) & (i < len(known)) & (below < values[ok])
    out[np.flatnonzero(ok)[inside]] = np.log(above[inside] / below[inside])
    return out


def model_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per model name in a history: median params and FLOPs per sample, family, number of runs."""
    fps = runs["flops_per_sample"] if "flops_per_sample" in runs.columns else pd.Series(np.nan, index=runs.index)
    fam = runs["family"] if "family" in runs.columns else pd.Series(pd.NA, index=runs.index, dtype="string")
    return (
        pd.DataFrame({"model": runs["model"].astype(str), "params": runs["params"].astype(float),
                      "flops_per_sample": pd.to_numeric(fps, errors="coerce"), "family": fam.astype("string")})
        .groupby("model")
        .agg(params=("params", "median"), flops_per_sample=("flops_per_sample", "median"),
             family=("family", "first"), runs=("params", "size"))
    )


def precision_by_device(runs: pd.DataFrame) -> dict:
    """Per device type in a history: (the precision most of its runs used, whether all of them used it)."""
    prec = runs["precision"] if "precision" in runs.columns else pd.Series("fp32", index=runs.index)
    frame = pd.DataFrame({"g": runs["gpu_type"].astype(str).to_numpy(), "p": prec.astype(str).to_numpy()})
    return {g: (str(grp["p"].mode().iloc[0]), bool(grp["p"].nunique() == 1)) for g, grp in frame.groupby("g")}


#: Extrapolation widening of every method's interval: beyond ``EXTRAPOLATION_D0`` (in units of
#: :meth:`TrainingTimeModel.domain_distance`) the log half-widths are multiplied by
#: ``1 + EXTRAPOLATION_C · (d − EXTRAPOLATION_D0)``. Calibrated on the bundled CPU runs' leave-one-group-out
#: splits by ``benchmarks/extrapolation.py`` (held-out runs beyond d0 covered at the nominal level).
EXTRAPOLATION_D0 = 0.5
#: Log-scale unit of :meth:`TrainingTimeModel.domain_distance` along a quantity the training runs never varied.
CONSTANT_DIMENSION_SCALE = 0.1
EXTRAPOLATION_C = 0.25
#: Methods whose form carries a change of device count that the runs never made: a communication term with a
#: prior and, on CPU, workers sharing the host. The others (``linear``, ``loglinear``, ``gbm``) cannot move with
#: a device count their runs never varied, and refuse such a query rather than answer for the runs' count.
COUNT_FORMS = ("physics", "roofline", "ops")


class TrainingTimeModel(RegressorMixin, BaseEstimator):
    """Predict the mean optimizer-step time of a run from its record (model size, batch, devices, hardware).

    A scikit-learn estimator over DataFrames of runs: ``fit(runs)`` (the target defaults to the history's
    ``step_time_s``), ``predict(runs)``, ``clone``, ``cross_val_score(..., groups=...)`` all work.

    Parameters
    ----------
    method : {"loglinear", "physics", "roofline", "gbm", "linear", "ops"}, default="loglinear"
        One named method (see :data:`METHODS`). Choosing among them (``method="auto"``, the default of
        :func:`perfmodel.fit` and every other entry point) is the fitting policy's job: :mod:`perfmodel.fitting`.
    cv : int, default=5
        Folds of the k-fold cross-validated error computed at ``fit`` (``None`` to skip).
    random_state : int, default=0

    Attributes
    ----------
    pipeline_ : sklearn Pipeline
        ``RunFeaturizer`` then the regressor.
    n_runs_ : int
    rsquared_, rsquared_log_, rsquared_adj_ : float
        In-sample R² on step time and on log step time; adjusted R² of the OLS fit (on its own scale).
    resid_std_ : float
        Residual standard deviation on the fitted scale (log time for loglinear/gbm).
    cv_mape_, cv_median_ape_ : float
        k-fold cross-validated MAPE and median APE of step time, in percent.
    domain_ : DataFrame
        Min and max of each query quantity in the training runs (for the extrapolation check).
    models_ : DataFrame
        Per model name in the history: params, flops_per_sample, family.
    startup_s_ : float
        Median time to first step in the history (0 when the history has no ``startup_s``).
    held_out_ : str or None
        The column given as ``fit(held_out=...)`` when its leave-group-out scores were computed, else None;
        ``held_out_scores_`` holds those scores (absolute log residuals, sorted). For ``"gpu_type"``,
        ``held_out_scores_by_model_`` also holds each model's own scores where they come from at least 9 held-out
        device types (a known model on a new device takes its own, as ``roofline`` does, and then its interval
        is theirs, even where the method's own is wider); ``held_out_scores_by_model_few_`` those of models
        with 2–8 held-out device types, which only widen the interval. ``held_out_requested_`` is the column
        asked for (it stays, with ``held_out_`` None, when the runs have one value of it). For ``"batch_size"`` and
        ``"gpu_count"``, ``held_out_scores_interior_`` and ``held_out_gaps_interior_`` hold the scores of the
        refits that interpolated, sorted by the log gap they interpolated across (None if none did).
    """

    def __init__(self, *, method: str = "loglinear", cv: int | None = 5, random_state: int | None = 0):
        self.method = method
        self.cv = cv
        self.random_state = random_state

    # -------------------------------------------------------------------------------------------- fit
    def _make_pipeline(self) -> Pipeline:
        _, kind = METHODS[self.method]
        conformal = getattr(self, "_conformal", True)  # False: point fit for model selection (perfmodel.fitting)
        if self.method == "gbm":
            reg = GBMRegressor(random_state=self.random_state, cv=self.cv or 5, conformal=conformal)
        elif self.method == "physics":
            reg = PhysicsRegressor(random_state=self.random_state, cv=self.cv or 5, conformal=conformal)
        elif self.method == "ops":
            reg = OpsRegressor(random_state=self.random_state, cv=self.cv or 5, conformal=conformal)
        elif self.method == "roofline":
            reg = RooflineRegressor(random_state=self.random_state, cv=self.cv or 5, conformal=conformal)
        else:
            reg = OLSRegressor(log_target=(self.method == "loglinear"))
        return Pipeline([("features", RunFeaturizer(kind=kind)), ("regressor", reg)])

    def fit(self, X, y=None, *, held_out: str | None = None):
        """Fit on a run history ``X`` (DataFrame); ``y`` defaults to ``X["step_time_s"]``.

        Parameters
        ----------
        held_out : {"gpu_type", "model", "gpu_count", "batch_size"}, optional
            The column queries will go beyond (a device type, model, device count or batch size the runs lack).
            A query row with a value of it that no run has gets its interval from *leave-that-group-out*
            conformity scores (the runs refitted without each group, up to 10 folds, and scored on it) instead
            of the method's own, never narrower than it (except for a known model on a new device type whose
            own held-out scores answer, see ``held_out_scores_by_model_``; for ``model``, every held-out model
            weighs the same: with few models an assumption, not a finite-sample guarantee; for ``batch_size`` and
            ``gpu_count``, a
            value between two the runs have takes the scores of the refits that held out an inner value across a
            gap at least as wide as the query's, since those interpolated while the others extrapolated; all of
            them where those are too few for the confidence asked). :func:`perfmodel.fit` /
            ``fit_history(kind=...)`` set it from the kind of query. A regressor that scores such queries itself
            (its ``scored_columns``: every column for ``roofline``; ``model`` and ``batch_size`` for ``physics``
            and ``ops``, which tell a new family from a new model of a known one) keeps its own.
        """
        check_choice(self.method, "method", "TrainingTimeModel", tuple(METHODS))
        if held_out is not None:
            check_choice(held_out, "held_out", "TrainingTimeModel.fit", HELD_OUT_COLUMNS)
        # perfmodel.fitting hands over runs it has validated once (load_history); anything else is validated here
        runs = X if getattr(self, "_prevalidated", False) and isinstance(X, pd.DataFrame) else validate_runs(X)
        y = runs["step_time_s"].to_numpy(dtype=float) if y is None else np.asarray(y, dtype=float)
        if len(runs) < 3:
            raise ValueError(f"TrainingTimeModel needs at least 3 runs to fit; the history has {len(runs)}.")
        pipe = self._make_pipeline()
        pipe.fit(runs, y)
        reg = pipe.named_steps["regressor"]
        if isinstance(reg, OLSRegressor):
            reg.feature_names = list(pipe.named_steps["features"].get_feature_names_out())
        self.pipeline_ = pipe
        self.n_runs_ = len(runs)
        self.n_features_in_ = runs.shape[1]
        yhat = np.maximum(pipe.predict(runs), 1e-12)
        self.rsquared_ = r2(y, yhat)
        self.rsquared_log_ = r2(np.log(y), np.log(yhat))
        self.rsquared_adj_ = float(getattr(reg, "rsquared_adj_", np.nan))
        self.resid_std_ = float(reg.resid_std_)
        self.gpu_types_ = sorted(map(str, pd.unique(runs["gpu_type"])))
        self.precisions_ = sorted(map(str, pd.unique(runs["precision"])))
        self.precision_by_device_ = precision_by_device(runs)
        fps = runs["flops_per_sample"] if "flops_per_sample" in runs.columns else pd.Series(np.nan, index=runs.index)
        self.models_ = model_table(runs)
        dom = pd.DataFrame({
            "params": runs["params"].astype(float), "batch_size": runs["batch_size"].astype(float),
            "gpu_count": runs["gpu_count"].astype(float),
            "flops_per_sample": pd.to_numeric(fps, errors="coerce"),
        })
        self.domain_ = pd.DataFrame({"min": dom.min(), "max": dom.max()})
        pts = np.log(dom.fillna(dom.median()).to_numpy(dtype=float))
        pts = np.where(np.isfinite(pts), pts, 0.0)
        scale = pts.std(axis=0)
        # a quantity the runs never varied (e.g. one device count) says nothing about its effect: there a change
        # of CONSTANT_DIMENSION_SCALE in log units (about 10%) counts as one unit of distance
        self._domain_scale = np.where(scale > 0, scale, CONSTANT_DIMENSION_SCALE)
        self._domain_points = pd.DataFrame(pts).drop_duplicates().to_numpy()
        self._domain_tree = None  # built on first use
        if "startup_s" in runs.columns and runs["startup_s"].notna().any():
            self.startup_s_ = float(runs["startup_s"].median())
        else:
            self.startup_s_ = 0.0
        self.cv_mape_ = self.cv_median_ape_ = np.nan
        if self.cv:
            k = min(int(self.cv), len(runs))
            if isinstance(reg, (GBMRegressor, PhysicsRegressor, RooflineRegressor)):
                oof = reg.oof_pred_
            else:
                oof = cross_val_predict(clone(pipe), runs, y,
                                        cv=KFold(k, shuffle=True, random_state=self.random_state))
            self.cv_mape_ = mape(y, oof)
            self.cv_median_ape_ = median_ape(y, oof)
        self.held_out_ = None
        self.held_out_requested_ = held_out  # what the fit was asked for (held_out_ stays None if it cannot be)
        self.held_out_values_ = self.held_out_scores_ = None
        self.held_out_scores_by_model_, self.held_out_scores_by_model_few_ = {}, {}
        self.held_out_scores_interior_ = self.held_out_gaps_interior_ = None
        if (held_out is not None and held_out in runs.columns
                and held_out not in getattr(reg, "scored_columns", ())):
            self._fit_held_out_scores(runs, y, held_out)
        return self

    def _fit_held_out_scores(self, runs: pd.DataFrame, y: np.ndarray, column: str) -> None:
        keys = _group_keys(runs[column], column)
        groups = np.unique(keys)
        if len(groups) < 2:
            return  # one value: nothing to hold out (a query beyond it keeps the method's own interval)
        oof = np.full(len(runs), np.nan)
        failed = []
        numeric = column in _NUMERIC_GROUPS
        values = pd.to_numeric(runs[column], errors="coerce").to_numpy(dtype=float) if numeric else None
        # the log gap between the refit's nearest values below and above a held-out value (inf where it had
        # none on one side: the refit extrapolated)
        gap = np.full(len(runs), np.inf)
        for tr, te in GroupKFold(min(len(groups), _MAX_GROUP_FOLDS)).split(runs, groups=keys):
            if numeric:
                gap[te] = _bracket_gap(values[te], values[tr])
            fold = TrainingTimeModel(method=self.method, cv=None, random_state=self.random_state)
            fold._conformal = False  # point predictions are all the scores need
            fold._prevalidated = True
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fold.fit(runs.iloc[tr].reset_index(drop=True), y[tr])
                    # the point model itself: a held-out count is exactly the extrapolation being scored
                    oof[te] = fold.pipeline_.predict(runs.iloc[te].reset_index(drop=True))
            except (ValueError, np.linalg.LinAlgError):
                failed += sorted(set(keys[te]))  # a fold this method cannot fit (e.g. too few runs left)
        ok = np.isfinite(oof) & (oof > 0)
        if ok.sum() < 2:
            warnings.warn(f"{self.method}: no leave-one-{column}-out refit could be fitted; a query beyond the runs' "
                          f"{column} values gets the method's own interval.", DataQualityWarning, stacklevel=3)
            return
        if failed:
            warnings.warn(f"{self.method}: the leave-one-{column}-out refits without {', '.join(failed[:5])}"
                          f"{' …' if len(failed) > 5 else ''} could not be fitted; the intervals for a query beyond "
                          f"the runs' {column} values rest on the other groups.", DataQualityWarning, stacklevel=3)
        scores = np.abs(np.log(y[ok]) - np.log(oof[ok]))
        if column == "gpu_type" and "model" in runs.columns:  # a known model on a new device: its own, as roofline
            names = runs["model"].astype(str).to_numpy()[ok]
            self.held_out_scores_by_model_ = scores_by_group(scores, names, keys[ok])
            self.held_out_scores_by_model_few_ = few_unit_scores(scores, names, keys[ok],
                                                                 self.held_out_scores_by_model_)
        interior = ok & np.isfinite(gap)
        if numeric and interior.any():
            # a value between two the runs have is interpolated: scored by the refits that interpolated across a
            # gap at least as wide (the extrapolating ones, holding out the smallest or largest value, err more)
            order = np.argsort(gap[interior], kind="stable")
            self.held_out_scores_interior_ = np.abs(np.log(y[interior]) - np.log(oof[interior]))[order]
            self.held_out_gaps_interior_ = gap[interior][order]
        if column == "model":  # a new model is one draw of a model: every held-out model weighs the same
            scores = balanced_scores(scores, keys[ok])
        self.held_out_ = column
        self.held_out_values_ = [str(g) for g in groups]
        self.held_out_scores_ = np.sort(scores)

    # ---------------------------------------------------------------------------------------- predict
    def _check(self):
        try:
            check_is_fitted(self, "pipeline_")
        except Exception:
            raise NotFittedError("This TrainingTimeModel is not fitted yet; call fit(runs) first.") from None

    def predict(self, X) -> np.ndarray:
        """Predicted mean step time (seconds) for each run/query row."""
        self._check()
        self._refuse_unvaried_count(X)
        return self.pipeline_.predict(X)

    def _refuse_unvaried_count(self, X) -> None:
        """A method outside :data:`COUNT_FORMS` fitted on runs of one device count cannot predict another."""
        if (self.method in COUNT_FORMS or getattr(self, "_answer_any_count", False)
                or not isinstance(X, pd.DataFrame) or "gpu_count" not in X.columns):
            return
        lo, hi = (float(v) for v in self.domain_.loc["gpu_count", ["min", "max"]])
        if lo != hi:
            return
        n = pd.to_numeric(X["gpu_count"], errors="coerce").to_numpy(dtype=float)
        other = np.isfinite(n) & (n != lo)
        if other.any():
            raise UnsupportedQueryError(
                f"method {self.method!r} cannot predict gpu_count {n[other][0]:g}: every run it was fitted on has "
                f"gpu_count {lo:g}, so nothing in them shows how the step time changes with the device count. "
                f"Use method 'physics', 'roofline' or 'ops' (a communication term with a prior; on CPU the "
                f"workers share the host), or 'auto' fitted for such queries (perfmodel.fit(..., kind='new_count'), "
                f"`--kind new_count`), or add runs at a second device count.")

    def predict_interval(self, X, confidence: float = 0.9) -> pd.DataFrame:
        """Mean step time of one new run with its prediction interval at ``confidence``.

        Every method's interval goes through here, and widens with the distance to the data: beyond
        ``EXTRAPOLATION_D0`` (see :meth:`domain_distance`) the log half-widths grow by a factor
        ``1 + EXTRAPOLATION_C · (d − EXTRAPOLATION_D0)``, so a query far outside the fitted runs never gets an
        in-range-sized interval. Before that, a row whose value of the fit's ``held_out`` column no run has
        gets the leave-that-group-out interval (see :meth:`fit`).

        Returns
        -------
        DataFrame with columns ``step_time_s``, ``step_lower``, ``step_upper`` (per step, seconds) and
        ``nearest_run_distance``.
        """
        self._check()
        confidence = check_confidence(confidence, "TrainingTimeModel.predict_interval")
        self._refuse_unvaried_count(X)
        Xf = self.pipeline_.named_steps["features"].transform(X)
        pred, lo, hi = self.pipeline_.named_steps["regressor"].predict_interval(Xf, confidence)
        pred, lo, hi = (np.asarray(a, dtype=float) for a in (pred, lo, hi))
        column = getattr(self, "held_out_", None)
        if column is not None and isinstance(X, pd.DataFrame) and column in X.columns:
            # a value of the held-out column that no run has: the leave-that-group-out scores
            beyond = ~np.isin(_group_keys(X[column], column), self.held_out_values_)
            if beyond.any():
                q = np.full(len(pred), conformal_quantile(self.held_out_scores_, confidence))
                inner = getattr(self, "held_out_gaps_interior_", None)  # absent in older model files
                if inner is not None:
                    q = self._interior_quantiles(X[column], q, confidence)
                by_model = getattr(self, "held_out_scores_by_model_", None)  # absent in older model files
                few = getattr(self, "held_out_scores_by_model_few_", None)
                own = np.zeros(len(pred), dtype=bool)
                if (by_model or few) and "model" in X.columns:
                    names = X["model"].astype(str).to_numpy()
                    q, own = group_quantiles(by_model, names, q, confidence, widen_only=few, return_own=True)
                # never narrower than the method's own interval, except where the model's own held-out scores
                # answer: they are this workload's calibration, the method's interval a figure pooled over all
                lo_q, hi_q = pred * np.exp(-q), pred * np.exp(q)
                lo = np.where(beyond & own, lo_q, np.where(beyond, np.minimum(lo, lo_q), lo))
                hi = np.where(beyond & own, hi_q, np.where(beyond, np.maximum(hi, hi_q), hi))
        dist = self.domain_distance(X) if isinstance(X, pd.DataFrame) else np.zeros(len(pred))
        d0, c = getattr(self, "_widening", (EXTRAPOLATION_D0, EXTRAPOLATION_C))
        factor = 1 + c * np.maximum(dist - d0, 0.0)
        if np.any(factor > 1):
            ok = (pred > 0) & (lo > 0)
            safe = np.where(ok, pred, 1.0)
            lo = np.where(ok, safe * np.exp(-np.log(safe / np.where(ok, lo, 1.0)) * factor), lo)
            hi = np.where(pred > 0, safe * np.exp(np.log(np.maximum(hi, 1e-300) / safe) * factor), hi)
        return pd.DataFrame({"step_time_s": pred, "step_lower": lo, "step_upper": hi, "nearest_run_distance": dist},
                            index=getattr(X, "index", None))

    def _interior_quantiles(self, column_values, q: np.ndarray, confidence: float) -> np.ndarray:
        """Per row: for a value between two of the runs' values, the quantile of the interior held-out scores
        whose refit interpolated across a gap at least as wide as the row's (else, or where those are too few to
        bound ``confidence``, ``q``)."""
        seen = np.array([float(v) for v in self.held_out_values_])
        v = pd.to_numeric(pd.Series(np.asarray(column_values, dtype=object)), errors="coerce").to_numpy(dtype=float)
        need = _bracket_gap(v, seen)
        out = np.array(q, dtype=float, copy=True)
        gaps, scores = self.held_out_gaps_interior_, self.held_out_scores_interior_
        for g in np.unique(need[np.isfinite(need)]):
            q_g = conformal_quantile(scores[gaps >= g * (1 - 1e-9)], confidence)
            if np.isfinite(q_g):
                out[need == g] = q_g
        return out

    def domain_distance(self, X: pd.DataFrame) -> np.ndarray:
        """Distance of each query to the nearest training run, in training standard deviations of the logs of
        (params, batch_size, gpu_count, flops_per_sample), root-mean-square over the four. 0 means a configuration
        the fit has seen; above ~1 the query is far from every run. Along a quantity all training runs share
        (e.g. one device count) the unit is ``CONSTANT_DIMENSION_SCALE`` (0.1 in log, ~10%): the runs say nothing
        about its effect, so any change is far."""
        self._check()
        cols = ["params", "batch_size", "gpu_count", "flops_per_sample"]
        med = self.domain_[["min", "max"]].mean(axis=1)
        q = pd.DataFrame({c: pd.to_numeric(X[c], errors="coerce") if c in X.columns else np.nan for c in cols})
        q = q.fillna(med)
        qp = np.log(np.maximum(q.to_numpy(dtype=float), 1e-300))
        never = self.domain_["min"].reindex(cols).isna().to_numpy()
        # a quantity the history never had (e.g. FLOPs), or the query lacks, counts as equal
        qp = np.where(np.isfinite(qp) & ~never, qp, 0.0)
        first, inverse = distinct_rows(qp.T)  # one distance per distinct row: queries repeat configurations
        tree = getattr(self, "_domain_tree", None)
        if tree is None:
            from scipy.spatial import cKDTree  # ~3x faster queries than sklearn's KDTree

            tree = self._domain_tree = cKDTree(self._domain_points / self._domain_scale)
        dist, _ = tree.query(qp[first] / self._domain_scale, k=1)
        out = (np.asarray(dist, dtype=float).reshape(-1) / np.sqrt(qp.shape[1]))[inverse]  # root-mean-square over the quantities
        return out

    # ---------------------------------------------------------------------------------------- reports
    @property
    def feature_names_(self) -> list[str]:
        self._check()
        return list(self.pipeline_.named_steps["features"].get_feature_names_out())

    def coef_table(self, confidence: float = 0.95) -> pd.DataFrame:
        """Coefficients with CIs (OLS methods) or feature importances (gbm)."""
        self._check()
        reg = self.pipeline_.named_steps["regressor"]
        if isinstance(reg, OLSRegressor):
            return reg.coef_table(confidence)
        if isinstance(reg, PhysicsRegressor):
            return reg.coef_table(self.pipeline_.named_steps["features"].families_)
        if isinstance(reg, RooflineRegressor):
            f = self.pipeline_.named_steps["features"]
            return reg.effects({"family_code": f.families_, "model_code": f.model_names_,
                                "vendor_code": f.vendors_, "arch_code": f.architectures_,
                                "device_code": f.gpu_types_, "precision_code": f.precisions_,
                                "software_code": getattr(f, "software_", [])})
        return pd.DataFrame({"importance": reg.feature_importances_}, index=self.feature_names_)

    def summary(self) -> "Summary":
        """A statsmodels-style summary (``print`` it, or display it in Jupyter)."""
        self._check()
        return Summary(self)

    def plot_fit(self, runs, **kwargs):
        """Predicted vs measured, with intervals (:func:`perfmodel.plot.plot_predicted_vs_measured`)."""
        return resolve("plot_fit")(self, runs, **kwargs)

    def plot_residuals(self, runs, **kwargs):
        """Residuals against each feature (:func:`perfmodel.plot.plot_residuals`)."""
        return resolve("plot_residuals")(self, runs, **kwargs)

    def plot_batch_curves(self, runs, **kwargs):
        """Step time vs batch size with the fitted band (:func:`perfmodel.plot.plot_batch_curves`)."""
        return resolve("plot_batch_curves")(self, runs, **kwargs)

    def save(self, path, *, format: str = "safe") -> None:
        """Save the fitted model; by default in perfmodel's pickle-free format (see :mod:`perfmodel.persistence`).
        Load with :func:`perfmodel.load_model`. (Delegates to ``perfmodel.persistence.save_model`` through
        :mod:`perfmodel._delegates`: the model layer does not import persistence.)"""
        resolve("save")(self, path, format=format)


class Summary:
    """Text and HTML summary of a fitted :class:`TrainingTimeModel`."""

    def __init__(self, model: TrainingTimeModel):
        self.model = model

    def _header(self) -> list[tuple[str, str]]:
        m = self.model
        return [
            ("Method", m.method),
            ("Estimator", METHODS[m.method][0]),
            ("Runs", str(m.n_runs_)),
            ("Models", str(len(m.models_))),
            ("Device types", ", ".join(m.gpu_types_)),
            ("Precisions", ", ".join(m.precisions_)),
            ("R² (step time)", f"{m.rsquared_:.4f}"),
            ("R² (log step time)", f"{m.rsquared_log_:.4f}"),
            ("Adj. R² (fitted scale)", "n/a" if np.isnan(m.rsquared_adj_) else f"{m.rsquared_adj_:.4f}"),
            ("Residual std (fitted scale)", f"{m.resid_std_:.4g}"),
        ] + ([
            (f"{m.cv}-fold CV MAPE", "n/a" if np.isnan(m.cv_mape_) else f"{m.cv_mape_:.1f}%"),
            (f"{m.cv}-fold CV median APE", "n/a" if np.isnan(m.cv_median_ape_) else f"{m.cv_median_ape_:.1f}%"),
        ] if m.cv else [("Cross-validated error", "not computed (cv=None)")])

    def as_text(self) -> str:
        width = 78
        lines = ["perfmodel fit summary".center(width), "=" * width]
        lines += [f"{k + ':':<30}{v}" for k, v in self._header()]
        lines.append("=" * width)
        table = self.model.coef_table()
        lines.append(table.to_string(float_format=lambda v: f"{v:.4g}"))
        notes = self._notes(table)
        if notes:
            import textwrap

            lines.append("-" * width)
            lines += [textwrap.fill(n, width) for n in notes]
        lines.append("=" * width)
        if self.model.method != "linear":
            lines.append("Target: log(step_time_s); predictions are exp(fit), intervals back-transformed.")
        return "\n".join(lines)

    @staticmethod
    def _notes(table: pd.DataFrame) -> list[str]:
        """Comments on fitted constants that do not mean what their name suggests."""
        notes = []
        if "value" in table.columns:
            eff = table["value"][[str(i).startswith("efficiency[") for i in table.index]]
            over = eff[eff > 1]
            if len(over):
                notes.append(f"Note: {', '.join(f'{k} {v:.3g}' for k, v in over.items())} > 1: efficiencies are "
                             "relative to a nominal device peak (on CPU, a nominal per-thread rate), not a measured "
                             "one, so values above 1 mean the hardware beats the nominal figure — not more than 100% "
                             "utilisation.")
        return notes

    def as_html(self) -> str:
        rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in self._header())
        coef = self.model.coef_table()
        table = coef.to_html(float_format=lambda v: f"{v:.4g}")
        notes = "".join(f"<p>{html.escape(n)}</p>" for n in self._notes(coef))
        return f"<div><table><caption>perfmodel fit summary</caption>{rows}</table>{table}{notes}</div>"

    def __str__(self) -> str:
        return self.as_text()

    def __repr__(self) -> str:
        return self.as_text()

    def _repr_html_(self) -> str:
        return self.as_html()
