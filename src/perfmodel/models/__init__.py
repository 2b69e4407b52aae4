"""Estimators: scikit-learn regressors on numeric features, and the run-level :class:`TrainingTimeModel`."""

from __future__ import annotations

from ..metrics import mape, median_ape
from ._baselines import RATIO_BAND, MFURegressor, RatioRegressor
from ._books import (
           LAYOUT_BOOK,
           TRANSFER_BOOK,
           UNSTATED_SHAPE,
           WITHIN_JOB,
           floor_for,
           layout_floor,
           layout_tie_factor,
           read_error_book,
           transfer_floor,
)
from ._conformal import balanced_scores, conformal_quantile
from ._gbm import GBMRegressor, TreeEnsemble
from ._layout import CALIBRATION_PRIOR_WEIGHT, LayoutRegressor
from ._ols import OLSRegressor
from ._ops import OpsRegressor
from ._physics import PhysicsRegressor
from ._registry import COUNT_FORMS, METHODS
from ._roofline import RooflineRegressor
from ._shift import StackShift, shift_scales
from ._training import FIT_FORMAT, Summary, TrainingTimeModel

__all__ = ["LAYOUT_BOOK", "TRANSFER_BOOK", "UNSTATED_SHAPE", "WITHIN_JOB", "floor_for", "layout_floor", "layout_tie_factor",
           "read_error_book",
           "transfer_floor", "OLSRegressor", "GBMRegressor", "PhysicsRegressor", "OpsRegressor", "RooflineRegressor",
           "TrainingTimeModel", "Summary", "FIT_FORMAT", "METHODS", "COUNT_FORMS", "mape", "median_ape", "conformal_quantile",
           "balanced_scores", "TreeEnsemble", "MFURegressor", "RatioRegressor", "RATIO_BAND", "LayoutRegressor", "CALIBRATION_PRIOR_WEIGHT",
           "StackShift", "shift_scales"]
