"""Transfers that share links: processor sharing, re-balanced whenever a transfer starts or ends.

Each transfer has a standalone duration (its work at the speed it would get alone) and crosses
one or more links of its rank (``nic``, ``nvlink``, ``c2c_h2d``, ``lpddr``, ``grace`` ...). While
``k`` transfers are active on a link, each gets ``1/k`` of it; a transfer advances at the share of
its most crowded link. With one link per transfer this is max-min fair sharing of that link.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import simpy


def finish_tolerance_s(now_s: float) -> float:
    """Work left below which a transfer counts as finished at clock ``now_s``: a few units in
    the last place of the clock, so that a wake-up the clock cannot resolve never repeats."""
    return max(1e-12, 64 * math.ulp(now_s))


@dataclass
class _Flow:
    links: tuple[str, ...]
    remaining_s: float
    """Standalone seconds of work left."""
    done: simpy.Event
    start: float
    nbytes: float


@dataclass
class LinkUsage:
    """What one link carried: bytes, and seconds during which it carried anything."""

    bytes: float = 0.0
    busy_s: float = 0.0


@dataclass
class SharedLinks:
    """The links of one rank, shared by its concurrent transfers."""

    env: simpy.Environment
    flows: dict[int, _Flow] = field(default_factory=dict)
    usage: dict[str, LinkUsage] = field(default_factory=dict)
    transfers: list[tuple[str, float, float, float]] = field(default_factory=list)
    """Every finished transfer: its first link, start, end (seconds), bytes."""
    _last: float = 0.0
    _generation: int = 0
    _next_id: int = 0

    def _counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for flow in self.flows.values():
            for link in flow.links:
                counts[link] = counts.get(link, 0) + 1
        return counts

    def _rate(self, flow: _Flow, counts: dict[str, int]) -> float:
        return 1.0 / max(counts[link] for link in flow.links)

    def _advance(self) -> None:
        now = self.env.now
        elapsed = now - self._last
        if elapsed > 0 and self.flows:
            counts = self._counts()
            for flow in self.flows.values():
                flow.remaining_s -= elapsed * self._rate(flow, counts)
            for link in counts:
                self.usage.setdefault(link, LinkUsage()).busy_s += elapsed
        self._last = now

    def _reschedule(self) -> None:
        self._generation += 1
        if not self.flows:
            return
        counts = self._counts()
        soonest = min(f.remaining_s / self._rate(f, counts) for f in self.flows.values())
        generation = self._generation
        wake = self.env.timeout(max(soonest, 0.0))
        wake.callbacks.append(lambda _event: self._wake(generation))

    def _wake(self, generation: int) -> None:
        if generation != self._generation:
            return
        self._advance()
        counts = self._counts()
        tolerance = finish_tolerance_s(self.env.now)
        for key in [k for k, f in self.flows.items()
                    if f.remaining_s / self._rate(f, counts) <= tolerance]:
            flow = self.flows.pop(key)
            self.transfers.append((flow.links[0], flow.start, self.env.now, flow.nbytes))
            flow.done.succeed()
        self._reschedule()

    def transfer(self, links: str | tuple[str, ...], standalone_s: float,
                 nbytes: float) -> simpy.Event:
        """Start ``standalone_s`` seconds of work across ``links``; returns its end."""
        links = (links,) if isinstance(links, str) else links
        done = self.env.event()
        for link in links:
            self.usage.setdefault(link, LinkUsage()).bytes += nbytes
        if standalone_s <= 0:
            done.succeed()
            return done
        self._advance()
        self.flows[self._next_id] = _Flow(links, standalone_s, done, self.env.now, nbytes)
        self._next_id += 1
        self._reschedule()
        return done

    def busy_for_s(self, links: frozenset[str] | None = None) -> float:
        """How much longer transfers in flight keep a link busy (if no more start); only
        transfers on ``links`` count when given."""
        self._advance()
        left: dict[str, float] = {}
        for flow in self.flows.values():
            if links is None or links.intersection(flow.links):
                left[flow.links[0]] = left.get(flow.links[0], 0.0) + flow.remaining_s
        return max(left.values(), default=0.0)
