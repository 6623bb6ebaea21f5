"""Qwen3-235B-A22B on 256 H100 under the five layouts Megatron-MoE-ModelZoo measured: ghsim's
step times and their order against the measured ones.

Issue 13 asks that, for runs of one model on one cluster under different layouts, the predicted
order of step times match the measured order. The ModelZoo's H100 table
(yanring/Megatron-MoE-ModelZoo@e8650517d:best_practice/qwen3/readme.md; 256 H100, NVLink4,
InfiniBand 8 x 50 GB/s, BF16, sequence 4096, GBS 2048) gives five layouts of the same job; two
are validation points (validation/moe.yaml), the other three are built here from the first of
them with the table's columns as overrides. Nothing is fitted: this prints what the model does,
and the gap to the measured time per layer pass (one micro-batch through one layer of a stage,
forward and backward), with the code branch the table names: a cost ghsim lacks that is paid
once per layer pass shows there as a constant. The commit that added the table
(yanring/Megatron-MoE-ModelZoo@8017e11, 2025-05-27) gives every row's command
(examples/qwen3/run_235b.sh: all with forced load balancing) and its container
(dockers/Dockerfile: Transformer Engine release_v2.2 on NGC PyTorch 25.02), so every row is
costed with TE 2.2's grouped GEMM (``training.grouped_gemm_gap_us`` 7.07, inherited from the
base point). Every row forces balance with random router logits (``model.moe.routing: balanced``,
inherited too): each pass waits for the busiest expert rank. The two ``main(1e057005)`` rows at
micro-batch 1 still miss by 3.3-3.8 ms a pass, the ``moe_dev`` rows by under 1 ms; the tp2 ep32
DeepEP row and the tp2 ep8 pp32 all-to-all row come out ordered as measured, but 0.003 s apart
in 18.5: a tie, not a ranking. That commit is Megatron-LM of 2025-05-24: it has no
``moe_router_fusion`` (Transformer Engine's fused router came with TE PR #1883, 2025-07-11), so
its router runs as the chain of small kernels ghsim.workload.routing counts (29 forward, 10
backward), and none of the rows' commands enables Megatron's experimental features, so DeepEP's
routing map is built by PyTorch ops that wait for the GPU three times a layer
(``training.deepep_fused_multihot`` false); TE 2.2 permutes tokens with a kernel that loops
over every expert for each token (TE PR #1927, 2025-07-14, rewrote it, "up to a 10x unit
speedup" for DeepSeek-V3's shapes by Megatron-LM's DeepSeek-V3 GB200 guide; release_v2.2
transformer_engine/pytorch/triton/permutation.py: one program per token loads the routing map
of every expert, for each chunk of the hidden size). That loop is not costed: no measured time
of the old kernel was found.

Run: ``python benchmarks/moe_layouts.py`` (about two minutes).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ghsim.config import load_scenario  # noqa: E402
from ghsim.engine.simulate import simulate  # noqa: E402

BASE = "zoo_qwen3_235b_h100_256_tp2_ep32_pp8"
"""The validation point the layouts start from (TP2 EP32 PP8 VPP4, DeepEP, selective
recompute of the norms and the activation)."""

# name: (the table's measured step time in s, its columns as overrides of BASE); the table's
# Code column: moe_dev(f3e6c5) for the first two rows, main(1e057005) for the other three
LAYOUTS: dict[str, tuple[float, list[str]]] = {
    "tp2 ep32 pp8 vp4, deepep [moe_dev]": (19.7, []),
    "tp2 ep32 pp8 vp4, deepep, a2a overlap [moe_dev]": (17.6, [
        "parallelism.moe_a2a_overlap=true"]),
    "tp2 ep8 fsdp(dp128), mbs4, full recompute [main]": (17.6, [
        "parallelism.ep=8", "parallelism.pp=1", "parallelism.vp=null", "parallelism.dp=128",
        "parallelism.zero_stage=3", "parallelism.recompute=full",
        "parallelism.recompute_modules=null", "training.micro_batch=4"]),
    "tp2 ep8 pp32 vp3, alltoall [main]": (24.2, [
        "parallelism.ep=8", "parallelism.pp=32", "parallelism.vp=3", "parallelism.dp=4",
        "parallelism.moe_dispatcher=alltoall"]),
    "tp4 ep8 pp8 vp4, deepep, no recompute [main]": (29.0, [
        "parallelism.tp=4", "parallelism.ep=8", "parallelism.dp=8",
        "parallelism.recompute=none", "parallelism.recompute_modules=null"]),
}


def base_file(directory: Path, point_id: str = BASE, validation: str = "moe") -> Path:
    """A validation point of validation/<validation>.yaml as a scenario file in
    ``directory``."""
    points = yaml.safe_load((ROOT / "validation" / f"{validation}.yaml").read_text())
    entries = points["points"] if isinstance(points, dict) else points
    point = next(p for p in entries if p["id"] == point_id)
    if point.get("overrides"):
        raise ValueError(f"{point_id} has overrides, which a scenario file cannot carry")
    path = directory / f"{point_id}.yaml"
    path.write_text(yaml.safe_dump({"schema_version": 1, "kind": "scenario",
                                    **point["scenario"]}, sort_keys=False))
    return path


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = base_file(Path(tmp))
        rows = []
        for name, (measured, overrides) in LAYOUTS.items():
            scenario = load_scenario(base, overrides)
            passes = scenario.layout.layer_passes(scenario.spec.model.layers)
            rows.append((name, measured, simulate(scenario).step_time_s, passes))
    rank_measured = {r[0]: i for i, r in enumerate(sorted(rows, key=lambda r: r[1]), 1)}
    rank_ghsim = {r[0]: i for i, r in enumerate(sorted(rows, key=lambda r: r[2]), 1)}
    print(f"{'layout':48s} {'measured':>9s} {'ghsim':>7s} {'error':>7s} {'passes':>6s} "
          f"{'gap/pass':>8s}  rank (measured, ghsim)")
    for name, measured, predicted, passes in rows:
        gap_ms = 1e3 * (measured - predicted) / passes
        print(f"{name:48s} {measured:8.1f}s {predicted:6.2f}s "
              f"{100 * (predicted / measured - 1):+6.1f}% {passes:6.0f} {gap_ms:6.2f}ms  "
              f"{rank_measured[name]}, {rank_ghsim[name]}")
    print("(rank 1 is the fastest; the measured table ties the overlap and FSDP rows; a pass is"
          " one micro-batch through one layer of a stage)")
    agree, disagree = order_agreement([(r[1], r[2]) for r in rows])
    print(f"pairs of layouts ordered as measured: {agree} of {agree + disagree} (Kendall's tau "
          f"{(agree - disagree) / (agree + disagree):+.2f}; measured ties left out)")


def order_agreement(pairs: list[tuple[float, float]]) -> tuple[int, int]:
    """How many pairs of (measured, predicted) step times the prediction orders as the
    measurement does, and how many the other way; pairs the measurement ties are left out."""
    agree = disagree = 0
    for i, (m1, p1) in enumerate(pairs):
        for m2, p2 in pairs[i + 1:]:
            if m1 == m2:
                continue
            if (m1 < m2) == (p1 < p2):
                agree += 1
            else:
                disagree += 1
    return agree, disagree


if __name__ == "__main__":
    main()
