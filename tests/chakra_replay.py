"""Replay ghsim's per-NPU Chakra export under the rules ASTRA-sim's workload layer issues nodes by
(astra-sim/workload/Workload.cc and HardwareResource.cc at 518bd51), to check that the files
can run to the end: a node is issued once its ``data_deps`` are done, in id order among those
ready; each NPU runs one GPU compute node, one GPU communication node (a collective or a send;
receives take no resource) and one CPU node at a time; a collective ends once every member of
its group (``pg_name`` in ``comm_groups.json``) has issued its k-th collective of that group; a
receive ends once the send with its source, destination and tag has. Durations are the files'
own (ASTRA-sim would simulate the communication instead), so the makespan is no prediction: a
deadlock, a receive without a send or a group whose members issue a different number of
collectives is what this finds."""

from __future__ import annotations

import heapq
from typing import Any

Nodes = dict[int, list[dict[str, Any]]]
"""Each NPU's nodes, as ghsim.importers.chakra.read_chakra returns them."""


def _resource(node: dict[str, Any]) -> str | None:
    if node["attr"].get("is_cpu_op"):
        return "cpu"
    if node["type"] == "COMP_NODE":
        return "compute"
    return None if node["type"] == "COMM_RECV_NODE" else "communication"


class Replay:
    """One run of the NPUs' nodes; :meth:`run` returns when every node has ended."""

    def __init__(self, nodes: Nodes, groups: dict[str, list[int]]) -> None:
        self.nodes = {npu: {n["id"]: n for n in listed} for npu, listed in nodes.items()}
        self.groups = groups
        self.waiting = {npu: {n["id"]: set(n["data_deps"]) for n in listed}
                        for npu, listed in nodes.items()}
        self.children: dict[int, dict[int, list[int]]] = {npu: {} for npu in nodes}
        for npu, listed in nodes.items():
            for node in listed:
                for dep in node["data_deps"]:
                    self.children[npu].setdefault(dep, []).append(node["id"])
        self.ready = {npu: sorted(i for i, deps in self.waiting[npu].items() if not deps)
                      for npu in nodes}
        self.busy: dict[int, set[str]] = {npu: set() for npu in nodes}
        self.events: list[tuple[float, int, int]] = []
        self.issued: dict[tuple[int, str], int] = {}
        self.members: dict[tuple[str, int], list[tuple[int, int]]] = {}
        self.sent: dict[tuple[int, int, int], float] = {}
        self.receiving: dict[tuple[int, int, int], tuple[int, int]] = {}
        self.now = 0.0

    def _issue(self, npu: int) -> None:
        for node_id in list(self.ready[npu]):
            node = self.nodes[npu][node_id]
            resource = _resource(node)
            if resource is not None and resource in self.busy[npu]:
                continue
            self.ready[npu].remove(node_id)
            if resource is not None:
                self.busy[npu].add(resource)
            attr = node["attr"]
            if node["type"] == "COMM_COLL_NODE":
                group = attr["pg_name"]
                index = self.issued.get((npu, group), 0)
                self.issued[(npu, group)] = index + 1
                arrived = self.members.setdefault((group, index), [])
                arrived.append((npu, node_id))
                if len(arrived) == len(self.groups[group]):
                    end = self.now + max(self.nodes[m][i]["dur_us"] for m, i in arrived)
                    for member in arrived:
                        heapq.heappush(self.events, (end, *member))
            elif node["type"] == "COMM_RECV_NODE":
                key = (attr["comm_src"], attr["comm_dst"], attr["comm_tag"])
                if key in self.sent:
                    heapq.heappush(self.events, (self.now, npu, node_id))
                else:
                    self.receiving[key] = (npu, node_id)
            else:
                heapq.heappush(self.events, (self.now + node["dur_us"], npu, node_id))

    def run(self) -> float:
        """The time the last node ends, in microseconds; raises if some never can."""
        for npu in self.nodes:
            self._issue(npu)
        ended = 0
        while self.events:
            self.now, npu, node_id = heapq.heappop(self.events)
            node = self.nodes[npu][node_id]
            self.busy[npu].discard(_resource(node) or "")
            ended += 1
            if node["type"] == "COMM_SEND_NODE":
                attr = node["attr"]
                key = (attr["comm_src"], attr["comm_dst"], attr["comm_tag"])
                self.sent[key] = self.now
                if key in self.receiving:
                    heapq.heappush(self.events, (self.now, *self.receiving.pop(key)))
            for child in self.children[npu].get(node_id, []):
                self.waiting[npu][child].discard(node_id)
                if not self.waiting[npu][child]:
                    self.ready[npu].append(child)
            self.ready[npu].sort()
            for other in self.nodes:
                self._issue(other)
        total = sum(len(listed) for listed in self.nodes.values())
        if ended != total:
            raise RuntimeError(f"{total - ended} of {total} nodes never ran")
        return self.now
