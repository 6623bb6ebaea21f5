"""Collective and point-to-point costs on the topology, calibrated on NCCL bus bandwidths.

NCCL reports a collective's bus bandwidth ``busbw = factor x message / time``, with ``factor``
``2 (n-1)/n`` for all-reduce and ``(n-1)/n`` for all-gather and reduce-scatter: the bytes each
rank puts on its busiest link. So a collective takes ``latency + factor x message / busbw``, where
``busbw`` is what NCCL measured on the links the group crosses:

* inside one NVLink domain, the GPU's NVLink bus bandwidth (with NVLink SHARP for all-reduce on
  NVSwitch systems), scaled by the share of its links a direct topology gives the group;
* across domains, the node's NICs shared by the group's members in that node, each NIC at its
  measured NCCL bus bandwidth, and never more than the NVLink share inside the node.

The latency is the measured per-collective latency times ``ceil(log2 n)`` steps (NCCL's tree and
PAT algorithms; rings switch to them for small messages).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ghsim.config.schema import SystemSpec
from ghsim.errors import ConfigError
from ghsim.workload.ir import Group
from ghsim.workload.summary import wire_bytes

LinkName = Literal["nvlink", "nic"]


@dataclass(frozen=True)
class Channel:
    """Where a group's traffic goes and how fast: a link of the rank, its NCCL bandwidth, its
    latency per step."""

    link: LinkName
    busbw_bytes_per_s: float
    latency_s: float


@dataclass(frozen=True)
class CommCostModel:
    """Collective costs of one system."""

    system: str
    nvlink_busbw: float | None
    nvls_busbw: float | None
    nvlink_latency_s: float
    nic_busbw: float | None
    nic_latency_s: float
    nics_per_node: int

    def channel(self, group: Group, collective: str = "all_gather") -> Channel:
        """The link a collective of ``group`` is bound by."""
        if group.domains == 1 and self.nvlink_busbw is not None:
            busbw = self.nvlink_busbw
            if collective == "all_reduce" and self.nvls_busbw is not None and group.size > 2:
                busbw = self.nvls_busbw
            return Channel("nvlink", busbw, self.nvlink_latency_s)
        if self.nic_busbw is None or self.nics_per_node == 0:
            raise ConfigError(self.system, "node.nic",
                              "a group spans nodes, but the NIC has no nccl_busbw_gb_s to cost it")
        members_per_node = math.ceil(group.size / group.nodes)
        busbw = self.nic_busbw * self.nics_per_node / members_per_node
        if members_per_node > 1 and self.nvlink_busbw is not None:
            busbw = min(busbw, self.nvlink_busbw)
        return Channel("nic", busbw, self.nic_latency_s)

    def collective_s(self, collective: str, message_bytes: float, group: Group) -> float:
        """Seconds for one collective of ``message_bytes`` over ``group`` on idle links."""
        if group.size <= 1:
            return 0.0
        channel = self.channel(group, collective)
        steps = math.ceil(math.log2(group.size))
        wire = wire_bytes(collective, message_bytes, group.size)
        return steps * channel.latency_s + wire / channel.busbw_bytes_per_s

    def p2p_channel(self, same_domain: bool) -> Channel:
        """The link a pipeline send crosses."""
        if same_domain and self.nvlink_busbw is not None:
            return Channel("nvlink", self.nvlink_busbw, self.nvlink_latency_s)
        if self.nic_busbw is None:
            raise ConfigError(self.system, "node.nic",
                              "a pipeline send leaves the domain, but the NIC has no "
                              "nccl_busbw_gb_s to cost it")
        return Channel("nic", self.nic_busbw, self.nic_latency_s)


def comm_cost_model(system: SystemSpec) -> CommCostModel:
    """The collective cost model of ``system``."""
    node = system.node
    gpu = node.gpu.gpu
    assert gpu is not None
    nvlink = gpu.nvlink if node.nvlink.topology != "none" else None
    nvlink_busbw = nvls = None
    nvlink_latency = 0.0
    if nvlink is not None and (node.gpus > 1 or system.nvlink_domain.nodes > 1):
        if nvlink.nccl_busbw_gb_s is None or nvlink.collective_latency_us is None:
            raise ConfigError(node.gpu.name, "gpu.nvlink",
                              "needs nccl_busbw_gb_s and collective_latency_us to cost NVLink")
        share = 1.0
        if node.nvlink.topology == "direct":
            per_peer = node.nvlink.links_per_peer or nvlink.links // max(node.gpus - 1, 1)
            share = min(1.0, per_peer * (node.gpus - 1) / nvlink.links)
        nvlink_busbw = nvlink.nccl_busbw_gb_s * 1e9 * share
        if node.nvlink.topology == "switch" and nvlink.nvls_allreduce_busbw_gb_s:
            nvls = nvlink.nvls_allreduce_busbw_gb_s * 1e9
        nvlink_latency = nvlink.collective_latency_us * 1e-6
    nic = node.nic.nic if node.nic is not None else None
    nic_busbw = nic.nccl_busbw_gb_s * 1e9 if nic and nic.nccl_busbw_gb_s else None
    nic_latency = nic.collective_latency_us * 1e-6 if nic and nic.collective_latency_us else 0.0
    if nic is not None and nic_busbw is not None and nic.collective_latency_us is None:
        raise ConfigError(node.nic.name if node.nic else system.name, "nic.collective_latency_us",
                          "is needed to cost collectives across nodes (with a source)")
    return CommCostModel(system.name, nvlink_busbw, nvls, nvlink_latency, nic_busbw,
                         nic_latency, node.nics)
