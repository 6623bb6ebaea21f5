"""The tensor sizes one rank sees, from a model, a training setup and a parallel layout."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from ghsim.config.layout import Layout
from ghsim.config.schema import ScenarioSpec
from ghsim.workload.imbalance import random_expert_spread, random_routing_imbalance
from ghsim.workload.ir import NO_DEDUP, Dedup
from ghsim.workload.modelsize import mla_dims
from ghsim.workload.routing import (
    Launches,
    Multihot,
    deepep_multihot,
    dispatch_kernels,
    routing_kernels,
)
from ghsim.workload.states import GRAD_BYTES

ACTIVATION_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2}
"""Bytes per activation element: FP8 recipes keep activations and communication in BF16."""
GEMM_DTYPE = {"fp32": "tf32", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8"}
"""Tensor-core dtype of the GEMMs (PyTorch runs FP32 matmuls as TF32 on Ampere and later)."""
WEIGHT_READ_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
"""Bytes per weight read by a GEMM (FP8 recipes cache FP8 copies of the weights)."""


@dataclass(frozen=True)
class MoeShapes:
    """Per-rank sizes of one MoE layer's experts."""

    experts: int
    """Routed experts of the whole layer (the router scores them all)."""
    local_experts: int
    """Routed experts on this rank: experts / ep."""
    top_k: int
    expert_ffn: int
    """One expert's FFN width on this rank: expert_ffn_hidden / etp."""
    shared_ffn: int
    """All shared experts' FFN width on this rank (divided by tp); 0 without."""
    ep: int
    etp: int
    imbalance: float
    """Token copies the busiest expert rank receives over the mean (with balanced routing the
    expected busiest of the pass's random loads; 1 when dealt), capped by the capacity factor
    when tokens are dropped."""
    expert_spread: float
    """Standard deviation of one expert's token copies in a pass around their mean (balanced
    routing's random sets; 0 when dealt, measured or padded to the capacity)."""
    routing: Launches
    """Kernels of the routing after the router GEMM (:func:`routing_kernels`)."""
    dispatch: Launches
    """Kernels of the dispatcher's bookkeeping (:func:`dispatch_kernels`)."""
    alltoall: bool
    """Megatron's all-to-all token dispatcher (False: DeepEP's)."""
    balancing_loss: bool
    """The router computes a load-balancing loss (whose token counts tensor parallelism
    all-reduces)."""
    multihot: Multihot | None
    """DeepEP's conversion of the received expert indices (None with the all-to-all
    dispatcher or without expert parallelism)."""
    dedup: Dedup = NO_DEDUP
    """The all-to-alls' deduplication (``Comm.dedup``) with the deepep dispatcher: (top_k,
    router groups, groups a token may pick, whether it takes them whole: dealt routing's
    blocks)."""
    bias: bool = False
    """The experts' linear layers carry biases (``model.bias``)."""

    def rows_per_expert(self, sp_tokens: int) -> int:
        """Token copies each local expert's GEMMs take on the busiest rank, in one pass of
        ``sp_tokens`` routed by each rank (their mean; ``expert_spread`` around it)."""
        received = sp_tokens * self.top_k * self.etp
        return max(1, math.ceil(received * self.imbalance / self.local_experts))


def moe_shapes(spec: ScenarioSpec, layout: Layout, sp_tokens: int) -> MoeShapes | None:
    """The MoE sizes of ``spec`` under ``layout``, each rank routing its ``sp_tokens``; None
    for a dense model."""
    moe = spec.model.moe
    if moe is None:
        return None
    imbalance, spread = 1.0, 0.0
    if moe.routing == "measured" and moe.imbalance:
        imbalance = moe.imbalance
    elif moe.routing == "balanced":  # random sets: over the group's tokens of one pass
        group_tokens = sp_tokens * layout.ep * layout.etp
        groups = (moe.router_groups or 1, moe.router_topk_groups or 1)
        imbalance = random_routing_imbalance(moe.experts, moe.top_k, layout.ep, group_tokens,
                                             *groups)
        spread = random_expert_spread(moe.experts, moe.top_k, group_tokens, *groups)
    if moe.capacity_factor is not None:  # every expert padded to its capacity
        imbalance, spread = min(imbalance, moe.capacity_factor), 0.0
    shared = moe.shared_experts * (moe.shared_expert_ffn_hidden or 0)
    dedup = NO_DEDUP
    if spec.parallelism.moe_dispatcher == "deepep":
        # dealt: a token's experts in a row, one of experts / top_k blocks taken whole
        dedup = ((moe.top_k, moe.experts // moe.top_k, 1, True) if moe.routing == "dealt" else
                 (moe.top_k, moe.router_groups or 1, moe.router_topk_groups or 1, False))
    routing = routing_kernels(moe.router, moe.router_groups is not None, moe.load_balancing,
                              moe.expert_bias, moe.routing == "balanced",
                              spec.training.moe_router_fusion)
    local = moe.experts // layout.ep
    return MoeShapes(
        experts=moe.experts, local_experts=local, top_k=moe.top_k,
        expert_ffn=moe.expert_ffn_hidden // layout.etp, shared_ffn=shared // layout.tp,
        ep=layout.ep, etp=layout.etp, imbalance=imbalance, expert_spread=spread, dedup=dedup,
        bias=spec.model.bias,
        routing=routing,
        dispatch=dispatch_kernels(spec.parallelism.moe_dispatcher, layout.ep, local),
        alltoall=spec.parallelism.moe_dispatcher == "alltoall",
        balancing_loss=moe.load_balancing != "none",
        multihot=(deepep_multihot(spec.training.deepep_fused_multihot)
                  if spec.parallelism.moe_dispatcher == "deepep" and layout.ep > 1 else None),
    )


@dataclass(frozen=True)
class MlaShapes:
    """Multi-head latent attention (DeepSeek) on this rank."""

    q_lora: int
    """Rank of the query down-projection; 0: queries are projected directly."""
    kv_lora: int
    nope: int
    rope: int
    v: int
    heads: int
    """Heads on this rank (heads / tp)."""


def mla_shapes(spec: ScenarioSpec, layout: Layout) -> MlaShapes | None:
    dims = mla_dims(spec.model)
    if dims is None:
        return None
    return MlaShapes(q_lora=dims.q_lora or 0, kv_lora=dims.kv_lora, nope=dims.nope,
                     rope=dims.rope, v=dims.v, heads=spec.model.heads // layout.tp)


@dataclass(frozen=True)
class LayerShapes:
    """Per-rank sizes of one transformer layer for one micro-batch."""

    tokens: int
    """Tokens of one micro-batch on this rank: micro_batch x seq_len / cp."""
    seq_len: int
    """Full sequence length (keys attended to)."""
    hidden: int
    q_width: int
    """heads x head_dim on this rank (divided by tp)."""
    kv_width: int
    """kv_heads x head_dim on this rank (kv heads are replicated when tp > kv_heads)."""
    ffn: int
    """ffn_hidden on this rank."""
    heads: int
    """Attention heads on this rank."""
    vocab: int
    """Vocabulary entries on this rank."""
    gated: bool
    tp: int
    cp: int
    sequence_parallel: bool
    act_bytes: int
    weight_bytes: int
    grad_bytes: int
    """Bytes of a main-gradient element (``training.main_grads``), which each weight-gradient
    GEMM reads and writes as it accumulates."""
    gemm_dtype: str
    flash: bool
    dropout: bool
    recompute: str
    recompute_modules: tuple[str, ...]
    """Selective recompute: the modules redone (``ParallelismSpec.recompute_modules_resolved``)."""
    fp8: bool
    fp8_recipe: str | None
    """Transformer Engine's FP8 scaling recipe (``TrainingSpec.fp8_recipe_resolved``)."""
    rotary: bool
    """Rotary position embeddings (``model.position_embedding: rope``): RoPE kernels on the
    queries and keys of each layer; learned positions are added to the embedding instead."""
    qk_norm: bool
    """Per-head norms on the queries and keys (two norm kernels after the QKV projection)."""
    cross_entropy_fusion: bool
    """Megatron's fused cross-entropy (``TrainingSpec.cross_entropy_fusion``)."""
    cross_entropy_impl: Literal["native", "te"]
    """Its kernels, Megatron-Core's or Transformer Engine's
    (``TrainingSpec.cross_entropy_fusion_impl``)."""
    attention_work: float
    """Executed attention work relative to a causal mask over the whole sequence (document
    masking: ``TrainingSpec.attention_work_fraction``)."""
    eager: frozenset[str] = frozenset()
    """Ops run as separate PyTorch kernels (``TrainingSpec.eager_ops``)."""
    moe: MoeShapes | None = None
    """The experts of the model's MoE layers (None: a dense model)."""
    mla: MlaShapes | None = None
    """Multi-head latent attention's sizes (None: MHA or GQA)."""

    def recomputes(self, module: str) -> bool:
        """Whether selective recompute redoes ``module`` (a Megatron --recompute-modules name)."""
        return module in self.recompute_modules

    @property
    def saved_gemm_input_bytes(self) -> float:
        """Bytes per element of a linear layer's input kept for its weight-gradient GEMM: under
        FP8, Transformer Engine keeps the FP8 cast it multiplied with (module/linear.py,
        _Linear.forward: ``saved_inputmat = inputmat`` when FP8 computes the wgrad), one byte
        and, with blockwise scaling, an FP32 scale per 128 elements; otherwise the activation
        dtype."""
        if not self.fp8:
            return float(self.act_bytes)
        return 1.0 + (4.0 / 128 if self.fp8_recipe == "blockwise" else 0.0)

    @property
    def sp_tokens(self) -> int:
        """Tokens on this rank outside the tensor-parallel region (split by tp with SP)."""
        return self.tokens // self.tp if self.sequence_parallel else self.tokens


def window_work(seq_len: int, window: int) -> float:
    """Attention work of a causal sliding window of ``window`` tokens relative to full causal
    attention over ``seq_len``: query i attends to min(i, window) keys, against i."""
    w = min(window, seq_len)
    windowed = w * (w + 1) / 2 + (seq_len - w) * w
    return windowed / (seq_len * (seq_len + 1) / 2)


def eager_ops(spec: ScenarioSpec) -> frozenset[str]:
    """The ``training.eager_ops`` that are several PyTorch kernels for this model: a LayerNorm
    (``F.layer_norm``) and a non-gated activation other than Megatron's bias-GELU (ReLU, squared
    ReLU, a GELU without a bias: ``F.gelu``) are one kernel either way; a GELU MLP with biases
    runs Megatron's bias-GELU formula op by op (``gelu``). Legacy Megatron's bias-dropout-add
    (``residual``) is the plain residual add without a bias or dropout, and ``residual_bias``
    or ``residual_dropout`` with only one of them; ``bias`` needs biases, ``attention_layout``
    flash attention (the unfused path's kernels are costed as they are)."""
    ops: set[str] = set(spec.training.eager_ops)
    bias, dropout = spec.model.bias, spec.model.dropout > 0
    if "residual" in ops and not (bias and dropout):
        ops.discard("residual")
        if bias or dropout:
            ops.add("residual_bias" if bias else "residual_dropout")
    if not bias:
        ops.discard("bias")
    if spec.training.attention == "standard" or spec.model.attention_type == "mla":
        ops.discard("attention_layout")
    if spec.model.norm != "rmsnorm":
        ops.discard("norm")
    if not spec.model.gated_mlp and "activation" in ops:
        ops.discard("activation")
        if spec.model.activation_resolved == "gelu" and bias:
            ops.add("gelu")
    if spec.model.activation_clamp is None:
        ops.discard("clamp")
    return frozenset(ops)


def layer_shapes(spec: ScenarioSpec, layout: Layout) -> LayerShapes:
    """The per-rank shapes of ``spec`` under ``layout``."""
    model, training, par = spec.model, spec.training, spec.parallelism
    tp, hd = layout.tp, model.head_dim_resolved
    kv_heads_local = max(1, model.kv_heads // tp)
    shapes = LayerShapes(
        tokens=training.micro_batch * training.seq_len // layout.cp,
        seq_len=training.seq_len,
        hidden=model.hidden,
        q_width=model.heads * hd // tp,
        kv_width=kv_heads_local * hd,
        ffn=model.ffn_hidden // tp,
        heads=model.heads // tp,
        vocab=-(-model.vocab // tp),
        gated=model.gated_mlp,
        tp=tp,
        cp=layout.cp,
        sequence_parallel=par.sequence_parallel and tp > 1,
        act_bytes=ACTIVATION_BYTES[training.precision],
        weight_bytes=WEIGHT_READ_BYTES[training.precision],
        grad_bytes=GRAD_BYTES[training.main_grads_resolved],
        gemm_dtype=GEMM_DTYPE[training.precision],
        flash=training.attention != "standard",
        dropout=model.dropout > 0,
        recompute=par.recompute,
        recompute_modules=par.recompute_modules_resolved,
        fp8=training.precision == "fp8",
        fp8_recipe=training.fp8_recipe_resolved,
        rotary=model.position_embedding == "rope",
        qk_norm=model.qk_norm,
        cross_entropy_fusion=training.cross_entropy_fusion,
        cross_entropy_impl=training.cross_entropy_fusion_impl,
        eager=eager_ops(spec),
        attention_work=training.attention_work_fraction,
        mla=mla_shapes(spec, layout),
    )
    # each rank routes the tokens it holds outside the tensor-parallel region
    return replace(shapes, moe=moe_shapes(spec, layout, shapes.sp_tokens))
