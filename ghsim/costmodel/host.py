"""Host-side costs that are not transfers: the host CPU's arithmetic and page-fault service.

Copies, in-place accesses, the CPU streaming its memory and page migration are flows on the
system's links (``ghsim.fabric``); what is left here is what a core does per FLOP and what the
driver's fault service costs. Fault-driven migration is bound by that service, not by the link:
GH200 migrates faulted managed memory at about 9 GB/s per direction (FACTS.md T3#9-10) over a
link whose copy engines reach 375, so a migration is a flow capped at
:attr:`HostCostModel.migration_bytes_per_s`, and that measured rate already includes the fault
service. A part that gives ``fault_batch_us`` (a copy rate that leaves fault service out, as the
PCIe parts do) adds that much per batch of ``fault_batch_pages`` faulted pages on top.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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

    def cpu_compute_s(self, flops: float, cores: int | None, sharers: int) -> float:
        """Seconds of arithmetic for ``flops`` on this GPU's share of its host CPU, shared with
        ``sharers`` GPUs (the GPU's own share included), at most ``cores`` cores if given."""
        share = self.cores_per_cpu / max(1, sharers)
        used = min(float(cores), share) if cores else share
        return flops / (used * self.core_flops)


def host_cost_model(system: SystemSpec) -> HostCostModel:
    """The host cost model of ``system``."""
    node = system.node
    gpu, cpu = node.gpu.gpu, node.cpu.cpu
    assert gpu is not None and cpu is not None
    um = gpu.unified_memory
    return HostCostModel(
        cores_per_cpu=cpu.compute.cores,
        core_flops=cpu.compute.peak_flops("fp32") / cpu.compute.cores,
        fault_s=(um.fault_batch_us * 1e-6) if um and um.fault_batch_us else 0.0,
        migration_bytes_per_s=gpu.migration_bytes_per_s() or math.inf,
    )
