"""CARAML's GPT-800M benchmark on four GPU systems, measured against ghsim.

JSC's CARAML suite (FZJ-JSC/CARAML) trains the same 800M GPT with the same legacy Megatron-LM
(f7727433, fp16, FlashAttention-2, unfused RoPE and bias-GELU, micro-batch 4, sequence 2048,
data parallel over a node's GPUs) on A100, H100 and GH200 nodes, and plots the TFLOP/s per GPU
its energy patch logs at global batches 16 to 512 (FZJ-JSC/CARAML@f9a1705
``llm_training/result/LLM_tflops_nvidia_jedi_wai.png``, the bar labels read off the figure).
The patch counts with the 4x formula of recomputation (``--recompute-activations`` sets a
granularity), 96 B s L h^2 (1 + s/6h + V/16Lh), so a step took that over TFLOP/s x GPUs.

The validation point ``caraml_gpt800m_jedi_4gpu_mbs4_gbs2048_s2048`` (validation/gh200.yaml) is
the JEDI run at global batch 2048; this script runs its scenario on each system and batch of
the figure. Systems: ``dgx-a100`` (4 of its A100s; JURECA-DC's are 40 GB, which the 800M model
does not notice), ``dgx-h100`` for the figure's "H100-NVLink", ``gh200-single`` (the figure's
one-GPU "GH200" nodes) and ``jedi-gh200``. The figure's H100-PCIe has no part here, and neither
has its "H100-NVLink": CARAML's JUBE file describes those WestAI nodes as "4x NVIDIA H100 GPUs
(incl. NVLink Interconnect); 94 GB HBM2e per GPU" with two Xeon 8462Y
(``llm_training/llm_benchmark_nvidia_amd.yaml``, JURECA-WAIH100), i.e. H100 NVL PCIe cards
(94 GB, about 3.9 TB/s, 835 dense FP16 TFLOP/s against the SXM's 989, a 350-400 W board),
which ``dgx-h100`` (SXM, 700 W) stands in for. By ghsim's own rates the NVL's lower rated clock
and faster memory about cancel on this run, where eager element-wise work is half the time;
its board limit is not modelled, so the H100 rows say little about H100 SXM.
Run: ``python benchmarks/caraml_gpus.py`` (about 20 s).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from moe_layouts import base_file

from ghsim.config import load_scenario
from ghsim.engine.simulate import simulate

POINT = "caraml_gpt800m_jedi_4gpu_mbs4_gbs2048_s2048"
BATCHES = (16, 32, 64, 128, 256, 512)
MEASURED: dict[str, tuple[int, tuple[float, ...]]] = {
    # system: (GPUs, TFLOP/s per GPU in the 4x formula at each of BATCHES)
    "dgx-a100": (4, (166, 171, 176, 180, 183, 183)),
    "dgx-h100": (4, (285, 301, 311, 316, 318, 319)),
    "gh200-single": (1, (287, 377, 378, 383, 383, 387)),
    "jedi-gh200": (4, (317, 324, 322, 329, 327, 333)),
}
LAYERS, HIDDEN, SEQ, VOCAB = 16, 2048, 2048, 50304


def formula_flops(global_batch: int) -> float:
    """The energy patch's FLOPs a step: 96 B s L h^2 (1 + s/6h + V/16Lh)."""
    return (96 * global_batch * SEQ * LAYERS * HIDDEN**2
            * (1 + SEQ / (6 * HIDDEN) + VOCAB / (16 * LAYERS * HIDDEN)))


def runs() -> list[tuple[str, int, float, float]]:
    """(system, global batch, measured, ghsim) step seconds for every run of the figure."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = base_file(Path(tmp), POINT, "gh200")
        for system, (gpus, tflops) in MEASURED.items():
            for batch, rate in zip(BATCHES, tflops, strict=True):
                sets = [f"system={system}", f"num_gpus={gpus}", f"parallelism.dp={gpus}",
                        f"training.global_batch={batch}"]
                predicted = simulate(load_scenario(base, sets)).step_time_s
                rows.append((system, batch, formula_flops(batch) / (rate * 1e12 * gpus),
                             predicted))
    return rows


def main() -> int:
    errors: list[float] = []
    print(f"{'system':13s} {'GBS':>4s} {'measured':>9s} {'ghsim':>8s} {'error':>7s}")
    for system, batch, measured, predicted in runs():
        errors.append(predicted / measured - 1)
        print(f"{system:13s} {batch:4d} {measured:8.3f}s {predicted:7.3f}s "
              f"{100 * errors[-1]:+6.1f}%")
    mape = 100 * sum(abs(e) for e in errors) / len(errors)
    print(f"MAPE {mape:.1f}% over {len(errors)} runs, worst {100 * max(errors, key=abs):+.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
