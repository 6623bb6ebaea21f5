"""Causal attention as ghsim costs it, against published long-context runs.

ghsim costs a causal fused attention kernel as the H200 probe measured cuDNN's kernels
(benchmarks/device/data/h200-2026-12-04, docs/hardware-facts.md T4#14; ``python
benchmarks/h200_kernels.py`` compares every kernel probed): they skip the tiles above the
diagonal, executing ``1/2 + 208/s`` of the square Megatron counts, at ``481 s / (s + 220)``
TFLOP/s per executed FLOP, so that on Megatron's count they run 711 / 822 / 882 TFLOP/s at s =
2k / 4k / 8k. Until 2026-12-05 ghsim costed every kernel like a full square at 571 TFLOP/s
(FlashAttention-3's non-causal rate at 4k, ``attention_efficiency`` 0.577), 1.2-1.5x too slow
for causal kernels and more so at long sequences.

The published runs that test this are Megatron-MoE-ModelZoo's long-context rows for
Qwen3-235B-A22B on 256 H100 (yanring/Megatron-MoE-ModelZoo@e8650517d:
best_practice/qwen3/readme.md, "Long Context"; TP4, EP8, PP8, VPP4, GBS 256, DeepEP, BF16,
selective recompute of the norms and the MoE block, context parallelism 1/2/4/8 at 16k/32k/64k/
128k), whose model TFLOP/s per GPU with forced load balance rise from 295 to 389 as the
attention's share grows. This script simulates them as ghsim ships (``shipped``) and with the
former full-square costing patched in (``full square``: a record of what it gave, not a model
ghsim ships), and prints both against the table.

Run: ``python benchmarks/causal_attention.py`` (about two minutes);
``python benchmarks/causal_attention.py --sets`` prints, in addition, each shipped validation set's
MAPE and worst error with the former costing patched in (about ten minutes).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from moe_layouts import base_file  # noqa: E402

from ghsim.config import load_scenario  # noqa: E402
from ghsim.costmodel.gpu import GpuCostModel  # noqa: E402
from ghsim.engine.simulate import simulate  # noqa: E402
from ghsim.engine.validation import summarize, validate_file  # noqa: E402
from ghsim.workload.ir import Kernel  # noqa: E402

BASE = "zoo_qwen3_235b_h100_256_tp4_ep8_pp8"
FULL_SQUARE = 0.577 / 0.486
"""The former attention_efficiency over today's on every Hopper part (0.577, 0.616 and their
FlashAttention-2 shares against 0.486, 0.519 and theirs): the full-square costing's rate."""

# sequence: (context parallel size, measured model TFLOP/s per GPU forced-balanced, dropless)
ROWS: dict[int, tuple[int, float, float]] = {
    16384: (1, 295.0, 237.0), 32768: (2, 335.0, 277.0),
    65536: (4, 368.0, 320.0), 131072: (8, 389.0, 357.0)}


def _full_square_attention_s(self: GpuCostModel, kernel: Kernel) -> float:
    """The former costing: the full square at one rate, whatever the sequence and head dim."""
    rate = self.peak_of(kernel.dtype) * self.attention_efficiency_of(kernel.dtype) * FULL_SQUARE
    return max(kernel.flops / rate, kernel.bytes / self.hbm_bytes_per_s)


@contextmanager
def full_square_attention() -> Iterator[None]:
    original = GpuCostModel.attention_s
    GpuCostModel.attention_s = _full_square_attention_s  # type: ignore[method-assign]
    try:
        yield
    finally:
        GpuCostModel.attention_s = original  # type: ignore[method-assign]


def model_tflops(base: Path, seq: int, cp: int) -> float:
    overrides = [f"training.seq_len={seq}", f"parallelism.cp={cp}", f"parallelism.dp={8 // cp}",
                 "training.global_batch=256", "parallelism.recompute=selective",
                 "parallelism.recompute_modules=[layernorm,moe]"]
    tflops = simulate(load_scenario(base, overrides)).model_tflops_per_gpu
    assert tflops is not None
    return tflops


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = base_file(Path(tmp), BASE)
        shipped = {seq: model_tflops(base, seq, cp) for seq, (cp, _, _) in ROWS.items()}
        with full_square_attention():
            former = {seq: model_tflops(base, seq, cp) for seq, (cp, _, _) in ROWS.items()}
    print("Qwen3-235B-A22B, 256 H100, TP4 EP8 PP8 VPP4: model TFLOP/s per GPU")
    print(f"{'seq':>7s} {'cp':>3s} {'table (forced)':>15s} {'shipped':>14s} {'full square':>14s}")
    for seq, (cp, forced, _) in ROWS.items():
        a, b = shipped[seq], former[seq]
        print(f"{seq:7d} {cp:3d} {forced:15.0f} {a:7.1f} ({a / forced - 1:+5.1%})"
              f" {b:7.1f} ({b / forced - 1:+5.1%})")
    if "--sets" in sys.argv[1:]:
        print("\nThe training validation sets with the former full-square costing (MAPE, worst):")
        for name in ("calibration", "gh200", "moe"):
            with full_square_attention():  # in this process: workers would not see the patch
                summary = summarize(validate_file(ROOT / "validation" / f"{name}.yaml",
                                                  workers=1))
            print(f"{name:12s} {summary['mape']:6.1%} {summary['max_abs_error']:6.1%}")


if __name__ == "__main__":
    main()
