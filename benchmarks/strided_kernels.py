"""PyTorch's non-vectorized element-wise kernels on an H200: ``strided_elementwise_gb_s``.

When an operand of a point-wise op is a strided view or a broadcast (SiLU on a ``chunk`` of a
fused up-projection, a bias or RoPE's ``cos`` broadcast over tokens or heads, the copy that
makes a transposed tensor contiguous), PyTorch's TensorIterator runs its non-vectorized
``at::native::elementwise_kernel`` instead of ``vectorized_elementwise_kernel``. ghsim's H200
probe (2026-12-04, ``benchmarks/device/data/h200-2026-12-04``) traced three plain-PyTorch
Llama-shaped models whose every micro-batch runs five such kernels a layer: SiLU on the gate
half of the up-projection (reads 2 bytes, writes 2), its product with the up half (and, backward,
the gradient's product with it: reads 4, writes 2), SiLU's backward (reads 4, writes 2), the
``repeat_interleave`` of grouped keys and values to every head (a copy, 2 + 2) and, backward,
the copy of their summed gradients into the projection's layout (2 + 2).

What the traces show: every kind runs at about the same number of elements a second, 284-362
billion, whether it moves 4 or 6 bytes an element, and in the models whose clock sat at
1.55-1.59 GHz (the 8B- and 70B-width layers, at the board's 700 W limit) on average 7 % slower
than in the one at 1.83-1.98 GHz (the 300M), for a 13-22 % lower clock. So these kernels are
bound by the SMs' work per element (the index arithmetic of strided operands), not by HBM:
ghsim costs them at one absolute rate, the mean bytes a second of the fifteen kernel medians
below, the same on every 132-SM Hopper part whatever its HBM
(``gpu.compute.strided_elementwise_gb_s``), against the element-wise rate (the A100's
LayerNorm fraction of the HBM peak) it had costed them at before.

Run: ``python benchmarks/strided_kernels.py`` (a second).
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "device" / "data" / "h200-2026-12-04"
SMS = 132

RUNS = {
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


def kind_of(name: str, us: float, split_us: float) -> str | None:
    """The kind of a non-vectorized element-wise kernel, or None for any other kernel; the
    copies split by duration (the repeated keys and values are ``heads / kv_heads`` times the
    size of their gradients' copies)."""
    if "at::native::elementwise_kernel" not in name:
        return None
    if "direct_copy_kernel" in name:
        return "kv_repeat" if us > split_us else "kv_grad_copy"
    if "silu_backward" in name:
        return "silu_backward"
    return "silu" if "silu" in name else "mul" if "MulFunctor" in name else None


def elements(kind: str, m: dict[str, int]) -> int:
    """Elements one kernel of ``kind`` processes in the model ``m``."""
    tokens = m["seq"] * m["micro_batch"]
    head_dim = m["hidden"] // m["heads"]
    if kind in ("silu", "mul", "silu_backward"):
        return tokens * m["ffn"]
    if kind == "kv_repeat":
        return tokens * m["heads"] * head_dim
    return tokens * m["kv_heads"] * head_dim


def medians(trace: Path, model: dict[str, int]) -> dict[str, float]:
    """Median microseconds of each kind's kernels in one steady micro-batch's trace."""
    events = json.loads(gzip.decompress(trace.read_bytes()))
    events = events["traceEvents"] if isinstance(events, dict) else events
    copy_us = [e["dur"] for e in events if e.get("cat") == "kernel"
               and "at::native::elementwise_kernel" in e["name"]
               and "direct_copy_kernel" in e["name"]]
    split = (max(copy_us) + min(copy_us)) / 2
    found: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for event in events:
        if event.get("cat") == "kernel":
            kind = kind_of(event["name"], event["dur"], split)
            if kind is not None:
                found[kind].append(event["dur"])
    return {kind: statistics.median(us) for kind, us in found.items() if us}


def rows() -> list[tuple[str, str, float, int, float, float]]:
    """(run, kind, median us, elements, G elements/s, GB/s) of every kind in every run."""
    out = []
    for trace, (model, _) in RUNS.items():
        for kind, us in medians(DATA / trace, model).items():
            n = elements(kind, model)
            out.append((trace.split("_steady")[0], kind, us, n, n / us / 1e3,
                        n * BYTES_PER_ELEMENT[kind] / us / 1e3))
    return out


def main() -> int:
    table = rows()
    print(f"{'run':28s} {'kernel':14s} {'median us':>9s} {'elements':>11s} "
          f"{'G el/s':>7s} {'GB/s':>7s}")
    for run, kind, us, n, rate, gb_s in table:
        print(f"{run:28s} {kind:14s} {us:9.1f} {n:11,d} {rate:7.1f} {gb_s:7.1f}")
    for trace, (_, clock) in RUNS.items():
        print(f"  {trace.split('_steady')[0]}: SM clock {clock} MHz")
    by = {(run, kind): per_s for run, kind, _, _, per_s, _ in table}
    fast = table[0][0]
    ratios = [by[(fast, kind)] / by[(run, kind)] for run, kind in by if run != fast]
    print(f"{fast} (the highest clock) over the others, kind by kind: "
          f"{min(ratios):.3f}-{max(ratios):.3f}, mean {statistics.fmean(ratios):.3f}")
    rates = [r[4] for r in table]
    mean_gb_s = statistics.fmean(r[5] for r in table)
    print(f"elements a second: {min(rates):.0f}-{max(rates):.0f} G, mean "
          f"{statistics.fmean(rates):.1f} G ({statistics.fmean(rates) / SMS / 1.7:.2f} an SM "
          f"a cycle at 1.7 GHz)")
    print(f"bytes a second, mean of the {len(table)} medians: {mean_gb_s:.0f} GB/s "
          f"(gpu.compute.strided_elementwise_gb_s of the Hopper parts); "
          f"{mean_gb_s / 4800:.3f} of the H200's 4,800 GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
