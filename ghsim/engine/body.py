"""The body of a compute op as segments: kernels run back to back, then an inline collective.

Megatron issues its tensor- and context-parallel collectives on the compute stream between the
layer's kernels, so they block it; each runs as flows on the system's links (sharing them with
whatever else crosses them). With ``parallelism.tp_comm_overlap`` (Megatron's
``--tp-comm-overlap``, Transformer Engine's userbuffers), each sequence-parallel all-gather or
reduce-scatter instead runs beside the GEMM that consumes or produces its tensor: the exchange is
split into tp chunks pipelined with the GEMM's chunks, so the pair takes the longer of the two,
the GEMM slowed by the communication kernels beside it, plus one chunk that cannot overlap.

Context parallelism's K/V exchange always runs beside the attention kernel that consumes it:
Megatron-Core's default ``p2p`` exchange (Transformer Engine's AttnFuncWithCP) passes the K/V
chunks around the ring while each step's attention runs on the chunk already received, and in
the backward pass the K/V and their gradients travel the same way beside each step's attention
backward. The pair is costed the same way, pipelined in cp chunks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ghsim.workload.ir import Comm, Kernel, Step

OVERLAPPED = frozenset({"all_gather", "reduce_scatter"})
"""The collectives userbuffers overlaps (only with sequence parallelism; all-reduce never)."""


@dataclass(frozen=True, slots=True)
class Segment:
    """Kernels for ``kernel_s`` seconds, then (if any) ``comm``, beside a GEMM of
    ``overlap_s`` seconds when the collective is overlapped. A segment with ``syncs`` and
    nothing else marks where the host waits for the GPU before the kernels that follow
    (``Kernel.host_syncs``)."""

    kernel_s: float
    comm: Comm | None = None
    overlap_s: float = 0.0
    syncs: int = 0
    flops: float = 0.0
    """The FLOPs of the kernels run for ``kernel_s`` (what an export of the step gives each
    part of the op)."""
    overlap_flops: float = 0.0
    """The FLOPs of the GEMM beside the collective."""


def _pairs(body: tuple[Step, ...], tp_group: str, ep: bool = False) -> dict[int, int]:
    """Which kernel (by index) each overlapped collective (by index) runs beside: an all-gather
    the GEMM right after it (past FP8 casts), else the nearest earlier free GEMM; a
    reduce-scatter the nearest earlier free GEMM; with ``ep``, an expert-parallel all-to-all
    the nearest earlier free GEMM, else the next one; a context-parallel exchange the nearest
    free attention kernel (the next one in a forward pass, the one before in a backward)."""
    pairs: dict[int, int] = {}
    taken: set[int] = set()

    def gemm(i: int) -> bool:
        step = body[i]
        return isinstance(step, Kernel) and step.klass == "gemm" and i not in taken

    def attention(i: int) -> bool:
        step = body[i]
        return isinstance(step, Kernel) and step.klass == "attention" and i not in taken

    for index, step in enumerate(body):
        if not isinstance(step, Comm):
            continue
        if step.group == "cp":
            free = [i for i in range(len(body)) if attention(i)]
            chosen = min(free, key=lambda i: (abs(i - index), i < index), default=None)
            if chosen is not None:
                pairs[index] = chosen
                taken.add(chosen)
            continue
        tp = step.group == tp_group and step.collective in OVERLAPPED
        moe = ep and step.group == "ep" and step.collective == "all_to_all"
        if not (tp or moe):
            continue
        chosen = None
        if step.collective == "all_gather":
            after = index + 1
            while after < len(body) and isinstance(body[after], Kernel) and \
                    body[after].name.endswith("fp8_cast_transpose"):
                after += 1
            if after < len(body) and gemm(after):
                chosen = after
        if chosen is None:
            chosen = next((i for i in range(index - 1, -1, -1) if gemm(i)), None)
        if chosen is None and moe:
            chosen = next((i for i in range(index + 1, len(body)) if gemm(i)), None)
        if chosen is not None:
            pairs[index] = chosen
            taken.add(chosen)
    return pairs


def segments(body: tuple[Step, ...], kernel_s: Callable[[Kernel], float],
             overlap: bool, ep_overlap: bool = False) -> tuple[Segment, ...]:
    """The body as segments; ``kernel_s`` gives each kernel's seconds. ``overlap``: the
    sequence-parallel collectives run beside their GEMMs; ``ep_overlap``: so do the MoE
    all-to-alls (Megatron-Core overlap_moe_expert_parallel_comm hides them behind another
    micro-batch's compute; a GEMM of the same layer stands for that compute)."""
    pairs = _pairs(body, "tp" if overlap else "", ep_overlap)
    paired = set(pairs.values())
    result: list[Segment] = []
    pending = flops = 0.0
    for index, step in enumerate(body):
        if isinstance(step, Kernel):
            if step.host_syncs and index:  # the kernels before it run first
                if pending:
                    result.append(Segment(pending, flops=flops))
                    pending = flops = 0.0
                result.append(Segment(0.0, syncs=step.host_syncs))
            if index not in paired:
                pending += kernel_s(step)
                flops += step.flops
            continue
        partner = body[pairs[index]] if index in pairs else None
        assert partner is None or isinstance(partner, Kernel)
        result.append(Segment(pending, step, kernel_s(partner) if partner else 0.0,
                              flops=flops, overlap_flops=partner.flops if partner else 0.0))
        pending = flops = 0.0
    if pending or not result:
        result.append(Segment(pending, flops=flops))
    return tuple(result)


def overlapped_s(gemm_s: float, comm_s: float, slowdown: float, tp: int) -> float:
    """Seconds of a GEMM and a collective pipelined in ``tp`` chunks: the longer of the GEMM
    and the collective, plus the one chunk of the shorter that has nothing to hide behind. The
    GEMM is slowed by ``slowdown`` only while the communication kernels share its SMs: for the
    collective's seconds, or its own if it is the shorter."""
    return (max(gemm_s + slowdown * min(gemm_s, comm_s), comm_s)
            + min(gemm_s, comm_s) / max(tp, 1))
