"""Benchmark: a 1,000-scenario sweep of a mid-size job, with 1 and 2 local workers.

The job: Llama 3 8B on one DGX H100 node (8 GPUs), varied over tp, pp, micro-batch, recompute,
ZeRO stage, sequence parallelism and precision (1,296 points; invalid layouts are skipped).
Prints scenarios per second for 1 worker (on the first 200 points) and 2 workers (all points).
Run: ``python benchmarks/bench_sweep.py`` (target: the whole sweep in minutes on 2 cores).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from ghsim.config.sweep import load_sweep
from ghsim.sweep import run_sweep

SWEEP = """\
schema_version: 1
kind: sweep
name: bench-1000
base: llama3-8b-gh200
cases:
  - {system: dgx-h100, num_gpus: 8, training.global_batch: 64}
grid:
  parallelism.tp: [1, 2, 4, 8]
  parallelism.pp: [1, 2, 4]
  training.micro_batch: [1, 2, 4]
  parallelism.recompute: [none, selective, full]
  parallelism.zero_stage: [0, 1, 2]
  parallelism.sequence_parallel: [false, true]
  training.precision: [bf16, fp8]
"""


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "bench.yaml")
        path.write_text(SWEEP)
        sweep = load_sweep(path)
        points = sweep.points()
        print(f"{len(points)} points")
        sweep.points = lambda: points[:200]  # type: ignore[method-assign]
        start = time.perf_counter()
        run_sweep(sweep, workers=1)
        one = 200 / (time.perf_counter() - start)
        print(f"1 worker : {one:.1f} scenarios/s (200 points)")
        sweep.points = lambda: points  # type: ignore[method-assign]
        start = time.perf_counter()
        outcome = run_sweep(sweep, workers=2)
        elapsed = time.perf_counter() - start
        done = sum(1 for r in outcome.records if r["step_time_s"] is not None)
        print(f"2 workers: {len(points) / elapsed:.1f} scenarios/s, all {len(points)} points in "
              f"{elapsed:.0f} s ({done} simulated, the rest invalid or filtered)")
    return 0 if elapsed < 600 else 1


if __name__ == "__main__":
    sys.exit(main())
