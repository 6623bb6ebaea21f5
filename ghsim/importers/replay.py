"""Replaying an imported workload: as measured, or re-costed on the scenario's hardware.

Each rank becomes a rank class; each GPU event an op on its stream (the busiest stream is the
``compute`` stream), after the previous op on that stream and not before the CPU launched it.

* ``measured``: every op takes its recorded duration, so the replay reproduces the iteration
  if the dependencies are right.
* ``recost``: GEMMs whose shapes the trace records are costed by the target GPU's model;
  collectives by the target's collective model (the group is the imported ranks); everything
  else takes its measured time scaled by the ratio of the two GPUs' memory bandwidths (for
  memory-bound kernels), of their non-vectorized element-wise rates (for PyTorch's
  ``elementwise_kernel``, which the SMs bound), or of their peak FLOP/s (for GEMMs without
  shapes), and the share of time that fell back this way is reported.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ghsim.config import Scenario
from ghsim.config.api import load_hardware
from ghsim.config.schema.hardware import GpuSpec
from ghsim.errors import ConfigError
from ghsim.importers.workload_file import events_of
from ghsim.workload.ir import Group, Kernel, Op, RankClass, Workload
from ghsim.workload.placement import place_groups
from ghsim.workload.shapes import GEMM_DTYPE

_DEVICES = (("GH200", "gh200-96gb"), ("H200", "h200-sxm-141gb"), ("H100", "h100-sxm5-80gb"),
            ("A100", "a100-sxm4-80gb"))
_CATEGORY = {"gemm": "gemm", "attention": "attention", "softmax": "attention",
             "collective": "tp"}


@dataclass(frozen=True)
class SourceGpu:
    """Peaks of the GPU a trace was taken on (for scaling what cannot be re-costed)."""

    flops: float
    bandwidth: float
    strided: float
    """Bytes a second of PyTorch's non-vectorized element-wise kernels (HBM's where the part
    gives no rate)."""

    def scale(self, source: SourceGpu, klass: str) -> float:
        """How much faster this GPU runs a kernel of ``klass`` that ``source`` ran."""
        if klass == "gemm":
            return self.flops / source.flops
        if klass == "strided":
            return self.strided / source.strided
        return self.bandwidth / source.bandwidth


def gpu_peaks(gpu: GpuSpec, precision: str) -> SourceGpu:
    """A GPU's peaks for ``precision``'s GEMMs, HBM and non-vectorized kernels."""
    dtype = GEMM_DTYPE[precision]
    peaks = gpu.compute.peak_flops_per_s()
    bandwidth = gpu.memory.peak_bandwidth_bytes_per_s
    return SourceGpu(peaks.get(dtype, peaks.get("bf16", 1e12)), bandwidth,
                     gpu.strided_bytes_per_s() or bandwidth)


def source_gpu(device: str, precision: str) -> SourceGpu | None:
    for token, part in _DEVICES:
        if token in device:
            gpu = load_hardware(part).gpu
            assert gpu is not None
            return gpu_peaks(gpu, precision)
    return None


def _busiest(events: list[Any]) -> int:
    return int(Counter(e.stream for e in events).most_common(1)[0][0])


def _op(index: int, event: Any, stream: str, deps: tuple[int, ...], t0: float, mode: str,
        ctx: dict[str, Any]) -> Op:
    category = _CATEGORY.get(event.klass, "elementwise")
    attrs: dict[str, Any] = {"category": category, "klass": event.klass,
                             "not_before_s": max(0.0, (event.launch_us - t0) * 1e-6)
                             if event.launch_us is not None else 0.0}
    measured = event.dur_us * 1e-6
    if mode == "measured":
        attrs.update(measured_s=measured, flops=event.flops, collective=event.collective)
        return Op(index, "compute", event.name[:80], stream, deps, bytes=event.bytes,
                  attrs=attrs)
    if event.klass == "collective" and event.bytes:
        attrs.update(collective=event.collective or "all_reduce", group="tp",
                     group_size=ctx["group"].size, replay_group=ctx["group"])
        return Op(index, "collective", event.name[:80], stream, deps, bytes=event.bytes,
                  attrs=attrs)
    if event.klass == "gemm" and event.flops and event.shape:
        m, n, k = event.shape
        data = (m * k + k * n + m * n) * 2.0
        kernel = Kernel(event.name[:80], event.flops, data, ctx["dtype"], (m, n, k), "gemm")
        return Op(index, "compute", event.name[:80], stream, deps, body=(kernel,), attrs=attrs)
    source: SourceGpu | None = ctx["source"]
    scale = ctx["target"].scale(source, event.klass) if source is not None else 1.0
    attrs["fallback_s"] = measured / scale
    ctx["fallback"] += measured
    return Op(index, "compute", event.name[:80], stream, deps, attrs=attrs)


def replay_workload(scenario: Scenario, document: dict[str, Any], mode: str) -> Workload:
    """The workload of an imported trace, replayed as ``measured`` or ``recost``."""
    spec = scenario.spec
    gpu = spec.system.node.gpu.gpu
    assert gpu is not None
    ranks = document["ranks"]
    size = len(ranks)
    per_node = scenario.layout.gpus_per_node
    group = Group("tp", size, math.ceil(size / per_node),
                  math.ceil(size / scenario.layout.gpus_per_domain), 1)
    dtype = GEMM_DTYPE[spec.training.precision]
    target = gpu_peaks(gpu, spec.training.precision)
    classes, fallback, total = [], 0.0, 0.0
    for index, rank in enumerate(ranks):
        events = events_of(rank)
        if not events:
            raise ConfigError(scenario.source, f"workload.ranks[{index}]", "has no GPU events")
        main = _busiest(events)
        source = source_gpu(rank.get("device") or "", spec.training.precision)
        ctx: dict[str, Any] = {"group": group, "dtype": dtype, "target": target,
                               "source": source, "fallback": 0.0}
        ops: list[Op] = []
        tails: dict[str, int] = {}
        collectives = 0
        for event in events:
            stream = "compute" if event.stream == main else f"stream{event.stream}"
            deps = ((tails[stream],) if stream in tails else ()) + tuple(
                a for a in event.after if a < len(ops))
            ops.append(_op(len(ops), event, stream, tuple(sorted(set(deps))), rank["start_us"],
                           mode, ctx))
            if mode == "recost" and event.klass == "collective":
                ops[-1].attrs["rendezvous"] = ("collective", collectives, size)
                collectives += 1
            tails[stream] = ops[-1].id
        fallback += ctx["fallback"]
        total += sum(e.dur_us * 1e-6 for e in events)
        groups = place_groups(scenario.layout, 0)
        groups["tp"] = group
        classes.append(RankClass(f"rank{rank['rank']}", index, 1, ops, [], groups, index))
    return Workload(classes, size, 0.0, 0, attrs={
        "replay": mode, "fallback_share": fallback / total if total else 0.0,
        "measured_s": [r["measured_s"] for r in ranks]})
