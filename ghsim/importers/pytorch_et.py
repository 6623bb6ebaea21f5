"""PyTorch execution traces (``ExecutionTraceObserver`` JSON): the host operator graph.

Both layouts are read: schema 1.0.1 (flat ``parent``, ``input_shapes``, ``input_types``) and
1.0.2+ / 1.1.x (``ctrl_deps`` and ``inputs: {values, shapes, types}``, ``attrs`` lists). The
leaf operators (those no other node names as its parent) become events in id order: matrix
multiplies with their FLOPs and shapes, communication operators with their message size, the
rest element-wise. An execution trace records no durations, so it replays with ``recost``
(a measured replay of it takes no time); joined timing comes from a profiler trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ghsim.importers.classify import collective_kind, gemm_flops
from ghsim.importers.kineto import GpuEvent, TraceError, TraceRank, json_items


def node_fields(raw: dict[str, Any]) -> tuple[int, str, int | None, list[Any], list[Any]]:
    """id, name, parent, input shapes, input types of a node in either layout."""
    inputs = raw.get("inputs")
    if isinstance(inputs, dict):  # 1.0.2+ layout
        shapes, types = inputs.get("shapes") or [], inputs.get("types") or []
    else:
        shapes, types = raw.get("input_shapes") or [], raw.get("input_types") or []
    parent = raw.get("parent", raw.get("ctrl_deps"))
    if isinstance(parent, list):
        parent = parent[0] if parent else None
    return int(raw.get("id", -1)), str(raw.get("name", "")), parent, shapes, types


def _bytes(shapes: list[Any], types: list[Any]) -> float:
    total = 0.0
    for shape, kind in zip(shapes, types, strict=False):
        if isinstance(shape, list) and shape and all(isinstance(d, int) for d in shape):
            size = 2 if "half" in str(kind).lower() or "bfloat" in str(kind).lower() else 4
            count = 1
            for dim in shape:
                count *= dim
            total += count * size
    return total


def read_pytorch_et(path: Path, rank: int = 0) -> TraceRank:
    """One rank's execution trace as a replayable rank of its leaf operators."""
    nodes = []
    schema = next(iter(json_items(path, "schema")), None)
    if schema is None:
        raise TraceError(str(path), "schema",
                         "expected a PyTorch execution trace: a JSON object with schema and nodes")
    for raw in json_items(path, "nodes.item"):
        if isinstance(raw, dict):
            nodes.append(node_fields(raw))
    if not nodes:
        raise TraceError(str(path), "nodes", "the execution trace holds no nodes")
    parents = {parent for _, _, parent, _, _ in nodes if parent is not None}
    events = []
    for node_id, name, _, shapes, types in sorted(nodes):
        if node_id in parents or not name or name.startswith(("[", "##", "ProfilerStep")):
            continue
        if "nccl" in name or "comms" in name or name.startswith("c10d::"):
            events.append(GpuEvent(name, "kernel", 0, 0.0, 0.0, "collective",
                                   bytes=_bytes(shapes, types), collective=collective_kind(name)))
            continue
        counted = gemm_flops(name, shapes)
        if counted is not None:
            flops, shape = counted
            events.append(GpuEvent(name, "kernel", 0, 0.0, 0.0, "gemm", flops=flops,
                                   shape=shape))
        elif name.startswith(("aten::", "triton")):
            events.append(GpuEvent(name, "kernel", 0, 0.0, 0.0, "elementwise",
                                   bytes=_bytes(shapes, types)))
    if not events:
        raise TraceError(str(path), "nodes", "the execution trace holds no leaf operators")
    return TraceRank(str(path), rank, f"execution trace schema {schema}", events, None, 0,
                     bytes_read=path.stat().st_size)


def is_execution_trace(path: Path) -> bool:
    """Whether a JSON file is an execution trace (it has a top-level ``schema`` and ``nodes``)."""
    try:
        return next(iter(json_items(path, "schema")), None) is not None
    except TraceError:
        return False
