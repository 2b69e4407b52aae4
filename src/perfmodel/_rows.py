"""One code per distinct row of several columns (shared by the predict and models layers)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def distinct_rows(columns) -> tuple[np.ndarray, np.ndarray]:
    """``first, inverse`` for the rows formed by ``columns`` (equal-length 1-D arrays or Series): the position of
    the first of each distinct row, and each row's index into ``first``. A mixed-radix code over the columns'
    factorized values, renumbered only before it could overflow. Raises ``TypeError`` for unhashable cells."""
    columns = list(columns)
    n = len(columns[0]) if columns else 0
    inverse = np.zeros(n, dtype=np.int64)
    radix = 1
    for col in columns:
        codes, uniq = pd.factorize(col, use_na_sentinel=False)
        if radix * len(uniq) >= 2**62:
            inverse = pd.factorize(inverse)[0]
            radix = int(inverse.max()) + 1
        inverse = inverse + codes.astype(np.int64) * radix
        radix *= max(len(uniq), 1)
    inverse = pd.factorize(inverse)[0]
    # factorize numbers rows in order of first appearance: a first row is where the code reaches a new maximum
    first = np.flatnonzero(np.r_[True, inverse[1:] > np.maximum.accumulate(inverse)[:-1]]) if n else inverse
    return first, inverse
