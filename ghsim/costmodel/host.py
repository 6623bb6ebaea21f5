"""Host-side costs that are not transfers: the host CPU's arithmetic and page-fault service.

Copies, in-place accesses, the CPU streaming its memory and page migration are flows on the
system's links (``ghsim.fabric``); what is left here is what a core does per FLOP and what the
driver spends per batch of GPU page faults.
"""

from __future__ import annotations

from dataclasses import dataclass

from ghsim.config.schema import SystemSpec


@dataclass(frozen=True)
class HostCostModel:
    """The host CPU of one node type."""

    cores_per_cpu: int
    core_flops: float
    """FP32 FLOP/s of one host core."""
    fault_s: float
    """Cost of one batch of GPU page faults."""

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
        fault_s=(um.fault_batch_us * 1e-6) if um else 0.0,
    )
