"""Benchmark: simulating one step.

Prints the time (best of 3, one core) and peak Python heap of simulating the GPT-3 175B MLPerf
scenario on 10,752 H100 GPUs (target: under 2 s and 1 GiB), the same job at other data-parallel
sizes (the time must not grow with dp), and the time to validate the whole calibration file
(target: under 60 s).
Run: ``python benchmarks/bench_simulate.py``.
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from pathlib import Path

from ghsim.config import load_scenario
from ghsim.engine.simulate import simulate
from ghsim.engine.validation import summarize, validate_file

CALIBRATION = Path(__file__).resolve().parents[1] / "validation" / "calibration.yaml"
MLPERF = "gpt3-175b-mlperf-h100-10752"


def best_of(scenario_overrides: list[str], repeats: int = 3) -> tuple[float, float]:
    scenario = load_scenario(MLPERF, scenario_overrides)
    best = float("inf")
    step = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        step = simulate(scenario).step_time_s
        best = min(best, time.perf_counter() - start)
    return best, step


def main() -> int:
    seconds, step = best_of([])
    tracemalloc.start()
    simulate(load_scenario(MLPERF))
    _, heap = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{MLPERF}: simulated in {seconds:.3f} s, peak heap {heap / 2**20:.0f} MiB, "
          f"predicted step {step:.3f} s")
    ok = seconds < 2.0 and heap < 2**30
    print("data-parallel size vs simulation time (same per-replica batch):")
    for dp in (21, 84, 336, 1344):
        overrides = [f"num_gpus={32 * dp}", f"training.global_batch={8 * dp}"]
        seconds, step = best_of(overrides)
        print(f"  dp {dp:>5} ({32 * dp:>6,} GPUs): {seconds:.3f} s, step {step:.3f} s")
    start = time.perf_counter()
    summary = summarize(validate_file(CALIBRATION))
    elapsed = time.perf_counter() - start
    print(f"calibration.yaml: {summary['simulated']} points in {elapsed:.1f} s, "
          f"MAPE {summary['mape']:.1%}, worst {summary['max_abs_error']:.1%}")
    ok = ok and elapsed < 60
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
