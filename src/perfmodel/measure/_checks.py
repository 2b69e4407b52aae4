"""The positive-number checks of :mod:`perfmodel._validation` for values that must be given: the result is never
None (``allow_none`` is not taken), so the measuring code can compute with it directly (as
:mod:`perfmodel.plan._checks` does for the planners)."""

from __future__ import annotations

from typing import Any

from .._validation import check_positive_float, check_positive_int

__all__ = ["positive_int", "positive_float"]


def positive_int(value: Any, name: str, where: str) -> int:
    """:func:`perfmodel._validation.check_positive_int` without ``allow_none``: a positive int, or it raises."""
    out = check_positive_int(value, name, where)
    assert out is not None  # None is refused without allow_none
    return out


def positive_float(value: Any, name: str, where: str) -> float:
    """:func:`perfmodel._validation.check_positive_float` without ``allow_none``: a finite positive float, or it
    raises."""
    out = check_positive_float(value, name, where)
    assert out is not None  # None is refused without allow_none
    return out
