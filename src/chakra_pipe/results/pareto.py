"""The Pareto front of (cost, time) points, both lower-better.

Shared by the report's cost/time plot and ``search``'s memory/time plot; it lives with the results
schema (whose metrics all say which direction is better) so that ``search`` does not import the
report package to draw its front.
"""

from __future__ import annotations

import math


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of points not dominated in (cost, time), both lower-better, ordered by cost."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    front, best = [], math.inf
    for i in order:
        if points[i][1] < best:
            front.append(i)
            best = points[i][1]
    return front
