"""Host-side costs that are not transfers: the host CPU's arithmetic, what its cores can stream,
and page-fault service.

Copies, in-place accesses, the CPU streaming its memory and page migration are flows on the
system's links (``ghsim.fabric``); what is left here is what a core does per FLOP, what a core
reads and writes of its memory (a single thread keeps only so many misses in flight: one Grace
core reads 20.6 GB/s and writes 43.0, T4#29, so a host op on a few cores streams below the
memory's rate and caps its flow at what its cores reach) and what the driver's fault service
costs. Fault-driven migration is bound by that service, not by the link:
GH200 migrates faulted managed memory at about 9 GB/s per direction (FACTS.md T3#9-10) over a
link whose copy engines reach 375, so a migration is a flow capped at
:attr:`HostCostModel.migration_bytes_per_s`, and that measured rate already includes the fault
service. A part that gives ``fault_batch_us`` (a copy rate that leaves fault service out, as the
PCIe parts do) adds that much per batch of ``fault_batch_pages`` faulted pages on top.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ghsim import units
from ghsim.config.schema import SystemSpec


@dataclass(frozen=True)
class HostCostModel:
    """The host CPU of one node type."""

    cores_per_cpu: int
    core_flops: float
    """FP32 FLOP/s of one host core."""
    fault_s: float
    """Cost of one batch of GPU page faults on top of the migration rate (0: included in it)."""
    migration_bytes_per_s: float = math.inf
    """Fault-driven migration per direction, fault service included: the cap of each migration
    flow (infinite without a unified_memory section)."""
    core_read_bytes_per_s: float = math.inf
    """What one core reads of its local memory (infinite: not measured, no per-core bound)."""
    core_write_bytes_per_s: float = math.inf
    """What one core writes of its local memory."""

    def cores_used(self, cores: int | None, sharers: int) -> float:
        """This GPU's share of its host CPU's cores, shared with ``sharers`` GPUs (the GPU's
        own share included), at most ``cores`` if given."""
        share = self.cores_per_cpu / max(1, sharers)
        return min(float(cores), share) if cores else share

    def cpu_compute_s(self, flops: float, cores: int | None, sharers: int) -> float:
        """Seconds of arithmetic for ``flops`` on :meth:`cores_used` cores."""
        return flops / (self.cores_used(cores, sharers) * self.core_flops)

    def cores_stream_bytes_per_s(self, cores: int | None, sharers: int,
                                 read_share: float) -> float:
        """The most :meth:`cores_used` cores stream of their local memory when ``read_share``
        of the bytes are reads and the rest writes (each core at its measured single-thread
        rates); the memory's own stream rate is the link's, which bounds it too."""
        if math.isinf(self.core_read_bytes_per_s):
            return math.inf
        per_core = 1.0 / (read_share / self.core_read_bytes_per_s
                          + (1.0 - read_share) / self.core_write_bytes_per_s)
        return self.cores_used(cores, sharers) * per_core


def host_cost_model(system: SystemSpec) -> HostCostModel:
    """The host cost model of ``system``."""
    node = system.node
    gpu, cpu = node.gpu.gpu, node.cpu.cpu
    assert gpu is not None and cpu is not None
    um = gpu.unified_memory
    # One measured single-thread rate bounds the other direction too.
    read = cpu.compute.core_read_gb_s or cpu.compute.core_write_gb_s
    write = cpu.compute.core_write_gb_s or read
    return HostCostModel(
        cores_per_cpu=cpu.compute.cores,
        core_flops=cpu.compute.peak_flops("fp32") / cpu.compute.cores,
        fault_s=(um.fault_batch_us * 1e-6) if um and um.fault_batch_us else 0.0,
        migration_bytes_per_s=gpu.migration_bytes_per_s() or math.inf,
        core_read_bytes_per_s=_gb_s(read),
        core_write_bytes_per_s=_gb_s(write),
    )


def _gb_s(value: float | None) -> float:
    return units.gb_s_to_bytes_per_s(value) if value else math.inf
