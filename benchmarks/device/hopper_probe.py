"""Measure the Hopper behaviour ghsim's cost model rests on, on a real GPU, and save it as data.

Run on a machine with one NVIDIA GPU and PyTorch (``python benchmarks/device/hopper_probe.py
OUT.json``; about 5 minutes on an H100/H200/GH200). It changes no GPU setting (power limits,
clocks and MIG stay as they are) and measures:

* GEMM throughput over training shapes (M = tokens per micro-batch, N and K from Llama-class
  layers and the vocabulary), BF16 and, where ``torch._scaled_mm`` runs, FP8 e4m3 with
  tensor-wise scales: what ``gpu.compute.gemm_efficiency`` / ``gemm_k_half`` are fitted from;
* the same over serving shapes (M = 16 ... 2048 tokens of an iteration, N and K of Llama 3
  70B's layers on one GPU): where decode's weight streaming (``gpu.memory.
  skinny_gemm_efficiency``) gives way to compute, and the FP8 throughput a batch of a few
  hundred sequences reaches (the open question of ghsim's serving accuracy, issue 14);
* the SM clock and board power while each dense GEMM runs (nvidia-smi sampled beside it): the
  sustained clock under load that ``system.node.gpu_clock_ghz`` stands for;
* HBM copy bandwidth (device-to-device ``copy_``) and an element-wise kernel's bandwidth;
* the host's CPU time per eager PyTorch op and per kernel launch (an empty-ish ``add_`` on a
  tiny tensor, with the GPU kept busy so launches queue): ``cpu.compute.kernel_issue_us``.

Each figure is stored with how it was taken (shape, dtype, repetitions, torch/CUDA versions,
the GPU's name and its power limit as nvidia-smi reports it).
"""

from __future__ import annotations

import contextlib
import json
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

SHAPES = [  # (M, N, K)
    (8192, 4096, 4096), (8192, 6144, 4096), (8192, 28672, 4096), (8192, 4096, 14336),
    (8192, 2048, 2048), (8192, 6144, 2048), (8192, 2048, 8192), (16384, 8192, 8192),
    (8192, 128256, 4096), (4096, 4096, 1024), (4096, 4096, 512), (2048, 2048, 2048),
    (16384, 5120, 5120), (8192, 53248, 8192), (8192, 8192, 28672), (4096, 14336, 4096),
]
SERVING_SHAPES = [(m, n, k) for m in (16, 64, 128, 256, 512, 1024, 2048)
                  for n, k in ((10240, 8192), (8192, 8192), (57344, 8192), (8192, 28672))]
"""Llama 3 70B's QKV, output, gate+up and down projections on one GPU, over decode batches."""


def _smi(query: str) -> list[str]:
    out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits",
                          "-i", "0"], capture_output=True, text=True, check=False)
    return [v.strip() for v in out.stdout.strip().split(",")] if out.returncode == 0 else []


class _Sampler(threading.Thread):
    """nvidia-smi's SM clock (MHz) and power draw (W), every 50 ms, while a kernel loop runs."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            values = _smi("clocks.sm,power.draw")
            if len(values) == 2:
                with contextlib.suppress(ValueError):
                    self.samples.append((float(values[0]), float(values[1])))
            time.sleep(0.05)


def _timed(fn: Any, seconds: float = 1.5) -> tuple[float, int]:
    """Mean seconds per call of ``fn`` over about ``seconds`` (after warm-up), and calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, calls = time.perf_counter(), 0
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    while time.perf_counter() - start < seconds:
        fn()
        calls += 1
    end.record()
    torch.cuda.synchronize()
    return begin.elapsed_time(end) / 1e3 / calls, calls


def gemm(m: int, n: int, k: int, dtype: str) -> dict[str, Any]:
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    if dtype == "fp8":
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda")

        def fn() -> Any:
            return torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one,
                                    out_dtype=torch.bfloat16)
    else:
        def fn() -> Any:
            return a @ b.t()
    sampler = _Sampler()
    sampler.start()
    seconds, calls = _timed(fn)
    sampler.stop.set()
    sampler.join()
    clocks = [c for c, _ in sampler.samples]
    power = [p for _, p in sampler.samples]
    return {"m": m, "n": n, "k": k, "dtype": dtype, "seconds": seconds, "calls": calls,
            "tflops": 2 * m * n * k / seconds / 1e12,
            "sm_clock_mhz_median": sorted(clocks)[len(clocks) // 2] if clocks else None,
            "power_w_median": sorted(power)[len(power) // 2] if power else None,
            "samples": len(clocks)}


def bandwidth() -> dict[str, Any]:
    n = 1 << 30  # 1 GiB per buffer (bf16: 512 Mi elements)
    x = torch.empty(n // 2, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    copy_s, _ = _timed(lambda: y.copy_(x))
    add_s, _ = _timed(lambda: torch.add(x, y, out=y))
    return {"copy_gb_s": 2 * n / copy_s / 1e9, "add_gb_s": 3 * n / add_s / 1e9,
            "how": "device copy_ of 1 GiB (read + write) and out-of-place add (2 reads + 1 write)"}


def host() -> dict[str, Any]:
    tiny = torch.zeros(16, device="cuda")
    big = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        big @ big  # keep the GPU busy so the launches below queue and the CPU time is the host's
    start = time.perf_counter()
    ops = 2000
    for _ in range(ops):
        tiny.add_(1.0)
    per_op = (time.perf_counter() - start) / ops
    torch.cuda.synchronize()
    linear = torch.nn.Linear(2048, 2048, bias=False, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(8192, 2048, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        for _ in range(3):
            big @ big
        start = time.perf_counter()
        for _ in range(500):
            linear(x)
        per_linear = (time.perf_counter() - start) / 500
    torch.cuda.synchronize()
    return {"eager_add_us": per_op * 1e6, "linear_forward_cpu_us": per_linear * 1e6,
            "cpu": platform.processor() or platform.machine(),
            "how": "CPU wall time per call while the GPU is busy (launches queue): a tensor.add_ "
                   "on 16 elements, and a bf16 nn.Linear(2048, 2048) forward on 8192 tokens "
                   "(the case of NVIDIA/TransformerEngine#2053)"}


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "hopper_probe.json")
    info = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "power_limit_w": (_smi("power.limit") or [None])[0],
            "max_sm_clock_mhz": (_smi("clocks.max.sm") or [None])[0],
            "date": time.strftime("%Y-%m-%d")}
    results: dict[str, Any] = {"info": info, "gemm": [], "bandwidth": bandwidth(),
                               "host": host()}
    for dtype in ("bf16", "fp8"):
        for m, n, k in SHAPES + SERVING_SHAPES:
            try:
                results["gemm"].append(gemm(m, n, k, dtype))
            except (RuntimeError, TypeError) as error:  # no FP8 GEMM on this GPU or torch
                results["gemm"].append({"m": m, "n": n, "k": k, "dtype": dtype,
                                        "error": str(error)[:200]})
                if dtype == "fp8":
                    break
            torch.cuda.empty_cache()
    out.write_text(json.dumps(results, indent=1))
    print(json.dumps({"info": info, "bandwidth": results["bandwidth"], "host": results["host"]}))
    for row in results["gemm"]:
        if "tflops" in row:
            print(f"{row['dtype']} {row['m']}x{row['n']}x{row['k']}: {row['tflops']:.0f} TFLOP/s "
                  f"at {row['sm_clock_mhz_median']} MHz, {row['power_w_median']} W")


if __name__ == "__main__":
    main()
