"""``ghsim inspect SCENARIO --routes``: where each group's traffic goes and how loaded it is.

For every rank class, each communication group's collective (all-reduce for tp and dp, the
pipeline send to the next stage) as the planner lays it: its algorithm, and for each share of
its bytes the links crossed, with the members' copies on each, the efficiency of that use and
the rate the share gets alone.
"""

from __future__ import annotations

from typing import Any

from ghsim.config import Scenario
from ghsim.fabric.sharing import Path
from ghsim.fabric.traffic import Plan, traffic_planner
from ghsim.workload.lower import lower


def _path_view(path: Path, capacity: dict[str, float], kinds: dict[str, str]) -> dict[str, Any]:
    return {
        "links": [{"link": link, "kind": kinds[link], "copies": copies,
                   "capacity_gb_s": capacity[link] / 1e9,
                   "efficiency": copies / coefficient}
                  for link, copies, coefficient in zip(path.links, path.copies,
                                                       path.coefficients, strict=True)],
        "alone_gb_s": path.standalone_bytes_per_s(capacity) / 1e9,
    }


def _plan_view(plan: Plan, capacity: dict[str, float], kinds: dict[str, str]) -> dict[str, Any]:
    return {"algorithm": plan.algorithm, "latency_us": plan.latency_s * 1e6,
            "shares": [{"fraction": s.fraction, **_path_view(s.path, capacity, kinds)}
                       for s in plan.shares]}


def routes_view(scenario: Scenario) -> dict[str, Any]:
    """Every rank class's groups, laid on the system graph."""
    planner = traffic_planner(scenario.spec.system, scenario.layout)
    classes = []
    workload = lower(scenario)
    first = {c.stage: c.first_rank for c in workload.classes}
    for rank_class in workload.classes:
        groups: dict[str, Any] = {}
        last = max(first)
        for kind, group in rank_class.groups.items():
            if kind == "embedding" and rank_class.stage not in (0, last):
                continue  # only the first and last stages hold the tied embeddings
            if group.size > 1 and kind != "pp":
                collective = "all_reduce" if kind in ("tp", "dp", "embedding") else "all_gather"
                plan = planner.collective(rank_class, group, collective)
                groups[kind] = {"size": group.size, "collective": collective,
                                **_plan_view(plan, planner.capacity, planner.kinds)}
        if rank_class.stage + 1 in first:
            plan = planner.send(rank_class, first[rank_class.stage + 1])
            groups["pp_send"] = {"size": 2, "collective": "send",
                                 **_plan_view(plan, planner.capacity, planner.kinds)}
        classes.append({"class": rank_class.name, "multiplicity": rank_class.multiplicity,
                        "first_rank": rank_class.first_rank, "groups": groups})
    return {"scenario": scenario.name, "classes": classes}
