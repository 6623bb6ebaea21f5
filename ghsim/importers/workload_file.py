"""The workload file ``ghsim import`` writes and a scenario's ``workload:`` names.

YAML (``kind: workload``), one entry per rank, its GPU events in columns (a name table plus one
list per field), so that thousands of kernels stay compact and quick to read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ghsim.config.yamlio import read_mapping
from ghsim.errors import ConfigError
from ghsim.importers.kineto import GpuEvent, TraceRank
from ghsim.outputs import write_text

COLUMNS = ("name", "kind", "klass", "stream", "start_us", "dur_us", "launch_us", "flops", "m",
           "n", "k", "bytes", "collective", "after")


def rank_to_data(rank: TraceRank) -> dict[str, Any]:
    names: dict[str, int] = {}
    columns: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    for event in rank.events:
        columns["name"].append(names.setdefault(event.name, len(names)))
        columns["kind"].append(event.kind)
        columns["klass"].append(event.klass)
        columns["stream"].append(event.stream)
        columns["start_us"].append(round(event.start_us, 3))
        columns["dur_us"].append(round(event.dur_us, 3))
        columns["launch_us"].append(None if event.launch_us is None else round(event.launch_us, 3))
        columns["flops"].append(event.flops)
        m, n, k = event.shape or (0, 0, 0)
        columns["m"].append(m)
        columns["n"].append(n)
        columns["k"].append(k)
        columns["bytes"].append(event.bytes)
        columns["collective"].append(event.collective)
        columns["after"].append(list(event.after))
    start, end = (rank.iteration[1], rank.iteration[2]) if rank.iteration else (
        min(e.start_us for e in rank.events), max(e.start_us + e.dur_us for e in rank.events))
    return {"rank": rank.rank, "source": rank.source, "device": rank.device,
            "iteration": rank.iteration[0] if rank.iteration else None,
            "start_us": start, "measured_s": (end - start) * 1e-6,
            "orphans": dict(rank.orphans), "names": list(names), "events": columns}


def write_workload(path: Path, name: str, ranks: list[TraceRank]) -> None:
    document = {"schema_version": 1, "kind": "workload", "name": name,
                "ranks": [rank_to_data(r) for r in sorted(ranks, key=lambda r: r.rank)]}
    write_text(path, yaml.safe_dump(document, default_flow_style=None, sort_keys=False,
                                    width=120))


def read_workload(path: Path) -> dict[str, Any]:
    """Read and check a workload file."""
    document = read_mapping(path)
    source = str(path)
    if document.get("kind") != "workload" or document.get("schema_version") != 1:
        raise ConfigError(source, "kind", "expected a workload file (schema_version: 1, "
                          "kind: workload) written by ghsim import")
    ranks = document.get("ranks")
    if not isinstance(ranks, list) or not ranks:
        raise ConfigError(source, "ranks", "expected a non-empty list of ranks")
    for index, rank in enumerate(ranks):
        events = rank.get("events") if isinstance(rank, dict) else None
        if not isinstance(events, dict) or set(events) != set(COLUMNS):
            raise ConfigError(source, f"ranks[{index}].events",
                              f"expected the columns {', '.join(COLUMNS)}")
        lengths = {len(v) for v in events.values() if isinstance(v, list)}
        if len(lengths) != 1 or len([v for v in events.values() if isinstance(v, list)]) != len(
                COLUMNS):
            raise ConfigError(source, f"ranks[{index}].events", "expected lists of equal length")
    return document


def events_of(rank: dict[str, Any]) -> list[GpuEvent]:
    """The GPU events of one rank of a workload file."""
    columns, names = rank["events"], rank["names"]
    events = []
    for i in range(len(columns["name"])):
        shape = (columns["m"][i], columns["n"][i], columns["k"][i])
        events.append(GpuEvent(
            names[columns["name"][i]], columns["kind"][i], columns["stream"][i],
            columns["start_us"][i], columns["dur_us"][i], columns["klass"][i],
            columns["launch_us"][i], None, float(columns["flops"][i]),
            shape if any(shape) else None, float(columns["bytes"][i]), columns["collective"][i],
            list(columns["after"][i] or [])))
    return events
