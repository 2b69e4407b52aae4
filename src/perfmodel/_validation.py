"""Parameter checks shared by the public functions; messages name the parameter, the rule and the value."""

from __future__ import annotations

import math
import numbers
from typing import Any, Literal, SupportsInt, cast, overload


def _fmt(value: Any) -> str:
    return _fmt_number(value)


#: The largest integer any count may be: what an int64 column (and NumPy) can hold.
MAX_INT = 2**63 - 1


def _fmt_number(value: Any) -> str:
    """``repr`` of a number, shortened for integers too long to print in full (``10**400``)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        try:
            text = repr(value)
        except ValueError:  # beyond Python's int-to-str digit limit
            return f"an integer of about {int(value).bit_length() * 0.30103:.0f} digits"
        return text if len(text) <= 40 else f"{text[:12]}...({len(text)} digits)"
    return repr(value)


@overload
def check_positive_int(value: Any, name: str, where: str, *, allow_none: Literal[False] = ...,
                       maximum: int = ...) -> int: ...
@overload
def check_positive_int(value: Any, name: str, where: str, *, allow_none: bool = ...,
                       maximum: int = ...) -> int | None: ...
def check_positive_int(value: Any, name: str, where: str, *, allow_none: bool = False,
                       maximum: int = MAX_INT) -> int | None:
    """Return ``value`` as an int if it is a positive integer at most ``maximum`` (default: the int64 range),
    else raise TypeError/ValueError. NumPy integers of any width become Python ints."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if not isinstance(value, bool) and isinstance(value, numbers.Real) and _finite_integer(value):
            # int() takes any real number, but numbers.Real does not declare __int__
            value = int(cast(SupportsInt, value))
        else:
            raise TypeError(
                f"The {name!r} parameter of {where} must be a positive int. Got {_fmt(value)} "
                f"of type {type(value).__name__} instead."
            )
    value = int(value)
    if value <= 0:
        raise ValueError(f"The {name!r} parameter of {where} must be a positive int. Got {_fmt(value)} instead.")
    if value > maximum:
        raise ValueError(f"The {name!r} parameter of {where} must be a positive int of at most {maximum:.4g}. "
                         f"Got {_fmt_number(value)} instead.")
    return value


@overload
def check_positive_float(value: Any, name: str, where: str, *, allow_none: Literal[False] = ...,
                         maximum: float | None = ...) -> float: ...
@overload
def check_positive_float(value: Any, name: str, where: str, *, allow_none: bool = ...,
                         maximum: float | None = ...) -> float | None: ...
def check_positive_float(value: Any, name: str, where: str, *, allow_none: bool = False,
                         maximum: float | None = None) -> float | None:
    """Return ``value`` as a float if it is a finite positive number (at most ``maximum`` when given), else raise.
    An integer beyond the float range (``10**400``) is refused with a ValueError, never an OverflowError."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"The {name!r} parameter of {where} must be a positive number. Got {_fmt(value)} "
            f"of type {type(value).__name__} instead."
        )
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out) or out <= 0:
        raise ValueError(
            f"The {name!r} parameter of {where} must be a finite positive number. Got {_fmt_number(value)} instead."
        )
    if maximum is not None and out > maximum:
        raise ValueError(f"The {name!r} parameter of {where} must be a positive number of at most {maximum:g}. "
                         f"Got {_fmt_number(value)} instead.")
    return out


def check_nonnegative_float(value: Any, name: str, where: str, *, maximum: float | None = None) -> float:
    """Return ``value`` as a float if it is a finite number >= 0 (at most ``maximum`` when given), else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"The {name!r} parameter of {where} must be a number >= 0. Got {_fmt(value)} of type "
                        f"{type(value).__name__} instead.")
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out) or out < 0 or (maximum is not None and out > maximum):
        bound = f" and at most {maximum:g}" if maximum is not None else ""
        raise ValueError(f"The {name!r} parameter of {where} must be a finite number >= 0{bound}. "
                         f"Got {_fmt_number(value)} instead.")
    return out


def _finite_integer(value) -> bool:
    """Whether a real number is finite and integral (False beyond the float range, not an OverflowError)."""
    try:
        v = float(value)
    except OverflowError:
        return False
    return math.isfinite(v) and v.is_integer()


def check_confidence(value: Any, where: str) -> float:
    """The interval level, a float strictly between 0 and 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"The 'confidence' parameter of {where} must be a float in (0, 1). Got {_fmt(value)} "
            f"of type {type(value).__name__} instead."
        )
    try:
        level = float(value)
    except OverflowError:  # an int beyond the float range
        level = math.inf
    if not (0.0 < level < 1.0):
        raise ValueError(f"The 'confidence' parameter of {where} must be a float in (0, 1). Got {_fmt(value)} instead.")
    return float(value)


def check_choice(value: Any, name: str, where: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(
            f"The {name!r} parameter of {where} must be one of {', '.join(map(repr, choices))}. "
            f"Got {_fmt(value)} instead."
        )
    return value


def check_fit_arrays(X, y, columns, where: str):
    """``X, y`` as float arrays for a regressor's ``fit``: X with one column per name in ``columns``, y at least
    3 positive, finite step times. Raises ValueError naming ``where`` otherwise."""
    import numpy as np

    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    if X.ndim != 2 or X.shape[1] != len(columns):
        raise ValueError(f"{where} expects the {len(columns)} columns {columns}.")
    if len(y) < 3 or np.any(y <= 0) or not np.all(np.isfinite(y)):
        raise ValueError(f"{where} needs at least 3 positive, finite step times.")
    return X, y


def row_label(i: int, numbers=None) -> str:
    """``query row i`` (0-based, a frame's own order), or ``row N (counting from 1)`` where ``numbers`` gives each
    row's 1-based number in what the caller passed."""
    return f"row {int(numbers[i])} (counting from 1)" if numbers is not None else f"query row {i}"


def check_prediction_frame(out, *, confidence: float, n_runs: int, method: str, where: str, numbers=None) -> None:
    """Refuse to return a prediction that is not a finite, positive step time inside a bounded interval.

    ``out`` has columns ``step_time_s, step_lower, step_upper, seconds, lower, upper`` (a frame from the
    predict layer); ``numbers``, where given, the 1-based number of each of its rows in the caller's input.
    Raises :class:`~perfmodel.exceptions.PredictionError` naming the first bad row and why.
    """
    import numpy as np

    from .exceptions import PredictionError

    point = out[["step_time_s", "seconds"]].to_numpy(dtype=float)
    bounds = out[["step_lower", "step_upper", "lower", "upper"]].to_numpy(dtype=float)
    nonpos = np.isfinite(point[:, 0]) & (point[:, 0] <= 0)
    if nonpos.any():  # a fit on the linear scale can cross zero; 0 s per step is no answer
        i = int(np.flatnonzero(nonpos)[0])
        raise PredictionError(
            f"{where}: the {method} fit predicts a non-positive step time ({point[i, 0]:.3g} s) for "
            f"{row_label(i, numbers)}: a fit on the linear scale can cross zero where the runs are small. Use a "
            "method fitted on the log scale ('auto', 'loglinear', 'roofline').")
    bad = ~np.isfinite(point).all(axis=1) | (point < 0).any(axis=1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise PredictionError(
            f"{where}: the {method} fit gives no finite step time for {row_label(i, numbers)} ({point[i, 0]!r} s); "
            "the query is beyond the numeric range of the fit. Check its sizes and counts.")
    unbounded = ~np.isfinite(bounds).all(axis=1)
    if unbounded.any():
        i = int(np.flatnonzero(unbounded)[0])
        most = n_runs / (n_runs + 1)
        rule = str(out["interval_rule"].iloc[i]) if "interval_rule" in out.columns else ""
        basis = f" Its band: {rule}." if rule and rule not in ("nan", "None") else ""
        raise PredictionError(
            f"{where}: the {confidence:g} prediction interval of {row_label(i, numbers)} is unbounded with this "
            f"history ({n_runs} runs, {method} fit): a split-conformal interval needs confidence <= n/(n+1) for n "
            f"conformity scores (n/(n+1) = {most:.4g} with one score per run; a 90% interval needs at least 9)."
            f"{basis} Lower the confidence or add runs.")
    lo, hi = bounds[:, [0, 2]], bounds[:, [1, 3]]
    tol = 1e-12 * np.abs(point)
    inverted = ((lo > point + tol) | (point > hi + tol) | (lo < 0)).any(axis=1)
    if inverted.any():
        i = int(np.flatnonzero(inverted)[0])
        raise PredictionError(
            f"{where}: the {method} fit gives an interval [{lo[i, 1]!r}, {hi[i, 1]!r}] s that does not contain its "
            f"prediction {point[i, 1]!r} s for {row_label(i, numbers)} (a numeric overflow); the query is beyond "
            "what the fit can represent.")
