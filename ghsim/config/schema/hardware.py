"""``kind: hardware``: one chip per file (a GPU, a CPU, or a NIC) with cited numbers.

Units are in the key names and converted to SI by the properties at the bottom of each class.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ghsim import units
from ghsim.config.schema.base import (
    DocumentSpec,
    Fraction,
    Name,
    PositiveFloat,
    PositiveInt,
    Sources,
    Spec,
)

Dtype = Literal["fp64", "fp64_tensor", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"]


class MemorySpec(Spec):
    """A memory attached to a chip (HBM on a GPU, LPDDR5X or DDR on a CPU)."""

    type: Literal["hbm2e", "hbm3", "hbm3e", "lpddr5x", "ddr4", "ddr5"]
    capacity_gib: PositiveFloat
    usable_capacity_gib: PositiveFloat | None = None
    peak_bandwidth_gb_s: PositiveFloat
    read_bandwidth_gb_s: PositiveFloat | None = Field(
        default=None, description="Measured read bandwidth by the chip that owns the memory."
    )
    write_bandwidth_gb_s: PositiveFloat | None = None
    stream_bandwidth_gb_s: PositiveFloat | None = Field(
        default=None, description="Measured or vendor-expected STREAM TRIAD bandwidth."
    )
    elementwise_bandwidth_gb_s: PositiveFloat | None = Field(
        default=None, description="Bandwidth element-wise and normalization kernels reach in "
        "training (measured), below STREAM because they are short and irregular.",
    )
    softmax_bandwidth_gb_s: PositiveFloat | None = Field(
        default=None, description="Bandwidth an unfused scale-mask-softmax over attention "
        "scores reaches in training (measured).",
    )
    latency_ns: PositiveFloat | None = None

    @model_validator(mode="after")
    def _usable_within_capacity(self) -> MemorySpec:
        if self.usable_capacity_gib is not None and self.usable_capacity_gib > self.capacity_gib:
            raise ValueError("usable_capacity_gib must not exceed capacity_gib")
        return self

    @property
    def capacity_bytes(self) -> float:
        """Usable capacity in bytes."""
        return units.gib_to_bytes(self.usable_capacity_gib or self.capacity_gib)

    @property
    def peak_bandwidth_bytes_per_s(self) -> float:
        return units.gb_s_to_bytes_per_s(self.peak_bandwidth_gb_s)


class GpuComputeSpec(Spec):
    """The GPU's compute: SMs, clocks and dense peak throughput per dtype."""

    architecture: Name
    sms: PositiveInt
    clock_ghz: PositiveFloat
    max_clock_ghz: PositiveFloat | None = None
    l2_cache_mb: PositiveFloat | None = None
    copy_engines: PositiveInt | None = None
    peak_tflops: dict[Dtype, PositiveFloat] = Field(description="Dense peak TFLOP/s per dtype.")
    gemm_efficiency: dict[Dtype, Fraction] = Field(
        default_factory=dict,
        description="Measured fraction of the dense peak that large GEMMs reach, per dtype.",
    )
    attention_efficiency: dict[Dtype, Fraction] = Field(
        default_factory=dict,
        description="Measured fraction of the dense peak fused (flash) attention reaches, "
        "forward and backward together, per dtype.",
    )
    gemm_tile: list[PositiveInt] | None = Field(
        default=None, min_length=2, max_length=2,
        description="Output tile (rows, columns) one SM computes at a time; GEMMs run in waves "
        "of one tile per SM.",
    )
    gemm_k_half: PositiveFloat | None = Field(
        default=None, description="Reduction length K at which a GEMM reaches half its "
        "large-K throughput (pipeline fill and epilogue): efficiency scales as K / (K + k_half).",
    )
    gemm_reference_k: PositiveInt | None = Field(
        default=None, description="K of the shape at which gemm_efficiency was measured.",
    )
    comm_overlap_slowdown: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Fraction by which compute kernels slow "
        "down while communication kernels run beside them on the same GPU.",
    )
    kernel_launch_us: PositiveFloat | None = Field(
        default=None, description="Time between back-to-back kernels on one stream."
    )

    @model_validator(mode="after")
    def _needs_fp32(self) -> GpuComputeSpec:
        if "fp32" not in self.peak_tflops:
            raise ValueError("peak_tflops must list at least fp32")
        return self


class NvlinkSpec(Spec):
    """The GPU's NVLink ports and what NCCL achieves on them."""

    generation: PositiveInt
    links: PositiveInt
    link_bandwidth_gb_s: PositiveFloat = Field(description="Per link, per direction.")
    nccl_link_bandwidth_gb_s: PositiveFloat | None = Field(
        default=None, description="NCCL's modelled per-link bandwidth."
    )
    nccl_busbw_gb_s: PositiveFloat | None = Field(
        default=None, description="Measured NCCL bus bandwidth per GPU (ring, non-SHARP)."
    )
    nvls_allreduce_busbw_gb_s: PositiveFloat | None = Field(
        default=None, description="Measured NCCL all-reduce bus bandwidth with NVLink SHARP."
    )
    collective_latency_us: PositiveFloat | None = Field(
        default=None,
        description="Per-step latency (alpha) of a collective over NVLink; not a wire latency.",
    )

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """All links together, per direction."""
        return units.gb_s_to_bytes_per_s(self.links * self.link_bandwidth_gb_s)


class HostLinkSpec(Spec):
    """The link between a GPU and its CPU: NVLink-C2C (GH200) or PCIe (DGX)."""

    type: Literal["c2c", "pcie"]
    generation: PositiveInt | None = None
    bandwidth_gb_s: PositiveFloat = Field(description="Peak, per direction.")
    coherent: bool = False
    h2d_copy_gb_s: PositiveFloat | None = Field(default=None, description="Measured memcpy.")
    d2h_copy_gb_s: PositiveFloat | None = None
    gpu_read_host_gb_s: PositiveFloat | None = Field(
        default=None, description="Measured GPU kernel reading host memory in place."
    )
    gpu_write_host_gb_s: PositiveFloat | None = None
    cpu_read_device_gb_s: PositiveFloat | None = Field(
        default=None, description="Measured CPU reading GPU memory in place."
    )
    cpu_write_device_gb_s: PositiveFloat | None = None
    gpu_host_latency_ns: PositiveFloat | None = Field(
        default=None, description="GPU load from host memory."
    )
    cpu_device_latency_ns: PositiveFloat | None = Field(
        default=None, description="CPU load from GPU memory."
    )

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return units.gb_s_to_bytes_per_s(self.bandwidth_gb_s)


class UnifiedMemorySpec(Spec):
    """How the driver manages unified (managed) memory on this GPU."""

    gpu_page_mib: PositiveFloat = Field(description="GPU page-table page size.")
    system_page_kib: PositiveFloat = Field(description="CPU (system) page size.")
    access_counter_threshold: PositiveInt | None = Field(
        default=None, description="Remote accesses to a region before it migrates "
        "(access-counter migration; ATS systems).",
    )
    fault_batch_us: PositiveFloat = Field(description="Cost of servicing one batch of faults.")
    fault_batch_pages: PositiveInt = Field(description="GPU pages migrated per fault batch.")
    migration_bandwidth_gb_s: PositiveFloat = Field(
        description="Throughput of fault-driven migration to the GPU."
    )


class GpuSpec(Spec):
    """Everything on the GPU side of a part file."""

    compute: GpuComputeSpec
    memory: MemorySpec
    nvlink: NvlinkSpec | None = None
    host_link: HostLinkSpec
    unified_memory: UnifiedMemorySpec | None = None


class CpuComputeSpec(Spec):
    """A CPU socket's cores, clocks and per-core FLOP per cycle."""

    architecture: Name
    cores: PositiveInt
    clock_ghz: PositiveFloat
    max_clock_ghz: PositiveFloat | None = None
    flops_per_cycle_per_core: dict[Literal["fp64", "fp32"], PositiveFloat]
    l3_cache_mb: PositiveFloat | None = None

    def peak_flops(self, dtype: Literal["fp64", "fp32"]) -> float:
        """Peak FLOP/s of the socket at the base clock."""
        return self.cores * self.clock_ghz * units.GHZ * self.flops_per_cycle_per_core[dtype]


class CpuSpec(Spec):
    """A CPU socket and the memory it owns."""

    compute: CpuComputeSpec
    memory: MemorySpec


class NicSpec(Spec):
    """A network adapter and what collectives achieve through it."""

    model: Name
    protocol: Literal["infiniband", "ethernet", "slingshot"]
    line_rate_gbit_s: PositiveFloat = Field(description="Per direction.")
    nccl_busbw_gb_s: PositiveFloat | None = Field(
        default=None, description="Measured NCCL bus bandwidth per NIC."
    )
    collective_latency_us: PositiveFloat | None = Field(
        default=None, description="Per-step latency (alpha) of a collective across nodes."
    )

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.line_rate_gbit_s * units.GBIT_S


class HardwareSpec(DocumentSpec):
    """``kind: hardware``: exactly one of ``gpu``, ``cpu`` or ``nic``."""

    KIND = "hardware"

    name: Name
    type: Literal["gpu", "cpu", "nic"]
    gpu: GpuSpec | None = None
    cpu: CpuSpec | None = None
    nic: NicSpec | None = None
    sources: Sources = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_section(self) -> HardwareSpec:
        given = [section for section in ("gpu", "cpu", "nic") if getattr(self, section) is not None]
        if given != [self.type]:
            raise ValueError(
                f"type {self.type!r} needs exactly the section {self.type!r}, got {given or 'none'}"
            )
        return self
