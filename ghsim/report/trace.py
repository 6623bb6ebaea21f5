"""Chrome / Perfetto trace of a simulated step: one process per rank class with one track per
stream, one for the tensor-parallel collectives inside compute ops and one memory counter per
memory tier (HBM, LPDDR or host DDR: bytes in use by one GPU of the class over the step), and
one counter track per busy link of the system (its utilization over time).

Open ``trace.json`` in ui.perfetto.dev or chrome://tracing. Times are microseconds.
"""

from __future__ import annotations

from typing import Any

from ghsim.engine.simulator import ClassTimeline, Timeline

_STREAM_ORDER = ("compute", "tp", "cp", "dp", "pp_send", "pp_recv", "pp_embedding")


def _comm_track(cls: ClassTimeline, pid: int, tid: int) -> list[dict[str, Any]]:
    """One track with a slice for every tensor- or context-parallel collective the compute
    stream ran inside its ops."""
    if not cls.comm_spans:
        return []
    events: list[dict[str, Any]] = [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                                     "args": {"name": "tp/cp collectives (on compute)"}}]
    for op_id, group, start, end in cls.comm_spans:
        events.append({"ph": "X", "name": f"{group} collective", "cat": group, "pid": pid,
                       "tid": tid, "ts": start * 1e6, "dur": (end - start) * 1e6,
                       "args": {"op": cls.rank_class.ops[op_id].name}})
    return events


MEMORY_TRACKS = {"hbm": "HBM", "lpddr": "LPDDR (host)", "host_ddr": "host DDR",
                 "managed": "managed (unified memory)"}


def _memory_counters(cls: ClassTimeline, pid: int) -> list[dict[str, Any]]:
    """One counter track per memory tier the class allocates in: the bytes in use by one GPU
    of the class, replayed from its memory events at the simulated end of their ops (static
    buffers from the start), as the run's memory peaks are."""
    by_tier: dict[str, dict[float, float]] = {}
    for event in cls.rank_class.memory:
        when = cls.end_of.get(event.op, 0.0) if event.op >= 0 else 0.0
        changes = by_tier.setdefault(event.tier, {})
        changes[when] = changes.get(when, 0.0) + event.bytes
    events: list[dict[str, Any]] = []
    for tier in sorted(by_tier, key=lambda t: (list(MEMORY_TRACKS).index(t)
                                                if t in MEMORY_TRACKS else 99, t)):
        name = f"memory {MEMORY_TRACKS.get(tier, tier)} (GiB)"
        live = 0.0
        for when, change in sorted(by_tier[tier].items()):
            live += change
            events.append({"ph": "C", "name": name, "pid": pid, "ts": when * 1e6,
                           "args": {"GiB": round(max(live, 0.0) / 2**30, 6)}})
    return events


def _link_counters(timeline: Timeline, pid: int, limit: int = 24) -> list[dict[str, Any]]:
    """One counter track per busy link (its utilization over time), the busiest first."""
    network = timeline.network
    if network is None:
        return []
    busy = sorted((u.load_s, name) for name, u in network.usage.items() if u.load_s > 0)
    events: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": pid,
                                     "args": {"name": "links (utilization)"}}]
    for _, name in reversed(busy[-limit:]):
        for when, level in network.usage[name].samples:
            events.append({"ph": "C", "name": name, "pid": pid, "ts": when * 1e6,
                           "args": {"utilization": round(level, 4)}})
    return events


def chrome_trace(timeline: Timeline) -> dict[str, Any]:
    """The trace as a JSON-ready object (``traceEvents`` in the Trace Event Format)."""
    events: list[dict[str, Any]] = []
    for pid, cls in enumerate(timeline.classes):
        rank_class = cls.rank_class
        events.append({"ph": "M", "name": "process_name", "pid": pid,
                       "args": {"name": f"{rank_class.name} (x{rank_class.multiplicity} ranks)"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid,
                       "args": {"sort_index": pid}})
        streams = sorted({s.stream for s in cls.spans},
                         key=lambda s: (_STREAM_ORDER.index(s) if s in _STREAM_ORDER else 99, s))
        tids = {stream: tid for tid, stream in enumerate(streams)}
        for stream, tid in tids.items():
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": stream}})
        for span in cls.spans:
            op = rank_class.ops[span.op]
            args: dict[str, Any] = {"kind": op.kind}
            if op.bytes:
                args["bytes"] = op.bytes
            for key in ("phase", "microbatch", "chunk", "collective", "group"):
                if key in op.attrs:
                    args[key] = op.attrs[key]
            events.append({"ph": "X", "name": op.name, "cat": op.kind, "pid": pid,
                           "tid": tids[span.stream], "ts": span.start * 1e6,
                           "dur": (span.end - span.start) * 1e6, "args": args})
        events.extend(_comm_track(cls, pid, len(tids)))
        events.extend(_memory_counters(cls, pid))
    events.extend(_link_counters(timeline, len(timeline.classes)))
    return {"traceEvents": events, "displayTimeUnit": "ms"}
