"""Benchmark: lowering the GPT-3 175B MLPerf scenario on 10,752 H100 GPUs.

Prints the time to lower it (best of 5, one core), the peak Python heap while lowering
(tracemalloc), the op count, and the same for every other shipped training scenario (a serving
scenario lowers nothing).
Run: ``python benchmarks/bench_lower.py`` (target: under 1 s and 500 MiB for the MLPerf scenario).
"""

from __future__ import annotations

import sys
import time
import tracemalloc

from ghsim.config import load_any_scenario, load_scenario
from ghsim.config.search import builtin_root
from ghsim.config.serving_layout import ServingScenario
from ghsim.workload.lower import lower


def measure(name: str) -> tuple[float, float, int]:
    scenario = load_scenario(name)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        workload = lower(scenario)
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()
    workload = lower(scenario)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, peak, sum(len(c.ops) for c in workload.classes)


def main() -> int:
    names = sorted(p.stem for p in (builtin_root() / "configs" / "scenarios").glob("*.yaml")
                   if not isinstance(load_any_scenario(p), ServingScenario))
    print(f"lower(scenario) on Python {sys.version.split()[0]}")
    print(f"{'scenario':<30} {'lower s':>8} {'peak heap MiB':>14} {'ops':>8}")
    target_ok = True
    for name in names:
        seconds, heap, ops = measure(name)
        print(f"{name:<30} {seconds:>8.3f} {heap / 2**20:>14.1f} {ops:>8,}")
        if name == "gpt3-175b-mlperf-h100-10752":
            target_ok = seconds < 1.0 and heap < 500 * 2**20
    return 0 if target_ok else 1


if __name__ == "__main__":
    sys.exit(main())
