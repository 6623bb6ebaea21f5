"""Benchmark: the serving simulation's speed on the largest shipped cases.

Prints, per case, the wall time of ``simulate_serving``, the engine iterations it ran, the
microseconds per iteration and per running request an iteration, and the process's peak RSS;
exits non-zero when a case misses its target: an MLPerf offline run (38,280 requests) under
10 s, an MLPerf server rate search under 60 s, and, start-up included, under 50 us an iteration
where KV blocks are reserved whole at admission (``guaranteed_no_evict``). Under
``max_utilization`` the engine hands each decoding request a block every ``kv_block_tokens``
iterations (TensorRT-LLM's scheduler), so an iteration's work grows with the batch, which that
scheduler makes two to three times larger: the MLPerf offline case (806 requests a batch, 12
blocks an iteration) is held to its total time, and its time per running request is printed
beside no-evict's.
Run: ``python benchmarks/bench_serving.py``.
"""

from __future__ import annotations

import resource
import sys
import time

from ghsim.config import serving_scenario_from_spec
from ghsim.config.loader import load_entries
from ghsim.config.schema import InferencePointSpec
from ghsim.config.search import builtin_root
from ghsim.serving import simulate_serving

CASES = {
    "mlperf41_gh200_144_llama2_70b_offline": 10.0,
    "mlperf41_h200x8_llama2_70b_server": 60.0,
    "trtllm015_gh200_96_llama31_70b_128_2048_tp1": 10.0,
}
"""Point of validation/inference.yaml -> target seconds."""
PER_ITERATION_US = 50.0


def main() -> int:
    points = {p.id: p for p in load_entries(builtin_root() / "validation" / "inference.yaml",
                                             "inference_points", "points", InferencePointSpec)
              if isinstance(p, InferencePointSpec)}
    failed = False
    print(f"{'case':48s} {'seconds':>8s} {'iterations':>11s} {'us/iter':>8s} "
          f"{'us/request':>10s}")
    for name, target in CASES.items():
        scenario = serving_scenario_from_spec(points[name].scenario, "validation/inference.yaml")
        start = time.perf_counter()
        result = simulate_serving(scenario)
        seconds = time.perf_counter() - start
        iterations = result.data["simulated_iterations"]
        per = seconds / max(1, iterations) * 1e6
        per_request = per / max(1.0, result.data["batch"]["mean_running"])
        whole = scenario.spec.inference.scheduler.capacity == "guaranteed_no_evict"
        miss = seconds > target or (whole and per > PER_ITERATION_US)
        failed |= miss
        limit = f"{target} s or {PER_ITERATION_US} us" if whole else f"{target} s"
        print(f"{name:48s} {seconds:8.2f} {iterations:11,} {per:8.1f} {per_request:10.3f}"
              f"{f'  MISSES {limit}' if miss else ''}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"peak RSS {rss:,.0f} MiB")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
