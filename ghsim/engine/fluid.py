"""Transfers that share a link: processor sharing, re-balanced whenever a transfer starts or ends.

Each transfer has a standalone duration (its bytes at the bandwidth it would get alone); while
``k`` transfers are active on the same link each advances at ``1/k`` of its standalone speed. With
one link per transfer this is exactly max-min fair sharing of the link.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import simpy


@dataclass
class _Flow:
    link: str
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
    """Every finished transfer: link, start, end (seconds), bytes."""
    _last: float = 0.0
    _generation: int = 0
    _next_id: int = 0

    def _advance(self) -> None:
        now = self.env.now
        elapsed = now - self._last
        if elapsed > 0 and self.flows:
            counts: dict[str, int] = {}
            for flow in self.flows.values():
                counts[flow.link] = counts.get(flow.link, 0) + 1
            for flow in self.flows.values():
                flow.remaining_s -= elapsed / counts[flow.link]
            for link in counts:
                self.usage.setdefault(link, LinkUsage()).busy_s += elapsed
        self._last = now

    def _reschedule(self) -> None:
        self._generation += 1
        if not self.flows:
            return
        counts: dict[str, int] = {}
        for flow in self.flows.values():
            counts[flow.link] = counts.get(flow.link, 0) + 1
        soonest = min(f.remaining_s * counts[f.link] for f in self.flows.values())
        generation = self._generation
        wake = self.env.timeout(max(soonest, 0.0))
        wake.callbacks.append(lambda _event: self._wake(generation))

    def _wake(self, generation: int) -> None:
        if generation != self._generation:
            return
        self._advance()
        for key in [k for k, f in self.flows.items() if f.remaining_s <= 1e-12]:
            flow = self.flows.pop(key)
            self.transfers.append((flow.link, flow.start, self.env.now, flow.nbytes))
            flow.done.succeed()
        self._reschedule()

    def transfer(self, link: str, standalone_s: float, nbytes: float) -> simpy.Event:
        """Start a transfer of ``standalone_s`` seconds of work on ``link``; returns its end."""
        done = self.env.event()
        self.usage.setdefault(link, LinkUsage()).bytes += nbytes
        if standalone_s <= 0:
            done.succeed()
            return done
        self._advance()
        self.flows[self._next_id] = _Flow(link, standalone_s, done, self.env.now, nbytes)
        self._next_id += 1
        self._reschedule()
        return done

    def busy(self) -> bool:
        """Whether any transfer is in flight."""
        return bool(self.flows)

    def busy_for_s(self) -> float:
        """How much longer transfers already in flight keep some link busy (if none start)."""
        self._advance()
        counts: dict[str, int] = {}
        for flow in self.flows.values():
            counts[flow.link] = counts.get(flow.link, 0) + 1
        left: dict[str, float] = {}
        for flow in self.flows.values():
            left[flow.link] = left.get(flow.link, 0.0) + flow.remaining_s
        return max(left.values(), default=0.0)
