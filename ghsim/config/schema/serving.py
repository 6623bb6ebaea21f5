"""``kind: scenario`` with an ``inference:`` block: a model served on a system.

A serving scenario names the same system and model as a training scenario, and instead of one
optimizer step describes a request stream (lengths, how requests arrive), the serving engine's
scheduler (in-flight batching with a batch and token budget, chunked prefill, or static
batching), the precision of weights, activations and KV cache, where KV cache may spill, and the
latency targets. Defaults are TensorRT-LLM's, each cited where it is set.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ghsim.config.schema.base import (
    DocumentSpec,
    Fraction,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Spec,
)
from ghsim.config.schema.model import ModelSpec
from ghsim.config.schema.refs import Ref
from ghsim.config.schema.system import SystemSpec

ServingPrecision = Literal["fp8", "bf16", "fp16"]


class LengthSpec(Spec):
    """A distribution of token counts, drawn per request with the scenario's seed."""

    distribution: Literal["fixed", "uniform", "normal", "lognormal"] = Field(
        default="fixed", description="fixed: every request has `mean` tokens; uniform: from "
        "`min` to `max`; normal / lognormal: that mean and `std`, clipped to [min, max] (the "
        "mean is then the clipped distribution's only approximately).",
    )
    mean: PositiveFloat = Field(description="Mean tokens.")
    std: NonNegativeFloat = Field(default=0.0, description="Standard deviation (normal, "
                                  "lognormal).")
    min: PositiveInt = Field(default=1, description="Lower clip (uniform: lowest value).")
    max: PositiveInt | None = Field(default=None, description="Default: no upper clip.")

    @model_validator(mode="after")
    def _consistent(self) -> LengthSpec:
        if self.max is not None and self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        if self.distribution in ("normal", "lognormal") and self.std <= 0:
            raise ValueError(f"distribution {self.distribution!r} needs std > 0")
        if self.distribution == "uniform" and self.max is None:
            raise ValueError("distribution 'uniform' needs max")
        if self.distribution == "fixed" and self.std:
            raise ValueError("std is only used by the normal and lognormal distributions")
        return self


Length = PositiveInt | LengthSpec


class RequestsSpec(Spec):
    """The request stream: how many, how long, how they arrive."""

    count: PositiveInt = Field(
        description="Requests simulated over all replicas (spread evenly). offline: the whole "
        "job (MLPerf's offline query count, a trtllm-bench dataset's size); poisson: arrivals "
        "simulated at the rate; concurrency: requests the clients issue in all.",
    )
    input_tokens: Length = Field(description="Prompt tokens: a number, or a distribution.")
    output_tokens: Length = Field(description="Generated tokens (at least 1: the first is "
                                  "produced by the prefill).")
    max_output_tokens: PositiveInt | None = Field(
        default=None, description="The output limit each request carries (max_new_tokens / "
        "max_tokens): the KV cache is reserved for the prompt and this many tokens at "
        "admission (GUARANTEED_NO_EVICT cannot know where a request will stop), so a limit "
        "far above the real lengths admits fewer requests. Default: each request's own output "
        "length (a benchmark of fixed lengths sets the limit to it). Outputs are clipped to "
        "it.")
    arrival: Literal["offline", "poisson", "concurrency"] = Field(
        default="offline", description="offline: every request queued at time 0 (MLPerf "
        "offline, trtllm-bench at max load); poisson: arrivals at `rate_per_s` (MLPerf "
        "server); concurrency: `concurrency` clients, each sending its next request when the "
        "last one finished (genai-perf, NIM benchmarking).",
    )
    rate_per_s: PositiveFloat | None = Field(
        default=None, description="poisson: requests per second over all replicas.")
    concurrency: PositiveInt | None = Field(
        default=None, description="concurrency: clients over all replicas.")
    min_duration_s: PositiveFloat | None = Field(
        default=None, description="poisson: simulate at least this long, rate x min_duration_s "
        "requests when that exceeds count (MLPerf's server runs last at least 600 s: an "
        "arrival rate above capacity shows as a queue that grows with time, which a short run "
        "cannot reveal).")
    warmup: NonNegativeInt = Field(
        default=0, description="The first requests (over all replicas) left out of the "
        "latency and throughput statistics, as genai-perf's --warmup-request-count does: the "
        "burst of a benchmark's start (every client sending at once) is not its steady state.")

    @model_validator(mode="after")
    def _consistent(self) -> RequestsSpec:
        if self.arrival == "poisson" and self.rate_per_s is None:
            raise ValueError("arrival 'poisson' needs rate_per_s")
        if self.arrival != "poisson" and self.rate_per_s is not None:
            raise ValueError("rate_per_s is only used with arrival 'poisson'")
        if self.arrival != "poisson" and self.min_duration_s is not None:
            raise ValueError("min_duration_s is only used with arrival 'poisson'")
        if self.arrival == "concurrency" and self.concurrency is None:
            raise ValueError("arrival 'concurrency' needs concurrency")
        if self.arrival != "concurrency" and self.concurrency is not None:
            raise ValueError("concurrency is only used with arrival 'concurrency'")
        if self.warmup >= self.count:
            raise ValueError(f"warmup ({self.warmup}) leaves no request of the {self.count} "
                             f"to measure")
        return self


class SchedulerSpec(Spec):
    """The serving engine's batching, as TensorRT-LLM's executor configures it."""

    policy: Literal["inflight", "static"] = Field(
        default="inflight", description="inflight: requests join and leave the running batch "
        "every iteration (TensorRT-LLM in-flight batching, vLLM continuous batching); static: "
        "a batch is formed, prefilled, and decoded until its last request ends.",
    )
    capacity: Literal["guaranteed_no_evict", "max_utilization"] = Field(
        default="guaranteed_no_evict", description="How KV blocks are handed out "
        "(TensorRT-LLM CapacitySchedulerPolicy, cpp/tensorrt_llm/batch_manager/"
        "capacityScheduler.cpp). guaranteed_no_evict (the executor's default): a request "
        "joins only when blocks for its whole prompt and output limit are free, and is never "
        "paused. max_utilization (MaxUtilizationScheduler; the default of NVIDIA's MLPerf "
        "Inference harness, harness_llm/main_llm.cc trtllm_batch_sched_policy max_util): a "
        "request joins when blocks for its prompt and first token are free and takes a block "
        "each time its context outgrows its blocks; when none is free the latest arrival "
        "still decoding is paused, its blocks freed, and it later prefills its prompt and the "
        "tokens it had produced again (LlmRequest::pause). Modelled for in-flight batching of one "
        "beam, without KV offload or attention windows.")
    max_batch_size: PositiveInt | None = Field(
        default=None, description="Requests in the running batch at most. Default: "
        "TensorRT-LLM's builder default 2048, or with tuning trtllm_bench the value that "
        "heuristic picks.")
    max_num_tokens: PositiveInt | None = Field(
        default=None, description="Tokens one iteration processes at most, prefill and decode "
        "together. Default: TensorRT-LLM's builder default 8192, or trtllm_bench's pick.")
    tuning: Literal["none", "trtllm_bench"] = Field(
        default="none", description="trtllm_bench: max_batch_size and max_num_tokens (those "
        "not given) as `trtllm-bench build --dataset` picks them from the dataset's mean "
        "lengths (NVIDIA/TensorRT-LLM tensorrt_llm/bench/build/tuning.py, calc_engine_setting: "
        "the requests the KV cache would hold at 0.95 of the memory the weights leave, capped "
        "at 4096, rounded up; tokens = that batch x (1 + input/output), capped at 32768, "
        "rounded up, at least 2048), as TensorRT-LLM's published performance tables build "
        "their engines.")
    chunked_prefill: bool = Field(
        default=False, description="Split prompts into chunks that fit the token budget left "
        "beside the decoding requests (TensorRT-LLM enable_chunked_context, off by default); "
        "without it a prompt is prefilled whole, and one longer than max_num_tokens is an "
        "error, as TensorRT-LLM refuses it.")
    kv_block_tokens: PositiveInt = Field(
        default=64, description="Tokens per paged KV block (TensorRT-LLM tokens_per_block: 64 "
        "in the engine flow of the 0.x releases, 32 in later ones); a request's last block is "
        "partly empty. A request is admitted only when blocks for its whole prompt and output "
        "are free (TensorRT-LLM's default GUARANTEED_NO_EVICT capacity scheduler), so nothing "
        "is ever evicted.")
    kv_memory_fraction: Fraction = Field(
        default=0.9, description="Share of the GPU memory left after weights and runtime "
        "buffers that the KV cache takes (TensorRT-LLM KvCacheConfig "
        "free_gpu_memory_fraction, default 0.9).")


class KvOffloadSpec(Spec):
    """Where KV cache goes when HBM is full."""

    policy: Literal["none", "reload", "in_place"] = Field(
        default="none", description="none: KV lives in HBM only, and the batch is what HBM "
        "holds. reload: blocks beyond HBM live in host memory (LPDDR5X on Grace Hopper, DDR "
        "over PCIe elsewhere) and are copied back by the copy engines for every iteration "
        "that reads them, layer by layer ahead of use. in_place: the GPU's attention reads "
        "them where they are, over NVLink-C2C (or PCIe), without a copy.")
    host_gib: PositiveFloat | None = Field(
        default=None, description="Host memory per GPU the KV cache may use. Default: the "
        "GPU's share of its host's memory, less the model's weights staged there at load "
        "(one copy) and host_reserved_gib.")
    host_reserved_gib: NonNegativeFloat = Field(
        default=16.0, description="Host memory per GPU kept for the OS and the serving "
        "process when host_gib is not given.")


class LatencyTargetsSpec(Spec):
    """Latency limits a server scenario must meet (MLPerf's server rules)."""

    ttft_ms: PositiveFloat | None = Field(default=None, description="Time to first token.")
    tpot_ms: PositiveFloat | None = Field(
        default=None, description="Time per output token after the first, per request.")
    percentile: Annotated[float, Field(gt=0, lt=100)] = Field(
        default=99.0, description="The percentile that must meet each limit (MLPerf: 99).")


class InferenceSpec(Spec):
    """What is served, how requests arrive, and how the engine batches them."""

    precision: ServingPrecision = Field(
        description="Weights and GEMM inputs. fp8: the linear layers' weights and activations "
        "in FP8 with per-tensor scales (TensorRT-LLM / ModelOpt FP8), the embedding and the "
        "output layer (lm_head) in BF16, as ModelOpt leaves them.")
    expert_precision: Literal["mxfp4", "fp8", "bf16", "fp16"] | None = Field(
        default=None, description="MoE models: the routed experts' weights. mxfp4: OCP "
        "microscaling FP4, 4 bits a weight and an 8-bit scale per 32 (4.25 bits), as GPT-OSS "
        "ships its experts; Hopper has no FP4 tensor cores, so they are multiplied in BF16 "
        "after unpacking (weight-only quantization: a quarter of the bytes, BF16's rate). "
        "Default: precision.")
    kv_cache_dtype: ServingPrecision | None = Field(
        default=None, description="KV cache dtype. Default: fp8 with fp8 precision (the "
        "TensorRT-LLM FP8 checkpoints' kv_cache_quant_algo FP8), else the precision.")
    beam_width: PositiveInt = Field(
        default=1, description="Beams decoded per request (MLPerf GPT-J runs beam search with "
        "4); each beam is a sequence in the batch with its own KV, and one beam's tokens are "
        "returned.")
    requests: RequestsSpec = Field(description="The request stream.")
    scheduler: SchedulerSpec = Field(default_factory=SchedulerSpec, description="Batching.")
    kv_offload: KvOffloadSpec = Field(default_factory=KvOffloadSpec,
                                      description="KV cache beyond HBM: none, in_place, reload.")
    latency_targets: LatencyTargetsSpec = Field(
        default_factory=LatencyTargetsSpec, description="Limits a server run must meet; "
        "reported as met or not for every run.")
    find_max_rate: bool = Field(
        default=False, description="poisson only: search for the highest arrival rate whose "
        "latency percentiles meet latency_targets (the MLPerf server rule), starting from "
        "rate_per_s, and report the run at that rate.")
    host_step_us: NonNegativeFloat | None = Field(
        default=None, description="Host (CPU) time the serving engine spends per iteration "
        "outside the GPU: scheduling, sampling bookkeeping, detokenisation and streaming. "
        "Default: the host CPU's serving_step_us. Serialised with the GPU's work unless "
        "overlap_host is true.")
    host_request_us: NonNegativeFloat | None = Field(
        default=None, description="Host time per running request per iteration. Default: the "
        "host CPU's serving_request_us.")
    overlap_host: bool = Field(
        default=False, description="The host prepares iteration i+1 while the GPU runs "
        "iteration i (TensorRT-LLM's overlap scheduler, vLLM's async scheduling); then only "
        "host time beyond the GPU's shows.")
    runtime_reserved_gib: NonNegativeFloat = Field(
        default=1.0, description="GPU memory the CUDA context, cuBLAS / TensorRT workspaces and "
        "the runtime's own buffers hold besides weights, activations, logits and KV cache. NO "
        "MEASUREMENT: 1 GiB, confidence L (a CUDA context alone takes about 0.5 GiB).")
    timeline_iterations: NonNegativeInt = Field(
        default=2000, description="Iterations kept in the Perfetto trace (evenly sampled).")

    @model_validator(mode="after")
    def _consistent(self) -> InferenceSpec:
        if self.expert_precision == "mxfp4" and self.precision == "fp16":
            raise ValueError("expert_precision mxfp4 is multiplied in bf16: set precision "
                             "bf16 or fp8")
        if self.find_max_rate and self.requests.arrival != "poisson":
            raise ValueError("find_max_rate needs requests.arrival 'poisson'")
        if self.find_max_rate and (self.latency_targets.ttft_ms is None
                                   and self.latency_targets.tpot_ms is None):
            raise ValueError("find_max_rate needs latency_targets (ttft_ms or tpot_ms)")
        if self.scheduler.capacity == "max_utilization":
            if self.scheduler.policy != "inflight":
                raise ValueError("scheduler.capacity max_utilization needs scheduler.policy "
                                 "'inflight'")
            if self.beam_width != 1:
                raise ValueError("scheduler.capacity max_utilization is modelled for one "
                                 "beam (TensorRT-LLM pauses by recomputing, which beam "
                                 "search does not support): set beam_width 1")
            if self.kv_offload.policy != "none":
                raise ValueError("scheduler.capacity max_utilization is modelled without KV "
                                 "offload: set kv_offload.policy 'none'")
        return self

    @property
    def kv_dtype(self) -> ServingPrecision:
        """The KV cache dtype in effect."""
        if self.kv_cache_dtype is not None:
            return self.kv_cache_dtype
        return self.precision


class ServingParallelismSpec(Spec):
    """How one replica is split, and how many replicas serve."""

    tp: PositiveInt = Field(default=1, description="Tensor-parallel GPUs of one replica, inside "
                            "one NVLink domain.")
    pp: Literal[1] = Field(
        default=1, description="Pipeline-parallel serving is not modelled yet; 1.")
    ep: PositiveInt = Field(
        default=1, description="MoE: expert-parallel size inside the tp group (TensorRT-LLM "
        "moe_ep_size; moe_tp_size = tp / ep).")
    replicas: PositiveInt | None = Field(
        default=None, description="Default: num_gpus / (tp x pp).")


class ServingScenarioSpec(DocumentSpec):
    """``kind: scenario`` with ``inference:``: a model served on a system."""

    KIND = "scenario"

    name: str = ""
    system: Annotated[SystemSpec, Ref("system")]
    num_gpus: PositiveInt
    model: Annotated[ModelSpec, Ref("model")]
    inference: InferenceSpec
    parallelism: ServingParallelismSpec = Field(default_factory=ServingParallelismSpec)
    seed: NonNegativeInt = 0


class ServingMeasuredSpec(Spec):
    """What was measured on a served model."""

    output_tokens_per_s: PositiveFloat = Field(description="Over all the GPUs used.")
    output_tokens_per_s_per_gpu: PositiveFloat | None = None
    ttft_ms: PositiveFloat | None = Field(default=None, description="Mean time to first token.")
    ttft_p50_ms: PositiveFloat | None = None
    tpot_ms: PositiveFloat | None = Field(
        default=None, description="Mean time per output token (MLPerf's TPOT, NIM's "
        "inter-token latency).")
    system_wall_power_median_w: PositiveFloat | None = None
    how: str = ""


class InferencePointSpec(Spec):
    """One published serving measurement and the scenario that reproduces it."""

    id: Annotated[str, Field(min_length=1)]
    confidence: Literal["high", "medium", "low"]
    measured: ServingMeasuredSpec
    source: Annotated[str, Field(min_length=1)]
    notes: str = ""
    choose_tp: bool = Field(
        default=False, description="The source does not say how its GPUs were split into "
        "tensor-parallel replicas: ghsim serves each replica on the smallest power of two "
        "GPUs, dividing num_gpus, whose share of the weights takes at most 60 % of a GPU's "
        "memory (NVIDIA's MLPerf Inference v4.1 submissions serve Mixtral 8x7B in FP8 on "
        "one 80 GB H100, 55 %, but Llama 2 70B on two, where one would hold 81 %; on an H200 "
        "or a GH200 144 GB one holds it, 46 %), in place of the scenario's parallelism.tp.")
    scenario: ServingScenarioSpec


class InferencePointsSpec(DocumentSpec):
    """``kind: inference_points``: published serving measurements, each with its scenario."""

    KIND = "inference_points"

    metric: str = ""
    conventions: dict[str, str] = Field(default_factory=dict)
    points: list[InferencePointSpec] = Field(min_length=1)
