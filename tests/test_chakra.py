"""Chakra execution traces by hand: nodes read in id order whatever the file's order, each node
type and collective as ghsim replays it, an export that chains its nodes and names its
collectives as ASTRA-sim runs them, and the export of one file per NPU: each collective's group,
each pipeline transfer's peer and tag, each node's dependencies."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ghsim.cli import main
from ghsim.config import load_scenario
from ghsim.engine.simulate import simulate
from ghsim.importers.chakra import (
    COLLECTIVES,
    NODE_TYPES,
    GlobalMetadata,
    Node,
    _write,
    attribute_bytes,
    chakra_rank,
    read_chakra,
    write_chakra,
)
from ghsim.importers.kineto import GpuEvent, TraceRank
from ghsim.limits import MAX_CHAKRA_NPUS
from ghsim.report import chakra as chakra_report
from ghsim.report.chakra import export_npus

from .chakra_replay import Replay
from .conftest import ROOT


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


# -- one file per NPU, as ASTRA-sim reads them --------------------------------------------------

PIPELINED = ["num_gpus=8", "parallelism.tp=2", "parallelism.pp=2", "parallelism.vp=2",
             "model.layers=8", "model.tied_embeddings=true", "training.global_batch=16"]
"""llama3-8b-gh200 on 8 GPUs: tp 2 x dp 2 per stage, two stages of two chunks each, the tied
embeddings' gradients all-reduced between the first and the last stage."""


Npus = tuple[dict[str, list[int]], dict[int, list[dict[str, Any]]]]


@pytest.fixture(scope="module")
def npus(tmp_path_factory: pytest.TempPathFactory) -> Npus:
    """The groups and each NPU's nodes of PIPELINED, exported once through the command line."""
    tmp_path = tmp_path_factory.mktemp("npus")
    assert main(["run", "llama3-8b-gh200", *(a for o in PIPELINED for a in ("--set", o)),
                 "--chakra", str(tmp_path), "--chakra-npus", "--json"]) == 0
    groups = json.loads((tmp_path / "comm_groups.json").read_text())
    files = sorted(tmp_path.glob("workload.*.et"))
    assert [f.name for f in files] == sorted(f"workload.{r}.et" for r in range(8))
    return groups, {r: read_chakra(tmp_path / f"workload.{r}.et")[1] for r in range(8)}


def test_each_npu_s_collectives_name_its_own_groups(npus: Npus) -> None:
    """Megatron's rank order (tp fastest, then dp, then pp): the tensor-parallel groups are
    NPUs {0, 1} ... {6, 7}; the data-parallel groups of stage 0 are {0, 2} and {1, 3}, of stage
    1 {4, 6} and {5, 7}; the embedding pairs the first stage's NPU with the last stage's at the
    same place, {0, 4} ... {3, 7}."""
    groups, nodes = npus
    assert sorted(map(tuple, groups.values())) == [
        (0, 1), (0, 2), (0, 4), (1, 3), (1, 5), (2, 3), (2, 6), (3, 7), (4, 5), (4, 6),
        (5, 7), (6, 7)]
    assert sorted(groups, key=int) == [str(i) for i in range(1, 13)]  # 0 means every NPU
    for rank, listed in nodes.items():
        named = {tuple(groups[n["attr"]["pg_name"]]) for n in listed
                 if n["type"] == "COMM_COLL_NODE"}
        tp = (rank - rank % 2, rank - rank % 2 + 1)
        dp = (rank - rank // 2 % 2 * 2, rank - rank // 2 % 2 * 2 + 2)
        assert named == {tp, dp, (rank % 4, rank % 4 + 4)}, rank


def test_every_pipeline_send_meets_one_receive_on_its_peer(npus: Npus) -> None:
    """Each stage sends three transfers a micro-batch (stage 0: activations from virtual
    stages 0 and 2, gradients from 2; stage 1: activations from 1, gradients from 1 and 3), 8
    micro-batches: 24, each to the NPU at its place on the other stage (4 apart), which posts a
    receive with the same tag and size."""
    _, nodes = npus
    sends: list[tuple[int, ...]] = []
    receives: list[tuple[int, ...]] = []
    for rank, listed in nodes.items():
        for node in listed:
            attr = node["attr"]
            end = (attr.get("comm_src"), attr.get("comm_dst"), attr.get("comm_tag"),
                   attr.get("comm_size"))
            if node["type"] == "COMM_SEND_NODE":
                assert end[0] == rank and end[1] == (rank + 4) % 8
                sends.append(end)
            elif node["type"] == "COMM_RECV_NODE":
                assert end[1] == rank and end[0] == (rank + 4) % 8
                receives.append(end)
        assert sum(n["type"] == "COMM_SEND_NODE" for n in listed) == 24
    assert len(set(sends)) == len(sends) == 8 * 24
    assert sorted(sends) == sorted(receives)


def test_npu_nodes_keep_their_dependencies_and_simulated_durations(npus: Npus) -> None:
    """Every dependency is a node of the same file (ASTRA-sim resolves them inside one NPU's
    trace); the ops of stage 0 without inline collectives take, in microseconds, what ghsim's
    simulation gave them and keep their dependencies; a split op's first node takes the op's."""
    _, nodes = npus
    for listed in nodes.values():
        ids = {n["id"] for n in listed}
        assert len(ids) == len(listed)
        assert all(d in ids and d != n["id"] for n in listed for d in n["data_deps"])
    result = simulate(load_scenario("llama3-8b-gh200", PIPELINED))
    assert result.timeline is not None
    stage0 = result.timeline.classes[0]
    ops = stage0.rank_class.ops
    whole = [n for n in nodes[0] if n["id"] < len(ops) and n["id"] not in stage0.segments]
    expected = {s.op: round((s.end - s.start) * 1e6) for s in stage0.spans}
    computed = [n for n in whole if n["type"] == "COMP_NODE" and not n["attr"]["is_cpu_op"]]
    assert computed and all(n["dur_us"] == expected[n["id"]] for n in computed)
    assert [n["data_deps"] for n in whole] == [list(ops[n["id"]].deps) for n in whole]
    first = {}
    for node in nodes[0]:
        first.setdefault(node["name"].split(":")[0], node)
    assert all(first[ops[i].name]["data_deps"] == list(ops[i].deps) for i in stage0.segments)
    assert [n["id"] for n in nodes[0]] == [n["id"] for n in nodes[3]]  # one class, one DAG


SPLIT = ["num_gpus=2", "parallelism.tp=2", "parallelism.sequence_parallel=true",
         "parallelism.tp_comm_overlap=true", "model.layers=2", "training.global_batch=1"]
"""llama3-8b-gh200 on one tensor-parallel pair: every layer's all-gathers and reduce-scatters
run beside their GEMMs (userbuffers)."""


def test_inline_collectives_are_nodes_of_their_own_beside_their_gemms(tmp_path: Path) -> None:
    """A compute op that runs tensor-parallel collectives becomes a chain: its kernels between
    two collectives as one compute node (their modelled seconds and FLOPs), each collective a
    node of the pair's group with the op's message size, starting and lasting as it did in
    the simulation, the GEMM overlapped with it a compute node beside it (same dependencies,
    and what follows waits for both); the last node keeps the op's id. Nothing is lost: the
    chain's collectives are the op's, in order, and its FLOPs add up to the op's."""
    result = simulate(load_scenario("llama3-8b-gh200", SPLIT))
    assert result.timeline is not None
    cls = result.timeline.classes[0]
    written = export_npus(result.timeline, tmp_path)
    assert json.loads((tmp_path / "comm_groups.json").read_text()) == {"1": [0, 1]}
    nodes = {int(p.name.split(".")[1]): read_chakra(p)[1] for p in written[:-1]}
    by_id = {n["id"]: n for n in nodes[0]}
    assert Replay(nodes, {"1": [0, 1]}).run() > 0
    assert cls.segments
    for op_id, body in cls.segments.items():
        op = cls.rank_class.ops[op_id]
        chain = [n for n in nodes[0] if n["name"].split(":")[0] == op.name]
        assert chain[-1]["id"] == op_id and chain[-1]["name"] == op.name
        comms = [n for n in chain if n["type"] == "COMM_COLL_NODE"]
        assert [(n["name"], n["attr"]["comm_size"], n["attr"]["pg_name"]) for n in comms] == [
            (f"{op.name}: {c.name}", int(c.bytes), "1") for c in op.comms()]
        ran = [(start, end) for i, _, start, end in cls.comm_spans if i == op_id]
        assert [(n["start_us"], n["dur_us"]) for n in comms] == [
            (round(start * 1e6), round((end - start) * 1e6)) for start, end in ran]
        assert all(n["dur_us"] > 0 for n in comms)
        flops = sum(n["attr"].get("num_ops", 0) for n in chain)
        assert flops == pytest.approx(sum(k.flops for k in op.kernels()), rel=1e-9)
        seconds = sum(n["dur_us"] for n in chain if n["type"] == "COMP_NODE")
        modelled = sum(s.kernel_s + s.overlap_s for s in body) * 1e6
        assert abs(seconds - modelled) <= len(chain)  # each node rounded to a microsecond
        for node in comms:
            after = [n for n in chain if node["id"] in n["data_deps"]]  # the next node(s)
            assert after and all(n["data_deps"] == after[0]["data_deps"] for n in after)
            assert len(after[0]["data_deps"]) == 2
            beside = by_id[sum(after[0]["data_deps"]) - node["id"]]
            assert beside["name"] == node["name"].replace(": ", ": beside ", 1)
            assert beside["type"] == "COMP_NODE" and beside["attr"]["num_ops"] > 0
            assert beside["data_deps"] == node["data_deps"]


@pytest.mark.parametrize(("argv", "expect"), [
    (["--chakra-npus"], "--chakra-npus: names where to write: give --chakra DIR too"),
    (["--set", "system=dgx-h100", "--set", "num_gpus=8200",
      "--set", "training.global_batch=8200", "--chakra", "X", "--chakra-npus"],
     "expected at most 8,192 NPUs (ghsim.limits.MAX_CHAKRA_NPUS), got 8,200"),
])
def test_an_npu_export_that_cannot_be_written_is_refused_first(
        argv: list[str], expect: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "llama3-8b-gh200", *argv]) == 2
    assert expect in capsys.readouterr().err


def test_an_npu_export_too_large_for_the_disk_is_refused_before_writing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Its size is known before the first file is written: with 1 kB free (PIPELINED's eight
    files take more), exit 2 naming the directory, the size and the space, nothing written."""
    real = shutil.disk_usage
    monkeypatch.setattr(chakra_report.shutil, "disk_usage",
                        lambda path: real(path)._replace(free=1000))
    out = tmp_path / "et"
    assert main(["run", "llama3-8b-gh200", *(a for o in PIPELINED for a in ("--set", o)),
                 "--chakra", str(out), "--chakra-npus"]) == 2
    err = capsys.readouterr().err
    assert f"{out}: cannot write: the export takes up to " in err
    assert "GB and 0.00 GB are free" in err
    assert not list(out.iterdir())


def test_the_size_checked_bounds_what_an_npu_export_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the space check is asked for is at least what the files take, and not much more."""
    result = simulate(load_scenario("llama3-8b-gh200", PIPELINED))
    assert result.timeline is not None
    asked: list[int] = []
    monkeypatch.setattr(chakra_report, "_check_space", lambda path, size: asked.append(size))
    written = export_npus(result.timeline, tmp_path)
    files = sum(p.stat().st_size for p in written if p.suffix == ".et")
    assert files <= asked[0] <= 1.1 * files


def test_an_npu_export_that_fails_midway_leaves_no_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk that fills at the third NPU: the two files written are removed again and the
    error goes on (the command line makes it exit 2)."""
    result = simulate(load_scenario("llama3-8b-gh200", PIPELINED))
    assert result.timeline is not None
    calls: list[Path] = []
    real = chakra_report.write_bytes

    def filling(path: Path, data: bytes) -> None:
        calls.append(path)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    monkeypatch.setattr(chakra_report, "write_bytes", filling)
    with pytest.raises(OSError, match="No space"):
        export_npus(result.timeline, tmp_path)
    assert len(calls) == 3 and not list(tmp_path.iterdir())


def test_an_imported_workload_is_not_written_per_npu(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Its ranks are the traced ones, not Megatron's grid: refused before anything is read."""
    scenario = tmp_path / "replayed.yaml"
    scenario.write_text((ROOT / "configs" / "scenarios" / "llama3-8b-gh200.yaml").read_text()
                        + "workload: nowhere.workload.yaml\n")
    assert main(["run", str(scenario), "--chakra", str(tmp_path / "et"), "--chakra-npus"]) == 2
    assert "an imported workload's ranks are written one file each" in capsys.readouterr().err
    assert not (tmp_path / "et").exists()


@pytest.mark.parametrize(("name", "value"), [
    ("comm_src", 0), ("comm_dst", 127), ("comm_tag", 128), ("comm_src", 2**40 + 3),
    ("pg_name", "7"), ("pg_name", "")])
def test_appended_attributes_encode_as_protobuf_does(name: str, value: int | str) -> None:
    """The per-NPU export appends its NPU's attributes to a shared serialized node: the bytes
    are protobuf's own for the same attribute, and the node reads back whole."""
    made = Node()
    if isinstance(value, str):
        made.attr.add(name=name, string_val=value)
    else:
        made.attr.add(name=name, int64_val=value)
    assert attribute_bytes(name, value) == made.SerializeToString()
    base = _node(5, "recv", "COMM_RECV_NODE", 3, comm_size=64)
    joined = Node.FromString(base.SerializeToString() + attribute_bytes(name, value))
    assert [a.name for a in joined.attr] == ["comm_size", name]


def test_what_an_npu_appends_fits_the_space_check_s_allowance() -> None:
    """The largest ends (the last NPU the limit allows) and the longest group id, with one more
    byte of length prefix, are within what the space check allows a node."""
    last = MAX_CHAKRA_NPUS - 1
    ends = attribute_bytes("comm_src", last) + attribute_bytes("comm_dst", last)
    assert len(ends) + 1 == chakra_report.NPU_EXTRA_BYTES
    assert len(attribute_bytes("pg_name", "9" * 8)) + 1 <= chakra_report.NPU_EXTRA_BYTES


@pytest.mark.parametrize("scenario, overrides", [
    ("llama3-8b-gh200", PIPELINED),
    ("qwen3-235b-gh200-nvl32", ["model.layers=8", "training.global_batch=64"]),
], ids=["pipelined-tied", "moe-dp-edp"])
def test_the_npu_traces_run_to_the_end_as_astra_sim_issues_them(
        scenario: str, overrides: list[str], tmp_path: Path) -> None:
    """Under ASTRA-sim's issue rules (tests/chakra_replay.py) every node of every NPU runs: no
    receive waits for a send that never comes, no group's members issue different collectives,
    no dependency cycle. A wrong peer, tag or group leaves nodes that never run."""
    result = simulate(load_scenario(scenario, overrides))
    assert result.timeline is not None
    written = export_npus(result.timeline, tmp_path)
    groups = json.loads((tmp_path / "comm_groups.json").read_text())
    nodes = {int(p.name.split(".")[1]): read_chakra(p)[1] for p in written[:-1]}
    assert Replay(nodes, groups).run() > 0
    broken = {npu: [{**n, "attr": {**n["attr"], "comm_tag": n["attr"]["comm_tag"] + 1}}
                    if npu == 0 and n["type"] == "COMM_RECV_NODE" else n for n in listed]
              for npu, listed in nodes.items()}
    if any(n["type"] == "COMM_RECV_NODE" for n in nodes[0]):
        with pytest.raises(RuntimeError, match="never ran"):
            Replay(broken, groups).run()


ASTRA_SIM = os.environ.get("GHSIM_ASTRA_SIM", "")
"""An ASTRA-sim analytical binary (``AstraSim_Analytical_Congestion_Unaware``, built from
astra-sim/astra-sim with ``build/astra_analytical/build.sh -t congestion_unaware``) to run the
export through; the test is skipped without one."""


@pytest.mark.skipif(not ASTRA_SIM, reason="GHSIM_ASTRA_SIM names no ASTRA-sim binary")
def test_astra_sim_runs_the_npu_export_to_the_end(tmp_path: Path) -> None:
    """ASTRA-sim itself reads PIPELINED's eight files and its groups and every NPU finishes,
    on a network of two quad nodes (NVLink between the four GPUs of one, a switch between
    the two; two dimensions, each with its own collective implementation, which keeps
    ASTRA-sim from freeing a shared one at exit: README). Checked with astra-sim@518bd51
    (2026-12-07): 0.48 s a step against ghsim's 0.63 on gh200-quad (ASTRA-sim's collectives,
    its one communication at a time per NPU)."""
    out = tmp_path / "et"
    assert main(["run", "llama3-8b-gh200", *(a for o in PIPELINED for a in ("--set", o)),
                 "--chakra", str(out), "--chakra-npus", "--json"]) == 0
    network = tmp_path / "network.yml"
    network.write_text("topology: [ FullyConnected, Switch ]\nnpus_count: [ 4, 2 ]\n"
                       "bandwidth: [ 150.0, 25.0 ]\nlatency: [ 1000.0, 5000.0 ]\n")
    system = tmp_path / "system.json"
    system.write_text(json.dumps({
        "scheduling-policy": "LIFO", "endpoint-delay": 10, "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4, "all-reduce-implementation": ["ring", "ring"],
        "all-gather-implementation": ["ring", "ring"],
        "reduce-scatter-implementation": ["ring", "ring"],
        "all-to-all-implementation": ["ring", "ring"], "collective-optimization": "localBWAware",
        "local-mem-bw": 1600, "boost-mode": 0, "roofline-enabled": 0, "peak-perf": 900}))
    memory = tmp_path / "memory.json"
    memory.write_text('{"memory-type": "NO_MEMORY_EXPANSION"}')
    ran = subprocess.run(
        [ASTRA_SIM, f"--workload-configuration={out}/workload",
         f"--comm-group-configuration={out}/comm_groups.json",
         f"--system-configuration={system}", f"--remote-memory-configuration={memory}",
         f"--network-configuration={network}"],
        capture_output=True, text=True, timeout=600, check=False,
        cwd=tmp_path)  # it writes log/ where it runs
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    finished = [line for line in ran.stdout.splitlines() if "] finished, " in line]
    assert sorted(int(line.split("sys[")[1].split("]")[0]) for line in finished) == list(
        range(8))
