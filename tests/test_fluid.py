"""Flows on shared links: exact times, and no hang however late in the step they run."""

from __future__ import annotations

import simpy

from ghsim.engine.fluid import FlowNetwork
from ghsim.fabric.sharing import make_path


def _finish_times(start_s: float, works: list[float]) -> list[float]:
    env = simpy.Environment(initial_time=start_s)
    network = FlowNetwork(env, {"nic": 1.0}, {"nic": "nic"})
    ends: list[float] = []
    for work in works:
        done = network.transfer(make_path([("nic", 1, 1.0)]), work, "stage0", "dp")
        done.callbacks.append(lambda _e: ends.append(env.now))
    env.run()
    return ends


def test_two_equal_transfers_on_one_link_take_twice_as_long() -> None:
    assert _finish_times(0.0, [1.0, 1.0]) == [2.0, 2.0]


def test_transfers_late_in_a_long_step_finish() -> None:
    """At 10^5 s the clock resolves about 1.5e-11 s: a fixed 1e-12 s finishing test never
    fired there, and the replay ran for ever (issue 12)."""
    for start in (1e5, 3.3e7, 1e12):
        ends = _finish_times(start, [1e-7, 2e-7, 3e-7])
        assert len(ends) == 3
        assert all(abs(e - start) <= 1e-6 * start + 1e-6 for e in ends)
