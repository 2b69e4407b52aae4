"""perfmodel._format: results made plain for JSON (numbers stay numbers; NaN and NA become null)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from perfmodel._format import to_plain


class TestToDict:
    def test_to_plain(self):
        assert to_plain({"a": np.int64(2), "b": np.float32(math.nan), "c": pd.NA, "d": (np.bool_(True),)}) == \
            {"a": 2, "b": None, "c": None, "d": [True]}
