"""Order statistics the models share: how far the largest of n random draws lies above their
mean (a synchronous step waits for its slowest GPU, an expert-parallel layer for its busiest
rank)."""

from __future__ import annotations

from statistics import NormalDist


def expected_largest_normal(n: int) -> float:
    """The expected largest of ``n`` independent standard normal draws, 0 for one: Blom's
    approximation of the top order statistic, Phi^-1((n - 0.375) / (n + 0.25)): 1.434 for 8
    and 3.227 for 1,000 against the exact 1.424 and 3.241, within 1 % from 8 draws up and
    5 % at 2."""
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))
