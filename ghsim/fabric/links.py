"""Link instances of a system and the efficiency each use reaches on them.

A link is one direction of a hop of the ``SystemGraph`` (``n3.gpu1>n3.cpu1``, ``leaf12>spine0``)
with its physical capacity. An efficiency is what a measured use reached on that kind of link,
alone, as a fraction of the capacity: NCCL's bus bandwidth on NVLink or a NIC, a copy engine or
an SM kernel over C2C or PCIe, STREAM on host memory. Measured rates in the hardware files are
turned into these fractions once, at load, so the same measurement scales with the link.
"""

from __future__ import annotations

from dataclasses import dataclass

from ghsim.config.schema import SystemSpec
from ghsim.config.schema.hardware import HostLinkUse
from ghsim.errors import ConfigError
from ghsim.hardware.graph import Hop

NETWORK_USES = ("collective", "all_to_all", "p2p", "nvls")
"""Uses by communication kernels (NCCL); the rest are copies and in-place accesses."""


def link_id(hop: Hop) -> str:
    """``src>dst`` for a link; a memory's name for either direction of its access, since
    reads and writes share a DRAM's bandwidth."""
    for end in (hop.src, hop.dst):
        if _role(end) == "memory":
            return end
    return f"{hop.src}>{hop.dst}"


def _role(name: str) -> str:
    """``gpu``, ``cpu``, ``nic``, ``nvswitch``, ``memory`` or ``switch`` from an instance id."""
    local = name.split(".")[-1]
    for prefix, role in (("gpu", "gpu"), ("cpu", "cpu"), ("nic", "nic"), ("nvswitch", "nvswitch"),
                         ("hbm", "memory"), ("lpddr", "memory"), ("ddr", "memory")):
        if local.startswith(prefix):
            return role
    return "switch"


def link_kind(hop: Hop) -> str:
    """What the result calls a link: ``c2c_h2d``, ``c2c_d2h``, ``pcie_h2d``, ``pcie_d2h``,
    ``nvlink``, ``cpu_link``, ``nic``, ``leaf_uplink``, ``leaf_downlink``, ``spine``,
    ``host_memory``, ``gpu_memory``."""
    a, b = _role(hop.src), _role(hop.dst)
    if "memory" in (a, b):
        return "gpu_memory" if "hbm" in hop.src + hop.dst else "host_memory"
    if {a, b} == {"gpu", "cpu"}:
        return f"{hop.kind}_{'h2d' if a == 'cpu' else 'd2h'}"
    if a == b == "cpu":
        return "cpu_link"
    if "nic" in (a, b):
        return "nic"
    if a == b == "switch":
        up = hop.src.startswith("leaf")
        return "leaf_uplink" if up else ("leaf_downlink" if hop.dst.startswith("leaf")
                                         else "spine")
    return "nvlink"


@dataclass(frozen=True)
class Efficiencies:
    """Measured fractions of a link's capacity, by use, for one system."""

    nvlink_nccl: float
    nvlink_alltoall: float
    """NCCL's all-to-all on NVLink (each member to every other at once), a fraction of it."""
    nvls: float | None
    nic_nccl: float
    staged_network: float
    """Factor on the network when traffic is staged through host memory (no GPUDirect RDMA)."""
    gpudirect_rdma: bool
    host_link: dict[str, float]
    """``h2d_copy``, ``d2h_copy``, ``gpu_read_host``, ... : fractions of the host link."""
    host_memory: float
    """STREAM fraction of the host memory's peak."""
    migration: float
    """Fault-driven page migration, as a fraction of the host link."""

    def of(self, hop: Hop, use: str) -> float:
        """The efficiency ``use`` reaches on ``hop``: ``collective``, ``all_to_all`` (NCCL's),
        ``nvls``, ``p2p``, ``h2d_copy``, ``d2h_copy``, an in-place access name, ``migration``
        or ``cpu``."""
        kind = link_kind(hop)
        network = use in NETWORK_USES
        if kind == "nvlink":
            if use == "all_to_all":
                return self.nvlink_alltoall
            return self.nvls if use == "nvls" and self.nvls else self.nvlink_nccl
        if kind in ("nic", "leaf_uplink", "leaf_downlink", "spine"):
            return self.nic_nccl * (1.0 if self.gpudirect_rdma else self.staged_network)
        if kind.endswith(("_h2d", "_d2h")):
            if use == "migration":
                return self.migration
            if network or use == "cpu":
                use = "h2d_copy" if kind.endswith("_h2d") else "d2h_copy"
            return self._host(use)
        if kind == "host_memory":
            # The CPU's own loads and stores reach STREAM; a DMA or GPU access is bound by its
            # measured rate on the host link, so host memory is shared at its peak.
            return self.host_memory if use == "cpu" else 1.0
        return 1.0  # cpu_link and GPU memory: no measurement of these uses; line rate

    def _host(self, use: str) -> float:
        if use not in self.host_link:
            raise ConfigError("host_link", f"gpu.host_link.{use}_efficiency",
                              "is needed for this transfer (with a source)")
        return self.host_link[use]


def efficiencies(system: SystemSpec) -> Efficiencies:
    """The efficiencies of ``system``'s links, from its parts' measured rates."""
    node = system.node
    gpu, cpu = node.gpu.gpu, node.cpu.cpu
    assert gpu is not None and cpu is not None
    link = gpu.host_link
    capacity = link.bandwidth_bytes_per_s
    host: dict[str, float] = {}
    uses: tuple[HostLinkUse, ...] = ("h2d_copy", "d2h_copy", "gpu_read_host", "gpu_write_host",
                                     "cpu_read_device", "cpu_write_device")
    for use in uses:
        rate = link.rate_bytes_per_s(use)
        if rate is not None:
            host[use] = rate / capacity
    nvlink_nccl, nvlink_alltoall, nvls = 1.0, 1.0, None
    if gpu.nvlink is not None:
        busbw = gpu.nvlink.nccl_busbw_bytes_per_s()
        nvlink_nccl = busbw / gpu.nvlink.bandwidth_bytes_per_s if busbw else 1.0
        nvlink_alltoall = gpu.nvlink.alltoall_efficiency or nvlink_nccl  # else the ring's
        nvls_busbw = gpu.nvlink.nvls_busbw_bytes_per_s()
        if nvls_busbw and node.nvlink.topology == "switch":
            nvls = nvls_busbw / gpu.nvlink.bandwidth_bytes_per_s
    nic = node.nic.nic if node.nic is not None else None
    nic_busbw = nic.nccl_busbw_bytes_per_s() if nic is not None else None
    nic_nccl = nic_busbw / nic.bandwidth_bytes_per_s if nic is not None and nic_busbw else 1.0
    stream = cpu.memory.rate_bytes_per_s("stream")
    migration = gpu.migration_bytes_per_s()
    return Efficiencies(
        nvlink_nccl=nvlink_nccl, nvlink_alltoall=nvlink_alltoall, nvls=nvls, nic_nccl=nic_nccl,
        staged_network=node.staged_network_efficiency, gpudirect_rdma=node.uses_gpudirect_rdma,
        host_link=host,
        host_memory=stream / cpu.memory.peak_bandwidth_bytes_per_s if stream else 1.0,
        migration=migration / capacity if migration else host.get("h2d_copy", 1.0),
    )
