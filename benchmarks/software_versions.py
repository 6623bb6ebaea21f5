"""The same models on the same DGX H100 layouts under NVIDIA's 2024 and 2025-26 software.

The calibration set's NeMo 24.07 runs (validation/calibration.yaml) ran their attention on
FlashAttention-2: NeMo's 24.07 launcher set NVTE_FUSED_ATTN=0, so Transformer Engine skipped
cuDNN's fused attention (the points' notes); their scenarios say ``training.attention: flash2``.
NVIDIA later published the same models on DGX H100 in FP8 again, on Transformer Engine 2 with
its default cuDNN attention (``training.attention: flash``):

- NVIDIA/Megatron-LM@bf6e99859f (2025-06-14) examples/llama/README.md, "FP8 Performance" (the
  configurations of NeMo's performance scripts): Llama-3 8B on 8 GPUs (GBS 128, MBS 1, seq
  8192, TP 1, CP 2, the 24.07 layout) at 13,812 tokens/s/GPU against 24.07's 12,036, and
  Llama-3 70B on 64 GPUs (TP 4, PP 8, VP 5) at 1,621.
- NVIDIA-NeMo/Megatron-Bridge@067f987df docs/performance-summary-archive.md, DGX-H100 rows,
  FP8 with per-tensor current scaling (FP8-CS: ``training.fp8_recipe: tensorwise``) and
  Transformer Engine's fused cross-entropy (``training.cross_entropy_fusion_impl: te``): Llama-3
  70B (64 GPUs, GBS 128, TP 4, PP 8, VP 5) at 1,619 / 1,602 / 1,621 tokens/s/GPU in the 25.09 /
  25.11 / 26.02 containers; Llama-3.1 405B (1,024 GPUs, TP 8, PP 8, CP 2, VP 8) at 302 / 292
  (GBS 512, 25.09 / 25.11) and 311 (GBS 1536, 26.02). Their 8B rows recompute 5 of 32 layers
  in full (Megatron-Bridge v0.2.0 scripts/performance/configs/llama3/workload_base_configs.py
  LLAMA3_8B_H100_FP8_CS_BASE_CONFIG recompute_num_layers=5), which ghsim cannot express, so
  they are left out.

Each row starts from the 24.07 point of the same model and changes what the later run
changed (layout, attention kernels, FP8 recipe); the rest (BF16 gradients, tensor-parallel
overlap) is the 24.07 point's. The point: one model of the GPU costs runs of two software
generations, each on the kernels it ran. These runs are a benchmark, not calibration points.
Run ``python benchmarks/software_versions.py`` (about two minutes).
"""

from __future__ import annotations

import functools
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from moe_layouts import base_file  # noqa: E402

from ghsim.config import load_scenario  # noqa: E402
from ghsim.config.api import load_validation_points  # noqa: E402
from ghsim.engine.simulate import simulate  # noqa: E402

Row = tuple[str, str, list[str], tuple[int, int, float] | None]
"""(label, calibration point, overrides, (tokens per step, GPUs, measured tokens/s/GPU) or
None for the point's own measurement)."""

NEW = ["training.attention=flash"]
"""TE 2's default on Hopper: cuDNN's fused attention (no NVTE_FUSED_ATTN in either source)."""
L70_2025 = ["parallelism.pp=8", "parallelism.cp=1", "parallelism.dp=2", "parallelism.vp=5"]
L405 = ["model=llama3.1-405b", "num_gpus=1024", "parallelism.tp=8", "parallelism.pp=8",
        "parallelism.cp=2", "parallelism.dp=8", "parallelism.vp=8"]
CS = ["training.fp8_recipe=tensorwise", "training.cross_entropy_fusion=true",
      "training.cross_entropy_fusion_impl=te"]
"""Megatron-Bridge's performance runs: FP8 current scaling, and Transformer Engine's fused
cross-entropy (the model providers' cross_entropy_loss_fusion default, v0.2.0
src/megatron/bridge/models/gpt_provider.py; cross_entropy_fusion_impl "te" in the performance
scripts, @fa0315ae2 scripts/performance/configs/llama3/llama3_70b_llm_pretrain.yaml and v0.2.0
scripts/performance/utils/helpers.py)."""
ROWS: list[Row] = [
    ("Llama-3 8B, NeMo 24.07 (FA2)", "nemo24.07_llama3-8b_h100_8", [], None),
    ("Llama-3 8B, 2025 (same layout)", "nemo24.07_llama3-8b_h100_8", NEW,
     (128 * 8192, 8, 13812.0)),
    ("Llama-3 70B, NeMo 24.07 (FA2, PP4 CP2)", "nemo24.07_llama3-70b_h100_64", [], None),
    ("Llama-3 70B, 2025 (PP 8, CP 1)", "nemo24.07_llama3-70b_h100_64", NEW + L70_2025,
     (128 * 8192, 64, 1621.0)),
    ("Llama-3 70B, Mbridge 25.09 FP8-CS", "nemo24.07_llama3-70b_h100_64", NEW + L70_2025 + CS,
     (128 * 8192, 64, 1619.0)),
    ("Llama-3 70B, Mbridge 25.11 FP8-CS", "nemo24.07_llama3-70b_h100_64", NEW + L70_2025 + CS,
     (128 * 8192, 64, 1602.0)),
    ("Llama-3.1 405B, Mbridge 25.09 FP8-CS", "nemo24.07_llama3-70b_h100_64",
     NEW + L405 + CS + ["training.global_batch=512"], (512 * 8192, 1024, 302.0)),
    ("Llama-3.1 405B, Mbridge 25.11 FP8-CS", "nemo24.07_llama3-70b_h100_64",
     NEW + L405 + CS + ["training.global_batch=512"], (512 * 8192, 1024, 292.0)),
    ("Llama-3.1 405B, Mbridge 26.02 FP8-CS", "nemo24.07_llama3-70b_h100_64",
     NEW + L405 + CS + ["training.global_batch=1536"], (1536 * 8192, 1024, 311.0)),
]


@functools.cache
def _calibration_steps() -> dict[str, float]:
    """The calibration points' measured step times by id (read once)."""
    points = load_validation_points(ROOT / "validation" / "calibration.yaml").points
    return {p.id: p.measured.step_time_s for p in points}


def measured_and_predicted(directory: Path, row: Row) -> tuple[float, float]:
    """One row's measured step time and ghsim's, in seconds."""
    _, point_id, overrides, rate = row
    if rate is None:
        measured = _calibration_steps()[point_id]
    else:
        tokens, gpus, tokens_per_s = rate
        measured = tokens / (tokens_per_s * gpus)
    path = base_file(directory, point_id, "calibration")
    return measured, simulate(load_scenario(path, overrides)).step_time_s


def main() -> None:
    print(f"{'run':42s} {'measured':>9s} {'ghsim':>7s} {'error':>7s}")
    with tempfile.TemporaryDirectory() as tmp:
        for row in ROWS:
            measured, predicted = measured_and_predicted(Path(tmp), row)
            error = predicted / measured - 1
            print(f"{row[0]:42s} {measured:8.2f}s {predicted:6.2f}s {error:+7.1%}")


if __name__ == "__main__":
    main()
