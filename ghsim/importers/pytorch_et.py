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

from ghsim.importers.checks import Fields, TraceError, check_count
from ghsim.importers.classify import collective_kind, dtype_bytes, gemm_flops
from ghsim.importers.kineto import GpuEvent, TraceRank, json_items
from ghsim.limits import MAX_TRACE_EVENTS


def node_fields(raw: dict[str, Any], source: str = "execution trace", index: int = 0
                ) -> tuple[int, str, int | None, list[Any], list[Any]]:
    """id, name, parent, input shapes, input types of a node in either layout; a node with an
    id that is not an integer, or fields of the wrong type, is a :class:`TraceError` naming
    ``nodes[index]``."""
    fields = Fields(source, f"nodes[{index}]")
    if not isinstance(raw, dict):
        raise fields.fail("", "a node object", raw)
    if "id" not in raw:
        raise fields.fail("id", "an integer id", None)
    node_id = fields.integer(raw["id"], "id", -1)
    name = fields.text(raw.get("name"), "name")
    inputs = raw.get("inputs")
    if isinstance(inputs, dict):  # 1.0.2+ layout
        shapes, types = inputs.get("shapes") or [], inputs.get("types") or []
        where = "inputs."
    else:
        shapes, types = raw.get("input_shapes") or [], raw.get("input_types") or []
        where = "input_"
    if not isinstance(shapes, list):
        raise fields.fail(f"{where}shapes", "a list of shapes", shapes)
    if not isinstance(types, list):
        raise fields.fail(f"{where}types", "a list of types", types)
    key = "parent" if "parent" in raw else "ctrl_deps"
    parent = raw.get(key)
    if isinstance(parent, list):
        parent = parent[0] if parent else None
    if parent is not None:
        parent = fields.integer(parent, key, -1)
    return node_id, name, parent, shapes, types


def _bytes(shapes: list[Any], types: list[Any]) -> float:
    """Bytes of an operator's tensors, at the element size each one's type names (4 where it
    names none, as ``Tensor(a)`` does)."""
    total = 0.0
    for shape, kind in zip(shapes, types, strict=False):
        if isinstance(shape, list) and shape and all(
                isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= 2**40
                for d in shape):
            size = dtype_bytes(kind) or 4
            count = 1
            for dim in shape:
                count = min(count * dim, 2**60)  # a corrupt shape stays a finite number
            total += count * size
    return total


def read_pytorch_et(path: Path, rank: int = 0) -> TraceRank:
    """One rank's execution trace as a replayable rank of its leaf operators."""
    nodes = []
    schema = next(iter(json_items(path, "schema")), None)
    if schema is None:
        raise TraceError(str(path), "schema",
                         "expected a PyTorch execution trace: a JSON object with schema and nodes")
    for index, raw in enumerate(json_items(path, "nodes.item")):
        nodes.append(node_fields(raw, str(path), index))
        if len(nodes) > MAX_TRACE_EVENTS:
            check_count(len(nodes), str(path), "nodes")
    if not nodes:
        raise TraceError(str(path), "nodes", "the execution trace holds no nodes")
    parents = {parent for _, _, parent, _, _ in nodes if parent is not None}
    events = []
    for node_id, name, _, shapes, types in sorted(nodes, key=lambda node: node[0]):
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
