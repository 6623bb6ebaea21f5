"""Offload strategies: where weights, gradients, optimizer states and activations live, and the
copies and host work that moving them costs. One registered policy per ``offload.strategy``.

* ``optimizer`` (ZeRO-Offload, Ren et al. 2021): FP32 master weights and Adam moments in host
  memory; after the backward pass the gradients go down over the host link, the host CPU runs
  Adam, and the updated BF16 weights come back up.
* ``optimizer_overlap`` (as SuperOffload does on GH200): the same, bucket by bucket, as soon as
  each gradient bucket is reduced, overlapped with the rest of the backward pass.
* ``params``: weights (and the optimizer) in host memory, streamed in layer by layer ahead of
  use (``prefetch_layers``); each layer's gradients go down after its backward pass.
* ``activations``: activations saved for the backward pass are written to host memory after each
  layer's forward pass and read back, ``prefetch_layers`` ahead, for its backward pass.
* ``unified_memory``: everything in unified memory, in 2 MB pages: managed memory faulted in
  and evicted, or (ATS) system memory read in place and migrated by access counters; see
  :class:`UnifiedMemory`.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import replace
from typing import ClassVar

from ghsim.config import Scenario
from ghsim.config.api import blame
from ghsim.config.layout import LayoutProblem
from ghsim.errors import ConfigError
from ghsim.workload.ir import Kernel, Step
from ghsim.workload.pages import Access, PageTable
from ghsim.workload.stage import Chunk, StageLowering
from ghsim.workload.states import optimizer_step_bytes, optimizer_step_read_bytes

ADAM_CPU_FLOPS_PER_PARAM = 14.0
"""FP32 operations of one Adam update (two moment updates, bias corrections, square root,
division, weight update); the host step is memory-bound well before this matters."""

POLICIES: dict[str, type[OffloadPolicy]] = {}


def register(name: str) -> Callable[[type[OffloadPolicy]], type[OffloadPolicy]]:
    """Class decorator: make a policy available as ``offload.strategy: name``."""
    def add(cls: type[OffloadPolicy]) -> type[OffloadPolicy]:
        cls.name = name
        POLICIES[name] = cls
        return cls
    return add


def policy_class(name: str, source: str, key: str = "offload.strategy") -> type[OffloadPolicy]:
    """The registered policy called ``name``, or a :class:`ConfigError` naming ``source`` and
    ``key`` with the registered names."""
    if name not in POLICIES:
        close = difflib.get_close_matches(name, POLICIES, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(source, key, f"expected a registered offload strategy "
                          f"({', '.join(sorted(POLICIES))}), got {name!r}{hint}")
    return POLICIES[name]


def offload_policy(scenario: Scenario) -> OffloadPolicy:
    """The policy the scenario names."""
    return policy_class(scenario.spec.offload.strategy, scenario.source)(scenario)


@register("none")
class OffloadPolicy:
    """Everything in HBM; the base class every strategy extends."""

    name: ClassVar[str]
    managed: ClassVar[bool] = False
    """Memory is managed by a page model: the lowering's own HBM allocations are not counted."""
    per_layer: ClassVar[bool] = False
    """Emit one compute op per layer, so that copies can be scheduled layer by layer."""

    def __init__(self, scenario: Scenario) -> None:
        self.spec = scenario.spec.offload
        cpu = scenario.spec.system.node.cpu.cpu
        assert cpu is not None
        self.host_tier = "lpddr" if cpu.memory.type == "lpddr5x" else "host_ddr"
        self.step_bytes = float(optimizer_step_bytes(scenario.spec.training))
        self.read_share = optimizer_step_read_bytes(scenario.spec.training) / self.step_bytes
        """The share of the host optimizer's traffic that is reads (a core reads slower than
        it writes)."""
        """Host memory traffic of one parameter's optimizer update, as on the GPU: read the
        gradient (its main_grads bytes) and the FP32 master weight and moments, write those back
        and the half-precision weight (Adam with BF16 gradients: 2 + 12 + 12 + 2 = 28 B;
        AdEMAMix with FP32 gradients 38)."""

    def prepare(self, lw: StageLowering) -> None:
        """Called once the stage's sizes are known, before any op is lowered."""

    def host_fraction(self, category: str) -> float:
        """Share of a state category (weights, gradients, optimizer) kept in host memory."""
        return 0.0

    def before_pass(self, lw: StageLowering, phase: str, mb: int, chunk: Chunk, index: int,
                    buckets: list[int]) -> list[int]:
        """Ops the compute op of this pass (or layer) must wait for."""
        return []

    def after_pass(self, lw: StageLowering, phase: str, mb: int, chunk: Chunk, index: int,
                   buckets: list[int], op: int) -> None:
        """Work issued once the compute op ``op`` is done."""

    def after_reduce(self, lw: StageLowering, chunk: Chunk, layers: int, index: int,
                     buckets: int, reduced: int) -> None:
        """Work issued once a gradient bucket is reduced over data parallelism."""

    def before_optimizer(self, lw: StageLowering) -> list[int]:
        """Ops the optimizer step must wait for."""
        return []

    def optimizer(self, lw: StageLowering, params: float, deps: tuple[int, ...]) -> None:
        """Host-side optimizer work for ``params`` parameters (the rank's shard)."""

    # -- helpers shared by the strategies ------------------------------------------------

    def copy(self, lw: StageLowering, name: str, direction: str, nbytes: float,
             deps: tuple[int, ...]) -> int:
        """A copy-engine copy between HBM and host memory on the ``h2d`` or ``d2h`` stream."""
        return lw.b.add("copy", name, direction, deps, nbytes=nbytes, direction=direction,
                        src="hbm" if direction == "d2h" else self.host_tier,
                        dst=self.host_tier if direction == "d2h" else "hbm")

    def host_adam(self, lw: StageLowering, name: str, params: float,
                  deps: tuple[int, ...], upload: bool = True) -> int:
        """Gradients down, Adam on the host CPU, updated BF16 weights up (if ``upload``)."""
        grad_bytes, weight_bytes = lw.state_bytes[1] * params, lw.state_bytes[0] * params
        down = self.copy(lw, f"{name}.grads_d2h", "d2h", grad_bytes, deps)
        step = lw.b.add("cpu", f"{name}.adam", "cpu", (down,), nbytes=params
                        * self.step_bytes, flops=params * ADAM_CPU_FLOPS_PER_PARAM,
                        cores=self.spec.cpu_cores, read_share=self.read_share)
        return self.copy(lw, f"{name}.weights_h2d", "h2d", weight_bytes, (step,)) if upload \
            else step


@register("optimizer")
class OptimizerOffload(OffloadPolicy):
    """ZeRO-Offload: optimizer states, the gradients they are stepped with and the Adam step on
    the host. Ren et al. 2021 (section 4.1) keep only the 16-bit weights on the GPU: each
    gradient bucket goes down as it is reduced and accumulates into the FP32 gradient partition
    in host memory, so the GPU holds one bucket of 16-bit gradients in flight, not the
    gradients of the whole model."""

    def host_fraction(self, category: str) -> float:
        return self.spec.fraction if category in ("optimizer", "gradients") else 0.0

    def prepare(self, lw: StageLowering) -> None:
        largest = max((lw.largest_bucket_params(chunk) for chunk in lw.chunks), default=0.0)
        lw.b.alloc(-1, "gradients.bucket", "gradients",
                   largest * self.spec.fraction * lw.state_bytes[0])

    def optimizer(self, lw: StageLowering, params: float, deps: tuple[int, ...]) -> None:
        self.host_adam(lw, "offload", params * self.spec.fraction, deps)


@register("optimizer_overlap")
class OverlappedOptimizerOffload(OptimizerOffload):
    """The host Adam step bucket by bucket, overlapped with the rest of the backward pass."""

    def after_reduce(self, lw: StageLowering, chunk: Chunk, layers: int, index: int,
                     buckets: int, reduced: int) -> None:
        params = lw.bucket_params(chunk, layers, index, buckets)
        shard = params / (lw.layout.dp_cp if lw.zero >= 1 else 1)
        self.host_adam(lw, f"offload.c{chunk.index}.b{index}", shard * self.spec.fraction,
                       (reduced,))

    def optimizer(self, lw: StageLowering, params: float, deps: tuple[int, ...]) -> None:
        return  # every bucket was stepped as it was reduced


class _Streaming(OffloadPolicy):
    """Shared by strategies that move data layer by layer ahead of use."""

    per_layer = True

    def prefetch_after(self, lw: StageLowering) -> tuple[int, ...]:
        """The compute op a prefetch may start after (``prefetch_layers`` ops back)."""
        ops = lw.compute_history
        back = self.spec.prefetch_layers + 1
        return (ops[-back],) if len(ops) >= back else ()


@register("activations")
class ActivationOffload(_Streaming):
    """Saved activations to host memory after each layer's forward pass and back before its
    backward pass."""

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.saved: dict[tuple[int, int, int], tuple[int, str, float]] = {}

    def after_pass(self, lw: StageLowering, phase: str, mb: int, chunk: Chunk, index: int,
                   buckets: list[int], op: int) -> None:
        lw.compute_history.append(op)
        if phase != "F":
            return
        name, size = lw.saved[(mb, chunk.index)][-1]
        moved = size * self.spec.fraction
        down = self.copy(lw, f"{name}.d2h", "d2h", moved, (op,))
        lw.b.alloc(down, name, "activations", -moved)
        lw.b.alloc(down, f"{name}.host", "activations", moved, self.host_tier)
        self.saved[(mb, chunk.index, index)] = (down, name, moved)

    def before_pass(self, lw: StageLowering, phase: str, mb: int, chunk: Chunk, index: int,
                    buckets: list[int]) -> list[int]:
        if phase != "B":
            return []
        down, name, moved = self.saved.pop((mb, chunk.index, len(buckets) - 1 - index))
        up = self.copy(lw, f"{name}.h2d", "h2d", moved, (down, *self.prefetch_after(lw)))
        lw.b.alloc(up, f"{name}.host", "activations", -moved, self.host_tier)
        lw.b.alloc(up, name, "activations", moved)
        return [up]


@register("params")
class ParamOffload(_Streaming):
    """Weights and optimizer in host memory; each layer's weights streamed in ahead of use and
    its gradients streamed out after its backward pass."""

    def host_fraction(self, category: str) -> float:
        return {"weights": self.spec.fraction, "gradients": self.spec.fraction,
                "optimizer": 1.0}.get(category, 0.0)

    def _layer_params(self, lw: StageLowering, layers: int) -> float:
        return layers * lw.per_layer_params * self.spec.fraction

    def before_pass(self, lw: StageLowering, phase: str, mb: int, chunk: Chunk, index: int,
                    buckets: list[int]) -> list[int]:
        nbytes = self._layer_params(lw, buckets[index]) * lw.state_bytes[0]
        name = f"weights.{phase}.mb{mb}.c{chunk.index}.l{index}"
        up = self.copy(lw, f"{name}.h2d", "h2d", nbytes, self.prefetch_after(lw))
        lw.b.alloc(up, name, "weights", nbytes)
        self.pending = (name, nbytes)
        return [up]

    def after_pass(self, lw: StageLowering, phase: str, mb: int, chunk: Chunk, index: int,
                   buckets: list[int], op: int) -> None:
        lw.compute_history.append(op)
        name, nbytes = self.pending
        lw.b.alloc(op, name, "weights", -nbytes)
        if phase == "B":
            grads = self._layer_params(lw, buckets[index]) * lw.state_bytes[1]
            self.copy(lw, f"grads.mb{mb}.c{chunk.index}.l{index}.d2h", "d2h", grads, (op,))

    def optimizer(self, lw: StageLowering, params: float, deps: tuple[int, ...]) -> None:
        # Gradients are already in host memory and weights stay there: Adam only.
        lw.b.add("cpu", "offload.adam", "cpu", (*deps, lw.b.tails.get("d2h", -1)),
                 nbytes=params * self.step_bytes,
                 flops=params * ADAM_CPU_FLOPS_PER_PARAM, cores=self.spec.cpu_cores,
                 read_share=self.read_share)


@register("experts")
class ExpertOffload(ParamOffload):
    """Grace Hopper for MoE: the routed experts' weights, gradients and optimizer states live in
    host memory (LPDDR5X on GH200); each MoE layer's local experts are streamed into HBM ahead
    of its pass (``prefetch_layers`` ahead; with balanced routing every local expert receives
    tokens, so all of them travel) and their gradients streamed out after its backward pass;
    the experts' optimizer step runs on the host CPU. Attention, norms, the router, shared
    experts and dense layers stay in HBM with their optimizer on the GPU. ``fraction`` is the
    share of the experts kept in host memory."""

    def host_fraction(self, category: str) -> float:
        return self._shares.get(category, 0.0) * (
            self.spec.fraction if category != "optimizer" else 1.0)

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        if scenario.spec.model.moe is None:
            raise ConfigError(scenario.source, "offload.strategy",
                              "'experts' needs a model with experts (model.moe)")
        self._shares: dict[str, float] = {}

    def prepare(self, lw: StageLowering) -> None:
        """The experts' share of each state category on this rank, after ZeRO sharded the
        dense part over dp and the experts' over edp."""
        params = sum(c.params for c in lw.chunks)
        experts = sum(c.expert_params for c in lw.chunks)
        for category, stage in (("weights", 3), ("gradients", 2), ("optimizer", 1)):
            total = lw.sharded(params, stage)
            mine = experts / (lw.layout.edp if lw.zero >= stage else 1)
            self._shares[category] = mine / total if total else 0.0

    def _layer_params(self, lw: StageLowering, layers: int) -> float:
        # this layer's experts: the chunk's expert parameters spread over its layers (the
        # mean over a chunk's MoE and dense layers; all but the first few are MoE)
        return layers * lw.per_layer_params * lw.expert_share * self.spec.fraction

    def optimizer(self, lw: StageLowering, params: float, deps: tuple[int, ...]) -> None:
        total = sum(c.expert_params for c in lw.chunks)
        shard = total / (lw.layout.edp if lw.zero >= 1 else 1)
        lw.b.add("cpu", "offload.experts_adam", "cpu", (*deps, lw.b.tails.get("d2h", -1)),
                 nbytes=shard * self.step_bytes, flops=shard * ADAM_CPU_FLOPS_PER_PARAM,
                 cores=self.spec.cpu_cores, read_share=self.read_share)


@register("unified_memory")
class UnifiedMemory(_Streaming):
    """Everything in unified memory, tracked in 2 MB pages (:mod:`ghsim.workload.pages`), as the
    GPU's ``unified_memory.allocator`` allocates it.

    ``managed`` (cudaMallocManaged): the driver faults pages into HBM as kernels touch them, at
    the measured fault-driven rate (``migration_bandwidth_gb_s``, fault service included:
    FACTS.md T3#9-10), and evicts the least recently used when HBM is full. Weights and
    optimizer states are first touched by the CPU (loaded from a checkpoint), so they start in
    host memory (FACTS.md T1#36); gradients and activations are first touched by the GPU, and
    activations are created in HBM without a transfer (a caching allocator hands out memory an
    earlier micro-batch populated). The step is replayed from the placement the previous step's
    optimizer left: its last-touched states in HBM.

    ``system`` (malloc on an ATS system, FACTS.md T1#33 and T1#36): nothing faults. Weights and
    optimizer states, first touched by the CPU, sit in host memory and kernels read and write
    them there in place over the host link, at its measured ``gpu_read_host`` /
    ``gpu_write_host`` rates, beside their own work: a pass lasts as long as the longer of its
    kernels and its in-place traffic. Gradients and activations, first touched by the GPU, land
    in HBM while it has room (freed activations stay with the caching allocator), else in host
    memory. With access-counter migration (on by default on ATS systems, T1#35; Alps turns it
    off, T3#12) a region whose remote accesses reach ``access_counter_threshold`` migrates to
    HBM after the pass that got it there, if HBM has room, at the migration rate; later passes
    over it wait for it and read it from HBM. Kernels reach ``system_allocated_hbm_efficiency``
    of their cudaMalloc bandwidth on everything in HBM (T3#7). The step simulated follows one
    step (micro-batch by micro-batch, every layer forward then backward, then the optimizer)
    replayed on the page table alone, so it starts where that step left the pages, the access
    counts included: the steady state wherever one step's accesses reach the threshold (at the
    shipped 256 accesses of 128 B, a region's first pass does).

    Approximations (system): a pass's kernels keep costing all their bytes as HBM traffic (at
    the lower rate), those of host-resident operands too, beside the in-place flows; only the
    optimizer kernel leaves out what it touches in host memory. The replay runs one micro-batch
    at a time, as a single pipeline stage does. Embedding and output layer are not paged.
    """

    managed = True

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        gpu = scenario.spec.system.node.gpu.gpu
        assert gpu is not None
        um = gpu.unified_memory
        part = scenario.spec.system.node.gpu.name
        if um is None:
            raise ConfigError(part, "gpu.unified_memory",
                              "is needed for offload.strategy unified_memory (with sources)")
        self.page_bytes = um.gpu_page_mib * 2**20
        self.batch = um.fault_batch_pages or 0
        self.system = um.allocator == "system"
        self.threshold: float | None = None
        """Accesses after which a host-resident region migrates; None: no access counters."""
        self.accesses = 0.0
        """Remote accesses one pass counts on each host-resident page it touches."""
        self.slowdown = 1.0
        """HBM traffic of system-allocated memory costs this many times its cudaMalloc time."""
        if self.system:
            if not gpu.host_link.coherent:
                raise ConfigError(part, "gpu.unified_memory.allocator",
                                  "system needs a coherent (ATS) host link, host_link.coherent: "
                                  "true; without one, use allocator managed")
            if um.system_allocated_hbm_efficiency is None:
                raise ConfigError(part, "gpu.unified_memory.system_allocated_hbm_efficiency",
                                  "is needed for allocator system (with a source)")
            self.slowdown = 1.0 / um.system_allocated_hbm_efficiency
            if gpu.migration_by_access_counters():
                if um.access_counter_threshold is None:
                    raise ConfigError(part, "gpu.unified_memory.access_counter_threshold",
                                      "is needed for access-counter migration (with a "
                                      "source), or set access_counter_migration: false")
                if um.access_counter_bytes_per_access is None:
                    raise ConfigError(part, "gpu.unified_memory.access_counter_bytes_per_access",
                                      "is needed for access-counter migration (with a "
                                      "source), or set access_counter_migration: false")
                self.threshold = float(um.access_counter_threshold)
                self.accesses = self.page_bytes / um.access_counter_bytes_per_access
        where = blame(LayoutProblem(("system", "node", "gpu", "gpu", "unified_memory",
                                     "gpu_page_mib"), ""),
                      scenario.source, scenario.overrides)
        self.pages = PageTable(self.page_bytes, int(gpu.memory.capacity_bytes // self.page_bytes),
                               source=where.source, key=where.key_path)
        self.started = False
        self.pending: list[int] = []
        """In-place traffic of the last pass: the next pass (its kernels' end) waits for it."""
        self.arriving: dict[str, int] = {}
        """The access-counter migration bringing each buffer to HBM, for its next pass."""
        self.placed = (0.0, 0.0)
        """HBM and host bytes of the activation buffer the current forward pass created."""
        self.bodies: dict[int, tuple[tuple[Step, ...], tuple[Step, ...]]] = {}
        """Compute bodies and their system-memory versions (HBM traffic x ``slowdown``)."""
        self.optimizer_host_bytes = 0.0
        """What the optimizer step reads and writes in place in host memory."""

    def _host_pages(self) -> int:
        return sum(end - start - self.pages.held[n] for n, (start, end) in
                   self.pages.ranges.items())

    def _start(self, lw: StageLowering) -> None:
        """Register the states where the previous step left them."""
        self.started = True
        w, g, o = lw.state_bytes
        layers = sum(c.layers for c in lw.chunks)
        shard = lw.layout.dp_cp if lw.zero >= 1 else 1
        if self.system:
            self._replay_previous_step(lw, layers, w, g, o / shard)
        else:
            for layer in range(layers):
                for kind, size in (("w", w), ("g", g), ("o", o / shard)):
                    self.pages.add(f"{kind}{layer}", lw.per_layer_params * size)
            for layer in reversed(range(layers)):  # the optimizer walked layers 0..L-1 last
                names = [f"{kind}{layer}" for kind in "wgo"]
                room = self.pages.capacity - self.pages.resident_pages
                need = sum(e - s for s, e in (self.pages.ranges[n] for n in names))
                if need > room:
                    break
                self.pages.touch(names)
        lw.b.alloc(-1, "managed.hbm", "weights", self.pages.resident_pages * self.page_bytes)
        lw.b.alloc(-1, "managed.host", "weights", self._host_pages() * self.page_bytes,
                   self.host_tier)
        self.layer_offset = {c.index: sum(x.layers for x in lw.chunks[: i])
                             for i, c in enumerate(lw.chunks)}

    def _replay_previous_step(self, lw: StageLowering, layers: int, w: float, g: float,
                              o: float) -> None:
        """System memory: the CPU first touches the weights and optimizer states (host
        memory); then one step runs on the page table alone, so that gradients and the
        activations' caching pool are placed by their first touch and access counters have
        moved what they would."""
        for layer in range(layers):
            self.pages.add(f"w{layer}", lw.per_layer_params * w)
            self.pages.add(f"o{layer}", lw.per_layer_params * o)
        for mb in range(lw.layout.micro_batches):
            for layer in range(layers):
                act = f"replay.a{mb}.{layer}"
                self.pages.add_on_gpu(act, lw.layer_activations, evict=False)
                self.pages.access([f"w{layer}"], [act], self.accesses, self.threshold)
            for layer in reversed(range(layers)):
                act = f"replay.a{mb}.{layer}"
                if f"g{layer}" not in self.pages.ranges:
                    self.pages.add_on_gpu(f"g{layer}", lw.per_layer_params * g, evict=False)
                self.pages.access([f"w{layer}", act], [f"g{layer}"], self.accesses,
                                  self.threshold)
                self.pages.release(act, keep=True)
        self.pages.access(*self._optimizer_buffers(layers), self.accesses, self.threshold)

    @staticmethod
    def _optimizer_buffers(layers: int) -> tuple[list[str], list[str]]:
        """What the optimizer step reads (gradients, master weights and moments) and writes
        (those and the half-precision weights)."""
        return ([f"{k}{layer}" for layer in range(layers) for k in "go"],
                [f"{k}{layer}" for layer in range(layers) for k in "ow"])

    # -- managed memory: fault-driven migration ----------------------------------------------

    def _migrate(self, lw: StageLowering, name: str, names: list[str],
                 evicted: int = 0) -> list[int]:
        touch = self.pages.touch(names)
        evicted += touch.evicted
        if not touch.faulted and not evicted:
            return []
        moved_in, moved_out = touch.faulted * self.page_bytes, evicted * self.page_bytes
        faults = math.ceil(touch.faulted / self.batch) if self.batch else 0
        op = lw.b.add("migrate", name, "migrate", tuple(lw.compute_history[-1:]),
                      nbytes=moved_in + moved_out, in_bytes=moved_in, out_bytes=moved_out,
                      faults=faults)
        lw.b.alloc(op, "managed.hbm", "weights", moved_in - moved_out)
        lw.b.alloc(op, "managed.host", "weights", moved_out - moved_in, self.host_tier)
        return [op]

    # -- system memory: in place, access counters --------------------------------------------

    def _in_place(self, lw: StageLowering, name: str, reads: list[str], writes: list[str],
                  waits: list[int]) -> tuple[list[int], Access]:
        """One pass over system memory: its in-place reads and writes of host memory, beside
        its kernels, and the access-counter migrations it sets off. Returns the in-place ops
        and what the pass touched where."""
        access = self.pages.access(reads, writes, self.accesses, self.threshold)
        deps = (*lw.compute_history[-1:], *waits)
        ops = []
        for pages, use, direction in ((access.host_read, "gpu_read_host", "h2d"),
                                      (access.host_written, "gpu_write_host", "d2h")):
            if pages:
                ops.append(lw.b.add(
                    "copy", f"{name}.{use}", f"in_place_{direction}", deps,
                    nbytes=pages * self.page_bytes, direction=direction, access=use,
                    src=self.host_tier if direction == "h2d" else "hbm",
                    dst="hbm" if direction == "h2d" else self.host_tier))
        for buffer, pages in access.migrated.items():
            moved = pages * self.page_bytes
            op = lw.b.add("migrate", f"migrate.{name}.{buffer}", "migrate", deps, nbytes=moved,
                          in_bytes=moved, out_bytes=0.0, faults=0)
            lw.b.alloc(op, "managed.hbm", "weights", moved)
            lw.b.alloc(op, "managed.host", "weights", -moved, self.host_tier)
            self.arriving[buffer] = op
        return ops, access

    def _waits(self, names: list[str]) -> list[int]:
        """What a pass over ``names`` waits for: the last pass's in-place traffic and the
        migrations bringing its buffers to HBM."""
        waits = [*self.pending, *(self.arriving.pop(n) for n in names if n in self.arriving)]
        self.pending = []
        return waits

    def _slow(self, lw: StageLowering, op: int) -> None:
        """System memory in HBM: the compute op's kernels move their HBM bytes at
        ``1 / slowdown`` of the rate they reach on cudaMalloc memory (each kernel's roofline
        with the lower bandwidth)."""
        compute = lw.b.ops[op]
        key = id(compute.body)
        if key not in self.bodies:
            slowed = tuple(replace(s, bytes=s.bytes * self.slowdown) if isinstance(s, Kernel)
                           else s for s in compute.body)
            self.bodies[key] = (compute.body, slowed)
        compute.body = self.bodies[key][1]

    # -- the hooks -------------------------------------------------------------------------

    def before_pass(self, lw: StageLowering, phase: str, mb: int, chunk: Chunk, index: int,
                    buckets: list[int]) -> list[int]:
        if not self.started:
            self._start(lw)
        layer = self.layer_offset[chunk.index] + (
            index if phase == "F" else len(buckets) - 1 - index)
        act = f"a{mb}.{chunk.index}.{layer}"
        evicted = 0
        if phase == "F":
            size = buckets[index] * lw.layer_activations
            pool = self.pages.pool
            evicted = self.pages.add_on_gpu(act, size, evict=not self.system).evicted
            start, end = self.pages.ranges[act]
            held = self.pages.held[act]
            fresh = held - (pool - self.pages.pool)  # pages the caching pool did not hold
            self.placed = (fresh * self.page_bytes, (end - start - held) * self.page_bytes)
            reads, writes = [f"w{layer}"], [act]
        else:
            reads, writes = [f"w{layer}", act], [f"g{layer}"]
        if not self.system:
            return self._migrate(lw, f"migrate.{phase}.mb{mb}.l{layer}", [*reads, *writes],
                                 evicted)
        waits = self._waits([*reads, *writes])
        self.pending, _ = self._in_place(lw, f"in_place.{phase}.mb{mb}.l{layer}", reads, writes,
                                         waits)
        return waits

    def after_pass(self, lw: StageLowering, phase: str, mb: int, chunk: Chunk, index: int,
                   buckets: list[int], op: int) -> None:
        lw.compute_history.append(op)
        if self.system:
            self._slow(lw, op)
        if phase == "F":
            hbm, host = self.placed
            lw.b.alloc(op, "managed.hbm", "weights", hbm)
            lw.b.alloc(op, "managed.host", "weights", host, self.host_tier)
        else:
            layer = self.layer_offset[chunk.index] + len(buckets) - 1 - index
            act = f"a{mb}.{chunk.index}.{layer}"
            start, end = self.pages.ranges[act]
            host = end - start - self.pages.held[act]
            freed = self.pages.release(act, keep=self.system)
            if not self.system:  # the caching allocator keeps system memory's HBM pages
                lw.b.alloc(op, "managed.hbm", "weights", -freed * self.page_bytes)
            lw.b.alloc(op, "managed.host", "weights", -host * self.page_bytes, self.host_tier)

    def before_optimizer(self, lw: StageLowering) -> list[int]:
        if not self.started:
            self._start(lw)
        layers = sum(c.layers for c in lw.chunks)
        if not self.system:
            deps: list[int] = []
            for layer in range(layers):
                deps += self._migrate(lw, f"migrate.optimizer.l{layer}",
                                      [f"{kind}{layer}" for kind in "wgo"])
            return deps[-1:]
        reads, writes = self._optimizer_buffers(layers)
        waits = self._waits(list(dict.fromkeys([*reads, *writes])))
        waits += list(self.arriving.values())
        self.arriving.clear()
        _, access = self._in_place(lw, "in_place.optimizer", reads, writes, waits)
        self.optimizer_host_bytes = (access.host_read + access.host_written) * self.page_bytes
        return waits

    def optimizer(self, lw: StageLowering, params: float, deps: tuple[int, ...]) -> None:
        """System memory: the optimizer kernel (just emitted) streams the states in HBM at the
        lower rate, and those in host memory not at all (their in-place traffic runs beside
        it)."""
        op = lw.b.tails.get("compute")
        if not self.system or op is None or lw.b.ops[op].attrs.get("phase") != "optimizer":
            return
        step = lw.b.ops[op]
        step.body = tuple(
            replace(k, bytes=max(0.0, k.bytes - self.optimizer_host_bytes) * self.slowdown)
            if isinstance(k, Kernel) else k for k in step.body)
