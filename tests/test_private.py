"""Collectives booked alone (ghsim.engine.private): the same step, breakdown and link books as
the same collectives run as flows on the network, and only where nothing else crosses their
links."""

from __future__ import annotations

import math
from typing import Any

import pytest
import simpy

import ghsim.engine.simulator as simulator
from ghsim.config import load_scenario
from ghsim.engine.fluid import FlowNetwork
from ghsim.engine.simulate import simulate
from ghsim.fabric.sharing import make_path

SMALL = "configs/scenarios/llama3-70b-gh200-nvl32.yaml"
DGX = [
    "system=dgx-h100", "model=llama2-13b", "model.layers=8", "training.seq_len=2048",
    "training.precision=bf16", "parallelism.vp=null",
]
ONE_STAGE_A_NODE = [*DGX, "num_gpus=32", "training.global_batch=16", "parallelism.tp=8",
                    "parallelism.pp=4", "parallelism.dp=1"]
"""Each stage's tensor-parallel group fills its node; no data parallelism: every stage's TP
collectives are alone on their NVLink ports."""
DP_INSIDE_NODES = [*DGX, "num_gpus=16", "training.global_batch=32", "parallelism.tp=2",
                   "parallelism.pp=2", "parallelism.dp=4"]
"""TP pairs whose node also carries data-parallel rings over the same NVLink ports."""


def _run(overrides: list[str], alone: bool, monkeypatch: pytest.MonkeyPatch
         ) -> tuple[dict[str, Any], frozenset[tuple[str, str]]]:
    found: list[frozenset[tuple[str, str]]] = []
    real = simulator.private_pairs

    def recorded(*args: Any) -> tuple[frozenset[tuple[str, str]], frozenset[str]]:
        pairs, links = real(*args) if alone else (frozenset(), frozenset())
        found.append(pairs)
        return pairs, links

    monkeypatch.setattr(simulator, "private_pairs", recorded)
    result = simulate(load_scenario(SMALL, overrides)).to_dict()
    return result, found[0]


def _same(a: Any, b: Any, where: str = "result") -> None:
    """``a`` and ``b`` equal, floats to 1e-9 (a sum taken in another order), link lists
    compared by link name (equal utilizations may sort either way)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        if a and isinstance(a[0], dict) and "name" in a[0]:
            a, b = sorted(a, key=lambda x: x["name"]), sorted(b, key=lambda x: x["name"])
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15), (where, a, b)
    else:
        assert a == b, where


def test_a_stage_alone_on_its_node_books_its_tp_collectives_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    booked, pairs = _run(ONE_STAGE_A_NODE, True, monkeypatch)
    flowed, none = _run(ONE_STAGE_A_NODE, False, monkeypatch)
    assert {group for _, group in pairs} == {"tp"} and len(pairs) == 4  # one per stage
    assert not none
    _same(booked, flowed)
    assert booked["breakdown_s"]["tp"] > 0


@pytest.mark.parametrize("overrides", [
    DP_INSIDE_NODES,
    [*ONE_STAGE_A_NODE, "parallelism.sequence_parallel=true", "parallelism.tp_comm_overlap=true"],
], ids=["dp-shares-the-ports", "tp-comm-overlap"])
def test_tp_sharing_its_ports_or_overlapped_is_never_booked_alone(
        overrides: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Data-parallel rings inside the node cross the TP pairs' NVLink ports; userbuffers runs
    the collectives beside GEMMs. Either way they stay flows on the network."""
    result, pairs = _run(overrides, True, monkeypatch)
    assert not any(group == "tp" for _, group in pairs)
    _same(result, _run(overrides, False, monkeypatch)[0])


def test_the_network_refuses_a_flow_on_a_reserved_link() -> None:
    """A transfer the analysis missed fails loudly instead of sharing nothing."""
    network = FlowNetwork(simpy.Environment(), {"nvl": 1.0, "nic": 1.0},
                          {"nvl": "nvlink", "nic": "nic"}, reserved=frozenset({"nvl"}))
    network.transfer(make_path([("nic", 1, 1.0)]), 1.0, "stage0", "dp")
    with pytest.raises(RuntimeError, match="reserved"):
        network.transfer(make_path([("nic", 1, 1.0), ("nvl", 1, 1.0)]), 1.0, "stage0", "dp")


def test_booked_alone_a_flow_takes_its_standalone_time_and_books_its_links() -> None:
    """By hand: 2 copies of a flow of 3 bytes on a link of 2 B/s, each copy reaching half
    the line rate, run at 2 x 0.5 / 2 = 0.5 B/s each and take 6 s; the link carries
    2 x 0.5 = 1 B/s of its 2 from t = 1 to t = 7, as the same flow on the network does."""
    path = make_path([("nvl", 2, 0.5)])
    env = simpy.Environment()
    network = FlowNetwork(env, {"nvl": 2.0}, {"nvl": "nvlink"})
    assert network.book_alone([(path, 3.0)], "stage0", "tp", 1.0) == 6.0
    assert network.transfers == [("stage0", "tp", 1.0, 7.0, 3.0)]

    flowing = FlowNetwork(simpy.Environment(initial_time=1.0), {"nvl": 2.0}, {"nvl": "nvlink"})
    flowing.transfer(path, 3.0, "stage0", "tp")
    flowing.env.run()
    for books in (network.usage["nvl"], flowing.usage["nvl"]):
        assert books.bytes == 6.0 and books.samples == [(1.0, 0.5), (7.0, 0.0)]
    assert network.transfers == flowing.transfers == [("stage0", "tp", 1.0, 7.0, 3.0)]


def test_a_body_worked_out_once_runs_as_its_segments_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compute op whose collectives are all booked alone is worked out once and waited in
    one go (Simulator._alone_body); walking its segments one by one gives the same step,
    breakdown and link books."""
    booked: list[int] = []
    real = simulator.Simulator._book_alone

    def counted(self: simulator.Simulator, *args: Any) -> None:
        booked.append(1)
        real(self, *args)

    monkeypatch.setattr(simulator.Simulator, "_book_alone", counted)
    whole = simulate(load_scenario(SMALL, ONE_STAGE_A_NODE)).to_dict()
    assert booked  # the worked-out bodies ran
    monkeypatch.setattr(simulator.Simulator, "_alone_body", lambda *_: None)
    walked = simulate(load_scenario(SMALL, ONE_STAGE_A_NODE)).to_dict()
    _same(whole, walked)
    assert whole["breakdown_s"]["tp"] > 0


def test_bookings_alone_add_up_on_their_links_when_read() -> None:
    """By hand: the same 6 s flow booked at t = 1 and again at t = 7, end to end: the link
    carried 12 bytes, was busy 12 s at half its capacity (load 6 s), and its counter track
    rises and falls twice, the fall at 7 before the rise; both transfers are on the books."""
    path = make_path([("nvl", 2, 0.5)])
    network = FlowNetwork(simpy.Environment(), {"nvl": 2.0}, {"nvl": "nvlink"})
    flows = [(path, 3.0)]
    assert network.book_alone(flows, "stage0", "tp", 1.0) == 6.0
    assert network.book_alone(flows, "stage0", "tp", 7.0) == 6.0
    books = network.usage["nvl"]
    assert (books.bytes, books.busy_s, books.load_s) == (12.0, 12.0, 6.0)
    assert books.samples == [(1.0, 0.5), (7.0, 0.0), (7.0, 0.5), (13.0, 0.0)]
    assert books.traffic == {"tp"}
    assert network.transfers == network.transfers_of("tp") == [
        ("stage0", "tp", 1.0, 7.0, 3.0), ("stage0", "tp", 7.0, 13.0, 3.0)]
    assert network.transfers_of("cpu") == []
