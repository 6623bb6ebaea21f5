"""The fabric: max-min sharing, collectives laid on routes, copies per link, conservation.

Hand-computed cases use the shipped parts' physical capacities and measured efficiencies:
NVLink4 is 18 x 25 GB/s per direction with NCCL at 370 GB/s (0.822); an NDR400 NIC is 50 GB/s
with NCCL at 47 GB/s (0.94) (FACTS.md T1#24, T2#16, T2#18).
"""

from __future__ import annotations

import math

import pytest
import simpy

from ghsim.config import load_scenario
from ghsim.engine.fluid import FlowNetwork
from ghsim.engine.simulate import simulate
from ghsim.fabric.sharing import make_path, makespan_s, max_min_rates
from ghsim.fabric.traffic import traffic_planner
from ghsim.workload.lower import lower
from ghsim.workload.summary import wire_bytes

GB = 1e9
SCENARIO = "configs/scenarios/gpt3-175b-mlperf-h100-10752.yaml"
NVLINK4 = 450 * GB
NCCL_NVLINK = 370 * GB
NIC = 50 * GB
NCCL_NIC = 47 * GB
NCCL_ALLTOALL_NVLINK = 0.7258 * 450 * GB
"""NCCL's all-to-all on NVLink4: 326.6 GB/s, from NVIDIA's EP 8 timing (docs/hardware-facts.md
T4#20)."""


# -- sharing ----------------------------------------------------------------------------------

def test_two_equal_flows_on_one_link_take_twice_as_long_as_one() -> None:
    path = make_path([("l", 1, 1.0)])
    one = makespan_s([(path, 1e9)], {"l": 1e9})
    two = makespan_s([(path, 1e9), (path, 1e9)], {"l": 1e9})
    assert one == pytest.approx(1.0)
    assert two == pytest.approx(2.0)


def test_copies_and_efficiency_take_their_share() -> None:
    eight = make_path([("uplink", 8, 1.0)])
    one = make_path([("uplink", 1, 0.5)])
    rates = max_min_rates([eight, one], {"uplink": 100.0})
    # equal rates r: 8 r + r / 0.5 = 100
    assert rates == pytest.approx([10.0, 10.0])


def test_a_flow_limited_elsewhere_leaves_the_rest_to_the_others() -> None:
    narrow = make_path([("shared", 1, 1.0), ("thin", 1, 1.0)])
    wide = make_path([("shared", 1, 1.0)])
    rates = max_min_rates([narrow, wide], {"shared": 10.0, "thin": 2.0})
    assert rates == pytest.approx([2.0, 8.0])


def test_a_cap_bounds_a_flow() -> None:
    capped = make_path([("l", 1, 1.0)], cap_bytes_per_s=1.0)
    free = make_path([("l", 1, 1.0)])
    assert max_min_rates([capped, free], {"l": 10.0}) == pytest.approx([1.0, 9.0])


def test_network_rebalances_when_a_flow_ends() -> None:
    env = simpy.Environment()
    network = FlowNetwork(env, {"l": 1.0}, {"l": "nic"})
    ends: dict[str, float] = {}
    for name, nbytes in (("short", 1.0), ("long", 3.0)):
        network.transfer(make_path([("l", 1, 1.0)]), nbytes, name, "dp").callbacks.append(
            lambda _e, n=name: ends.__setitem__(n, env.now))
    env.run()
    network.finish()
    # both at 0.5 until the short one ends at 2 s; then the long one alone: 2 bytes left at 1
    assert ends == pytest.approx({"short": 2.0, "long": 4.0})
    usage = network.usage["l"]
    assert usage.bytes == pytest.approx(4.0)
    assert usage.load_s * usage.capacity_bytes_per_s == pytest.approx(4.0)


# -- collectives on routes --------------------------------------------------------------------

def _plan(overrides: list[str], group: str, collective: str = "all_reduce"):  # type: ignore[no-untyped-def]
    scenario = load_scenario(SCENARIO, overrides)
    planner = traffic_planner(scenario.spec.system, scenario.layout)
    rank_class = lower(scenario).classes[0]
    g = rank_class.groups[group]
    return planner, planner.collective(rank_class, g, collective), g


SMALL_DGX = ["model.layers=8", "training.global_batch=64", "parallelism.vp=1",
             "parallelism.pp=1", "parallelism.cp=1", "training.precision=bf16"]


def test_ring_all_reduce_of_eight_gpus_is_the_textbook_time() -> None:
    """Without NVLink SHARP an 8-GPU ring sends 2 (n-1)/n S on each GPU's NVLink at NCCL's
    370 GB/s (one flow to the next GPU through the switch)."""
    planner, plan, group = _plan(
        [*SMALL_DGX, "num_gpus=8", "parallelism.tp=8",
         "system.node.gpu.gpu.nvlink.nvls_allreduce_efficiency=null"], "tp")
    assert plan.algorithm == "ring" and group.size == 8
    message = 256e6
    wire = wire_bytes("all_reduce", message, 8)
    assert wire == pytest.approx(2 * 7 / 8 * message)
    seconds = makespan_s(plan.flows(wire), planner.capacity)
    assert seconds == pytest.approx(wire / NCCL_NVLINK, rel=1e-3)


def test_two_node_all_reduce_matches_its_hierarchical_closed_form() -> None:
    """16 GPUs on 2 DGX H100: each of the 8 channels leaves the node once, by its own NIC, so a
    GPU sends W/8 through its NIC and 7W/8 over NVLink: max(W/8 / 47, 7W/8 / 370) GB/s."""
    planner, plan, group = _plan(
        [*SMALL_DGX, "num_gpus=16", "parallelism.tp=16"], "tp")
    assert group.size == 16 and group.nodes == 2
    wire = wire_bytes("all_reduce", 1e9, 16)
    expected = max(wire / 8 / NCCL_NIC, 7 * wire / 8 / NCCL_NVLINK)
    assert makespan_s(plan.flows(wire), planner.capacity) == pytest.approx(expected, rel=1e-3)
    # the busbw is eight NICs' worth, not one (the bug of the NIC-sharing formula)
    assert wire / expected == pytest.approx(8 * NCCL_NIC, rel=1e-3)


def test_data_parallel_groups_with_one_gpu_per_node_get_one_nic_each() -> None:
    """tp 8 fills each node, so a DP group has one GPU per node; the node's eight GPUs are in
    eight DP groups that leave by eight NICs at once: one NIC each, never all eight."""
    planner, plan, group = _plan([*SMALL_DGX, "num_gpus=32", "parallelism.tp=8"], "dp")
    assert group.size == 4 and group.nodes == 4
    wire = wire_bytes("all_reduce", 1e9, 4)
    assert makespan_s(plan.flows(wire), planner.capacity) == pytest.approx(
        wire / NCCL_NIC, rel=1e-3)


def test_no_flow_runs_faster_than_the_slowest_link_of_its_route() -> None:
    planner, plan, _ = _plan([*SMALL_DGX, "num_gpus=32", "parallelism.tp=4"], "dp")
    for share in plan.shares:
        fastest = share.path.standalone_bytes_per_s(planner.capacity)
        assert fastest <= min(planner.capacity[link] for link in share.path.links)


def _uplinks(overrides: list[str]) -> tuple[float, list[tuple[str, float]]]:
    planner, plan, _ = _plan([*SMALL_DGX, "num_gpus=128", "parallelism.tp=8",
                              "system.fabric.topology=fat_tree",
                              "system.fabric.nodes_per_unit=null",
                              "system.fabric.switch_radix=8", *overrides], "dp")
    uplinks = [(link, copies) for share in plan.shares
               for link, copies in zip(share.path.links, share.path.copies, strict=True)
               if planner.kinds[link] == "leaf_uplink"]
    wire = wire_bytes("all_reduce", 1e9, 16)
    return makespan_s(plan.flows(wire), planner.capacity) * NCCL_NIC / wire, uplinks


def test_a_leaf_uplink_carries_every_member_below_the_leaf() -> None:
    """Radix-8 leaves, non-blocking: 4 NIC ports and 4 uplinks each, so a DGX node's 8 NICs
    span two leaves. Each GPU's DP peer is the same GPU of the next node, under another leaf:
    all 4 ranks of the leaf cross its uplinks (4 x 50 GB/s), which just carry them."""
    slowdown, uplinks = _uplinks(["system.fabric.oversubscription=1"])
    assert uplinks and all(copies == 4 for _, copies in uplinks)
    assert slowdown == pytest.approx(1.0, rel=1e-3)


def test_an_oversubscribed_leaf_slows_the_ring_by_its_ratio() -> None:
    """At 4:1 a radix-8 leaf has 6 NIC ports and 2 uplinks: the 6 ranks under it leave through
    2 x 50 GB/s at NCCL's 0.94, 15.7 GB/s each, where a NIC alone gives NCCL 47: 3x slower."""
    slowdown, uplinks = _uplinks(["system.fabric.oversubscription=4"])
    assert uplinks and max(copies for _, copies in uplinks) == 6
    assert slowdown == pytest.approx(47 / (2 * 50 * 0.94 / 6), rel=1e-3)


# -- the whole step ---------------------------------------------------------------------------

def test_bytes_on_every_link_are_the_flows_routed_over_it() -> None:
    scenario = load_scenario(SCENARIO, [*SMALL_DGX, "num_gpus=64", "parallelism.tp=4",
                                        "parallelism.pp=2"])
    result = simulate(scenario)
    network = result.timeline.network if result.timeline else None
    assert network is not None
    for name, usage in network.usage.items():
        carried = usage.load_s * usage.capacity_bytes_per_s
        assert carried == pytest.approx(usage.bytes, rel=1e-6, abs=1.0), name
        assert usage.load_s <= usage.busy_s * (1 + 1e-9) + 1e-12
    for link in result.links:
        assert 0 <= link["utilization"] <= 1
    assert math.isfinite(result.step_time_s)


def test_inspect_routes_shows_each_group_on_its_links(
        capsys: pytest.CaptureFixture[str]) -> None:
    from ghsim.cli import main

    args = ["inspect", "llama3-8b-gh200", "--routes", "--json", "--set", "system=gh200-quad",
            "--set", "num_gpus=16", "--set", "training.global_batch=16",
            "--set", "parallelism.tp=2"]
    assert main(args) == 0
    import json

    view = json.loads(capsys.readouterr().out)["routes"]
    dp = view["classes"][0]["groups"]["dp"]
    assert dp["algorithm"] == "ring" and dp["size"] == 8
    kinds = [link["kind"] for share in dp["shares"] for link in share["links"]]
    # GPUDirect RDMA is off on GH200: the network traffic crosses C2C and Grace's memory
    assert {"c2c_d2h", "nic", "host_memory"} <= set(kinds)
    assert sum(share["fraction"] for share in dp["shares"]) == pytest.approx(1.0)
    nic = next(link for share in dp["shares"] for link in share["links"]
               if link["kind"] == "nic")
    assert nic["efficiency"] == pytest.approx(0.96 * 0.829, rel=1e-3)


def test_all_to_all_inside_a_node_runs_at_nccls_measured_all_to_all_rate() -> None:
    """8 GPUs of one DGX H100: each sends W = 7/8 S over its NVLink at the all-to-all's own
    measured 326.6 GB/s, not the ring's 370; an override of that efficiency moves it."""
    planner, plan, _ = _plan([*SMALL_DGX, "num_gpus=8", "parallelism.tp=8"], "tp", "all_to_all")
    wire = wire_bytes("all_to_all", 1e9, 8)
    assert wire == pytest.approx(7 / 8 * 1e9)
    assert makespan_s(plan.flows(wire), planner.capacity) == pytest.approx(
        wire / NCCL_ALLTOALL_NVLINK, rel=1e-3)
    planner, plan, _ = _plan([*SMALL_DGX, "num_gpus=8", "parallelism.tp=8",
                              "system.node.gpu.gpu.nvlink.alltoall_efficiency=0.5"],
                             "tp", "all_to_all")
    assert makespan_s(plan.flows(wire), planner.capacity) == pytest.approx(
        wire / (0.5 * NVLINK4), rel=1e-3)


def test_deepeps_nvlink_part_keeps_the_rings_rate() -> None:
    """DeepEP's NVLink kernels are not NCCL's all-to-all: with a deduplicating dispatch (one
    token once to each rank it is routed to) the NVLink share runs at the ring's 370 GB/s."""
    scenario = load_scenario(SCENARIO, [*SMALL_DGX, "num_gpus=8", "parallelism.tp=8"])
    planner = traffic_planner(scenario.spec.system, scenario.layout)
    rank_class = lower(scenario).classes[0]
    # top-1 of one group: every copy goes to its rank, so the share sent is the plain one
    plan = planner.collective(rank_class, rank_class.groups["tp"], "all_to_all",
                              dedup=(1, 1, 1, False))
    wire = wire_bytes("all_to_all", 1e9, 8)
    assert makespan_s(plan.flows(wire), planner.capacity) == pytest.approx(
        wire / NCCL_NVLINK, rel=1e-3)


def test_all_to_all_across_two_nodes_sends_the_remote_share_through_the_nic() -> None:
    """16 GPUs on 2 DGX H100: of W = 15/16 S each GPU sends 8/15 to the other node (its own NIC)
    and 7/15 over NVLink: max(8/15 W / 47, 7/15 W / 326.6) GB/s."""
    planner, plan, _ = _plan(
        [*SMALL_DGX, "num_gpus=16", "parallelism.tp=16"], "tp", "all_to_all")
    assert plan.algorithm == "all_to_all"
    wire = wire_bytes("all_to_all", 1e9, 16)
    expected = max(8 / 15 * wire / NCCL_NIC, 7 / 15 * wire / NCCL_ALLTOALL_NVLINK)
    assert makespan_s(plan.flows(wire), planner.capacity) == pytest.approx(expected, rel=1e-3)


def test_inspect_routes_covers_every_stage_of_a_pipeline(
        capsys: pytest.CaptureFixture[str]) -> None:
    from ghsim.cli import main

    assert main(["inspect", "llama3-70b-gh200-nvl32", "--routes", "--json"]) == 0
    import json

    classes = json.loads(capsys.readouterr().out)["routes"]["classes"]
    assert len(classes) == 4
    assert "embedding" in classes[0]["groups"] and "embedding" not in classes[1]["groups"]
    assert "pp_send" in classes[0]["groups"] and "pp_send" not in classes[-1]["groups"]
