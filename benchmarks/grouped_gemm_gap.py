"""Fit ``gpu.compute.grouped_gemm_gap_us`` to Transformer Engine's measured grouped GEMMs.

On Hopper, Transformer Engine's ``GroupedLinear`` (the MoE experts of Megatron-Core) runs one
cuBLAS GEMM per expert, spread over four streams (``nvte_multi_stream_cublas_gemm``), not one
grouped kernel. ghsim costs a grouped GEMM as its tiles sharing the GPU's waves (the same
efficiency by shape as any GEMM) plus one launch gap, plus ``grouped_gemm_gap_us`` for each
further GEMM. This script costs the measured shapes with that model at a gap of 0, and fits
the gap by least squares over the measured excess: ``sum((t - t0) (g - 1)) / sum((g - 1)^2)``.
Nothing here is a validation point: these are kernel benchmarks.

Source: NVIDIA/TransformerEngine pull request #2045 ("Add Cutlass GroupGEMM Support for
fine-grained MoE Model", 2025-08), an H100 (SM90) comparison of CUTLASS with "the current
Multi-Stream implementation", shapes (g, m, n, k) of g GEMMs of m x k by k x n, 16-bit: the
PR's table with TE 2.2, and @yaox12's update with TE 2.7 and CUDA 12.9 (the gap used: the
newest software; TE 2.2's gap is printed beside it).

Run: ``python benchmarks/grouped_gemm_gap.py`` (about a second).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ghsim.config.api import load_hardware  # noqa: E402
from ghsim.costmodel.gpu import GpuCostModel, gpu_cost_model  # noqa: E402
from ghsim.workload.kernels import grouped_gemm  # noqa: E402

PART = "h100-sxm5-80gb"

# (groups, m, n, k) -> measured TFLOP/s of TE's multi-stream grouped GEMM, by TE version
MEASURED: dict[str, dict[tuple[int, int, int, int], float]] = {
    "TE 2.7, CUDA 12.9": {(8, 4096, 768, 2048): 627.903, (16, 2048, 768, 2048): 553.945},
    "TE 2.2": {(8, 4096, 768, 2048): 508.77, (16, 2048, 768, 2048): 398.81},
}


def fit(model: GpuCostModel, rows: dict[tuple[int, int, int, int], float]) -> float:
    """The least-squares gap per further GEMM, in seconds, over ``rows``."""
    num = den = 0.0
    for (groups, m, n, k), tflops in rows.items():
        kernel = grouped_gemm("experts", m, n, k, groups)
        excess = kernel.flops / (tflops * 1e12) - model.kernel_s(kernel)
        num += excess * (groups - 1)
        den += (groups - 1) ** 2
    return num / den


def main() -> None:
    part = load_hardware(PART)
    base = gpu_cost_model(part)
    no_gap = replace(base, grouped_gap_s=0.0)
    print(f"{PART}: grouped_gemm_gap_us = {base.grouped_gap_s * 1e6:g} in its YAML")
    for software, rows in MEASURED.items():
        gap = fit(no_gap, rows)
        fitted = replace(base, grouped_gap_s=gap)
        print(f"\n{software}: fitted gap {gap * 1e6:.2f} us per further GEMM")
        print(f"{'(g, m, n, k)':24} {'measured':>9} {'no gap':>7} {'fitted':>7}  TFLOP/s")
        for (groups, m, n, k), tflops in rows.items():
            kernel = grouped_gemm("experts", m, n, k, groups)
            plain = kernel.flops / no_gap.kernel_s(kernel) / 1e12
            with_gap = kernel.flops / fitted.kernel_s(kernel) / 1e12
            print(f"{(groups, m, n, k)!s:24} {tflops:9.1f} {plain:7.1f} {with_gap:7.1f}")


if __name__ == "__main__":
    main()
