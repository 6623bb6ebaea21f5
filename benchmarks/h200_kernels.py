"""ghsim's kernel costs on an H200 against the kernels measured on one (2026-12-04).

Reads the probe data in ``benchmarks/device/data/h200-2026-12-04`` and prints, for each kind of
kernel, what ghsim's cost model (``configs/hardware/h200-sxm-141gb.yaml`` at its own clock)
predicts against what the GPU did:

* GEMMs in the steady state of a training step (the GEMM kernels of back-to-back plain-PyTorch
  micro-batches at the 700 W limit, dense gradients), BF16 and FP8;
* GEMMs of one shape in a loop (the GPU at its limit on a pure GEMM load) and from CUDA graphs;
* fused attention, causal and not, over sequence length (cuDNN, forward + backward);
* the HBM copy and the element-wise kernels.

A throughput ratio above 1 (a time ratio below 1) means ghsim predicts the kernel faster
than it ran. Nothing here is fitted:
the script prints the comparison the hardware file's constants are judged by. Run
``python benchmarks/h200_kernels.py`` (a second).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from statistics import fmean

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ghsim.config.api import load_hardware  # noqa: E402
from ghsim.costmodel.gpu import GpuCostModel, gpu_cost_model  # noqa: E402
from ghsim.workload.ir import Kernel  # noqa: E402

DATA = ROOT / "benchmarks" / "device" / "data" / "h200-2026-12-04"
PART = "h200-sxm-141gb"

STEADY_LAYERS = {  # the plain-PyTorch models of power_probe.py / fp8_probe.py
    "llama-8b-layers": dict(layers=4, hidden=4096, heads=32, kv_heads=8, ffn=14336,
                            vocab=32000, seq=4096, micro_batch=2),
    "llama-70b-layers": dict(layers=2, hidden=8192, heads=64, kv_heads=8, ffn=28672,
                             vocab=32000, seq=4096, micro_batch=1),
}


def gemm_s(model: GpuCostModel, m: int, n: int, k: int, dtype: str) -> float:
    """ghsim's seconds for an (m x k) @ (k x n) GEMM, launch gap excluded."""
    size = 1 if dtype == "fp8" else 2
    kernel = Kernel("g", 2.0 * m * n * k, float((m * k + n * k) * size + m * n * 2), dtype,
                    (m, n, k), "gemm")
    return model.kernel_s(kernel) - model.launch_s


def step_gemms(spec: dict[str, int], fp8: bool) -> list[tuple[int, int, int, str]]:
    """The GEMMs of one micro-batch's forward and backward (layers in FP8 or BF16, the LM head
    in BF16), as (m, n, k, dtype)."""
    t, h, f = spec["micro_batch"] * spec["seq"], spec["hidden"], spec["ffn"]
    d = h // spec["heads"]
    layer = [(t, (spec["heads"] + 2 * spec["kv_heads"]) * d, h), (t, h, h), (t, 2 * f, h),
             (t, h, f)]
    out = []
    for (m, n, k), count, dtype in [(s, spec["layers"], "fp8" if fp8 else "bf16")
                                    for s in layer] + [((t, spec["vocab"], h), 1, "bf16")]:
        for shape in ((m, n, k), (m, k, n), (k, n, m)):  # forward, dgrad, wgrad
            out += [(*shape, dtype)] * count
    return out


def _ratio_line(label: str, predicted: float, measured: float, unit: str,
                ratio: str = "ratio") -> str:
    return f"  {label:44s} ghsim {predicted:8.1f}  measured {measured:8.1f} {unit}  " \
           f"{ratio} {predicted / measured:5.2f}"


def steady(model: GpuCostModel) -> None:
    print("GEMMs inside back-to-back training micro-batches (700 W limit, dense gradients)")
    fp8 = json.loads((DATA / "fp8_probe.json").read_text())
    for name, spec in STEADY_LAYERS.items():
        for precision in ("bf16", "fp8"):
            row = fp8.get(f"steady_{name}_{precision}", {})
            if "profiled" not in row:
                continue
            gemms = step_gemms(spec, precision == "fp8")
            predicted = sum(gemm_s(model, m, n, k, dt) for m, n, k, dt in gemms)
            print(_ratio_line(f"{name} {precision} (GEMM ms a micro-batch)",
                              1e3 * predicted, 1e3 * row["profiled"]["gemm_s"], "ms",
                              "time ratio"))


def loops(model: GpuCostModel) -> None:
    print("GEMMs of one shape in a loop (GPU at its limit on a pure GEMM load)")
    kernel = json.loads((DATA / "kernel_probe.json").read_text())
    probe = json.loads((DATA / "hopper_probe.json").read_text())
    rows = [("graph", r) for r in kernel["gemm_graphed"] if "tflops" in r] + \
        [("eager", r) for r in probe["gemm"] if "tflops" in r and r["seconds"] > 150e-6]
    for tag in ("bf16", "fp8"):
        ratios = []
        for _, r in rows:
            if r["dtype"] != tag or (tag == "fp8" and not r.get("fast_accum")) or r["m"] < 1024:
                continue
            t = gemm_s(model, r["m"], r["n"], r["k"], tag)
            ratios.append(2 * r["m"] * r["n"] * r["k"] / t / 1e12 / r["tflops"])
        print(f"  {tag}{' (fast accumulator)' if tag == 'fp8' else ''}: {len(ratios)} shapes "
              f"with M >= 1024, ghsim / measured throughput: geometric mean "
              f"{math.exp(fmean(math.log(x) for x in ratios)):.2f}, "
              f"range {min(ratios):.2f}-{max(ratios):.2f}")


def attention(model: GpuCostModel) -> None:
    print("Fused attention, cuDNN, head dim 128, forward + backward (Megatron's FLOP count)")
    probe = json.loads((DATA / "hopper_probe.json").read_text())
    kernel = json.loads((DATA / "kernel_probe.json").read_text())
    rows = [r for r in probe["attention"] if r.get("backend") == "CUDNN_ATTENTION"
            and r.get("head_dim") == 128 and "fwd_bwd_tflops" in r]
    rows += [r for r in kernel["attention"] if r.get("case", "").startswith("mha")
             and "fwd_bwd_tflops" in r]
    for r in sorted(rows, key=lambda r: (r["causal"], r["seq"])):
        t = r["batch"] * r["seq"]
        width = r["heads"] * r.get("head_dim", r.get("qk_dim", 128))
        flops = 4.0 * t * r["seq"] * width  # forward, Megatron's count
        fwd = Kernel("a", flops, 0.0, "bf16", (t, r["seq"], width), "attention")
        bwd = Kernel("a.bwd", 2 * flops, 0.0, "bf16", (t, r["seq"], width), "attention")
        seconds = model.kernel_s(fwd) + model.kernel_s(bwd) - 2 * model.launch_s
        print(_ratio_line(f"s = {r['seq']:5d} {'causal' if r['causal'] else 'full  '}",
                          3 * flops / seconds / 1e12, r["fwd_bwd_tflops"], "TFLOP/s"))


def memory(model: GpuCostModel) -> None:
    print("Memory-bound kernels (GB/s of the least bytes each must move)")
    probe = json.loads((DATA / "hopper_probe.json").read_text())
    print(_ratio_line("HBM copy (stream rate)", model.hbm_bytes_per_s / 1e9,
                      probe["memory"]["copy_gb_s"], "GB/s"))
    for row in probe["elementwise"]:
        if "gb_s" in row and "cross_entropy" not in row["kernel"]:
            rate = model.softmax_bytes_per_s if "softmax" in row["kernel"] \
                else model.elementwise_bytes_per_s
            print(_ratio_line(row["kernel"], rate / 1e9, row["gb_s"], "GB/s"))


def main() -> None:
    model = gpu_cost_model(load_hardware(PART))
    print(f"{PART}: ghsim's cost model at {model.peak_of('bf16') / 1e12:.1f} BF16 TFLOP/s peak\n")
    for section in (steady, loops, attention, memory):
        section(model)
        print()


if __name__ == "__main__":
    main()
