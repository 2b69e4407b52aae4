"""perfmodel._validation: the argument checks (issue 26 #11).

Numbers outside the documented range are refused with a ValueError/TypeError naming the parameter: never an
OverflowError, a MemoryError or a NaN result.
"""

from __future__ import annotations

import numpy as np
import pytest

from perfmodel._validation import MAX_INT, check_nonnegative_float, check_positive_float, check_positive_int


class TestValidationHelpers:
    @pytest.mark.parametrize("value", [10**400, 2**63, -(10**5000), 10**5000], ids=["1e400", "2^63", "-1e5000",
                                                                                  "1e5000"])
    def test_huge_ints_are_value_errors(self, value):
        with pytest.raises(ValueError, match="'steps' parameter of f"):
            check_positive_int(value, "steps", "f")
        if abs(value) > 1e308:
            with pytest.raises(ValueError, match="'x' parameter of f must be a finite positive number"):
                check_positive_float(abs(value), "x", "f")

    def test_int64_range_and_numpy_widths(self):
        assert check_positive_int(MAX_INT, "n", "f") == MAX_INT
        for v in (np.uint8(200), np.int16(7), np.uint64(2**63 - 1), np.float32(4.0)):
            out = check_positive_int(v, "n", "f")
            assert type(out) is int and out == int(v)
        with pytest.raises(ValueError, match="at most 9.223e"):
            check_positive_int(np.uint64(2**63), "n", "f")

    def test_maximum_and_nonnegative(self):
        with pytest.raises(ValueError, match="at most 3"):
            check_positive_float(4.0, "x", "f", maximum=3)
        assert check_nonnegative_float(0, "x", "f") == 0.0
        for bad in (float("nan"), float("inf"), -1e-9, 10**400):
            with pytest.raises(ValueError, match="'x' parameter of f"):
                check_nonnegative_float(bad, "x", "f")
        with pytest.raises(TypeError, match="'x' parameter of f"):
            check_nonnegative_float("1", "x", "f")
