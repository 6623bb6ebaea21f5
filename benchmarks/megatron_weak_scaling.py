"""The Megatron-LM README's weak-scaling table on H100, measured against ghsim.

``benchmarks/data/megatron_weak_scaling.yaml`` transcribes NVIDIA's table of nine GPT models (1.7B
to 462B parameters, BF16, 48 to 6,144 H100 GPUs, sequence 4096, vocabulary 131,072) with its
source, how a step time follows from its per-GPU teraFLOP/s, and what had to be assumed. No
validation file holds these runs and nothing in ghsim was fitted to them: they are a held-out
check of DGX H100 in BF16, which the calibration set (FP8 NeMo runs on H100) does not cover.

The pipeline schedule is not published and moves the pipelined rows by 10-20 %, so each row is
printed twice: without interleaving (Megatron's default) and interleaved at one layer per
virtual stage (see the data file). Run: ``python benchmarks/megatron_weak_scaling.py``
(about 20 s).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NamedTuple

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gh200_heldout

DATA = gh200_heldout.ROOT / "benchmarks" / "data" / "megatron_weak_scaling.yaml"
SEQ, VOCAB = 4096, 131072


class Row(NamedTuple):
    """One row of the table, as transcribed."""
    name: str
    heads: int
    hidden: int
    layers: int
    tp: int
    pp: int
    dp: int
    gpus: int
    global_batch: int
    tflops_per_gpu: float
    mfu: float
    aggregate_pflops: float


def table() -> list[Row]:
    """The table's rows as the data file gives them."""
    return [Row(*row) for row in yaml.safe_load(DATA.read_text())["rows"]]


def model_flops(row: Row) -> float:
    """Megatron's model FLOPs of one global batch (training.py num_floating_point_operations
    at f2e5db402c): 72 B s L h^2 (1 + s/6h + V/12Lh). Not ghsim's megatron_flops_per_token,
    which follows today's Megatron and halves causal attention."""
    h, layers = row.hidden, row.layers
    return (72 * row.global_batch * SEQ * layers * h * h
            * (1 + SEQ / (6 * h) + VOCAB / (12 * layers * h)))


def measured_s(row: Row) -> float:
    """The step time the row's per-GPU teraFLOP/s gives."""
    return model_flops(row) / (row.tflops_per_gpu * 1e12 * row.gpus)


def scenario(row: Row, interleaved: bool) -> dict[str, Any]:
    """The row's scenario (its sections) under the data file's assumptions; ``interleaved``
    runs one layer per virtual pipeline stage."""
    parallelism: dict[str, Any] = {
        "tp": row.tp, "pp": row.pp, "dp": row.dp, "sequence_parallel": row.tp > 1,
        "tp_comm_overlap": row.tp > 1, "zero_stage": 1, "recompute": "none",
        "overlap_grad_reduce": True, "overlap_param_gather": True}
    if interleaved and row.pp > 1:
        parallelism["vp"] = row.layers // row.pp
    return {
        "system": "dgx-h100", "num_gpus": row.gpus,
        "model": {"name": f"GPT {row.name} (Megatron-LM README)", "layers": row.layers,
                  "hidden": row.hidden, "heads": row.heads, "kv_heads": row.heads,
                  "ffn_hidden": 4 * row.hidden, "vocab": VOCAB, "gated_mlp": False,
                  "norm": "layernorm", "bias": True, "dropout": 0.1,
                  "position_embedding": "learned", "max_position_embeddings": SEQ,
                  "tied_embeddings": False},
        "training": {"seq_len": SEQ, "micro_batch": 1, "global_batch": row.global_batch,
                     "precision": "bf16", "attention": "flash"},
        "parallelism": parallelism,
    }


def predicted_s(row: Row, interleaved: bool) -> float:
    """ghsim's step time for the row, loaded as ``ghsim run`` loads a file."""
    return gh200_heldout.predicted_s({"id": f"megatron-gpt-{row.name}",
                                      "scenario": scenario(row, interleaved)})


def rows() -> list[tuple[Row, float, float, float]]:
    """(row, measured, ghsim without interleaving, ghsim interleaved) step seconds."""
    result = []
    for row in table():
        plain = predicted_s(row, interleaved=False)
        result.append((row, measured_s(row), plain,
                       predicted_s(row, interleaved=True) if row.pp > 1 else plain))
    return result


def main() -> int:
    print(f"{'model':5s} {'TP':>2s} {'PP':>2s} {'GPUs':>5s} {'measured':>9s} "
          f"{'ghsim':>8s} {'error':>7s} {'interleaved':>12s} {'error':>7s}")
    results = rows()
    for row, measured, plain, interleaved in results:
        print(f"{row.name:5s} {row.tp:2d} {row.pp:2d} {row.gpus:5d} {measured:8.3f}s "
              f"{plain:7.3f}s {plain / measured - 1:+7.1%} {interleaved:11.3f}s "
              f"{interleaved / measured - 1:+7.1%}")
    for label, column in (("without interleaving", 2), ("interleaved", 3)):
        errors = [abs(result[column] / result[1] - 1) for result in results]
        print(f"MAPE {sum(errors) / len(errors):.1%} over {len(errors)} runs ({label}), "
              f"worst {max(errors):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
