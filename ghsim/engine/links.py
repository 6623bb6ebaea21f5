"""What the result says about links: the busiest of each kind, and the host link of one GPU.

Bytes count every copy a simulated flow stands for (eight GPUs leaving one leaf by its uplinks
are eight times the bytes of one); utilization is the mean, over the step, of the capacity in
use divided by the capacity, so it never exceeds 1.
"""

from __future__ import annotations

from typing import Any

from ghsim.engine.attribution import critical_class
from ghsim.engine.fluid import FlowNetwork
from ghsim.engine.simulator import Timeline
from ghsim.hardware.graph import Endpoint

PER_KIND = 2
"""How many of the busiest links of each kind the result lists."""


def busiest_links(timeline: Timeline, step_s: float) -> list[dict[str, Any]]:
    """The ``PER_KIND`` busiest links of each kind: name, kind, capacity, bytes, utilization,
    busy fraction (time anything crossed it) and the kinds of traffic that used it."""
    network = timeline.network
    if network is None:
        return []
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for name, usage in network.usage.items():
        if usage.bytes <= 0:
            continue
        by_kind.setdefault(usage.kind, []).append({
            "name": name, "kind": usage.kind,
            "capacity_bytes_per_s": usage.capacity_bytes_per_s, "bytes": usage.bytes,
            "utilization": network.utilization(name, step_s),
            "busy": usage.busy_s / step_s if step_s > 0 else 0.0,
            "traffic": sorted(usage.traffic)})
    chosen: list[dict[str, Any]] = []
    for kind in sorted(by_kind):
        ranked = sorted(by_kind[kind], key=lambda e: (-e["utilization"], -e["bytes"], e["name"]))
        chosen += ranked[:PER_KIND]
    return sorted(chosen, key=lambda e: (-e["utilization"], e["name"]))


def _union_s(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def _gpu_links(network: FlowNetwork, gpu: str, kind_end: str) -> list[str]:
    return [name for name, usage in network.usage.items()
            if usage.kind.endswith(kind_end) and gpu in name.split(">")]


def host_usage(timeline: Timeline, step_s: float, link: str) -> dict[str, Any]:
    """Host-link traffic each way and host-CPU load of one GPU of the critical rank class."""
    network = timeline.network
    view: dict[str, Any] = {"link": link}
    cls = critical_class(timeline)
    node, local = divmod(cls.rank_class.first_rank, timeline.gpus_per_node)
    gpu = str(Endpoint(node, f"gpu{local}"))
    for direction in ("h2d", "d2h"):
        names = _gpu_links(network, gpu, f"_{direction}") if network else []
        view[f"{direction}_bytes"] = sum(network.usage[n].bytes for n in names) if network else 0.0
        view[f"{direction}_utilization"] = max(
            (network.utilization(n, step_s) for n in names), default=0.0) if network else 0.0
    cpu = [(start, end) for owner, _, start, end, _ in
           (network.transfers_of("cpu") if network else []) if owner == cls.rank_class.name]
    view["cpu_utilization"] = _union_s(cpu) / step_s if step_s > 0 else 0.0
    return view
