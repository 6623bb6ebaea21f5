"""NCCL's size ramp inside an NVLink domain: a collective of a few MiB reaches about half its
large-message bus bandwidth, all of it only near a GiB (``gpu.nvlink.nccl_size_ramp``,
docs/hardware-facts.md T4#26-27, ``benchmarks/nccl_ramp.py``).

Checked against published all-reduce timings: nccl-tests on 8x H200 and 8x A100 (the tables the
ramp is read from, so ghsim must reproduce them where the ramp applies) and vLLM's NCCL timings
on H100 (not used to derive it); then what the ramp must and must not touch.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ghsim.config import load_scenario
from ghsim.engine.simulate import simulate
from ghsim.errors import InputError
from ghsim.fabric.nccl import size_ramp
from ghsim.fabric.traffic import traffic_planner
from ghsim.workload.lower import lower
from ghsim.workload.summary import wire_bytes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import nccl_ramp

MIB = 2**20
DGX_H100 = "configs/scenarios/gpt3-175b-mlperf-h100-10752.yaml"
SMALL_DGX = ["model.layers=8", "training.global_batch=64", "parallelism.vp=1",
             "parallelism.pp=1", "parallelism.cp=1", "training.precision=bf16",
             "parallelism.tp_comm_overlap=false"]


def test_the_ramp_interpolates_in_log_size_and_is_flat_beyond_its_ends() -> None:
    ramp = [[4.0, 0.5], [16.0, 0.9]]
    assert size_ramp(4 * MIB, ramp) == pytest.approx(0.5)
    assert size_ramp(8 * MIB, ramp) == pytest.approx(0.7)  # halfway in log2
    assert size_ramp(16 * MIB, ramp) == pytest.approx(0.9)
    assert size_ramp(1 * MIB, ramp) == pytest.approx(0.5)
    assert size_ramp(1024 * MIB, ramp) == pytest.approx(0.9)


@pytest.mark.parametrize("system", ["dgx-h200", "dgx-a100"])
def test_eight_gpu_all_reduce_reproduces_the_nccl_tests_it_was_read_from(system: str) -> None:
    """From 4 MiB up (below, NCCL runs LL or nccl-tests' per-operation floor of 30-45 us sets
    the time) ghsim's 8-GPU all-reduce is the measured one within 1.5 %; without the ramp it
    is 24-34 % fast at 8-32 MiB."""
    for mib, measured, with_ramp, without in nccl_ramp.rows(system):
        if mib >= 4:
            assert with_ramp == pytest.approx(measured, rel=0.015), (system, mib)
        if 8 <= mib <= 32:
            assert without < 0.77 * measured, (system, mib)


def test_h100_all_reduce_matches_vllms_nccl_timings_it_was_not_read_from() -> None:
    """vLLM's NCCL timings on H100 (vllm-project/vllm#42324) from 1.5 to 128 MiB: within 8 %
    with the ramp; without it up to 28 % fast."""
    worst_without = 0.0
    for mib, measured, with_ramp, without in nccl_ramp.vllm_rows():
        if mib >= 1.5:
            assert with_ramp == pytest.approx(measured, rel=0.08), mib
            worst_without = min(worst_without, without / measured - 1)
    assert worst_without < -0.25


def _tp8(overrides: list[str] = ()):  # type: ignore[no-untyped-def,assignment]
    scenario = load_scenario(DGX_H100, [*SMALL_DGX, "num_gpus=8", "parallelism.tp=8",
                                        *overrides])
    planner = traffic_planner(scenario.spec.system, scenario.layout)
    rank_class = lower(scenario).classes[0]
    return planner, rank_class


def _all_reduce_s(planner, rank_class, group: str, mib: float,  # type: ignore[no-untyped-def]
                  nccl_pipeline: bool = True) -> float:
    g = rank_class.groups[group]
    wire = wire_bytes("all_reduce", mib * MIB, g.size)
    plan = planner.collective(rank_class, g, "all_reduce", wire, nccl_pipeline=nccl_pipeline)
    return planner.alone_s(plan, wire)


def test_a_lower_measured_share_slows_the_bandwidth_term_by_its_ratio() -> None:
    """Halving every share of the ramp doubles the bandwidth term of a 16 MiB all-reduce (its
    latency unchanged): the constant moves the prediction as the hardware would."""
    ramp = "[[14, 0.555], [28, 0.636]]"
    halved = "[[14, 0.2775], [28, 0.318]]"
    key = "system.node.gpu.gpu.nvlink.nccl_size_ramp"
    planner, rank_class = _tp8([f"{key}={ramp}"])
    slow, slow_class = _tp8([f"{key}={halved}"])
    g = rank_class.groups["tp"]
    latency = planner.collective(rank_class, g, "all_reduce",
                                 wire_bytes("all_reduce", 16 * MIB, 8)).latency_s
    base = _all_reduce_s(planner, rank_class, "tp", 16)
    assert _all_reduce_s(slow, slow_class, "tp", 16) - latency == pytest.approx(
        2 * (base - latency), rel=1e-9)


def test_the_ramp_spares_ll_userbuffers_and_collectives_across_nodes() -> None:
    """LL's flags ride with each 8-byte line (no chunk handshakes), userbuffers exchange by
    copies, and no measurement covers the network: none of them ramps."""
    planner, rank_class = _tp8()
    flat, flat_class = _tp8(["system.node.gpu.gpu.nvlink.nccl_size_ramp=null"])
    g = rank_class.groups["tp"]
    small = wire_bytes("all_reduce", 0.5 * MIB, 8)
    assert planner.collective(rank_class, g, "all_reduce", small).protocol == "LL"
    assert _all_reduce_s(planner, rank_class, "tp", 0.5) == pytest.approx(
        _all_reduce_s(flat, flat_class, "tp", 0.5))
    assert _all_reduce_s(planner, rank_class, "tp", 16, nccl_pipeline=False) == pytest.approx(
        _all_reduce_s(flat, flat_class, "tp", 16))
    assert _all_reduce_s(planner, rank_class, "tp", 16) > 1.3 * _all_reduce_s(
        flat, flat_class, "tp", 16)
    # 16 GPUs of two nodes, data parallel across them: the ring crosses the network
    two = load_scenario(DGX_H100, [*SMALL_DGX, "num_gpus=16", "parallelism.tp=8"])
    two_flat = load_scenario(DGX_H100, [*SMALL_DGX, "num_gpus=16", "parallelism.tp=8",
                                        "system.node.gpu.gpu.nvlink.nccl_size_ramp=null"])
    times = []
    for scenario in (two, two_flat):
        p = traffic_planner(scenario.spec.system, scenario.layout)
        times.append(_all_reduce_s(p, lower(scenario).classes[0], "dp", 16))
    assert times[0] == pytest.approx(times[1])


def test_a_tensor_parallel_step_slows_with_the_ramp_only_where_nccl_runs_it() -> None:
    """An 8-GPU tensor-parallel step spends more time in its all-reduces with the ramp; with
    userbuffers' overlap (sequence parallelism) its exchanges are not NCCL's and the step is
    as without the ramp."""
    flat = ["system.node.gpu.gpu.nvlink.nccl_size_ramp=null"]
    plain = [*SMALL_DGX, "num_gpus=8", "parallelism.tp=8"]
    ramped, unramped = (simulate(load_scenario(DGX_H100, o)) for o in (plain, [*plain, *flat]))
    assert ramped.breakdown_s["tp"] > 1.2 * unramped.breakdown_s["tp"]
    # the same bytes cross each link, for longer: the ramp is idle link time, not payload
    assert [link["bytes"] for link in ramped.links] == pytest.approx(
        [link["bytes"] for link in unramped.links])
    assert ramped.links[0]["busy"] > unramped.links[0]["busy"]
    overlapped = [*plain, "parallelism.sequence_parallel=true", "parallelism.tp_comm_overlap=true"]
    assert simulate(load_scenario(DGX_H100, overlapped)).step_time_s == pytest.approx(
        simulate(load_scenario(DGX_H100, [*overlapped, *flat])).step_time_s)


@pytest.mark.parametrize("ramp, expected", [
    ("[[28, 0.6], [14, 0.5]]", "must increase"),
    ("[[14, 0.5], [14, 0.6]]", "must increase"),  # one size, two shares
    ("[[14, 1.2]]", "0 < share <= 1"),
    ("[]", "at least one"),
])
def test_a_malformed_ramp_is_refused_naming_its_key(ramp: str, expected: str) -> None:
    with pytest.raises(InputError, match=expected) as caught:
        load_scenario(DGX_H100, [f"system.node.gpu.gpu.nvlink.nccl_size_ramp={ramp}"])
    assert "nccl_size_ramp" in str(caught.value)


def test_nccls_own_tree_correction_and_ring_plateau_are_in_its_model() -> None:
    """ncclTopoGetAlgoTime (tuning.cc) scales a tree all-reduce's bandwidth by
    treeCorrectionFactor[protocol][log2(bytes / 64)] and a cross-node Simple ring's latency by
    1.4: a 4 MiB message is index 16 (LL 0.7, LL128 0.8, Simple 0.7)."""
    from ghsim.fabric.nccl import RING_PLATEAU, choose, latency_s, tree_correction

    assert [tree_correction(p, 4 * MIB) for p in ("LL", "LL128", "Simple")] == [0.7, 0.8, 0.7]
    assert tree_correction("Simple", 63) == 1.0  # below NCCL's first bin
    assert tree_correction("Simple", 2**30) == 1.0  # past its last
    ranks, nodes, message = 16, 2, 256 * MIB
    wire = wire_bytes("all_reduce", message, ranks)
    ring = choose("all_reduce", ranks, nodes, "nvlink", wire, 1e9, None)  # slow links: ring
    assert (ring.algorithm, ring.protocol) == ("ring", "Simple")
    assert ring.latency_s == pytest.approx(
        RING_PLATEAU * latency_s("ring", "Simple", "all_reduce", ranks, nodes, "nvlink"))


def test_a_two_node_all_reduce_runs_as_nccls_tree_at_the_measured_rate() -> None:
    """With two domains each is the other's only child in NCCL's trees: a domain sends S, not
    the ring's 2 (n - 1) / n S, so on two Alps nodes a 4 GiB all-reduce reaches the measured
    81-90 GB/s of algorithm bandwidth (docs/hardware-facts.md T3#18, 2 nodes), where a ring
    would give 50; CSCS's 64 and 128 MiB timings (T4#28) within 15 %. From four nodes up the
    tree's traffic is the ring's and the ring stays (46.8 GB/s measured ~48 at 4 nodes)."""
    seconds, _, algorithm, _ = nccl_ramp.all_reduce("alps-gh200", 4096, group="dp")
    assert algorithm == "tree"
    assert 81e9 * 0.95 <= 4096 * MIB / seconds <= 90e9 * 1.05
    for mib, measured, ghsim, _ in nccl_ramp.alps_rows():
        if mib >= 64:
            assert ghsim == pytest.approx(measured, rel=0.15), mib
    seconds, _, algorithm, _ = nccl_ramp.all_reduce("alps-gh200", 4096, gpus=16, group="dp")
    assert algorithm == "ring"
    assert 4096 * MIB / seconds == pytest.approx(48e9, rel=0.05)
