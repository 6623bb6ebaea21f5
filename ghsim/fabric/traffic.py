"""Where a rank class's transfers go: routes on the system graph, with the copies on each link.

A rank class is simulated once for all its members. Each of its transfers is laid on the route of
its representative member (``first_rank``), and each link of that route is charged with the
number of members whose own identical transfer crosses the same link instance at that moment:
the eight GPUs of a DGX node that leave by eight different NICs charge each NIC once; a GH200
node's four data-parallel ranks all cross their own NVLink-C2C to reach their NIC through Grace;
a leaf uplink carries every member below that leaf whose peer sits under another leaf. Counting
uses the placement of the class's members, never a simulation per GPU, so cost is flat in dp.

Collectives are laid as NCCL lays them (NVIDIA/nccl ``src/graph/search.cc``, ``connect.cc``):
a ring enters and leaves each NVLink domain once per channel, with one channel per member in the
domain, each leaving by its own NIC; so of a member's ``W`` wire bytes, ``W / m`` cross the
network and the rest stay on NVLink (``m`` members per domain). All-reduce inside one NVSwitch
domain uses NVLink SHARP when the GPU has it (reduction in the switch, at its measured bus
bandwidth). On direct NVLink (a quad GH200 node) NCCL's rings use every peer link, so a member's
NVLink bytes spread over its peers. An all-to-all sends 1/n of each member's buffer to every
other member: the share for members in other domains crosses the network (laid on the route to
the same position in the next domain), the rest stays on NVLink. Which algorithm and protocol
run a collective of a given size, and their latency, is NCCL's own choice (``nccl.choose``): a
tree shares the ring's routes at the tree's bandwidth factor, with less on the network where
two domains make each the other's only child (each sends the message once, not the ring's
2 (n - 1) / n times).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ghsim.config.layout import Layout
from ghsim.config.schema import SystemSpec
from ghsim.errors import ConfigError
from ghsim.fabric import nccl
from ghsim.fabric.links import Efficiencies, efficiencies, link_id, link_kind
from ghsim.fabric.sharing import Path, make_path, makespan_s
from ghsim.hardware.graph import Endpoint, Hop, SystemGraph, build_graph, tier_name
from ghsim.workload.ir import NO_DEDUP, Dedup, Group, RankClass


@dataclass(frozen=True)
class Share:
    """Part of a transfer: ``fraction`` of its bytes along ``path``."""

    path: Path
    fraction: float


@dataclass(frozen=True)
class Plan:
    """How one transfer of a rank class runs: its algorithm (and NCCL protocol), fixed latency
    and flows; ``wire_factor`` is the bytes on the wire per payload byte of the protocol."""

    algorithm: str
    latency_s: float
    shares: tuple[Share, ...]
    protocol: str = "Simple"
    wire_factor: float = 1.0

    def flows(self, nbytes: float) -> list[tuple[Path, float]]:
        return [(s.path, s.fraction * nbytes * self.wire_factor) for s in self.shares]


def _slowed(plan: Plan, share: float) -> Plan:
    """``plan`` with each flow reaching ``share`` of the rate it did on every link: the same
    bytes, the links held for longer (as a lower efficiency holds them)."""
    shares = tuple(Share(replace(s.path, coefficients=tuple(c / share
                                                            for c in s.path.coefficients)),
                         s.fraction) for s in plan.shares)
    return replace(plan, shares=shares)


def _domains_reached(k: int, groups: int, picked: int, domains: int) -> float:
    """Expected number of ``domains`` (equal contiguous shares of the experts, as expert
    parallelism places them) a token reaches with its ``k`` experts, drawn from ``picked`` of
    the router's ``groups`` (equal contiguous shares too; ``1, 1``: no group limit), each
    expert in one of the picked groups at random.

    Where a group spans ``domains / groups`` whole domains, the experts fall uniformly on the
    ``e = picked domains / groups`` domains of the picked groups and reach
    ``e (1 - (1 - 1/e)^k)`` of them. Where a domain holds ``per = groups / domains`` groups, it
    is reached when an expert lands in one of its picked groups: ``j`` of its groups are among
    the picked (hypergeometric), and it is missed with probability ``(1 - j / picked)^k``. Past
    :data:`_EXACT_TERMS` terms ``j`` concentrates at ``per picked / groups`` and the domain is
    missed with ``(1 - 1 / domains)^k``, as without a group limit. A ratio that divides neither
    way falls back to the first form."""
    if groups > domains and groups % domains == 0:
        per = groups // domains
        if min(per, picked) > _EXACT_TERMS:
            return domains * (1 - (1 - 1 / domains) ** k)
        total = _log_comb(groups, picked)
        missed = sum(math.exp(_log_comb(per, j) + _log_comb(groups - per, picked - j) - total)
                     * (1 - j / picked) ** k
                     for j in range(max(0, picked - (groups - per)), min(per, picked) + 1))
        return domains * (1 - missed)
    eligible = max(1.0, picked * domains / groups)
    return eligible * (1 - (1 - 1 / eligible) ** k)


_EXACT_TERMS = 256
"""Hypergeometric terms summed exactly; routers have a few groups (DeepSeek-V3: 8)."""


def _log_comb(n: int, r: int) -> float:
    """log C(n, r) in floating point (a group count from a file stays cheap)."""
    return math.lgamma(n + 1) - math.lgamma(r + 1) - math.lgamma(n - r + 1)


def _deduplicated(dedup: Dedup, domains: int) -> float:
    """The share of an all-to-all's token copies that travel to ``domains`` when each token
    goes once to each domain it is routed to (DeepEP, HybridEP): ``dedup`` is the token's
    copies (``top_k``) and its router's groups and picked groups (group-limited routing), so
    the share is the domains reached (:func:`_domains_reached`) over ``k``. With NVLink
    domains it is what crosses the network (deepseek-ai/DeepEP ``internode::dispatch``: a
    token once per remote node); with the group's ranks it is what DeepEP's NVLink part sends
    (``intranode::dispatch`` over ``is_token_in_rank``: once per rank, which copies it to each
    of its experts). A token that takes its picked groups whole (``dedup[3]``, dealt blocks)
    reaches exactly the domains they lie on."""
    k, groups, picked, whole = dedup
    if k <= 1 or domains <= 1:
        return 1.0
    if whole:
        return min(1.0, _domains_of_groups(groups, picked, domains) / k)
    return min(1.0, _domains_reached(k, groups, picked, domains) / k)


def _domains_of_groups(groups: int, picked: int, domains: int) -> float:
    """Expected number of ``domains`` that ``picked`` random groups of ``groups`` (equal
    contiguous shares of the experts) lie on: each group spans ``domains / groups`` domains
    where groups are the larger, and otherwise a domain holding ``per`` groups is missed when
    none of its groups is picked."""
    if groups <= domains:
        return picked * domains / groups
    others = groups - round(groups / domains)  # the groups on the other domains
    if others < picked:
        return float(domains)
    missed = math.exp(_log_comb(others, picked) - _log_comb(groups, picked))
    return domains * (1 - missed)


class TrafficPlanner:
    """Lays the transfers of rank classes on a system graph."""

    def __init__(self, graph: SystemGraph, system: SystemSpec, layout: Layout,
                 nvlink_latency_s: float, nic_latency_s: float) -> None:
        self.graph = graph
        self.system = system
        self.layout = layout
        self.eff: Efficiencies = efficiencies(system)
        nvlink = system.node.gpu.gpu.nvlink if system.node.gpu.gpu is not None else None
        self._ramp = nvlink.nccl_size_ramp if nvlink is not None else None
        self.nvlink_latency_s = nvlink_latency_s
        self.nic_latency_s = nic_latency_s
        self.capacity: dict[str, float] = {}
        self.kinds: dict[str, str] = {}
        self._plans: dict[tuple[object, ...], Plan] = {}
        self._choices: dict[tuple[object, ...], Plan] = {}
        self._ring_twins: dict[int, Plan] = {}
        """The ring layout beside each NVLS layout (NCCL picks between them by size)."""
        self._tree_twins: dict[int, Plan] = {}
        """The tree layout beside each all-reduce ring that crosses domains."""
        self._routes: dict[tuple[int, str], list[Hop]] = {}
        self._sharers: dict[str, int] = {}
        gpn = graph.gpus_per_node
        self._nic_of_local = [int(graph.nearest_nic(f"gpu{i}")[3:]) if graph.fabric else 0
                              for i in range(gpn)]

    # -- routes -------------------------------------------------------------------------------

    def _domain(self, rank: Any) -> Any:
        """The NVLink domain of a rank (or of an array of ranks)."""
        return rank // self.layout.gpus_per_domain

    def _node(self, rank: int) -> int:
        return rank // self.graph.gpus_per_node

    def _route(self, rank: int, target: str) -> list[Hop]:
        """Hops from GPU ``rank`` to ``target``: ``gpu:R`` (another GPU), ``host`` (its host
        memory, towards it) or ``host<`` (from its host memory)."""
        key = (rank, target)
        if key not in self._routes:
            gpu = self.graph.gpu(rank)
            if target.startswith("gpu:"):
                hops = list(self.graph.route(gpu, self.graph.gpu(int(target[4:]))).hops)
            else:
                memory = self.graph.memory_of(self.graph.host_cpu(gpu))
                src, dst = (gpu, memory) if target == "host" else (memory, gpu)
                hops = list(self.graph.route(src, dst).hops)
            if len(self._routes) > 100_000:
                self._routes.clear()
            self._routes[key] = hops
        return self._routes[key]

    def _register(self, hop: Hop) -> str:
        name = link_id(hop)
        if name not in self.capacity:
            self.capacity[name] = hop.bandwidth_bytes_per_s
            self.kinds[name] = link_kind(hop)
        return name

    def _staged(self, hops: list[Hop]) -> list[Hop]:
        """Without GPUDirect RDMA, traffic that reaches the NIC through a CPU is staged in that
        CPU's memory: written there and read back (two crossings of host memory)."""
        if self.eff.gpudirect_rdma or not any(link_kind(h) == "nic" for h in hops):
            return hops
        extra = []
        for hop in hops:
            if link_kind(hop) in ("c2c_d2h", "pcie_d2h"):
                cpu = hop.dst
                node = int(cpu.split(".")[0][1:])
                memory = self.graph.memory_of(Endpoint(node, cpu.split(".")[1]))
                staged = self.graph.route(Endpoint(node, cpu.split(".")[1]), memory).hops
                extra += [*staged, *staged]
        return hops + extra

    # -- copies -------------------------------------------------------------------------------

    def _class_ranks(self, rank_class: RankClass) -> range:
        return range(rank_class.first_rank, rank_class.first_rank + rank_class.multiplicity)

    def _local_copies(self, ranks: Sequence[int], route_of: Callable[[int], list[Hop]],
                      names: set[str]) -> dict[str, int]:
        """For each link in ``names``, how many of ``ranks`` cross it."""
        counts = dict.fromkeys(names, 0)
        for rank in ranks:
            for hop in route_of(rank):
                name = link_id(hop)
                if name in counts:
                    counts[name] += 1
        return counts

    def _endpoints(self, ranks: np.ndarray) -> np.ndarray:
        """The leaf-order position of each rank's NIC (``FatTree.endpoint``, vectorized)."""
        tree = self.graph.fabric
        assert tree is not None
        gpn = self.graph.gpus_per_node
        node, slot = ranks // gpn, np.asarray(self._nic_of_local)[ranks % gpn]
        if tree.nodes_per_unit is None:
            result = node * tree.nics_per_node + slot
        else:
            unit, pos = node // tree.nodes_per_unit, node % tree.nodes_per_unit
            result = (unit * tree.nics_per_node + slot) * tree.nodes_per_unit + pos
        return np.asarray(result, dtype=np.int64)

    def _common_levels(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        tree = self.graph.fabric
        assert tree is not None
        common = np.full(a.shape, tree.tiers)
        for level in range(tree.tiers - 1, 0, -1):
            size = tree.block_size(level)
            common = np.where(a // size == b // size, level, common)
        return common

    def _fabric_copies(self, a: np.ndarray, b: np.ndarray, common: np.ndarray,
                       a0: int, b0: int) -> dict[str, int]:
        """Members crossing each switch-to-switch link of the route from endpoint ``a0`` to
        ``b0``, given every member's endpoints ``a`` -> ``b`` and their common levels."""
        tree = self.graph.fabric
        assert tree is not None
        top = tree.common_level(a0, b0)
        peak = f"{tier_name(top)}{a0 // tree.block_size(top)}"
        same_top = a // tree.block_size(top) == a0 // tree.block_size(top)
        counts: dict[str, int] = {}
        for t in range(1, top):
            lo, hi = tree.block_size(t), tree.block_size(t + 1)
            crossing = common > t
            up = f"{tier_name(t)}{a0 // lo}>{tier_name(t + 1)}{a0 // hi}"
            counts[up] = int(np.count_nonzero(crossing & (a // lo == a0 // lo)))
            if t == top - 1:
                down = f"{peak}>{tier_name(t)}{b0 // lo}"
                crossing = crossing & same_top
            else:
                down = f"{tier_name(t + 1)}{b0 // hi}>{tier_name(t)}{b0 // lo}"
            counts[down] = int(np.count_nonzero(crossing & (b // lo == b0 // lo)))
        return counts

    def _path(self, rank_class: RankClass, peer_of: Callable[[int], int], use: str) -> Path:
        """The path of the member whose transfer to ``peer_of(member)`` is slowest, each link
        charged with the members whose own transfer crosses it. The representative's route is
        the candidate, and, across a fabric, the member whose route climbs highest (crossing
        the most shared switch links): a collective runs at the pace of its slowest member."""
        ranks = self._class_ranks(rank_class)
        array = np.arange(ranks.start, ranks.stop, dtype=np.int64)
        peers = np.fromiter((peer_of(r) for r in ranks), dtype=np.int64, count=len(ranks))
        candidates = [rank_class.first_rank]
        fabric = None
        if self.graph.fabric is not None and self.layout.num_domains > 1:
            a, b = self._endpoints(array), self._endpoints(peers)
            common = self._common_levels(a, b)
            crossing = self._domain(array) != self._domain(peers)
            if crossing.any():
                fabric = (a, b, common)
                climb = np.where(crossing, common, 0)
                highest = int(array[int(np.argmax(climb))])
                if highest != candidates[0]:
                    candidates.append(highest)
        paths = [self._path_of(r, array, peers, use, fabric) for r in candidates]
        return min(paths, key=lambda p: p.standalone_bytes_per_s(self.capacity))

    def _path_of(self, rep: int, ranks: np.ndarray, peers: np.ndarray, use: str,
                 fabric: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> Path:
        index = rep - int(ranks[0])
        peer = int(peers[index])
        hops = self._staged(self._route(rep, f"gpu:{peer}"))
        names = {self._register(h) for h in hops}
        gpn = self.graph.gpus_per_node
        nodes = np.asarray([rep // gpn, peer // gpn])
        near = np.isin(ranks // gpn, nodes) | np.isin(peers // gpn, nodes)
        pairs = dict(zip(ranks[near].tolist(), peers[near].tolist(), strict=True))
        copies = self._local_copies(
            list(pairs), lambda r: self._staged(self._route(r, f"gpu:{pairs[r]}")), names)
        if fabric is not None and self._domain(rep) != self._domain(peer):
            a, b, common = fabric
            copies.update(self._fabric_copies(a, b, common, int(a[index]), int(b[index])))
        return self._make(hops, copies, use)

    def _make(self, hops: list[Hop], copies: dict[str, int], use: str) -> Path:
        """One entry per link (a route may cross host memory twice: the counts already hold
        every crossing)."""
        first: dict[str, Hop] = {}
        for hop in hops:
            first.setdefault(link_id(hop), hop)
        return make_path([(name, max(1, copies[name]), self.eff.of(hop, use))
                          for name, hop in first.items()])

    # -- transfers ----------------------------------------------------------------------------

    def collective(self, rank_class: RankClass, group: Group, collective: str,
                   wire_bytes: float | None = None, dedup: Dedup = NO_DEDUP,
                   nccl_pipeline: bool = True) -> Plan:
        """How a collective of ``group`` runs for ``rank_class``: its flows as fractions of
        each member's wire bytes (``wire_bytes(collective, message, n)``), with the algorithm
        and protocol NCCL picks for ``wire_bytes`` (large messages when not given), at the
        share of the bandwidth NCCL's pipeline reaches at that size inside an NVLink domain
        (``gpu.nvlink.nccl_size_ramp``; ``nccl_pipeline`` False: the exchange is copies,
        Transformer Engine's userbuffers, not NCCL's pipeline)."""
        key = ("collective", rank_class.name, group, collective, dedup)
        if key not in self._plans:
            self._plans[key] = self._collective(rank_class, group, collective, dedup)
        layout = self._plans[key]
        if layout.algorithm in ("none", "all_to_all") or wire_bytes is None:
            return layout
        chosen = (key, wire_bytes, nccl_pipeline)
        if chosen not in self._choices:
            plan = self._choose(layout, group, collective, wire_bytes)
            ramp = self._ramp if nccl_pipeline and group.domains == 1 else None
            if ramp and plan.protocol != "LL":  # LL flags each 8-byte line: no chunk handshakes
                plan = _slowed(plan, nccl.size_ramp(wire_bytes, ramp))
            self._choices[chosen] = plan
        return self._choices[chosen]

    def alone_s(self, plan: Plan, wire_bytes: float) -> float:
        """Seconds a collective of ``wire_bytes`` per member takes alone on idle links: its
        latency, then its flows sharing the links."""
        return plan.latency_s + makespan_s(plan.flows(wire_bytes), self.capacity)

    def _busbw(self, plan: Plan) -> float:
        """Bus bandwidth the plan's flows get alone on idle links."""
        return 1e9 / makespan_s(plan.flows(1e9), self.capacity)

    def _choose(self, layout: Plan, group: Group, collective: str, wire: float) -> Plan:
        nvls = layout if layout.algorithm == "nvls" else None
        ring = self._ring_twins[id(layout)] if nvls is not None else layout
        intra = "nvlink" if self.system.node.nvlink.topology != "none" else "pci"
        tree = self._tree_twins.get(id(ring))
        choice = nccl.choose(collective, group.size, group.domains, intra, wire,
                             self._busbw(ring), self._busbw(nvls) if nvls else None,
                             self._busbw(tree) if tree else None)
        base = nvls if choice.algorithm == "nvls" and nvls is not None else ring
        if choice.algorithm == "tree" and tree is not None:
            base = tree
        return Plan(choice.algorithm, choice.latency_s, base.shares, choice.protocol,
                    choice.wire_factor)

    def _collective(self, rank_class: RankClass, group: Group, collective: str,
                    dedup: Dedup = NO_DEDUP) -> Plan:
        n = group.size
        if n <= 1:
            return Plan("none", 0.0, ())
        steps = max(1, math.ceil(math.log2(n)))
        domains = group.domains
        latency = steps * (self.nic_latency_s if domains > 1 else self.nvlink_latency_s)
        per_domain = max(1, n // domains)
        stride = group.stride

        def position(rank: int) -> tuple[int, int]:
            j = rank // stride % n
            return rank - j * stride, j

        def in_domain(hop: int) -> Callable[[int], int]:
            def peer(rank: int) -> int:  # ``hop`` members on, inside the same NVLink domain
                base, j = position(rank)
                block = j // per_domain * per_domain
                return base + (block + (j - block + hop) % per_domain) * stride
            return peer

        def across(rank: int) -> int:  # the same position in the next domain
            base, j = position(rank)
            return base + (j + per_domain) % n * stride

        shares: list[Share] = []
        if collective == "all_to_all":  # each member sends 1/n of its buffer to every other
            outside, inside = (n - per_domain) / (n - 1), (per_domain - 1) / (n - 1)
            outside *= _deduplicated(dedup, domains)
            # DeepEP's NVLink part sends a token once to each rank it is routed to
            inside *= _deduplicated(dedup, n)
        else:  # rings: W/m of each member's wire bytes cross the network, the rest NVLink
            outside = 1.0 / per_domain if domains > 1 else 0.0
            inside = 1.0 - outside
        if domains > 1:
            shares.append(Share(self._path(rank_class, across, "collective"), outside))
        if per_domain > 1:
            hops = range(1, per_domain) if self.system.node.nvlink.topology == "direct" else [1]
            # NCCL's all-to-all has its own measured rate on NVLink; DeepEP's kernels do not
            use = "all_to_all" if collective == "all_to_all" and dedup == NO_DEDUP else "collective"
            for hop in hops:
                shares.append(Share(self._path(rank_class, in_domain(hop), use),
                                    inside / len(hops)))
        ring = Plan("all_to_all" if collective == "all_to_all" else "ring", latency,
                    tuple(shares))
        if domains > 1 and collective == "all_reduce":
            # NCCL's trees chain the members of a domain and join the domains in a double
            # binary tree: each domain sends S / 2 up and down each of the two trees, 2 S in
            # all, but only S with two domains (each is the other's only child), against the
            # ring's 2 (n - 1) / n S ("On two nodes, NCCL uses the tree ... which can indeed
            # go beyond the network bottleneck", NCCL's maintainer, NVIDIA/nccl-tests#196);
            # the ring's NVLink share is kept for the chain.
            per_node_s = 1.0 if domains == 2 else 2.0
            tree_outside = per_node_s * n / (2 * (n - 1) * per_domain)
            self._tree_twins[id(ring)] = Plan("tree", latency, (
                Share(shares[0].path, tree_outside), *shares[1:]))
        if domains == 1 and collective == "all_reduce" and self.eff.nvls and n > 2:
            nvls = Plan("nvls", latency,
                        (Share(self._path(rank_class, in_domain(1), "nvls"), 1.0),))
            self._ring_twins[id(nvls)] = ring
            return nvls
        return ring

    def send(self, rank_class: RankClass, peer_stage_rank: int) -> Plan:
        """A pipeline send from every member to the same position of another stage."""
        key = ("send", rank_class.name, peer_stage_rank)
        if key not in self._plans:
            offset = peer_stage_rank - rank_class.first_rank
            path = self._path(rank_class, lambda r: r + offset, "p2p")
            same = self._domain(rank_class.first_rank) == self._domain(peer_stage_rank)
            latency = self.nvlink_latency_s if same else self.nic_latency_s
            self._plans[key] = Plan("p2p", latency, (Share(path, 1.0),))
        return self._plans[key]

    def host(self, rank_class: RankClass, toward: str, use: str,
             cap_bytes_per_s: float = math.inf) -> Path:
        """A transfer between each member's GPU and its host memory (``toward`` ``host`` or
        ``device``), or (``use`` ``cpu``) the host CPU streaming its memory."""
        key = ("host", rank_class.name, toward, use)
        if key not in self._plans:
            rep = rank_class.first_rank
            target = "host" if toward == "host" else "host<"
            hops = self._route(rep, target)
            if use == "cpu":
                hops = [h for h in hops if link_kind(h) == "host_memory"]
            names = {self._register(h) for h in hops}
            ranks = [r for r in self._class_ranks(rank_class) if self._node(r) == self._node(rep)]
            copies = self._local_copies(ranks, lambda r: self._route(r, target), names)
            path = self._make(hops, copies, use)
            self._plans[key] = Plan(use, 0.0, (Share(path, 1.0),))
        path = self._plans[key].shares[0].path
        if cap_bytes_per_s < math.inf:
            return Path(path.links, path.copies, path.coefficients, cap_bytes_per_s)
        return path

    def sharers_of_host(self, rank_class: RankClass) -> int:
        """Members of the class that share the representative's host CPU (cached: every
        host op of the class asks)."""
        if rank_class.name not in self._sharers:
            rep = self.graph.gpu(rank_class.first_rank)
            cpu = self.graph.host_cpu(rep)
            self._sharers[rank_class.name] = sum(
                1 for r in self._class_ranks(rank_class)
                if self._node(r) == rep.node and self.graph.host_cpu(self.graph.gpu(r)) == cpu)
        return self._sharers[rank_class.name]


def traffic_planner(system: SystemSpec, layout: Layout) -> TrafficPlanner:
    """The planner of ``layout.num_gpus`` GPUs of ``system``, with the measured per-step
    collective latencies of its NVLink and NIC (a :class:`ConfigError` if one is needed and
    missing)."""
    node = system.node
    gpu = node.gpu.gpu
    assert gpu is not None
    nvlink_latency = nic_latency = 0.0
    if gpu.nvlink is not None and node.nvlink.topology != "none" and layout.gpus_per_domain > 1:
        if gpu.nvlink.collective_latency_us is None:
            raise ConfigError(node.gpu.name, "gpu.nvlink.collective_latency_us",
                              "is needed to cost collectives over NVLink (with a source)")
        nvlink_latency = gpu.nvlink.collective_latency_us * 1e-6
    nic = node.nic.nic if node.nic is not None else None
    if nic is not None and layout.num_domains > 1:
        if nic.collective_latency_us is None:
            raise ConfigError(node.nic.name if node.nic else system.name,
                              "nic.collective_latency_us",
                              "is needed to cost collectives across nodes (with a source)")
        nic_latency = nic.collective_latency_us * 1e-6
    graph = build_graph(system, layout.num_gpus)
    return TrafficPlanner(graph, system, layout, nvlink_latency, nic_latency)
