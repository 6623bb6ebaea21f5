"""ghsim's GEMM rate on a power-capped Alps GH200 against CSCS's CoralGemm references.

CSCS's regression suite (eth-cscs/cscs-reframe-tests@e18c3a88, 2025-12-04,
``checks/microbenchmarks/gpu/dgemm/coralgemm.py``) holds, as "the average GFLOPS observed" on
Alps's GH200s, CoralGemm 2025.11 runs of square BF16 GEMMs (FP32 C and compute, ``OP_N`` x
``OP_T``) for 45 s each per size: the module then capped at 660 W (CSCS serves Grace first).
A 45-second loop of one GEMM is not what a training step runs: on an H200 at its 700 W limit a
loop of 8192^3 on random data held 1455-1500 MHz and ran at 660-672 TFLOP/s, while the GEMMs of
back-to-back training micro-batches ran at 768-793 (1.14-1.20x; 1.16-1.17x from the probe's
JSON files alone, which this script reads; docs/hardware-facts.md T4#12-13,
``benchmarks/device/data/h200-2026-12-04``), and ghsim's GEMM costs are those of a training
step. So ghsim's rate on an Alps GPU (the cap less the CPU side, through the clock-cubed law)
should sit above CoralGemm's by about that factor; with no cap it would sit 1.4x above, with
twice the CPU side's share 0.87x. Nothing is fitted here. Run:
``python benchmarks/alps_gemm.py`` (a second).
"""

from __future__ import annotations

import functools
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ghsim.config.api import load_system  # noqa: E402
from ghsim.costmodel.gpu import GpuCostModel, gpu_cost_model, sustained_clock_ghz  # noqa: E402
from ghsim.workload.ir import Kernel  # noqa: E402

SYSTEM = "alps-gh200"
CORALGEMM_TFLOPS = {3200: 548.292, 6400: 570.109, 12800: 574.525, 32000: 599.912}
"""M = N = K: the reference ``avg_gflops`` / 1000 of ``_ref_flops['gh200']['R_16B']`` (keyed
there by bytes of one dimension in FP32: 12800, 25600, 51200, 128000)."""
H200_DATA = ROOT / "benchmarks" / "device" / "data" / "h200-2026-12-04"


@functools.cache
def _model(system: str) -> GpuCostModel:
    """The cost model of one GPU of ``system`` at the clock its power limit leaves."""
    node = load_system(system).node
    return gpu_cost_model(node.gpu, sustained_clock_ghz(node))


def ghsim_tflops(n: int, system: str = SYSTEM) -> float:
    """ghsim's BF16 rate for an n^3 GEMM (A, B in BF16, C in FP32) on one GPU of ``system``
    at the clock its power limit leaves, the launch gap excluded."""
    kernel = Kernel("coralgemm", 2.0 * n ** 3, float(2 * n * n * 2 + 2 * n * n * 4), "bf16",
                    (n, n, n), "gemm")
    return kernel.flops / _model(system).gemm_s(kernel) / 1e12


def h200_step_over_loop() -> tuple[float, float]:
    """The range of (GEMMs of a training step) / (a loop of 8192^3 on random data) measured on
    the H200: every steady BF16 step's GEMM rate over every random-data loop's."""
    kernel = json.loads((H200_DATA / "kernel_probe.json").read_text())
    loops = [r["tflops"] for r in kernel["sustained"] if r["data"].startswith("normal")]
    fp8 = json.loads((H200_DATA / "fp8_probe.json").read_text())
    steps = [row["profiled"]["gemm_tflops"] for key, row in fp8.items()
             if key.startswith("steady_") and key.endswith("_bf16")]
    return min(steps) / max(loops), max(steps) / min(loops)


def ratios() -> dict[int, float]:
    """ghsim's rate over CoralGemm's, per size."""
    return {n: ghsim_tflops(n) / measured for n, measured in CORALGEMM_TFLOPS.items()}


def mean_ratio(by_size: dict[int, float]) -> float:
    """The geometric mean of ``ratios()``."""
    return math.exp(sum(math.log(r) for r in by_size.values()) / len(by_size))


def main() -> None:
    node = load_system(SYSTEM).node
    print(f"{SYSTEM}: module cap {node.power_limit_w:g} W, GPU clock "
          f"{sustained_clock_ghz(node):.2f} GHz in ghsim")
    print(f"{'M=N=K':>6s} {'CoralGemm':>10s} {'ghsim':>7s} {'ghsim/CoralGemm':>16s}")
    by_size = ratios()
    for n, measured in CORALGEMM_TFLOPS.items():
        print(f"{n:6d} {measured:10.1f} {measured * by_size[n]:7.1f} {by_size[n]:16.2f}")
    low, high = h200_step_over_loop()
    print(f"geometric mean {mean_ratio(by_size):.2f}; an H200's training-step GEMMs over its "
          f"GEMM loop: {low:.2f}-{high:.2f}")


if __name__ == "__main__":
    main()
