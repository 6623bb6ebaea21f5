"""Every physical knob moves the prediction the way the hardware would (issue 10).

Each case puts the knob on the critical path of a small scenario and checks the direction and
that the change is visible; a property test over random knobs checks that more capacity never
makes a step slower.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ghsim.config import load_scenario
from ghsim.engine.simulate import simulate

GPU = "system.node.gpu.gpu"
ONE_GH200 = ["system=gh200-single", "num_gpus=1", "model=llama3-8b", "model.layers=4",
             "training.seq_len=2048", "training.global_batch=2"]
QUAD = ["system=gh200-quad", "model=llama3-8b", "model.layers=2", "training.seq_len=2048",
        "training.micro_batch=1", "parallelism.recompute=none"]
DGX_TP8 = ["system=dgx-h100", "num_gpus=8", "model=llama2-13b", "model.layers=4",
           "training.seq_len=4096", "training.global_batch=8", "training.precision=bf16",
           "parallelism.tp=8"]


def step_s(base: list[str], *overrides: str, scenario: str = "llama3-8b-gh200") -> float:
    return simulate(load_scenario(scenario, [*base, *overrides])).step_time_s


def slower(base: list[str], knob: str, scenario: str = "llama3-8b-gh200") -> float:
    """How much slower the step runs with ``knob`` than without (1.0 = unchanged)."""
    return step_s(base, knob, scenario=scenario) / step_s(base, scenario=scenario)


def test_half_the_c2c_bandwidth_slows_weight_streaming() -> None:
    assert slower([*ONE_GH200, "offload.strategy=params", "offload.prefetch_layers=1"],
                  f"{GPU}.host_link.bandwidth_gb_s=225") > 1.02


def test_half_the_hbm_bandwidth_slows_an_elementwise_heavy_step() -> None:
    assert slower([*ONE_GH200, "training.micro_batch=1", "model.hidden=1024",
                   "model.heads=8", "model.kv_heads=8", "model.ffn_hidden=2048",
                   "offload.strategy=none"],
                  f"{GPU}.memory.peak_bandwidth_gb_s=2000") > 1.15


def test_half_the_clock_halves_a_compute_bound_step() -> None:
    ratio = slower([*ONE_GH200, "offload.strategy=none"], f"{GPU}.compute.clock_ghz=0.915")
    assert 1.5 < ratio <= 2.0 + 1e-9  # memory-bound kernels and launches do not scale


def test_half_the_nvlink_bandwidth_slows_tp8() -> None:
    assert slower(DGX_TP8, f"{GPU}.nvlink.link_bandwidth_gb_s=12.5") > 1.05


def _exposed_dp(extra: list[str]) -> list[str]:
    return [*QUAD, "num_gpus=16", "training.global_batch=16", *extra]


def test_half_the_nic_line_rate_slows_exposed_dp_traffic() -> None:
    assert slower(_exposed_dp([]), "system.node.nic.nic.line_rate_gbit_s=100") > 1.05


def test_an_oversubscribed_fabric_slows_dp_that_crosses_leaves() -> None:
    small_leaves = ["system.fabric.switch_radix=8"]  # 4 NICs (one quad node) per leaf at 1:1
    assert slower(_exposed_dp(small_leaves), "system.fabric.oversubscription=4") > 1.05


def test_nic_behind_grace_is_slower_than_gpudirect_with_offload_and_dp() -> None:
    base = _exposed_dp(["offload.strategy=optimizer"])
    behind = step_s(base, "system.node.gpudirect_rdma=false")
    direct = step_s(base, "system.node.gpudirect_rdma=true")
    assert behind > 1.02 * direct


def test_half_the_grace_memory_bandwidth_slows_the_optimizer_on_grace() -> None:
    assert slower([*ONE_GH200, "offload.strategy=optimizer"],
                  "system.node.cpu.cpu.memory.peak_bandwidth_gb_s=256") > 1.02


def test_a_quarter_of_the_fault_driven_migration_rate_slows_unified_memory() -> None:
    base = ["system=gh200-single", "num_gpus=1", "model=qwen3-14b",
            "training.seq_len=2048", "training.global_batch=1", "offload.strategy=unified_memory"]
    assert slower(base, f"{GPU}.unified_memory.migration_bandwidth_gb_s=2.25",
                  scenario="qwen3-14b-gh200") > 1.5


CAPACITIES = {
    f"{GPU}.host_link.bandwidth_gb_s": 450.0,
    f"{GPU}.memory.peak_bandwidth_gb_s": 4000.0,
    f"{GPU}.compute.clock_ghz": 1.83,
    f"{GPU}.nvlink.link_bandwidth_gb_s": 25.0,
    "system.node.nic.nic.line_rate_gbit_s": 200.0,
    "system.node.cpu.cpu.memory.peak_bandwidth_gb_s": 512.0,
    "system.node.cpu_link.bandwidth_gb_s": 150.0,
}


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(sorted(CAPACITIES)), st.floats(min_value=1.1, max_value=4.0))
def test_more_capacity_never_slows_a_step(knob: str, factor: float) -> None:
    base = _exposed_dp(["offload.strategy=optimizer"])
    more = step_s(base, f"{knob}={CAPACITIES[knob] * factor}")
    assert more <= step_s(base, f"{knob}={CAPACITIES[knob]}") * (1 + 1e-9)


@pytest.mark.parametrize("knob", sorted(CAPACITIES))
def test_capacities_of_the_property_test_are_the_shipped_ones(knob: str) -> None:
    """The property test starts from the quad node's real values (so it tests those)."""
    scenario = load_scenario("llama3-8b-gh200", _exposed_dp([]))
    value = scenario.spec.model_dump()
    for part in knob.split("."):
        value = value[part]
    assert value == pytest.approx(CAPACITIES[knob])


def test_the_overlap_slowdown_moves_a_step_whose_gradient_reduction_runs_beside_compute() -> None:
    """Data-parallel buckets reduce-scatter while the rest of the backward runs: kernels
    that slow more beside them lengthen the step, kernels that do not shorten it."""
    base = ["system=dgx-h100", "num_gpus=8", "model=llama2-13b", "model.layers=4",
            "training.seq_len=4096", "training.micro_batch=1", "training.global_batch=8",
            "training.precision=bf16", "parallelism.zero_stage=1",
            "parallelism.overlap_grad_reduce=true"]
    assert slower(base, f"{GPU}.compute.comm_overlap_slowdown=0.4") > 1.01
    assert slower(base, f"{GPU}.compute.comm_overlap_slowdown=0") < 0.995
