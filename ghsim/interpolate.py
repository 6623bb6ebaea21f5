"""Reading measured tables between their points, as the models share it."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence


def log2_interpolate(x: float, points: Sequence[Sequence[float]]) -> float:
    """The value at ``x`` of ``points`` ([x, value] pairs in increasing x, x > 0): linear in
    log2(x) between neighbours, the nearest point's value beyond either end."""
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x <= x1:
            return y0 + math.log2(x / x0) / math.log2(x1 / x0) * (y1 - y0)
    return points[-1][1]
