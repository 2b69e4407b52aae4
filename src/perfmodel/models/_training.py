"""The fitted training-time model: features + regressor, fit on a run history, with its fit statistics and the
conformity scores of its prediction intervals."""

from __future__ import annotations

import html
import warnings

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from .._validation import check_choice, check_confidence
from ..exceptions import DataQualityWarning, NotFittedError, UnsupportedQueryError
from ..features import RunFeaturizer, peak_basis, run_quantities
from ..history import model_table, precision_by_device
from ..kinds import KIND_NAMES, TRANSFER_KINDS, canonical_devices, classify, get_kind, group_keys
from ..layout_features import shape_columns
from ..metrics import mape, median_ape, r2
from ..schema import validate_runs
from ..transformer import standard_shape
from ._baselines import MFURegressor, RatioRegressor
from ._books import floor_for
from ._conformal import (
    SOURCE_COLUMN,
    clip_at_peak,
    conformal_quantile,
    folds,
    half_widths,
    score_set,
    source_splits,
    widening,
)
from ._domain import domain_distance, fit_domain
from ._layout import COEFFICIENTS, PRIOR, LayoutRegressor
from ._ols import OLSRegressor
from ._physics import PhysicsRegressor
from ._registry import COUNT_FORMS, METHODS, feature_set, make_regressor
from ._roofline import RooflineRegressor

__all__ = ["TrainingTimeModel", "Summary", "CONFIG_COLUMNS", "FIT_FORMAT"]

#: The version of what a fit computes. Every fit carries it (``fit_format_``); a shipped model and the disk cache are
#: keyed by it (:mod:`perfmodel.fitting`), and :func:`perfmodel.persistence.load_model` refuses a saved model of
#: another format. Bump it when a change alters what fits give (tests/test_fitted_defaults.py refits one model per
#: shipped history and compares the predictions, so a change that alters them without a bump fails there), then run
#: scripts/build_fitted_defaults.py.
FIT_FORMAT = 15
#: Why a point fit (``conformal=False``) has no interval where no error book bounds it.
_POINT_FIT = ("This TrainingTimeModel was fitted with conformal=False (a point fit): it has no conformity scores; "
              "refit with conformal=True for intervals.")
#: The columns that tell one configuration from another for :func:`perfmodel.kinds.classify`.
CONFIG_COLUMNS = ("model", "gpu_type", "batch_size", "gpu_count", "precision")
#: Feature sets whose regressors read their columns by name (:mod:`perfmodel.models._columns`): the featurizer
#: hands them a DataFrame.
_NAMED_FEATURE_SETS = ("physics", "roofline", "ops", "baseline")


def _kinds_arg(held_out) -> tuple[str, ...]:
    """``held_out`` as a tuple of kind names (``"all"``: every kind)."""
    if held_out is None:
        return ()
    if isinstance(held_out, str):
        return KIND_NAMES if held_out == "all" else (get_kind(held_out).name,)
    return tuple(get_kind(k).name for k in held_out)


class TrainingTimeModel(RegressorMixin, BaseEstimator):
    """Predict the mean optimizer-step time of a run from its record (model size, batch, devices, hardware).

    A scikit-learn estimator over DataFrames of runs: ``fit(runs)`` (the target defaults to the history's
    ``step_time_s``), ``predict(runs)``, ``predict_interval(runs)``, ``clone`` and ``cross_val_score(...,
    groups=...)`` all work.

    Parameters
    ----------
    method : {"loglinear", "physics", "roofline", "gbm", "linear", "ops", "ratio", "mfu"}, default="loglinear"
        One named method (see :data:`METHODS`). Choosing among them (``method="auto"``, the default of
        :func:`perfmodel.fit` and every other entry point) is the fitting policy's job: :mod:`perfmodel.fitting`.
    held_out : str or sequence of str, default=()
        Kinds of query (:mod:`perfmodel.kinds`: ``"new_device"``, ``"new_model"``, ``"new_pair"``,
        ``"new_count"``, ``"new_batch"``; ``"all"`` for every kind) whose conformity scores are computed at
        ``fit``: the runs are refitted without each group of that kind (each device type, each model, …) and
        scored on it. A query of a kind not calibrated takes the scores of the next more demanding kind that is
        (:func:`perfmodel.models._conformal.half_widths`). The ``seen`` scores (random K-fold) are always
        computed unless ``cv`` is None.
    cv : int or None, default=5
        Folds of the random K-fold conformity scores, which also give the cross-validated error (None: 5).
    conformal : bool, default=True
        Compute conformity scores at ``fit``; False fits the point model only (no intervals; for model
        selection).
    random_state : int or None, default=0
        Seed of the random K-fold conformity scores and of the methods that draw random numbers (gbm).
    regressor_params : dict, optional
        Parameters of the method's regressor (``set_params``), e.g. ``{"prior": {...}}`` for the layout model's
        calibration on an organisation's own runs.

    Attributes
    ----------
    pipeline_ : sklearn Pipeline
        ``RunFeaturizer`` then the regressor.
    n_runs_ : int
    rsquared_, rsquared_log_, rsquared_adj_ : float
        In-sample R² on step time and on log step time; adjusted R² of the OLS fit (on its own scale).
    resid_std_ : float
        Residual standard deviation on the fitted scale (log time for every method but linear).
    cv_mape_, cv_median_ape_ : float
        k-fold cross-validated MAPE and median APE of step time, in percent.
    scores_ : dict
        The score book: per calibrated kind, ``{"scores", "groups", "split", "by_model"}``
        (:mod:`perfmodel.models._conformal`).
    source_scores_ : dict or None
        Rule 5's entry (:mod:`perfmodel.models._conformal`): the scores of refits that each held out one whole
        source of the runs (their ``source`` column), a floor for queries of a transfer kind; None for a history of
        fewer sources with enough runs, for fits not calibrated for a transfer kind and for the layout and linear
        methods.
    configs_ : DataFrame
        The distinct configurations of the runs (:data:`CONFIG_COLUMNS`): what a query is classified against.
    domain_ : DataFrame
        Min and max of each query quantity in the training runs (for the extrapolation check).
    models_ : DataFrame
        Per model name in the history: params, flops_per_sample, family.
    startup_s_ : float
        Median time to first step in the history (0 when the history has no ``startup_s``).
    """

    def __init__(self, *, method: str = "loglinear", held_out=(), cv: int | None = 5, conformal: bool = True,
                 random_state: int | None = 0, regressor_params: dict | None = None):
        self.method = method
        self.held_out = held_out
        self.cv = cv
        self.conformal = conformal
        self.random_state = random_state
        self.regressor_params = regressor_params

    # -------------------------------------------------------------------------------------------- fit
    def _make_pipeline(self) -> Pipeline:
        features = RunFeaturizer(kind=feature_set(self.method))
        if feature_set(self.method) in _NAMED_FEATURE_SETS:  # the regressor reads its columns by name
            features.set_output(transform="pandas")
        regressor = make_regressor(self.method, self.random_state)
        params = getattr(self, "regressor_params", None)  # absent in a model file written before it existed
        if params:
            regressor.set_params(**params)
        return Pipeline([("features", features), ("regressor", regressor)])

    def fit(self, X, y=None, *, oof: dict | None = None):
        """Fit on a run history; compute the conformity scores of the ``seen`` kind and of every kind in
        ``held_out`` (unless ``conformal`` is False).

        Parameters
        ----------
        X : DataFrame
            The runs (validated with :func:`perfmodel.schema.validate_runs`); at least 3.
        y : array-like of shape (n_runs,), optional
            Step times in seconds; default ``X["step_time_s"]``.
        oof : dict, optional
            ``{kind: out-of-fold predictions}`` already made by exactly the refits that score that kind (e.g. by
            ``auto``'s model selection, :func:`perfmodel.fitting.choose_method`), used instead of refitting.

        Returns
        -------
        self : TrainingTimeModel
            Fitted.
        """
        check_choice(self.method, "method", "TrainingTimeModel", tuple(METHODS))
        kinds = _kinds_arg(self.held_out)
        runs = validate_runs(X)
        y = runs["step_time_s"].to_numpy(dtype=float) if y is None else np.asarray(y, dtype=float)
        calibrating = bool((getattr(self, "regressor_params", None) or {}).get("prior"))
        if len(runs) < (1 if calibrating else 3):
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
        self.models_ = model_table(runs)
        configs = pd.DataFrame({"model": runs["model"].astype(str).to_numpy(),
                                "gpu_type": canonical_devices(runs["gpu_type"]),
                                "batch_size": pd.to_numeric(runs["batch_size"]).astype(float).to_numpy(),
                                "gpu_count": pd.to_numeric(runs["gpu_count"]).astype(float).to_numpy(),
                                "precision": runs["precision"].astype(str).str.lower().to_numpy()})
        self.configs_ = configs.drop_duplicates().reset_index(drop=True)
        domain = fit_domain(runs)
        self.domain_, self.domain_scale_, self.domain_points_ = domain["range"], domain["scale"], domain["points"]
        self._domain_tree: object = None  # built on first use
        if "startup_s" in runs.columns and runs["startup_s"].notna().any():
            self.startup_s_ = float(runs["startup_s"].median())
        else:
            self.startup_s_ = 0.0
        self.cv_mape_ = self.cv_median_ape_ = np.nan
        self.scores_: dict = {}
        self.source_scores_: dict | None = None
        if self.conformal and len(runs) >= 3:  # fewer (a calibration on one or two runs): the floor's interval
            self.calibrate(runs, y, ("seen",) + tuple(k for k in kinds if k != "seen"), predictions=oof)
        return self

    def out_of_fold(self, runs: pd.DataFrame, y: np.ndarray,
                    kind: str) -> tuple[np.ndarray, np.ndarray | None]:
        """Out-of-fold predictions of the refits that score ``kind``, and the group of each run.

        Parameters
        ----------
        runs : DataFrame
            The runs this model was fitted on, in order.
        y : ndarray of shape (n_runs,)
            Their step times.
        kind : str
            A kind of query (:data:`perfmodel.kinds.KIND_NAMES`).

        Returns
        -------
        oof : ndarray of shape (n_runs,)
            Each run's prediction by the refit that held out its group (NaN where a refit failed).
        groups : ndarray of shape (n_runs,) or None
            Each run's group (None for ``seen``: random folds).
        """
        self._check()
        query = get_kind(kind)
        groups = None if query.column is None else group_keys(runs, query)
        splits = folds(groups, len(runs), cv=self.cv or 5, random_state=self.random_state)
        return self.out_of_fold_splits(runs, y, splits, groups=groups, what=query.split), groups

    def out_of_fold_splits(self, runs: pd.DataFrame, y: np.ndarray, splits, *, groups=None,
                           what: str = "cross-validation") -> np.ndarray:
        """Out-of-fold predictions for explicit ``(train, test)`` index pairs over the fitted runs: the
        regressor's own fast refits where it has them (``cross_predict``), else the pipeline refitted per fold.

        Parameters
        ----------
        runs : DataFrame
            The runs this model was fitted on, in order.
        y : ndarray of shape (n_runs,)
            Their step times.
        splits : list of (ndarray, ndarray)
            ``(train, test)`` index pairs over ``runs``.
        groups : ndarray of shape (n_runs,), optional
            Each run's group, to name the groups whose refit failed in the warning.
        what : str, default="cross-validation"
            The split's name, for the warning.

        Returns
        -------
        ndarray of shape (n_runs,)
            Each test row's prediction by the refit without its fold (NaN where a refit failed, with a
            :class:`~perfmodel.exceptions.DataQualityWarning`, and for rows in no test fold).
        """
        self._check()
        oof = np.full(len(runs), np.nan)
        reg = self.pipeline_.named_steps["regressor"]
        if not splits:
            return oof
        if hasattr(reg, "cross_predict"):  # the regressor's own refits (the same solutions, faster)
            Xf = self.pipeline_.named_steps["features"].transform(runs)
            return reg.cross_predict(Xf, y, splits)
        failed = []
        for tr, te in splits:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    pipe = clone(self._make_pipeline()).fit(runs.iloc[tr].reset_index(drop=True), y[tr])
                    # the point model itself: a held-out count is exactly the extrapolation being scored
                    oof[te] = pipe.predict(runs.iloc[te].reset_index(drop=True))
            except (ValueError, np.linalg.LinAlgError):
                failed += sorted(set(map(str, groups[te]))) if groups is not None else ["a fold"]
        if failed:
            warnings.warn(f"{self.method}: the {what} refits without {', '.join(failed[:5])}"
                          f"{' …' if len(failed) > 5 else ''} could not be fitted; the intervals rest on the other "
                          "groups.", DataQualityWarning, stacklevel=3)
        return oof

    def calibrate(self, runs: pd.DataFrame, y=None, kinds=("seen",), *, predictions: dict | None = None):
        """Compute (or replace) the conformity scores of ``kinds`` from the runs this model was fitted on.

        Parameters
        ----------
        runs : DataFrame
            The runs this model was fitted on, in order.
        y : array-like of shape (n_runs,), optional
            Their step times; default ``runs["step_time_s"]``.
        kinds : str or sequence of str, default=("seen",)
            Kinds of query to calibrate (``"all"``: every kind).
        predictions : dict, optional
            ``{kind: out-of-fold predictions}`` already made by the same refits (e.g. by ``auto``'s model
            selection), used instead of refitting.

        Returns
        -------
        self : TrainingTimeModel
            With ``scores_`` (and, for ``seen``, ``cv_mape_`` and ``cv_median_ape_``) set.
        """
        self._check()
        runs = validate_runs(runs)
        y = runs["step_time_s"].to_numpy(dtype=float) if y is None else np.asarray(y, dtype=float)
        for kind in _kinds_arg(kinds):
            k = get_kind(kind)
            if predictions is not None and kind in predictions:
                oof = np.asarray(predictions[kind], dtype=float)
                groups = None if k.column is None else group_keys(runs, k)
            else:
                oof, groups = self.out_of_fold(runs, y, kind)
            # the seed formula is additive (its predictions may be negative): its scores are absolute seconds
            ok = np.isfinite(oof) & ((oof > 0) | (self.method == "linear"))
            err = np.full(len(y), np.nan)
            err[ok] = np.abs(y[ok] - oof[ok]) if self.method == "linear" else np.abs(np.log(y[ok]) - np.log(oof[ok]))
            transfer = kind in ("new_device", "new_pair")
            self.scores_[kind] = score_set(
                err, groups, split=f"random {self.cv or 5}-fold" if k.column is None else k.split,
                models=runs["model"].astype(str).to_numpy() if transfer else None,
                devices=canonical_devices(runs["gpu_type"]) if transfer else None)
            if kind == "seen" and ok.any():
                self.cv_mape_ = mape(y[ok], oof[ok])
                self.cv_median_ape_ = median_ape(y[ok], oof[ok])
        if set(_kinds_arg(kinds)) & set(TRANSFER_KINDS):
            self.source_scores_ = self._source_scores(runs, y)
        return self

    def _source_scores(self, runs: pd.DataFrame, y: np.ndarray) -> dict | None:
        """Rule 5 of :mod:`perfmodel.models._conformal`: the scores of refits that each held one whole source of the
        runs out (None: too few sources of enough runs, or a method whose intervals rest elsewhere: the
        layout model's on its error book, measured one published set left out at a time, and the seed formula's
        in seconds)."""
        if self.method in ("linear", "layout") or SOURCE_COLUMN not in runs.columns:
            return None
        splits, groups = source_splits(runs[SOURCE_COLUMN].to_numpy(dtype=object))
        if not splits:
            return None
        oof = self.out_of_fold_splits(runs, y, splits, groups=groups, what="leave-one-source-out")
        ok = np.isfinite(oof) & (oof > 0)
        err = np.full(len(y), np.nan)
        err[ok] = np.abs(np.log(y[ok]) - np.log(oof[ok]))
        entry = score_set(err, groups, split="leave-one-source-out")
        return entry if entry["groups"] >= 2 else None  # refits that failed left fewer than two sources scored

    # ---------------------------------------------------------------------------------------- predict
    def _check(self):
        try:
            check_is_fitted(self, "pipeline_")
        except Exception:
            raise NotFittedError("This TrainingTimeModel is not fitted yet; call fit(runs) first.") from None

    def predict(self, X) -> np.ndarray:
        """Predicted mean step time of each run or query.

        Parameters
        ----------
        X : DataFrame
            Runs or queries (the columns of a run record the fit needs: model, params, batch_size, gpu_count,
            gpu_type, ...).

        Returns
        -------
        ndarray of shape (n_rows,)
            Seconds per step.

        Raises
        ------
        UnsupportedQueryError
            A method that cannot move with the device count (not in :data:`COUNT_FORMS`) asked for a count the
            runs never had, when they all had one.
        """
        self._check()
        self._refuse_unvaried_count(X)
        return self.pipeline_.predict(X)

    def breakdown(self, X) -> pd.DataFrame | None:
        """Where each predicted step's time goes, for methods whose form has parts (``layout``).

        Parameters
        ----------
        X : DataFrame
            Runs or queries.

        Returns
        -------
        pandas.DataFrame or None
            Indexed like ``X``, seconds per step by part (:meth:`perfmodel.models.LayoutRegressor.breakdown`);
            None for a method without parts.
        """
        self._check()
        reg = self.pipeline_.named_steps["regressor"]
        if not hasattr(reg, "breakdown"):
            return None
        parts = reg.breakdown(self.pipeline_.named_steps["features"].transform(X))
        return pd.DataFrame(parts, index=X.index)

    def _refuse_unvaried_count(self, X) -> None:
        """A method outside :data:`COUNT_FORMS` fitted on runs of one device count cannot predict another."""
        if self.method in COUNT_FORMS or not isinstance(X, pd.DataFrame) or "gpu_count" not in X.columns:
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

    def query_kinds(self, X: pd.DataFrame) -> np.ndarray:
        """The kind of each query row with respect to the fitted runs (:func:`perfmodel.kinds.classify`).

        Parameters
        ----------
        X : DataFrame
            Queries, with ``model``, ``gpu_type``, ``batch_size`` and ``gpu_count``.

        Returns
        -------
        ndarray of str, shape (n_rows,)
            ``seen``, ``new_batch``, ``new_count``, ``new_pair``, ``new_model`` or ``new_device``.
        """
        self._check()
        kinds = classify(self.configs_, X)
        if "precision" not in self.configs_.columns and "precision" in X.columns:  # saved before configs_ held it
            new = ~X["precision"].astype(str).str.lower().isin(self.precisions_).to_numpy()
            kinds = np.where(new, "new_device", kinds).astype(object)
        return kinds

    def error_floor(self) -> dict | None:
        """The error-book entries that bound this model's intervals (:func:`perfmodel.models.floor_for`).

        Decided from its method and the runs it learned from (``provenance_``, ``calibration_runs_``) each time it
        is asked, so a saved model follows the books installed with the package.

        Returns
        -------
        dict or None
            The entries (as :func:`perfmodel.models.floor_for` gives them); None: its own conformity scores alone.
        """
        return floor_for(self.method, getattr(self, "provenance_", None), getattr(self, "calibration_runs_", None))

    def predict_interval(self, X, confidence: float = 0.9, *, source_floor: bool = True) -> pd.DataFrame:
        """Mean step time of one new run with its prediction interval at ``confidence``.

        Every method's interval goes through here: the conformity scores of the query's kind, the model's own
        transfer scores, the two new-kinds rule, the whole sources held out, the widening with the distance to the
        runs and the device's peak as a floor, each named in ``interval_rule`` (:mod:`perfmodel.models._conformal`).

        Parameters
        ----------
        X : DataFrame
            Queries.
        confidence : float, default=0.9
            The interval level, in (0, 1).
        source_floor : bool, default=True
            Apply rule 5 (the whole sources held out, ``source_scores_``). False gives the band of the
            within-set scores alone: a record to compare with another estimator's within-set record (the
            predict layer's choice between own runs and a shifted prior), not an answer's band.

        Returns
        -------
        DataFrame with columns ``step_time_s``, ``step_lower``, ``step_upper`` (per step, seconds),
        ``nearest_run_distance``, ``query_kind``, ``interval_rule`` and ``peak_basis`` (the precision and,
        for fp32, how its matmuls and convolutions are assumed to run: :func:`perfmodel.features.peak_basis`).
        """
        self._check()
        confidence = check_confidence(confidence, "TrainingTimeModel.predict_interval")
        if not isinstance(X, pd.DataFrame):
            raise TypeError(f"TrainingTimeModel.predict_interval expects a DataFrame of queries. Got "
                            f"{type(X).__name__}.")
        floor = self.error_floor()
        if not self.scores_ and floor is None:
            raise ValueError(_POINT_FIT)
        pred = np.asarray(self.predict(X), dtype=float)
        kinds = self.query_kinds(X)
        models = X["model"].astype(str).to_numpy() if "model" in X.columns else np.full(len(X), "")
        new_model = ~np.isin(models, self.configs_["model"].to_numpy()) if "model" in X.columns \
            else np.ones(len(X), dtype=bool)
        if self.scores_:
            half, rule = half_widths(self.scores_, kinds, confidence, models=models, new_model=new_model)
        else:
            half, rule = np.zeros(len(X)), np.full(len(X), "", dtype=object)
        if floor is not None:  # errors measured where a whole published set (a framework, a cluster) was unseen
            q, names = _floor_quantiles(floor, kinds, new_model, confidence,
                                        _shape_unstated(X) if floor.get("unstated_shape") is not None else None)
            has = ~np.isnan(q)  # inf: the book has too few errors for this level, an unbounded band like the runs'
            if not self.scores_ and not has.all():
                raise ValueError(_POINT_FIT)
            few = has & ~np.isfinite(half)  # the runs' own scores are too few for this level: the book alone
            raise_ = few | (has & (half < q))
            half = np.where(raise_, q, half)
            rule = np.asarray(rule, dtype=object).copy()
            rule[raise_] = [("" if f or not r else f"{r}; ") + f"at least {n}"
                            for r, f, n in zip(rule[raise_], few[raise_], names[raise_])]
        sources = getattr(self, "source_scores_", None) if source_floor else None  # absent: fitted before rule 5
        if sources is not None:
            q_src = conformal_quantile(sources["scores"], confidence)
            raise_ = np.isin(np.asarray(kinds, dtype=object), TRANSFER_KINDS) & (half < q_src)
            if raise_.any():
                half = np.where(raise_, q_src, half)
                rule = np.asarray(rule, dtype=object).copy()
                rule[raise_] = [f"{r}; at least leave-one-source-out ({sources['groups']} sources)" if r else
                                f"leave-one-source-out ({sources['groups']} sources)" for r in rule[raise_]]
        dist = self.domain_distance(X)
        # the layout model's floor is its error on whole unseen sets, across their models and scales: it is what a
        # distant query gets (the distance widening was calibrated on CPU runs, for forms without that physics)
        factor = widening(dist) if floor is None or "by_kind" in floor else np.ones(len(X))
        wide = factor > 1
        if wide.any():
            half = half * factor
            rule = rule.copy()
            rule[wide] = [f"{r}; ×{f:.2f} for distance {d:.2f}" for r, f, d in zip(rule[wide], factor[wide],
                                                                                     dist[wide])]
        if self.method == "linear":  # additive scores, in seconds (the predict layer clips times at 0)
            lo, hi = pred - half, pred + half
        else:
            ok = pred > 0
            lo = np.where(ok, pred * np.exp(-half), 0.0)
            hi = np.where(ok, pred * np.exp(half), 0.0)
        pred, lo, hi, rule = self._peak_floor(X, pred, lo, hi, rule)
        return pd.DataFrame({"step_time_s": pred, "step_lower": lo, "step_upper": hi, "nearest_run_distance": dist,
                             "query_kind": kinds, "interval_rule": rule, "peak_basis": peak_basis(X)},
                            index=X.index)

    @staticmethod
    def _peak_floor(X: pd.DataFrame, pred, lo, hi, rule):
        """Rule 6 (:func:`~perfmodel.models._conformal.clip_at_peak`): nothing faster than 100% of the peak."""
        try:
            q = run_quantities(X)
        except (KeyError, ValueError, TypeError):  # a query frame without what the floor needs: no floor
            return pred, lo, hi, rule
        peak = q["peak_tflops"].to_numpy(dtype=float) * 1e12
        known = (~q["flops_imputed"].to_numpy(dtype=bool)) & np.isfinite(peak) & (peak > 0)
        floor = np.where(known, q["flops_per_step_device"].to_numpy(dtype=float) / np.where(known, peak, 1.0),
                         np.nan)
        pred, lo, hi, moved = clip_at_peak(pred, lo, hi, floor)
        if moved.any():
            rule = np.asarray(rule, dtype=object).copy()
            rule[moved] = [f"{r}; raised to 100% of peak ({p / 1e12:.4g} TFLOPS)" for r, p in
                           zip(rule[moved], peak[moved])]
        return pred, lo, hi, rule

    def domain_distance(self, X: pd.DataFrame) -> np.ndarray:
        """Distance of each query to the nearest training run, in training standard deviations of the logs of
        (params, batch_size, gpu_count, flops_per_sample), root-mean-square over the four. 0 means a configuration
        the fit has seen; above ~1 the query is far from every run. Along a quantity all training runs share
        (e.g. one device count) the unit is 0.1 in log (~10%): the runs say nothing about its effect, so any change
        is far (:mod:`perfmodel.models._domain`).

        Parameters
        ----------
        X : DataFrame
            Queries.

        Returns
        -------
        ndarray of shape (n_rows,)
            Each query's distance to the nearest fitted run.
        """
        self._check()
        dist, self._domain_tree = domain_distance(self.domain_, self.domain_scale_, self.domain_points_, X,
                                                  getattr(self, "_domain_tree", None))
        return dist

    # ---------------------------------------------------------------------------------------- reports
    @property
    def feature_names_(self) -> list[str]:
        self._check()
        return list(self.pipeline_.named_steps["features"].get_feature_names_out())

    def coef_table(self, confidence: float = 0.95) -> pd.DataFrame:
        """The fitted constants of the method, as a table.

        Parameters
        ----------
        confidence : float, default=0.95
            The level of the coefficients' intervals (OLS methods; the others have none).

        Returns
        -------
        DataFrame
            Coefficients with standard errors and intervals (linear, loglinear); the fitted constants and
            efficiencies (physics, ops), pooled effects (roofline), utilisations (ratio, mfu) or the layout
            model's coefficients (with their priors) in a ``value`` column; feature importances (gbm).
        """
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
        if isinstance(reg, (MFURegressor, RatioRegressor)):
            f = self.pipeline_.named_steps["features"]
            mfu = reg if isinstance(reg, MFURegressor) else reg.fallback_
            return mfu.utilisation_table(f.gpu_types_, f.precisions_)
        if isinstance(reg, LayoutRegressor):  # its physical coefficients, beside their priors and what each is
            prior = {**PRIOR, **(reg.prior or {})}
            return pd.DataFrame({"value": [float(reg.coef_[k]) for k in COEFFICIENTS],
                                 "prior": [float(prior[k]) for k in COEFFICIENTS],
                                 "meaning": [COEFFICIENTS[k][3] for k in COEFFICIENTS]}, index=list(COEFFICIENTS))
        return pd.DataFrame({"importance": reg.feature_importances_}, index=self.feature_names_)

    def summary(self) -> Summary:
        """A statsmodels-style summary (``print`` it, or display it in Jupyter).

        Returns
        -------
        Summary
            The fit's header statistics and its :meth:`coef_table`.
        """
        self._check()
        return Summary(self)


class Summary:
    """Text and HTML summary of a fitted :class:`TrainingTimeModel`.

    Parameters
    ----------
    model : TrainingTimeModel
        Fitted.
    """

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
            (f"{m.cv or 5}-fold CV MAPE", "n/a" if np.isnan(m.cv_mape_) else f"{m.cv_mape_:.1f}%"),
            (f"{m.cv or 5}-fold CV median APE", "n/a" if np.isnan(m.cv_median_ape_) else f"{m.cv_median_ape_:.1f}%"),
        ] if m.scores_ else [("Cross-validated error", "not computed (conformal=False)")]) + [
            (f"Interval scores: {kind}", f"{e['split']}, {e['groups']} {'runs' if kind == 'seen' else 'groups'}")
            for kind, e in m.scores_.items()]

    def as_text(self) -> str:
        """The summary as plain text (78 columns).

        Returns
        -------
        str
            Header statistics, the coefficient table and notes.
        """
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
        """The summary as an HTML fragment (what Jupyter shows).

        Returns
        -------
        str
            A ``<div>`` with the header table, the coefficient table and notes.
        """
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


def _floor_quantiles(floor: dict, kinds: np.ndarray, new_model: np.ndarray, confidence: float,
                     shape_unstated: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the least half-width an error book sets (NaN: none) and the book entry's name.

    ``floor`` is one entry (``{"name", "scores"}``: every row; its ``unstated_shape`` entry, where it has one and it
    is wider, for the rows ``shape_unstated`` marks) or ``{"by_kind": {kind: entry}}``: a row whose model the runs
    lack takes the widest of its kind's entry and the ``new_model`` one (:func:`perfmodel.models.transfer_floor`);
    other rows none.
    """
    n = len(kinds)
    q = np.full(n, np.nan)
    names = np.full(n, "", dtype=object)
    def quantile(entry: dict) -> float:
        return conformal_quantile(np.asarray(entry["scores"], dtype=float), confidence)

    if "by_kind" not in floor:
        q[:] = quantile(floor)
        names[:] = floor["name"]
        wider = floor.get("unstated_shape")
        if wider is not None and shape_unstated is not None and shape_unstated.any() and quantile(wider) > q[0]:
            q[shape_unstated] = quantile(wider)  # never narrower than a stated shape's band
            names[shape_unstated] = wider["name"]
        return q, names
    # a row whose model the runs lack: the widest of its kind's entry and the new-model entry (a harder query never
    # gets a narrower band)
    entries = floor["by_kind"]
    new = np.asarray(new_model, dtype=bool)
    for kind in np.unique(np.asarray(kinds, dtype=object)[new]) if new.any() else ():
        candidates = [entries[k] for k in dict.fromkeys((kind, "new_model")) if k in entries]
        if not candidates:
            continue
        best = max(candidates, key=quantile)
        rows = new & (np.asarray(kinds, dtype=object) == kind)
        q[rows] = quantile(best)
        names[rows] = best["name"]
    return q, names


def _shape_unstated(X: pd.DataFrame) -> np.ndarray:
    """Per query row: its transformer shape was not stated: no ``n_layers`` or ``d_model``, or every shape column
    it has exactly the standard shape of its size (:func:`perfmodel.transformer.standard_shape`, which stands in for
    an unstated one: :func:`perfmodel.predict_training_time` writes it into the query)."""
    if "n_layers" not in X.columns or "d_model" not in X.columns:
        return np.ones(len(X), dtype=bool)
    out = (X["n_layers"].isna() | X["d_model"].isna()).to_numpy().copy()
    params = pd.to_numeric(X["params"], errors="coerce").to_numpy(dtype=float) if "params" in X.columns \
        else np.full(len(X), np.nan)
    stated = ~out & np.isfinite(params) & (params > 0)
    for size in np.unique(params[stated]):  # one standard shape per size, compared column by column
        try:
            columns = shape_columns(standard_shape(float(size)))
        except (TypeError, ValueError, OverflowError):
            continue
        same = stated & (params == size)
        for c, v in columns.items():
            if c in X.columns and v is not None:
                cell = pd.to_numeric(X[c], errors="coerce").to_numpy(dtype=float)  # no number: not the standard
                same &= X[c].isna().to_numpy() | (cell == float(v))
        out |= same
    return out
