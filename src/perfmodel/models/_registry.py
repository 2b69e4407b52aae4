"""The estimator registry: each named method's description, feature set and regressor."""

from __future__ import annotations

from .._methods import COUNT_FORMS, METHODS
from ._baselines import MFURegressor, RatioRegressor
from ._gbm import GBMRegressor
from ._layout import LayoutRegressor
from ._ols import OLSRegressor
from ._ops import OpsRegressor
from ._physics import PhysicsRegressor
from ._roofline import RooflineRegressor

__all__ = ["METHODS", "COUNT_FORMS", "REGRESSORS", "make_regressor", "feature_set"]

#: Each method of :data:`METHODS` -> a function of ``random_state`` making its unfitted regressor (one entry per
#: method: ``tests/test_models.py`` checks the two agree).
REGRESSORS = {
    "linear": lambda random_state: OLSRegressor(log_target=False),
    "loglinear": lambda random_state: OLSRegressor(log_target=True),
    "gbm": lambda random_state: GBMRegressor(random_state=random_state),
    "physics": lambda random_state: PhysicsRegressor(),
    "ops": lambda random_state: OpsRegressor(),
    "roofline": lambda random_state: RooflineRegressor(),
    "ratio": lambda random_state: RatioRegressor(),
    "mfu": lambda random_state: MFURegressor(),
    "layout": lambda random_state: LayoutRegressor(),
}


def feature_set(method: str) -> str:
    """The :class:`~perfmodel.features.RunFeaturizer` feature set of ``method``.

    Parameters
    ----------
    method : str
        A key of :data:`METHODS`.

    Returns
    -------
    str
        One of :data:`perfmodel.features.FEATURE_SETS`.
    """
    return METHODS[method][1]


def make_regressor(method: str, random_state: int | None = 0):
    """A new, unfitted regressor for ``method``.

    Parameters
    ----------
    method : str
        A key of :data:`METHODS`.
    random_state : int or None, default=0
        Seed of the methods that draw random numbers (gbm).

    Returns
    -------
    estimator
        The method's scikit-learn regressor, with its default parameters (the physical forms and baselines read
        their columns by name: :mod:`perfmodel.models._columns`).
    """
    factory = REGRESSORS.get(method) if isinstance(method, str) else None
    if factory is not None:
        return factory(random_state)
    raise ValueError(f"Unknown method {method!r}; choose from {', '.join(METHODS)}.")
