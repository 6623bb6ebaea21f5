"""What one GPU of a serving replica holds: weights, runtime buffers, and the KV cache's room.

Weights follow TensorRT-LLM's sharding: every linear layer split over the replica's tp GPUs
(experts over moe_ep x moe_tp = tp), the output layer (lm_head) column-parallel over tp, and the
input embedding replicated on every GPU (``use_parallel_embedding`` is off by default). With
FP8 the linear layers' weights are one byte each; the embedding, the lm_head and the norms stay
16-bit, as ModelOpt's FP8 recipe leaves them. The KV cache gets ``kv_memory_fraction`` of what
is left after weights, the engine's activation buffers (sized for ``max_num_tokens``), the
logits buffer (``max_batch_size`` rows of the vocabulary in FP32) and the CUDA runtime; it is
cut into blocks of ``kv_block_tokens`` tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ghsim.config.schema import ServingScenarioSpec
from ghsim.config.schema.model import ModelSpec
from ghsim.config.schema.serving import LengthSpec
from ghsim.errors import ConfigError
from ghsim.units import GIB
from ghsim.workload.modelsize import (
    attention_window,
    mla_dims,
    moe_layer_count,
    parameter_count,
)

DTYPE_BYTES = {"fp8": 1, "bf16": 2, "fp16": 2, "fp32": 4, "mxfp4": 4.25 / 8}
"""Bytes a value; MXFP4 is 4 bits and one 8-bit scale per 32 values (OCP MX specification)."""


@dataclass(frozen=True)
class Window:
    """Sliding-window attention as serving sees it: ``windowed`` of the model's layers keep
    and read at most ``tokens`` of each sequence's KV cache (TensorRT-LLM's cyclic KV cache
    for a layer's attention window); the others keep everything."""

    tokens: int
    windowed: int
    layers: int

    @property
    def share(self) -> float:
        """The windowed layers' share of the KV cache's layers."""
        return self.windowed / self.layers

    def cached(self, tokens: float) -> float:
        """A sequence of ``tokens`` tokens' KV cache, in tokens of every layer."""
        return (1 - self.share) * tokens + self.share * min(tokens, self.tokens)


def window_of(model: ModelSpec) -> Window | None:
    """The model's sliding window, or None when every layer attends to the whole sequence."""
    windows = {attention_window(model, i) for i in range(model.layers)}
    sizes = {w for w in windows if w is not None}
    if not sizes:
        return None
    tokens = min(sizes)  # one window size in the shipped models
    windowed = sum(1 for i in range(model.layers) if attention_window(model, i) is not None)
    return Window(tokens, windowed, model.layers)


def kv_width(model: ModelSpec, tp: int) -> int:
    """Values one token keeps in the KV cache per layer on one GPU of a tp replica: K and V
    of the GPU's KV heads (replicated when tp exceeds them); with MLA the compressed latent
    and the shared rotary key, ``kv_lora_rank + qk_rope_head_dim``, which every GPU keeps
    whole (DeepSeek's inference/model.py caches kv_cache and pe_cache of those widths; the
    latent serves all heads, so tensor parallelism cannot split it)."""
    mla = mla_dims(model)
    if mla is not None:
        return mla.kv_lora + mla.rope
    return 2 * max(1, model.kv_heads // tp) * model.head_dim_resolved


@dataclass(frozen=True)
class ReplicaShape:
    """The widths one GPU of a tp replica works with."""

    layers: int
    hidden: int
    heads: int
    """Query heads on this GPU."""
    kv_heads: int
    """KV heads on this GPU (replicated when tp exceeds the model's kv heads)."""
    head_dim: int
    ffn: int
    """Dense MLP width on this GPU."""
    gated: bool
    vocab: int
    tp: int
    experts: int = 0
    """Routed experts of the whole model per MoE layer (0: dense)."""
    local_experts: int = 0
    """Routed experts on this GPU (experts / moe_ep)."""
    top_k: int = 0
    expert_ffn: int = 0
    """One expert's MLP width on this GPU (expert_ffn_hidden / moe_tp)."""
    shared_ffn: int = 0
    """All shared experts' width on this GPU."""
    moe_layers: int = 0

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated else 2


def replica_shape(spec: ServingScenarioSpec) -> ReplicaShape:
    model, tp, ep = spec.model, spec.parallelism.tp, spec.parallelism.ep
    moe = model.moe
    shared = 0
    if moe is not None and moe.shared_experts:
        assert moe.shared_expert_ffn_hidden is not None
        shared = moe.shared_experts * moe.shared_expert_ffn_hidden // tp
    return ReplicaShape(
        layers=model.layers, hidden=model.hidden, heads=model.heads // tp,
        kv_heads=max(1, model.kv_heads // tp), head_dim=model.head_dim_resolved,
        ffn=model.ffn_hidden // tp, gated=model.gated_mlp, vocab=model.vocab, tp=tp,
        experts=moe.experts if moe else 0, local_experts=moe.experts // ep if moe else 0,
        top_k=moe.top_k if moe else 0,
        expert_ffn=moe.expert_ffn_hidden // (tp // ep) if moe else 0, shared_ffn=shared,
        moe_layers=moe_layer_count(model) if moe else 0,
    )


@dataclass(frozen=True)
class ServingMemory:
    """Bytes on one GPU of a replica, and the KV cache they leave room for."""

    capacity_bytes: float
    weights_bytes: float
    activation_bytes: float
    """The engine's activation buffers for ``max_num_tokens`` tokens in flight."""
    logits_bytes: float
    runtime_bytes: float
    kv_pool_bytes: float
    """HBM the KV cache takes (may be 0 or less when the weights leave nothing)."""
    kv_bytes_per_token: float
    """One token of one sequence, every layer, on this GPU."""
    block_tokens: int
    host_kv_bytes: float
    """Host memory the KV cache may spill to (0 without kv_offload)."""
    host_capacity_bytes: float

    @property
    def block_bytes(self) -> float:
        return self.kv_bytes_per_token * self.block_tokens

    @property
    def hbm_blocks(self) -> int:
        return max(0, int(self.kv_pool_bytes // self.block_bytes))

    @property
    def host_blocks(self) -> int:
        return max(0, int(self.host_kv_bytes // self.block_bytes))

    @property
    def fits(self) -> bool:
        """Weights and buffers fit in HBM with room for at least one KV block."""
        return self.hbm_blocks > 0


def weight_bytes_per_gpu(spec: ServingScenarioSpec) -> float:
    """Weights on one GPU: linear layers at the serving precision over tp, the lm_head in
    16 bits over tp, the embedding in 16 bits on every GPU, norms in 16 bits. Multi-token-
    prediction modules are not loaded: speculative decoding is not modelled."""
    model, tp = spec.model, spec.parallelism.tp
    count = parameter_count(model)
    wide = DTYPE_BYTES[spec.inference.precision]
    half = 2
    norms = count.layers * count.norms_per_layer + count.final_norm
    linear = count.non_embedding - norms - count.mtp
    experts = count.moe_layers * count.experts * count.expert
    expert_dtype = spec.inference.expert_precision or spec.inference.precision
    linear_bytes = (linear - experts) * wide + experts * DTYPE_BYTES[expert_dtype]
    output = count.output if count.output else model.vocab * model.hidden  # tied: shared
    embedding = count.embedding if count.output else 0  # tied: the lm_head holds it
    return (linear_bytes + output * half) / tp + embedding * half + norms * half


WEIGHT_SHARE = 0.6
"""A share of a GPU's memory a replica's weights may take, between those NVIDIA's MLPerf
Inference v4.1 submissions serve at and those they split further (mlcommons/inference_results_
v4.1@198fc4679 closed/NVIDIA configs, FP8): Mixtral 8x7B at TP 1 on an 80 GB H100 (55 %), Llama
2 70B at TP 1 on an H200 or a GH200 144 GB (46 %), but at TP 2 on H100, where TP 1 would hold
81 %."""


def smallest_tp(spec: ServingScenarioSpec, share: float = WEIGHT_SHARE) -> int:
    """The smallest tensor-parallel size, a power of two dividing ``num_gpus``, at which a
    replica's weights take at most ``share`` of each GPU's memory (the largest such power when
    none does)."""
    gpu = spec.system.node.gpu.gpu
    assert gpu is not None
    capacity = gpu.memory.capacity_gib * GIB
    tp = 1
    while tp < spec.num_gpus and spec.num_gpus % (2 * tp) == 0:
        sized = spec.model_copy(update={"parallelism": spec.parallelism.model_copy(
            update={"tp": tp})})
        if weight_bytes_per_gpu(sized) <= share * capacity:
            return tp
        tp *= 2
    return tp


def kv_bytes_per_token(spec: ServingScenarioSpec) -> float:
    """One token's KV cache in every layer on one GPU (:func:`kv_width` per layer)."""
    return float(spec.model.layers * kv_width(spec.model, spec.parallelism.tp)
                 * DTYPE_BYTES[spec.inference.kv_dtype])


def activation_bytes(spec: ServingScenarioSpec) -> float:
    """The largest activations one layer holds for ``max_num_tokens`` tokens in 16 bits: the
    residual stream in and out, the normalised input, the QKV output, and the MLP's up
    projection with its activated half (the buffers TensorRT reuses from layer to layer)."""
    shape = replica_shape(spec)
    tokens = engine_limits(spec)[1]
    qkv = (shape.heads + 2 * shape.kv_heads) * shape.head_dim
    mlp = max(shape.ffn, shape.expert_ffn * max(1, shape.top_k), shape.shared_ffn)
    up = (2 if shape.gated else 1) * mlp
    return tokens * (3 * shape.hidden + qkv + up + mlp) * 2.0


DEFAULT_MAX_BATCH_SIZE = 2048
DEFAULT_MAX_NUM_TOKENS = 8192
"""TensorRT-LLM's builder defaults (docs/source/performance/tuning-max-batch-size-and-max-num-
tokens.md: 'The default value is 2048', 'The default value of max num tokens is 8192')."""


def _round_batch(raw: float) -> int:
    if raw < 256:
        return max(64, 32 * math.ceil(raw / 32))
    if raw < 1024:
        return 128 * math.ceil(raw / 128)
    return 256 * math.ceil(raw / 256)


def _round_tokens(raw: float) -> int:
    if raw < 4096:
        return max(2048, 256 * math.ceil(raw / 256))
    if raw < 8192:
        return 512 * math.ceil(raw / 512)
    return 1024 * math.ceil(raw / 1024)


def trtllm_bench_limits(spec: ServingScenarioSpec, input_mean: float,
                        output_mean: float) -> tuple[int, int]:
    """max_batch_size and max_num_tokens as trtllm-bench's build heuristic picks them
    (NVIDIA/TensorRT-LLM@04cba882 tensorrt_llm/bench/build/tuning.py, calc_engine_setting and
    finetune_setting): KV capacity from the GPUs' total memory less the weights at 0.95."""
    model, tp = spec.model, spec.parallelism.tp
    gpu = spec.system.node.gpu.gpu
    assert gpu is not None
    weight_gib = parameter_count(model).total * DTYPE_BYTES[spec.inference.precision] / GIB
    kv_gib_per_token = (2 * model.layers * max(tp, model.kv_heads) * model.head_dim_resolved
                        * DTYPE_BYTES[spec.inference.kv_dtype] / GIB)
    total_gib = gpu.memory.capacity_gib * tp
    cache_gib = (total_gib - weight_gib) * 0.95
    requests = max(0.0, cache_gib / (kv_gib_per_token * (input_mean + output_mean)))
    raw_batch = min(requests, 4096.0)
    raw_tokens = min(raw_batch * (1 + input_mean / output_mean), 32768.0)
    return _round_batch(raw_batch), _round_tokens(raw_tokens)


def engine_limits(spec: ServingScenarioSpec) -> tuple[int, int]:
    """The engine's max_batch_size and max_num_tokens in effect."""
    scheduler, requests = spec.inference.scheduler, spec.inference.requests
    batch, tokens = DEFAULT_MAX_BATCH_SIZE, DEFAULT_MAX_NUM_TOKENS
    if scheduler.tuning == "trtllm_bench":
        batch, tokens = trtllm_bench_limits(spec, mean_tokens(requests.input_tokens),
                                            mean_tokens(requests.output_tokens))
        batch = scheduler.max_batch_size or batch
        if not scheduler.chunked_prefill:
            # Without chunked context trtllm-bench raises the token budget so that the
            # longest prompt fits beside a full batch of decoding tokens (tensorrt_llm/bench/
            # benchmark/utils/general.py, get_settings: max_num_tokens = max(max_num_tokens,
            # max_isl + max_batch_size)).
            longest = longest_tokens(requests.input_tokens)
            tokens = max(tokens, (longest or round(mean_tokens(requests.input_tokens))) + batch)
    return (scheduler.max_batch_size or batch, scheduler.max_num_tokens or tokens)


def longest_tokens(length: int | LengthSpec) -> int | None:
    """The longest a request length can be (its mean when fixed), None when unbounded."""
    if isinstance(length, int):
        return length
    if length.distribution == "fixed":
        return round(length.mean)
    return length.max


def mean_tokens(length: int | LengthSpec) -> float:
    """The mean of a request length (a number is its own mean)."""
    return float(length) if isinstance(length, int) else length.mean


def serving_memory(spec: ServingScenarioSpec) -> ServingMemory:
    """The memory budget of one GPU of a replica."""
    inference, scheduler = spec.inference, spec.inference.scheduler
    gpu_part = spec.system.node.gpu
    assert gpu_part.gpu is not None
    capacity = gpu_part.gpu.memory.capacity_bytes
    weights = weight_bytes_per_gpu(spec)
    activations = activation_bytes(spec)
    logits = engine_limits(spec)[0] * inference.beam_width * spec.model.vocab * 4.0 / (
        spec.parallelism.tp)
    runtime = inference.runtime_reserved_gib * GIB
    free = capacity - weights - activations - logits - runtime
    pool = free * scheduler.kv_memory_fraction if free > 0 else free
    per_token = kv_bytes_per_token(spec)
    host_capacity = _host_bytes_per_gpu(spec)
    host_kv = 0.0
    offload = inference.kv_offload
    if offload.policy != "none":
        if offload.host_gib is not None:
            host_kv = offload.host_gib * GIB
            if host_kv > host_capacity:
                raise ConfigError(spec.name or "scenario", "inference.kv_offload.host_gib",
                                  f"expected at most this GPU's share of host memory, "
                                  f"{host_capacity / GIB:.1f} GiB, got {offload.host_gib}")
        else:
            host_kv = max(0.0, host_capacity - weights - offload.host_reserved_gib * GIB)
    return ServingMemory(
        capacity_bytes=capacity, weights_bytes=weights, activation_bytes=activations,
        logits_bytes=logits, runtime_bytes=runtime, kv_pool_bytes=pool,
        kv_bytes_per_token=per_token, block_tokens=scheduler.kv_block_tokens,
        host_kv_bytes=host_kv, host_capacity_bytes=host_capacity,
    )


def _host_bytes_per_gpu(spec: ServingScenarioSpec) -> float:
    """This GPU's share of its host CPU's memory (a Grace's LPDDR5X is its own GPU's)."""
    node = spec.system.node
    cpu = node.cpu.cpu
    if cpu is None or cpu.memory is None:
        return 0.0
    sockets = node.cpus
    return cpu.memory.capacity_gib * GIB * sockets / node.gpus


def blocks_for(tokens: int, block_tokens: int) -> int:
    """Paged blocks that hold ``tokens`` tokens of one sequence."""
    return math.ceil(tokens / block_tokens)
