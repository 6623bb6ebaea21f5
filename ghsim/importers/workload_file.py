"""The workload file ``ghsim import`` writes and a scenario's ``workload:`` names.

YAML (``kind: workload``), one entry per rank, its GPU events in columns (a name table plus one
list per field), so that thousands of kernels stay compact and quick to read.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from ghsim.config.yamlio import read_mapping
from ghsim.errors import ConfigError, LimitError
from ghsim.importers.checks import shown
from ghsim.importers.kineto import GpuEvent, TraceRank
from ghsim.limits import MAX_EVENT_US, MAX_GPUS, MAX_SIMULATED_OPS, MAX_TIMESTAMP_US
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
    total = 0
    for index, rank in enumerate(ranks):
        if not isinstance(rank, dict):
            raise ConfigError(source, f"ranks[{index}]", f"expected a mapping, got {shown(rank)}")
        events = rank.get("events")
        if not isinstance(events, dict) or set(events) != set(COLUMNS):
            raise ConfigError(source, f"ranks[{index}].events",
                              f"expected the columns {', '.join(COLUMNS)}")
        lengths = {len(v) for v in events.values() if isinstance(v, list)}
        if len(lengths) != 1 or len([v for v in events.values() if isinstance(v, list)]) != len(
                COLUMNS):
            raise ConfigError(source, f"ranks[{index}].events", "expected lists of equal length")
        total += lengths.pop()
        if total > MAX_SIMULATED_OPS:
            raise LimitError(source, "ranks", f"expected at most {MAX_SIMULATED_OPS:,} events "
                             "in all to replay (ghsim.limits.MAX_SIMULATED_OPS), got more")
        _check_rank(source, f"ranks[{index}]", rank)
    return document


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite(low: float, high: float) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        return (isinstance(value, int | float) and not isinstance(value, bool)
                and math.isfinite(value) and low <= value <= high)
    return check


_TIME = _finite(-MAX_TIMESTAMP_US, MAX_TIMESTAMP_US)
_SIZE = _finite(0.0, float(2**63))
_KINDS = ("kernel", "memcpy", "memset", "cpu")


def _check_rank(source: str, where: str, rank: dict[str, Any]) -> None:
    """Every field of one rank of a workload file has the type and range a replay needs."""
    def fail(key: str, expected: str, value: Any) -> ConfigError:
        return ConfigError(source, f"{where}.{key}", f"expected {expected}, got {shown(value)}")

    if not _is_int(rank.get("rank")) or not 0 <= rank["rank"] < MAX_GPUS:
        raise fail("rank", f"a rank from 0 to {MAX_GPUS - 1:,}", rank.get("rank"))
    for key, check, expected in (("start_us", _TIME, "a finite time in microseconds"),
                                 ("measured_s", _SIZE, "a finite number of seconds >= 0")):
        if not check(rank.get(key)):
            raise fail(key, expected, rank.get(key))
    for key in ("device", "source", "iteration"):
        if rank.get(key) is not None and not isinstance(rank[key], str):
            raise fail(key, "a string", rank[key])
    names = rank.get("names")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise fail("names", "a list of kernel names", names)
    columns = rank["events"]
    count = len(columns["name"])
    checks: dict[str, tuple[Callable[[Any], bool], str]] = {
        "name": (lambda v: _is_int(v) and 0 <= v < len(names),
                 f"an index into names (0 to {len(names) - 1})"),
        "kind": (lambda v: v in _KINDS, f"one of {', '.join(_KINDS)}"),
        "klass": (lambda v: isinstance(v, str), "a kernel class"),
        "stream": (lambda v: _is_int(v) and abs(v) < 2**63, "a stream number"),
        "start_us": (_TIME, "a finite time in microseconds"),
        "dur_us": (_finite(0.0, MAX_EVENT_US), f"a duration from 0 to {MAX_EVENT_US:g} "
                   "microseconds (ghsim.limits.MAX_EVENT_US)"),
        "launch_us": (lambda v: v is None or _TIME(v), "null or a finite time in microseconds"),
        "flops": (_SIZE, "a finite number >= 0"),
        "m": (lambda v: _is_int(v) and 0 <= v < 2**53, "an integer >= 0"),
        "bytes": (_SIZE, "a finite number >= 0"),
        "collective": (lambda v: v is None or isinstance(v, str), "null or a collective"),
        "after": (lambda v: v is None or (isinstance(v, list) and all(
            _is_int(a) and 0 <= a < count for a in v)),
            f"a list of event indices from 0 to {count - 1}"),
    }
    checks["n"] = checks["k"] = checks["m"]
    for key, (check, expected) in checks.items():
        values = columns[key]
        if not all(map(check, values)):
            position = next(i for i, v in enumerate(values) if not check(v))
            raise fail(f"events.{key}[{position}]", expected, values[position])


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
