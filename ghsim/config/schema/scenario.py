"""``kind: scenario``: a system, a model, a training setup, a parallel layout, an offload plan."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ghsim.config.schema.base import (
    DocumentSpec,
    Name,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Spec,
)
from ghsim.config.schema.model import ModelSpec
from ghsim.config.schema.refs import Ref
from ghsim.config.schema.system import SystemSpec

Precision = Literal["fp32", "bf16", "fp16", "fp8"]


class TrainingSpec(Spec):
    """What one optimizer step processes and in which precision."""

    seq_len: PositiveInt
    micro_batch: PositiveInt = Field(description="Sequences per micro-batch per replica.")
    global_batch: PositiveInt = Field(description="Sequences per optimizer step.")
    precision: Precision
    attention: Literal["flash", "standard"] = Field(
        default="flash",
        description="flash: fused, stores no s x s scores; standard: stores them.",
    )


class ParallelismSpec(Spec):
    """The parallel layout: tp x pp x cp x dp GPUs."""

    tp: PositiveInt = 1
    pp: PositiveInt = 1
    dp: PositiveInt | None = Field(default=None, description="Default: num_gpus / (tp*pp*cp).")
    cp: PositiveInt = 1
    vp: PositiveInt | None = Field(default=None, description="Interleaved virtual stages.")
    sequence_parallel: bool = False
    zero_stage: Literal[0, 1, 2, 3] = 0
    recompute: Literal["none", "selective", "full"] = "none"
    overlap_grad_reduce: bool = Field(
        default=True, description="Reduce gradient buckets during the backward pass."
    )
    overlap_param_gather: bool = Field(
        default=True, description="ZeRO >= 1: gather updated weights during the next forward."
    )
    tp_comm_overlap: bool = Field(
        default=False, description="Overlap each sequence-parallel all-gather and "
        "reduce-scatter with the GEMM beside it, pipelined in tp chunks (Megatron-LM "
        "--tp-comm-overlap with Transformer Engine userbuffers; off by default in Megatron-LM, "
        "on in NeMo's large-model recipes). Needs sequence_parallel; all-reduces never overlap.",
    )


class OffloadSpec(Spec):
    """Which offload strategy (DESIGN.md section 6) the step uses, and its knobs."""

    strategy: Name = Field(
        default="none", description="A registered offload policy (ghsim.workload.offload): "
        "none, optimizer, optimizer_overlap, params, activations, unified_memory. A new policy "
        "registers itself with @register(name) and needs no change to this schema; the name is "
        "checked when the step is lowered (and before a sweep runs).",
    )
    fraction: float = Field(
        default=1.0, gt=0.0, le=1.0,
        description="Share of what the strategy moves (optimizer states, weights, activations) "
        "that lives in host memory.",
    )
    prefetch_layers: PositiveInt = Field(
        default=1, description="params / activations: layers fetched ahead of use."
    )
    cpu_cores: PositiveInt | None = Field(
        default=None, description="Host cores the CPU optimizer step uses (default: this GPU's "
        "share of the node's cores).",
    )


class MicrobenchmarkSpec(Spec):
    """Replace the training step by one data movement, to set beside a measured microbenchmark."""

    operation: Literal[
        "h2d_copy", "d2h_copy", "gpu_read_host", "gpu_write_host", "cpu_read_device",
        "cpu_write_device", "stream_hbm", "stream_host",
    ] = Field(description="copy-engine copies, in-place access over the host link by either "
              "side, or STREAM on a memory from its own processor")
    gib: PositiveFloat = Field(description="Bytes moved, in GiB.")


class ScenarioSpec(DocumentSpec):
    """``kind: scenario``: everything one simulated training step needs."""

    KIND = "scenario"

    name: str = ""
    system: Annotated[SystemSpec, Ref("system")]
    num_gpus: PositiveInt
    model: Annotated[ModelSpec, Ref("model")]
    training: TrainingSpec
    parallelism: ParallelismSpec = Field(default_factory=ParallelismSpec)
    offload: OffloadSpec = Field(default_factory=OffloadSpec)
    workload: str | None = Field(
        default=None, description="A workload file written by `ghsim import` to replay instead "
        "of lowering the model (path relative to this file).",
    )
    replay: Literal["measured", "recost"] = Field(
        default="measured", description="workload only: replay the recorded durations, or "
        "re-cost each kernel and collective on this scenario's hardware.",
    )
    microbenchmark: MicrobenchmarkSpec | None = Field(
        default=None, description="Simulate this one operation instead of a training step.",
    )
    seed: NonNegativeInt = 0
