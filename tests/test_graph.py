"""The hardware graph: components, routes, bottlenecks, fabric sizing and totals."""

from __future__ import annotations

import pytest

from ghsim import units
from ghsim.config import load_system
from ghsim.config.schema import FabricSpec
from ghsim.errors import InputError, LayoutError
from ghsim.hardware import Endpoint, build_graph, size_fat_tree, system_totals


def test_gh200_superchip_subgraph() -> None:
    graph = build_graph(load_system("gh200-single"), 1)
    kinds = {n: d["kind"] for n, d in graph.template.nodes(data=True)}
    assert kinds == {"cpu0": "cpu", "lpddr0": "memory", "gpu0": "gpu", "hbm0": "memory",
                     "nic0": "nic"}
    c2c = graph.template.get_edge_data("cpu0", "gpu0")["c2c"]
    assert c2c["bandwidth_bytes_per_s"] == 450 * units.GB_S
    # The measured H2D/D2H asymmetry rides on the two directions of the link.
    # Efficiencies of the link's 450 GB/s, rounded to 4 digits: within 0.1% of the measurements.
    assert c2c["measured_bytes_per_s"]["copy"] == pytest.approx(375 * units.GB_S, rel=1e-3)
    back = graph.template.get_edge_data("gpu0", "cpu0")["c2c"]
    assert back["measured_bytes_per_s"]["copy"] == pytest.approx(297 * units.GB_S, rel=1e-3)


def test_gpu_reads_lpddr_over_c2c_with_the_measured_latency() -> None:
    graph = build_graph(load_system("gh200-single"), 1)
    gpu = graph.gpu(0)
    lpddr = graph.memory_of(graph.host_cpu(gpu))
    route = graph.route(lpddr, gpu)
    assert str(route) == "n0.lpddr0 -> n0.cpu0 -> n0.gpu0"
    assert route.bottleneck_bytes_per_s == 450 * units.GB_S
    assert route.latency_s == pytest.approx(818e-9)  # FACTS.md T2#8, Hopper -> LPDDR


def test_dgx_h100_routes() -> None:
    graph = build_graph(load_system("dgx-h100"), 16)
    inside = graph.route(graph.gpu(0), graph.gpu(7))
    assert [h.kind for h in inside.hops] == ["nvlink", "nvlink"]
    assert inside.bottleneck_bytes_per_s == 450 * units.GB_S
    across = graph.route(graph.gpu(3), graph.gpu(11))  # same rail, same leaf
    assert str(across) == "n0.gpu3 -> n0.nic3 -> leaf3 -> n1.nic3 -> n1.gpu3"
    assert across.bottleneck_bytes_per_s == 50 * units.GB_S
    cross_rail = graph.route(graph.gpu(3), graph.gpu(13))
    assert "spine" in str(cross_rail)
    host = graph.route(graph.memory_of(graph.host_cpu(graph.gpu(5))), graph.gpu(5))
    assert [h.kind for h in host.hops] == ["memory", "pcie"]
    assert host.bottleneck_bytes_per_s == 64 * units.GB_S


def test_pcie_gpu_is_never_a_transit_hop() -> None:
    graph = build_graph(load_system("dgx-h100"), 8)
    with pytest.raises(ValueError, match="no route"):
        graph.route(graph.gpu(0), Endpoint(0, "ddr1"))


def test_quad_peer_memory_goes_over_nvlink_then_c2c() -> None:
    graph = build_graph(load_system("gh200-quad"), 4)
    route = graph.route(graph.gpu(0), Endpoint(0, "lpddr1"))
    assert [h.kind for h in route.hops] == ["nvlink", "c2c", "memory"]
    assert route.bottleneck_bytes_per_s == 150 * units.GB_S  # FACTS.md T2#6 peer bound


def test_nvl32_domain_spans_nodes() -> None:
    graph = build_graph(load_system("gh200-nvl32"), 64)
    same_domain = graph.route(graph.gpu(0), graph.gpu(31))
    assert str(same_domain) == "n0.gpu0 -> d0.nvswitch -> n15.gpu1"
    other_domain = graph.route(graph.gpu(0), graph.gpu(32))
    assert any(h.kind == "ib" for h in other_domain.hops)
    assert other_domain.hops[0].kind == "c2c"  # the NIC is reached through Grace


def test_fat_tree_matches_the_superpod_table() -> None:
    # DGX SuperPOD RA-11333-001: 1 SU = 8 leaf + 4 spine, 4 SUs = 32 leaf + 16 spine.
    fabric = load_system("dgx-h100").fabric
    assert fabric is not None
    assert size_fat_tree(fabric, 32, 8).switches_per_tier == (8, 4)
    assert size_fat_tree(fabric, 128, 8).switches_per_tier == (32, 16)
    big = size_fat_tree(fabric, 2048, 8)
    assert big.tiers == 3
    assert big.switch_hops(big.endpoint(0, 0), big.endpoint(2047, 7)) == 5


def test_oversubscribed_fat_tree_by_hand() -> None:
    # radix 64 at 3:1: a leaf has 48 down-ports and 16 uplinks; the tiers above are full
    fabric = FabricSpec(topology="fat_tree", switch_radix=64, oversubscription=3.0,
                        hop_latency_ns=300)
    small = size_fat_tree(fabric, 64, 4)  # 256 NICs: 6 leaves, their 96 uplinks on 2 spines
    assert (small.down, small.up, small.tiers, small.switches_per_tier) == (48, 16, 2, (6, 2))
    # the worst cut's 128 NICs a side send through a third of their ports' bandwidth
    assert small.bisection_bytes_per_s(1.0) == pytest.approx(256 / 2 / 3)
    # 4,096 NICs outgrow two tiers (48 x 64 = 3,072): 86 leaves, 1,376 uplinks on 43 middle
    # switches of 32 down-ports each, whose 1,376 uplinks fill 22 top switches of 64 ports
    big = size_fat_tree(fabric, 1024, 4)
    assert (big.tiers, big.switches_per_tier) == (3, (86, 43, 22))
    assert big.block_size(2) == 48 * 32
    full = size_fat_tree(FabricSpec(topology="fat_tree", switch_radix=64, hop_latency_ns=300),
                         64, 4)
    assert (full.down, full.up, full.bisection_bytes_per_s(1.0)) == (32, 32, 128.0)


def test_totals() -> None:
    dgx_gh200 = system_totals(build_graph(load_system("dgx-gh200"), 256))
    # FACTS.md T1#28: 144 TB of memory addressable (256 x (96 + 480) GB, binary).
    memory = dgx_gh200.memory_bytes["hbm"] + dgx_gh200.memory_bytes["lpddr"]
    assert memory == 256 * (96 + 480) * units.GIB
    assert dgx_gh200.domain_bisection_bytes_per_s == 128 * 450 * units.GB_S
    assert dgx_gh200.fabric_bisection_bytes_per_s is None
    h100 = system_totals(build_graph(load_system("dgx-h100"), 1024))
    assert h100.peak_flops["bf16"] == pytest.approx(1024 * 989.4e12, rel=1e-3)
    assert h100.fabric_bisection_bytes_per_s == 1024 * 50 * units.GB_S / 2


def test_totals_by_hand_direct_links_and_part_of_a_node() -> None:
    """A quad GH200 node's GPUs are linked pairwise by 6 NVLink4 links (150 GB/s a peer): a cut
    into two pairs crosses 2 x 2 peer links, 600 GB/s. Half a DGX H100 counts the HBM of its
    4 GPUs only, and its switch domain's bisection is 2 GPUs' 450 GB/s."""
    quad = system_totals(build_graph(load_system("gh200-quad"), 4))
    assert quad.nvlink_bytes_per_s_per_gpu == 3 * 150 * units.GB_S
    assert quad.domain_bisection_bytes_per_s == 2 * 2 * 150 * units.GB_S
    assert quad.memory_bytes == {"hbm": 4 * 96 * units.GIB, "lpddr": 4 * 120 * units.GIB}
    assert quad.cpu_cores == 4 * 72
    assert system_totals(build_graph(load_system("gh200-quad"), 8)).cpu_cores == 2 * 4 * 72
    half = system_totals(build_graph(load_system("dgx-h100"), 4))
    assert half.memory_bytes["hbm"] == 4 * 80 * units.GIB
    assert half.domain_bisection_bytes_per_s == 2 * 450 * units.GB_S


def test_partial_node_and_bad_sizes() -> None:
    graph = build_graph(load_system("dgx-h100"), 4)
    assert graph.num_nodes == 1 and graph.gpus_per_node == 4
    with pytest.raises(LayoutError, match="whole nodes"):
        build_graph(load_system("dgx-h100"), 12)
    with pytest.raises(LayoutError, match="divisor or a multiple"):
        build_graph(load_system("dgx-h100"), 3)
    with pytest.raises(IndexError):
        graph.gpu(4)


def test_gpus_left_without_a_path_to_each_other_are_refused_at_load() -> None:
    """A DGX H100 without its NVSwitches: GPUs 3 and 4 sit on different CPUs that the file
    joins by no cpu_link, so no route exists (a tensor-parallel group over them had stopped in
    a ValueError traceback). The node is refused where the override is given; a quad GH200,
    whose Graces are linked, routes over them instead."""
    with pytest.raises(InputError, match="no path to each other: expected a cpu_link") as e:
        load_system("dgx-h100", ["node.nvlink.topology=none"])
    assert e.value.source == "--set node.nvlink.topology=none"
    graph = build_graph(load_system("gh200-quad", ["node.nvlink.topology=none"]), 4)
    assert [hop.kind for hop in graph.route(graph.gpu(0), graph.gpu(1)).hops] == [
        "c2c", "c2c", "c2c"]


@pytest.mark.parametrize("name", ["dgx-h100", "gh200-single", "dgx-gh200", "gh200-quad"])
def test_building_is_independent_of_scale(name: str) -> None:
    small = build_graph(load_system(name), load_system(name).gpus_per_domain)
    large = build_graph(load_system(name), 16384)
    assert small.template.number_of_nodes() == large.template.number_of_nodes()
    last = large.route(large.gpu(0), large.gpu(16383))
    assert last.bottleneck_bytes_per_s > 0
