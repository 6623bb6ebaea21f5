"""Where the step's time went, read off the compute stream of the rank class that finishes last,
and how busy each pipeline stage's compute stream was.

Busy time on the compute stream splits by what its ops ran (GEMMs, attention, element-wise and
optimizer kernels, recomputation, and the tensor- and context-parallel collectives Megatron runs
on that stream). Idle time before a compute op goes to whatever it waited for last: a pipeline
receive (the transfer itself is exposed pipeline communication, the rest is the pipeline
bubble) or a data-parallel collective. Time after the last compute op goes to what was still
running. The parts add up to the step time.

The class that finishes last is usually the first pipeline stage, whose idle time is charged to
the bubble; whether that bubble is the schedule's own or a slower stage holding the others back
shows in the stages' loads (:func:`stage_load`): a stage whose compute stream is busy for most of
the step paces the pipeline.
"""

from __future__ import annotations

from ghsim.engine.simulator import ClassTimeline, Timeline

BREAKDOWN_KEYS = ("compute", "tp", "cp", "ep", "pp", "dp", "pipeline_bubble", "offload",
                  "migration",
                  "cpu", "other")
COMPUTE_KEYS = ("gemm", "attention", "elementwise", "optimizer", "recompute", "overlap")


_HOST = {"copy": "offload", "cpu": "cpu", "migrate": "migration"}
_INLINE = {"tp": "tp", "cp": "cp", "cpu": "cpu", "ep": "ep", "etp": "ep"}
"""Parts of a compute op that are not kernels: the inline collectives (expert tensor
parallelism counts with the expert-parallel exchange) and the wait for the host."""
_GROUP = {"embedding": "pp", "edp": "dp"}
"""Collective groups charged to another part: tied embeddings to the pipeline, the experts'
data-parallel synchronization to dp."""


def critical_class(timeline: Timeline) -> ClassTimeline:
    """The rank class whose last op ends last (the first stage, on ties)."""
    return max(timeline.classes, key=lambda c: (c.end_s, -c.rank_class.stage))


def _category(cls: ClassTimeline, op_id: int) -> str:
    op = cls.rank_class.ops[op_id]
    if op.kind in _HOST:
        return _HOST[op.kind]
    if op.kind == "collective":
        group = str(op.attrs["group"])
        return _GROUP.get(group, group)
    if op.kind in ("send", "recv"):
        return "pp"
    return "other"


def _charge(cls: ClassTimeline, op_id: int, since: float, parts: dict[str, float]) -> None:
    """Attribute ``[since, end of op_id]`` along the chain of ops that kept it waiting: each
    op's own span to its kind, a receive's wait to the pipeline (transfer, then bubble)."""
    ops = cls.rank_class.ops
    end = cls.end_of[op_id]
    while end > since:
        op = ops[op_id]
        start = max(cls.start_of[op_id], since)
        if op.kind == "recv":
            waited = end - start
            exposed = min(waited, cls.transfer_s.get(op_id, 0.0))
            parts["pp"] += exposed
            parts["pipeline_bubble"] += waited - exposed
        elif op.kind == "compute":
            parts["other"] += end - start  # another stream's compute cannot block; defensive
        else:
            parts[_category(cls, op_id)] += end - start
        if start <= since or not op.deps:
            parts["other"] += max(0.0, start - since)
            return
        previous = max(op.deps, key=lambda d: cls.end_of[d])
        gap = start - max(cls.end_of[previous], since)
        parts["other"] += max(0.0, gap)
        op_id, end = previous, min(cls.end_of[previous], start)


def breakdown(timeline: Timeline) -> tuple[dict[str, float], dict[str, float]]:
    """Seconds of the step by cause, and compute seconds by kind of kernel."""
    cls = critical_class(timeline)
    parts = dict.fromkeys(BREAKDOWN_KEYS, 0.0)
    compute = dict.fromkeys(COMPUTE_KEYS, 0.0)
    now, previous = 0.0, None
    for span in sorted((s for s in cls.spans if s.stream == "compute"), key=lambda s: s.start):
        gap = span.start - now
        launch = min(gap, cls.launch_wait_s.get(span.op, 0.0))
        if launch > 0:  # an imported trace's GPU idle until the CPU launched the kernel
            parts["cpu"] += launch
            gap -= launch
            now += launch
        if gap > 0:
            waits = [d for d in cls.rank_class.ops[span.op].deps if d != previous]
            if waits:
                _charge(cls, max(waits, key=lambda d: cls.end_of[d]), now, parts)
            else:
                parts["other"] += gap
        own = cls.compute_parts.get(span.op)
        if own is None:  # not costed by kind (an empty op's parts are {}: nothing to book)
            own = {_category(cls, span.op): span.end - span.start}
        for category, seconds in own.items():
            if category in _INLINE:  # cpu: the GPU waited for its host's launches
                parts[_INLINE[category]] += seconds
            elif category in compute:
                parts["compute"] += seconds
                compute[category] += seconds
            else:  # a transfer or wait on the compute stream keeps its own part
                parts[category if category in parts else "other"] += seconds
        now, previous = span.end, span.op
    if timeline.step_time_s > now:
        last = max(cls.spans, key=lambda s: s.end)
        _charge(cls, last.op, now, parts)
    return parts, compute


def stage_load(timeline: Timeline) -> list[dict[str, object]]:
    """Each rank class's compute-stream busy time (its kernels, and the collectives and host
    waits inside its compute ops), by pipeline stage: ``busy_s`` and its share of the step,
    and whether it is the class the breakdown is read from (``finishes_last``). The busiest
    stage is what the others wait for; without pipeline parallelism there is one class."""
    step = timeline.step_time_s
    last = critical_class(timeline).rank_class.name if timeline.classes else None
    rows: list[dict[str, object]] = []
    for cls in sorted(timeline.classes, key=lambda c: (c.rank_class.stage, c.rank_class.name)):
        busy = sum(s.end - s.start for s in cls.spans if s.stream == "compute")
        rows.append({"class": cls.rank_class.name, "stage": cls.rank_class.stage,
                     "busy_s": busy, "busy_share": busy / step if step > 0 else 0.0,
                     "finishes_last": cls.rank_class.name == last})
    return rows
