"""Pipeline schedules: the order in which one pipeline rank runs its forward and backward passes.

Both follow Megatron-LM (``megatron/core/pipeline_parallel/schedules.py``):

* 1F1B (``vp`` = 1): rank ``i`` of ``p`` runs ``min(p - i - 1, m)`` warm-up forwards, then
  alternates one forward and one backward, then drains the remaining backwards.
* Interleaved (``vp`` > 1): each rank holds ``vp`` model chunks; virtual micro-batch ``k`` is
  chunk ``(k // p) % vp`` of micro-batch ``(k // (p vp)) p + k % p``. Warm-up is
  ``(p - i - 1) * 2 + (vp - 1) * p`` virtual forwards; backwards visit chunks in reverse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class Pass:
    """One forward or backward pass of one micro-batch through one model chunk."""

    phase: Literal["F", "B"]
    microbatch: int
    chunk: int


def _virtual(k: int, p: int, vp: int, forward: bool) -> tuple[int, int]:
    group = k % (p * vp)
    chunk = group // p
    if not forward:
        chunk = vp - 1 - chunk
    return (k // (p * vp)) * p + k % p, chunk


def pipeline_order(stage: int, pp: int, vp: int, microbatches: int) -> list[Pass]:
    """The passes pipeline rank ``stage`` runs, in order."""
    total = microbatches * vp
    if vp == 1:
        warmup = min(pp - stage - 1, microbatches)
    else:
        warmup = min((pp - stage - 1) * 2 + (vp - 1) * pp, total)
    order: list[Pass] = []

    def forward(k: int) -> None:
        mb, chunk = _virtual(k, pp, vp, True) if vp > 1 else (k, 0)
        order.append(Pass("F", mb, chunk))

    def backward(k: int) -> None:
        mb, chunk = _virtual(k, pp, vp, False) if vp > 1 else (k, 0)
        order.append(Pass("B", mb, chunk))

    for k in range(warmup):
        forward(k)
    for k in range(total - warmup):
        forward(warmup + k)
        backward(k)
    for k in range(total - warmup, total):
        backward(k)
    return order


def in_flight_peak(order: list[Pass]) -> int:
    """Most forward passes whose backward has not yet run, at any point of ``order``."""
    live = peak = 0
    for step in order:
        live += 1 if step.phase == "F" else -1
        peak = max(peak, live)
    return peak
