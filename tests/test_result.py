"""What the result says about memory, links and the host, by hand: the tiers short of memory,
the busiest links of each kind, and the host CPU's busy share counted once where its work
overlaps."""

from __future__ import annotations

import pytest

from ghsim.config import load_scenario
from ghsim.engine.links import PER_KIND, _union_s
from ghsim.engine.result import Result, does_not_fit_line, memory_tracked, tiers_short
from ghsim.engine.simulate import simulate
from tests.conftest import DGX, SMALL


@pytest.fixture(scope="module")
def dgx() -> Result:
    return simulate(load_scenario(SMALL, DGX))


def test_the_busiest_links_of_each_kind_are_listed(dgx: Result) -> None:
    network = dgx.timeline.network if dgx.timeline else None
    assert network is not None
    step = dgx.step_time_s
    used = {name: usage for name, usage in network.usage.items() if usage.bytes > 0}
    kinds = {usage.kind for usage in used.values()}
    assert kinds == {"nic", "nvlink"}
    listed = {entry["name"]: entry for entry in dgx.links}
    for kind in kinds:
        of_kind = [name for name in used if used[name].kind == kind]
        assert len(of_kind) > PER_KIND  # the choice matters
        chosen = [name for name in listed if listed[name]["kind"] == kind]
        assert len(chosen) == PER_KIND
        floor = min(listed[name]["utilization"] for name in chosen)
        assert all(network.utilization(name, step) <= floor
                   for name in of_kind if name not in chosen)
    shares = [entry["utilization"] for entry in dgx.links]
    assert shares == sorted(shares, reverse=True)
    for name, entry in listed.items():
        assert entry["bytes"] == used[name].bytes
        assert 0.0 < entry["utilization"] <= 1.0


def test_overlapping_host_work_counts_once() -> None:
    """Busy intervals 0-2 and 1-3 overlap for one second: 3 s busy, plus 5-6 and the nested
    5.2-5.5: 4 s in all."""
    assert _union_s([(1.0, 3.0), (0.0, 2.0), (5.0, 6.0), (5.2, 5.5)]) == pytest.approx(4.0)
    assert _union_s([]) == 0.0


def test_tiers_short_of_memory_by_hand() -> None:
    """A result read back without its ``does_not_fit`` list: a tier is short as soon as its
    peak passes its capacity, by one byte or by half."""
    gib = 2**30
    memory = {"hbm": {"peak_bytes": 144 * gib, "capacity_bytes": 96 * gib},
              "lpddr": {"peak_bytes": 120 * gib + 1, "capacity_bytes": 120 * gib},
              "ddr": {"peak_bytes": 10 * gib, "capacity_bytes": 10 * gib}}
    assert tiers_short(memory) == ["hbm", "lpddr"]
    assert does_not_fit_line(memory) == (
        "the step does not fit in memory: HBM peak 144.0 GiB exceeds 96.0 GiB per GPU; "
        "LPDDR peak 120.0 GiB exceeds 120.0 GiB per GPU")
    assert does_not_fit_line({"hbm": memory["ddr"]}) is None
    assert tiers_short({**memory, "does_not_fit": ["lpddr"]}) == ["lpddr"]
    assert memory_tracked(memory)
    assert not memory_tracked({"tracked": False, "fits": None, "does_not_fit": []})
