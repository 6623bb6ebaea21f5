"""``simulate_serving``: a serving scenario in, a :class:`ServingResult` out.

One replica is simulated (replicas serve identical, independent shares of the stream: the
offline job split evenly, a Poisson stream thinned to rate / replicas, the clients dealt out) and
its throughput multiplied by the replicas. With ``find_max_rate`` the MLPerf server rule is a
search: the arrival rate is raised (or lowered) by 1.5x until the latency percentiles change
from meeting their limits to missing them, then bisected; every run reuses the same exponential
gaps scaled by the rate, so runs at nearby rates see the same arrival pattern.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ghsim.config.api import unread_overrides
from ghsim.config.serving_layout import ServingScenario
from ghsim.errors import ConfigError
from ghsim.limits import MAX_SEQ_LEN, MAX_SERVING_ITERATIONS, MAX_SERVING_REQUESTS
from ghsim.serving.costs import IterationModel
from ghsim.serving.engine import (
    EngineConfig,
    EngineRun,
    ReplicaEngine,
    TooManyIterations,
    request_blocks,
)
from ghsim.serving.memory import (
    ServingMemory,
    engine_limits,
    longest_tokens,
    mean_tokens,
    serving_memory,
    window_of,
)
from ghsim.serving.requests import replica_requests, requests_per_replica, unit_gaps
from ghsim.serving.result import ServingResult, build_result, latencies, measured_requests

SEARCH_STEPS = 40
"""Rate changes by 1.5x before the search gives up finding a bracket (1.5^40: 1e7x)."""
BISECTIONS = 7
"""Bisections of the bracket: the rate is known to 1.5^(1/128), about 0.3 %."""


def _check(scenario: ServingScenario, max_num_tokens: int) -> None:
    """What a serving scenario must satisfy beyond its schema, checked before simulating:
    clients dealt evenly over replicas, bounded lengths, prompts within the token budget
    unless chunked, expert precision only with experts, no token dropping."""
    spec = scenario.spec
    inference = spec.inference
    requests = inference.requests
    if requests.arrival == "concurrency":
        assert requests.concurrency is not None
        if requests.concurrency % scenario.replicas:
            raise ConfigError(scenario.source, "inference.requests.concurrency",
                              f"expected a multiple of the {scenario.replicas} replicas "
                              f"(num_gpus / tp), got {requests.concurrency}")
    for key in ("input_tokens", "output_tokens"):
        longest = longest_tokens(getattr(requests, key))
        if longest is None or longest > MAX_SEQ_LEN:
            shown = "no upper clip" if longest is None else f"{longest:,}"
            raise ConfigError(scenario.source, f"inference.requests.{key}", f"expected at most "
                              f"{MAX_SEQ_LEN:,} tokens (ghsim.limits.MAX_SEQ_LEN; give the "
                              f"distribution a max), got {shown}")
    if not inference.scheduler.chunked_prefill:
        longest = longest_tokens(requests.input_tokens) or 0  # bounded: checked above
        if longest > max_num_tokens:
            raise ConfigError(scenario.source, "inference.requests.input_tokens",
                              f"prompts of up to {longest} tokens exceed max_num_tokens "
                              f"({max_num_tokens}): set inference.scheduler.chunked_prefill "
                              f"true or raise max_num_tokens, as TensorRT-LLM requires")
    if inference.scheduler.capacity == "max_utilization" and window_of(spec.model) is not None:
        raise ConfigError(scenario.source, "inference.scheduler.capacity", "max_utilization is "
                          "modelled for models without attention windows; this one has them: "
                          "use guaranteed_no_evict")
    if spec.model.moe is None and inference.expert_precision is not None:
        raise ConfigError(scenario.source, "inference.expert_precision", "is for models with "
                          "experts (model.moe); this model has none")
    if spec.model.moe is not None and spec.model.moe.capacity_factor is not None:
        raise ConfigError(scenario.source, "model.moe.capacity_factor", "token dropping is "
                          "not modelled for serving (serving engines run dropless)")


def _config(scenario: ServingScenario, memory: ServingMemory, rate: float | None,
            limits: tuple[int, int]) -> EngineConfig:
    inference = scenario.spec.inference
    requests = inference.requests
    replicas = scenario.replicas
    return EngineConfig(
        policy=inference.scheduler.policy, capacity=inference.scheduler.capacity,
        max_batch_size=limits[0],
        max_num_tokens=limits[1], chunked_prefill=inference.scheduler.chunked_prefill,
        block_tokens=memory.block_tokens, hbm_blocks=memory.hbm_blocks,
        host_blocks=memory.host_blocks if inference.kv_offload.policy != "none" else 0,
        beam_width=inference.beam_width, arrival=requests.arrival,
        rate_per_s=rate / replicas if rate is not None else None,
        concurrency=requests.concurrency // replicas if requests.concurrency else None,
        window=window_of(scenario.spec.model),
    )


class _Budget:
    """Engine iterations left to one simulation (all the runs of a rate search share it)."""

    def __init__(self) -> None:
        self.left = MAX_SERVING_ITERATIONS


def _run(scenario: ServingScenario, model: IterationModel, memory: ServingMemory,
         rate: float | None, limits: tuple[int, int], budget: _Budget) -> EngineRun:
    spec = scenario.spec
    count = _requests_per_replica(scenario, rate)
    requests = replica_requests(spec.inference.requests, scenario.replicas, spec.seed, rate)
    gaps = unit_gaps(len(requests), spec.seed) if rate is not None else None
    engine = ReplicaEngine(model, _config(scenario, memory, rate, limits), requests, gaps,
                           max_iterations=budget.left)
    try:
        run = engine.run()
    except TooManyIterations:
        raise ConfigError(scenario.source, "inference.requests", f"the run needs more than "
                          f"{MAX_SERVING_ITERATIONS:,} engine iterations "
                          f"(ghsim.limits.MAX_SERVING_ITERATIONS) for {count:,} requests a "
                          f"replica: simulate fewer requests or shorter outputs") from None
    budget.left -= len(run.iterations.start_s)
    return run


def _check_iterations(scenario: ServingScenario, count: int, limits: tuple[int, int]) -> None:
    """Refuse, before simulating, a run whose iterations must exceed the budget: its prompts
    need at least (tokens / max_num_tokens) iterations and its outputs (tokens / max batch)."""
    requests = scenario.spec.inference.requests
    prefill = count * mean_tokens(requests.input_tokens) / limits[1]
    decode = count * mean_tokens(requests.output_tokens) / limits[0]
    longest = longest_tokens(requests.output_tokens) or 0
    needed = max(prefill, decode, longest)
    if needed > MAX_SERVING_ITERATIONS:
        raise ConfigError(scenario.source, "inference.requests", f"the run needs at least "
                          f"{needed:,.0f} engine iterations for {count:,} requests a replica, "
                          f"more than {MAX_SERVING_ITERATIONS:,} (ghsim.limits."
                          f"MAX_SERVING_ITERATIONS): simulate fewer or shorter requests")


def _requests_per_replica(scenario: ServingScenario, rate: float | None) -> int:
    """Requests one replica simulates, or a :class:`ConfigError` beyond the limit."""
    count = requests_per_replica(scenario.spec.inference.requests, scenario.replicas, rate)
    if count > MAX_SERVING_REQUESTS:
        raise ConfigError(scenario.source, "inference.requests", f"expected at most "
                          f"{MAX_SERVING_REQUESTS:,} requests a replica "
                          f"(ghsim.limits.MAX_SERVING_REQUESTS), got {count:,}")
    return count


def _percentile(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if values.size else math.nan


def meets_targets(run: EngineRun, scenario: ServingScenario) -> bool:
    """Whether the run's latency percentiles meet the scenario's limits (warm-up excluded)."""
    inference = scenario.spec.inference
    targets = inference.latency_targets
    ttft, tpot = latencies(measured_requests(run, inference.requests.warmup, scenario.replicas))
    if targets.ttft_ms is not None and _percentile(ttft, targets.percentile) * 1e3 > (
            targets.ttft_ms):
        return False
    return not (targets.tpot_ms is not None and tpot.size
                and _percentile(tpot, targets.percentile) * 1e3 > targets.tpot_ms)


def _search(scenario: ServingScenario, model: IterationModel, memory: ServingMemory,
            limits: tuple[int, int], budget: _Budget
            ) -> tuple[float, EngineRun, list[dict[str, float | bool]]]:
    start = scenario.spec.inference.requests.rate_per_s
    assert start is not None
    tried: list[dict[str, float | bool]] = []

    def attempt(rate: float) -> tuple[bool, EngineRun]:
        run = _run(scenario, model, memory, rate, limits, budget)
        ok = meets_targets(run, scenario)
        tried.append({"rate_per_s": rate, "meets_targets": ok})
        return ok, run

    ok, run = attempt(start)
    good: tuple[float, EngineRun] | None = (start, run) if ok else None
    bad: float | None = None if ok else start
    rate = start
    for _ in range(SEARCH_STEPS):
        if good is not None and bad is not None:
            break
        rate = rate * 1.5 if ok else rate / 1.5
        ok, run = attempt(rate)
        if ok:
            good = (rate, run)
        else:
            bad = rate
    if good is None or bad is None:
        final = good or (rate, run)
        return final[0], final[1], tried
    low, high = good[0], bad
    for _ in range(BISECTIONS):
        mid = math.sqrt(low * high)
        ok, run = attempt(mid)
        if ok:
            good, low = (mid, run), mid
        else:
            high = mid
    return good[0], good[1], tried


def simulate_serving(scenario: ServingScenario) -> ServingResult:
    """Simulate a serving scenario: requests through one replica's scheduler and GPUs."""
    result = _simulate_serving(scenario)
    result.data["warnings"].extend(unread_overrides(scenario))
    return result


def _simulate_serving(scenario: ServingScenario) -> ServingResult:
    spec = scenario.spec
    limits = engine_limits(spec)
    _check(scenario, limits[1])
    memory = serving_memory(spec)
    model = IterationModel(scenario)
    if not memory.fits:
        return build_result(scenario, memory, None, model, limits, None, [])
    requests = spec.inference.requests
    _check_iterations(scenario, _requests_per_replica(scenario, requests.rate_per_s), limits)
    window = window_of(spec.model)
    blocks = max(request_blocks(r, memory.block_tokens, spec.inference.beam_width, window)
                 for r in replica_requests(requests, scenario.replicas, spec.seed))
    usable = memory.hbm_blocks + (memory.host_blocks
                                  if spec.inference.kv_offload.policy != "none" else 0)
    if blocks > usable:
        return build_result(scenario, memory, None, model, limits, None, [],
                            short_of_blocks=(blocks, usable))
    budget = _Budget()
    if spec.inference.find_max_rate:
        rate, run, tried = _search(scenario, model, memory, limits, budget)
        searched = replace(scenario, spec=spec.model_copy(update={"inference": (
            spec.inference.model_copy(update={"requests": requests.model_copy(
                update={"rate_per_s": rate})}))}))
        result = build_result(searched, memory, run, model, limits, rate, tried)
    else:
        run = _run(scenario, model, memory, requests.rate_per_s, limits, budget)
        result = build_result(scenario, memory, run, model, limits, None, [])
    result.data["simulated_iterations"] = MAX_SERVING_ITERATIONS - budget.left
    return result
