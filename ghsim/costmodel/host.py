"""Host-side costs: copies over NVLink-C2C or PCIe, work on the host CPU, page migration.

Everything is per GPU: on a DGX node eight GPUs share two sockets, so each gets a quarter of a
socket's cores and memory bandwidth; on GH200 each GPU has its own Grace.
"""

from __future__ import annotations

from dataclasses import dataclass

from ghsim.config.schema import SystemSpec
from ghsim.errors import ConfigError


@dataclass(frozen=True)
class HostCostModel:
    """What moving data to and from the host, and computing there, costs one GPU."""

    link: str
    """``c2c`` or ``pcie``."""
    h2d_bytes_per_s: float
    d2h_bytes_per_s: float
    host_memory_bytes_per_s: float
    """This GPU's share of its host CPU's memory bandwidth (measured STREAM)."""
    cores: float
    """This GPU's share of the host cores."""
    core_flops: float
    """FP32 FLOP/s of one host core."""
    fault_s: float
    """Cost of one batch of GPU page faults."""
    migration_bytes_per_s: float
    access_bytes_per_s: dict[str, float]
    """Measured in-place access over the host link: ``gpu_read_host``, ``gpu_write_host``,
    ``cpu_read_device``, ``cpu_write_device`` (those the hardware file gives)."""
    system: str = ""

    def copy_s(self, nbytes: float, direction: str, access: str | None = None) -> float:
        if access is not None:
            if access not in self.access_bytes_per_s:
                raise ConfigError(self.system, f"gpu.host_link.{access}_gb_s",
                                  "is needed for this microbenchmark (with a source)")
            return nbytes / self.access_bytes_per_s[access]
        rate = self.h2d_bytes_per_s if direction == "h2d" else self.d2h_bytes_per_s
        return nbytes / rate

    def cpu_s(self, flops: float, nbytes: float, cores: int | None) -> float:
        used = min(float(cores), self.cores) if cores else self.cores
        return max(flops / (used * self.core_flops), nbytes / self.host_memory_bytes_per_s)

    def migrate_s(self, in_bytes: float, out_bytes: float, faults: int) -> float:
        moved = max(in_bytes, out_bytes) / self.migration_bytes_per_s
        return faults * self.fault_s + moved


def _need(value: float | None, part: str, key: str) -> float:
    if value is None:
        raise ConfigError(part, key, "is needed to simulate host transfers (with a source)")
    return value


def host_cost_model(system: SystemSpec, gpus_used_per_node: int | None = None) -> HostCostModel:
    """The host cost model of one GPU of ``system`` when ``gpus_used_per_node`` GPUs of each
    node are in use (default: all); the used GPUs share the node's host cores and memory."""
    node = system.node
    gpu, cpu = node.gpu.gpu, node.cpu.cpu
    assert gpu is not None and cpu is not None
    link = gpu.host_link
    gpus_per_cpu = (gpus_used_per_node or node.gpus) / node.cpus
    stream = _need(cpu.memory.stream_bandwidth_gb_s, node.cpu.name,
                   "cpu.memory.stream_bandwidth_gb_s")
    um = gpu.unified_memory
    h2d = _need(link.h2d_copy_gb_s, node.gpu.name, "gpu.host_link.h2d_copy_gb_s") * 1e9
    return HostCostModel(
        link=link.type,
        h2d_bytes_per_s=h2d,
        d2h_bytes_per_s=_need(link.d2h_copy_gb_s, node.gpu.name,
                              "gpu.host_link.d2h_copy_gb_s") * 1e9,
        host_memory_bytes_per_s=stream * 1e9 / gpus_per_cpu,
        cores=cpu.compute.cores / gpus_per_cpu,
        core_flops=cpu.compute.peak_flops("fp32") / cpu.compute.cores,
        fault_s=(um.fault_batch_us * 1e-6) if um else 0.0,
        migration_bytes_per_s=(um.migration_bandwidth_gb_s * 1e9) if um else h2d,
        access_bytes_per_s={
            key: value * 1e9 for key, value in (
                ("gpu_read_host", link.gpu_read_host_gb_s),
                ("gpu_write_host", link.gpu_write_host_gb_s),
                ("cpu_read_device", link.cpu_read_device_gb_s),
                ("cpu_write_device", link.cpu_write_device_gb_s),
            ) if value is not None
        },
        system=node.gpu.name,
    )
