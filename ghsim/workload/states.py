"""Model-state memory per GPU: weights, gradients and optimizer states by precision and ZeRO.

Bytes per parameter follow ZeRO (Rajbhandari et al. 2020, arXiv:1910.02054, section 3.1): with
mixed precision (bf16, fp16, and fp8 whose master copies are bf16) each parameter holds 2 B of
weights, 2 B of gradients and 12 B of Adam state (fp32 master weights, momentum and variance);
in fp32, 4 + 4 + 8. ZeRO stage 1 shards the optimizer states over data-parallel ranks, stage 2
also the gradients, stage 3 also the weights. Activations are not included here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ghsim.config.schema import ScenarioSpec
from ghsim.workload.modelsize import parameter_count

BYTES_PER_PARAM = {  # weights, gradients, optimizer states
    "fp32": (4, 4, 8),
    "bf16": (2, 2, 12),
    "fp16": (2, 2, 12),
    "fp8": (2, 2, 12),
}


@dataclass(frozen=True)
class StateBytes:
    """Model-state bytes held by one GPU of the heaviest pipeline stage."""

    params: float
    """Parameters this GPU holds a slice of (before ZeRO-3 sharding)."""
    weights: float
    gradients: float
    optimizer: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer


def params_per_gpu(spec: ScenarioSpec) -> float:
    """Parameters held by one GPU of the first pipeline stage (the embedding's stage), before
    any ZeRO sharding over data-parallel ranks."""
    count = parameter_count(spec.model)
    par = spec.parallelism
    stage = count.layers // par.pp * count.per_layer + count.embedding
    if par.pp == 1:
        stage += count.output + count.final_norm
    return stage / par.tp


def model_state_bytes(spec: ScenarioSpec, dp: int) -> StateBytes:
    """Weights, gradients and optimizer bytes on one GPU of the first pipeline stage."""
    params = params_per_gpu(spec)
    w, g, o = BYTES_PER_PARAM[spec.training.precision]
    stage = spec.parallelism.zero_stage
    shard = float(dp)
    return StateBytes(
        params=params,
        weights=params * w / (shard if stage >= 3 else 1.0),
        gradients=params * g / (shard if stage >= 2 else 1.0),
        optimizer=params * o / (shard if stage >= 1 else 1.0),
    )
