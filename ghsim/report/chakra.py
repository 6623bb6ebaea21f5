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
  communication). A compute op that runs inline collectives (tensor-, context- and
  expert-parallel) is split into a chain of compute and collective nodes (:func:`_split`), so
  ASTRA-sim's network simulates those collectives too; its compute nodes carry the kernels'
  modelled seconds, and only the chain's first node the op's simulated start.
"""

from __future__ import annotations

import errno
import itertools
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ghsim.engine.body import Segment
from ghsim.engine.simulator import ClassTimeline, Timeline
from ghsim.importers.chakra import (
    COLLECTIVES,
    NODE_TYPES,
    GlobalMetadata,
    Node,
    attribute_bytes,
    chakra_collective,
    framed,
    length_prefix,
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
    if op.kind == "collective":
        return _collective(op.id, op.name, op.attrs["collective"], op.bytes, op.deps, start,
                           end - start)
    if op.kind in ("send", "recv"):
        node = Node(id=op.id, name=op.name, duration_micros=round((end - start) * 1e6),
                    start_time_micros=round(start * 1e6),
                    type=NODE_TYPES.index("COMM_SEND_NODE" if op.kind == "send"
                                          else "COMM_RECV_NODE"))
        node.data_deps.extend(op.deps)
        node.attr.add(name="comm_size", int64_val=int(op.bytes))
        node.attr.add(name="is_cpu_op", bool_val=False)
        return node
    # GPU kernels; host work and copies beside them on the CPU
    return _compute(op.id, op.name, end - start, _flops(op), op.deps, start,
                    cpu=op.kind != "compute")


Transfer = tuple[str, int]
"""A pipeline transfer's kind (send or recv) and the stage of its peer."""


def _compute(node_id: int, name: str, seconds: float, flops: float, deps: tuple[int, ...],
             start_s: float = 0.0, cpu: bool = False) -> Any:
    """A compute node of ``seconds`` and ``flops`` after ``deps`` (on the CPU: ``cpu``)."""
    node = Node(id=node_id, name=name, type=NODE_TYPES.index("COMP_NODE"),
                duration_micros=round(seconds * 1e6), start_time_micros=round(start_s * 1e6))
    node.data_deps.extend(deps)
    if flops:
        node.attr.add(name="num_ops", int64_val=int(flops))
    node.attr.add(name="is_cpu_op", bool_val=cpu)
    return node


def _collective(node_id: int, name: str, collective: str, size: float, deps: tuple[int, ...],
                start_s: float, seconds: float) -> Any:
    """A collective node of ``size`` bytes after ``deps`` (its group is appended per NPU)."""
    node = Node(id=node_id, name=name, type=NODE_TYPES.index("COMM_COLL_NODE"),
                duration_micros=round(seconds * 1e6), start_time_micros=round(start_s * 1e6))
    node.data_deps.extend(deps)
    node.attr.add(name="comm_type", int64_val=COLLECTIVES.index(chakra_collective(collective)))
    node.attr.add(name="comm_size", int64_val=int(size))
    node.attr.add(name="is_cpu_op", bool_val=False)
    return node


def _split(op: Op, body: tuple[Segment, ...], start_s: float, spans: list[tuple[float, float]],
           ids: Iterator[int]) -> list[tuple[Any, str | Transfer | None]]:
    """A compute op that runs inline collectives as a chain of nodes, each with the group kind
    whose members a collective names (None for compute): its kernels between two collectives
    as one compute node of their modelled seconds and FLOPs, each collective as a collective
    node for ASTRA-sim's network to simulate, a GEMM that runs beside a collective as a compute
    node beside it. The last node, the kernels after the last collective (taking no time
    where there are none), keeps the op's id, so what depends on the op waits for all of it.
    A collective node starts and lasts as the op's collective did in the simulation
    (``spans``: each one's start and end, in order); the kernels before the first start when
    the op did (``start_s``)."""
    nodes: list[tuple[Any, str | Transfer | None]] = []
    after = op.deps
    seconds = flops = 0.0
    ran = iter(spans)
    for segment in body:
        seconds, flops = seconds + segment.kernel_s, flops + segment.flops
        comm = segment.comm
        if comm is None:
            continue
        if seconds:
            kernels = _compute(next(ids), f"{op.name}: kernels", seconds, flops, after,
                               start_s if not nodes else 0.0)
            nodes.append((kernels, None))
            after, seconds, flops = (kernels.id,), 0.0, 0.0
        start, end = next(ran, (0.0, 0.0))
        collective = _collective(next(ids), f"{op.name}: {comm.name}", comm.collective,
                                 comm.bytes, after, start, end - start)
        nodes.append((collective, comm.group))
        ends: tuple[int, ...] = (collective.id,)
        if segment.overlap_s:
            beside = _compute(next(ids), f"{op.name}: beside {comm.name}", segment.overlap_s,
                              segment.overlap_flops, after)
            nodes.append((beside, None))
            ends = (collective.id, beside.id)
        after = ends
    nodes.append((_compute(op.id, op.name, seconds, flops, after), None))
    return nodes


Template = list[bytes | tuple[bytes, str | Transfer]]
"""A class's nodes as its NPUs share them: framed bytes where no NPU changes them (runs of
such nodes joined); a collective's or transfer's node serialized without what depends on the
NPU, with the kind of the class's group it names or the transfer it is."""


def _npu_nodes(rank_class: RankClass, rank: int, template: Template, groups: _Groups) -> bytes:
    """One NPU's nodes: ``template`` with its group ids and transfer ends appended
    (protobuf concatenates repeated fields), each worked out once per NPU."""
    extras: dict[str | Transfer, bytes] = {}
    parts = []
    for item in template:
        if isinstance(item, bytes):
            parts.append(item)
            continue
        payload, key = item
        extra = extras.get(key)
        if extra is None:
            if isinstance(key, tuple):  # the same local position on the peer stage
                kind, stage = key
                peer = rank + (stage - rank_class.stage) * rank_class.multiplicity
                src, dst = (rank, peer) if kind == "send" else (peer, rank)
                extra = attribute_bytes("comm_src", src) + attribute_bytes("comm_dst", dst)
            else:
                members_of = members(rank_class.groups[key], rank)
                extra = attribute_bytes("pg_name", str(groups.id(members_of)))
            extras[key] = extra
        parts += (length_prefix(len(payload) + len(extra)), payload, extra)
    return b"".join(parts)


def _template(cls: ClassTimeline, virtual_stages: int) -> Template:
    """A class's ops as its NPUs share them, one node each or, for a compute op that runs
    inline collectives, the chain :func:`_split` makes of it."""
    ops = cls.rank_class.ops
    ids = itertools.count(max((op.id for op in ops), default=-1) + 1)
    spans: dict[int, list[tuple[float, float]]] = {}
    for op_id, _, start, end in cls.comm_spans:
        spans.setdefault(op_id, []).append((start, end))
    template: Template = []
    shared: list[bytes] = []
    for op in ops:
        if op.id in cls.segments:
            nodes = _split(op, cls.segments[op.id], cls.start_of.get(op.id, 0.0),
                           spans.get(op.id, []), ids)
        else:
            node = _node(op, cls)
            key: str | Transfer | None = None
            if op.kind in ("send", "recv"):
                node.attr.add(name="comm_tag",
                              int64_val=tag_of(op.attrs["tag"], virtual_stages))
                key = (op.kind, op.attrs["peer_stage"])
            elif op.kind == "collective":
                key = op.attrs["group"]
            nodes = [(node, key)]
        for node, key in nodes:
            if key is None:
                shared.append(framed(node))
                continue
            if shared:
                template.append(b"".join(shared))
                shared = []
            template.append((node.SerializeToString(), key))
    if shared:
        template.append(b"".join(shared))
    return template


def export_npus(timeline: Timeline, directory: Path) -> list[Path]:
    """``workload.N.et`` for every NPU of a lowered step, and ``comm_groups.json``: all of
    them, or (an :class:`OSError`) none, the files already written removed again; refused
    before the first is written where the export would not fit on the disk."""
    directory.mkdir(parents=True, exist_ok=True)
    tags = [op.attrs["tag"][2] for cls in timeline.classes for op in cls.rank_class.ops
            if op.kind in ("send", "recv")]
    virtual_stages = max(tags, default=0) + 1
    metadata = GlobalMetadata(version="0.0.4")
    metadata.attr.add(name="schema", string_val="ghsim")
    header = framed(metadata)
    templates = [(cls.rank_class, _template(cls, virtual_stages)) for cls in timeline.classes]
    _check_space(directory, sum(rank_class.multiplicity * (len(header) + _size(template))
                                for rank_class, template in templates))
    groups = _Groups()
    written: list[Path] = []
    try:
        for rank_class, template in templates:
            for rank in range(rank_class.first_rank,
                              rank_class.first_rank + rank_class.multiplicity):
                path = directory / f"{PREFIX}.{rank}.et"
                write_bytes(path, header + _npu_nodes(rank_class, rank, template, groups))
                written.append(path)
        comm_groups = directory / "comm_groups.json"
        write_text(comm_groups, json.dumps(groups.as_json()) + "\n")
    except OSError:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    return [*written, comm_groups]


NPU_EXTRA_BYTES = 31
"""The most an NPU adds to a node of its template: a group id (``pg_name``, 22 bytes with
eight digits) or both ends of a transfer (30 bytes for NPUs below 2^14, and
``ghsim.limits.MAX_CHAKRA_NPUS`` is 8,192), and one more byte of length prefix."""


def _size(template: Template) -> int:
    """At most the bytes one NPU's file takes beyond its header."""
    return sum(len(item) if isinstance(item, bytes) else len(item[0]) + NPU_EXTRA_BYTES
               for item in template)


def _check_space(directory: Path, needed: int) -> None:
    """An :class:`OSError` (no space) if ``needed`` bytes do not fit where ``directory`` is."""
    free = shutil.disk_usage(directory).free
    if needed > free:
        raise OSError(errno.ENOSPC, f"the export takes up to {needed / 1e9:,.2f} GB and "
                      f"{free / 1e9:,.2f} GB are free")
