"""Human-readable durations."""

from __future__ import annotations

import math


def format_duration(seconds: float) -> str:
    """``42.1 s``, ``12m 05s``, ``2h 13m``, ``3d 4h``.

    >>> format_duration(7980)
    '2h 13m'
    """
    if seconds is None or not math.isfinite(seconds):
        return "inf"
    if seconds < 60:
        return f"{seconds:.3g} s"
    m, s = divmod(int(round(seconds)), 60)
    if m < 60:
        return f"{m}m {s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h {m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d {h}h"


def to_plain(value):
    """``value`` with only JSON types: numpy scalars and arrays become Python numbers and lists, NaN/inf and
    ``pd.NA`` become None, dicts get string keys, DataFrames become lists of records. Every public result's
    ``to_dict()`` goes through this, so ``json.dumps(result.to_dict(), allow_nan=False)`` always works.

    >>> import numpy as np
    >>> to_plain({"a": np.int64(3), "b": [np.float64("nan"), 1.5]})
    {'a': 3, 'b': [None, 1.5]}
    """
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_plain({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [to_plain(v) for v in value]
    mod = type(value).__module__
    if mod.startswith("pandas"):
        import pandas as pd

        if isinstance(value, pd.DataFrame):
            return [to_plain(r) for r in value.to_dict(orient="records")]
        if isinstance(value, pd.Series):
            return to_plain(value.to_dict())
        if value is pd.NA or value is pd.NaT:
            return None
        if isinstance(value, pd.Timestamp):
            return value.isoformat()
    if mod == "numpy":
        import numpy as np

        if isinstance(value, np.ndarray):
            return to_plain(value.tolist())
        if isinstance(value, np.generic):
            value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
