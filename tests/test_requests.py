"""The request stream of a serving replica and the statistics taken over it: lengths drawn to
the stated distribution, the output limit, the KV reservation, Poisson gaps, warm-up and time
per output token, by hand or as properties of many draws."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ghsim.config.schema.serving import LengthSpec, RequestsSpec
from ghsim.serving.engine import EngineRun, Iterations
from ghsim.serving.requests import Request, draw_lengths, replica_requests, unit_gaps
from ghsim.serving.result import latencies, measured_requests

DRAWS = 200_000


@pytest.mark.parametrize("distribution", ["normal", "lognormal"])
def test_drawn_lengths_have_the_stated_mean_and_spread(distribution: str) -> None:
    # far from the clips, the draws keep the distribution's own mean and standard deviation
    spec = LengthSpec.model_validate({"distribution": distribution, "mean": 500.0, "std": 150.0})
    values = draw_lengths(spec, DRAWS, np.random.default_rng(7))
    assert values.mean() == pytest.approx(500.0, rel=0.01)
    assert values.std() == pytest.approx(150.0, rel=0.02)


def test_lognormal_lengths_are_skewed_to_the_right() -> None:
    # the median of a lognormal of mean m and deviation s is m / sqrt(1 + (s / m)^2)
    spec = LengthSpec(distribution="lognormal", mean=300.0, std=300.0)
    values = draw_lengths(spec, DRAWS, np.random.default_rng(11))
    assert np.median(values) == pytest.approx(300.0 / math.sqrt(2.0), rel=0.02)


def test_uniform_and_clipped_lengths_stay_in_their_range() -> None:
    rng = np.random.default_rng(3)
    uniform = draw_lengths(LengthSpec(distribution="uniform", mean=10.0, min=5, max=15),
                           DRAWS, rng)
    assert uniform.min() == 5 and uniform.max() == 15  # both ends included
    assert uniform.mean() == pytest.approx(10.0, rel=0.01)
    clipped = draw_lengths(LengthSpec(distribution="normal", mean=100.0, std=80.0, min=50,
                                      max=120), DRAWS, rng)
    assert clipped.min() == 50 and clipped.max() == 120


def _spec(**changes: object) -> RequestsSpec:
    fields: dict[str, object] = {
        "count": 10, "input_tokens": {"distribution": "uniform", "mean": 150, "min": 100,
                                      "max": 200},
        "output_tokens": {"distribution": "uniform", "mean": 1000, "min": 500, "max": 1500}}
    return RequestsSpec.model_validate({**fields, **changes})


def test_outputs_are_cut_at_the_limit_and_the_kv_is_reserved_to_it() -> None:
    requests = replica_requests(_spec(count=400, max_output_tokens=800), replicas=2, seed=5)
    assert len(requests) == 200  # count / replicas
    outputs = [r.output_tokens for r in requests]
    assert max(outputs) == 800 and min(outputs) >= 500
    # the prompt and the limit, whatever the request's own output
    assert all(r.reserve_tokens == r.input_tokens + 800 for r in requests)


def test_without_a_limit_the_kv_is_reserved_to_each_request_s_own_output() -> None:
    requests = replica_requests(_spec(count=7), replicas=2, seed=5)
    assert len(requests) == 4  # 7 / 2 rounded up
    assert all(r.reserve_tokens == r.input_tokens + r.output_tokens for r in requests)


def test_unit_gaps_have_mean_one() -> None:
    gaps = unit_gaps(DRAWS, seed=9)
    assert gaps.mean() == pytest.approx(1.0, rel=0.01)
    assert gaps.std() == pytest.approx(1.0, rel=0.02)  # exponential: std = mean


def test_time_per_output_token_counts_the_tokens_after_the_first() -> None:
    # 5 tokens: the first at 1.0 s (0.25 s after arrival), the last at 3.0 s: 4 gaps of 0.5 s
    five = Request(0, 100, 5, arrival_s=0.75, first_token_s=1.0, finish_s=3.0)
    one = Request(1, 100, 1, arrival_s=0.0, first_token_s=0.5, finish_s=0.5)
    ttft, tpot = latencies([five, one])
    assert list(ttft) == [0.25, 0.5]
    assert list(tpot) == [0.5]  # a one-token request has no time per output token


def _run(requests: list[Request]) -> EngineRun:
    return EngineRun(requests, Iterations(), {}, {}, 10.0, 0, 0)


def test_the_warm_up_s_first_arrivals_are_left_out() -> None:
    requests = [Request(i, 10, 10, arrival_s=float(9 - i)) for i in range(10)]
    kept = measured_requests(_run(requests), warmup=6, replicas=2)  # 3 on this replica
    assert sorted(r.arrival_s for r in kept) == [3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    # a warm-up that would leave none keeps them all
    assert len(measured_requests(_run(requests), warmup=40, replicas=2)) == 10
