"""PyTorch's non-vectorized element-wise kernels: ``gpu.compute.strided_elementwise_gelem_s``.

When an operand of a point-wise op is a strided view or a broadcast (SiLU on a ``chunk`` of a
fused up-projection, a bias broadcast over the tokens, the copy that makes a permuted tensor
contiguous), PyTorch's TensorIterator runs its non-vectorized ``at::native::elementwise_kernel``
instead of ``vectorized_elementwise_kernel``. Two sets of real traces hold such kernels with
sizes that can be read off:

* **H200** (ghsim's probe of 2026-12-04, ``benchmarks/device/data/h200-2026-12-04``): three
  plain-PyTorch Llama-shaped models, five kinds a layer: SiLU on the gate half of the
  up-projection (reads 2 bytes an element, writes 2), its product with the up half and the
  gradient's (reads 4, writes 2), SiLU's backward (reads 4, writes 2), the
  ``repeat_interleave`` of grouped keys and values to every head (a copy, 2 + 2) and the copy
  of their summed gradients (2 + 2). Their sizes follow from the models
  (``benchmarks/device/power_probe.py`` MODELS).
* **A100** (the Megatron-LM TP 8 GPT forward passes of ``tests/data/traces``, fp16, 8 ranks):
  the QKV projection's bias add (a broadcast), the copy of the attention output out of its
  permuted layout, the masked fill of the embedding, and the loss's copy, subtraction and
  division over the logits (the last two in fp32: 8 bytes an element). Their sizes are the
  ``Input Dims`` of the PyTorch op that launched each kernel.

What they show: every kind runs at about the same number of elements a second whether it moves
4, 6 or 8 bytes an element (H200 284-362 billion, A100 190-247), so the SMs' work per element
bounds them, not HBM. Per SM and cycle the two GPUs agree: 218 G/s over 108 SMs at 1.41 GHz and
322 G/s over 132 SMs at about 1.7 are both 1.43. Inside the H200 the clock matters less: the
runs at 1.55-1.59 GHz (the 8B- and 70B-width layers, at the board's 700 W limit) were on average
7 % slower than the one at 1.83-1.98 GHz (the 300M), for a 13-22 % lower clock. ghsim costs
these kernels at each part's measured element rate (the mean over its kinds' medians), the same
on every 132-SM Hopper part whatever its HBM, against the element-wise rate (the A100's
LayerNorm fraction of each part's HBM peak) it had costed them at before.

Run: ``python benchmarks/strided_kernels.py`` (a few seconds).
"""

from __future__ import annotations

import gzip
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "device" / "data" / "h200-2026-12-04"
A100_TRACES = sorted((ROOT / "tests" / "data" / "traces" / "astra-sim_astra-sim").glob(
    "*megatron_kineto_*.json.gz"))
NON_VECTORIZED = "at::native::elementwise_kernel"
MIN_ELEMENTS = 1 << 20
"""Smaller kernels (the A100 traces' token-index copies, 8,192 elements) measure their launch."""

H200_RUNS = {
    # trace: (model as benchmarks/device/power_probe.py MODELS has it, SM clock MHz the run held)
    "dense_llama-300m_steady_trace.json.gz": (
        dict(layers=6, hidden=2048, heads=16, kv_heads=4, ffn=6144, seq=4096, micro_batch=2),
        "1830-1980 (power_log_dense.txt: steady, during the profile)"),
    "llama-8b-layers_bf16_steady_trace.json.gz": (
        dict(layers=4, hidden=4096, heads=32, kv_heads=8, ffn=14336, seq=4096, micro_batch=2),
        "1590 (fp8_probe.json steady_llama-8b-layers_bf16)"),
    "llama-70b-layers_bf16_steady_trace.json.gz": (
        dict(layers=2, hidden=8192, heads=64, kv_heads=8, ffn=28672, seq=4096, micro_batch=1),
        "1545 (fp8_probe.json steady_llama-70b-layers_bf16)"),
}
KINDS = ("silu", "mul", "silu_backward", "kv_repeat", "kv_grad_copy")
BYTES_PER_ELEMENT = {"silu": 4, "mul": 6, "silu_backward": 6, "kv_repeat": 4, "kv_grad_copy": 4}

Row = tuple[str, str, float, int, float]
"""(run, kind, median us, elements a kernel, billion elements a second)."""


def _events(trace: Path) -> list[dict[str, Any]]:
    data = json.loads(gzip.decompress(trace.read_bytes()))
    return data["traceEvents"] if isinstance(data, dict) else data


def kind_of(name: str, us: float, split_us: float) -> str | None:
    """The kind of an H200 probe's non-vectorized kernel, or None for any other kernel; the
    copies split by duration (the repeated keys and values are ``heads / kv_heads`` times the
    size of their gradients' copies)."""
    if NON_VECTORIZED not in name:
        return None
    if "direct_copy_kernel" in name:
        return "kv_repeat" if us > split_us else "kv_grad_copy"
    if "silu_backward" in name:
        return "silu_backward"
    return "silu" if "silu" in name else "mul" if "MulFunctor" in name else None


def elements(kind: str, m: dict[str, int]) -> int:
    """Elements one H200 kernel of ``kind`` processes in the model ``m``."""
    tokens = m["seq"] * m["micro_batch"]
    head_dim = m["hidden"] // m["heads"]
    if kind in ("silu", "mul", "silu_backward"):
        return tokens * m["ffn"]
    if kind == "kv_repeat":
        return tokens * m["heads"] * head_dim
    return tokens * m["kv_heads"] * head_dim


def h200_rows() -> list[Row]:
    """Each kind's median in each of the H200 probe's three models."""
    rows = []
    for trace, (model, _) in H200_RUNS.items():
        kernels = [e for e in _events(DATA / trace) if e.get("cat") == "kernel"]
        copy_us = [e["dur"] for e in kernels
                   if NON_VECTORIZED in e["name"] and "direct_copy_kernel" in e["name"]]
        split = (max(copy_us) + min(copy_us)) / 2
        found: dict[str, list[float]] = defaultdict(list)
        for event in kernels:
            kind = kind_of(event["name"], event["dur"], split)
            if kind is not None:
                found[kind].append(event["dur"])
        for kind in KINDS:
            us, n = statistics.median(found[kind]), elements(kind, model)
            rows.append((trace.split("_steady")[0], kind, us, n, n / us / 1e3))
    return rows


def _launching_op(launch: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The innermost PyTorch op with input sizes around a kernel's launch on its thread."""
    around = [o for o in ops if o["ts"] <= launch["ts"]
              and o["ts"] + o["dur"] >= launch["ts"] + launch["dur"]
              and o.get("args", {}).get("Input Dims")]
    return min(around, key=lambda o: o["dur"]) if around else None


def a100_rows() -> list[Row]:
    """Each (op, input sizes)'s median over the eight A100 ranks' forward passes."""
    found: dict[tuple[str, str], list[float]] = defaultdict(list)
    size: dict[tuple[str, str], int] = {}
    for trace in A100_TRACES:
        events = _events(trace)
        launches = {e["args"]["correlation"]: e for e in events
                    if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
        ops: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
        for event in events:
            if event.get("cat") == "cpu_op":
                ops[(event["pid"], event["tid"])].append(event)
        for kernel in events:
            if kernel.get("cat") != "kernel" or NON_VECTORIZED not in kernel["name"]:
                continue
            launch = launches.get(kernel["args"].get("correlation"))
            op = launch and _launching_op(launch, ops[(launch["pid"], launch["tid"])])
            if op is None:
                continue
            dims = op["args"]["Input Dims"]
            n = math.prod(dims[0])
            if n >= MIN_ELEMENTS:
                key = (op["name"], f"{dims[0]} {op['args'].get('Input type', [''])[0]}")
                found[key].append(kernel["dur"])
                size[key] = n
    return [(name, shape, statistics.median(us), size[(name, shape)],
             size[(name, shape)] / statistics.median(us) / 1e3)
            for (name, shape), us in sorted(found.items())]


def mean_rate(rows: list[Row]) -> float:
    """The part's constant: the mean of its kinds' element rates, billion a second."""
    return statistics.fmean(row[4] for row in rows)


def main() -> int:
    h200, a100 = h200_rows(), a100_rows()
    print(f"{'H200 run':24s} {'kernel':14s} {'median us':>9s} {'elements':>11s} {'G el/s':>7s}")
    for run, kind, us, n, rate in h200:
        print(f"{run:24s} {kind:14s} {us:9.1f} {n:11,d} {rate:7.1f}")
    for trace, (_, clock) in H200_RUNS.items():
        print(f"  {trace.split('_steady')[0]}: SM clock {clock} MHz")
    by = {(run, kind): rate for run, kind, _, _, rate in h200}
    fast = h200[0][0]
    ratios = [by[(fast, kind)] / by[(run, kind)] for run, kind in by if run != fast]
    print(f"  {fast} (the highest clock) over the others, kind by kind: "
          f"{min(ratios):.3f}-{max(ratios):.3f}, mean {statistics.fmean(ratios):.3f}")
    print(f"\n{'A100 op':18s} {'input':38s} {'median us':>9s} {'elements':>11s} {'G el/s':>7s}")
    for name, shape, us, n, rate in a100:
        print(f"{name:18s} {shape:38s} {us:9.1f} {n:11,d} {rate:7.1f}")
    for part, rows, sms, ghz in (("H200", h200, 132, 1.7), ("A100", a100, 108, 1.41)):
        rate = mean_rate(rows)
        print(f"\n{part}: {min(r[4] for r in rows):.0f}-{max(r[4] for r in rows):.0f} G "
              f"elements/s, mean {rate:.1f} over {len(rows)} medians "
              f"(gpu.compute.strided_elementwise_gelem_s); {rate / (sms * ghz):.2f} an SM a "
              f"cycle at {ghz} GHz", end="")
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
