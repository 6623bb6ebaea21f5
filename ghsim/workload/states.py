"""Model-state memory per GPU: weights, gradients and optimizer states by precision, optimizer,
gradient dtype and ZeRO.

Bytes per parameter follow ZeRO (Rajbhandari et al. 2020, arXiv:1910.02054, section 3.1): with
mixed precision (bf16, fp16, and fp8 whose weights are kept in bf16) each parameter holds 2 B of
weights and an optimizer state of FP32 master weights (4 B) plus the optimizer's FP32 moments; in
fp32 the weights (4 B) are the master copy. The moments are Adam's (and AdamW's) momentum and
variance (8 B), AdEMAMix's fast and slow EMAs and second moment (12 B; Pagliardini et al. 2024,
arXiv:2409.03137, Algorithm 1), SGD's momentum (4 B). So Adam keeps 12 B a parameter under mixed
precision, AdEMAMix 16, SGD 8; 2 B fewer where the optimizer keeps only the master's low 16 bits
(``training.master_weights: remainders``, apex and Megatron-Core). Gradients take the bytes of
``training.main_grads`` (FP32 by default with bf16 and fp8, as Megatron-LM accumulates and reduces
them; see :class:`~ghsim.config.schema.TrainingSpec`). ZeRO stage 1 shards the optimizer states
over data-parallel ranks, stage 2 also the gradients, stage 3 also the weights. Activations are not
included here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ghsim.config.schema import ScenarioSpec, TrainingSpec
from ghsim.workload.modelsize import parameter_count

WEIGHT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2}
"""Bytes of the weights the forward and backward passes use (FP8 recipes keep BF16 weights)."""
MASTER_BYTES = {"fp32": 0, "bf16": 4, "fp16": 4, "fp8": 4}
"""FP32 master weights the optimizer keeps beside half-precision weights (none in fp32)."""
REMAINDER_BYTES = 2
"""The low 16 bits of an FP32 master weight, all an optimizer keeps with
``training.master_weights: remainders`` (the BF16 weight holds the high 16)."""
MOMENT_BYTES = {"adam": 8, "adamw": 8, "ademamix": 12, "sgd": 4}
"""FP32 optimizer moments a parameter: Adam's m and v; AdEMAMix's m1, m2 and nu; SGD's momentum."""
GRAD_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
"""Bytes of a gradient by ``training.main_grads``."""


def master_bytes(training: TrainingSpec) -> int:
    """Bytes of the master weight the optimizer keeps a parameter (0 in fp32, where the
    weights are the master copy)."""
    if training.master_weights == "remainders":
        return REMAINDER_BYTES
    return MASTER_BYTES[training.precision]


def bytes_per_param(training: TrainingSpec) -> tuple[int, int, int]:
    """Bytes a parameter holds in weights, gradients and optimizer states (before ZeRO)."""
    return (WEIGHT_BYTES[training.precision], GRAD_BYTES[training.main_grads_resolved],
            master_bytes(training) + MOMENT_BYTES[training.optimizer])


def optimizer_step_bytes(training: TrainingSpec) -> int:
    """Memory traffic of one parameter's optimizer step: read the gradient, read the FP32 master
    weight (in fp32: the weight itself) and moments, write them back, and write the
    half-precision weight the next step uses (none in fp32). Adam with BF16 gradients:
    2 + 12 + 12 + 2 = 28 B; with FP32 gradients 30; AdEMAMix with FP32 gradients
    4 + 16 + 16 + 2 = 38; fp32 Adam 4 + 12 + 12 = 28. With master-weight remainders the BF16
    weight is read too (it holds the master's high bits): Adam with BF16 gradients
    2 + 2 + 10 + 10 + 2 = 26."""
    return sum(_step_traffic(training))


def optimizer_step_read_bytes(training: TrainingSpec) -> int:
    """The reads of :func:`optimizer_step_bytes`: the gradient, the master weight and moments
    (the weight itself in fp32), and with master-weight remainders the 16-bit weight. Adam
    with FP32 gradients: 4 + 12 = 16 of its 30 B; the rest are writes."""
    return _step_traffic(training)[0]


def _step_traffic(training: TrainingSpec) -> tuple[int, int]:
    """One parameter's optimizer step: (bytes read, bytes written)."""
    w, g, o = bytes_per_param(training)
    master = master_bytes(training)
    updated = o if master else w + o  # in fp32 the weight is the master copy
    reads_weight = w if training.master_weights == "remainders" else 0
    return g + reads_weight + updated, updated + (w if master else 0)


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
    w, g, o = bytes_per_param(spec.training)
    stage = spec.parallelism.zero_stage
    shard = float(dp)
    return StateBytes(
        params=params,
        weights=params * w / (shard if stage >= 3 else 1.0),
        gradients=params * g / (shard if stage >= 2 else 1.0),
        optimizer=params * o / (shard if stage >= 1 else 1.0),
    )
