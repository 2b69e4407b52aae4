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
