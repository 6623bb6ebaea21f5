"""When each rank class had communication kernels on its SMs, for the slowdown of the compute
kernels beside them.

A collective or a pipeline send runs NCCL kernels that take SMs and memory bandwidth from the
compute kernels running at the same time (``gpu.compute.comm_overlap_slowdown``: a kernel
beside them takes 1 + slowdown times as long). What slows a compute op is the time such
kernels ran during it, whenever they started: a data-parallel bucket's reduce-scatter starts
as the backward of the next layer does, and runs through it. :class:`CommActivity` keeps, per
rank class, the union of the spans its communication ops ran, so the simulator can ask after
a compute op how much of it ran beside them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CommActivity:
    """Per rank class, the spans in which at least one of its communication ops ran."""

    _running: dict[str, int] = field(default_factory=dict)
    """Communication ops in flight, by owner."""
    _since: dict[str, float] = field(default_factory=dict)
    """When the owner's current busy span began (while any op is in flight)."""
    _spans: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    """The owner's closed busy spans, in time order, none overlapping."""

    def begin(self, owner: str, now: float) -> None:
        """A communication op of ``owner`` starts at ``now``."""
        running = self._running.get(owner, 0)
        if not running:
            self._since[owner] = now
        self._running[owner] = running + 1

    def end(self, owner: str, now: float) -> None:
        """One of ``owner``'s communication ops ends at ``now``."""
        running = self._running[owner] - 1
        self._running[owner] = running
        if not running:
            start = self._since.pop(owner)
            if now > start:
                self._spans.setdefault(owner, []).append((start, now))

    def overlap_s(self, owner: str, start: float, end: float) -> float:
        """Seconds of [start, end] in which ``owner`` had communication running."""
        total = 0.0
        if self._running.get(owner):
            total += max(0.0, end - max(start, self._since[owner]))
        for span_start, span_end in reversed(self._spans.get(owner, ())):
            if span_end <= start:
                break  # spans are in time order: the rest ended earlier still
            total += max(0.0, min(end, span_end) - max(start, span_start))
        return total
