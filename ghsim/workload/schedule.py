"""Pipeline schedules: the order in which one pipeline rank runs its forward and backward passes.

Both follow Megatron-LM (``megatron/core/pipeline_parallel/schedules.py``):

* 1F1B (``vp`` = 1): rank ``i`` of ``p`` runs ``min(p - i - 1, m)`` warm-up forwards, then
  alternates one forward and one backward, then drains the remaining backwards.
* Interleaved (``vp`` > 1): each rank holds ``vp`` model chunks; micro-batches go through
  the chunks in groups of ``p`` (chunk 0 for the group, then chunk 1, ...; a last, smaller group
  when ``p`` does not divide the micro-batches, as newer Megatron-Core allows). Warm-up is
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


def _sequence(microbatches: int, p: int, vp: int, forward: bool) -> list[tuple[int, int]]:
    """(micro-batch, chunk) of each virtual micro-batch: groups of ``p`` micro-batches (the last
    group may be smaller) go through every chunk in turn; backwards visit chunks in reverse."""
    order = []
    for group in range(0, microbatches, p):
        members = range(group, min(group + p, microbatches))
        for chunk in range(vp):
            for mb in members:
                order.append((mb, chunk if forward else vp - 1 - chunk))
    return order


def pipeline_order(stage: int, pp: int, vp: int, microbatches: int) -> list[Pass]:
    """The passes pipeline rank ``stage`` runs, in order."""
    total = microbatches * vp
    if vp == 1:
        warmup = min(pp - stage - 1, microbatches)
    else:
        warmup = min((pp - stage - 1) * 2 + (vp - 1) * pp, total)
    order: list[Pass] = []

    forwards = _sequence(microbatches, pp, vp, True)
    backwards = _sequence(microbatches, pp, vp, False)

    def forward(k: int) -> None:
        order.append(Pass("F", *forwards[k]))

    def backward(k: int) -> None:
        order.append(Pass("B", *backwards[k]))

    for k in range(warmup):
        forward(k)
    for k in range(total - warmup):
        forward(warmup + k)
        backward(k)
    for k in range(total - warmup, total):
        backward(k)
    return order

