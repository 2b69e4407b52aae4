"""Parameter checks shared by the public functions; messages name the parameter, the rule and the value."""

from __future__ import annotations

import numbers
import math
from typing import Any


def _fmt(value: Any) -> str:
    return repr(value)


def check_positive_int(value: Any, name: str, where: str, *, allow_none: bool = False) -> int | None:
    """Return ``value`` as an int if it is a positive integer, else raise TypeError/ValueError."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer() and not isinstance(value, bool):
            value = int(value)
        else:
            raise TypeError(
                f"The {name!r} parameter of {where} must be a positive int. Got {_fmt(value)} "
                f"of type {type(value).__name__} instead."
            )
    if value <= 0:
        raise ValueError(f"The {name!r} parameter of {where} must be a positive int. Got {_fmt(value)} instead.")
    return int(value)


def check_positive_float(value: Any, name: str, where: str, *, allow_none: bool = False) -> float | None:
    """Return ``value`` as a float if it is a finite positive number, else raise."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"The {name!r} parameter of {where} must be a positive number. Got {_fmt(value)} "
            f"of type {type(value).__name__} instead."
        )
    if not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"The {name!r} parameter of {where} must be a finite positive number. Got {_fmt(value)} instead."
        )
    return float(value)


def check_confidence(value: Any, where: str) -> float:
    """The interval level, a float strictly between 0 and 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"The 'confidence' parameter of {where} must be a float in (0, 1). Got {_fmt(value)} "
            f"of type {type(value).__name__} instead."
        )
    if not (0.0 < float(value) < 1.0):
        raise ValueError(f"The 'confidence' parameter of {where} must be a float in (0, 1). Got {_fmt(value)} instead.")
    return float(value)


def check_choice(value: Any, name: str, where: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(
            f"The {name!r} parameter of {where} must be one of {', '.join(map(repr, choices))}. "
            f"Got {_fmt(value)} instead."
        )
    return value
