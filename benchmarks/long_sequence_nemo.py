"""NeMo's published long-sequence runs of Llama-2 7B on DGX H100, on the kernels they ran.

NVIDIA/NeMo@8275bf6cfd docs/source/performance/performance_long_sequence.md gives Llama-2 7B in
FP8 on DGX H100 (NeMo 24.03.01 container) from 4k to 1M tokens a sequence, one GPU per 1k
tokens, with context parallelism from 32k on, as model TFLOP/s per GPU (Megatron's count: causal
attention not halved). NeMo's launcher of that release ran every job with NVTE_FUSED_ATTN=0
(NVIDIA/NeMo-Framework-Launcher, tag 24.03.01, launcher_scripts/conf/config.yaml: "Disable
cudnn FA until we've tested it more"), so Transformer Engine ran FlashAttention-2's kernels, not
cuDNN's. As the sequence grows attention takes most of the step, so the two kernels' rates
(docs/hardware-facts.md T4#14: FlashAttention-2 at 0.59 of cuDNN's) part the predictions: on
FlashAttention-2's kernels ghsim is within -12 % to +5 % of every row, on cuDNN's +13 % to +47 %
above it. The rows from 32k on also check the context-parallel ring, which runs beside the
attention (ghsim.engine.body): with its exchange exposed, the 512k and 1M rows (CP 16 and 32,
the ring across nodes) came out 26-28 % short.

The table gives no batch size: each row is taken at 16 micro-batches of one sequence per data-
parallel rank (ASSUMED). With no pipeline that moves only the gradient reduction's small share;
the 8k row's PP 2 pays a bubble of 1/17 for it. The rest of the scenario (FP8 delayed scaling,
BF16 gradients, master-weight remainders) is the NeMo 24.07 Llama-2 7B calibration point's.
Run ``python benchmarks/long_sequence_nemo.py`` (a few seconds).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from moe_layouts import base_file  # noqa: E402

from ghsim.config import load_scenario  # noqa: E402
from ghsim.engine.simulate import simulate  # noqa: E402

BASE = "nemo24.07_llama2-7b_h100_8"
MICRO_BATCHES = 16
"""Micro-batches a data-parallel rank runs a step (ASSUMED: the table gives no batch)."""

# sequence length in k tokens: (GPUs, TP, PP, DP, CP, the table's model TFLOP/s per GPU)
ROWS: dict[int, tuple[int, int, int, int, int, float]] = {
    4: (4, 1, 1, 4, 1, 768.0),
    8: (8, 1, 2, 4, 1, 730.0),
    16: (16, 2, 1, 8, 1, 660.0),
    32: (32, 2, 1, 8, 2, 610.0),
    64: (64, 4, 1, 8, 2, 574.0),
    128: (128, 4, 1, 8, 4, 555.0),
    256: (256, 4, 1, 8, 8, 549.0),
    512: (512, 8, 1, 4, 16, 549.0),
    1024: (1024, 8, 1, 4, 32, 536.0),
}


def model_tflops(base: Path, k: int, attention: str) -> float:
    """ghsim's model TFLOP/s per GPU for the row of ``k``k tokens on ``attention``'s kernels."""
    gpus, tp, pp, dp, cp, _ = ROWS[k]
    overrides = [f"num_gpus={gpus}", f"training.seq_len={k * 1024}", f"parallelism.tp={tp}",
                 f"parallelism.pp={pp}", f"parallelism.dp={dp}", f"parallelism.cp={cp}",
                 f"training.global_batch={dp * MICRO_BATCHES}",
                 f"parallelism.sequence_parallel={'true' if tp > 1 else 'false'}",
                 f"training.attention={attention}"]
    tflops = simulate(load_scenario(base, overrides)).model_tflops_per_gpu
    assert tflops is not None
    return tflops


def main() -> None:
    print("Llama-2 7B FP8 on DGX H100 (NeMo 24.03.01): model TFLOP/s per GPU")
    print(f"{'seq':>6s} {'layout':>18s} {'table':>6s} {'FlashAttention-2 (ran)':>23s}"
          f" {'cuDNN':>15s}")
    with tempfile.TemporaryDirectory() as tmp:
        base = base_file(Path(tmp), BASE, "calibration")
        for k, (_, tp, pp, dp, cp, table) in ROWS.items():
            fa2, cudnn = (model_tflops(base, k, a) for a in ("flash2", "flash"))
            layout = f"TP{tp} PP{pp} DP{dp} CP{cp}"
            print(f"{k:5d}k {layout:>18s} {table:6.0f} {fa2:14.0f} ({fa2 / table - 1:+6.1%})"
                  f" {cudnn:6.0f} ({cudnn / table - 1:+6.1%})")


if __name__ == "__main__":
    main()
