"""Flows on the links of the whole system, shared max-min fairly, re-balanced whenever one starts
or ends.

Every transfer of the step (collective steps, pipeline sends, host copies, the CPU streaming
host memory, page migration) is a flow of bytes along a :class:`~ghsim.fabric.sharing.Path`.
Flows of every rank class share one network, so a leaf uplink, a NIC or NVLink-C2C carries
whatever crosses it at that moment. When a flow starts or ends, only the flows connected to it
through shared links are re-balanced (``max_min_rates``); one alone on idle links, as most are,
takes its standalone rate without that search. Bytes and link books are settled lazily, so the
cost of an event does not grow with the size of the system.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

import simpy

from ghsim.fabric.sharing import Path, max_min_rates


def finish_tolerance_s(now_s: float) -> float:
    """Time left below which a transfer counts as finished at clock ``now_s``: a few units in
    the last place of the clock, so that a wake-up the clock cannot resolve never repeats."""
    return max(1e-12, 64 * math.ulp(now_s))


@dataclass(slots=True)
class _Flow:
    path: Path
    nbytes: float
    done: simpy.Event
    owner: str
    traffic: str
    start: float
    left_bytes: float
    """Bytes left at ``since``."""
    since: float
    route: _Route
    """Its path's links as the network books them (:meth:`FlowNetwork._route`)."""
    rate: float = 0.0
    version: int = 0

    def left_at(self, now: float) -> float:
        return self.left_bytes - self.rate * (now - self.since)


@dataclass(frozen=True, slots=True)
class _Booked:
    """A link's share of flows booked alone (:class:`AloneBooking`): when each booking
    started (the booking's own array, shared), and what each puts on the link."""

    starts: array[float]
    nbytes: float
    """Bytes on the link (every copy counted)."""
    level: float
    """Utilization while the flow runs."""
    seconds: float


@dataclass
class LinkUsage:
    """What one link carried: bytes (every copy counted), seconds during which it carried
    anything, the integral of its utilization, and which kinds of traffic used it.

    Flows on the network are booked as they run (:meth:`settle`); flows booked alone
    (:meth:`FlowNetwork.book_alone`) only note when they started, and the totals add them up
    when read: a trillion-parameter pipeline books a million of them."""

    kind: str
    capacity_bytes_per_s: float
    traffic: set[str] = field(default_factory=set)
    flowed_bytes: float = 0.0
    """Bytes of the flows that ran on the network (:attr:`bytes` adds those booked alone)."""
    flowed_busy_s: float = 0.0
    flowed_load_s: float = 0.0
    _booked: list[_Booked] = field(default_factory=list)
    _changes: array[float] = field(default_factory=lambda: array("d"))
    """The flows' :attr:`samples`, flat, time then level (as tuples, a long step's would cost
    the garbage collector's passes and far more memory)."""
    _since: float = 0.0
    _level: float = 0.0

    @property
    def bytes(self) -> float:
        return self.flowed_bytes + sum(len(b.starts) * b.nbytes for b in self._booked)

    @property
    def busy_s(self) -> float:
        return self.flowed_busy_s + sum(len(b.starts) * b.seconds for b in self._booked
                                        if b.level > 0)

    @property
    def load_s(self) -> float:
        """Integral over time of (capacity in use / capacity)."""
        return self.flowed_load_s + sum(len(b.starts) * b.seconds * b.level
                                        for b in self._booked)

    @property
    def samples(self) -> list[tuple[float, float]]:
        """(time, utilization from then on), for a counter track."""
        changes = self._changes
        flowed = list(zip(changes[::2], changes[1::2], strict=True))
        if not self._booked:
            return flowed
        # one flow booked alone at a time: each rises at its start and falls at its end, a
        # fall sorted before a rise at the same instant
        edges = sorted((time, rise, level) for b in self._booked if b.level != 0
                       for start in b.starts
                       for time, rise, level in ((start, 1, b.level),
                                                 (start + b.seconds, 0, 0.0)))
        alone = [(time, level) for time, _, level in edges]
        return sorted(flowed + alone, key=lambda sample: sample[0]) if flowed else alone

    def hold(self, booked: _Booked) -> None:
        """Take a share of flows booked alone: what each of its bookings puts here."""
        self._booked.append(booked)

    def settle(self, now: float, level: float) -> None:
        """Book the time since the last change at the old level, then switch to ``level``."""
        elapsed = now - self._since
        if elapsed > 0 and self._level > 0:
            self.flowed_busy_s += elapsed
            self.flowed_load_s += elapsed * self._level
        self._since = now
        if level != self._level:
            self._level = level
            self._changes.append(now)
            self._changes.append(level)


@dataclass(frozen=True, slots=True)
class _Route:
    """A path as the network books it, worked out once per distinct path: its standalone rate
    and, per link, the link, the flow's copies, the link's books, the flows on it (the
    network's own set) and its capacity."""

    rate: float
    hops: tuple[tuple[str, float, LinkUsage, set[int], float], ...]


@dataclass(frozen=True, slots=True)
class AloneBooking:
    """Flows booked alone (:meth:`FlowNetwork.book_alone`), worked out once: the owner and
    traffic kind, when each booking started, per flow its seconds and bytes, and the seconds
    until the last ends; each link crossed holds its share (:class:`_Booked`)."""

    flows: list[tuple[Path, float]]
    """Kept so that the list's identity, the cache key, stays its own."""
    owner: str
    traffic: str
    starts: array[float]
    ends: tuple[tuple[float, float], ...]
    longest: float

    def book(self, start: float) -> float:
        """Book the flows from ``start`` (their links add it up when read); returns the
        seconds until the last ends."""
        self.starts.append(start)
        return self.longest


@dataclass
class FlowNetwork:
    """The links of the system and the flows on them."""

    env: simpy.Environment
    capacity: dict[str, float]
    """Bytes per second of each link instance, per direction."""
    kinds: dict[str, str]
    flows: dict[int, _Flow] = field(default_factory=dict)
    usage: dict[str, LinkUsage] = field(default_factory=dict)
    flowed: list[tuple[str, str, float, float, float]] = field(default_factory=list)
    """Every finished flow that ran on the network: its owner (rank class), traffic kind,
    start, end, bytes (:attr:`transfers` adds those booked alone)."""
    _on_link: dict[str, set[int]] = field(default_factory=dict)
    _used: dict[str, float] = field(default_factory=dict)
    """Bytes per second in use on each link (every copy counted)."""
    _next_id: int = 0
    reserved: frozenset[str] = frozenset()
    """Links whose only traffic is booked alone (:meth:`book_alone`); no flow may cross them."""
    _routes: dict[Path, _Route] = field(default_factory=dict)
    """Per distinct path (by value: a path built anew for each transfer shares its entry), for
    flows on the network and flows booked alone alike: :meth:`_route`."""
    _bookings: dict[tuple[int, str, str], AloneBooking] = field(default_factory=dict)
    """Per list of flows booked alone (by id), owner and traffic kind: :meth:`alone_booking`."""

    @property
    def transfers(self) -> list[tuple[str, str, float, float, float]]:
        """Every finished flow, as :attr:`flowed`, those booked alone included."""
        return self.flowed + self._alone_transfers(None)

    def transfers_of(self, traffic: str) -> list[tuple[str, str, float, float, float]]:
        """:attr:`transfers` of one kind of traffic."""
        return [t for t in self.flowed if t[1] == traffic] + self._alone_transfers(traffic)

    def _alone_transfers(self, traffic: str | None) -> list[tuple[str, str, float, float, float]]:
        return [(b.owner, b.traffic, start, start + seconds, nbytes)
                for b in self._bookings.values() if traffic in (None, b.traffic)
                for start in b.starts for seconds, nbytes in b.ends]

    def _usage(self, link: str) -> LinkUsage:
        if link not in self.usage:
            self.usage[link] = LinkUsage(self.kinds.get(link, "link"), self.capacity[link])
        return self.usage[link]

    def _level(self, link: str) -> float:
        if not self._on_link.get(link):
            self._used[link] = 0.0  # no drift once a link falls idle
        return min(1.0, max(0.0, self._used.get(link, 0.0)) / self.capacity[link])

    def _set_rate(self, flow: _Flow, rate: float) -> None:
        change = rate - flow.rate
        for link, copies in zip(flow.path.links, flow.path.copies, strict=True):
            self._used[link] = self._used.get(link, 0.0) + change * copies
        flow.rate = rate

    def _component(self, seed: Iterable[int]) -> set[int]:
        """Flows connected to ``seed`` through shared links."""
        seen = {i for i in seed if i in self.flows}
        stack = list(seen)
        while stack:
            for link in self.flows[stack.pop()].path.links:
                for other in self._on_link[link]:
                    if other not in seen:
                        seen.add(other)
                        stack.append(other)
        return seen

    def _rebalance(self, seed: Iterable[int], touched: set[str]) -> None:
        now = self.env.now
        ids = sorted(self._component(seed)) if seed else []
        if len(ids) == 1:
            rates = [self.flows[ids[0]].path.standalone_bytes_per_s(self.capacity)]
        elif ids:
            rates = max_min_rates([self.flows[i].path for i in ids], self.capacity)
        else:
            rates = []
        for i, rate in zip(ids, rates, strict=True):
            flow = self.flows[i]
            touched.update(flow.path.links)
            if rate != flow.rate:
                flow.left_bytes = flow.left_at(now)
                flow.since = now
                self._set_rate(flow, rate)
                flow.version += 1
                self._schedule(i, flow)
        for link in touched:
            self._usage(link).settle(now, self._level(link))

    def _schedule(self, key: int, flow: _Flow) -> None:
        version = flow.version
        delay = max(flow.left_bytes / flow.rate, 0.0) if flow.rate > 0 else math.inf
        if math.isinf(delay):
            return
        wake = self.env.timeout(delay)
        wake.callbacks.append(lambda _event: self._wake(key, version))

    def _wake(self, key: int, version: int) -> None:
        flow = self.flows.get(key)
        if flow is None or flow.version != version:
            return
        now = self.env.now
        if flow.left_at(now) > flow.rate * finish_tolerance_s(now):
            flow.left_bytes, flow.since = flow.left_at(now), now
            flow.version += 1
            self._schedule(key, flow)
            return
        del self.flows[key]
        hops = flow.route.hops
        for _, _, _, here, _ in hops:
            here.discard(key)
        self.flowed.append((flow.owner, flow.traffic, flow.start, now, flow.nbytes))
        flow.done.succeed()
        neighbours = [i for _, _, _, here, _ in hops for i in here]
        if not neighbours:  # it ran alone: its links fall idle, nothing to re-share
            for link, _, usage, _, _ in hops:
                self._used[link] = 0.0
                usage.settle(now, 0.0)
            return
        self._set_rate(flow, 0.0)
        self._rebalance(neighbours, set(flow.path.links))

    def transfer(self, path: Path, nbytes: float, owner: str, traffic: str) -> simpy.Event:
        """Start a flow of ``nbytes`` along ``path``; returns the event of its end."""
        done = self.env.event()
        route = self._route(path)
        for _, copies, usage, _, _ in route.hops:
            usage.flowed_bytes += nbytes * copies
            usage.traffic.add(traffic)
        if nbytes <= 0:
            done.succeed()
            return done
        if self.reserved and not self.reserved.isdisjoint(path.links):
            raise RuntimeError(f"a {traffic} flow of {owner} crosses a link reserved for "
                               "collectives booked alone (engine.private missed a transfer)")
        key = self._next_id
        self._next_id += 1
        now = self.env.now
        flow = self.flows[key] = _Flow(path, nbytes, done, owner, traffic, now, nbytes, now,
                                       route)
        alone = True
        for _, _, _, here, _ in route.hops:
            alone = alone and not here
            here.add(key)
        if not (alone and self._start_alone(key, flow)):
            self._rebalance([key], set())
        return done

    def _start_alone(self, key: int, flow: _Flow) -> bool:
        """Start a flow whose links carry no other: at its standalone rate, with the books
        :meth:`_rebalance` would keep, without looking for flows to share with (most flows of
        a step start so). False if it would never end (the caller re-balances as usual)."""
        now = self.env.now
        route = flow.route
        rate = route.rate
        if not rate > 0:
            return False
        flow.rate = rate
        flow.version += 1
        used_on = self._used
        for link, copies, usage, _, capacity in route.hops:
            used_on[link] = used = used_on.get(link, 0.0) + rate * copies
            usage.settle(now, min(1.0, max(0.0, used) / capacity))
        self._schedule(key, flow)
        return True

    def _route(self, path: Path) -> _Route:
        """``path`` as the network books it (cached by value)."""
        route = self._routes.get(path)
        if route is None:
            hops = tuple((link, copies, self._usage(link),
                          self._on_link.setdefault(link, set()), self.capacity[link])
                         for link, copies in zip(path.links, path.copies, strict=True))
            route = self._routes[path] = _Route(path.standalone_bytes_per_s(self.capacity),
                                                hops)
        return route

    def book_alone(self, flows: list[tuple[Path, float]], owner: str, traffic: str,
                   start: float) -> float:
        """Book flows that start at ``start`` (now or later) on links no other flow crosses
        while they run and that cross no link in common (the caller guarantees both,
        ``ghsim.engine.private``); returns the seconds until the last ends. Each runs at its
        standalone rate, as :meth:`transfer` would run it, with the same books."""
        return self.alone_booking(flows, owner, traffic).book(start)

    def alone_booking(self, flows: list[tuple[Path, float]], owner: str, traffic: str
                      ) -> AloneBooking:
        """Booking ``flows`` alone, worked out once (cached by the list's identity, which it
        keeps: a collective's flows repeat every micro-batch); each link crossed gets its
        share."""
        key = (id(flows), owner, traffic)
        if key not in self._bookings:
            starts: array[float] = array("d")
            ends: list[tuple[float, float]] = []
            for path, nbytes in flows:
                rate, books = self._alone_books(path)
                for usage, copies, level in books:
                    usage.traffic.add(traffic)
                    if nbytes > 0:
                        usage.hold(_Booked(starts, nbytes * copies, level, nbytes / rate))
                if nbytes > 0:
                    ends.append((nbytes / rate, nbytes))
            longest = max((seconds for seconds, _ in ends), default=0.0)
            self._bookings[key] = AloneBooking(flows, owner, traffic, starts, tuple(ends),
                                               longest)
        return self._bookings[key]

    def _alone_books(self, path: Path) -> tuple[float, list[tuple[LinkUsage, float, float]]]:
        """A path's standalone rate and, per link, its books, the flow's copies and the
        utilization it puts there (from :meth:`_route`)."""
        route = self._route(path)
        rate = route.rate
        return rate, [(usage, copies, min(1.0, rate * copies / capacity))
                      for _, copies, usage, _, capacity in route.hops]

    def finish(self) -> None:
        """Close the books of every link at the end of the step."""
        for link, usage in self.usage.items():
            usage.settle(self.env.now, self._level(link))

    def utilization(self, link: str, step_s: float) -> float:
        """Mean utilization of ``link`` over a step of ``step_s`` seconds."""
        usage = self.usage.get(link)
        return min(1.0, usage.load_s / step_s) if usage and step_s > 0 else 0.0
