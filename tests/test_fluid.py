"""Flows on shared links: exact times, and no hang however late in the step they run."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

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


def test_flows_alone_and_shared_keep_exact_books() -> None:
    """By hand: link a carries 4 B/s, b 1 B/s, c 4 B/s. At 0 a flow of 4 B starts alone on a
    (4 B/s); at 0.5 one of 1 B joins it (2 B/s each), ends at 1.0, and the first, 1 B left,
    runs alone again to 1.25. At 2 a flow of 1 B crosses b once and c as two copies: 1 B/s
    (b is the narrower), which fills b and half of c, until 3."""
    env = simpy.Environment()
    network = FlowNetwork(env, {"a": 4.0, "b": 1.0, "c": 4.0}, {"a": "x", "b": "x", "c": "x"})
    ends: dict[str, float] = {}

    def start(name: str, at: float, hops: list[tuple[str, float, float]], nbytes: float
              ) -> Generator[simpy.Event, Any, None]:
        yield env.timeout(at)
        yield network.transfer(make_path(hops), nbytes, name, "dp")
        ends[name] = env.now

    env.process(start("first", 0.0, [("a", 1, 1.0)], 4.0))
    env.process(start("joins", 0.5, [("a", 1, 1.0)], 1.0))
    env.process(start("later", 2.0, [("b", 1, 1.0), ("c", 2, 1.0)], 1.0))
    env.run()
    network.finish()
    assert ends == {"first": 1.25, "joins": 1.0, "later": 3.0}
    a, b, c = (network.usage[link] for link in "abc")
    assert (a.bytes, a.busy_s, a.load_s, a.samples) == (5.0, 1.25, 1.25, [(0.0, 1.0), (1.25, 0.0)])
    assert (b.bytes, b.busy_s, b.load_s, b.samples) == (1.0, 1.0, 1.0, [(2.0, 1.0), (3.0, 0.0)])
    assert (c.bytes, c.busy_s, c.load_s, c.samples) == (2.0, 1.0, 0.5, [(2.0, 0.5), (3.0, 0.0)])
    assert sorted(network.transfers) == [("first", "dp", 0.0, 1.25, 4.0),
                                         ("joins", "dp", 0.5, 1.0, 1.0),
                                         ("later", "dp", 2.0, 3.0, 1.0)]
    assert not network.flows and all(network._used[link] == 0.0 for link in "abc")
