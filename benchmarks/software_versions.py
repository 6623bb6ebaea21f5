"""The same models on the same DGX H100 layouts under NVIDIA's 2024 and 2025 software.

The calibration set's NeMo 24.07 runs (validation/calibration.yaml) are 8-16 % faster in ghsim
than measured since causal attention is costed as cuDNN runs it. NVIDIA later published the
same models on DGX H100 in FP8 again, with the configurations of NeMo's performance scripts:
NVIDIA/Megatron-LM@bf6e99859f (2025-06-14) examples/llama/README.md, "FP8 Performance", gives
Llama-3 8B on 8 GPUs (GBS 128, MBS 1, seq 8192, TP 1, CP 2, the 24.07 layout) at 13,812
tokens/s/GPU against 24.07's 12,036, and Llama-3 70B on 64 GPUs (GBS 128, MBS 1, seq 8192, TP 4,
PP 8, VP 5) at 1,621. The 2025 row of the 8B is the 24.07 scenario with the 2025 measurement;
the 70B's takes the 2025 layout (PP 8, CP 1 instead of PP 4, CP 2). The rest of each scenario
(FP8 delayed scaling, BF16 gradients, tensor-parallel overlap) is the 24.07 point's.

It prints what ghsim predicts for each against what was measured: where the software improved
on the same hardware and layout, the error shrinks, so the part of the gap that is the older
software's own cost (not a hardware rate) shows. Run ``python benchmarks/software_versions.py``
(about a minute).
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
from ghsim.config.api import load_validation_points  # noqa: E402
from ghsim.engine.simulate import simulate  # noqa: E402

TOKENS_PER_STEP = {"nemo24.07_llama3-8b_h100_8": (128 * 8192, 8),
                   "nemo24.07_llama3-70b_h100_64": (128 * 8192, 64)}
ROWS: list[tuple[str, str, list[str], float | None]] = [
    # (label, calibration point, overrides, measured tokens/s/GPU; None: the point's own)
    ("Llama-3 8B, NeMo 24.07", "nemo24.07_llama3-8b_h100_8", [], None),
    ("Llama-3 8B, 2025 (same layout)", "nemo24.07_llama3-8b_h100_8", [], 13812.0),
    ("Llama-3 70B, NeMo 24.07 (PP 4, CP 2)", "nemo24.07_llama3-70b_h100_64", [], None),
    ("Llama-3 70B, 2025 (PP 8, CP 1)", "nemo24.07_llama3-70b_h100_64",
     ["parallelism.pp=8", "parallelism.cp=1", "parallelism.dp=2"], 1621.0),
]


def main() -> None:
    points = load_validation_points(ROOT / "validation" / "calibration.yaml").points
    measured_s = {p.id: p.measured.step_time_s for p in points}
    print(f"{'run':40s} {'measured':>9s} {'ghsim':>7s} {'error':>7s}")
    with tempfile.TemporaryDirectory() as tmp:
        for label, point_id, overrides, tokens_per_s in ROWS:
            path = base_file(Path(tmp), point_id, "calibration")
            measured = measured_s[point_id]
            if tokens_per_s is not None:
                tokens, gpus = TOKENS_PER_STEP[point_id]
                measured = tokens / (tokens_per_s * gpus)
            predicted = simulate(load_scenario(path, overrides)).step_time_s
            error = predicted / measured - 1
            print(f"{label:40s} {measured:8.2f}s {predicted:6.2f}s {error:+7.1%}")


if __name__ == "__main__":
    main()
