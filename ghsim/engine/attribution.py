"""Where the step's time went, read off the compute stream of the rank class that finishes last.

Busy time on the compute stream splits by what its ops ran (GEMMs, attention, element-wise and
optimizer kernels, recomputation, and the tensor- and context-parallel collectives Megatron runs
on that stream). Idle time before a compute op goes to whatever it waited for last: a pipeline
receive (the transfer itself is exposed pipeline communication, the rest is the pipeline
bubble) or a data-parallel collective. Time after the last compute op goes to what was still
running. The parts add up to the step time.
"""

from __future__ import annotations

from ghsim.engine.simulator import ClassTimeline, Timeline

BREAKDOWN_KEYS = ("compute", "tp", "cp", "pp", "dp", "pipeline_bubble", "offload", "migration",
                  "cpu", "other")
COMPUTE_KEYS = ("gemm", "attention", "elementwise", "optimizer", "recompute", "overlap")


_HOST = {"copy": "offload", "cpu": "cpu", "migrate": "migration"}


def critical_class(timeline: Timeline) -> ClassTimeline:
    """The rank class whose last op ends last (the first stage, on ties)."""
    return max(timeline.classes, key=lambda c: (max(s.end for s in c.spans), -c.rank_class.stage))


def _blame(cls: ClassTimeline, op_id: int, previous: int | None) -> tuple[str, int | None]:
    """The dependency a compute op waited for last, as a breakdown key."""
    op = cls.rank_class.ops[op_id]
    waits = [d for d in op.deps if d != previous]
    if not waits:
        return "other", None
    last = max(waits, key=lambda d: cls.end_of[d])
    kind = cls.rank_class.ops[last]
    if kind.kind == "recv":
        return "pp", last
    if kind.kind in _HOST:
        return _HOST[kind.kind], None
    if kind.kind == "collective":
        return ("pp" if kind.attrs["group"] == "embedding" else kind.attrs["group"]), None
    return "other", None


def breakdown(timeline: Timeline) -> tuple[dict[str, float], dict[str, float]]:
    """Seconds of the step by cause, and compute seconds by kind of kernel."""
    cls = critical_class(timeline)
    parts = dict.fromkeys(BREAKDOWN_KEYS, 0.0)
    compute = dict.fromkeys(COMPUTE_KEYS, 0.0)
    now, previous = 0.0, None
    for span in sorted((s for s in cls.spans if s.stream == "compute"), key=lambda s: s.start):
        gap = span.start - now
        if gap > 0:
            key, recv = _blame(cls, span.op, previous)
            if recv is not None:
                exposed = min(gap, cls.transfer_s.get(recv, 0.0))
                parts["pp"] += exposed
                parts["pipeline_bubble"] += gap - exposed
            else:
                parts[key] += gap
        for category, seconds in cls.compute_parts[span.op].items():
            if category in ("tp", "cp"):
                parts[category] += seconds
            else:
                parts["compute"] += seconds
                compute[category] += seconds
        now, previous = span.end, span.op
    tail = timeline.step_time_s - now
    if tail > 0:
        last = max(cls.spans, key=lambda s: s.end)
        op = cls.rank_class.ops[last.op]
        key = op.attrs.get("group", "other") if op.kind == "collective" else _HOST.get(
            op.kind, "other")
        parts["pp" if key == "embedding" else key] += tail
    return parts, compute
