"""Benchmark: building the hardware graph of every shipped system at 16,384 GPUs (or as many as
the system has, where that is fewer: Alps has 10,752).

Prints, per system, the build time (best of 5), the peak Python heap while building (tracemalloc)
and the time of 1,000 routes between random GPU pairs; then the process's peak RSS.
Run: ``python benchmarks/bench_graph.py`` (targets: under 2 s and 1 GiB per build).
"""

from __future__ import annotations

import random
import resource
import sys
import time
import tracemalloc

from ghsim.config import load_system
from ghsim.config.search import builtin_root
from ghsim.hardware import build_graph

NUM_GPUS = 16384


def measure(name: str) -> tuple[int, float, float, float]:
    """GPUs, build time (s), peak heap while building (bytes), 1,000 routes (s)."""
    system = load_system(name)
    gpus = NUM_GPUS
    if system.max_nodes is not None:
        gpus = min(gpus, system.max_nodes * system.node.gpus)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        graph = build_graph(system, gpus)
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()
    graph = build_graph(system, gpus)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rng = random.Random(0)
    start = time.perf_counter()
    for _ in range(1000):
        graph.route(graph.gpu(rng.randrange(gpus)), graph.gpu(rng.randrange(gpus)))
    return gpus, best, peak, time.perf_counter() - start


def main() -> int:
    names = sorted(p.stem for p in (builtin_root() / "configs" / "systems").glob("*.yaml"))
    print(f"build_graph(system, {NUM_GPUS:,}) on Python {sys.version.split()[0]}")
    print(f"{'system':<14} {'GPUs':>7} {'build s':>9} {'peak heap MiB':>14} {'1000 routes s':>14}")
    worst = 0.0
    for name in names:
        gpus, seconds, heap, routes = measure(name)
        worst = max(worst, seconds)
        print(f"{name:<14} {gpus:>7,} {seconds:>9.4f} {heap / 2**20:>14.2f} {routes:>14.4f}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"peak RSS of the whole run: {rss:.0f} MiB; slowest build {worst:.4f} s")
    return 0 if worst < 2.0 and rss < 1024 else 1


if __name__ == "__main__":
    sys.exit(main())
