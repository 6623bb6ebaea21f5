"""The third part of the Hopper probe: the clock a GPU at its board power limit holds in a
training step, against the clock it holds in a loop of one kind of kernel.

``hopper_probe.py`` found BF16 GEMMs in a loop of GEMMs at 1.4-1.55 GHz and ~680 W (700 W
limit), yet the largest GEMMs of a profiled 300M-Llama micro-batch at about the boost clock:
the power controller averages over a window longer than one GEMM, so a step that interleaves
memory-bound kernels with its GEMMs keeps a higher clock than a GEMM loop. This measures it.
Run ``python benchmarks/device/power_probe.py OUT_DIR`` (about 90 s on an H200); it writes
``OUT_DIR/power_probe.json`` after every section and a profiler trace of one steady-state
micro-batch per model:

* ``loops``: 2 s each of an HBM copy, a softmax, an 8192^3 BF16 GEMM and an idle GPU, with the
  SM clock and board power sampled every 50 ms (the power each kind of work draws);
* ``steady``: plain-PyTorch training micro-batches (forward + backward) run back to back for 3 s
  per model (the 300M Llama of ``hopper_probe.py``, and layers of Llama-8B and Llama-70B
  width), then one more under the profiler: the clock and power of the steady state, the time
  per micro-batch, and the GEMMs' and attention's TFLOP/s inside the step.

With ``--compiled`` it runs only the Llama-8B- and -70B-width layers, each under
``torch.compile`` (Inductor fuses the element-wise work into Triton kernels, as Megatron's jit
fusions and Transformer Engine fuse theirs) and eagerly, writing ``power_probe_compiled.json``:
how much of a step the element-wise work takes once fused.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hopper_probe import TinyLM, _Sampler, output_dir, probe_info, run_sections, save_trace, timed

MODELS: dict[str, dict[str, Any]] = {
    "llama-300m": dict(layers=6, hidden=2048, heads=16, kv_heads=4, ffn=6144, vocab=128256,
                       gated=True, seq=4096, micro_batch=2),
    "llama-8b-layers": dict(layers=4, hidden=4096, heads=32, kv_heads=8, ffn=14336,
                            vocab=32000, gated=True, seq=4096, micro_batch=2),
    "llama-70b-layers": dict(layers=2, hidden=8192, heads=64, kv_heads=8, ffn=28672,
                             vocab=32000, gated=True, seq=4096, micro_batch=1),
}


def _sampled(fn: Any, seconds: float) -> dict[str, Any]:
    sampler = _Sampler()
    sampler.start()
    try:
        per_call, calls = timed(fn, seconds, max_calls=100000)
    finally:
        sampler.stop.set()
        sampler.join()
    return {"seconds_per_call": per_call, "calls": calls, **sampler.medians()}


def loops() -> list[dict[str, Any]]:
    n = 1 << 29  # 1 GiB of bf16
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    s = torch.randn(32, 4096, 4096, device="cuda", dtype=torch.bfloat16)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    rows = [{"kind": "hbm_copy", "bytes": 4 * n, **_sampled(lambda: y.copy_(x), 2.0)},
            {"kind": "softmax", "bytes": 4 * s.numel(),
             **_sampled(lambda: torch.softmax(s, -1), 2.0)},
            {"kind": "gemm_bf16_8192", "flops": 2 * 8192 ** 3, **_sampled(lambda: a @ a, 2.0)}]
    sampler = _Sampler()
    sampler.start()
    time.sleep(2.0)
    sampler.stop.set()
    sampler.join()
    rows.append({"kind": "idle", **sampler.medians()})
    for row in rows:
        if "bytes" in row:
            row["gb_s"] = row["bytes"] / row["seconds_per_call"] / 1e9
        if "flops" in row:
            row["tflops"] = row["flops"] / row["seconds_per_call"] / 1e12
    return rows


def _step_flops(spec: dict[str, Any]) -> tuple[float, float]:
    """GEMM and attention FLOPs of one micro-batch's forward + backward (attention counted as
    Megatron does: 4 t s h forward, causal not halved)."""
    t = spec["micro_batch"] * spec["seq"]
    h, f, d = spec["hidden"], spec["ffn"], spec["hidden"] // spec["heads"]
    per_layer = h * (spec["heads"] + 2 * spec["kv_heads"]) * d + h * h + 3 * h * f
    gemm = 3 * 2 * t * (spec["layers"] * per_layer + spec["vocab"] * h)
    attention = 3 * 4 * t * spec["seq"] * h * spec["layers"]
    return gemm, attention


def steady(name: str, out_dir: Path, compiled: bool = False) -> dict[str, Any]:
    spec = MODELS[name]
    model: Any = TinyLM(**spec).to(device="cuda", dtype=torch.bfloat16)
    if compiled:  # Inductor fuses the element-wise work, as Megatron's jit fusions and TE do
        model = torch.compile(model)
    tokens, labels = (torch.randint(0, spec["vocab"], (spec["micro_batch"], spec["seq"]),
                                    device="cuda") for _ in range(2))

    def micro() -> None:  # labels drawn apart from the inputs: a loss near log(vocab), and
        model(tokens, labels).backward()  # gradients that are not all zero

    state = _sampled(micro, 3.0)
    from torch.profiler import ProfilerActivity, profile
    sampler = _Sampler()
    sampler.start()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        micro()
        torch.cuda.synchronize()
    sampler.stop.set()
    sampler.join()
    trace = out_dir / f"{name}{'_compiled' if compiled else ''}_steady_trace.json.gz"
    kernels = save_trace(prof, trace)
    gemm_s = sum(e["dur"] for e in kernels if "nvjet" in e["name"] or "gemm" in e["name"]) / 1e6
    attn_s = sum(e["dur"] for e in kernels if "sdpa" in e["name"] or "flash" in e["name"]) / 1e6
    busy_s = sum(e["dur"] for e in kernels) / 1e6
    triton_s = sum(e["dur"] for e in kernels if e["name"].startswith("triton")) / 1e6
    gemm_flops, attn_flops = _step_flops(spec)
    return {"model": name, "compiled": compiled, **spec, "steady": state,
            "profiled": {"gemm_s": gemm_s, "attention_s": attn_s, "kernels_s": busy_s,
                         "triton_s": triton_s, "kernels": len(kernels),
                         "gemm_tflops": gemm_flops / gemm_s / 1e12 if gemm_s else None,
                         "attention_model_tflops": attn_flops / attn_s / 1e12 if attn_s else None,
                         **{f"during_{k}": v for k, v in sampler.medians().items()}},
            "trace": trace.name}


def main() -> None:
    out_dir = output_dir()
    out = out_dir / ("power_probe_compiled.json" if "--compiled" in sys.argv
                     else "power_probe.json")
    results: dict[str, Any] = {"info": probe_info(
        "power_probe.py",
        "medians of NVML's SM clock and board power sampled every 50 ms while each loop "
        "ran; micro-batches of the plain-PyTorch models of hopper_probe.py (bf16 "
        "weights, SDPA attention, no optimizer step) back to back; GEMM FLOPs counted "
        "from the model's shapes, attention as Megatron does")}
    if "--compiled" in sys.argv:  # the element-wise work fused, against eager
        sections: list[tuple[str, Any]] = [
            (f"steady_{name}{'_compiled' if c else ''}",
             lambda name=name, c=c: steady(name, out_dir, c))
            for name in ("llama-8b-layers", "llama-70b-layers") for c in (True, False)]
    else:
        sections = [("loops", loops)]
        sections += [(f"steady_{name}", lambda name=name: steady(name, out_dir))
                     for name in MODELS]
    run_sections(out, results, sections, shown=900)

if __name__ == "__main__":
    main()
