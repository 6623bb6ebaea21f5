"""Exporting a simulated step (lowered or imported) as Chakra traces, one per rank class, with
the durations the simulation gave each op (``ghsim run --chakra DIR``). A report of the engine's
timeline, so it lives here and the importers never depend on the engine."""

from __future__ import annotations

from pathlib import Path

from ghsim.engine.simulator import Timeline
from ghsim.importers.chakra import write_chakra
from ghsim.importers.kineto import GpuEvent, TraceRank


def timeline_ranks(timeline: Timeline) -> list[TraceRank]:
    """Each rank class's ops, in the order they ran, as events."""
    ranks = []
    for index, cls in enumerate(timeline.classes):
        events = []
        for span in sorted(cls.spans, key=lambda s: (s.start, s.op)):
            op = cls.rank_class.ops[span.op]
            flops = (sum(k.flops for k in op.kernels()) or op.flops  # a host op's arithmetic
                     or op.attrs.get("flops", 0.0))  # a replayed kernel's
            start, dur = span.start * 1e6, (span.end - span.start) * 1e6
            if op.kind == "collective" or op.attrs.get("klass") == "collective":
                event = GpuEvent(op.name, "kernel", 0, start, dur, "collective", bytes=op.bytes,
                                 collective=op.attrs.get("collective", "all_reduce"))
            elif op.kind in ("send", "recv"):
                event = GpuEvent(op.name, "kernel", 1, start, dur, "collective", bytes=op.bytes,
                                 collective="send_recv")
            else:
                event = GpuEvent(op.name, "kernel", 0, start, dur,
                                 "gemm" if flops else "elementwise", flops=flops)
            events.append(event)
        ranks.append(TraceRank(cls.rank_class.name, index, "", events, None, 0))
    return ranks


def export_chakra(timeline: Timeline, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for rank in timeline_ranks(timeline):
        path = directory / f"{rank.source}.et"
        write_chakra(path, rank)
        written.append(path)
    return written
