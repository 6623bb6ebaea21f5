"""Published MoE runs outside validation/moe.yaml, as cross-checks of its misses.

Megatron-Bridge's MoE hardware card (NVIDIA-NeMo/Megatron-Bridge@067f987df
skills/nemo-mbridge-perf-moe-hardware-configs/card.yaml, best_configs qwen3_30b_h100_16)
gives Qwen3-30B-A3B on 16 H100 in BF16: TP 1, EP 16, PP 1, CP 1, sequence 4096, MBS 1,
GBS 1024, forced balance, HybridEP with the expert-parallel all-to-all overlapped, CUDA graphs
over the router and the dispatcher's preprocessing: 20,147.29 ms a step. Its
optimization_patterns credit the overlap with +17.729 % throughput on that shape, so the same
run without it took 20,147.29 x 1.17729 = 23,719 ms (derived). Both rows start from the
validation point mbridge_25.09_qwen3_30b_a3b_h100_16_tokendrop (the model, its loss on
Transformer Engine's fused cross-entropy) and change what the card says; HybridEP is costed as
DeepEP, the dispatcher ghsim has that sends a token once per NVLink domain. Nothing here is
fitted: it prints what the model does against what was measured.

Run: ``python benchmarks/moe_crosschecks.py`` (a few seconds).
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

BASE = "mbridge_25.09_qwen3_30b_a3b_h100_16_tokendrop"
CARD = ["model.moe.capacity_factor=null",
        "parallelism.pp=1", "parallelism.vp=null", "parallelism.ep=16", "parallelism.dp=16",
        "training.micro_batch=1", "training.global_batch=1024", "training.precision=bf16",
        "training.fp8_recipe=null", "parallelism.moe_dispatcher=deepep"]
"""The card's layout and batch over the base point (dropless: its capacity factor removed)."""

ROWS: dict[str, tuple[float, list[str]]] = {
    "Qwen3-30B-A3B 16 H100, HybridEP, a2a overlap": (20.14729, [
        *CARD, "parallelism.moe_a2a_overlap=true"]),
    "Qwen3-30B-A3B 16 H100, HybridEP (derived)": (20.14729 * 1.17729, CARD),
}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = base_file(Path(tmp), BASE)
        print(f"{'run':48s} {'measured':>9s} {'ghsim':>7s} {'error':>7s}")
        for name, (measured, overrides) in ROWS.items():
            predicted = simulate(load_scenario(base, overrides)).step_time_s
            print(f"{name:48s} {measured:8.2f}s {predicted:6.2f}s "
                  f"{100 * (predicted / measured - 1):+6.1f}%")


if __name__ == "__main__":
    main()
