"""What lowering exposes to the policies that extend it (offload strategies, ...).

A policy sees the stage being lowered through :class:`StageLowering`: its layout and state
sizes, the op builder it appends copies, host steps and migrations with, and the chunks and
activation buffers of the stage; never the lowering's own classes. So ``lower`` imports the
policies and the policies import only this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ghsim.config.layout import Layout
from ghsim.workload.ir import MemoryEvent, Op, Step


@dataclass
class Chunk:
    """One model chunk of a pipeline stage."""

    index: int
    virtual_stage: int
    layers: int
    first: bool
    last: bool
    params: float
    """Parameters of this chunk on one rank (divided by tp; experts by ep x etp)."""
    moe_layers: tuple[bool, ...] = ()
    """Per layer of the chunk, in order: whether it is a MoE layer (empty: all dense)."""
    windows: tuple[int | None, ...] = ()
    """Per layer of the chunk: its sliding attention window in tokens, None where it attends
    fully (empty: every layer attends fully)."""
    mtp: tuple[bool, ...] = ()
    """The last chunk's multi-token-prediction modules: whether each one's layer is MoE."""
    expert_params: float = 0.0
    """Of ``params``, the routed experts' (reduced and sharded over the expert data-parallel
    group, edp, instead of dp)."""


@dataclass
class OpBuilder:
    """Appends ops to one rank class, chaining each op to the previous op on its stream."""

    ops: list[Op] = field(default_factory=list)
    memory: list[MemoryEvent] = field(default_factory=list)
    managed: bool = False
    tails: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, name: str, stream: str, deps: tuple[int, ...] = (),
            body: tuple[Step, ...] = (), nbytes: float = 0.0, flops: float = 0.0,
            **attrs: Any) -> int:
        op_id = len(self.ops)
        chain = (self.tails[stream],) if stream in self.tails else ()
        all_deps = tuple(sorted({*chain, *(d for d in deps if d >= 0)}))
        self.ops.append(Op(op_id, kind, name, stream, all_deps, body, nbytes,  # type: ignore[arg-type]
                           flops, attrs=attrs))
        self.tails[stream] = op_id
        return op_id

    def alloc(self, op: int, buffer: str, category: str, nbytes: float,
              tier: str = "hbm") -> None:
        if nbytes:
            if self.managed and tier == "hbm" and not buffer.startswith("managed."):
                tier = "managed"  # the page model accounts for HBM
            self.memory.append(MemoryEvent(op, buffer, category, tier, nbytes))  # type: ignore[arg-type]


class StageLowering(Protocol):
    """The stage being lowered, as offload policies use it."""

    layout: Layout
    b: OpBuilder
    """Appends ops and memory events to the stage's rank class."""
    chunks: list[Chunk]
    state_bytes: tuple[float, float, float]
    """Bytes per parameter of weights, gradients and optimizer states."""
    per_layer_params: float
    """Parameters of one layer on one rank (divided by tp)."""
    expert_share: float
    """Of the rank's parameters, the routed experts' (0 for a dense model)."""
    layer_activations: float
    """Bytes one layer of one micro-batch keeps for its backward pass."""
    saved: dict[tuple[int, int], list[tuple[str, float]]]
    """Activation buffers each (micro-batch, chunk) keeps for its backward pass."""
    compute_history: list[int]
    """Compute ops emitted so far."""

    @property
    def zero(self) -> int:
        """The ZeRO stage in effect (0 without data parallelism)."""

    def sharded(self, params: float, stage: int) -> float:
        """Of ``params`` on this rank, what ZeRO ``stage`` or above leaves it."""

    def largest_bucket_params(self, chunk: Chunk) -> float:
        """Parameters of the chunk's largest gradient bucket."""

    def bucket_params(self, chunk: Chunk, layers: int, index: int, buckets: int) -> float:
        """Parameters of gradient bucket ``index`` of ``buckets`` in ``chunk``."""
