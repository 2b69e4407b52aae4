"""Gradient boosting on log step time, with its trees stored as plain arrays (safe model files)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.utils.validation import check_is_fitted, validate_data

from ..metrics import r2

if TYPE_CHECKING:  # imported to fit only (GBMRegressor._base): predicting never needs it
    from sklearn.ensemble import GradientBoostingRegressor

__all__ = ["GBMRegressor", "TreeEnsemble"]


#: From this many rows, :meth:`TreeEnsemble.predict` walks the trees one by one (faster for many rows; slower for
#: a few, where walking all trees at once wins).
_PER_TREE_ROWS = 2048


class TreeEnsemble:
    """The fitted trees of a gradient-boosting model as plain arrays, with a NumPy predictor.

    What prediction needs and nothing else: per tree, for every node its split feature, threshold, children
    and value. Built from a fitted :class:`~sklearn.ensemble.GradientBoostingRegressor`
    (:meth:`from_sklearn`) or from stored arrays (:meth:`from_arrays`, which checks them so that a damaged or
    tampered file cannot make prediction loop or index out of bounds). Predictions equal scikit-learn's bit
    for bit: samples are compared in float32 as scikit-learn's trees do, and the stages are summed in order.

    The arrays are 1-D, the nodes of all trees concatenated, children as indices within their tree; each is
    kept as the attribute of its name.

    Parameters
    ----------
    offsets : ndarray of int64, shape (n_trees + 1,)
        Where each tree's nodes start (and, last, the node count).
    feature, left, right : ndarray of int64, shape (n_nodes,)
        Each node's split feature and children; ``left == right == -1`` at a leaf.
    threshold, value : ndarray of float64, shape (n_nodes,)
        Each node's split threshold and value (a leaf's value is its prediction).
    missing_left : ndarray of bool, shape (n_nodes,)
        Where a NaN goes at a split (scikit-learn >= 1.3).
    init, learning_rate : float
        The initial prediction and the shrinkage of every tree's value.
    n_features : int
        Features a sample has.
    """

    _ARRAYS = ("offsets", "feature", "left", "right", "threshold", "value", "missing_left")

    def __init__(self, *, offsets, feature, left, right, threshold, value, missing_left, init, learning_rate,
                 n_features):
        self.offsets, self.feature, self.left, self.right = offsets, feature, left, right
        self.threshold, self.value, self.missing_left = threshold, value, missing_left
        self.init, self.learning_rate, self.n_features = init, learning_rate, n_features

    @classmethod
    def from_sklearn(cls, est: GradientBoostingRegressor) -> TreeEnsemble:
        """The trees of a fitted scikit-learn model.

        Parameters
        ----------
        est : GradientBoostingRegressor
            Fitted.

        Returns
        -------
        TreeEnsemble
            Its trees, which predict what ``est.predict`` does, bit for bit.
        """
        trees = [e.tree_ for e in np.ravel(est.estimators_)]
        sizes = [t.node_count for t in trees]
        cat = lambda f: np.concatenate([f(t) for t in trees]) if trees else np.empty(0)  # noqa: E731
        missing = cat(lambda t: np.asarray(getattr(t, "missing_go_to_left", np.zeros(t.node_count)), dtype=bool))
        return cls(offsets=np.r_[0, np.cumsum(sizes)].astype(np.int64),
                   feature=cat(lambda t: t.feature).astype(np.int64),
                   left=cat(lambda t: t.children_left).astype(np.int64),
                   right=cat(lambda t: t.children_right).astype(np.int64),
                   threshold=cat(lambda t: t.threshold).astype(np.float64),
                   value=cat(lambda t: t.value.reshape(t.node_count, -1)[:, 0]).astype(np.float64),
                   missing_left=missing.astype(bool),
                   init=float(np.ravel(est.init_.constant_)[0]), learning_rate=float(est.learning_rate),
                   n_features=int(est.n_features_in_))

    def to_arrays(self) -> dict:
        """The ensemble as plain arrays and numbers (what a safe model file stores).

        Returns
        -------
        dict
            The constructor's parameters by name: :meth:`from_arrays` rebuilds the ensemble from it.
        """
        return {**{k: getattr(self, k) for k in self._ARRAYS}, "init": self.init,
                "learning_rate": self.learning_rate, "n_features": self.n_features}

    @classmethod
    def from_arrays(cls, d: dict) -> TreeEnsemble:
        """Check stored arrays and build the ensemble.

        Parameters
        ----------
        d : dict
            The arrays and numbers of :meth:`to_arrays`.

        Returns
        -------
        TreeEnsemble
            Checked so that prediction cannot loop or index out of bounds.

        Raises
        ------
        ValueError
            Naming what is wrong (a damaged or tampered file).
        """
        def arr(name, kind):
            a = np.asarray(d[name])
            if a.ndim != 1 or a.dtype.kind not in kind:
                raise ValueError(f"tree array {name!r} has shape {a.shape} and dtype {a.dtype}")
            return a

        offsets = arr("offsets", "iu").astype(np.int64)
        feature, left, right = (arr(k, "iu").astype(np.int64) for k in ("feature", "left", "right"))
        threshold, value = arr("threshold", "f").astype(np.float64), arr("value", "f").astype(np.float64)
        missing = arr("missing_left", "b").astype(bool)
        n = len(feature)
        init, lr, n_features = float(d["init"]), float(d["learning_rate"]), int(d["n_features"])
        if not (len(left) == len(right) == len(threshold) == len(value) == len(missing) == n):
            raise ValueError("tree arrays have different lengths")
        if len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != n or np.any(np.diff(offsets) < 1):
            raise ValueError("tree offsets do not partition the nodes")
        if not (math.isfinite(init) and math.isfinite(lr) and 0 < n_features <= 10**6):
            raise ValueError("tree ensemble has a non-finite init or learning rate or a bad feature count")
        if not (np.all(np.isfinite(value)) and np.all(~np.isnan(threshold))):
            raise ValueError("tree values or thresholds are not finite")
        local = np.arange(n) - np.repeat(offsets[:-1], np.diff(offsets))
        size = np.repeat(np.diff(offsets), np.diff(offsets))
        leaf = left == -1
        if np.any(leaf != (right == -1)):
            raise ValueError("a tree node has exactly one child")
        internal = ~leaf
        # children come after their parent and inside its tree: traversal always ends at a leaf
        for child in (left, right):
            ok = (child[internal] > local[internal]) & (child[internal] < size[internal])
            if not np.all(ok):
                raise ValueError("a tree node points outside its tree or backwards")
        if np.any((feature[internal] < 0) | (feature[internal] >= n_features)):
            raise ValueError("a tree splits on a feature the model does not have")
        return cls(offsets=offsets, feature=feature, left=left, right=right, threshold=threshold, value=value,
                   missing_left=missing, init=init, learning_rate=lr, n_features=n_features)

    def predict(self, X) -> np.ndarray:
        """Raw prediction (the boosted sum) for each row of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.

        Returns
        -------
        ndarray of shape (n_samples,)
            The initial prediction plus every tree's value times the learning rate, summed stage by stage.
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"X has shape {X.shape}; the trees expect {self.n_features} features")
        X32 = X.astype(np.float32).astype(np.float64)  # scikit-learn's trees compare float32 samples
        if len(X32) >= _PER_TREE_ROWS:
            return self._predict_per_tree(X32)
        raw = np.full(len(X32), self.init, dtype=np.float64)
        leaf = self.left == -1
        starts = self.offsets[:-1]
        chunk = max(1, 2**20 // max(len(starts), 1))
        for lo in range(0, len(X32), chunk):  # all trees at once, a block of rows at a time
            Xb = X32[lo:lo + chunk]
            base = np.broadcast_to(starts, (len(Xb), len(starts)))
            node = base.copy()
            rows = np.broadcast_to(np.arange(len(Xb))[:, None], node.shape)
            active = ~leaf[node]
            while active.any():  # children follow their parents, so this ends at the leaves
                nd = node[active]
                x = Xb[rows[active], self.feature[nd]]
                go_left = np.where(np.isnan(x), self.missing_left[nd], x <= self.threshold[nd])
                node[active] = base[active] + np.where(go_left, self.left[nd], self.right[nd])
                active = ~leaf[node]
            vals = self.value[node]
            out = raw[lo:lo + chunk]
            for t in range(vals.shape[1]):  # stage by stage, as scikit-learn sums them
                out += self.learning_rate * vals[:, t]
        return raw

    def _predict_per_tree(self, X32: np.ndarray) -> np.ndarray:
        """:meth:`predict` for many rows: tree by tree, splitting the rows at each node (each feature one contiguous
        row), ~3x faster than walking every tree at once from ~2,000 rows up; the same sum, stage by stage."""
        XT = np.ascontiguousarray(X32.T)
        raw = np.full(len(X32), self.init, dtype=np.float64)
        leaf = self.left == -1
        every = np.arange(len(X32))
        vals = np.empty(len(X32))
        for a, b in zip(self.offsets[:-1], self.offsets[1:]):
            feature, threshold, is_leaf = self.feature[a:b], self.threshold[a:b], leaf[a:b]
            left, right, missing, value = self.left[a:b], self.right[a:b], self.missing_left[a:b], self.value[a:b]
            todo = [(0, every)]
            while todo:  # children follow their parents, so this ends at the leaves
                node, rows = todo.pop()
                if is_leaf[node]:
                    vals[rows] = value[node]
                    continue
                x = XT[feature[node], rows]
                go_left = np.where(np.isnan(x), missing[node], x <= threshold[node])
                todo.append((left[node], rows[go_left]))
                todo.append((right[node], rows[~go_left]))
            raw += self.learning_rate * vals
        return raw


class GBMRegressor(RegressorMixin, BaseEstimator):
    """scikit-learn gradient boosting on (log) time.

    A point regressor: its prediction intervals, like every method's, come from the conformity scores of
    :class:`~perfmodel.models.TrainingTimeModel` (:mod:`perfmodel.models._conformal`).

    Parameters
    ----------
    n_estimators, learning_rate, max_depth, min_samples_leaf, subsample : int or float
        Passed to :class:`sklearn.ensemble.GradientBoostingRegressor` (defaults 300, 0.05, 3, 3, 1.0).
    log_target : bool, default=True
        Fit ``log(y)``; predictions are back-transformed.
    random_state : int or None, default=0
        Seed of the boosting (its subsampling, when ``subsample < 1``).

    Attributes
    ----------
    estimator_ : GradientBoostingRegressor
        The fitted scikit-learn model (not kept in a safe model file).
    trees_ : TreeEnsemble
        Its trees as plain arrays; predictions use these (identical to ``estimator_.predict``).
    resid_std_, rsquared_ : float
        In-sample residual standard deviation and R² on the fitted scale.
    feature_importances_ : ndarray
    """

    def __init__(self, *, n_estimators: int = 300, learning_rate: float = 0.05, max_depth: int = 3,
                 min_samples_leaf: int = 3, subsample: float = 1.0, log_target: bool = True,
                 random_state: int | None = 0):
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.subsample = subsample
        self.log_target = log_target
        self.random_state = random_state

    def _base(self):
        from sklearn.ensemble import GradientBoostingRegressor

        return GradientBoostingRegressor(
            n_estimators=self.n_estimators, learning_rate=self.learning_rate, max_depth=self.max_depth,
            min_samples_leaf=self.min_samples_leaf, subsample=self.subsample, random_state=self.random_state,
        )

    def fit(self, X, y):
        """Fit the boosted trees.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The design (numeric).
        y : array-like of shape (n_samples,)
            Targets (positive with ``log_target``); at least 2 samples.

        Returns
        -------
        self : GBMRegressor
            Fitted.
        """
        X, y = validate_data(self, X, y, y_numeric=True, ensure_min_samples=2)
        y = np.asarray(y, dtype=float)
        if self.log_target:
            if np.any(y <= 0):
                raise ValueError("GBMRegressor(log_target=True) needs a positive target; got values <= 0.")
            t = np.log(y)
        else:
            t = y
        self.estimator_ = clone(self._base()).fit(X, t)
        self.trees_ = TreeEnsemble.from_sklearn(self.estimator_)  # what prediction uses, stored in model files
        resid = t - self.estimator_.predict(X)
        self.resid_std_ = float(np.std(resid, ddof=1)) if len(t) > 1 else np.nan
        self.rsquared_ = r2(t, t - resid)
        self.feature_importances_ = self.estimator_.feature_importances_
        return self

    def _raw(self, X):
        check_is_fitted(self, "trees_")
        X = validate_data(self, X, reset=False)
        return self.trees_.predict(X)

    def predict(self, X):
        """Predicted target of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The design, with the features of the fit.

        Returns
        -------
        ndarray of shape (n_samples,)
            ``exp`` of the trees' sum with ``log_target``, else the sum.
        """
        t = self._raw(X)
        return np.exp(t) if self.log_target else t

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = bool(self.log_target)
        return tags
