"""The methods' vocabulary: each method's name, description and feature set, which of them carry a change of
device count, and which are the baselines ``auto`` weighs the fitted forms against.

One owner for what the CLI's ``--method`` choices, :mod:`perfmodel.models`' registry (which adds the regressors),
:mod:`perfmodel.fitting`'s selection and the docs say. It imports nothing, so the CLI can build its parser
without the estimators.
"""

from __future__ import annotations

__all__ = ["AUTO", "METHODS", "METHOD_CHOICES", "COUNT_FORMS", "BASELINE_METHODS", "AUTO_CANDIDATES"]

#: The method that chooses among the others by cross-validated error (:func:`perfmodel.fitting.choose_method`).
AUTO = "auto"

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
               "the optimizer, with efficiencies and latencies fitted across devices (perfmodel.models._layout)",
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

#: The rules ``auto`` weighs the fitted forms against (:func:`perfmodel.fitting.choose_method`).
BASELINE_METHODS = ("ratio", "mfu")

#: The methods ``auto`` chooses among, in the order it weighs them (:func:`perfmodel.fitting.choose_method`):
#: every method but the seed design (``linear``) and the LLM layout model (``layout``).
AUTO_CANDIDATES = ("physics", "roofline", "loglinear", "gbm", "ops", "ratio", "mfu")

#: What a ``method`` argument may name: ``auto`` or a method.
METHOD_CHOICES = (AUTO, *METHODS)
