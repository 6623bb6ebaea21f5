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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "tests" / "data" / "traces" / "astra-sim_astra-sim"
PATTERN = "my_test__inputs__workload__megatron-tp8__megatron_kineto_{}.json.gz"
KINDS: dict[str, tuple[Callable[[str], bool], float]] = {
    "LayerNorm": (lambda name: "cuApplyLayerNorm" in name, 8192 * 4096 * 2 * 2),
    "masked softmax": (lambda name: "scaled_upper_triang_masked_softmax" in name,
                       4 * 4 * 2048 * 2048 * 2 * 2),
    "point-wise exp": (lambda name: "vectorized_elementwise_kernel" in name
                       and "exp_kernel" in name, 8192 * 6400 * 4 * 2),
    "fused bias-dropout-add (Triton)": (lambda name: name == "triton__0d1d2d3d4de",
                                        8192 * 4096 * 2 * 3),
    "fused bias-GELU (Triton)": (lambda name: name == "triton__0d1d2d3de", 8192 * 2048 * 2 * 2),
    "attn.qk": (lambda name: "s1688gemm_fp16_256x64" in name, 2 * 16 * 2048 * 2048 * 128),
    "attn.av": (lambda name: "s16816gemm_fp16_64x128_sliced1x2" in name,
                2 * 16 * 2048 * 2048 * 128),
}
"""The kernels measured, how to recognise each in a trace, and the bytes (FLOPs for the two
batched GEMMs, named as ghsim names them) one of them moves."""
BMM = ("attn.qk", "attn.av")
FUSED = ("fused bias-dropout-add (Triton)", "fused bias-GELU (Triton)")


@dataclass
class Traced:
    """What the eight ranks' traces hold: per kind of :data:`KINDS` its kernels and their
    seconds, and each rank's seconds in compute kernels (NCCL's left out)."""

    calls: dict[str, int]
    seconds: dict[str, float]
    forward_s: list[float]

    def rate(self, kind: str) -> float:
        """Bytes (or FLOPs) a second over every kernel of ``kind``."""
        return self.calls[kind] * KINDS[kind][1] / self.seconds[kind]


def measure(folder: Path) -> Traced:
    """Read the eight ranks' traces once."""
    traced = Traced(dict.fromkeys(KINDS, 0), dict.fromkeys(KINDS, 0.0), [])
    for rank in range(8):
        with gzip.open(folder / PATTERN.format(rank), "rt") as handle:
            events = json.load(handle)["traceEvents"]
        compute = 0.0
        for event in events:
            if event.get("cat") != "kernel" or event.get("ph") != "X":
                continue
            name, seconds = event["name"], event["dur"] * 1e-6
            compute += 0.0 if "nccl" in name else seconds
            kind = next((k for k, (matches, _) in KINDS.items() if matches(name)), None)
            if kind is not None:
                traced.calls[kind] += 1
                traced.seconds[kind] += seconds
        traced.forward_s.append(compute)
    return traced


TRACED_SCENARIO = {
    "schema_version": 1, "kind": "scenario", "system": "dgx-a100", "num_gpus": 8,
    "model": {"name": "Megatron-LM GPT of the traces", "layers": 40, "hidden": 4096,
              "heads": 32, "kv_heads": 32, "ffn_hidden": 16384, "vocab": 51200,
              "gated_mlp": False, "norm": "layernorm", "position_embedding": "learned",
              "max_position_embeddings": 2048, "bias": True},
    "training": {"seq_len": 2048, "micro_batch": 4, "global_batch": 4, "precision": "fp16",
                 "attention": "standard", "eager_ops": ["bias"]},
    "parallelism": {"tp": 8, "pp": 1, "dp": 1, "recompute": "none"},
}
"""The traced run as a ghsim scenario (fp16, unfused attention, learned positions, biases). Its
QKV projection adds its bias with a PyTorch op after the GEMM (``aten::add`` of [2048, 4, 1536]
and [1536] under ``LinearWithGradAccumulationAndAsyncCommunication``, PyTorch's non-vectorized
kernel, 54 us a layer; ``python benchmarks/strided_kernels.py``): ``eager_ops: [bias]``. The
copy of the attention's output out of its permuted layout (20 us a layer) is not in ghsim's
unfused attention."""


def ghsim_forward_kernels() -> list[tuple[str, float]]:
    """ghsim's kernels of the same forward pass on one rank, in order, each with its seconds
    on an otherwise idle GPU (launch gaps included)."""
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
    return [(step.name, gpu.kernel_s(step)) for op in workload.classes[0].ops
            if op.name.startswith("F.") for step in op.body if isinstance(step, Kernel)]


def main() -> int:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    traced, kernels = measure(folder), ghsim_forward_kernels()
    for kind in ("LayerNorm", "masked softmax", "point-wise exp"):
        print(f"{kind}: {traced.calls[kind]} kernels, {traced.rate(kind) / 1e9:.0f} GB/s")
    from ghsim.config.api import load_hardware
    from ghsim.costmodel.gpu import gpu_cost_model

    elementwise = gpu_cost_model(load_hardware("a100-sxm4-80gb")).elementwise_bytes_per_s / 1e9
    for kind in FUSED:
        print(f"{kind}: {traced.calls[kind]} kernels, {traced.rate(kind) / 1e9:.0f} GB/s "
              f"(ghsim's element-wise rate {elementwise:.0f})")
    for kind in BMM:
        ghsim_rate = KINDS[kind][1] / next(seconds for name, seconds in kernels if name == kind)
        print(f"unfused attention {kind}: {traced.calls[kind]} kernels, "
              f"{traced.rate(kind) / 1e12:.0f} TFLOP/s (ghsim {ghsim_rate / 1e12:.0f})")
    forward, ghsim = traced.forward_s, sum(seconds for _, seconds in kernels)
    print(f"forward pass, compute kernels: traced {1e3 * min(forward):.1f}-"
          f"{1e3 * max(forward):.1f} ms a rank, ghsim {1e3 * ghsim:.1f} ms "
          f"({ghsim / (sum(forward) / 8) - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
