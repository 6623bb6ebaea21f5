"""The result of simulating one step, as plain data (DESIGN.md section 8)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ghsim.engine.simulator import Timeline


@dataclass
class Result:
    """One simulated optimizer step."""

    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    model_tflops_per_gpu: float
    mfu: float
    """Model FLOPs per second per GPU over the dense peak of the training precision's GEMMs."""
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
    timeline: Timeline | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The Result JSON object."""
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
            "workload": self.workload,
            "inputs": self.inputs,
        }
