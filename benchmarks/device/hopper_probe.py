"""Measure the Hopper behaviour ghsim's cost model rests on, on a real GPU, and save it as data.

Run on a machine with one NVIDIA GPU and PyTorch (``python benchmarks/device/hopper_probe.py
OUT_DIR``; about 4 minutes on an H100/H200/GH200). It changes no GPU setting (power limits,
clocks and MIG stay as they are) and writes ``OUT_DIR/hopper_probe.json`` after every section
(so an interrupted run keeps what it measured) and a profiler trace of one training micro-batch.
It measures, each figure stored with how it was taken:

* ``gemm``: GEMM throughput over training shapes (M = tokens of a micro-batch, N and K from the
  layers of Llama-class and small models, their data- and weight-gradient shapes, the LM head),
  BF16 and FP8 e4m3 with tensor-wise scales (``torch._scaled_mm``, with and without the fast
  accumulator Transformer Engine uses for the forward GEMM), and serving shapes (M = 16 ...
  2048 over Llama 3 70B's layers), with the SM clock and board power sampled beside each:
  what ``gpu.compute.gemm_efficiency`` / ``gemm_k_half`` / ``gemm_tile`` stand for;
* ``memory``: HBM bandwidth of a device copy, an add and a read-only sum (``stream_efficiency``);
* ``elementwise``: the memory-bound kernels of a training step at training sizes (RMSNorm and
  LayerNorm forward and backward, SiLU, a multiply, softmax forward and backward, the
  cross-entropy of a large vocabulary): ``elementwise_efficiency`` and ``softmax_efficiency``;
* ``attention``: fused attention (PyTorch SDPA on cuDNN and on FlashAttention) forward and
  forward + backward, causal and not, at head dims 64/128/256 and sequence lengths 1k-8k:
  ``attention_efficiency`` and whether a causal kernel skips the masked half;
* ``host``: the CPU time per eager op and per Linear call while launches queue, and the
  GPU-side time per tiny kernel launched eagerly and from a CUDA graph (``kernel_launch_us``);
* ``steps``: training micro-batches and optimizer steps of small transformer models written in
  plain PyTorch (eager; cuDNN/flash attention, bf16 or fp16 weights, fused AdamW): the shapes
  of published GH200 runs ghsim misses (a 300M Llama, the CARAML GPT-800M) and of GPT-2 small
  over micro-batches 1-8, to tell compute from host and communication overheads.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

TRAINING_SHAPES = [  # (M, N, K)
    (8192, 4096, 4096), (8192, 6144, 4096), (8192, 28672, 4096), (8192, 4096, 14336),
    (4096, 4096, 14336), (4096, 14336, 4096), (8192, 8192, 28672), (16384, 8192, 8192),
    (16384, 5120, 5120), (8192, 53248, 8192), (8192, 128256, 4096),
    # the 300M / 1B / 3B Llamas and GPT-800M (hidden 2048-3072): fprop, dgrad, wgrad
    (8192, 3072, 2048), (8192, 2048, 2048), (8192, 12288, 2048), (8192, 2048, 6144),
    (8192, 16384, 2048), (8192, 2048, 8192), (8192, 128256, 2048), (8192, 50304, 2048),
    (2048, 6144, 8192), (6144, 2048, 8192), (2048, 2048, 8192), (4096, 4096, 8192),
    (8192, 8192, 3072), (8192, 16384, 3072), (8192, 3072, 8192),
    # GPT-2 small (hidden 768)
    (4096, 2304, 768), (4096, 768, 768), (4096, 3072, 768), (4096, 768, 3072),
    (1024, 2304, 768), (1024, 3072, 768), (4096, 50304, 768),
    # K sweep at M = N = 4096 and the sweep's best shape
    (4096, 4096, 256), (4096, 4096, 512), (4096, 4096, 1024), (4096, 4096, 2048),
    (2048, 2048, 13312), (1280, 4096, 12032),
]
SERVING_SHAPES = [(m, n, k) for m in (16, 64, 256, 1024)
                  for n, k in ((10240, 8192), (57344, 8192), (8192, 28672))]
"""Llama 3 70B's QKV, gate+up and down projections on one GPU, over decode batches."""

STEP_MODELS: dict[str, dict[str, Any]] = {
    "llama-300m": dict(layers=6, hidden=2048, heads=16, kv_heads=4, ffn=6144, vocab=128256,
                       gated=True, seq=4096, dtype="bf16",
                       why="swissai_llama_300m_alps_32gpu_mbs2_s4096 (gh200.yaml): 4 "
                           "micro-batches of 2 per GPU, measured 0.9 s a step on Alps"),
    "gpt-800m": dict(layers=16, hidden=2048, heads=8, kv_heads=8, ffn=8192, vocab=50304,
                     gated=False, seq=2048, dtype="fp16",
                     why="caraml_gpt800m_jedi_4gpu_mbs4_gbs2048_s2048 (gh200.yaml): 128 "
                         "micro-batches of 4 per GPU, measured 26.52 s a step on JEDI"),
    "gpt2-small": dict(layers=12, hidden=768, heads=12, kv_heads=12, ffn=3072, vocab=50304,
                       gated=False, seq=1024, dtype="bf16",
                       why="GPT-2 small: time per micro-batch over micro-batch 1-8"),
}
STEP_RUNS = [("llama-300m", 1), ("llama-300m", 2), ("llama-300m", 4), ("gpt-800m", 4),
             ("gpt2-small", 1), ("gpt2-small", 2), ("gpt2-small", 4), ("gpt2-small", 8)]

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class _Sampler(threading.Thread):
    """The GPU's SM clock (MHz) and board power (W), every 50 ms, while a kernel loop runs
    (NVML through nvidia-ml-py where it imports, else nvidia-smi)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self._read = _nvml_reader()

    def run(self) -> None:
        while not self.stop.is_set():
            with contextlib.suppress(Exception):
                value = self._read()
                if value:
                    self.samples.append(value)
            time.sleep(0.05)

    def medians(self) -> dict[str, float | int | None]:
        def median(values: list[float]) -> float | None:
            return sorted(values)[len(values) // 2] if values else None
        return {"sm_clock_mhz": median([c for c, _ in self.samples]),
                "power_w": median([p for _, p in self.samples]), "samples": len(self.samples)}


def _nvml_reader() -> Callable[[], tuple[float, float] | None]:
    try:
        import pynvml  # nvidia-ml-py
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)

        def read() -> tuple[float, float] | None:
            return (float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
                    pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3)
        return read
    except Exception:  # no NVML binding: nvidia-smi
        def smi() -> tuple[float, float] | None:
            values = _smi("clocks.sm,power.draw")
            return (float(values[0]), float(values[1])) if len(values) == 2 else None
        return smi


def _smi(query: str) -> list[str]:
    if shutil.which("nvidia-smi") is None:
        return []
    out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits",
                          "-i", "0"], capture_output=True, text=True, check=False)
    return [v.strip() for v in out.stdout.strip().split(",")] if out.returncode == 0 else []


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn: Callable[[], Any], seconds: float = 0.4, max_calls: int = 2000) -> tuple[float, int]:
    """Mean seconds per call of ``fn`` over about ``seconds`` (after warm-up), and the calls:
    GPU time between two CUDA events around back-to-back calls (wall time on a CPU)."""
    for _ in range(2):
        fn()
    _sync()
    start = time.perf_counter()
    fn()
    _sync()
    once = max(time.perf_counter() - start, 1e-6)
    calls = max(1, min(max_calls, int(seconds / once)))
    if not torch.cuda.is_available():
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - start) / calls, calls
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return begin.elapsed_time(end) / 1e3 / calls, calls


def gemm(m: int, n: int, k: int, dtype: str, device: str, fast_accum: bool = False,
         seconds: float = 0.4) -> dict[str, Any]:
    """One (m x k) @ (k x n) GEMM, the weight stored (n, k) as a Linear layer keeps it."""
    a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, k, device=device, dtype=torch.bfloat16)
    if dtype == "fp8":
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        one = torch.ones((), device=device, dtype=torch.float32)

        def fn() -> Any:
            return torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one,
                                    out_dtype=torch.bfloat16, use_fast_accum=fast_accum)
    else:
        def fn() -> Any:
            return a @ b.t()
    sampler = _Sampler()
    sampler.start()
    try:
        seconds_per, calls = timed(fn, seconds)
    finally:
        sampler.stop.set()
        sampler.join()
    row = {"m": m, "n": n, "k": k, "dtype": dtype, "seconds": seconds_per, "calls": calls,
           "tflops": 2 * m * n * k / seconds_per / 1e12, **sampler.medians()}
    if dtype == "fp8":
        row["fast_accum"] = fast_accum
    return row


def memory(device: str, gib: float = 1.0) -> dict[str, Any]:
    n = int(gib * (1 << 30)) // 2
    x = torch.randn(n, device=device, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    nbytes = 2 * n
    copy_s, _ = timed(lambda: y.copy_(x))
    add_s, _ = timed(lambda: torch.add(x, y, out=y))
    sum_s, _ = timed(lambda: x.sum(dtype=torch.float32))
    return {"bytes": nbytes, "copy_gb_s": 2 * nbytes / copy_s / 1e9,
            "add_gb_s": 3 * nbytes / add_s / 1e9, "sum_gb_s": nbytes / sum_s / 1e9,
            "how": f"{gib:g} GiB bf16 buffers: device copy_ (read + write), out-of-place add "
                   "(2 reads + 1 write), sum to fp32 (1 read); bytes counted once each"}


def _bandwidth_row(name: str, fn: Callable[[], Any], nbytes: float, how: str) -> dict[str, Any]:
    seconds, calls = timed(fn)
    return {"kernel": name, "seconds": seconds, "calls": calls, "bytes": nbytes,
            "gb_s": nbytes / seconds / 1e9, "how": how}


def elementwise(device: str, tokens: int = 8192, hidden: int = 4096,
                vocab: int = 128256, heads: int = 32, seq: int = 2048) -> list[dict[str, Any]]:
    """The memory-bound kernels of a training step at training sizes; bytes are the least a
    kernel must move (each input read once, each output written once)."""
    bf = torch.bfloat16
    x = torch.randn(tokens, hidden, device=device, dtype=bf, requires_grad=True)
    w = torch.ones(hidden, device=device, dtype=bf, requires_grad=True)
    b = torch.zeros(hidden, device=device, dtype=bf, requires_grad=True)
    act = 2 * tokens * hidden  # bytes of one (tokens, hidden) bf16 tensor
    rows: list[dict[str, Any]] = []
    dy = torch.randn_like(x)
    for name, norm in (("rms_norm", lambda: F.rms_norm(x, (hidden,), w)),
                       ("layer_norm", lambda: F.layer_norm(x, (hidden,), w, b))):
        rows.append(_bandwidth_row(f"{name}.fwd", lambda norm=norm: norm().detach(), 2 * act,
                                   f"({tokens}, {hidden}) bf16: read x, write y"))
        y = norm()
        rows.append(_bandwidth_row(
            f"{name}.bwd", lambda y=y: torch.autograd.grad(y, (x, w), dy, retain_graph=True),
            3 * act, f"({tokens}, {hidden}) bf16: read x and dy, write dx (weight "
                     "gradients' partial sums not counted)"))
    with torch.no_grad():
        g = torch.randn(tokens, 2 * hidden, device=device, dtype=bf)
        rows.append(_bandwidth_row("silu", lambda: F.silu(g), 2 * 2 * act,
                                   f"({tokens}, {2 * hidden}) bf16: read, write"))
        u = g[:, :hidden].contiguous()
        rows.append(_bandwidth_row("mul", lambda: u * x.detach(), 3 * act,
                                   f"({tokens}, {hidden}) bf16: 2 reads, 1 write"))
        s = torch.randn(heads, seq, seq, device=device, dtype=bf)
        scores = 2 * heads * seq * seq
        rows.append(_bandwidth_row("softmax.fwd", lambda: torch.softmax(s, -1), 2 * scores,
                                   f"({heads}, {seq}, {seq}) bf16 scores: read, write"))
    s.requires_grad_(True)
    p = torch.softmax(s, -1)
    dp = torch.randn_like(p)
    rows.append(_bandwidth_row(
        "softmax.bwd", lambda: torch.autograd.grad(p, s, dp, retain_graph=True), 3 * scores,
        f"({heads}, {seq}, {seq}) bf16: read y and dy, write dx"))
    logits = torch.randn(tokens, vocab, device=device, dtype=bf, requires_grad=True)
    target = torch.randint(0, vocab, (tokens,), device=device)
    rows.append(_bandwidth_row(
        "cross_entropy.fwd_bwd",
        lambda: torch.autograd.grad(F.cross_entropy(logits.float(), target), logits),
        2 * 2 * tokens * vocab, f"({tokens}, {vocab}) bf16 logits upcast to fp32 as "
        "Megatron and Hugging Face do: read the logits, write their gradient (the fp32 "
        "intermediates not counted)"))
    return rows


def attention(device: str) -> list[dict[str, Any]]:
    """SDPA forward and forward + backward; FLOPs counted as Megatron does (4 b s^2 h d
    forward, the causal mask not halved), so ``tflops`` is what ghsim's attention_efficiency
    is measured against and ``executed_tflops`` what a kernel that skips the masked half ran."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows: list[dict[str, Any]] = []
    cases = [(64, 2048, 16), (128, 2048, 16), (128, 4096, 32), (128, 8192, 32), (256, 2048, 8)]
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
        for head_dim, seq, heads in cases:
            batch = max(1, 16384 // seq)
            shape = (batch, heads, seq, head_dim)
            q, k, v = (torch.randn(shape, device=device, dtype=torch.bfloat16,
                                   requires_grad=True) for _ in range(3))
            do = torch.randn(shape, device=device, dtype=torch.bfloat16)
            flops = 4.0 * batch * heads * seq * seq * head_dim
            for causal in (True, False):
                row: dict[str, Any] = {"backend": backend.name, "batch": batch, "heads": heads,
                                       "seq": seq, "head_dim": head_dim, "causal": causal,
                                       "dtype": "bf16", "model_flops_fwd": flops}
                try:
                    with sdpa_kernel(backend):
                        def fwd(q: Any = q, k: Any = k, v: Any = v, causal: bool = causal) -> Any:
                            with torch.no_grad():
                                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                        def fwd_bwd(q: Any = q, k: Any = k, v: Any = v, do: Any = do,
                                    causal: bool = causal) -> Any:
                            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            return torch.autograd.grad(out, (q, k, v), do)
                        fwd_s, _ = timed(fwd, 0.3)
                        both_s, _ = timed(fwd_bwd, 0.4)
                except RuntimeError as error:
                    row["error"] = str(error)[:200]
                    rows.append(row)
                    continue
                executed = 0.5 if causal else 1.0
                row.update(fwd_s=fwd_s, bwd_s=both_s - fwd_s, fwd_bwd_s=both_s,
                           fwd_tflops=flops / fwd_s / 1e12,
                           bwd_tflops=2 * flops / (both_s - fwd_s) / 1e12,
                           fwd_bwd_tflops=3 * flops / both_s / 1e12,
                           fwd_bwd_executed_tflops=3 * flops * executed / both_s / 1e12)
                rows.append(row)
    return rows


def host(device: str, busy_n: int = 8192) -> dict[str, Any]:
    """CPU time per eager launch while the GPU is busy (so launches queue and the CPU time is
    the host's alone), and GPU time per tiny kernel launched eagerly and from a CUDA graph."""
    tiny = torch.zeros(16, device=device)
    big = torch.randn(busy_n, busy_n, device=device, dtype=torch.bfloat16)

    def busy() -> None:
        for _ in range(4):
            big @ big
    busy()
    ops, linears = (2000, 300) if busy_n >= 8192 else (20, 3)
    start = time.perf_counter()
    for _ in range(ops):
        tiny.add_(1.0)
    per_op = (time.perf_counter() - start) / ops
    _sync()
    linear = nn.Linear(busy_n // 4, busy_n // 4, bias=False, device=device, dtype=torch.bfloat16)
    x = torch.randn(busy_n, busy_n // 4, device=device, dtype=torch.bfloat16)
    with torch.no_grad():
        busy()
        start = time.perf_counter()
        for _ in range(linears):
            linear(x)
        per_linear = (time.perf_counter() - start) / linears
    _sync()
    result = {"eager_add_cpu_us": per_op * 1e6, "linear_forward_cpu_us": per_linear * 1e6,
              "cpu_model": _cpu_model(), "cpu_count": os.cpu_count(),
              "how": "CPU wall time per call while the GPU is busy (launches queue): a "
                     f"tensor.add_ on 16 elements, and a bf16 nn.Linear({busy_n // 4}, "
                     f"{busy_n // 4}) forward on {busy_n} tokens (the case of "
                     "NVIDIA/TransformerEngine#2053)"}
    if not torch.cuda.is_available():
        return result
    eager_s, _ = timed(lambda: [tiny.add_(1.0) for _ in range(100)], 0.3)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            tiny.add_(1.0)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(100):
            tiny.add_(1.0)
    graph_s, _ = timed(graph.replay, 0.3)
    result.update(eager_tiny_kernel_gpu_us=eager_s / 100 * 1e6,
                  graph_tiny_kernel_gpu_us=graph_s / 100 * 1e6,
                  how_gpu="GPU time (CUDA events) per tiny add_ kernel, 100 back to back: "
                          "launched eagerly (bound by the host's launch rate) and replayed "
                          "from a CUDA graph (the GPU's own gap between kernels)")
    return result


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def output_dir() -> Path:
    """The folder a probe writes into: its first argument (default: here), created."""
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir


def probe_info(script: str, how: str | None = None) -> dict[str, Any]:
    """What every probe's results start with: the GPU, the software, the power limit and
    clocks as nvidia-smi reports them, the host CPU, the date, the command and (if given)
    how the probe measures."""
    cuda = torch.cuda.is_available()
    return {"gpu": torch.cuda.get_device_name(0) if cuda else "none",
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if cuda else None,
            "power_limit_w": (_smi("power.limit") or [None])[0],
            "max_sm_clock_mhz": (_smi("clocks.max.sm") or [None])[0],
            "driver": (_smi("driver_version") or [None])[0],
            "cpu": _cpu_model(), "date": time.strftime("%Y-%m-%d"),
            "command": f"python benchmarks/device/{script} " + " ".join(sys.argv[1:]),
            **({"how": how} if how else {})}


def run_sections(out: Path, results: dict[str, Any],
                 sections: list[tuple[str, Callable[[], Any]]], shown: int = 0) -> None:
    """Run each section into ``results[name]`` (an error is kept as the section's data, so
    the other sections still run), its seconds into ``results["section_s"]``, and rewrite
    ``out`` after each, so an interrupted run keeps what it measured; print each as it ends
    (the first ``shown`` characters of its data as JSON, if given)."""
    begin = time.perf_counter()
    for name, run in sections:
        start = time.perf_counter()
        try:
            results[name] = run()
        except Exception as error:  # keep the other sections' data
            results[name] = {"error": f"{type(error).__name__}: {str(error)[:300]}"}
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        results.setdefault("section_s", {})[name] = round(time.perf_counter() - start, 1)
        out.write_text(json.dumps(results, indent=1))
        excerpt = f": {json.dumps(results[name])[:shown]}" if shown else " done"
        print(f"[{time.perf_counter() - begin:6.1f} s] {name}{excerpt}", flush=True)


def save_trace(prof: Any, trace: Path) -> list[dict[str, Any]]:
    """Write a profiler's Chrome trace gzipped to ``trace`` (a ``.json.gz`` path) and return
    its GPU kernel events."""
    raw = trace.with_suffix("")
    prof.export_chrome_trace(str(raw))
    with raw.open("rb") as src, gzip.open(trace, "wb") as dst:
        shutil.copyfileobj(src, dst)
    events = json.loads(raw.read_text())["traceEvents"]
    raw.unlink()
    return [e for e in events if e.get("cat") == "kernel"]


class Block(nn.Module):
    """A pre-norm transformer layer as Llama (RMSNorm, GQA, SwiGLU) or GPT (LayerNorm, GELU)
    have it, without biases or RoPE, attention through SDPA."""

    def __init__(self, hidden: int, heads: int, kv_heads: int, ffn: int, gated: bool) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        norm = nn.RMSNorm if gated else nn.LayerNorm
        self.norm1, self.norm2 = norm(hidden), norm(hidden)
        self.qkv = nn.Linear(hidden, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.proj = nn.Linear(hidden, hidden, bias=False)
        self.up = nn.Linear(hidden, 2 * ffn if gated else ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)
        self.gated = gated

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(
            [self.heads * self.head_dim, self.kv_heads * self.head_dim,
             self.kv_heads * self.head_dim], dim=-1)
        q = q.view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.kv_heads != self.heads:
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
        u = self.up(self.norm2(x))
        if self.gated:
            gate, up = u.chunk(2, dim=-1)
            u = F.silu(gate) * up
        else:
            u = F.gelu(u, approximate="tanh")
        return x + self.down(u)


class TinyLM(nn.Module):
    def __init__(self, layers: int, hidden: int, heads: int, kv_heads: int, ffn: int,
                 vocab: int, gated: bool, **_: Any) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        # Megatron's init_method_std: logits near zero, so the loss's gradient is dense, as in
        # training (N(0, 1) embeddings tied to the head give one-hot softmaxes and gradients
        # that are almost all exact zeros, which a GEMM multiplies at a fraction of the power)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(hidden, heads, kv_heads, ffn, gated)
                                    for _ in range(layers))
        self.norm = nn.RMSNorm(hidden) if gated else nn.LayerNorm(hidden)

    def forward(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.norm(x), self.embed.weight)  # tied embeddings
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1))


def _params(spec: dict[str, Any]) -> int:
    h, f, layers = spec["hidden"], spec["ffn"], spec["layers"]
    d = h // spec["heads"]
    per_layer = h * (spec["heads"] + 2 * spec["kv_heads"]) * d + h * h \
        + h * f * (3 if spec["gated"] else 2)
    return layers * per_layer + spec["vocab"] * h


def training_step(name: str, micro_batch: int, device: str, seq: int | None = None,
                  timed_micro_batches: int = 4, trace: Path | None = None) -> dict[str, Any]:
    """Forward + backward of ``micro_batch`` sequences (per micro-batch: GPU time from CUDA
    events and the CPU's issue time before it waits), and one fused AdamW step."""
    spec = STEP_MODELS[name]
    seq = seq or spec["seq"]
    dtype = _DTYPES[spec["dtype"]]
    model = TinyLM(**spec).to(device=device, dtype=dtype)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4,
                                  fused=torch.cuda.is_available())
    tokens = torch.randint(0, spec["vocab"], (micro_batch, seq), device=device)
    labels = torch.randint(0, spec["vocab"], (micro_batch, seq), device=device)

    def micro() -> None:
        model(tokens, labels).backward()

    for _ in range(2):
        micro()
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)
    _sync()
    issue, gpu = [], []
    for _ in range(timed_micro_batches):
        start = time.perf_counter()
        if torch.cuda.is_available():
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            micro()
            end.record()
            issue.append(time.perf_counter() - start)
            torch.cuda.synchronize()
            gpu.append(begin.elapsed_time(end) / 1e3)
        else:
            micro()
            issue.append(time.perf_counter() - start)
            gpu.append(issue[-1])
    optimizer_s, _ = timed(optimizer.step, 0.2, max_calls=20)
    row = {"model": name, "micro_batch": micro_batch, "seq": seq, "dtype": spec["dtype"],
           "params": _params(spec), "micro_batch_s": sorted(gpu)[len(gpu) // 2],
           "micro_batch_issue_s": sorted(issue)[len(issue) // 2], "optimizer_s": optimizer_s,
           "tokens_per_s": micro_batch * seq / sorted(gpu)[len(gpu) // 2], "why": spec["why"],
           "how": "plain PyTorch eager (no Transformer Engine, no torch.compile, no RoPE): "
                  "weights in the dtype, tied embeddings, logits upcast to fp32 for the loss, "
                  "attention through SDPA (cuDNN or flash; GQA by repeating K and V), "
                  "fused AdamW on the weights; median "
                  f"of {timed_micro_batches} micro-batches after 2 warm-ups"}
    if trace is not None and torch.cuda.is_available():
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            micro()
            _sync()
        save_trace(prof, trace)
        row["trace"] = trace.name
    return row


def main() -> None:
    out_dir = output_dir()
    quick = "--quick" in sys.argv  # tiny sizes on a CPU, to test this script
    out = out_dir / "hopper_probe.json"
    device = "cuda" if torch.cuda.is_available() else "cpu"
    results: dict[str, Any] = {"info": probe_info("hopper_probe.py")}
    if quick:
        run_sections(out, results, [
            ("memory", lambda: memory(device, 1 / 64)),
            ("elementwise", lambda: elementwise(device, 256, 256, 1024, 2, 128)),
            ("gemm", lambda: [gemm(256, 256, 256, "bf16", device, seconds=0.05)]),
            ("host", lambda: host(device, 256)),
            ("steps", lambda: [training_step("gpt2-small", 1, device, seq=64,
                                             timed_micro_batches=1)])])
        return
    begin = time.perf_counter()

    def gemms() -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        fp8 = True
        for m, n, k in TRAINING_SHAPES + SERVING_SHAPES:
            for dtype, fast in (("bf16", False), ("fp8", True), ("fp8", False)):
                if dtype == "fp8" and (not fp8 or ((m, n, k) in SERVING_SHAPES and not fast)):
                    continue
                try:
                    rows.append(gemm(m, n, k, dtype, device, fast, seconds=0.3))
                except (RuntimeError, TypeError) as error:  # no FP8 GEMM on this GPU/torch
                    rows.append({"m": m, "n": n, "k": k, "dtype": dtype,
                                 "error": str(error)[:200]})
                    fp8 = fp8 and dtype != "fp8"
            torch.cuda.empty_cache()
            results["gemm"] = rows
            out.write_text(json.dumps(results, indent=1))
        return rows
    run_sections(out, results, [
        ("memory", lambda: memory(device)),
        ("host", lambda: host(device)),
        ("elementwise", lambda: elementwise(device)),
        ("attention", lambda: attention(device)),
        ("steps", lambda: [
            training_step(name, mb, device,
                          trace=out_dir / f"{name}_mbs{mb}_trace.json.gz"
                          if (name, mb) in (("llama-300m", 2), ("gpt2-small", 1)) else None)
            for name, mb in STEP_RUNS]),
        ("gemm", gemms)])
    summary = {k: results[k] for k in ("info", "memory", "host", "section_s")}
    print(json.dumps(summary, indent=1))
    for row in results.get("steps", []):
        if isinstance(row, dict) and "micro_batch_s" in row:
            print(f"{row['model']} mbs {row['micro_batch']}: {row['micro_batch_s'] * 1e3:.1f} ms "
                  f"per micro-batch (issued in {row['micro_batch_issue_s'] * 1e3:.1f} ms), "
                  f"optimizer {row['optimizer_s'] * 1e3:.1f} ms")
    for row in results.get("attention", []):
        if isinstance(row, dict) and "fwd_tflops" in row:
            print(f"{row['backend']} d{row['head_dim']} s{row['seq']} causal={row['causal']}: "
                  f"fwd {row['fwd_tflops']:.0f}, bwd {row['bwd_tflops']:.0f}, "
                  f"fwd+bwd {row['fwd_bwd_tflops']:.0f} TFLOP/s (Megatron count)")
    for row in results.get("elementwise", []):
        if isinstance(row, dict) and "gb_s" in row:
            print(f"{row['kernel']}: {row['gb_s']:.0f} GB/s")
    for row in results.get("gemm", []):
        if "tflops" in row:
            print(f"{row['dtype']}{'f' if row.get('fast_accum') else ''} "
                  f"{row['m']}x{row['n']}x{row['k']}: {row['tflops']:.0f} TFLOP/s at "
                  f"{row['sm_clock_mhz']} MHz, {row['power_w']} W")
    print(f"total {time.perf_counter() - begin:.0f} s")


if __name__ == "__main__":
    main()
