"""Estimators: scikit-learn regressors on numeric features, and the run-level :class:`TrainingTimeModel`."""

from __future__ import annotations

from ._gbm import GBMRegressor, TreeEnsemble, balanced_scores, conformal_quantile
from ._ols import OLSRegressor
from ._physics import PhysicsRegressor
from ._ops import OpsRegressor
from ._roofline import RooflineRegressor
from ..metrics import mape, median_ape
from ._training import METHODS, Summary, TrainingTimeModel

__all__ = ["OLSRegressor", "GBMRegressor", "PhysicsRegressor", "OpsRegressor", "RooflineRegressor", "TrainingTimeModel", "Summary", "METHODS", "mape", "median_ape",
           "conformal_quantile", "balanced_scores", "TreeEnsemble"]
