"""Benchmark: the unified-memory page model's cost.

Simulates Qwen3 14B on one HBM3e GH200 (144 GB: 72,000 2 MB pages) with ``unified_memory`` and,
for the same per-layer op structure without a page model, with ``activations`` offload; prints
both times and their ratio (target: the page model at most doubles the simulation time).
Run: ``python benchmarks/bench_pages.py``.
"""

from __future__ import annotations

import sys
import time

from ghsim.config import load_scenario
from ghsim.engine.simulate import simulate

BASE = ["system=gh200-nvl2", "num_gpus=1", "training.global_batch=16"]


def seconds(strategy: str) -> tuple[float, float]:
    scenario = load_scenario("qwen3-14b-gh200", [*BASE, f"offload.strategy={strategy}"])
    best, step = float("inf"), 0.0
    for _ in range(3):
        start = time.perf_counter()
        step = simulate(scenario).step_time_s
        best = min(best, time.perf_counter() - start)
    return best, step


def main() -> int:
    paged, paged_step = seconds("unified_memory")
    plain, plain_step = seconds("activations")
    print(f"unified_memory (page model): {paged:.3f} s to simulate, step {paged_step:.2f} s")
    print(f"activations (no page model): {plain:.3f} s to simulate, step {plain_step:.2f} s")
    print(f"ratio {paged / plain:.2f} (target <= 2)")
    return 0 if paged / plain <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
