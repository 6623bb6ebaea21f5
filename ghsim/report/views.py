"""Plain-data views (JSON-ready dicts, SI units) of what ``ghsim inspect`` shows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ghsim.config import Scenario
from ghsim.config.schema import DocumentSpec, HardwareSpec, MemorySpec, ModelSpec, SystemSpec
from ghsim.config.schema.hardware import HOST_LINK_USES, MEMORY_USES
from ghsim.config.schema.validation import ValidationPointsSpec
from ghsim.costmodel.gpu import clock_view
from ghsim.errors import LimitError
from ghsim.version import __version__
from ghsim.workload import model_flops_per_token, parameter_count
from ghsim.workload.shapes import layer_shapes
from ghsim.workload.summary import workload_view

if TYPE_CHECKING:
    from ghsim.hardware import SystemGraph, SystemTotals

# The engine, the hardware graph (networkx) and the lowering are imported by the views that
# use them, so that `ghsim inspect MODEL` starts quickly.

SEQ_LENS = (2048, 4096, 8192)


def totals_view(totals: SystemTotals) -> dict[str, Any]:
    return {
        "num_gpus": totals.num_gpus,
        "num_nodes": totals.num_nodes,
        "num_nvlink_domains": totals.num_domains,
        "gpus_per_nvlink_domain": totals.gpus_per_domain,
        "memory_capacity_bytes": totals.memory_bytes,
        "peak_flops": totals.peak_flops,
        "cpu_cores": totals.cpu_cores,
        "nvlink_bandwidth_bytes_per_s_per_gpu": totals.nvlink_bytes_per_s_per_gpu,
        "nvlink_domain_bisection_bytes_per_s": totals.domain_bisection_bytes_per_s,
        "fabric_bisection_bytes_per_s": totals.fabric_bisection_bytes_per_s,
        "fabric_switches_per_tier": list(totals.fabric_switches_per_tier),
    }


def graph_view(graph: SystemGraph) -> dict[str, Any]:
    """The node template's components and links."""
    components = [{"id": n, **d} for n, d in graph.template.nodes(data=True)]
    links = [{"src": u, "dst": v, **d} for u, v, d in graph.template.edges(data=True)]
    fabric = None
    if graph.fabric is not None:
        tree = graph.fabric
        fabric = {"topology": graph.spec.fabric.topology if graph.spec.fabric else None,
                  "tiers": tree.tiers, "switch_radix": tree.radix, "leaf_down_ports": tree.down,
                  "leaf_up_ports": tree.up, "switches_per_tier": list(tree.switches_per_tier)}
    return {"components": components, "links": links, "fabric": fabric}


def system_view(system: SystemSpec, num_gpus: int | None = None) -> dict[str, Any]:
    """A system at ``num_gpus`` GPUs (default: one NVLink domain)."""
    from ghsim.hardware import build_graph, system_totals

    graph = build_graph(system, num_gpus or system.gpus_per_domain)
    return {
        "kind": "system", "name": system.name, "description": system.description,
        "node": system.node.name, **graph_view(graph),
        "totals": totals_view(system_totals(graph)), "sources": system.sources,
        "part_sources": {part.name: part.sources for part in _parts(system)},
    }


def _parts(system: SystemSpec) -> list[HardwareSpec]:
    node = system.node
    return [part for part in (node.gpu, node.cpu, node.nic) if part is not None]


def model_view(model: ModelSpec, seq_len: int = 2048) -> dict[str, Any]:
    count = parameter_count(model)
    return {
        "kind": "model", "name": model.name, "description": model.description,
        "architecture": model.model_dump(exclude={"sources", "schema_version", "kind",
                                                  "description", "name", "published_params",
                                                  "published_active_params"}),
        "head_dim": model.head_dim_resolved,
        "params": count.main_total,
        "params_active": count.main_active,
        "params_mtp": count.mtp,
        "params_non_embedding": count.non_embedding,
        "params_embedding": count.embedding + count.output,
        "published_params": model.published_params,
        "published_active_params": model.published_active_params,
        "seq_len": seq_len,
        "model_flops_per_token": model_flops_per_token(model, seq_len),
        "model_flops_per_token_by_seq_len": {
            str(s): model_flops_per_token(model, s) for s in sorted({seq_len, *SEQ_LENS})
        },
        "sources": model.sources,
    }


def memory_view(scenario: Scenario) -> dict[str, Any]:
    """Per memory tier, per GPU: capacity, the model states placed there and the peak in
    program order, from the workload ``ghsim run`` simulates (the same placement, offload
    included). ``tracked`` is False for a workload without allocations (a replayed trace)."""
    from ghsim.engine.simulate import (
        memory_capacities,
        memory_placement,
        records_memory,
        scenario_workload,
    )

    capacities = memory_capacities(scenario.spec, scenario.layout.gpus_per_node)
    try:
        workload = scenario_workload(scenario)
    except LimitError as error:
        return {"tracked": False, "why": error.message, "capacity_bytes": capacities}
    if not records_memory(workload):
        return {"tracked": False, "why": "the workload records no allocations",
                "capacity_bytes": capacities}
    placement = memory_placement(workload, list(capacities))
    return {"tracked": True, "capacity_bytes": capacities,
            "tiers": {tier: {**placement[tier], "capacity": capacities[tier]}
                      for tier in capacities}}


def experts_view(scenario: Scenario) -> dict[str, Any] | None:
    """A MoE layer's expert load on one rank, per micro-batch pass: the routing, the token
    copies the busiest expert rank receives over the mean, and each of its experts' mean and
    spread; None for a dense model."""
    shapes = layer_shapes(scenario.spec, scenario.layout)
    moe, spec = shapes.moe, scenario.spec.model.moe
    if moe is None or spec is None:
        return None
    return {"routing": spec.routing, "ep": moe.ep, "busiest_rank_over_mean": moe.imbalance,
            "tokens_per_expert": moe.rows_per_expert(shapes.sp_tokens),
            "tokens_per_expert_spread": moe.expert_spread}


def scenario_view(scenario: Scenario) -> dict[str, Any]:
    from ghsim.hardware import build_graph, system_totals

    spec, layout = scenario.spec, scenario.layout
    graph = build_graph(spec.system, spec.num_gpus)
    per_token = model_flops_per_token(spec.model, spec.training.seq_len)
    gpu = spec.system.node.gpu.gpu
    assert gpu is not None
    return {
        "kind": "scenario", "name": scenario.name, "source": scenario.source,
        "system": spec.system.name, "model": spec.model.name, "num_gpus": spec.num_gpus,
        "training": spec.training.model_dump(),
        "parallelism": spec.parallelism.model_dump(),
        "offload": spec.offload.model_dump(),
        "layout": {"tp": layout.tp, "pp": layout.pp, "cp": layout.cp, "dp": layout.dp,
                   "vp": layout.vp, "moe": spec.model.moe is not None, "ep": layout.ep,
                   "etp": layout.etp, "edp": layout.edp,
                   "num_nodes": layout.num_nodes,
                   "gpus_per_node": layout.gpus_per_node,
                   "num_nvlink_domains": layout.num_domains,
                   "micro_batches_per_step": layout.micro_batches},
        "params": parameter_count(spec.model).total,
        "model_flops_per_token": per_token,
        "tokens_per_step": layout.tokens_per_step,
        "model_flops_per_step": per_token * layout.tokens_per_step,
        "experts": experts_view(scenario),
        "memory_per_gpu": memory_view(scenario),
        "hbm_capacity_bytes": gpu.memory.capacity_bytes,
        "gpu_clock": clock_view(spec.system.node, scenario.source, spec.num_gpus),
        "totals": totals_view(system_totals(graph)),
        "digest": scenario.digest(), "ghsim_version": __version__,
    }


def workload_view_of(scenario: Scenario) -> dict[str, Any]:
    """Lower the scenario and summarize its workload."""
    from ghsim.workload.lower import lower

    gpu = scenario.spec.system.node.gpu.gpu
    assert gpu is not None
    return workload_view(lower(scenario), gpu.memory.capacity_bytes)


def _memory_rates(memory: MemorySpec) -> dict[str, float]:
    rates = {"peak": memory.peak_bandwidth_bytes_per_s}
    for use in MEMORY_USES:
        rate = memory.rate_bytes_per_s(use)
        if rate is not None:
            rates[use] = rate
    return rates


def rates_view(part: HardwareSpec) -> dict[str, Any]:
    """The rates a part's file gives, in SI: each physical capacity times its efficiencies."""
    if part.gpu is not None:
        gpu = part.gpu
        link = {"peak": gpu.host_link.bandwidth_bytes_per_s}
        for use in HOST_LINK_USES:
            rate = gpu.host_link.rate_bytes_per_s(use)
            if rate is not None:
                link[use] = rate
        memory = _memory_rates(gpu.memory)
        strided = gpu.strided_bytes_per_s()
        if strided is not None:
            memory["strided"] = strided
        view: dict[str, Any] = {"peak_flops_per_s": gpu.compute.peak_flops_per_s(),
                                "memory_bytes_per_s": memory,
                                "host_link_bytes_per_s": link}
        if gpu.nvlink is not None:
            nvlink = {"peak": gpu.nvlink.bandwidth_bytes_per_s,
                      "nccl_busbw": gpu.nvlink.nccl_busbw_bytes_per_s(),
                      "nvls_busbw": gpu.nvlink.nvls_busbw_bytes_per_s()}
            view["nvlink_bytes_per_s"] = {k: v for k, v in nvlink.items() if v is not None}
        if gpu.migration_bytes_per_s() is not None:
            view["migration_bytes_per_s"] = gpu.migration_bytes_per_s()
        return view
    if part.cpu is not None:
        compute = part.cpu.compute
        return {"peak_flops_per_s": {d: compute.peak_flops(d)
                                     for d in compute.flops_per_cycle_per_core},
                "memory_bytes_per_s": _memory_rates(part.cpu.memory)}
    assert part.nic is not None
    nic = {"line_rate": part.nic.bandwidth_bytes_per_s,
           "nccl_busbw": part.nic.nccl_busbw_bytes_per_s()}
    return {"nic_bytes_per_s": {k: v for k, v in nic.items() if v is not None}}


def hardware_view(part: HardwareSpec) -> dict[str, Any]:
    return {"kind": "hardware", **part.model_dump(exclude={"schema_version", "kind"}),
            "rates": rates_view(part)}


def points_view(points: ValidationPointsSpec) -> dict[str, Any]:
    return {"kind": "validation_points", "metric": points.metric,
            "points": [{"id": p.id, "system": p.scenario.system.name,
                        "model": p.scenario.model.name, "num_gpus": p.scenario.num_gpus,
                        "measured_step_time_s": p.measured.step_time_s}
                       for p in points.points]}


def document_view(spec: DocumentSpec) -> dict[str, Any]:
    """The view of a loaded file that is not a scenario (those need their layout)."""
    if isinstance(spec, SystemSpec):
        return system_view(spec)
    if isinstance(spec, ModelSpec):
        return model_view(spec)
    if isinstance(spec, HardwareSpec):
        return hardware_view(spec)
    if isinstance(spec, ValidationPointsSpec):
        return points_view(spec)
    return {"kind": spec.KIND, **spec.model_dump()}
