"""Joining a PyTorch execution trace with the profiler trace of the same rank.

The profiler trace gives the timing; the execution trace gives every operator's input shapes,
also when the profile was taken without ``record_shapes``. A GEMM kernel whose launching
operator carried no shapes takes them from the execution trace: the k-th launch by operator X in
the profile is the k-th X node of the execution trace (both record operators in program order).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from ghsim.importers.classify import gemm_flops
from ghsim.importers.kineto import TraceRank, json_items
from ghsim.importers.pytorch_et import node_fields


def _shapes_by_operator(path: Path) -> dict[str, list[list[Any]]]:
    shapes: dict[str, list[list[Any]]] = defaultdict(list)
    raws = json_items(path, "nodes.item")
    nodes = sorted((node_fields(raw, str(path), index) for index, raw in enumerate(raws)),
                   key=lambda node: node[0])
    for _, name, _, dims, _ in nodes:
        shapes[name].append(dims)
    return shapes


def join_execution_trace(rank: TraceRank, execution_trace: Path) -> int:
    """Fill in GEMM shapes of ``rank`` from ``execution_trace``; returns how many were filled."""
    shapes = _shapes_by_operator(execution_trace)
    seen: dict[str, int] = defaultdict(int)
    calls: dict[tuple[str, float | None], int] = {}
    filled = 0
    for event in rank.events:
        if event.op_name is None:
            continue
        call = (event.op_name, event.op_start)
        if call not in calls:  # one operator call may launch several kernels
            calls[call] = seen[event.op_name]
            seen[event.op_name] += 1
        index = calls[call]
        if event.klass != "gemm" or event.flops or index >= len(shapes.get(event.op_name, [])):
            continue
        counted = gemm_flops(event.op_name, shapes[event.op_name][index])
        if counted is not None:
            event.flops, event.shape = counted
            filled += 1
    return filled
