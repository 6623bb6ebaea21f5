"""Replaying a workload on simpy: one process per stream of each rank class.

Each op waits for its dependencies (which include the op before it on its stream), then takes
the time its cost model gives. Every transfer (collectives on the communication streams,
pipeline sends, host copies, the host CPU streaming its memory, page migration) is laid on its
routes by the :class:`TrafficPlanner` and runs as flows in one :class:`FlowNetwork` for the
whole system, so traffic of every rank class that meets on a link shares it. A pipeline
``recv`` completes when the peer stage's matching ``send`` has arrived. Every op's span is kept
for the timeline and the attribution of the step.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from ghsim.costmodel.gpu import GpuCostModel
from ghsim.costmodel.host import HostCostModel
from ghsim.engine.body import Segment, overlapped_s, segments
from ghsim.engine.fluid import AloneBooking, FlowNetwork
from ghsim.engine.overlap import CommActivity
from ghsim.engine.private import Pair, inline_plan, private_pairs
from ghsim.fabric.sharing import Path
from ghsim.fabric.traffic import Plan, TrafficPlanner
from ghsim.workload.ir import Comm, Kernel, Op, RankClass, Step, Workload
from ghsim.workload.summary import wire_bytes


@dataclass(frozen=True, slots=True)
class Span:
    """One op as it ran."""

    stream: str
    op: int
    start: float
    end: float


@dataclass
class ClassTimeline:
    """What one rank class did, op by op."""

    rank_class: RankClass
    spans: list[Span] = field(default_factory=list)
    end_of: dict[int, float] = field(default_factory=dict)
    start_of: dict[int, float] = field(default_factory=dict)
    compute_parts: dict[int, dict[str, float]] = field(default_factory=dict)
    """Per compute op: seconds by category (gemm, attention, elementwise, tp, cp, ...)."""
    transfer_s: dict[int, float] = field(default_factory=dict)
    """Per recv op: how long the matching send's transfer took."""
    launch_wait_s: dict[int, float] = field(default_factory=dict)
    """Per op of an imported trace: time its stream sat idle until the CPU launched it."""
    comm_spans: list[tuple[int, str, float, float]] = field(default_factory=list)
    """Tensor-, context- and expert-parallel collectives inside compute ops, as they ran: (op
    id, group, start, end), an op's in the order of its body."""
    segments: dict[int, tuple[Segment, ...]] = field(default_factory=dict)
    """Per compute op that runs inline collectives: its body as it ran, kernels and
    collectives in order (what the per-NPU Chakra export splits the op into)."""

    @property
    def end_s(self) -> float:
        """When its last op ended: the last span's end (spans are kept as ops end, and the
        clock never runs back)."""
        return self.spans[-1].end if self.spans else 0.0


@dataclass
class Timeline:
    """The whole simulated step."""

    classes: list[ClassTimeline]
    network: FlowNetwork | None = None
    gpus_per_node: int = 1

    @property
    def step_time_s(self) -> float:
        return max((c.end_s for c in self.classes), default=0.0)


EVENTS_PER_OP = 200
"""Bound on simulation events per op or inline collective: replays take about 3 to 10, so this
only stops a livelock."""


class SimulationLivelock(RuntimeError):
    """The event loop kept running without finishing the step: a bug, never a user mistake."""


_SLOWDOWN_ROUNDS = 8
"""Rounds of :meth:`Simulator._slowed`: each adds the slowdown of the time the last added
(x / (1 + x) = 0.16 of it at the cited 0.189), so eight leave under 1e-6 of a covered op."""


def _category(step: Kernel) -> str:
    if step.recompute:
        return "recompute"
    return {"gemm": "gemm", "attention": "attention", "softmax": "attention",
            "optimizer": "optimizer"}.get(
        step.klass, "elementwise")


@dataclass(frozen=True, slots=True)
class _Issue:
    """One part of a compute op's body as its host issues it."""

    launches: int
    issue_s: float
    kernel_s: float
    """GPU seconds of the part's kernels."""


@dataclass(frozen=True, slots=True)
class _AloneBody:
    """A compute op's segments whose inline collectives are all booked alone, worked out once:
    the op is then one wait of ``total_s`` (what :meth:`Simulator._segments` adds up in
    ``ahead``), and each collective books its flows at a fixed offset into it."""

    segments: tuple[Segment, ...]
    """Kept so that the tuple's identity, the cache key, stays its own (empty for a replayed
    op's measured time, which is not cached)."""
    total_s: float
    comms: tuple[tuple[float, float, str, float, float, AloneBooking], ...]
    """Per collective: the wait before its segment (``ahead``), its segment's kernels, its
    group, its latency, its seconds (latency and flows) and its flows' booking."""


def _syncs(step: Step) -> int:
    """Times the host waits for the GPU before issuing ``step``."""
    if isinstance(step, Comm):
        return int(step.host_sync)
    return step.host_syncs


@dataclass(frozen=True)
class KernelIssue:
    """The framework thread that issues each rank's kernels, one after another.

    It runs ahead of the GPU (kernels queue on their streams), so it only holds the GPU back
    where kernels are shorter than the time to issue them. A compute op of ``n`` launches of
    ``kernel_s`` seconds each, whose issue starts at ``h`` while the GPU is free from ``t``,
    ends at ``max(t + n g, h + c + n g, h + n c + g)`` for kernels of ``g`` seconds each: the
    GPU's own time, the first launch's delay, or the host's pace with the last kernel after
    it. With CUDA graphs a captured op is one launch.
    """

    kernel_s: float = 0.0
    graphs: bool = False
    extra_launch_s: float = 0.0
    """Host time of each further launch inside one kernel step (a grouped GEMM's experts, a
    per-expert FP8 quantization's kernels)."""
    backward_ratio: float = 1.0
    """A backward kernel's issue time over a forward one's: autograd calls each module's
    backward from its engine thread, which unpacks what the forward saved and runs the
    gradient hooks (recomputed forward kernels cost a forward kernel's time)."""

    def launches(self, body: tuple[Step, ...]) -> int:
        return min(1, len(body)) if self.graphs else len(body)

    def issue_s(self, body: tuple[Step, ...], backward: bool = False) -> float:
        """Host seconds to issue a compute op's body (of a backward op: ``backward``)."""
        if self.graphs:
            return self.kernel_s if body else 0.0
        extra = sum(s.launches - 1 for s in body if isinstance(s, Kernel))
        steps = float(len(body))
        if backward and self.backward_ratio != 1.0:
            recomputed = sum(1 for s in body if isinstance(s, Kernel) and s.recompute)
            steps = recomputed + (len(body) - recomputed) * self.backward_ratio
        return steps * self.kernel_s + extra * self.extra_launch_s

    def parts(self, body: tuple[Step, ...]) -> tuple[tuple[Step, ...], ...]:
        """The body cut before each step the host waits for (``Comm.host_sync``,
        ``Kernel.host_syncs``): the host issues each part only once the GPU has run the parts
        before it. Without a modelled host: one part."""
        if self.kernel_s <= 0:
            return (body,)
        cuts = [i for i, step in enumerate(body) if i and _syncs(step)]
        return tuple(body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True))

    def wait_s(self, issued: float, now: float, launches: int, gpu_s: float,
               issue_s: float | None = None) -> float:
        """How long an op whose issue starts at ``issued`` (and takes ``issue_s``, by default
        ``launches`` kernel issues) waits for its host, past ``now``."""
        c = self.kernel_s
        if c <= 0 or launches <= 0:
            return 0.0
        total = launches * c if issue_s is None else issue_s
        g = gpu_s / launches
        return max(0.0, issued + c - now, issued + total + g - now - gpu_s)


class Simulator:
    """Simulates one optimizer step of a workload."""

    def __init__(self, workload: Workload, gpu: GpuCostModel, planner: TrafficPlanner,
                 host: HostCostModel, tp_comm_overlap: bool = False,
                 issue: KernelIssue | None = None, ep_overlap: bool = False) -> None:
        self.workload = workload
        self.gpu = gpu
        self.planner = planner
        self.host = host
        self.env = simpy.Environment()
        self.network = FlowNetwork(self.env, planner.capacity, planner.kinds)
        self.comm = CommActivity()
        """When each rank class's collectives and sends ran (for the slowdown beside them)."""
        self.mailbox: dict[tuple[Any, ...], simpy.Event] = {}
        self.arrivals: dict[tuple[Any, ...], int] = {}
        self.arrival_s: dict[tuple[Any, ...], float] = {}
        self.tp_comm_overlap = tp_comm_overlap
        self.ep_overlap = ep_overlap
        self._bodies: dict[tuple[int, str], tuple[dict[str, float], tuple[Segment, ...]]] = {}
        self._issues: dict[tuple[int, bool], tuple[_Issue, ...]] = {}
        self._plans: dict[tuple[str, Comm, bool], tuple[float, Plan, list[tuple[Path, float]]]] = {}
        self._alone: dict[tuple[int, str], _AloneBody | None] = {}
        self.issue = issue or KernelIssue()
        self.host_clock: dict[str, float] = {}
        """Per rank class: when its framework thread has issued every compute op so far."""
        self.timelines = [ClassTimeline(c) for c in workload.classes]
        self.stage_rank = {c.stage: c.first_rank for c in workload.classes}
        self.events = 0
        """Events the last run processed."""
        self.private: frozenset[Pair] = frozenset()
        """(rank class, group) pairs whose inline collectives are booked alone (run())."""

    # -- costs -----------------------------------------------------------------------------

    def body_parts(self, body: tuple[Step, ...], rank_class: RankClass
                   ) -> tuple[dict[str, float], tuple[Segment, ...]]:
        """Kernel seconds by category of a compute op's body, and the body as segments
        (cached: bodies repeat)."""
        key = (id(body), rank_class.name)
        if key not in self._bodies:
            parts: dict[str, float] = {}
            for step in body:
                if isinstance(step, Kernel):
                    category = _category(step)
                    parts[category] = parts.get(category, 0.0) + self.gpu.kernel_s(step)
            self._bodies[key] = (parts, segments(body, self.gpu.kernel_s, self.tp_comm_overlap,
                                                 self.ep_overlap))
        return self._bodies[key]

    def issues(self, body: tuple[Step, ...], backward: bool = False) -> tuple[_Issue, ...]:
        """How the host issues a compute op's body (of a backward op: ``backward``): part by
        part between its syncs (cached)."""
        key = (id(body), backward)
        if key not in self._issues:
            # with the all-to-alls overlapped, another micro-batch's kernels keep the GPU busy
            # while the host waits, so no sync holds it (KernelIssue.parts)
            split = (body,) if self.ep_overlap else self.issue.parts(body)
            self._issues[key] = tuple(
                _Issue(self.issue.launches(part), self.issue.issue_s(part, backward),
                       sum(self.gpu.kernel_s(k) for k in part if isinstance(k, Kernel)))
                for part in split)
        return self._issues[key]

    def _inline_plan(self, rank_class: RankClass, step: Comm, overlapped: bool
                     ) -> tuple[float, Plan, list[tuple[Path, float]]]:
        """An inline collective's wire bytes, plan and flows (cached: they repeat);
        ``overlapped``: userbuffers run it beside its GEMM."""
        key = (rank_class.name, step, overlapped)
        if key not in self._plans:
            wire, plan = inline_plan(self.planner, rank_class, step, overlapped)
            self._plans[key] = (wire, plan, plan.flows(wire))
        return self._plans[key]

    def _resume_host(self, owner: str, part: _Issue, syncs: int = 1) -> float:
        """The host, held at a sync until the GPU got here, issues ``part``: how long the GPU
        now waits for it. Each further sync in a row (``syncs`` - 1) holds the GPU for one
        more framework call: the host issues the op that needs the next size, then waits."""
        issued = (max(self.env.now, self.host_clock.get(owner, 0.0))
                  + (syncs - 1) * self.issue.kernel_s)
        self.host_clock[owner] = issued + part.issue_s
        return self.issue.wait_s(issued, self.env.now, part.launches, part.kernel_s,
                                 part.issue_s)

    def _host_waits(self, owner: str, pending: list[_Issue], parts: dict[str, float],
                    syncs: int = 1) -> Generator[simpy.Event, Any, None]:
        """The GPU idles at a sync until its host has issued the next part (``pending``'s
        first); the wait goes to ``cpu``."""
        wait = self._resume_host(owner, pending.pop(0), syncs)
        if wait > 0:
            parts["cpu"] = parts.get("cpu", 0.0) + wait
            yield self.env.timeout(wait)

    def _alone_body(self, body: tuple[Segment, ...], rank_class: RankClass
                    ) -> _AloneBody | None:
        """``body`` worked out once when every inline collective in it is booked alone
        (``self.private``) and the host issues it whole; else None (cached per body)."""
        key = (id(body), rank_class.name)
        if key in self._alone:
            cached = self._alone[key]
            if cached is None or cached.segments is body:
                return cached
        worked = self._alone[key] = self._work_out_alone(body, rank_class)
        return worked

    def _work_out_alone(self, body: tuple[Segment, ...], rank_class: RankClass
                        ) -> _AloneBody | None:
        comms: list[tuple[float, float, str, float, float, AloneBooking]] = []
        ahead = 0.0
        for segment in body:
            step = segment.comm
            if step is None:
                ahead += segment.kernel_s
                continue
            if (rank_class.name, step.group) not in self.private:
                return None
            _, plan, flows = self._inline_plan(rank_class, step, bool(segment.overlap_s))
            booking = self.network.alone_booking(flows, rank_class.name, step.group)
            seconds = plan.latency_s + booking.longest
            comms.append((ahead, segment.kernel_s, step.group, plan.latency_s, seconds, booking))
            ahead += segment.kernel_s + seconds
        return _AloneBody(body, ahead, tuple(comms))

    def _book_alone(self, timeline: ClassTimeline, op_id: int, parts: dict[str, float],
                    alone: _AloneBody) -> None:
        """Book a worked-out body's collectives from now on; the caller then waits
        ``alone.total_s``, the time :meth:`_segments` would have taken."""
        now = self.env.now
        for ahead, kernel_s, group, latency, seconds, booking in alone.comms:
            start = now + ahead + kernel_s
            booking.book(start + latency)
            parts[group] = parts.get(group, 0.0) + seconds
            timeline.comm_spans.append((op_id, group, start, start + seconds))

    def _segments(self, timeline: ClassTimeline, op_id: int, parts: dict[str, float],
                  body: tuple[Segment, ...], later: tuple[_Issue, ...] = ()
                  ) -> Generator[simpy.Event, Any, None]:
        """Run a compute op's segments; each inline collective's exposed seconds go to its
        group in ``parts``. ``later``: the body's parts after the first, which the host
        issues at each of its syncs; the GPU's wait for them goes to ``cpu``. Kernels and
        collectives booked alone (``self.private``) add up to one wait, ``ahead``."""
        rank_class = timeline.rank_class
        pending = list(later)
        ahead = 0.0
        for segment in body:
            step = segment.comm
            if step is None:
                if segment.syncs and pending:  # the host waits here for what is queued
                    if ahead:
                        yield self.env.timeout(ahead)
                        ahead = 0.0
                    yield from self._host_waits(rank_class.name, pending, parts, segment.syncs)
                ahead += segment.kernel_s
                continue
            synced = step.host_sync and bool(pending)
            wire, plan, flows = self._inline_plan(rank_class, step, bool(segment.overlap_s))
            if (rank_class.name, step.group) in self.private and not synced:
                # alone on its links: its end is known now (engine.private)
                start = self.env.now + ahead + segment.kernel_s
                seconds = plan.latency_s + self.network.book_alone(
                    flows, rank_class.name, step.group, start + plan.latency_s)
                ahead += segment.kernel_s + seconds
                parts[step.group] = parts.get(step.group, 0.0) + seconds
                timeline.comm_spans.append((op_id, step.group, start, start + seconds))
                continue
            if ahead:
                yield self.env.timeout(ahead)
                ahead = 0.0
            if synced:
                if segment.kernel_s:
                    yield self.env.timeout(segment.kernel_s)
                yield from self._host_waits(rank_class.name, pending, parts)
                segment = Segment(0.0, step, segment.overlap_s)
            if not segment.overlap_s:
                # the kernels, then the collective's latency, in one wait; then its flows
                start = self.env.now + segment.kernel_s
                yield self.env.timeout(segment.kernel_s + plan.latency_s)
                yield from self._flows(plan, wire, rank_class.name, step.group, latency=False)
                parts[step.group] = parts.get(step.group, 0.0) + self.env.now - start
                timeline.comm_spans.append((op_id, step.group, start, self.env.now))
                continue
            if segment.kernel_s:
                yield self.env.timeout(segment.kernel_s)
            start = self.env.now
            ended: list[float] = []
            exchange = self._recorded(plan, wire, rank_class.name, step.group, ended)
            beside = self.env.timeout(segment.overlap_s)
            yield self.env.all_of([beside, self.env.process(exchange)])
            # both have run side by side; what is left is the chunk that could not overlap
            total = overlapped_s(segment.overlap_s, ended[0] - start, self.gpu.overlap_slowdown,
                                 rank_class.groups[step.group].size)
            yield self.env.timeout(max(0.0, start + total - self.env.now))
            exposed = self.env.now - start - segment.overlap_s
            parts[step.group] = parts.get(step.group, 0.0) + exposed
            timeline.comm_spans.append((op_id, step.group, start, self.env.now))
        if ahead:
            yield self.env.timeout(ahead)

    def _rendezvous(self, key: tuple[Any, ...]) -> simpy.Event:
        """The event of the ``key[1]``-th collective, triggered once ``key[2]`` ranks arrive."""
        arrived = self.arrivals.get(key[:2], 0) + 1
        self.arrivals[key[:2]] = arrived
        event = self._mail(("rendezvous", *key[:2]))
        if arrived == key[2]:
            event.succeed()
        return event

    def _mail(self, key: tuple[Any, ...]) -> simpy.Event:
        if key not in self.mailbox:
            self.mailbox[key] = self.env.event()
        return self.mailbox[key]

    # -- processes -------------------------------------------------------------------------

    def _flows(self, plan: Plan, nbytes: float, owner: str, traffic: str,
               latency: bool = True) -> Generator[simpy.Event, Any, None]:
        """The plan's latency (unless the caller waited it), then its flows, to the last."""
        if latency and plan.latency_s:
            yield self.env.timeout(plan.latency_s)
        ends = [self.network.transfer(path, part, owner, traffic)
                for path, part in plan.flows(nbytes)]
        if len(ends) == 1:
            yield ends[0]
        elif ends:
            yield self.env.all_of(ends)

    def _communicate(self, plan: Plan, nbytes: float, owner: str, traffic: str
                     ) -> Generator[simpy.Event, Any, None]:
        """``_flows`` of a collective or send op on its own stream, its span recorded for the
        compute kernels it slows (:meth:`_slowed`)."""
        self.comm.begin(owner, self.env.now)
        yield from self._flows(plan, nbytes, owner, traffic)
        self.comm.end(owner, self.env.now)

    def _recorded(self, plan: Plan, nbytes: float, owner: str, traffic: str,
                  ended: list[float]) -> Generator[simpy.Event, Any, None]:
        """``_flows``, then the time it ended appended to ``ended``."""
        yield from self._flows(plan, nbytes, owner, traffic)
        ended.append(self.env.now)

    def _slowed(self, owner: str, covered: float, kernel_s: float, parts: dict[str, float]
                ) -> Generator[simpy.Event, Any, None]:
        """The time a compute op loses to communication kernels that ran beside its
        ``kernel_s`` of kernels for ``covered`` seconds, added at its end (to ``overlap``).
        At slowdown x, a kernel beside them does 1 / (1 + x) of its work per second: each
        second covered costs x / (1 + x) more, and the added time is itself covered while
        they still run, so a fully covered op takes (1 + x) times its kernels."""
        lost = self.gpu.overlap_slowdown / (1.0 + self.gpu.overlap_slowdown)
        owed = min(covered, kernel_s) * lost
        added = 0.0
        for _ in range(_SLOWDOWN_ROUNDS):
            if owed <= 0:
                break
            begun = self.env.now
            yield self.env.timeout(owed)
            added += owed
            owed = self.comm.overlap_s(owner, begun, self.env.now) * lost
        if added:
            parts["overlap"] = added

    def _run_op(self, timeline: ClassTimeline, op: Op) -> Generator[simpy.Event, Any, None]:
        rank_class = timeline.rank_class
        owner = rank_class.name
        if op.kind == "recv":
            key = (op.attrs["tag"], op.attrs["peer_stage"])
            yield self._mail(key)
            timeline.transfer_s[op.id] = self.arrival_s[key]
        elif "measured_s" in op.attrs:
            parts = {op.attrs["category"]: op.attrs["measured_s"]}
            timeline.compute_parts[op.id] = parts
            yield self.env.timeout(op.attrs["measured_s"])
        elif op.kind == "compute":
            kernels, body = self.body_parts(op.body, rank_class)
            parts = dict(kernels)
            later: list[_Issue] = []
            alone: _AloneBody | None = None
            if "fallback_s" in op.attrs:  # its measured time, no collectives
                parts[op.attrs["category"]] = op.attrs["fallback_s"]
                alone = _AloneBody((), op.attrs["fallback_s"], ())
            elif "not_before_s" not in op.attrs:  # an imported trace has its own launch times
                first, *later = self.issues(op.body, op.attrs.get("phase") == "B")
                issued = self.host_clock.get(owner, 0.0)
                self.host_clock[owner] = issued + first.issue_s
                wait = self.issue.wait_s(issued, self.env.now, first.launches, first.kernel_s,
                                         first.issue_s)
                if wait > 0:
                    parts["cpu"] = wait
                    yield self.env.timeout(wait)
            timeline.compute_parts[op.id] = parts
            if alone is None and any(segment.comm for segment in body):
                timeline.segments[op.id] = body
            start = self.env.now
            if alone is None and not later:
                alone = self._alone_body(body, rank_class)
            if alone is None:
                yield from self._segments(timeline, op.id, parts, body, tuple(later))
            else:
                self._book_alone(timeline, op.id, parts, alone)
                if alone.total_s:
                    yield self.env.timeout(alone.total_s)
            covered = self.comm.overlap_s(owner, start, self.env.now) \
                if self.gpu.overlap_slowdown else 0.0
            if covered > 0:
                yield from self._slowed(owner, covered, sum(kernels.values()), parts)
        elif op.kind == "collective":
            group = op.attrs.get("replay_group") or rank_class.groups[op.attrs["group"]]
            wire = wire_bytes(op.attrs["collective"], op.bytes, group.size)
            plan = self.planner.collective(rank_class, group, op.attrs["collective"], wire)
            yield from self._communicate(plan, wire, owner, str(op.attrs.get("group", "tp")))
        elif op.kind == "send":
            plan = self.planner.send(rank_class, self.stage_rank[op.attrs["peer_stage"]])
            start = self.env.now
            yield from self._communicate(plan, op.bytes, owner, "pp")
            key = (op.attrs["tag"], rank_class.stage)
            self.arrival_s[key] = self.env.now - start
            self._mail(key).succeed()
        elif op.kind == "copy":
            direction = op.attrs["direction"]
            use = op.attrs.get("access") or f"{direction}_copy"
            toward = "device" if direction == "h2d" else "host"
            path = self.planner.host(rank_class, toward, use)
            yield self.network.transfer(path, op.bytes, owner, "offload")
        elif op.kind == "cpu":
            cores, sharers = op.attrs.get("cores"), self.planner.sharers_of_host(rank_class)
            seconds = self.host.cpu_compute_s(op.flops, cores, sharers)
            if op.bytes <= 0:
                yield self.env.timeout(seconds)
            else:  # the longer of its arithmetic and its traffic, at most its cores' stream
                cap = min(op.bytes / seconds if seconds > 0 else float("inf"),
                          self.host.cores_stream_bytes_per_s(
                              cores, sharers, op.attrs.get("read_share", 1.0)))
                path = self.planner.host(rank_class, "host", "cpu", cap)
                yield self.network.transfer(path, op.bytes, owner, "cpu")
        elif op.kind == "migrate":
            # Bound by the driver's fault service, not the link: each direction is a flow on
            # the copy engines' path capped at the measured migration rate, so it takes only
            # its own share of the link. The driver evicts to make room before it brings pages
            # in, so the two directions run one after the other (costmodel/host.py).
            if op.attrs["faults"] and self.host.fault_s:
                yield self.env.timeout(op.attrs["faults"] * self.host.fault_s)
            cap = self.host.migration_bytes_per_s
            for toward, use, nbytes in (("host", "d2h_copy", op.attrs["out_bytes"]),
                                        ("device", "h2d_copy", op.attrs["in_bytes"])):
                if nbytes:
                    yield self.network.transfer(self.planner.host(rank_class, toward, use, cap),
                                                nbytes, owner, "migration")
        else:
            raise NotImplementedError(f"the engine cannot run {op.kind!r} ops")

    def _stream(self, timeline: ClassTimeline, ops: list[Op],
                done: list[simpy.Event]) -> Generator[simpy.Event, Any, None]:
        for op in ops:
            pending = [done[d] for d in op.deps if not done[d].processed]
            if len(pending) == 1:
                yield pending[0]
            elif pending:
                yield self.env.all_of(pending)
            if "rendezvous" in op.attrs:  # a collective starts when every rank has reached it
                yield self._rendezvous(op.attrs["rendezvous"])
            launched = op.attrs.get("not_before_s", 0.0)
            if launched > self.env.now:
                timeline.launch_wait_s[op.id] = launched - self.env.now
                yield self.env.timeout(launched - self.env.now)  # the CPU had not launched it
            start = self.env.now
            yield from self._run_op(timeline, op)
            timeline.start_of[op.id] = start
            timeline.end_of[op.id] = self.env.now
            timeline.spans.append(Span(op.stream, op.id, start, self.env.now))
            done[op.id].succeed()

    def _work_items(self) -> int:
        """Ops plus the inline collectives inside compute ops: what the event count scales
        with (bodies repeat, so each distinct body is counted once per use)."""
        comms: dict[int, int] = {}
        total = 0
        for rank_class in self.workload.classes:
            for op in rank_class.ops:
                key = id(op.body)
                if key not in comms:
                    comms[key] = sum(1 for step in op.body if isinstance(step, Comm))
                total += 1 + comms[key]
        return total

    def _run_bounded(self, ops: int) -> None:
        """Run the event loop, but never for ever: a replay that needs more than
        ``EVENTS_PER_OP`` events per op on average is livelocked, an internal error."""
        limit = EVENTS_PER_OP * ops + 10_000
        env, events = self.env, 0
        try:
            while True:
                env.step()
                events += 1
                if events > limit:
                    raise SimulationLivelock(
                        f"simulation livelock: {events} events for {ops} ops at t = "
                        f"{env.now:.6g} s; please report this scenario")
        except simpy.core.EmptySchedule:
            pass
        self.events = events

    def _run_segments(self, op: Op, rank_class: RankClass) -> tuple[Segment, ...] | None:
        """The segments a compute op runs (None: it runs none of its collectives)."""
        if "measured_s" in op.attrs or "fallback_s" in op.attrs:
            return None
        return self.body_parts(op.body, rank_class)[1]

    def run(self) -> Timeline:
        self.private, self.network.reserved = private_pairs(
            self.workload, self.planner, self.stage_rank, self._run_segments)
        for timeline in self.timelines:
            rank_class = timeline.rank_class
            done = [self.env.event() for _ in rank_class.ops]
            streams: dict[str, list[Op]] = {}
            for op in rank_class.ops:
                streams.setdefault(op.stream, []).append(op)
            for ops in streams.values():
                self.env.process(self._stream(timeline, ops, done))
        self._run_bounded(self._work_items())
        self.network.finish()
        unfinished = [t.rank_class.name for t in self.timelines
                      if len(t.end_of) != len(t.rank_class.ops)]
        if unfinished:
            raise RuntimeError(f"simulation stalled: {', '.join(unfinished)} did not finish")
        return Timeline(self.timelines, self.network, self.planner.graph.gpus_per_node)
