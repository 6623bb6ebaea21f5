"""Which inline collectives run on links nothing else ever crosses, so need no flow network.

A tensor-parallel group inside one NVLink domain is the common case: its all-gathers and
reduce-scatters block the compute stream one after another, and no other traffic of the step
(no data-parallel bucket, pipeline send or host copy, of this rank class or any other) crosses
those NVLink ports. Such a collective always runs alone on idle links, so its flows take
their standalone rates and its end is known when it starts: the engine books it at once
(:meth:`~ghsim.engine.fluid.FlowNetwork.book_alone`) instead of running it as flows that the
network re-shares at their start and end. Same times, same link books, a fraction of the
events; a trillion-parameter pipeline has about half a million such collectives.

The decision is made before the run from every transfer the workload can start: a (rank class,
group) pair is private when every link its inline collectives cross is crossed by that pair
alone, its inline collectives are never overlapped with compute, all of them sit on one stream
(so they run one at a time), and each of its plans' flows cross disjoint links (so none
shares with another). The network refuses a flow on a link reserved this way
(:attr:`FlowNetwork.reserved`), so a transfer this analysis missed fails loudly instead of
silently sharing nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ghsim.engine.body import Segment
from ghsim.fabric.sharing import Path
from ghsim.fabric.traffic import Plan, TrafficPlanner
from ghsim.workload.ir import Comm, Op, RankClass, Workload
from ghsim.workload.summary import wire_bytes

Pair = tuple[str, str]
"""(rank class name, group name): whose inline collectives may be private."""


def disjoint(plan: Plan) -> bool:
    """Whether the plan's flows cross no link in common (so each runs at its standalone rate)."""
    seen: set[str] = set()
    for share in plan.shares:
        if not seen.isdisjoint(share.path.links):
            return False
        seen.update(share.path.links)
    return True


def inline_plan(planner: TrafficPlanner, rank_class: RankClass, step: Comm,
                overlapped: bool = False) -> tuple[float, Plan]:
    """The wire bytes and the plan of a compute op's inline collective ``step``;
    ``overlapped``: run by Transformer Engine's userbuffers beside its GEMM (copies, not
    NCCL's pipeline)."""
    group = rank_class.groups[step.group]
    wire = wire_bytes(step.collective, step.bytes, group.size)
    return wire, planner.collective(rank_class, group, step.collective, wire, step.dedup,
                                    nccl_pipeline=not overlapped)


def _transfer_paths(planner: TrafficPlanner, rank_class: RankClass, op: Op,
                    stage_rank: dict[int, int]) -> Iterator[Path]:
    """Every path an op that is not a compute op can put a flow on (mirrors
    ``Simulator._run_op``; a kind missing here trips :attr:`FlowNetwork.reserved`)."""
    if op.kind == "collective":
        group = op.attrs.get("replay_group") or rank_class.groups[op.attrs["group"]]
        wire = wire_bytes(op.attrs["collective"], op.bytes, group.size)
        plan = planner.collective(rank_class, group, op.attrs["collective"], wire)
        yield from (share.path for share in plan.shares)
    elif op.kind == "send":
        plan = planner.send(rank_class, stage_rank[op.attrs["peer_stage"]])
        yield from (share.path for share in plan.shares)
    elif op.kind == "copy":
        toward = "device" if op.attrs["direction"] == "h2d" else "host"
        yield planner.host(rank_class, toward, op.attrs.get("access")
                           or f"{op.attrs['direction']}_copy")
    elif op.kind == "cpu" and op.bytes > 0:
        yield planner.host(rank_class, "host", "cpu")
    elif op.kind == "migrate":
        yield planner.host(rank_class, "host", "d2h_copy")
        yield planner.host(rank_class, "device", "h2d_copy")


def private_pairs(workload: Workload, planner: TrafficPlanner, stage_rank: dict[int, int],
                  body_segments: Callable[[Op, RankClass], tuple[Segment, ...] | None]
                  ) -> tuple[frozenset[Pair], frozenset[str]]:
    """The (rank class, group) pairs whose inline collectives can be booked alone, and the
    links they reserve. ``body_segments`` gives a compute op's segments as the engine runs
    them (None when it runs none of its collectives)."""
    users: dict[str, set[tuple[str, str]]] = {}
    streams: dict[Pair, set[str]] = {}
    spoilt: set[Pair] = set()
    links_of: dict[Pair, set[str]] = {}

    def use(links: tuple[str, ...], who: tuple[str, str]) -> None:
        for link in links:
            users.setdefault(link, set()).add(who)

    for rank_class in workload.classes:
        owner = rank_class.name
        seen_bodies: set[int] = set()
        seen_uses: set[tuple[int, str]] = set()
        sends: set[int] = set()
        for op in rank_class.ops:
            if op.kind == "compute":
                use_key = (id(op.body), op.stream)
                if use_key in seen_uses:  # the same body on the same stream adds nothing
                    continue
                parts = body_segments(op, rank_class)
                if not parts:
                    continue
                seen_uses.add(use_key)
                for segment in parts:
                    if segment.comm is None:
                        continue
                    pair = (owner, segment.comm.group)
                    streams.setdefault(pair, set()).add(op.stream)
                    if id(op.body) in seen_bodies:
                        continue
                    _, plan = inline_plan(planner, rank_class, segment.comm)
                    if segment.overlap_s or not disjoint(plan):
                        spoilt.add(pair)
                    for share in plan.shares:
                        use(share.path.links, pair)
                        links_of.setdefault(pair, set()).update(share.path.links)
                seen_bodies.add(id(op.body))
                continue
            if op.kind == "send":  # one path per peer
                peer = op.attrs["peer_stage"]
                if peer in sends:
                    continue
                sends.add(peer)
            for path in _transfer_paths(planner, rank_class, op, stage_rank):
                use(path.links, (owner, f"op:{op.kind}"))
    private = {pair for pair, links in links_of.items()
               if pair not in spoilt and len(streams[pair]) == 1
               and all(users[link] == {pair} for link in links)}
    reserved = frozenset(link for pair in private for link in links_of[pair])
    return frozenset(private), reserved
