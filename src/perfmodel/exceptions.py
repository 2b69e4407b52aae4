"""Exceptions and warnings raised by perfmodel.

Hierarchy::

    PerfModelError
    ├── SchemaError(PerfModelError, ValueError)          a run history that breaks the schema
    ├── UnknownHardwareError(PerfModelError, ValueError) a device name not in the spec table
    ├── DeviceSpecError(PerfModelError, ValueError)      an invalid or clashing device row (register_device)
    ├── NotFittedError(PerfModelError, ValueError)        an estimator used before ``fit``
    ├── PredictionError(PerfModelError, ValueError)       no finite time or bounded interval for a query
    ├── UnsupportedQueryError(PerfModelError, ValueError) a query the history cannot answer (a device or
    │                                                     precision it has no runs on, a model it does not know)
    ├── UnknownPriceError(PerfModelError, ValueError)     no price for a device in the price table
    ├── NotAModelFileError(PerfModelError, ValueError)    a file that is not a perfmodel model file
    ├── MLPerfFormatError(PerfModelError, ValueError)     a file or folder that is not an MLPerf result log
    │                                                     (perfmodel.importers.mlperf)
    ├── LayoutError(PerfModelError, ValueError)           a parallel layout the training frameworks would not run
    │   └── DoesNotFitError                               a planned job whose memory estimate exceeds the device
    ├── MeasurementError(PerfModelError, RuntimeError)    a measured run that could not complete
    └── MissingDependencyError(PerfModelError, ImportError) an optional extra is needed (the message names it)

    PerfModelWarning(UserWarning)
    ├── ExtrapolationWarning   a query outside the range of the fitted runs
    ├── DataQualityWarning     a history that loads but looks suspicious (few runs, high noise)
    │   └── NoisyTimingWarning a measured run whose timing says the machine was busy (see ``timing_flag``)
    └── CacheWarning           the model cache directory cannot be written (warned once per process)

Every error that comes from bad input is a ``ValueError`` or ``TypeError`` subclass, so callers can catch the
standard types; the CLI turns :class:`PerfModelError`, ``ValueError`` and ``TypeError`` into one line on stderr.
"""

from __future__ import annotations

__all__ = [
    "PerfModelError",
    "SchemaError",
    "UnknownHardwareError",
    "DeviceSpecError",
    "NotFittedError",
    "PredictionError",
    "UnsupportedQueryError",
    "UnknownPriceError",
    "NotAModelFileError",
    "MLPerfFormatError",
    "LayoutError",
    "DoesNotFitError",
    "MeasurementError",
    "MissingDependencyError",
    "PerfModelWarning",
    "ExtrapolationWarning",
    "DataQualityWarning",
    "NoisyTimingWarning",
    "CacheWarning",
]


class PerfModelError(Exception):
    """Base class of every perfmodel error."""


class SchemaError(PerfModelError, ValueError):
    """A run history is missing a column, has a wrong dtype, or has invalid values."""


class UnknownHardwareError(PerfModelError, ValueError):
    """A device name is not in the hardware spec table (the message lists the closest known names)."""


class DeviceSpecError(PerfModelError, ValueError):
    """A device row for the spec table is invalid, or its name clashes with a known device or alias."""


class NotFittedError(PerfModelError, ValueError):
    """An estimator was used before ``fit`` was called."""


class PredictionError(PerfModelError, ValueError):
    """A query has no finite predicted time or no bounded interval: the confidence is too high for the number
    of runs (a conformal interval at level c needs c <= n/(n+1)), an OLS fit has no residual degrees of
    freedom, or the query is beyond the numeric range of the fit. Public prediction functions raise this
    rather than return NaN, infinity or an interval that does not contain its point."""


class LayoutError(PerfModelError, ValueError):
    """A parallel layout the training frameworks would not run (the message names every rule it breaks)."""


class DoesNotFitError(LayoutError):
    """A planned job's per-device memory estimate exceeds the device's memory.

    Parameters
    ----------
    message : str
        What does not fit, by how much, and what would.
    memory : perfmodel.plan.MemoryEstimate, optional
        The estimate of the layout asked for.
    suggestion : str, optional
        The nearest layout that fits, in words.

    Attributes
    ----------
    memory : perfmodel.plan.MemoryEstimate or None
        The estimate of the layout asked for.
    suggestion : str or None
        The nearest layout that fits, in words, when a search found one.
    """

    def __init__(self, message: str, *, memory=None, suggestion: str | None = None):
        super().__init__(message)
        self.memory = memory
        self.suggestion = suggestion


class UnsupportedQueryError(PerfModelError, ValueError):
    """The history cannot answer this query: a device type or precision it has no runs on (and no way to carry
    step times across), a model name it does not know, or a device count that a method without a communication
    form (linear, loglinear, gbm) was never fitted across. The query itself is well-formed."""


class UnknownPriceError(PerfModelError, ValueError):
    """The price table has no (on-demand or spot) price for a device, or none from the requested provider.

    Attributes
    ----------
    reason : str or None
        Why there is no price, without the rest of the message (for callers that list it); None where not given.
    """

    reason: str | None = None


class NotAModelFileError(PerfModelError, ValueError):
    """A file given as a fitted model is not a perfmodel model file (e.g. a CSV history or an HTML report)."""


class MLPerfFormatError(PerfModelError, ValueError):
    """A file or folder that is not an MLPerf result log (or holds no usable run); raised by
    :mod:`perfmodel.importers.mlperf`."""


class MeasurementError(PerfModelError, RuntimeError):
    """A measured training run failed, ran out of memory or timed out."""


class MissingDependencyError(PerfModelError, ImportError):
    """An optional dependency (an extra) is needed for what was asked: the message says which to install."""


class PerfModelWarning(UserWarning):
    """Base class of perfmodel's warnings."""


class ExtrapolationWarning(PerfModelWarning):
    """A prediction query lies outside the range of the runs the model was fitted on."""


class DataQualityWarning(PerfModelWarning):
    """A run history loads but looks unreliable (too few runs, large run-to-run spread)."""


class NoisyTimingWarning(DataQualityWarning):
    """A run was measured, but its timing says the machine was busy: its per-step times spread too widely, or it
    differs too much from an earlier repeat of the same configuration. The run is recorded all the same, with
    the reason in its ``timing_flag`` column (see :mod:`perfmodel.measure`)."""


class CacheWarning(PerfModelWarning):
    """The disk cache of fitted models (:mod:`perfmodel.cache`) cannot be written: every fit is made afresh.
    Warned once per cache directory and process."""
