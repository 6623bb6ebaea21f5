"""Fit ``gpu.compute.gemm_ridge_exponent`` to published Hopper FP8 GEMM measurements.

A GEMM costs ``(c^p + m^p)^(1/p)`` (``GpuCostModel.roofline_s``): ``c`` its tensor-core time,
``m`` its memory time, ``p`` how sharp the roofline's corner is (infinite: ``max(c, m)``). Far
from the ridge point one of the two dominates and ``p`` hardly matters; near it (M of a few
hundred rows against the weights of an LLM layer) published kernels run well below the plain
roofline. This script costs each measured shape with ghsim's serving GEMM model on an H100
SXM (``IterationModel.gemm_s``: compute by the measured best shape, M padded to the wgmma tile
or split-K, weights at the skinny-GEMM bandwidth) and prints, for a grid of ``p``, the mean
absolute error of log(predicted / measured) throughput over all shapes and over the shapes
near the ridge (modelled compute and memory times within 2x: the only ones ``p`` moves by
more than a few per cent, so the fit), then the per-shape errors at the fit and at 0.
Nothing here is a validation point: these are kernel benchmarks.

Sources (TFLOP/s as published; H800 has the H100 SXM's SMs, clocks and HBM3):
- DeepGEMM: deepseek-ai/DeepGEMM@55ab91f README "Performance", H800 SXM5, NVCC 12.8, FP8 with
  fine-grained scaling, normal and grouped (contiguous, masked) GEMMs.
- vLLM CUTLASS scaled_mm, H100: vllm-project/vllm#49363 (gemma-4-31B shapes, per-tensor FP8,
  activations already quantized, except the M = 256 row, which times the per-token quant too)
  and vllm-project/vllm#17126 (Llama-3.1-8B 6144 x 4096, tensor/tensor, no quant; the GPU is not
  named, the figures fit an H100).

Run: ``python benchmarks/gemm_ridge.py`` (a few seconds).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ghsim.config import load_any_scenario  # noqa: E402
from ghsim.config.serving_layout import ServingScenario  # noqa: E402
from ghsim.serving.costs import IterationModel  # noqa: E402

# (source, groups, M per group, N, K, measured TFLOP/s)
MEASURED: list[tuple[str, int, int, int, int, float]] = [
    *[("DeepGEMM dense", 1, m, n, k, t) for m, n, k, t in [
        (64, 2112, 7168, 206), (64, 24576, 1536, 289), (64, 32768, 512, 219),
        (64, 7168, 16384, 336), (64, 4096, 7168, 287), (64, 7168, 2048, 295),
        (128, 2112, 7168, 352), (128, 24576, 1536, 535), (128, 32768, 512, 358),
        (128, 7168, 16384, 645), (128, 4096, 7168, 533), (128, 7168, 2048, 510),
        (4096, 2112, 7168, 1009), (4096, 24576, 1536, 1125), (4096, 32768, 512, 751),
        (4096, 7168, 16384, 1426), (4096, 4096, 7168, 1265), (4096, 7168, 2048, 1168)]],
    *[("DeepGEMM grouped", g, m, n, k, t) for g, m, n, k, t in [
        (4, 8192, 4096, 7168, 1346), (4, 8192, 7168, 2048, 1214),
        (8, 4096, 4096, 7168, 1346), (8, 4096, 7168, 2048, 1214),
        (1, 1024, 4096, 7168, 1233), (1, 1024, 7168, 2048, 925),
        (2, 512, 4096, 7168, 1040), (2, 512, 7168, 2048, 916),
        (4, 256, 4096, 7168, 932), (4, 256, 7168, 2048, 815)]],
    *[("vLLM#49363", 1, m, n, k, t) for m, n, k, t in [
        (1, 12288, 5376, 5.16), (16, 12288, 5376, 83.1), (64, 12288, 5376, 318.4),
        (128, 12288, 5376, 581.8), (1, 43008, 5376, 6.08), (16, 43008, 5376, 94.0),
        (64, 43008, 5376, 356.7), (128, 43008, 5376, 647.3), (256, 43008, 5376, 966.8)]],
    *[("vLLM#17126", 1, m, 6144, 4096, t) for m, t in [
        (1, 5.45), (16, 87.5), (64, 397.0), (128, 693.3), (256, 956.0)]],
]


def h100_model() -> IterationModel:
    """The serving cost model of one H100 SXM (any served model: only gemm_s is used)."""
    spec = {"schema_version": 1, "kind": "scenario", "name": "gemm", "system": "dgx-h100",
            "num_gpus": 1, "model": "llama3.1-8b",
            "inference": {"precision": "fp8",
                          "requests": {"count": 1, "input_tokens": 8, "output_tokens": 8}}}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scenario.yaml"
        path.write_text(yaml.safe_dump(spec))
        scenario = load_any_scenario(path)
    assert isinstance(scenario, ServingScenario)
    return IterationModel(scenario)


GRID = [1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 8.0, 12.0, math.inf]


def errors(model: IterationModel, exponent: float,
           shapes: list[tuple[str, int, int, int, int, float]] = MEASURED) -> list[float]:
    """log(predicted / measured) throughput of each of ``shapes`` at ``exponent``."""
    model.gpu = dataclasses.replace(model.gpu, ridge_exponent=exponent)
    out = []
    for _, groups, m, n, k, measured in shapes:
        seconds, _ = model.gemm_s(m, n, k, "fp8", float(n * k * groups), groups)
        out.append(math.log(2.0 * m * n * k * groups / seconds / 1e12 / measured))
    return out


def near_ridge(model: IterationModel) -> list[tuple[str, int, int, int, int, float]]:
    """The shapes whose modelled compute and memory times are within 2x of each other: the
    only ones on which ``p`` moves the cost by more than a few per cent, so the ones that
    determine it (elsewhere the error is the bandwidth's or the ceiling's)."""
    chosen = []
    for shape in MEASURED:
        _, groups, m, n, k, _ = shape
        model.gpu = dataclasses.replace(model.gpu, ridge_exponent=math.inf)
        plain, _ = model.gemm_s(m, n, k, "fp8", float(n * k * groups), groups)
        model.gpu = dataclasses.replace(model.gpu, ridge_exponent=1.0)
        both, _ = model.gemm_s(m, n, k, "fp8", float(n * k * groups), groups)
        if both - plain >= 0.5 * plain:  # the shorter time is at least half the longer
            chosen.append(shape)
    return chosen


def fit(model: IterationModel, shapes: list[tuple[str, int, int, int, int, float]]
        ) -> tuple[float, dict[float, float]]:
    """The grid value of ``p`` with the least mean |log error| over ``shapes``."""
    scores = {p: sum(abs(e) for e in errors(model, p, shapes)) / len(shapes) for p in GRID}
    return min(scores, key=lambda f: scores[f]), scores


def main() -> None:
    model = h100_model()
    ridge = near_ridge(model)
    best_all, all_scores = fit(model, MEASURED)
    best, scores = fit(model, ridge)
    print(f"mean |log error| by exponent p (H100 SXM, FP8): all {len(MEASURED)} shapes / "
          f"the {len(ridge)} near the ridge")
    for f in scores:
        print(f"  {f:5.1f}   {all_scores[f]:.4f}   {scores[f]:.4f}")
    print(f"best over all shapes: {best_all}; near the ridge (the fit): {best}")
    before, after = errors(model, math.inf), errors(model, best)
    print(f"{'source':18s} {'g':>2s} {'M':>5s} {'N':>6s} {'K':>6s}  meas  err@inf err@fit ridge")
    for shape, e0, e1 in zip(MEASURED, before, after, strict=True):
        source, g, m, n, k, measured = shape
        print(f"{source:18s} {g:2d} {m:5d} {n:6d} {k:6d} {measured:6.0f} "
              f"{math.expm1(e0):+6.0%} {math.expm1(e1):+6.0%} {'*' if shape in ridge else ''}")


if __name__ == "__main__":
    main()
