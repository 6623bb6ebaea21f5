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
* ``unified_memory``: everything managed; see ``ghsim.workload.unified``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from typing import ClassVar

from ghsim.config import Scenario
from ghsim.config.api import blame
from ghsim.config.layout import LayoutProblem
from ghsim.errors import ConfigError
from ghsim.workload.pages import PageTable
from ghsim.workload.stage import Chunk, StageLowering

ADAM_CPU_FLOPS_PER_PARAM = 14.0
"""FP32 operations of one Adam update (two moment updates, bias corrections, square root,
division, weight update); the host step is memory-bound well before this matters."""
ADAM_CPU_BYTES_PER_PARAM = 28.0
"""Host memory traffic of one Adam update: read the BF16 gradient (2), read and write the FP32
master weight, momentum and variance (24), write the BF16 weight (2)."""

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
                        * ADAM_CPU_BYTES_PER_PARAM, flops=params * ADAM_CPU_FLOPS_PER_PARAM,
                        cores=self.spec.cpu_cores)
        return self.copy(lw, f"{name}.weights_h2d", "h2d", weight_bytes, (step,)) if upload \
            else step


@register("optimizer")
class OptimizerOffload(OffloadPolicy):
    """ZeRO-Offload: optimizer states and the Adam step on the host."""

    def host_fraction(self, category: str) -> float:
        return self.spec.fraction if category == "optimizer" else 0.0

    def optimizer(self, lw: StageLowering, params: float, deps: tuple[int, ...]) -> None:
        self.host_adam(lw, "offload", params * self.spec.fraction, deps)


@register("optimizer_overlap")
class OverlappedOptimizerOffload(OptimizerOffload):
    """The host Adam step bucket by bucket, overlapped with the rest of the backward pass."""

    def after_reduce(self, lw: StageLowering, chunk: Chunk, layers: int, index: int,
                     buckets: int, reduced: int) -> None:
        params = lw.bucket_params(chunk, layers, index, buckets)
        shard = params / (lw.layout.dp if lw.zero >= 1 else 1)
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
                 nbytes=params * ADAM_CPU_BYTES_PER_PARAM,
                 flops=params * ADAM_CPU_FLOPS_PER_PARAM, cores=self.spec.cpu_cores)


@register("unified_memory")
class UnifiedMemory(_Streaming):
    """Everything managed: the driver faults pages into HBM as kernels touch them and evicts the
    least recently used when HBM is full. Weights and optimizer states are first touched by the
    CPU (loaded from a checkpoint), so they start in host memory (FACTS.md T1#36); gradients and
    activations are first touched by the GPU. The step is replayed from the placement the
    previous step's optimizer left: its last-touched states in HBM.
    """

    managed = True

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        gpu = scenario.spec.system.node.gpu.gpu
        assert gpu is not None
        um = gpu.unified_memory
        if um is None:
            raise ConfigError(scenario.spec.system.node.gpu.name, "gpu.unified_memory",
                              "is needed for offload.strategy unified_memory (with sources)")
        self.page_bytes = um.gpu_page_mib * 2**20
        self.batch = um.fault_batch_pages
        where = blame(LayoutProblem(("system", "node", "gpu", "gpu", "unified_memory",
                                     "gpu_page_mib"), ""),
                      scenario.source, scenario.overrides)
        self.pages = PageTable(self.page_bytes, int(gpu.memory.capacity_bytes // self.page_bytes),
                               source=where.source, key=where.key_path)
        self.started = False

    def _start(self, lw: StageLowering) -> None:
        """Register the states, newest-touched (by the last optimizer step) in HBM."""
        self.started = True
        w, g, o = lw.state_bytes
        layers = sum(c.layers for c in lw.chunks)
        shard = lw.layout.dp if lw.zero >= 1 else 1
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
        resident = self.pages.resident_pages * self.page_bytes
        total = len(self.pages.resident) * self.page_bytes
        lw.b.alloc(-1, "managed.hbm", "weights", resident)
        lw.b.alloc(-1, "managed.host", "weights", total - resident, self.host_tier)
        self.layer_offset = {c.index: sum(x.layers for x in lw.chunks[: i])
                             for i, c in enumerate(lw.chunks)}

    def _migrate(self, lw: StageLowering, name: str, names: list[str]) -> list[int]:
        touch = self.pages.touch(names)
        if not touch.faulted and not touch.evicted:
            return []
        moved_in, moved_out = touch.faulted * self.page_bytes, touch.evicted * self.page_bytes
        op = lw.b.add("migrate", name, "migrate", tuple(lw.compute_history[-1:]),
                      nbytes=moved_in + moved_out, in_bytes=moved_in, out_bytes=moved_out,
                      faults=math.ceil(touch.faulted / self.batch))
        lw.b.alloc(op, "managed.hbm", "weights", moved_in - moved_out)
        lw.b.alloc(op, "managed.host", "weights", moved_out - moved_in, self.host_tier)
        return [op]

    def before_pass(self, lw: StageLowering, phase: str, mb: int, chunk: Chunk, index: int,
                    buckets: list[int]) -> list[int]:
        if not self.started:
            self._start(lw)
        layer = self.layer_offset[chunk.index] + (
            index if phase == "F" else len(buckets) - 1 - index)
        act = f"a{mb}.{chunk.index}.{layer}"
        if phase == "F":
            size = buckets[index] * lw.layer_activations
            self.pages.add(act, size)
            names = [f"w{layer}", act]
        else:
            names = [f"w{layer}", f"g{layer}", act]
        return self._migrate(lw, f"migrate.{phase}.mb{mb}.l{layer}", names)

    def after_pass(self, lw: StageLowering, phase: str, mb: int, chunk: Chunk, index: int,
                   buckets: list[int], op: int) -> None:
        lw.compute_history.append(op)
        if phase == "B":
            layer = self.layer_offset[chunk.index] + len(buckets) - 1 - index
            freed = self.pages.release(f"a{mb}.{chunk.index}.{layer}")
            lw.b.alloc(op, "managed.hbm", "weights", -freed * self.page_bytes)

    def before_optimizer(self, lw: StageLowering) -> list[int]:
        if not self.started:
            self._start(lw)
        deps: list[int] = []
        layers = sum(c.layers for c in lw.chunks)
        for layer in range(layers):
            deps += self._migrate(lw, f"migrate.optimizer.l{layer}",
                                  [f"{kind}{layer}" for kind in "wgo"])
        return deps[-1:]
