"""The scale-out fabric as a fat tree of identical switches, sized for the endpoints it joins.

Pure arithmetic, no graph: how many tiers a fat tree of ``switch_radix``-port switches needs for
``endpoints`` NICs, how many switches each tier has, which leaf a NIC plugs into, how many
switches a message between two NICs crosses, and the bisection bandwidth.

A leaf has ``down`` NIC ports and ``up`` uplinks (``down / up`` is the oversubscription). A
block of level ``t`` covers ``down * (radix / 2) ** (t - 1)`` endpoints; the top level joins up to
``radix`` blocks. A rail-optimized fabric numbers its endpoints so that NIC ``k`` of every node of
a scalable unit shares leaf ``k`` of that unit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ghsim.config.schema import FabricSpec


@dataclass(frozen=True)
class FatTree:
    """A sized fat tree."""

    endpoints: int
    """Leaf ports the numbering spans (whole scalable units for a rail-optimized fabric)."""
    nics: int
    """NICs actually attached."""
    radix: int
    down: int
    up: int
    tiers: int
    switches_per_tier: tuple[int, ...]
    nics_per_node: int
    nodes_per_unit: int | None
    """Rail-optimized: nodes per scalable unit; None for a plain fat tree."""

    def block_size(self, level: int) -> int:
        """Endpoints under one switch block of ``level`` (1 = a leaf)."""
        return int(self.down * (self.radix // 2) ** (level - 1))

    def endpoint(self, node: int, nic: int) -> int:
        """The position of a node's NIC in the leaf order."""
        if self.nodes_per_unit is None:
            return node * self.nics_per_node + nic
        unit, slot = divmod(node, self.nodes_per_unit)
        return (unit * self.nics_per_node + nic) * self.nodes_per_unit + slot

    def leaf(self, node: int, nic: int) -> int:
        """Index of the leaf switch a node's NIC plugs into."""
        return self.endpoint(node, nic) // self.down

    def common_level(self, a: int, b: int) -> int:
        """Lowest level whose block holds both endpoints (1 = same leaf)."""
        for level in range(1, self.tiers):
            size = self.block_size(level)
            if a // size == b // size:
                return level
        return self.tiers

    def switch_hops(self, a: int, b: int) -> int:
        """Switches a message from endpoint ``a`` to ``b`` crosses (0 when a == b)."""
        if a == b:
            return 0
        return 2 * self.common_level(a, b) - 1

    def bisection_bytes_per_s(self, nic_bytes_per_s: float) -> float:
        """Bandwidth across the worst cut into two equal halves, one direction."""
        full = self.nics * nic_bytes_per_s / 2
        return full if self.tiers == 1 else full * min(1.0, self.up / self.down)


def _tiers(endpoints: int, radix: int, down: int) -> int:
    if endpoints <= down:
        return 1
    tiers = 2
    while endpoints > down * (radix // 2) ** (tiers - 2) * radix:
        tiers += 1
    return tiers


def size_fat_tree(spec: FabricSpec, nodes: int, nics_per_node: int) -> FatTree:
    """Size the fabric ``spec`` for ``nodes`` nodes of ``nics_per_node`` NICs each."""
    radix = spec.switch_radix
    if spec.topology == "rail_optimized":
        assert spec.nodes_per_unit is not None  # checked by FabricSpec
        down = spec.nodes_per_unit
        units = math.ceil(nodes / spec.nodes_per_unit)
        endpoints = units * spec.nodes_per_unit * nics_per_node
    else:
        down = spec.leaf_down_ports
        endpoints = nodes * nics_per_node
    up = max(1, math.ceil(down / spec.oversubscription)) if endpoints > down else 0
    tiers = _tiers(endpoints, radix, down)
    leaves = math.ceil(endpoints / down)
    counts = [leaves]
    links = leaves * up
    for level in range(2, tiers + 1):
        per_switch = radix if level == tiers else radix // 2
        count = math.ceil(links / per_switch)
        counts.append(count)
        links = count * (radix // 2)
    return FatTree(
        endpoints=endpoints, nics=nodes * nics_per_node, radix=radix, down=down, up=up, tiers=tiers,
        switches_per_tier=tuple(counts), nics_per_node=nics_per_node,
        nodes_per_unit=spec.nodes_per_unit if spec.topology == "rail_optimized" else None,
    )
