"""What a workload amounts to: op counts, FLOPs, bytes per collective group, memory per rank.

Collective bytes are what one rank sends per step: ``2 (n-1)/n`` of the message for an all-reduce
(ring), ``(n-1)/n`` for an all-gather or reduce-scatter, the whole message for a pipeline send.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ghsim.workload.ir import Comm, MemoryEvent, Op, RankClass, Workload, class_flops

GROUP_KINDS = ("tp", "cp", "pp", "dp", "ep", "etp", "edp")


def wire_bytes(collective: str, message_bytes: float, group_size: int) -> float:
    """Bytes one rank sends for one collective of ``message_bytes`` over ``group_size`` ranks."""
    n = group_size
    if n <= 1:
        return 0.0
    if collective == "all_reduce":
        return 2 * (n - 1) / n * message_bytes
    if collective == "broadcast":
        return message_bytes
    return (n - 1) / n * message_bytes  # all-gather, reduce-scatter, all-to-all


def collective_bytes(rank_class: RankClass) -> dict[str, float]:
    """Bytes one rank of the class sends per step, per group kind."""
    sent: dict[str, float] = dict.fromkeys(GROUP_KINDS, 0.0)
    for op in rank_class.ops:
        for comm in op.comms():
            sent[comm.group] = sent.get(comm.group, 0.0) + wire_bytes(
                comm.collective, comm.bytes, comm.group_size)
        if op.kind == "collective":
            group = "pp" if op.attrs["group"] == "embedding" else op.attrs["group"]
            sent[group] = sent.get(group, 0.0) + wire_bytes(op.attrs["collective"], op.bytes,
                                                  op.attrs["group_size"])
        elif op.kind == "send":
            sent["pp"] += op.bytes
    return sent


@dataclass(frozen=True)
class MemoryProfile:
    """Memory of one rank of a class through the step (bytes)."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    """Peak of saved activations."""
    peak: float
    """Peak of everything, replayed in program order."""

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations


def memory_profile(rank_class: RankClass, tier: str = "hbm") -> MemoryProfile:
    """Replay the class's allocations in ``tier`` in program order and report the peaks."""
    static: dict[str, float] = {}
    by_op: dict[int, list[MemoryEvent]] = {}
    for event in rank_class.memory:
        if event.tier != tier:
            continue
        if event.op < 0:
            static[event.category] = static.get(event.category, 0.0) + event.bytes
        else:
            by_op.setdefault(event.op, []).append(event)
    live = float(sum(static.values()))
    activations = peak_activations = 0.0
    peak = live
    for op_id in sorted(by_op):
        for event in by_op[op_id]:
            live += event.bytes
            if event.category == "activations":
                activations += event.bytes
                peak_activations = max(peak_activations, activations)
        peak = max(peak, live)
    return MemoryProfile(static.get("weights", 0.0), static.get("gradients", 0.0),
                         static.get("optimizer", 0.0),
                         peak_activations, peak)


def timed_peak(rank_class: RankClass, tier: str, end_of: dict[int, float]) -> tuple[float, float]:
    """Peak bytes in ``tier`` and when (seconds), replaying allocations at the simulated end
    times of their ops."""
    events = sorted(((end_of.get(e.op, 0.0) if e.op >= 0 else -1.0, e.bytes)
                     for e in rank_class.memory if e.tier == tier), key=lambda x: x[0])
    live = peak = 0.0
    when = 0.0
    index = 0
    while index < len(events):
        moment = events[index][0]
        while index < len(events) and events[index][0] == moment:
            live += events[index][1]
            index += 1
        if live > peak:
            peak, when = live, max(moment, 0.0)
    return peak, when


def _counts(ops: list[Op]) -> dict[str, dict[str, int]]:
    kinds: Counter[str] = Counter(op.kind for op in ops)
    streams: Counter[str] = Counter(op.stream for op in ops)
    kernels: Counter[str] = Counter()
    for op in ops:
        for step in op.body:
            kernels["collective" if isinstance(step, Comm) else step.klass] += 1
    return {"ops_by_kind": dict(kinds), "ops_by_stream": dict(streams),
            "kernels_by_class": dict(kernels)}


def class_view(rank_class: RankClass) -> dict[str, object]:
    """One rank class as plain data."""
    memory = memory_profile(rank_class)
    return {
        "name": rank_class.name, "stage": rank_class.stage,
        "multiplicity": rank_class.multiplicity, "first_rank": rank_class.first_rank,
        **_counts(rank_class.ops),
        "model_flops_per_step_per_gpu": class_flops(rank_class, recompute=False),
        "hardware_flops_per_step_per_gpu": class_flops(rank_class),
        "collective_bytes_per_step": collective_bytes(rank_class),
        "groups": {k: {"size": g.size, "nodes": g.nodes, "nvlink_domains": g.domains}
                   for k, g in rank_class.groups.items()},
        "memory_per_gpu_bytes": {"weights": memory.weights, "gradients": memory.gradients,
                                 "optimizer": memory.optimizer,
                                 "activations": memory.activations, "total": memory.total,
                                 "peak": memory.peak},
    }


def workload_view(workload: Workload, hbm_capacity_bytes: float) -> dict[str, object]:
    """The ``ghsim inspect --workload`` JSON object."""
    classes = [class_view(c) for c in workload.classes]
    heaviest = max(classes, key=lambda c: c["memory_per_gpu_bytes"]["peak"])  # type: ignore[index]
    busiest = max(classes, key=lambda c: sum(c["collective_bytes_per_step"].values()))  # type: ignore[attr-defined]
    ops = sum(len(c.ops) for c in workload.classes)
    return {
        "num_gpus": workload.num_gpus,
        "num_rank_classes": len(classes),
        "ops": ops,
        "tokens_per_step": workload.tokens_per_step,
        "model_flops_per_step": workload.model_flops_per_step,
        "hardware_flops_per_step": workload.hardware_flops_per_step,
        "model_flops_per_step_lowered": sum(
            c.multiplicity * class_flops(c, recompute=False) for c in workload.classes),
        "collective_bytes_per_step": busiest["collective_bytes_per_step"],
        "memory_per_gpu_bytes": heaviest["memory_per_gpu_bytes"],
        "memory_peak_rank_class": heaviest["name"],
        "hbm_capacity_bytes": hbm_capacity_bytes,
        "fits_in_hbm": heaviest["memory_per_gpu_bytes"]["peak"] <= hbm_capacity_bytes,  # type: ignore[index]
        "rank_classes": classes,
    }
