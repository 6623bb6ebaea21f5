"""Fit ``gpu.compute.fixed_power_w`` to MLPerf's MaxQ runs on H200.

MLPerf Inference v4.1 (mlcommons/inference_results_v4.1@198fc4679, closed/NVIDIA) ran the same
benchmarks on the same 8x H200 SXM system at full power (MaxP, 700 W boards) and with the boards
limited (MaxQ: ``power_limit`` 500 W for mixtral-8x7b, 350 W for gptj, in
configs/<benchmark>/Offline/__init__.py). The measured offline tokens/s
(results/H200-SXM-141GBx8_TRT{,_MaxQ}/<benchmark>/Offline/performance/run_1/
mlperf_log_summary.txt) fall to 48987.9 / 59022.3 and 13096.6 / 20086.1. Under a board limit
ghsim gives the SMs what the board's fixed power (HBM, leakage) leaves and, their dynamic power
going as the clock cubed, slows compute to ``((limit - fixed) / (700 - fixed))^(1/3)``; this
script simulates one H200 of each run (replicas are symmetric) at MaxP and at MaxQ for a grid of
fixed powers, with the submission's serving configuration, and prints the one whose simulated
MaxQ / MaxP ratios are closest to the measured ones (mean |log error|). The llama2-70b MaxQ run
(500 W) is a validation point and is left out of the fit.

Run: ``python benchmarks/power_clock.py`` (about a minute).
"""

from __future__ import annotations

import functools
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ghsim.config import load_any_scenario  # noqa: E402
from ghsim.config.serving_layout import ServingScenario  # noqa: E402
from ghsim.serving import simulate_serving  # noqa: E402

# benchmark: (validation point whose request stream it borrows, scheduler of the H200 runs,
#             MaxQ board limit in W, measured MaxQ / MaxP offline tokens/s)
RUNS: dict[str, tuple[str, dict[str, Any], float, float]] = {
    "mixtral-8x7b": ("mlperf41_gh200_144_mixtral_8x7b_offline",
                     {"max_batch_size": 3072, "max_num_tokens": 16384,
                      "kv_memory_fraction": 0.90, "capacity": "max_utilization"}, 500.0,
                     48987.9 / 59022.3),
    "gptj": ("mlperf41_h200x1_gptj_offline",
             {"max_batch_size": 396, "max_num_tokens": 4096, "kv_memory_fraction": 0.95},
             350.0, 13096.6 / 20086.1),
}
GRID = [0.0, 100.0, 200.0, 250.0, 275.0, 300.0, 310.0, 320.0, 330.0, 340.0]


@functools.cache
def _points() -> dict[str, dict[str, Any]]:
    """The scenarios of validation/inference.yaml by point id (read once)."""
    points = yaml.safe_load((ROOT / "validation" / "inference.yaml").read_text())["points"]
    return {p["id"]: p["scenario"] for p in points}


def scenario(point: str, scheduler: dict[str, Any], limit: float | None,
             fixed: float) -> ServingScenario:
    """The point's request stream on one H200 SXM with ``scheduler``, at ``limit`` W."""
    spec = dict(_points()[point])
    spec.update({"schema_version": 1, "kind": "scenario", "system": "dgx-h200", "num_gpus": 1})
    spec["inference"] = {**spec["inference"], "scheduler": scheduler}
    overrides = [f"system.node.gpu.gpu.compute.fixed_power_w={fixed}"]
    if limit is not None:
        overrides.append(f"system.node.gpu_power_limit_w={limit}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scenario.yaml"
        path.write_text(yaml.safe_dump(spec))
        loaded = load_any_scenario(path, overrides)
    assert isinstance(loaded, ServingScenario)
    return loaded


def throughput(s: ServingScenario) -> float:
    return simulate_serving(s).output_tokens_per_s


def fit(grid: list[float] = GRID) -> tuple[float, dict[float, dict[str, float]]]:
    """The fixed power of ``grid`` whose simulated MaxQ / MaxP ratios are closest to the
    measured ones, and the ratios at every grid value."""
    full = {name: throughput(scenario(point, sched, None, 0.0))
            for name, (point, sched, _, _) in RUNS.items()}
    ratios = {fixed: {name: throughput(scenario(point, sched, limit, fixed)) / full[name]
                      for name, (point, sched, limit, _) in RUNS.items()}
              for fixed in grid}
    score = {fixed: sum(abs(math.log(r[n] / RUNS[n][3])) for n in RUNS) / len(RUNS)
             for fixed, r in ratios.items()}
    return min(score, key=lambda f: score[f]), ratios


def main() -> None:
    best, ratios = fit()
    print("fixed W   " + "  ".join(f"{n} MaxQ/MaxP (measured {r[3]:.3f})"
                                   for n, r in RUNS.items()) + "  mean |log error|")
    for fixed, r in ratios.items():
        score = sum(abs(math.log(r[n] / RUNS[n][3])) for n in RUNS) / len(RUNS)
        print(f"  {fixed:5.0f}   " + "  ".join(f"{r[n]:.3f}".ljust(len(n) + 30)
                                              for n in RUNS) + f"  {score:.4f}")
    print(f"best: {best}")


if __name__ == "__main__":
    main()
