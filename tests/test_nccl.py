"""NCCL's algorithm and protocol choice, after its tuning model (tuning.cc at 5067397)."""

from __future__ import annotations

import pytest

from ghsim.fabric import nccl

NVLINK_BUSBW = 370e9
NODE_NICS_BUSBW = 8 * 47e9


def test_a_tiny_all_reduce_on_one_node_is_an_ll_ring_near_the_measured_latency() -> None:
    choice = nccl.choose("all_reduce", 8, 1, "nvlink", 16, NVLINK_BUSBW, None)
    assert (choice.algorithm, choice.protocol) == ("ring", "LL")
    # 6.6 + 14 steps x 0.6 us; an 8-GPU NVLink all-reduce of 4-16 B measured 12.5 us
    # (deepseek-ai/DeepEP#303, the source of the hardware files' collective latency)
    assert choice.latency_s == pytest.approx(15.0e-6)
    assert choice.latency_s == pytest.approx(12.5e-6, rel=0.25)


def test_large_all_reduces_run_nvls_on_an_nvswitch_node_and_simple_rings_elsewhere() -> None:
    nvls = nccl.choose("all_reduce", 8, 1, "nvlink", 1e9, NVLINK_BUSBW, 480e9)
    assert (nvls.algorithm, nvls.protocol, nvls.wire_factor) == ("nvls", "Simple", 1.0)
    ring = nccl.choose("all_reduce", 8, 1, "nvlink", 1e9, NVLINK_BUSBW, None)
    assert (ring.algorithm, ring.protocol, ring.wire_factor) == ("ring", "Simple", 1.0)
    gather = nccl.choose("all_gather", 16, 2, "nvlink", 1e9, NODE_NICS_BUSBW, None)
    assert gather.algorithm == "ring"  # trees only reduce


def test_at_scale_the_tree_wins_because_ring_latency_grows_with_the_ranks() -> None:
    ranks, nodes = 512, 64
    ring_latency = nccl.latency_s("ring", "Simple", "all_reduce", ranks, nodes, "nvlink")
    tree_latency = nccl.latency_s("tree", "Simple", "all_reduce", ranks, nodes, "nvlink")
    # ring: 8.4 + (1022 - 126) x max(3.4, 3 x 1.0) + 126 x 14; tree: 8.4 + 2 (7 x 4 + 6 x 14)
    assert ring_latency == pytest.approx((8.4 + 896 * 3.4 + 126 * 14) * 1e-6)
    assert tree_latency == pytest.approx((8.4 + 2 * (7 * 4.0 + 6 * 14.0)) * 1e-6)
    choice = nccl.choose("all_reduce", ranks, nodes, "nvlink", 64e6, NODE_NICS_BUSBW, None)
    assert choice.algorithm == "tree"
    assert choice.time_s(64e6, NODE_NICS_BUSBW) < ring_latency + 64e6 / NODE_NICS_BUSBW


def test_ll_protocols_put_their_flags_on_the_wire() -> None:
    small = nccl.choose("all_reduce", 8, 1, "nvlink", 1e4, NVLINK_BUSBW, None)
    assert small.protocol == "LL" and small.wire_factor == pytest.approx(
        1 / min(0.5, 141e9 / NVLINK_BUSBW))
