"""The positive-number checks of :mod:`perfmodel._validation` for values that must be given: the result is never
None (``allow_none`` is not taken), so the planners can compute with it directly."""

from __future__ import annotations

from typing import Any

from .._validation import MAX_INT, check_positive_float, check_positive_int


def positive_int(value: Any, name: str, where: str, *, maximum: int = MAX_INT) -> int:
    """:func:`perfmodel._validation.check_positive_int` without ``allow_none``: a positive int, or it raises."""
    out = check_positive_int(value, name, where, maximum=maximum)
    assert out is not None  # None is refused without allow_none
    return out


def positive_float(value: Any, name: str, where: str, *, maximum: float | None = None) -> float:
    """:func:`perfmodel._validation.check_positive_float` without ``allow_none``: a finite positive float, or it
    raises."""
    out = check_positive_float(value, name, where, maximum=maximum)
    assert out is not None  # None is refused without allow_none
    return out
