"""``SystemGraph``: the hardware of a whole system as a hierarchical graph, with routes.

Only one node is instantiated (the template, a networkx ``MultiDiGraph``), plus the NVLink switch
of its domain and one aggregated switch per fat-tree tier; the system is that node repeated
``num_nodes`` times. Building is therefore as cheap for 16,384 GPUs as for one. Routes are
concrete: each hop names the instance it crosses (``n12.gpu3``, ``d1.nvswitch``, ``leaf40``),
so flows that share a link can be found to share it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from ghsim.config.layout import LayoutProblem, nodes_for
from ghsim.config.schema import SystemSpec
from ghsim.errors import ConfigError, LayoutError
from ghsim.hardware.fabric import FatTree, size_fat_tree
from ghsim.hardware.node import build_node_template

if TYPE_CHECKING:
    import networkx as nx

TIER_NAMES = ("leaf", "spine", "core")


def tier_name(level: int) -> str:
    """``leaf`` for level 1, ``spine``, ``core``, then ``tier4`` ..."""
    return TIER_NAMES[level - 1] if level <= len(TIER_NAMES) else f"tier{level}"


@dataclass(frozen=True, order=True)
class Endpoint:
    """One component instance: a template component ``local`` of node ``node``."""

    node: int
    local: str

    def __str__(self) -> str:
        return f"n{self.node}.{self.local}"


@dataclass(frozen=True)
class Hop:
    """One directed link of a route, between two concrete instances."""

    src: str
    dst: str
    kind: str
    bandwidth_bytes_per_s: float
    latency_s: float


@dataclass(frozen=True)
class Route:
    """The links a transfer crosses, in order."""

    hops: tuple[Hop, ...]

    @property
    def bottleneck_bytes_per_s(self) -> float:
        """The slowest link's bandwidth (infinite for an empty route)."""
        return min((h.bandwidth_bytes_per_s for h in self.hops), default=math.inf)

    @property
    def latency_s(self) -> float:
        return sum(h.latency_s for h in self.hops)

    def __str__(self) -> str:
        if not self.hops:
            return "(local)"
        return " -> ".join([self.hops[0].src, *(h.dst for h in self.hops)])


def _cost(u: str, v: str, edges: dict[Any, dict[str, Any]]) -> float:
    """Routing weight: seconds per byte of the fastest parallel link, plus a small hop cost."""
    return float(min(1.0 / d["bandwidth_bytes_per_s"] for d in edges.values())) + 1e-15


@dataclass
class SystemGraph:
    """A system of ``num_gpus`` GPUs: the node template, the domain and the fabric."""

    spec: SystemSpec
    num_gpus: int
    num_nodes: int
    gpus_per_node: int
    template: nx.MultiDiGraph
    fabric: FatTree | None
    _paths: dict[tuple[str, str], list[str]] = field(default_factory=dict, repr=False)
    _nics: dict[str, str] = field(default_factory=dict, repr=False)

    # -- sizes ----------------------------------------------------------------------------------

    @property
    def nodes_per_domain(self) -> int:
        return min(self.spec.nvlink_domain.nodes, self.num_nodes)

    @property
    def num_domains(self) -> int:
        return math.ceil(self.num_nodes / self.nodes_per_domain)

    def domain_of(self, node: int) -> int:
        return node // self.spec.nvlink_domain.nodes

    # -- components -----------------------------------------------------------------------------

    def component(self, local: str) -> dict[str, Any]:
        """The attributes of template component ``local``."""
        return dict(self.template.nodes[local])

    def components(self, kind: str) -> list[str]:
        """Template ids of every component of ``kind`` in one node, in order."""
        return [n for n, d in self.template.nodes(data=True) if d["kind"] == kind]

    def instances(self, local: str) -> int:
        """How many instances of template component ``local`` the whole system has."""
        scope = self.template.nodes[local]["scope"]
        return self.num_domains if scope == "domain" else self.num_nodes

    def gpu(self, rank: int) -> Endpoint:
        """The GPU of global ``rank`` (ranks fill node 0 first)."""
        if not 0 <= rank < self.num_gpus:
            raise IndexError(f"GPU rank {rank} outside 0..{self.num_gpus - 1}")
        node, local = divmod(rank, self.gpus_per_node)
        return Endpoint(node, f"gpu{local}")

    def memory_of(self, endpoint: Endpoint) -> Endpoint:
        """The memory a GPU or CPU owns (its HBM, its LPDDR5X or DDR)."""
        for neighbour in self.template.successors(endpoint.local):
            if self.template.nodes[neighbour]["kind"] == "memory":
                return Endpoint(endpoint.node, neighbour)
        raise KeyError(f"{endpoint} owns no memory")

    def host_cpu(self, endpoint: Endpoint) -> Endpoint:
        """The CPU a GPU is attached to (its Grace, or its PCIe root's socket)."""
        for neighbour, _, key in self.template.in_edges(endpoint.local, keys=True):
            if key in ("c2c", "pcie") and self.template.nodes[neighbour]["kind"] == "cpu":
                return Endpoint(endpoint.node, neighbour)
        raise KeyError(f"{endpoint} has no host CPU")

    # -- routing --------------------------------------------------------------------------------

    def _local_path(self, src: str, dst: str) -> list[str]:
        key = (src, dst)
        if key not in self._paths:
            import networkx  # imported where a graph is first walked (see hardware/node.py)

            view = networkx.subgraph_view(self.template, filter_edge=self._may_cross(src, dst))
            try:
                self._paths[key] = networkx.shortest_path(view, src, dst, weight=_cost)
            except networkx.NetworkXNoPath:
                message = f"no route from {src} to {dst} in a {self.spec.name} node"
                raise ValueError(message) from None
        return self._paths[key]

    def _may_cross(self, src: str, dst: str) -> Any:
        """Edge filter: a GPU forwards traffic between its NVLink and its host link only over
        coherent NVLink-C2C (GH200 peers reach each other's memory that way); a PCIe GPU is an
        endpoint, never a hop on the way between a CPU and another device."""
        nodes = self.template.nodes

        def keep(u: str, v: str, key: str) -> bool:
            if key != "pcie":
                return True
            return not ((nodes[u]["kind"] == "gpu" and u != src)
                        or (nodes[v]["kind"] == "gpu" and v != dst))

        return keep

    def _hop(self, u: str, v: str, u_id: str, v_id: str) -> Hop:
        edges = self.template.get_edge_data(u, v)
        data = max(edges.values(), key=lambda d: d["bandwidth_bytes_per_s"])
        return Hop(u_id, v_id, data["kind"], data["bandwidth_bytes_per_s"], data["latency_s"])

    def _instance(self, local: str, node: int) -> str:
        if self.template.nodes[local]["scope"] == "domain":
            return f"d{self.domain_of(node)}.{local}"
        return f"n{node}.{local}"

    def _within_domain(self, src: Endpoint, dst: Endpoint) -> list[Hop]:
        path = self._local_path(src.local, dst.local)
        if src.node != dst.node:  # another node of the domain: through the domain's switch
            shared = [n for n, d in self.template.nodes(data=True) if d["scope"] == "domain"]
            if not shared:
                raise ValueError(f"{src} and {dst} share a domain but no domain switch")
            path = (self._local_path(src.local, shared[0])
                    + self._local_path(shared[0], dst.local)[1:])
        hops, node = [], src.node
        for u, v in pairwise(path):
            u_id = self._instance(u, node)
            if self.template.nodes[u]["scope"] == "domain":
                node = dst.node
            hops.append(self._hop(u, v, u_id, self._instance(v, node)))
        return hops

    def nearest_nic(self, local: str) -> str:
        """The NIC a component's traffic leaves the node by (its rail's NIC)."""
        if local not in self._nics:
            self._nics[local] = self._find_nearest_nic(local)
        return self._nics[local]

    def _find_nearest_nic(self, local: str) -> str:
        nics = self.components("nic")
        if not nics:
            raise KeyError(f"system {self.spec.name} has no NICs")
        reachable = []
        for nic in nics:
            try:
                reachable.append((len(self._local_path(local, nic)), int(nic[3:]), nic))
            except ValueError:
                continue
        if not reachable:  # a node layout the schema accepts but no route crosses
            raise ConfigError(self.spec.name, "node.nics", f"expected every GPU and CPU to "
                              f"reach a NIC of its node, but {local} reaches none (nics "
                              f"{self.spec.node.nics}, nic_attach {self.spec.node.nic_attach})")
        return min(reachable)[2]

    def _across_fabric(self, src: Endpoint, dst: Endpoint) -> list[Hop]:
        assert self.fabric is not None
        tree = self.fabric
        nic_a, nic_b = self.nearest_nic(src.local), self.nearest_nic(dst.local)
        a = tree.endpoint(src.node, int(nic_a[3:]))
        b = tree.endpoint(dst.node, int(nic_b[3:]))
        top = tree.common_level(a, b)
        nic_bw = self.template.nodes[nic_a]["bandwidth_bytes_per_s"]
        latency = self.spec.fabric.hop_latency_ns * 1e-9 if self.spec.fabric else 0.0
        ups = [f"{tier_name(t)}{a // tree.block_size(t)}" for t in range(1, top + 1)]
        downs = [f"{tier_name(t)}{b // tree.block_size(t)}" for t in range(top - 1, 0, -1)]
        chain = [f"n{src.node}.{nic_a}", *ups, *downs, f"n{dst.node}.{nic_b}"]
        hops = []
        for i, (u, v) in enumerate(pairwise(chain)):
            level = min(i + 1, len(chain) - 1 - i)  # links climb, then descend
            bandwidth = nic_bw if level == 1 else tree.block_size(level - 1) * nic_bw / max(
                1.0, tree.down / max(tree.up, 1))
            hops.append(Hop(u, v, "ib", bandwidth, latency if v[0] != "n" else 0.0))
        return (self._within_domain(src, Endpoint(src.node, nic_a)) + hops
                + self._within_domain(Endpoint(dst.node, nic_b), dst))

    def route(self, src: Endpoint, dst: Endpoint) -> Route:
        """The links a transfer from ``src`` to ``dst`` crosses."""
        if src == dst:
            return Route(())
        if self.domain_of(src.node) == self.domain_of(dst.node):
            return Route(tuple(self._within_domain(src, dst)))
        if self.fabric is None:
            raise ValueError(f"{src} and {dst} are in different domains and there is no fabric")
        return Route(tuple(self._across_fabric(src, dst)))

    def bottleneck_bytes_per_s(self, src: Endpoint, dst: Endpoint) -> float:
        """Bandwidth of the slowest link between ``src`` and ``dst``."""
        return self.route(src, dst).bottleneck_bytes_per_s


def build_graph(system: SystemSpec, num_gpus: int) -> SystemGraph:
    """Build the hardware graph of ``num_gpus`` GPUs of ``system`` (whole nodes)."""
    try:
        nodes, per_node = nodes_for(system, num_gpus)
    except LayoutProblem as problem:
        raise LayoutError(system.name, "num_gpus", problem.message) from None
    template = build_node_template(system)
    fabric = None
    if system.fabric is not None and system.node.nics:
        fabric = size_fat_tree(system.fabric, nodes, system.node.nics)
    return SystemGraph(system, num_gpus, nodes, per_node, template, fabric)
