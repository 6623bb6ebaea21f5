"""Exporting a simulated step (lowered or imported) as Chakra traces, with the durations the
simulation gave each op (``ghsim run --chakra DIR``). A report of the engine's timeline, so it
lives here and the importers never depend on the engine.

Two layouts:

* one file per rank class (``stage0.et``, ...), its nodes chained in the order they ran: the
  step as ghsim ran it, for reading;
* with ``--chakra-npus``, the layout ASTRA-sim reads (``Workload::Workload`` opens
  ``{prefix}.{npu}.et``): ``workload.N.et`` for every NPU N of a lowered step and
  ``comm_groups.json`` (``--comm-group-configuration``: group id to member NPUs). Each node keeps
  its op's dependencies (``data_deps``: what it waits for, the op before it on its stream
  included), so ASTRA-sim overlaps what ghsim overlapped; each collective names its group
  (``pg_name``); each pipeline send and receive names both ends and a tag its peer's node
  shares (``comm_src``, ``comm_dst``, ``comm_tag``, as ``Workload::issue_send_comm`` and
  ``issue_recv_comm`` read them). Host work and copies are CPU nodes replayed at their
  simulated durations (ASTRA-sim runs one at a time beside the GPU's compute and
  communication).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ghsim.engine.simulator import ClassTimeline, Timeline
from ghsim.importers.chakra import (
    COLLECTIVES,
    NODE_TYPES,
    GlobalMetadata,
    Node,
    attribute_bytes,
    chakra_collective,
    framed,
    framed_payload,
    write_chakra,
)
from ghsim.importers.kineto import GpuEvent, TraceRank
from ghsim.outputs import write_bytes, write_text
from ghsim.workload.ir import Group, Op, RankClass

PREFIX = "workload"
"""The files' prefix: ASTRA-sim's ``--workload-configuration=DIR/workload``."""


def timeline_ranks(timeline: Timeline) -> list[TraceRank]:
    """Each rank class's ops, in the order they ran, as events."""
    ranks = []
    for index, cls in enumerate(timeline.classes):
        events = []
        for span in sorted(cls.spans, key=lambda s: (s.start, s.op)):
            op = cls.rank_class.ops[span.op]
            flops = _flops(op)
            start, dur = span.start * 1e6, (span.end - span.start) * 1e6
            if op.kind == "collective" or op.attrs.get("klass") == "collective":
                event = GpuEvent(op.name, "kernel", 0, start, dur, "collective", bytes=op.bytes,
                                 collective=op.attrs.get("collective", "all_reduce"))
            elif op.kind in ("send", "recv"):
                event = GpuEvent(op.name, "kernel", 1, start, dur, "collective", bytes=op.bytes,
                                 collective="send_recv")
            else:
                event = GpuEvent(op.name, "kernel", 0, start, dur,
                                 "gemm" if flops else "elementwise", flops=flops)
            events.append(event)
        ranks.append(TraceRank(cls.rank_class.name, index, "", events, None, 0))
    return ranks


def _flops(op: Op) -> float:
    return (sum(k.flops for k in op.kernels()) or op.flops  # a host op's arithmetic
            or op.attrs.get("flops", 0.0))  # a replayed kernel's


def export_chakra(timeline: Timeline, directory: Path) -> list[Path]:
    """One file per rank class, named after it."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for rank in timeline_ranks(timeline):
        path = directory / f"{rank.source}.et"
        write_chakra(path, rank)
        written.append(path)
    return written


# -- one file per NPU, as ASTRA-sim reads them --------------------------------------------------

def members(group: Group, rank: int) -> tuple[int, ...]:
    """The global ranks of ``rank``'s group of this kind (Megatron's rank order: the group's
    members are ``group.stride`` apart; ghsim.workload.placement)."""
    base = rank - (rank // group.stride % group.size) * group.stride
    return tuple(base + j * group.stride for j in range(group.size))


def tag_of(tag: tuple[str, int, int], virtual_stages: int) -> int:
    """A pipeline transfer's tag as one integer, the same at both ends: the lowering tags a
    send and its receive alike (activations or gradients, micro-batch, the receiving virtual
    stage)."""
    kind, microbatch, stage = tag
    return (microbatch * virtual_stages + stage) * 2 + (kind == "grad")


class _Groups:
    """Communication groups by their members, numbered from 1 as they are first met (ASTRA-sim
    takes group 0 and an empty name for all NPUs)."""

    def __init__(self) -> None:
        self.ids: dict[tuple[int, ...], int] = {}

    def id(self, ranks: tuple[int, ...]) -> int:
        return self.ids.setdefault(ranks, len(self.ids) + 1)

    def as_json(self) -> dict[str, list[int]]:
        return {str(number): list(ranks) for ranks, number in self.ids.items()}


def _node(op: Op, cls: ClassTimeline) -> Any:
    """``op`` as a node, without what depends on the NPU (groups and peers)."""
    start, end = cls.start_of.get(op.id, 0.0), cls.end_of.get(op.id, 0.0)
    node = Node(id=op.id, name=op.name, duration_micros=round((end - start) * 1e6),
                start_time_micros=round(start * 1e6))
    node.data_deps.extend(op.deps)
    if op.kind == "collective":
        node.type = NODE_TYPES.index("COMM_COLL_NODE")
        node.attr.add(name="comm_type", int64_val=COLLECTIVES.index(
            chakra_collective(op.attrs["collective"])))
        node.attr.add(name="comm_size", int64_val=int(op.bytes))
    elif op.kind in ("send", "recv"):
        node.type = NODE_TYPES.index("COMM_SEND_NODE" if op.kind == "send"
                                     else "COMM_RECV_NODE")
        node.attr.add(name="comm_size", int64_val=int(op.bytes))
    else:  # GPU kernels; host work and copies beside them on the CPU
        node.type = NODE_TYPES.index("COMP_NODE")
        if flops := _flops(op):
            node.attr.add(name="num_ops", int64_val=int(flops))
    node.attr.add(name="is_cpu_op", bool_val=op.kind not in ("compute", "collective", "send",
                                                            "recv"))
    return node


def _npu_nodes(rank_class: RankClass, rank: int, cached: dict[int, bytes],
               groups: _Groups) -> bytes:
    """One NPU's nodes: those that do not depend on the NPU as ``cached`` holds them, framed;
    the others ``cached`` holds serialized without their group or ends, which are appended
    here (protobuf concatenates repeated fields)."""
    replicas = rank_class.multiplicity
    parts = []
    for op in rank_class.ops:
        base = cached[op.id]
        if op.kind == "collective":
            group = rank_class.groups[op.attrs["group"]]
            parts.append(framed_payload(base + attribute_bytes(
                "pg_name", str(groups.id(members(group, rank))))))
        elif op.kind in ("send", "recv"):  # the same local position on the peer stage
            peer = rank + (op.attrs["peer_stage"] - rank_class.stage) * replicas
            src, dst = (rank, peer) if op.kind == "send" else (peer, rank)
            parts.append(framed_payload(base + attribute_bytes("comm_src", src)
                                        + attribute_bytes("comm_dst", dst)))
        else:
            parts.append(base)
    return b"".join(parts)


def _cached(cls: ClassTimeline, virtual_stages: int) -> dict[int, bytes]:
    """Each op of a class as its NPUs share it: framed where no NPU changes it; serialized,
    unframed, for the collectives and transfers, a transfer with its tag."""
    cached = {}
    for op in cls.rank_class.ops:
        node = _node(op, cls)
        if op.kind in ("send", "recv"):
            node.attr.add(name="comm_tag", int64_val=tag_of(op.attrs["tag"], virtual_stages))
        payload = node.SerializeToString()
        shared = op.kind not in ("collective", "send", "recv")
        cached[op.id] = framed_payload(payload) if shared else payload
    return cached


def export_npus(timeline: Timeline, directory: Path) -> list[Path]:
    """``workload.N.et`` for every NPU of a lowered step, and ``comm_groups.json``."""
    directory.mkdir(parents=True, exist_ok=True)
    tags = [op.attrs["tag"][2] for cls in timeline.classes for op in cls.rank_class.ops
            if op.kind in ("send", "recv")]
    virtual_stages = max(tags, default=0) + 1
    metadata = GlobalMetadata(version="0.0.4")
    metadata.attr.add(name="schema", string_val="ghsim")
    header = framed(metadata)
    groups = _Groups()
    written = []
    for cls in timeline.classes:
        rank_class = cls.rank_class
        cached = _cached(cls, virtual_stages)
        for rank in range(rank_class.first_rank,
                          rank_class.first_rank + rank_class.multiplicity):
            path = directory / f"{PREFIX}.{rank}.et"
            write_bytes(path, header + _npu_nodes(rank_class, rank, cached, groups))
            written.append(path)
    comm_groups = directory / "comm_groups.json"
    write_text(comm_groups, json.dumps(groups.as_json()) + "\n")
    return [*written, comm_groups]
