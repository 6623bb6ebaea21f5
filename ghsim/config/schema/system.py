"""``kind: system``: a node type, the NVLink domain it forms, and the scale-out fabric.

A system scales to any number of whole nodes; the scenario's ``num_gpus`` says how many are used.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ghsim.config.schema.base import (
    INFORMATIONAL,
    ROUTE,
    DocumentSpec,
    Name,
    PositiveFloat,
    PositiveInt,
    Sources,
    Spec,
)
from ghsim.config.schema.hardware import HardwareSpec
from ghsim.config.schema.refs import Ref
from ghsim.limits import MAX_NODE_PARTS

HardwareRef = Annotated[HardwareSpec, Ref("hardware")]


class NodeNvlinkSpec(Spec):
    """How the GPUs of one node reach each other over NVLink."""

    topology: Literal["switch", "direct", "none"] = Field(
        description="switch: NVSwitch chips (DGX, NVLink switch systems); direct: GPU-to-GPU "
        "links split evenly among peers; none: no NVLink inside the node."
    )
    switches: PositiveInt | None = Field(
        default=None, json_schema_extra=INFORMATIONAL, description="NVSwitch chips per node. "
        "Informational: a switch passes what the GPUs' NVLink ports carry, so NVLink traffic is "
        "costed from gpu.nvlink; nothing reads the count.")
    links_per_peer: PositiveInt | None = Field(
        default=None, description="direct only; default: the GPU's links split among its peers."
    )


class CpuLinkSpec(Spec):
    """The link between the CPU sockets of a node (UPI, xGMI, Grace-to-Grace NVLink-C2C)."""

    type: Literal["upi", "xgmi", "c2c"] = Field(
        json_schema_extra=INFORMATIONAL, description="Informational: the link's rate is "
        "bandwidth_gb_s, whatever its kind.")
    bandwidth_gb_s: PositiveFloat = Field(description="Per direction.")
    latency_ns: PositiveFloat | None = Field(
        default=None, json_schema_extra=INFORMATIONAL,
        description=f"Latency across the link.{ROUTE}")


NodeParts = Annotated[int, Field(gt=0, le=MAX_NODE_PARTS)]
"""A count of one kind of part in a node (``ghsim.limits.MAX_NODE_PARTS``). Its own bound, not
PositiveInt's: a second ``le`` given by ``Field`` would be overridden by the type's."""


class NodeSpec(Spec):
    """One node: its GPUs, CPUs, memories, NVLink and NICs."""

    name: Name
    gpus: NodeParts
    gpu: HardwareRef
    cpus: NodeParts
    cpu: HardwareRef
    cpu_link: CpuLinkSpec | None = None
    nvlink: NodeNvlinkSpec
    nics: Annotated[int, Field(ge=0, le=MAX_NODE_PARTS)]
    nic: Annotated[HardwareSpec | None, Ref("hardware")] = None
    nic_attach: Literal["gpu", "cpu"] = Field(
        description="gpu: NIC beside its GPU on a PCIe switch (GPUDirect RDMA); cpu: reached "
        "through the CPU (GH200 MGX nodes, the C2C path)."
    )
    gpudirect_rdma: bool | None = Field(
        default=None, description="Whether NCCL moves network traffic straight between HBM "
        "and the NIC. Default: on when the NIC sits beside its GPU (nic_attach gpu), off when it "
        "is reached through the CPU, as NCCL does on GH200 (NCCL_NET_GDR_LEVEL=SYS turns it on)."
    )
    staged_network_efficiency: float = Field(
        default=1.0, gt=0.0, le=1.0, description="Fraction of the NIC's NCCL bandwidth left "
        "when network traffic is staged through host memory (gpudirect_rdma off); the traffic "
        "also crosses the host link and host memory.",
    )

    power_limit_w: PositiveFloat | None = Field(
        default=None, description="Power cap of one GH200 module in this system, in W: the "
        "superchip's Grace, Hopper and memory together (Alps about 660 W, JUPITER 680 W). "
        "Grace is served first: the GPU's board limit is the cap less the CPU part's "
        "module_power_w (the lower of that and gpu_power_limit_w when both are given), "
        "unless gpu_clock_ghz gives the clock the GPUs sustain under the cap. Without a "
        "module_power_w the cap only warns.",
    )
    gpu_power_limit_w: PositiveFloat | None = Field(
        default=None, description="Board power limit of each GPU, in W (nvidia-smi -pl, as "
        "MLPerf's MaxQ runs set it): the SMs get what the part's fixed_power_w leaves and "
        "compute rates scale by ((limit - fixed) / (board_power_w - fixed))^(1/3) (at most 1), on "
        "top of gpu_clock_ghz; memory and link rates do not. Default: no limit below the "
        "board's rated power.",
    )
    gpu_clock_ghz: PositiveFloat | None = Field(
        default=None, description="The SM clock this system's GPUs sustain under load (power "
        "or thermal limits, vboost, locked clocks). Every compute rate of the GPU scales by "
        "gpu_clock_ghz / the part's clock_ghz, the clock its peaks and measured efficiencies "
        "refer to; memory and link rates do not. Default: the part's clock_ghz.",
    )

    @property
    def uses_gpudirect_rdma(self) -> bool:
        if self.gpudirect_rdma is not None:
            return self.gpudirect_rdma
        return self.nic_attach == "gpu"

    @model_validator(mode="after")
    def _parts_fit(self) -> NodeSpec:
        for key, spec, want in (("gpu", self.gpu, "gpu"), ("cpu", self.cpu, "cpu")):
            if spec.type != want:
                raise ValueError(
                    f"{key} must be a hardware file of type {want!r}, got {spec.type!r}"
                )
        if self.nics and (self.nic is None or self.nic.type != "nic"):
            raise ValueError("nics > 0 needs a nic: hardware file of type 'nic'")
        if self.gpus % self.cpus and self.cpus % self.gpus:
            raise ValueError(f"gpus ({self.gpus}) and cpus ({self.cpus}) must divide one another")
        if self.nics and self.gpus % self.nics and self.nics % self.gpus:
            raise ValueError(f"gpus ({self.gpus}) and nics ({self.nics}) must divide one another")
        # Each GPU's traffic leaves by a NIC it reaches, and a GPU forwards nobody's traffic to
        # its PCIe devices (NCCL's PXN, over NVLink to the GPU beside a NIC, is not modelled).
        if self.nics and self.nic_attach == "gpu" and self.nics < self.gpus:
            raise ValueError(f"nic_attach 'gpu' puts a NIC beside each GPU: expected nics >= "
                             f"gpus ({self.gpus}), got {self.nics} (or nic_attach 'cpu')")
        if (self.nvlink.topology == "none" and self.gpus > 1 and self.cpus > 1
                and self.cpu_link is None):
            raise ValueError(f"nvlink.topology 'none' leaves GPUs on different CPUs of the "
                             f"node no path to each other: expected a cpu_link between its "
                             f"{self.cpus} CPUs (UPI, xGMI, C2C), or NVLink")
        gpu = self.gpu.gpu
        uses_nvlink = self.nvlink.topology != "none" and self.gpus > 1
        if uses_nvlink and gpu is not None and gpu.nvlink is None:
            raise ValueError("nvlink.topology needs a gpu with an nvlink section")
        return self


class NvlinkDomainSpec(Spec):
    """Nodes joined by an NVLink switch system into one NVLink domain (NVL32, DGX GH200)."""

    nodes: PositiveInt = Field(default=1, description="Nodes per NVLink domain.")
    switches: PositiveInt | None = Field(
        default=None, json_schema_extra=INFORMATIONAL, description="NVLink switch chips in the "
        "domain's switch system. Informational: NVLink traffic is costed from the GPUs' ports "
        "(gpu.nvlink); nothing reads the count.")


class FabricSpec(Spec):
    """The scale-out network that joins NVLink domains: an InfiniBand fat tree."""

    topology: Literal["fat_tree", "rail_optimized"] = Field(
        description="rail_optimized: NIC k of every node in a unit shares leaf switch k."
    )
    switch_radix: PositiveInt = Field(description="Ports per switch.")
    oversubscription: float = Field(
        default=1.0, ge=1.0, description="A leaf switch's down-links (to NICs) per up-link; 1 "
        "is non-blocking. The tiers above the leaves are non-blocking."
    )
    nodes_per_unit: PositiveInt | None = Field(
        default=None, description="rail_optimized: nodes per scalable unit."
    )
    hop_latency_ns: PositiveFloat = Field(
        json_schema_extra=INFORMATIONAL, description=f"Per switch traversed.{ROUTE}")

    @model_validator(mode="after")
    def _radix_even(self) -> FabricSpec:
        if self.switch_radix < 4 or self.switch_radix % 2:
            raise ValueError(f"switch_radix must be an even number >= 4, got {self.switch_radix}")
        if self.topology == "rail_optimized":
            if self.nodes_per_unit is None:
                raise ValueError("topology 'rail_optimized' needs nodes_per_unit")
            if self.nodes_per_unit > self.leaf_down_ports:
                raise ValueError(
                    f"nodes_per_unit ({self.nodes_per_unit}) exceeds the {self.leaf_down_ports} "
                    f"down-ports of a leaf at radix {self.switch_radix} and oversubscription "
                    f"{self.oversubscription:g}"
                )
        return self

    @property
    def leaf_down_ports(self) -> int:
        """Ports of a leaf switch facing NICs: radix x os / (1 + os)."""
        return int(self.switch_radix * (self.oversubscription / (1 + self.oversubscription)))


class SystemSpec(DocumentSpec):
    """``kind: system``: a node type plus its NVLink domain and its scale-out fabric."""

    KIND = "system"

    name: Name
    node: NodeSpec
    nvlink_domain: NvlinkDomainSpec = Field(default_factory=NvlinkDomainSpec)
    fabric: FabricSpec | None = Field(
        default=None, description="Omit for a system that never spans more than one domain."
    )
    max_nodes: PositiveInt | None = Field(
        default=None, description="The most nodes this system is built with, if bounded."
    )
    sources: Sources = Field(default_factory=dict)

    @model_validator(mode="after")
    def _fabric_needs_nics(self) -> SystemSpec:
        if self.fabric is not None and self.node.nics == 0:
            raise ValueError("a fabric needs node.nics > 0")
        gpu = self.node.gpu.gpu
        if self.nvlink_domain.nodes > 1 and gpu is not None and gpu.nvlink is None:
            raise ValueError("an NVLink domain of several nodes needs GPUs with nvlink")
        if self.nvlink_domain.nodes > 1 and self.node.nvlink.topology != "switch":
            raise ValueError(f"an NVLink domain of several nodes joins them through its switch "
                             f"system: expected node.nvlink.topology 'switch', got "
                             f"{self.node.nvlink.topology!r}")
        return self

    @property
    def gpus_per_domain(self) -> int:
        return self.node.gpus * self.nvlink_domain.nodes
