"""Max-min fair sharing of links by flows: progressive filling, as a pure function.

A flow crosses links; on each it has a *coefficient*: how much of the link's capacity one byte
per second of the flow takes. A coefficient folds in two things:

* **copies**: a rank class is simulated once, but its ``k`` members on the same link (eight GPUs
  of a node leaving by one NIC, the DP flows of every rank under a leaf switch) each run the same
  flow at the same moment, so one simulated flow stands for ``k`` and takes ``k`` times its rate;
* **efficiency**: a use that reaches only a fraction ``e`` of the link's line rate when alone
  (NCCL gets 370 of NVLink4's 450 GB/s, a copy engine 297 of C2C's 450) takes ``1 / e`` per byte.

Every flow gets the same rate unless a link saturates first (progressive filling): raise all
rates together; when a link is full, freeze the flows on it; continue with the rest. A flow may
also carry a cap of its own (a CPU-bound optimizer step, a page-fault-bound migration).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Path:
    """The links a flow crosses; on each, how many copies of the flow cross that link instance
    and the efficiency the flow's use reaches there. ``coefficients`` = copies / efficiency."""

    links: tuple[str, ...]
    copies: tuple[float, ...]
    coefficients: tuple[float, ...]
    cap_bytes_per_s: float = math.inf
    """The most this flow can run at whatever the links offer."""

    def standalone_bytes_per_s(self, capacity: Mapping[str, float]) -> float:
        """The rate this flow gets alone on idle links."""
        rates = [capacity[link] / c for link, c in zip(self.links, self.coefficients, strict=True)]
        return min([self.cap_bytes_per_s, *rates])


def make_path(hops: Sequence[tuple[str, float, float]],
              cap_bytes_per_s: float = math.inf) -> Path:
    """A path from ``(link, copies, efficiency)`` triples; a link named twice keeps the sum of
    its copies (a flow that crosses it twice) at the lower efficiency."""
    merged: dict[str, tuple[float, float]] = {}
    for link, copies, efficiency in hops:
        if copies <= 0 or not 0 < efficiency < math.inf:
            raise ValueError(f"{link}: copies and efficiency must be > 0, got {copies}, "
                             f"{efficiency}")
        old = merged.get(link)
        merged[link] = (copies, efficiency) if old is None else (
            old[0] + copies, min(old[1], efficiency))
    links = tuple(merged)
    return Path(links, tuple(merged[k][0] for k in links),
                tuple(merged[k][0] / merged[k][1] for k in links), cap_bytes_per_s)


def max_min_rates(paths: Sequence[Path], capacity: Mapping[str, float]) -> list[float]:
    """Bytes per second of each flow under max-min fair sharing of ``capacity`` (bytes/s)."""
    if len(paths) == 1:
        return [paths[0].standalone_bytes_per_s(capacity)]
    rates = [0.0] * len(paths)
    active = set(range(len(paths)))
    left = {link: capacity[link] for p in paths for link in p.links}
    level = 0.0
    while active:
        load: dict[str, float] = {}
        for i in active:
            for link, c in zip(paths[i].links, paths[i].coefficients, strict=True):
                load[link] = load.get(link, 0.0) + c
        step = min((left[link] / total for link, total in load.items()), default=math.inf)
        step = min([step, *(paths[i].cap_bytes_per_s - level for i in active)])
        step = max(step, 0.0)
        if not math.isfinite(step):
            raise ValueError("a flow crosses no link and has no cap: its rate is unbounded")
        level += step
        for link, total in load.items():
            left[link] -= step * total
        full = {link for link, total in load.items() if left[link] <= 1e-12 * capacity[link]}
        frozen = {i for i in active if paths[i].cap_bytes_per_s - level <= 1e-12 * level
                  or full.intersection(paths[i].links)}
        for i in frozen:
            rates[i] = level
        active -= frozen
    return rates


def makespan_s(flows: Sequence[tuple[Path, float]], capacity: Mapping[str, float]) -> float:
    """Seconds until every flow of ``(path, bytes)`` is done, all starting together on idle
    links and re-sharing whenever one finishes (a collective's flows, costed on their own)."""
    left = [nbytes for _, nbytes in flows]
    active = [i for i, b in enumerate(left) if b > 0]
    now = 0.0
    while active:
        rates = max_min_rates([flows[i][0] for i in active], capacity)
        dt = min(left[i] / r for i, r in zip(active, rates, strict=True))
        now += dt
        for i, r in zip(active, rates, strict=True):
            left[i] -= r * dt
        active = [i for i in active if left[i] > 1e-9 * flows[i][1]]
    return now
