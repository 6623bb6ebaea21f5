"""Chrome / Perfetto trace of a simulated step: one process per rank class, one track per stream
and one per shared link of the rank (the transfers it carried, overlapping when they share it).

Open ``trace.json`` in ui.perfetto.dev or chrome://tracing. Times are microseconds.
"""

from __future__ import annotations

from typing import Any

from ghsim.engine.simulator import ClassTimeline, Timeline

_STREAM_ORDER = ("compute", "tp", "cp", "dp", "pp_send", "pp_recv", "pp_embedding")


def _link_tracks(cls: ClassTimeline, pid: int, first_tid: int) -> list[dict[str, Any]]:
    """One track per shared link of the rank (NVLink, NIC): the transfers it carried."""
    if cls.links is None:
        return []
    links = sorted({link for link, *_ in cls.links.transfers})
    events: list[dict[str, Any]] = []
    for offset, link in enumerate(links):
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": first_tid + offset,
                       "args": {"name": f"link {link}"}})
    for link, start, end, nbytes in cls.links.transfers:
        events.append({"ph": "X", "name": f"{link} transfer", "cat": "link", "pid": pid,
                       "tid": first_tid + links.index(link), "ts": start * 1e6,
                       "dur": (end - start) * 1e6, "args": {"bytes": nbytes}})
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
        events.extend(_link_tracks(cls, pid, len(tids)))
    return {"traceEvents": events, "displayTimeUnit": "ms"}
