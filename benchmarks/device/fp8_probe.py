"""The fourth part of the Hopper probe: FP8 GEMMs in a training step, against FP8 GEMM loops.

``power_probe.py`` found BF16 GEMMs inside back-to-back training micro-batches at a higher clock
than in a GEMM loop. This asks the same of FP8 as Transformer Engine runs it: each Linear layer
casts its input and weight to e4m3 with a per-tensor scale from the tensor's amax (TE's
``Float8CurrentScaling``, "tensorwise"), runs the forward GEMM with the fast accumulator and the
data- and weight-gradient GEMMs with the split accumulator (TE's defaults), transposing what the
TN-only Hopper FP8 GEMM needs. Attention, norms and the LM head stay BF16, as in TE.
Run ``python benchmarks/device/fp8_probe.py OUT_DIR`` (about a minute on an H200); it writes
``OUT_DIR/fp8_probe.json`` after every section and a profiler trace per model:

* ``loops``: 2 s each of an 8192^3 FP8 GEMM with the fast and with the split accumulator, with
  the SM clock and board power;
* ``steady_*``: the layers of Llama-8B and Llama-70B width in BF16 and in FP8, micro-batches
  back to back for 3 s, then one under the profiler: clock, power, time per micro-batch, and
  the TFLOP/s of the GEMM kernels inside the step.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hopper_probe import TinyLM, output_dir, probe_info, run_sections, save_trace
from power_probe import MODELS, _sampled, _step_flops

E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0


def _cast(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` in e4m3 with a per-tensor scale from its amax, and the inverse scale."""
    amax = x.abs().max().float().clamp(min=1e-12)
    scale = E4M3_MAX / amax
    return (x * scale.to(x.dtype)).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3), scale.reciprocal()


class _Fp8Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        x8, sx = _cast(x2)
        w8, sw = _cast(w)
        y = torch._scaled_mm(x8, w8.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16,
                             use_fast_accum=True)
        ctx.save_for_backward(x8, sx, w8, sw)
        ctx.shape = shape
        return y.reshape(*shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        x8, sx, w8, sw = ctx.saved_tensors
        dy2 = dy.reshape(-1, dy.shape[-1])
        dy8, sdy = _cast(dy2)
        # dgrad: (m x n) @ (n x k); the second operand column-major: w8 is (n, k) row-major
        w8_cm = w8.t().contiguous().t()
        dx = torch._scaled_mm(dy8, w8_cm, scale_a=sdy, scale_b=sw, out_dtype=torch.bfloat16,
                              use_fast_accum=False)
        # wgrad: (n x m) @ (m x k)
        dy8_t = dy8.t().contiguous()
        x8_cm = x8.t().contiguous().t()
        dw = torch._scaled_mm(dy8_t, x8_cm, scale_a=sdy, scale_b=sx, out_dtype=torch.bfloat16,
                              use_fast_accum=False)
        return dx.reshape(ctx.shape), dw


class Fp8Linear(nn.Module):
    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.weight = linear.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Fp8Matmul.apply(x, self.weight)  # type: ignore[no-any-return]


def _to_fp8(model: nn.Module) -> None:
    for block in model.blocks:  # type: ignore[union-attr]
        for name in ("qkv", "proj", "up", "down"):
            setattr(block, name, Fp8Linear(getattr(block, name)))


def loops() -> list[dict[str, Any]]:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16).to(E4M3)
    one = torch.ones((), device="cuda", dtype=torch.float32)
    rows = []
    for fast in (True, False):
        row = _sampled(lambda fast=fast: torch._scaled_mm(
            a, a.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
            use_fast_accum=fast), 2.0)
        rows.append({"kind": "gemm_fp8_8192", "fast_accum": fast,
                     "tflops": 2 * 8192 ** 3 / row["seconds_per_call"] / 1e12, **row})
    return rows


def steady(name: str, precision: str, out_dir: Path) -> dict[str, Any]:
    spec = MODELS[name]
    model = TinyLM(**spec).to(device="cuda", dtype=torch.bfloat16)
    if precision == "fp8":
        _to_fp8(model)
    tokens, labels = (torch.randint(0, spec["vocab"], (spec["micro_batch"], spec["seq"]),
                                    device="cuda") for _ in range(2))

    def micro() -> None:  # labels drawn apart from the inputs: a loss near log(vocab), and
        model(tokens, labels).backward()  # gradients that are not all zero

    state = _sampled(micro, 3.0)
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        micro()
        torch.cuda.synchronize()
    trace = out_dir / f"{name}_{precision}_steady_trace.json.gz"
    kernels = save_trace(prof, trace)
    is_gemm = ("nvjet", "gemm", "xmma", "cutlass")
    gemm_s = sum(e["dur"] for e in kernels
                 if any(key in e["name"].lower() for key in is_gemm)) / 1e6
    names: dict[str, float] = {}
    for e in kernels:
        names[e["name"][:70]] = names.get(e["name"][:70], 0.0) + e["dur"] / 1e6
    gemm_flops, _ = _step_flops(spec)
    return {"model": name, "precision": precision, **spec, "steady": state,
            "profiled": {"gemm_s": gemm_s, "kernels_s": sum(e["dur"] for e in kernels) / 1e6,
                         "gemm_tflops": gemm_flops / gemm_s / 1e12 if gemm_s else None,
                         "top_kernels_s": dict(sorted(names.items(), key=lambda kv: -kv[1])[:12])},
            "trace": trace.name}


def main() -> None:
    out_dir = output_dir()
    out = out_dir / "fp8_probe.json"
    results: dict[str, Any] = {"info": probe_info(
        "fp8_probe.py",
        "as power_probe.py; FP8 Linear layers as the module docstring says; the GEMM "
        "TFLOP/s of a step count every GEMM FLOP of the model (the BF16 LM head "
        "included) over every GEMM kernel's time")}
    sections: list[tuple[str, Any]] = [("loops", loops)]
    for name in ("llama-8b-layers", "llama-70b-layers"):
        for precision in ("fp8", "bf16"):
            sections.append((f"steady_{name}_{precision}",
                             lambda name=name, precision=precision:
                             steady(name, precision, out_dir)))
    run_sections(out, results, sections, shown=1500)

if __name__ == "__main__":
    main()
