"""The component template of one node (and of its NVLink domain's switch) as a graph.

Node ids are local names (``gpu0``, ``hbm0``, ``cpu1``, ``lpddr1``, ``nic3``, ``nvswitch``);
every node has ``kind``, ``scope`` (``node`` or ``domain``) and ``count`` (instances per node or
per domain). Edges are directed links with ``kind``, ``bandwidth_bytes_per_s`` (peak, that
direction), ``latency_s`` and ``measured_bytes_per_s`` (what measurements achieved, by use: each
part's measured efficiency times this link's capacity, so they follow an overridden capacity).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ghsim import units
from ghsim.config.schema import HardwareSpec, MemorySpec, SystemSpec
from ghsim.config.schema.hardware import CpuSpec, GpuSpec, HostLinkSpec, NicSpec

if TYPE_CHECKING:
    import networkx as nx

_MEMORY_KIND = {"hbm2e": "hbm", "hbm3": "hbm", "hbm3e": "hbm", "lpddr5x": "lpddr",
                "ddr4": "ddr", "ddr5": "ddr"}


def memory_kind(memory: MemorySpec) -> str:
    """``hbm``, ``lpddr`` or ``ddr``."""
    return _MEMORY_KIND[memory.type]


def _link(graph: nx.MultiDiGraph, u: str, v: str, kind: str, bandwidth: float,
          latency_s: float = 0.0, measured: dict[str, float | None] | None = None) -> None:
    """Add one directed link; ``measured`` holds what measurements achieved on it, by use."""
    measured = measured or {}
    graph.add_edge(
        u, v, key=kind, kind=kind, bandwidth_bytes_per_s=bandwidth, latency_s=latency_s,
        measured_bytes_per_s={k: m for k, m in measured.items() if m is not None},
    )


def _add_memory(graph: nx.MultiDiGraph, owner: str, index: int, memory: MemorySpec) -> str:
    mem = f"{memory_kind(memory)}{index}"
    graph.add_node(
        mem, kind="memory", memory=memory_kind(memory), scope="node", count=1,
        capacity_bytes=memory.capacity_bytes, latency_s=(memory.latency_ns or 0.0) * units.NS,
    )
    peak = memory.peak_bandwidth_bytes_per_s
    latency = (memory.latency_ns or 0.0) * units.NS
    stream = memory.rate_bytes_per_s("stream")
    _link(graph, mem, owner, "memory", peak, latency,
          {"access": memory.rate_bytes_per_s("read"), "stream": stream})
    _link(graph, owner, mem, "memory", peak, 0.0,
          {"access": memory.rate_bytes_per_s("write"), "stream": stream})
    return mem


def _gpu_attrs(gpu: GpuSpec, name: str) -> dict[str, Any]:
    return {
        "kind": "gpu", "scope": "node", "count": 1, "part": name, "sms": gpu.compute.sms,
        "peak_flops": gpu.compute.peak_flops_per_s(),
    }


def _cpu_attrs(cpu: CpuSpec, name: str) -> dict[str, Any]:
    return {
        "kind": "cpu", "scope": "node", "count": 1, "part": name, "cores": cpu.compute.cores,
        "peak_flops": {d: cpu.compute.peak_flops(d) for d in cpu.compute.flops_per_cycle_per_core},
    }


def _host_link(graph: nx.MultiDiGraph, gpu: str, cpu: str, link: HostLinkSpec,
               gpu_mem: MemorySpec, cpu_mem: MemorySpec) -> None:
    """GPU <-> CPU over C2C or PCIe; latencies are the measured remote-load latencies less the
    local ones, so that a route's latency reproduces the measurement."""
    bandwidth = link.bandwidth_bytes_per_s
    to_gpu_ns = (link.gpu_host_latency_ns or 0.0) - (cpu_mem.latency_ns or 0.0)
    to_cpu_ns = (link.cpu_device_latency_ns or 0.0) - (gpu_mem.latency_ns or 0.0)
    _link(graph, cpu, gpu, link.type, bandwidth, max(0.0, to_gpu_ns) * units.NS,
          {"copy": link.rate_bytes_per_s("h2d_copy"),
           "access": link.rate_bytes_per_s("gpu_read_host")})
    _link(graph, gpu, cpu, link.type, bandwidth, max(0.0, to_cpu_ns) * units.NS,
          {"copy": link.rate_bytes_per_s("d2h_copy"),
           "access": link.rate_bytes_per_s("cpu_read_device")})


def _nvlink(graph: nx.MultiDiGraph, system: SystemSpec, gpu: GpuSpec) -> None:
    node = system.node
    nvlink = gpu.nvlink
    if node.nvlink.topology == "none" or nvlink is None:
        return
    per_link = units.gb_s_to_bytes_per_s(nvlink.link_bandwidth_gb_s)
    measured = {"collective": nvlink.nccl_busbw_bytes_per_s(),
                "allreduce_nvls": nvlink.nvls_busbw_bytes_per_s()}
    if node.nvlink.topology == "switch":
        scope = "domain" if system.nvlink_domain.nodes > 1 else "node"
        switches = system.nvlink_domain.switches if scope == "domain" else node.nvlink.switches
        graph.add_node("nvswitch", kind="nvswitch", scope=scope, count=1, chips=switches)
        for i in range(node.gpus):
            for u, v in ((f"gpu{i}", "nvswitch"), ("nvswitch", f"gpu{i}")):
                _link(graph, u, v, "nvlink", nvlink.links * per_link, 0.0, measured)
        return
    peers = node.gpus - 1
    links = node.nvlink.links_per_peer or (nvlink.links // peers if peers else 0)
    for i in range(node.gpus):
        for k in range(node.gpus):
            if i != k and links:
                _link(graph, f"gpu{i}", f"gpu{k}", "nvlink", links * per_link)


def _nics(graph: nx.MultiDiGraph, system: SystemSpec, nic: NicSpec) -> None:
    node = system.node
    for k in range(node.nics):
        graph.add_node(f"nic{k}", kind="nic", scope="node", count=1, part=nic.model,
                       bandwidth_bytes_per_s=nic.bandwidth_bytes_per_s)
        owners, attach = (node.gpus, "gpu") if node.nic_attach == "gpu" else (node.cpus, "cpu")
        owner = f"{attach}{k * owners // node.nics}"
        # The NIC's PCIe port (Gen5 x16 beside an H100 or on Grace, Gen4 x16 beside an A100)
        # is faster than its line rate, so the line rate bounds this link.
        bandwidth = nic.bandwidth_bytes_per_s
        _link(graph, owner, f"nic{k}", "pcie", bandwidth)
        _link(graph, f"nic{k}", owner, "pcie", bandwidth)


def build_node_template(system: SystemSpec) -> nx.MultiDiGraph:
    """The components and links of one node of ``system`` (plus its NVLink switch)."""
    node = system.node
    gpu_part: HardwareSpec = node.gpu
    cpu_part: HardwareSpec = node.cpu
    assert gpu_part.gpu is not None and cpu_part.cpu is not None  # checked by NodeSpec
    gpu, cpu = gpu_part.gpu, cpu_part.cpu
    import networkx  # here, not at the top: a run refused before any graph skips its import

    graph = networkx.MultiDiGraph(name=node.name)
    for j in range(node.cpus):
        graph.add_node(f"cpu{j}", **_cpu_attrs(cpu, cpu_part.name))
        _add_memory(graph, f"cpu{j}", j, cpu.memory)
    for i in range(node.gpus):
        graph.add_node(f"gpu{i}", **_gpu_attrs(gpu, gpu_part.name))
        _add_memory(graph, f"gpu{i}", i, gpu.memory)
        _host_link(graph, f"gpu{i}", f"cpu{i * node.cpus // node.gpus}", gpu.host_link,
                   gpu.memory, cpu.memory)
    if node.cpu_link is not None:
        bandwidth = units.gb_s_to_bytes_per_s(node.cpu_link.bandwidth_gb_s)
        for j in range(node.cpus):
            for k in range(node.cpus):
                if j != k:
                    _link(graph, f"cpu{j}", f"cpu{k}", node.cpu_link.type, bandwidth)
    _nvlink(graph, system, gpu)
    if node.nics and node.nic is not None and node.nic.nic is not None:
        _nics(graph, system, node.nic.nic)
    return graph
