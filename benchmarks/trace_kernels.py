"""Measure training-kernel memory bandwidth from the real Megatron-LM traces in tests/data/traces.

The eight Kineto traces of Megatron-LM GPT (hidden 4096, 40 layers, seq 2048, micro-batch 4, TP 8,
fp16) on 8x A100-SXM4-80GB record every kernel's duration. Two memory-bound kernels have shapes
fixed by the model, so their bandwidth follows from the trace alone:

* ``cuApplyLayerNorm``: reads and writes 8192 tokens x 4096 fp16 values;
* ``scaled_upper_triang_masked_softmax``: reads and writes 4 sequences x 4 heads (32 / TP 8) x
  2048 x 2048 fp16 scores;
* the cross-entropy's ``torch.exp`` (PyTorch's ``vectorized_elementwise_kernel``, one a rank):
  reads and writes the rank's 8192 tokens x 6400 (51200 / TP 8) fp32 logits in place
  (Megatron's ``vocab_parallel_cross_entropy``), a point-wise kernel on a contiguous tensor.

The fused element-wise kernels Megatron compiled with Triton have fixed bytes as well: the
bias-dropout-add (``triton__0d1d2d3d4de``, two a layer) reads the projection's output and the
residual stream and writes their sum, 8192 x 4096 fp16 values each (the bias is a vector), and
the bias-GELU (``triton__0d1d2d3de``, one a layer) reads and writes the rank's 8192 x 2048 fp16
up-projection. Their GB/s are printed beside ghsim's element-wise rate, which prices them.

The unfused attention's two batched GEMMs have fixed FLOPs too, 2 x 16 x 2048 x 2048 x 128 each
(4 sequences x 4 heads a rank): the scores' ``baddbmm`` over strided query and key views
(cuBLAS ``s1688gemm_fp16_256x64``, the kernel after the QKV GEMM) and the weighted sum's
``bmm`` (``s16816gemm_fp16_64x128_sliced1x2``, the one after the softmax). Their TFLOP/s are
printed beside ghsim's for the same kernels.

The figures it prints are the sources of the element-wise, softmax and point-wise efficiencies
of ``configs/hardware/a100-sxm4-80gb.yaml``. It then adds up each rank's compute kernels over
the traced forward pass (NCCL's left out) against ghsim's kernels for the same forward pass of
the same model on a DGX A100.
Run: ``python benchmarks/trace_kernels.py [TRACES_DIR]``.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "tests" / "data" / "traces" / "astra-sim_astra-sim"
PATTERN = "my_test__inputs__workload__megatron-tp8__megatron_kineto_{}.json.gz"
LAYERNORM_BYTES = 8192 * 4096 * 2 * 2
SOFTMAX_BYTES = 4 * 4 * 2048 * 2048 * 2 * 2
EXP_BYTES = 8192 * 6400 * 4 * 2
FUSED_BYTES = {"triton__0d1d2d3d4de": 8192 * 4096 * 2 * 3, "triton__0d1d2d3de": 8192 * 2048 * 2 * 2}
"""Bytes of the Triton bias-dropout-add and bias-GELU kernels of the traces."""
BMM_FLOPS = 2 * 16 * 2048 * 2048 * 128
BMM_KERNELS = {"attn.qk": "s1688gemm_fp16_256x64", "attn.av": "s16816gemm_fp16_64x128_sliced1x2"}
"""The unfused attention's batched GEMMs and the cuBLAS kernels the traces ran them with."""


def measure(folder: Path) -> dict[str, float]:
    """GB/s of the LayerNorm and softmax kernels over the eight ranks, and their count."""
    norm = softmax = exp = 0.0
    norm_calls = softmax_calls = exp_calls = 0
    bmm = dict.fromkeys(BMM_KERNELS, 0.0)
    bmm_calls = dict.fromkeys(BMM_KERNELS, 0)
    fused = dict.fromkeys(FUSED_BYTES, 0.0)
    fused_calls = dict.fromkeys(FUSED_BYTES, 0)
    for rank in range(8):
        with gzip.open(folder / PATTERN.format(rank), "rt") as handle:
            events = json.load(handle)["traceEvents"]
        for event in events:
            if event.get("cat") != "kernel" or event.get("ph") != "X":
                continue
            if "cuApplyLayerNorm" in event["name"]:
                norm += event["dur"] * 1e-6
                norm_calls += 1
            elif "scaled_upper_triang_masked_softmax" in event["name"]:
                softmax += event["dur"] * 1e-6
                softmax_calls += 1
            elif "vectorized_elementwise_kernel" in event["name"] and "exp_kernel" in event["name"]:
                exp += event["dur"] * 1e-6
                exp_calls += 1
            for step, kernel in BMM_KERNELS.items():
                if kernel in event["name"]:
                    bmm[step] += event["dur"] * 1e-6
                    bmm_calls[step] += 1
            if event["name"] in FUSED_BYTES:
                fused[event["name"]] += event["dur"] * 1e-6
                fused_calls[event["name"]] += 1
    return {
        "layernorm_gb_s": norm_calls * LAYERNORM_BYTES / norm / 1e9,
        "layernorm_kernels": norm_calls,
        "softmax_gb_s": softmax_calls * SOFTMAX_BYTES / softmax / 1e9,
        "softmax_kernels": softmax_calls,
        "exp_gb_s": exp_calls * EXP_BYTES / exp / 1e9,
        "exp_kernels": exp_calls,
        **{f"{step}_tflops": bmm_calls[step] * BMM_FLOPS / bmm[step] / 1e12 for step in bmm},
        **{f"{step}_kernels": bmm_calls[step] for step in bmm},
        **{f"{name}_gb_s": fused_calls[name] * FUSED_BYTES[name] / fused[name] / 1e9
           for name in fused},
        **{f"{name}_kernels": fused_calls[name] for name in fused},
    }


TRACED_SCENARIO = {
    "schema_version": 1, "kind": "scenario", "system": "dgx-a100", "num_gpus": 8,
    "model": {"name": "Megatron-LM GPT of the traces", "layers": 40, "hidden": 4096,
              "heads": 32, "kv_heads": 32, "ffn_hidden": 16384, "vocab": 51200,
              "gated_mlp": False, "norm": "layernorm", "position_embedding": "learned",
              "max_position_embeddings": 2048, "bias": True},
    "training": {"seq_len": 2048, "micro_batch": 4, "global_batch": 4, "precision": "fp16",
                 "attention": "standard"},
    "parallelism": {"tp": 8, "pp": 1, "dp": 1, "recompute": "none"},
}
"""The traced run as a ghsim scenario (fp16, unfused attention, learned positions, biases)."""


def traced_forward_s(folder: Path) -> list[float]:
    """Each rank's GPU time in compute kernels (NCCL's left out) over the traced forward."""
    seconds = []
    for rank in range(8):
        with gzip.open(folder / PATTERN.format(rank), "rt") as handle:
            events = json.load(handle)["traceEvents"]
        seconds.append(sum(e["dur"] for e in events if e.get("cat") == "kernel"
                           and e.get("ph") == "X" and "nccl" not in e["name"]) * 1e-6)
    return seconds


def ghsim_forward_s() -> float:
    """ghsim's kernel seconds for the same forward pass: its forward ops' kernels on one rank,
    each on an otherwise idle GPU (launch gaps included)."""
    return sum(_forward_kernel_s().values())


def ghsim_kernel_s(name: str) -> float:
    """ghsim's seconds of one forward kernel of the traced layer (launch gap included)."""
    return _forward_kernel_s(name)[name]


def _forward_kernel_s(only: str | None = None) -> dict[str, float]:
    """Seconds of ghsim's forward kernels on one rank, by kernel name (all of them summed, or
    the first of ``only``)."""
    import tempfile

    import yaml

    sys.path.insert(0, str(ROOT))
    from ghsim.config import load_scenario
    from ghsim.config.api import load_hardware
    from ghsim.costmodel.gpu import gpu_cost_model
    from ghsim.workload.ir import Kernel
    from ghsim.workload.lower import lower

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "traced.yaml"
        path.write_text(yaml.safe_dump(TRACED_SCENARIO, sort_keys=False))
        workload = lower(load_scenario(path))
    gpu = gpu_cost_model(load_hardware("a100-sxm4-80gb"))
    seconds: dict[str, float] = {}
    for op in workload.classes[0].ops:
        if not op.name.startswith("F."):
            continue
        for step in op.body:
            if isinstance(step, Kernel) and (only is None or step.name == only):
                if only is not None:
                    return {only: gpu.kernel_s(step)}
                seconds[step.name] = seconds.get(step.name, 0.0) + gpu.kernel_s(step)
    return seconds


def main() -> int:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    figures = measure(folder)
    print(f"LayerNorm: {figures['layernorm_kernels']:.0f} kernels, "
          f"{figures['layernorm_gb_s']:.0f} GB/s")
    print(f"masked softmax: {figures['softmax_kernels']:.0f} kernels, "
          f"{figures['softmax_gb_s']:.0f} GB/s")
    print(f"point-wise exp: {figures['exp_kernels']:.0f} kernels, {figures['exp_gb_s']:.0f} GB/s")
    from ghsim.config.api import load_hardware
    from ghsim.costmodel.gpu import gpu_cost_model

    elementwise = gpu_cost_model(load_hardware("a100-sxm4-80gb")).elementwise_bytes_per_s / 1e9
    for name, what in (("triton__0d1d2d3d4de", "bias-dropout-add"),
                       ("triton__0d1d2d3de", "bias-GELU")):
        print(f"fused {what} (Triton): {figures[f'{name}_kernels']:.0f} kernels, "
              f"{figures[f'{name}_gb_s']:.0f} GB/s (ghsim's element-wise rate {elementwise:.0f})")
    for step in BMM_KERNELS:
        ghsim_tflops = BMM_FLOPS / ghsim_kernel_s(step) / 1e12
        print(f"unfused attention {step}: {figures[f'{step}_kernels']:.0f} kernels, "
              f"{figures[f'{step}_tflops']:.0f} TFLOP/s (ghsim {ghsim_tflops:.0f})")
    traced = traced_forward_s(folder)
    ghsim = ghsim_forward_s()
    print(f"forward pass, compute kernels: traced {1e3 * min(traced):.1f}-{1e3 * max(traced):.1f} "
          f"ms a rank, ghsim {1e3 * ghsim:.1f} ms ({ghsim / (sum(traced) / 8) - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
