"""The workload IR: per-rank-class DAGs of operations, with buffers allocated and freed.

Operations have closed kinds and open attributes (as Chakra's execution traces do):

``compute``    GPU work: a sequence of kernels (and the tensor-parallel collectives Megatron
               issues between them, which block the compute stream) run back to back;
``copy``       bytes from one memory to another (H2D, D2H, peer);
``collective`` a collective over a named group (tp, cp, dp, pp) on its communication stream;
``send``/``recv`` pipeline point-to-point transfers to/from a peer stage;
``cpu``        work on the host CPU (an optimizer step on Grace);
``migrate``    unified-memory pages moved between tiers.

Each op runs on one stream, in the order the stream lists it, once its dependencies are done.
Buffers (weights, gradients, optimizer states, activations, workspace) are allocated and freed at
op boundaries, in a named memory tier, so memory use can be replayed through the step.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from ghsim.errors import InputError

OpKind = Literal["compute", "copy", "collective", "send", "recv", "cpu", "migrate"]
OP_KINDS: tuple[OpKind, ...] = ("compute", "copy", "collective", "send", "recv", "cpu", "migrate")
CollectiveKind = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"]
BufferCategory = Literal["weights", "gradients", "optimizer", "activations", "workspace"]


@dataclass(frozen=True, slots=True)
class Kernel:
    """One GPU kernel: FLOPs, bytes moved to and from HBM, dtype and shape class."""

    name: str
    flops: float
    bytes: float
    dtype: str
    shape: tuple[int, ...] = ()
    """GEMM ``(m, n, k)``, or the tensor's dimensions for other kernels."""
    klass: str = "elementwise"
    """``gemm``, ``attention``, ``softmax``, ``norm``, ``elementwise``, ``pointwise`` (PyTorch's
    vectorized kernels), ``strided`` (its non-vectorized ones), ``optimizer``, ``loss``."""
    recompute: bool = False
    """Recomputed forward work: hardware FLOPs, not model FLOPs."""
    groups: int = 1
    """A grouped GEMM (MoE experts): ``groups`` GEMMs of ``shape`` whose tiles share the
    GPU's waves; ``flops`` and ``bytes`` are the whole group's. Transformer Engine launches
    them one by one from C++ on several streams (``multi_stream_cublas_gemm``), so the host
    issues ``groups`` launches and each further GEMM costs the GPU a measured gap
    (``gpu.compute.grouped_gemm_gap_us``)."""
    kernels: int = 1
    """Kernels this step launches one after another (an FP8 quantization of each expert's
    tokens: experts x the recipe's kernels per tensor); ``bytes`` are all of theirs. Each
    pays the launch gap on the GPU and one launch on the host."""
    eager: str | None = None
    """The op (``norm``, ``rope``, ``activation``) this step runs as separate PyTorch kernels
    (``training.eager_ops``); its backward is that op's autograd kernels."""
    backward_kernels: int = 0
    """Kernels its backward launches, where not as many as its forward (0); its backward's
    bytes scale with them (a MoE router's chain of small kernels)."""
    host_syncs: int = 0
    """Times the host waits for the GPU before it can issue this step and its kernels:
    PyTorch ops whose output size depends on data on the GPU (boolean indexing's nonzero,
    ``repeat_interleave`` by counts) copy that size to the host first, so the framework
    thread cannot run ahead past them (as ``Comm.host_sync``)."""
    backward_syncs: int = 0
    """The same for its backward step (with ``backward_kernels``)."""
    elements: float = 0.0
    """For a ``strided`` kernel (PyTorch's non-vectorized element-wise kernels, bound by the
    SMs' work per element): the elements its kernels process."""
    spread_m: float = 0.0
    """Standard deviation of each GEMM's M in a grouped GEMM whose groups receive random
    numbers of rows (experts under random routing; ``shape``'s M is their mean): each group
    pays its own partial tile."""

    @property
    def launches(self) -> int:
        """Launches the host issues for this step: each kernel, and each GEMM of a group."""
        return self.kernels + self.groups - 1


Dedup = tuple[int, int, int, bool]
"""``Comm.dedup``: a token's copies (``top_k``), its router's expert groups, how many of them
it may pick, and whether it takes the picked groups' experts whole (a dealt block)."""
NO_DEDUP: Dedup = (0, 1, 1, False)
"""``Comm.dedup`` of an all-to-all that sends every token copy."""


@dataclass(frozen=True, slots=True)
class Comm:
    """A collective issued inside a compute op (tensor-parallel, context-parallel)."""

    name: str
    collective: CollectiveKind
    group: str
    bytes: float
    """Message size: the full buffer each rank contributes or receives."""
    group_size: int
    dedup: Dedup = NO_DEDUP
    """An all-to-all whose dispatcher sends each token once to each rank and each remote
    NVLink domain it is routed to (DeepEP): the token's copies (``top_k``), the router's
    expert groups and how many of them a token may pick (group-limited routing; ``1, 1``
    without), and whether a token takes its picked groups' experts whole (NeMo Automodel's
    dealt blocks of ``top_k`` experts in a row, ``experts / top_k`` groups of which it picks
    one); :data:`NO_DEDUP`: every copy travels."""
    host_sync: bool = False
    """The framework thread waits here until the GPU has run everything before: a MoE
    dispatch needs each expert's token count on the host to size its buffers and grouped
    GEMMs (Megatron-Core's all-to-all dispatcher synchronizes on a device-to-host copy of the
    counts, before the all-to-all when routing is dropless and before the permutation with a
    capacity factor; DeepEP's dispatch busy-waits for the received counts), so the host cannot
    run ahead past it and issues what follows while the GPU waits."""


Step = Kernel | Comm


@dataclass(slots=True)
class Op:
    """One node of a rank class's DAG."""

    id: int
    kind: OpKind
    name: str
    stream: str
    deps: tuple[int, ...] = ()
    body: tuple[Step, ...] = ()
    """compute: the kernels and inline collectives it runs, in order."""
    bytes: float = 0.0
    """copy, collective, send, recv, migrate: the payload in bytes."""
    flops: float = 0.0
    """cpu: FLOPs of host work."""
    attrs: dict[str, Any] = field(default_factory=dict)
    """Open attributes: phase, micro-batch, chunk, layers, collective, group, peer, src/dst."""

    def kernels(self) -> Iterator[Kernel]:
        return (step for step in self.body if isinstance(step, Kernel))

    def comms(self) -> Iterator[Comm]:
        return (step for step in self.body if isinstance(step, Comm))


@dataclass(frozen=True, slots=True)
class MemoryEvent:
    """A buffer allocated (``bytes`` > 0) or freed (< 0) when op ``op`` completes (-1: at start)."""

    op: int
    buffer: str
    category: BufferCategory
    tier: str
    bytes: float


@dataclass(frozen=True)
class Group:
    """A communication group seen from one rank: its size and where its members sit."""

    kind: str
    size: int
    nodes: int
    """Nodes the group's members span."""
    domains: int
    """NVLink domains they span (1: all traffic stays on NVLink)."""
    stride: int
    """Distance between consecutive members' global ranks."""


@dataclass
class RankClass:
    """Ranks that do identical work: simulated once, counted ``multiplicity`` times."""

    name: str
    stage: int
    multiplicity: int
    ops: list[Op]
    memory: list[MemoryEvent]
    groups: dict[str, Group]
    first_rank: int
    """Global rank of one member, for placing it on the system graph."""

    def op(self, op_id: int) -> Op:
        return self.ops[op_id]


@dataclass
class Workload:
    """Everything every GPU does in one optimizer step, grouped into rank classes."""

    classes: list[RankClass]
    num_gpus: int
    model_flops_per_step: float
    """Whole job, Megatron convention (no recompute)."""
    tokens_per_step: int
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def hardware_flops_per_step(self) -> float:
        """Whole job, recomputed work included (sum of kernel FLOPs over all ranks)."""
        return sum(c.multiplicity * class_flops(c) for c in self.classes)


def class_flops(rank_class: RankClass, recompute: bool | None = None) -> float:
    """GPU kernel FLOPs of one rank of the class (only recomputed ones if ``recompute``),
    each op body summed once however many ops share it (micro-batches repeat bodies)."""
    per_body: dict[int, float] = {}
    total = 0.0
    for op in rank_class.ops:
        key = id(op.body)
        if key not in per_body:
            per_body[key] = sum(k.flops for k in op.kernels()
                                if recompute is None or k.recompute == recompute)
        total += per_body[key]
    return total


class WorkloadError(InputError):
    """An imported or lowered workload that is not a valid DAG."""


def check_dag(rank_class: RankClass, source: str = "workload") -> None:
    """Check ids, dependencies and acyclicity; raise :class:`WorkloadError` naming the cycle."""
    ops = rank_class.ops
    for index, op in enumerate(ops):
        if op.id != index:
            raise WorkloadError(source, f"{rank_class.name}.ops[{index}]", f"id {op.id} != index")
        for dep in op.deps:
            if not 0 <= dep < len(ops) or dep == op.id:
                raise WorkloadError(source, f"{rank_class.name}.ops[{index}]",
                                    f"dependency {dep} names no other op")
    state = [0] * len(ops)  # 0 new, 1 on the stack, 2 done
    for root in range(len(ops)):
        if state[root]:
            continue
        stack = [(root, iter(ops[root].deps))]
        state[root] = 1
        while stack:
            node, deps = stack[-1]
            nxt = next(deps, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state[nxt] == 1:
                cycle = [n for n, _ in stack[[n for n, _ in stack].index(nxt):]]
                names = " -> ".join(ops[n].name for n in [*cycle, nxt])
                raise WorkloadError(source, rank_class.name,
                                    f"dependency cycle: {names}; remove one of these edges")
            elif state[nxt] == 0:
                state[nxt] = 1
                stack.append((nxt, iter(ops[nxt].deps)))
