"""The result of simulating one step, as plain data (DESIGN.md section 8)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ghsim.errors import InputError
from ghsim.outputs import NONFINITE, nonfinite_path

if TYPE_CHECKING:
    from ghsim.engine.simulator import Timeline


@dataclass
class Result:
    """One simulated optimizer step."""

    step_time_s: float
    tokens_per_s: float | None
    """None (null in JSON, "n/a" in tables) when the workload carries no tokens: a
    microbenchmark, a replayed trace."""
    tokens_per_s_per_gpu: float | None
    model_tflops_per_gpu: float | None
    """None when the workload carries no model FLOPs (a microbenchmark, a replayed trace)."""
    mfu: float | None
    """Model FLOPs per second per GPU over the dense peak of the training precision's GEMMs;
    None when the workload carries no model FLOPs."""
    breakdown_s: dict[str, float]
    compute_breakdown_s: dict[str, float]
    bottleneck: dict[str, Any]
    memory: dict[str, Any]
    host: dict[str, Any]
    """Host-link bytes and utilization each way, and host-CPU utilization."""
    links: list[dict[str, Any]]
    warnings: list[str]
    inputs: dict[str, Any]
    workload: dict[str, Any]
    gpu_clock: dict[str, Any] = field(default_factory=dict)
    """The clock a typical GPU computed at, the part's own, the power limit that set it, and
    the clock the step moved at, its slowest GPU's (``ghsim.costmodel.gpu.clock_view``)."""
    stages: list[dict[str, Any]] = field(default_factory=list)
    """Each rank class's compute-stream busy seconds and share of the step, by pipeline stage
    (``ghsim.engine.attribution.stage_load``): the busiest paces the pipeline."""
    timeline: Timeline | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The Result JSON object; raises :class:`InputError` when a number in it is not finite
        (strict JSON has no NaN or Infinity)."""
        data = self._data()
        self.check_finite(data)
        return data

    def check_finite(self, data: dict[str, Any] | None = None) -> None:
        """Raise :class:`InputError` at the scenario when a number of the result is nan or
        inf (it came from an input beyond the range ghsim can simulate)."""
        where = nonfinite_path(self._data() if data is None else data)
        if where is not None:
            source = str(self.inputs.get("source", "result"))
            overrides = ", ".join(f"--set {o}" for o in self.inputs.get("overrides", []))
            given = f" (given {overrides})" if overrides else ""
            raise InputError(source, f"result.{where}", f"the simulation produced a number "
                             f"that is not finite; {NONFINITE}{given}")

    def _data(self) -> dict[str, Any]:
        return {
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "model_tflops_per_gpu": self.model_tflops_per_gpu,
            "mfu": self.mfu,
            "breakdown_s": self.breakdown_s,
            "compute_breakdown_s": self.compute_breakdown_s,
            "bottleneck": self.bottleneck,
            "memory": self.memory,
            "host": self.host,
            "links": self.links,
            "warnings": self.warnings,
            "gpu_clock": self.gpu_clock,
            "stages": self.stages,
            "workload": self.workload,
            "inputs": self.inputs,
        }


def memory_tracked(memory: dict[str, Any]) -> bool:
    """Whether the step's memory was replayed (a replayed trace or a microbenchmark records no
    allocations: its memory is "not tracked", never "0 B, fits")."""
    return memory.get("tracked", True) is not False and any(
        isinstance(data, dict) for data in memory.values())


def tiers_short(memory: dict[str, Any]) -> list[str]:
    """The memory tiers whose peak exceeds their capacity, in the result's order (empty when
    the step fits or memory is not tracked)."""
    if "does_not_fit" in memory:
        return list(memory["does_not_fit"])
    return [tier for tier, data in memory.items()
            if isinstance(data, dict) and data["peak_bytes"] > data["capacity_bytes"]]


def does_not_fit_line(memory: dict[str, Any]) -> str | None:
    """One line naming each memory tier that does not fit (peak against capacity per GPU), or
    None when the step fits or its memory is not tracked."""
    short = tiers_short(memory)
    if not short:
        return None
    return "the step does not fit in memory: " + "; ".join(
        f"{tier.upper()} peak {memory[tier]['peak_bytes'] / 2**30:.1f} GiB exceeds "
        f"{memory[tier]['capacity_bytes'] / 2**30:.1f} GiB per GPU" for tier in short)
