"""Chakra execution traces by hand: nodes read in id order whatever the file's order, each node
type and collective as ghsim replays it, and an export that chains its nodes and names its
collectives as ASTRA-sim runs them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ghsim.importers.chakra import (
    COLLECTIVES,
    NODE_TYPES,
    GlobalMetadata,
    Node,
    _write,
    chakra_rank,
    read_chakra,
    write_chakra,
)
from ghsim.importers.kineto import GpuEvent, TraceRank


def _node(node_id: int, name: str, kind: str, dur: int, **attrs: Any) -> Any:
    node = Node(id=node_id, name=name, type=NODE_TYPES.index(kind), duration_micros=dur)
    for key, value in attrs.items():
        node.attr.add(name=key, int64_val=value)
    return node


def _trace(path: Path, nodes: list[Any]) -> Path:
    with path.open("wb") as handle:
        _write(handle, GlobalMetadata(version="0.0.4"))
        for node in nodes:
            _write(handle, node)
    return path


def test_nodes_replay_in_id_order_each_as_its_type(tmp_path: Path) -> None:
    """Written out of order: a 40 us reduce-scatter of 1 MiB (id 2), a 10 us matrix multiply
    of 2 GFLOP (id 0), a 5 us send (id 1) and a memory node ghsim does not replay (id 3)."""
    path = _trace(tmp_path / "rank.0.et", [
        _node(2, "rs", "COMM_COLL_NODE", 40, comm_type=COLLECTIVES.index("REDUCE_SCATTER"),
              comm_size=2**20),
        _node(3, "load", "MEM_LOAD_NODE", 7),
        _node(0, "gemm", "COMP_NODE", 10, num_ops=2 * 10**9),
        _node(1, "send", "COMM_SEND_NODE", 5, comm_size=4096),
    ])
    events = chakra_rank(path).events
    assert [(e.name, e.klass, e.stream, e.start_us, e.dur_us) for e in events] == [
        ("gemm", "gemm", 0, 0.0, 10.0), ("send", "collective", 1, 10.0, 5.0),
        ("rs", "collective", 0, 15.0, 40.0)]
    assert [(e.flops, e.bytes, e.collective) for e in events] == [
        (2e9, 0.0, None), (0.0, 4096.0, "send_recv"), (0.0, 2.0**20, "reduce_scatter")]


def test_an_export_chains_its_nodes_in_order(tmp_path: Path) -> None:
    """ASTRA-sim runs a node once its dependencies are done: an exported rank's nodes each
    depend on the one before, so they run in the order they ran in ghsim."""
    rank = TraceRank("stage0", 0, "", [
        GpuEvent("gemm", "kernel", 0, 0.0, 12.4, "gemm", flops=1e9),
        GpuEvent("ar", "kernel", 0, 12.4, 30.0, "collective", bytes=2.0**20,
                 collective="all_reduce"),
        GpuEvent("send", "kernel", 1, 42.4, 3.0, "collective", bytes=64.0,
                 collective="send_recv"),
        GpuEvent("rs", "kernel", 0, 45.4, 8.0, "collective", bytes=2.0**20,
                 collective="reduce_scatter"),
    ], None, 0)
    path = tmp_path / "stage0.et"
    write_chakra(path, rank)
    _, nodes = read_chakra(path)
    assert [n["ctrl_deps"] for n in nodes] == [[], [0], [1], [2]]
    assert [n["type"] for n in nodes] == ["COMP_NODE", "COMM_COLL_NODE", "COMM_SEND_NODE",
                                          "COMM_COLL_NODE"]
    assert [n["dur_us"] for n in nodes] == [12, 30, 3, 8]
    assert nodes[1]["attr"] == {"comm_type": COLLECTIVES.index("ALL_REDUCE"),
                                "comm_size": 2**20, "is_cpu_op": False}
    # ASTRA-sim issues REDUCE_SCATTER and stops on REDUCE_SCATTER_BLOCK
    assert nodes[3]["attr"]["comm_type"] == COLLECTIVES.index("REDUCE_SCATTER")
