"""The estimator registry: each named method's description, feature set and regressor."""

from __future__ import annotations

from ._baselines import MFURegressor, RatioRegressor
from ._gbm import GBMRegressor
from ._layout import LayoutRegressor
from ._ols import OLSRegressor
from ._ops import OpsRegressor
from ._physics import PhysicsRegressor
from ._roofline import RooflineRegressor

__all__ = ["METHODS", "COUNT_FORMS", "make_regressor", "feature_set"]

#: Methods: name -> (description, feature set).
METHODS = {
    "linear": ("statsmodels OLS, T = b0 + b1*params + b2*batch_size + b3*gpu_count (seed design)", "seed"),
    "loglinear": ("statsmodels OLS on log step time (power law in FLOPs, params, batch, devices, hardware)", "log"),
    "gbm": ("scikit-learn gradient boosting on log step time", "log"),
    "physics": ("overhead + optimizer + FLOPs at a fitted per-family efficiency + all-reduce, least squares on "
                "log time", "physics"),
    "roofline": ("hierarchical roofline: FLOPs over the device's peak with a pooled memory-bound share, partially "
                 "pooled model/family/device/architecture/vendor/precision efficiencies, scaling terms",
                 "roofline"),
    "ops": ("op-level: per op class FLOPs at a fitted compute efficiency + bytes at a fitted memory efficiency "
            "(shared across models, pooled toward a common value), + launch overhead per kernel + all-reduce; "
            "least squares on log time; rows without op columns get an imputed op mix", "ops"),
    "ratio": ("baseline: the nearest runs of the same model on another device (nearest count, then batch; the median "
              "of those within a small band of the nearest), scaled by work and sqrt(peak ratio x "
              "memory-bandwidth ratio) at the precision used; a model the runs lack "
              "gets the mfu rule", "baseline"),
    "layout": ("transformer training under its parallel layout: GEMMs (a smooth roofline), attention, memory-bound "
               "kernels, tensor/context/expert collectives, the pipeline schedule, data-parallel/FSDP traffic and "
               "the optimizer, with a dozen efficiencies fitted across devices (perfmodel.models._layout)",
               "layout"),
    "mfu": ("baseline: FLOPs per device-step / (peak at the precision used x the median achieved MFU of the runs "
            "of the same op class on that device type and precision, else that precision, else all runs); a "
            "transformer's attention FLOPs, where its op columns give them, at their own fitted utilisation",
            "baseline"),
}

#: Methods whose form carries a change of device count that the runs never made: a communication term with a
#: prior and, on CPU, workers sharing the host; and the two baselines, whose rule is per-device work (ideal
#: scaling, by definition of the rule). The others cannot move with a device count their runs never varied, and
#: refuse such a query rather than answer for the runs' count.
COUNT_FORMS = ("physics", "roofline", "ops", "ratio", "mfu", "layout")


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
    if method == "gbm":
        return GBMRegressor(random_state=random_state)
    if method == "physics":
        return PhysicsRegressor()
    if method == "ops":
        return OpsRegressor()
    if method == "roofline":
        return RooflineRegressor()
    if method == "ratio":
        return RatioRegressor()
    if method == "mfu":
        return MFURegressor()
    if method == "layout":
        return LayoutRegressor()
    if method in ("linear", "loglinear"):
        return OLSRegressor(log_target=(method == "loglinear"))
    raise ValueError(f"Unknown method {method!r}; choose from {', '.join(METHODS)}.")
