"""Whole-system totals of a ``SystemGraph``: GPUs, memory, peak FLOP/s, bisection bandwidths."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ghsim.hardware.graph import SystemGraph


@dataclass(frozen=True)
class SystemTotals:
    """Capacities of the GPUs a scenario uses (bytes, FLOP/s, bytes/s)."""

    num_gpus: int
    num_nodes: int
    num_domains: int
    gpus_per_domain: int
    memory_bytes: dict[str, float]
    """Capacity per memory kind (``hbm``, ``lpddr``, ``ddr``)."""
    peak_flops: dict[str, float]
    """Dense peak of all GPUs, per dtype."""
    cpu_cores: int
    nvlink_bytes_per_s_per_gpu: float
    domain_bisection_bytes_per_s: float
    fabric_bisection_bytes_per_s: float | None
    fabric_switches_per_tier: tuple[int, ...] = field(default=())


def _domain_bisection(graph: SystemGraph, gpus: int) -> tuple[float, float]:
    """Per-GPU NVLink bandwidth and the bisection of one domain of ``gpus`` GPUs."""
    topology = graph.spec.node.nvlink.topology
    out = [d["bandwidth_bytes_per_s"] for _, _, d in graph.template.out_edges("gpu0", data=True)
           if d["kind"] == "nvlink"]
    per_gpu = sum(out)
    if topology == "switch":
        return per_gpu, gpus // 2 * per_gpu
    if topology == "direct" and out:
        return per_gpu, (gpus // 2) * (gpus - gpus // 2) * out[0]
    return per_gpu, 0.0


def system_totals(graph: SystemGraph) -> SystemTotals:
    """Totals over the GPUs (and the nodes that hold them) of ``graph``."""
    node = graph.spec.node
    gpu_fraction = graph.gpus_per_node / node.gpus
    memory: Counter[str] = Counter()
    for local in graph.components("memory"):
        data = graph.component(local)
        owner_is_gpu = any(graph.template.nodes[o]["kind"] == "gpu"
                           for o in graph.template.successors(local))
        share = gpu_fraction if owner_is_gpu else 1.0
        memory[data["memory"]] += data["capacity_bytes"] * graph.num_nodes * share
    gpu_peak = graph.component("gpu0")["peak_flops"]
    per_gpu_nvlink, domain_bisection = _domain_bisection(
        graph, min(graph.num_gpus, graph.spec.gpus_per_domain)
    )
    fabric_bisection = None
    if graph.fabric is not None and graph.num_domains > 1:
        nic_bw = graph.component("nic0")["bandwidth_bytes_per_s"]
        fabric_bisection = graph.fabric.bisection_bytes_per_s(nic_bw)
    return SystemTotals(
        num_gpus=graph.num_gpus,
        num_nodes=graph.num_nodes,
        num_domains=graph.num_domains,
        gpus_per_domain=min(graph.num_gpus, graph.spec.gpus_per_domain),
        memory_bytes=dict(memory),
        peak_flops={dtype: value * graph.num_gpus for dtype, value in gpu_peak.items()},
        cpu_cores=sum(graph.component(c)["cores"] for c in graph.components("cpu"))
        * graph.num_nodes,
        nvlink_bytes_per_s_per_gpu=per_gpu_nvlink,
        domain_bisection_bytes_per_s=domain_bisection,
        fabric_bisection_bytes_per_s=fabric_bisection,
        fabric_switches_per_tier=(
            graph.fabric.switches_per_tier if graph.fabric and graph.num_domains > 1 else ()
        ),
    )
