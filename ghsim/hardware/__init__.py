"""The hardware graph: components, links, routes and totals of a system."""

from ghsim.hardware.fabric import FatTree, size_fat_tree
from ghsim.hardware.graph import Endpoint, Hop, Route, SystemGraph, build_graph
from ghsim.hardware.totals import SystemTotals, system_totals

__all__ = [
    "Endpoint",
    "FatTree",
    "Hop",
    "Route",
    "SystemGraph",
    "SystemTotals",
    "build_graph",
    "size_fat_tree",
    "system_totals",
]
