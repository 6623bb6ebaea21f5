"""The second part of the Hopper probe: kernel times free of host overhead, and what the first
part (``hopper_probe.py``) could not separate.

Run on a machine with one NVIDIA GPU and PyTorch (``python benchmarks/device/kernel_probe.py
OUT_DIR``; about a minute on an H200). It writes ``OUT_DIR/kernel_probe.json`` after every
section:

* ``gemm_graphed``: GEMMs too short to time from eager launches (the host's ~30 us per
  ``matmul`` call and ~45 us per ``_scaled_mm`` call bound them in ``hopper_probe.py``), each
  replayed from a CUDA graph of 20 back-to-back calls, so the GPU's time alone is measured;
* ``sustained``: a 8192^3 BF16 GEMM run for 2 s on each of four kinds of data (standard normal,
  N(0, 0.02) as initialised weights, half zeros as after a ReLU, all zeros), with the SM clock
  and board power: how far a training step's sustained clock depends on its data;
* ``grouped``: Mixture-of-Experts expert GEMMs (``torch._grouped_mm``, one kernel for all local
  experts, and a CUDA graph of one GEMM per expert, as a loop or multi-stream issue runs them),
  at the expert shapes of Qwen3-30B-A3B, GPT-OSS, DeepSeek-V3 and Mixtral over tokens per expert;
* ``attention``: SDPA on cuDNN with grouped-query heads, MLA's head dims (Q/K 192, V 128) and
  sequence lengths 1k and 16k, causal and not.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hopper_probe import _Sampler, output_dir, probe_info, run_sections, timed

GRAPHED_SHAPES = [
    (4096, 2304, 768), (4096, 768, 768), (4096, 3072, 768), (4096, 768, 3072),
    (1024, 2304, 768), (1024, 3072, 768), (1024, 768, 3072),
    (4096, 4096, 256), (4096, 4096, 512), (4096, 4096, 1024), (4096, 4096, 2048),
    (4096, 4096, 4096), (8192, 4096, 4096), (8192, 2048, 2048), (8192, 3072, 2048),
    (2048, 2048, 2048), (2048, 2048, 8192), (1024, 1024, 1024),
    (16, 10240, 8192), (64, 10240, 8192), (128, 8192, 8192), (512, 8192, 8192),
]
GROUPED = [  # (name, experts on the GPU, hidden, expert ffn (up: 2x gated), gated)
    ("qwen3-30b-a3b", 128, 2048, 768, True), ("qwen3-30b-a3b-ep8", 16, 2048, 768, True),
    ("gpt-oss-120b-ep8", 16, 2880, 2880, True), ("deepseek-v3-ep64", 4, 7168, 2048, True),
    ("deepseek-v3-ep8", 32, 7168, 2048, True), ("mixtral-8x22b", 8, 6144, 16384, True),
]
TOKENS_PER_EXPERT = (128, 512, 2048)


def _graph_time(fn: Callable[[], Any], calls: int = 20) -> float:
    """GPU seconds per call of ``fn`` replayed from a CUDA graph of ``calls`` calls."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    seconds, _ = timed(graph.replay, 0.2)
    return seconds / calls


def _gemm_fn(m: int, n: int, k: int, dtype: str, fast: bool) -> Callable[[], Any]:
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    if dtype == "bf16":
        return lambda: a @ b.t()
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda", dtype=torch.float32)
    return lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one,
                                    out_dtype=torch.bfloat16, use_fast_accum=fast)


def gemm_graphed() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for m, n, k in GRAPHED_SHAPES:
        for dtype, fast in (("bf16", False), ("fp8", True), ("fp8", False)):
            row: dict[str, Any] = {"m": m, "n": n, "k": k, "dtype": dtype}
            if dtype == "fp8":
                row["fast_accum"] = fast
            try:
                seconds = _graph_time(_gemm_fn(m, n, k, dtype, fast))
                row.update(seconds=seconds, tflops=2 * m * n * k / seconds / 1e12)
            except (RuntimeError, TypeError) as error:
                row["error"] = str(error)[:200]
            rows.append(row)
    return rows


def sustained() -> list[dict[str, Any]]:
    n = 8192
    rows: list[dict[str, Any]] = []
    base = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    data = {"normal": base, "normal_0.02": base * 0.02, "half_zeros": torch.relu(base),
            "zeros": torch.zeros_like(base)}
    for name, a in data.items():
        b = a.clone()
        sampler = _Sampler()
        sampler.start()
        try:
            seconds, calls = timed(lambda a=a, b=b: a @ b, 2.0)
        finally:
            sampler.stop.set()
            sampler.join()
        rows.append({"data": name, "m": n, "n": n, "k": n, "seconds": seconds, "calls": calls,
                     "tflops": 2 * n ** 3 / seconds / 1e12, **sampler.medians()})
    return rows


def grouped() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name, experts, hidden, ffn, gated in GROUPED:
        up = 2 * ffn if gated else ffn
        for tokens in TOKENS_PER_EXPERT:
            for what, n, k in (("up", up, hidden), ("down", hidden, ffn)):
                if experts * tokens * max(n, k) * 2 > 8 << 30:
                    continue
                a = torch.randn(experts * tokens, k, device="cuda", dtype=torch.bfloat16)
                b = torch.randn(experts, n, k, device="cuda", dtype=torch.bfloat16)
                offs = torch.arange(1, experts + 1, device="cuda", dtype=torch.int32) * tokens
                flops = 2.0 * experts * tokens * n * k
                row: dict[str, Any] = {"model": name, "gemm": what, "experts": experts,
                                       "tokens_per_expert": tokens, "n": n, "k": k,
                                       "dtype": "bf16", "flops": flops}
                try:
                    seconds = _graph_time(
                        lambda a=a, b=b, offs=offs: torch._grouped_mm(
                            a, b.transpose(-2, -1), offs=offs, out_dtype=torch.bfloat16), 5)
                    row.update(grouped_s=seconds, grouped_tflops=flops / seconds / 1e12)
                except (RuntimeError, TypeError, AttributeError) as error:
                    row["grouped_error"] = str(error)[:200]
                parts = a.split(tokens)

                def loop(parts: Any = parts, b: Any = b) -> None:
                    for i, part in enumerate(parts):
                        part @ b[i].t()
                seconds = _graph_time(loop, 2)
                row.update(loop_s=seconds, loop_tflops=flops / seconds / 1e12)
                rows.append(row)
    return rows


def _attention_times(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor,
                     causal: bool, gqa: bool) -> tuple[float, float]:
    """Seconds of SDPA's forward, and of its forward and backward, on the backend in force."""
    def fwd() -> Any:
        with torch.no_grad():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

    def fwd_bwd() -> Any:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
        return torch.autograd.grad(out, (q, k, v), do)
    return timed(fwd, 0.3)[0], timed(fwd_bwd, 0.4)[0]


def attention() -> list[dict[str, Any]]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows: list[dict[str, Any]] = []
    cases = [  # (name, q heads, kv heads, qk dim, v dim, seq)
        ("gqa-32-8", 32, 8, 128, 128, 4096), ("mha-32", 32, 32, 128, 128, 4096),
        ("mla-128", 128, 128, 192, 128, 4096), ("mha-s1024", 32, 32, 128, 128, 1024),
        ("mha-s16384", 32, 32, 128, 128, 16384),
    ]
    for name, heads, kv_heads, dqk, dv, seq in cases:
        batch = max(1, 16384 // seq)
        q = torch.randn(batch, heads, seq, dqk, device="cuda", dtype=torch.bfloat16,
                        requires_grad=True)
        k = torch.randn(batch, kv_heads, seq, dqk, device="cuda", dtype=torch.bfloat16,
                        requires_grad=True)
        v = torch.randn(batch, kv_heads, seq, dv, device="cuda", dtype=torch.bfloat16,
                        requires_grad=True)
        do = torch.randn(batch, heads, seq, dv, device="cuda", dtype=torch.bfloat16)
        gqa = kv_heads != heads
        flops = 2.0 * batch * heads * seq * seq * (dqk + dv)
        for causal in (True, False):
            row: dict[str, Any] = {"case": name, "backend": "CUDNN_ATTENTION", "batch": batch,
                                   "heads": heads, "kv_heads": kv_heads, "qk_dim": dqk,
                                   "v_dim": dv, "seq": seq, "causal": causal,
                                   "model_flops_fwd": flops}
            try:
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    fwd_s, both_s = _attention_times(q, k, v, do, causal, gqa)
            except RuntimeError as error:
                row["error"] = str(error)[:200]
                rows.append(row)
                continue
            row.update(fwd_s=fwd_s, bwd_s=both_s - fwd_s, fwd_tflops=flops / fwd_s / 1e12,
                       bwd_tflops=2 * flops / (both_s - fwd_s) / 1e12,
                       fwd_bwd_tflops=3 * flops / both_s / 1e12)
            rows.append(row)
    return rows


def main() -> None:
    out_dir = output_dir()
    out = out_dir / "kernel_probe.json"
    results: dict[str, Any] = {"info": probe_info(
        "kernel_probe.py",
        "GEMM rows: GPU time per call from CUDA events around replays of a CUDA graph of "
        "20 calls (5 for grouped, 2 for the per-expert loop), random normal data; "
        "attention rows as in hopper_probe.py (FLOPs counted as Megatron does: "
        "2 b h s^2 (d_qk + d_v) forward, causal not halved, backward twice that)")}
    run_sections(out, results, [("sustained", sustained), ("gemm_graphed", gemm_graphed),
                                ("grouped", grouped), ("attention", attention)])
    for section in ("sustained", "gemm_graphed", "grouped", "attention"):
        for row in results.get(section, []):
            if isinstance(row, dict):
                print(section, {k: (round(v, 1) if isinstance(v, float) and v > 1e-3 else v)
                                for k, v in row.items() if k not in ("how",)})


if __name__ == "__main__":
    main()
