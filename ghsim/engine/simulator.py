"""Replaying a workload on simpy: one process per stream of each rank class.

Each op waits for its dependencies (which include the op before it on its stream), then takes
the time its cost model gives; transfers on the data-parallel and pipeline streams share the
rank's links with each other (``SharedLinks``), so overlapping traffic slows down; a pipeline
``recv`` completes when the peer stage's matching ``send`` has arrived. Every op's span is kept
for the timeline and the attribution of the step.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from ghsim.costmodel.collectives import CommCostModel
from ghsim.costmodel.gpu import GpuCostModel
from ghsim.costmodel.host import HostCostModel
from ghsim.engine.fluid import SharedLinks
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
    links: SharedLinks | None = None


@dataclass
class Timeline:
    """The whole simulated step."""

    classes: list[ClassTimeline]

    @property
    def step_time_s(self) -> float:
        return max((s.end for c in self.classes for s in c.spans), default=0.0)


EVENTS_PER_OP = 200
"""Bound on simulation events per op: replays take about 5 to 15 (test_engine checks the
margin), so this only stops a livelock."""


class SimulationLivelock(RuntimeError):
    """The event loop kept running without finishing the step: a bug, never a user mistake."""


_COMM_LINKS = frozenset({"nvlink", "nic"})
"""Links whose traffic is driven by communication kernels on the SMs (copies use copy engines)."""


def _category(step: Kernel) -> str:
    if step.recompute:
        return "recompute"
    return {"gemm": "gemm", "attention": "attention", "softmax": "attention",
            "optimizer": "optimizer"}.get(
        step.klass, "elementwise")


class Simulator:
    """Simulates one optimizer step of a workload."""

    def __init__(self, workload: Workload, gpu: GpuCostModel, comm: CommCostModel,
                 host: HostCostModel, gpus_per_domain: int) -> None:
        self.workload = workload
        self.gpu = gpu
        self.comm = comm
        self.host = host
        self.gpus_per_domain = gpus_per_domain
        self.env = simpy.Environment()
        self.mailbox: dict[tuple[Any, ...], simpy.Event] = {}
        self.arrivals: dict[tuple[Any, ...], int] = {}
        self.arrival_s: dict[tuple[Any, ...], float] = {}
        self._bodies: dict[int, dict[str, float]] = {}
        self.timelines = [ClassTimeline(c) for c in workload.classes]
        self.stage_rank = {c.stage: c.first_rank for c in workload.classes}
        self.events = 0
        """Events the last run processed."""

    # -- costs -----------------------------------------------------------------------------

    def body_parts(self, body: tuple[Step, ...], rank_class: RankClass) -> dict[str, float]:
        """Seconds by category of a compute op's body (cached: bodies repeat)."""
        key = id(body)
        if key not in self._bodies:
            parts: dict[str, float] = {}
            for step in body:
                if isinstance(step, Comm):
                    group = rank_class.groups[step.group]
                    seconds = self.comm.collective_s(step.collective, step.bytes, group)
                    parts[step.group] = parts.get(step.group, 0.0) + seconds
                else:
                    category = _category(step)
                    parts[category] = parts.get(category, 0.0) + self.gpu.kernel_s(step)
            self._bodies[key] = parts
        return self._bodies[key]

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

    def _run_op(self, timeline: ClassTimeline, op: Op,
                done: list[simpy.Event]) -> Generator[simpy.Event, Any, None]:
        rank_class = timeline.rank_class
        links = timeline.links
        assert links is not None
        if op.kind == "recv":
            key = (op.attrs["tag"], op.attrs["peer_stage"])
            yield self._mail(key)
            timeline.transfer_s[op.id] = self.arrival_s[key]
        elif "measured_s" in op.attrs:
            parts = {op.attrs["category"]: op.attrs["measured_s"]}
            timeline.compute_parts[op.id] = parts
            yield self.env.timeout(op.attrs["measured_s"])
        elif op.kind == "compute":
            parts = self.body_parts(op.body, rank_class)
            if "fallback_s" in op.attrs:
                parts = {**parts, op.attrs["category"]: op.attrs["fallback_s"]}
            overlap = min(links.busy_for_s(_COMM_LINKS), sum(parts.values()))
            if overlap > 0 and self.gpu.overlap_slowdown:
                # Communication kernels running beside this op take SMs and memory bandwidth.
                parts = {**parts, "overlap": overlap * self.gpu.overlap_slowdown}
            timeline.compute_parts[op.id] = parts
            yield self.env.timeout(sum(parts.values()))
        elif op.kind == "collective":
            group = op.attrs.get("replay_group") or rank_class.groups[op.attrs["group"]]
            channel = self.comm.channel(group, op.attrs["collective"])
            wire = wire_bytes(op.attrs["collective"], op.bytes, group.size)
            yield self.env.timeout(channel.latency_s * max(1, (group.size - 1).bit_length()))
            yield links.transfer(channel.link, wire / channel.busbw_bytes_per_s, wire)
        elif op.kind == "send":
            peer = self.stage_rank[op.attrs["peer_stage"]]
            same = peer // self.gpus_per_domain == rank_class.first_rank // self.gpus_per_domain
            channel = self.comm.p2p_channel(same)
            start = self.env.now
            yield self.env.timeout(channel.latency_s)
            yield links.transfer(channel.link, op.bytes / channel.busbw_bytes_per_s, op.bytes)
            key = (op.attrs["tag"], rank_class.stage)
            self.arrival_s[key] = self.env.now - start
            self._mail(key).succeed()
        elif op.kind == "copy":
            direction = op.attrs["direction"]
            seconds = self.host.copy_s(op.bytes, direction, op.attrs.get("access"))
            yield links.transfer((direction, "host_memory"), seconds, op.bytes)
        elif op.kind == "cpu":
            seconds = self.host.cpu_s(op.flops, op.bytes, op.attrs.get("cores"))
            yield links.transfer(("cpu", "host_memory"), seconds, op.bytes)
        elif op.kind == "migrate":
            moved_in, moved_out = op.attrs["in_bytes"], op.attrs["out_bytes"]
            seconds = self.host.migrate_s(moved_in, moved_out, op.attrs["faults"])
            yield links.transfer(("h2d", "d2h", "host_memory"), seconds, moved_in + moved_out)
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
            yield from self._run_op(timeline, op, done)
            timeline.start_of[op.id] = start
            timeline.end_of[op.id] = self.env.now
            timeline.spans.append(Span(op.stream, op.id, start, self.env.now))
            done[op.id].succeed()

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

    def run(self) -> Timeline:
        for timeline in self.timelines:
            rank_class = timeline.rank_class
            timeline.links = SharedLinks(self.env)
            done = [self.env.event() for _ in rank_class.ops]
            streams: dict[str, list[Op]] = {}
            for op in rank_class.ops:
                streams.setdefault(op.stream, []).append(op)
            for ops in streams.values():
                self.env.process(self._stream(timeline, ops, done))
        self._run_bounded(sum(len(c.ops) for c in self.workload.classes))
        unfinished = [t.rank_class.name for t in self.timelines
                      if len(t.end_of) != len(t.rank_class.ops)]
        if unfinished:
            raise RuntimeError(f"simulation stalled: {', '.join(unfinished)} did not finish")
        return Timeline(self.timelines)
