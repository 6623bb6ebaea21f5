"""ghsim's kernel costs on an H200 against the kernels measured on one (2026-12-04).

Reads the probe data in ``benchmarks/device/data/h200-2026-12-04`` and prints, for each kind of
kernel, what ghsim's cost model (``configs/hardware/h200-sxm-141gb.yaml`` at its own clock)
predicts against what the GPU did:

* GEMMs in the steady state of a training step (the GEMM kernels of back-to-back plain-PyTorch
  micro-batches at the 700 W limit, dense gradients), BF16 and FP8;
* GEMMs of one shape in a loop (the GPU at its limit on a pure GEMM load) and from CUDA graphs;
* fused attention, causal and not, over sequence length (cuDNN, forward + backward);
* the HBM copy and the element-wise kernels;
* a whole plain-PyTorch micro-batch's kernels by kind (GEMMs, cuDNN attention, the rest).

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
    return model.gemm_s(kernel)


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
    print("Fused attention, cuDNN, forward + backward (Megatron's FLOP count: the full square)")
    probe = json.loads((DATA / "hopper_probe.json").read_text())
    kernel = json.loads((DATA / "kernel_probe.json").read_text())
    rows = [r for r in probe["attention"] if r.get("backend") == "CUDNN_ATTENTION"
            and "fwd_bwd_tflops" in r]
    rows += [r for r in kernel["attention"] if r.get("case", "").startswith(("mha", "mla"))
             and "fwd_bwd_tflops" in r]
    for r in sorted(rows, key=lambda r: (r["causal"], r.get("head_dim", 128), r["seq"])):
        head_dim = r.get("head_dim", r.get("qk_dim", 128))
        print(_ratio_line(f"s = {r['seq']:5d} head dim {head_dim:3d} "
                          f"{'causal' if r['causal'] else 'full  '}",
                          attention_tflops(model, r["seq"], head_dim, r["causal"]),
                          r["fwd_bwd_tflops"], "TFLOP/s"))


def attention_tflops(model: GpuCostModel, seq: int, head_dim: int, causal: bool) -> float:
    """ghsim's forward + backward rate of a fused attention kernel on Megatron's count: the
    executed share of the square (a causal mask's tiles, or all of them) at the part's rate."""
    executed = model.causal_fraction(seq) if causal else 1.0
    return model.attention_rate("bf16", seq, head_dim) / executed / 1e12


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


def micro_batch_scenario(name: str) -> dict[str, object]:
    """The plain-PyTorch micro-batch of ``STEADY_LAYERS[name]`` as a ghsim scenario: one H200,
    no position embedding (the probe's ``Block`` has none), torch's fused RMSNorm, SwiGLU as
    PyTorch's SiLU and product kernels, an unfused FP32 cross-entropy, cuDNN attention,
    embeddings tied to the head, BF16 gradients. The probe's GQA ``repeat_interleave`` of K and
    V and its transposes' copies are not in ghsim's (nor in Megatron's) layer."""
    spec = STEADY_LAYERS[name]
    return {
        "schema_version": 1, "kind": "scenario", "system": "dgx-h200", "num_gpus": 1,
        "model": {"name": name, "layers": spec["layers"], "hidden": spec["hidden"],
                  "heads": spec["heads"], "kv_heads": spec["kv_heads"],
                  "ffn_hidden": spec["ffn"], "vocab": spec["vocab"], "gated_mlp": True,
                  "norm": "rmsnorm", "tied_embeddings": True, "position_embedding": "none"},
        "training": {"seq_len": spec["seq"], "micro_batch": spec["micro_batch"],
                     "global_batch": spec["micro_batch"], "precision": "bf16",
                     "attention": "flash", "main_grads": "bf16",
                     "eager_ops": ["activation"], "grad_nan_check": False},
        "parallelism": {"tp": 1, "pp": 1, "dp": 1, "zero_stage": 0, "recompute": "none"},
    }


def micro_batches(model: GpuCostModel) -> None:
    """A whole micro-batch's kernels (forward + backward, no optimizer), by kind."""
    import tempfile

    import yaml

    from ghsim.config import load_scenario
    from ghsim.engine.simulate import simulate

    print("A plain-PyTorch training micro-batch's kernels (forward + backward), ms")
    probe = json.loads((DATA / "fp8_probe.json").read_text())
    for name in STEADY_LAYERS:
        profiled = probe[f"steady_{name}_bf16"]["profiled"]
        attention = sum(v for k, v in profiled["top_kernels_s"].items() if "sdpa" in k)
        measured = {"gemm": profiled["gemm_s"], "attention": attention,
                    "other": profiled["kernels_s"] - profiled["gemm_s"] - attention}
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{name}.yaml"
            path.write_text(yaml.safe_dump(micro_batch_scenario(name), sort_keys=False))
            compute = simulate(load_scenario(path)).compute_breakdown_s
        ghsim = {"gemm": compute["gemm"], "attention": compute["attention"],
                 "other": compute["elementwise"]}
        for kind in ("gemm", "attention", "other"):
            print(_ratio_line(f"{name} {kind}", 1e3 * ghsim[kind], 1e3 * measured[kind], "ms",
                              "time ratio"))


def main() -> None:
    model = gpu_cost_model(load_hardware(PART))
    print(f"{PART}: ghsim's cost model at {model.peak_of('bf16') / 1e12:.1f} BF16 TFLOP/s peak\n")
    for section in (steady, loops, attention, memory, micro_batches):
        section(model)
        print()


if __name__ == "__main__":
    main()
