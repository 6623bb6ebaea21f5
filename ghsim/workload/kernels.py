"""The kernels and inline collectives of one transformer layer, forward and backward, per rank.

FLOPs count matrix-multiply work only (GEMMs and the attention core), the Megatron convention of
FACTS.md, so that model FLOPs summed over ranks reproduce the published formula; normalization,
activation and other element-wise kernels carry their bytes and are costed as memory-bound.
Backward runs a data-gradient and a weight-gradient GEMM for every forward GEMM, and twice the
attention core's forward work.

Tensor parallelism (Megatron): without sequence parallelism an all-reduce follows the attention
output projection and the MLP down projection in the forward pass, and precedes the QKV and MLP
up projections in the backward pass. With sequence parallelism each all-reduce becomes an
all-gather before and a reduce-scatter after the tensor-parallel region, and the backward pass
gathers the block's input again for the weight gradient (Megatron keeps it sharded).
Context parallelism (ring attention) gathers keys and values around the cp ring in the forward
pass, and gathers them again and reduce-scatters their gradients in the backward pass.
"""

from __future__ import annotations

from dataclasses import replace

from ghsim.workload.eltwise import (
    EAGER,
    REDUCED_BACKWARD,
    eager_only,
    eltwise,
    fusable,
    residual,
    rope,
)
from ghsim.workload.ir import NO_DEDUP, Comm, Dedup, Kernel, Step
from ghsim.workload.shapes import LayerShapes


def _gemm(name: str, m: int, n: int, k: int, s: LayerShapes) -> Kernel:
    """An (m x k) @ (k x n) GEMM reading its input and weight and writing its output."""
    data = (m * k + m * n) * s.act_bytes + k * n * s.weight_bytes
    return Kernel(name, 2.0 * m * n * k, data, s.gemm_dtype, (m, n, k), "gemm")


_FP8_KERNELS_PER_TENSOR = {"delayed": 1, "tensorwise": 3, "blockwise": 1}
"""Kernels Transformer Engine launches to quantize one tensor (NVIDIA/TransformerEngine@v2.9
``pytorch/csrc/quantizer.cpp``): delayed scaling casts with last steps' scale in one
cast-transpose; current (tensorwise) scaling computes the amax, then the scale, then casts
(``Float8CurrentScalingQuantizer::quantize_impl``); blockwise scaling computes each block's
scale in its quantize kernel."""


def _fp8_cast(name: str, elements: int, s: LayerShapes, tensors: int = 1) -> list[Step]:
    """FP8 recipes quantize each GEMM input: Transformer Engine reads it in BF16 and writes it
    in FP8 twice, row-wise for this GEMM and transposed (column-wise) for the weight-gradient
    GEMM of the backward pass, since Hopper's FP8 GEMMs take only the TN layout
    (NVIDIA/TransformerEngine ``fused_cast_transpose``: ``input_cast`` and
    ``input_transpose``; ``quantize`` with ``columnwise_usage`` in training).

    A grouped GEMM's input is ``tensors`` tensors, one per expert, each with its own scale
    (``GroupedLinear``'s ``split_quantize``): delayed scaling casts them all in one fused
    kernel (``nvte_multi_cast_transpose``), the other recipes quantize each on its own
    (``multi_tensor_quantize_impl``), each with the recipe's kernels."""
    if not s.fp8:
        return []
    data = float(elements * (s.act_bytes + 2))
    if s.fp8_recipe == "tensorwise":  # the tensor's amax is reduced before it is cast
        data += elements * s.act_bytes
    elif s.fp8_recipe == "blockwise":  # an FP32 scale per 128 values, row- and column-wise
        data += 2 * elements * 4 / 128
    recipe = s.fp8_recipe or "delayed"
    kernels = 1 if recipe == "delayed" and tensors > 1 else (
        tensors * _FP8_KERNELS_PER_TENSOR[recipe])
    return [Kernel(f"{name}.fp8_cast_transpose", 0.0, data, "bf16", (elements,),
                   kernels=kernels)]


def _tp_bytes(s: LayerShapes, element_bytes: float = 0.0) -> float:
    """A tensor-parallel collective's message: the layer's tokens x hidden, in 16 bits unless
    ``element_bytes`` says otherwise."""
    return s.tokens * s.hidden * (element_bytes or s.act_bytes)


def _tp(name: str, collective: str, s: LayerShapes, element_bytes: float = 0.0) -> list[Step]:
    if s.tp == 1:
        return []
    return [Comm(name, collective, "tp", _tp_bytes(s, element_bytes), s.tp)]  # type: ignore[arg-type]


def _norm_gather(name: str, s: LayerShapes, fused: bool) -> list[Step]:
    """The sequence-parallel all-gather of a norm's output into its column-parallel GEMM: one
    byte an element where the norm is fused with the GEMM and writes FP8 (``fused`` and
    :func:`_fused_norm_fp8`)."""
    if not s.sequence_parallel:
        return []
    return _tp(name, "all_gather", s, 1.0 if fused and _fused_norm_fp8(s) else 0.0)


def _fused_norm_fp8(s: LayerShapes) -> bool:
    """Whether a norm feeding a column-parallel GEMM writes FP8: under FP8 Transformer Engine's
    LayerNormLinear (Megatron-Core's TELayerNormColumnParallelLinear, the QKV and dense MLP-up
    projections) quantizes in the norm kernel and all-gathers the FP8 tensor, one byte an
    element (NVIDIA/TransformerEngine@v1.8 module/layernorm_linear.py: ``ln_out`` of dtype
    uint8 handed to ``gather_along_first_dim``; TE 2 gathers with the input quantizer), and
    the backward pass re-gathers that FP8 output for the weight gradient. A norm run as
    PyTorch ops (``training.eager_ops``) writes 16 bits."""
    return s.fp8 and "norm" not in s.eager


def _norm_linear_cast(name: str, elements: int, s: LayerShapes) -> list[Step]:
    """The FP8 work of a GEMM whose norm Transformer Engine fuses with it: under delayed
    scaling the norm wrote the row-wise FP8 already, so what is left is the transposed copy
    for the weight gradient (read and write one byte an element, ``fp8_transpose``); current
    and block scaling quantize the norm's output as any other input."""
    if _fused_norm_fp8(s) and (s.fp8_recipe or "delayed") == "delayed":
        return [Kernel(f"{name}.fp8_cast_transpose", 0.0, float(elements * 2), "bf16",
                       (elements,))]
    return _fp8_cast(name, elements, s)


def _cp_kv(name: str, collective: str, s: LayerShapes) -> list[Step]:
    if s.cp == 1:
        return []
    size = 2 * s.tokens * s.cp * s.kv_width * s.act_bytes
    return [Comm(name, collective, "cp", size, s.cp)]  # type: ignore[arg-type]


def attention_core(s: LayerShapes) -> list[Step]:
    """Scores, softmax and the weighted sum of values, for this rank's queries.

    The FLOPs are those of the Megatron convention (``4 t s`` heads x head_dim, a causal mask
    not halved), so that they sum to the model FLOPs; the cost model knows the kernel skips the
    masked tiles (its ``shape``: queries, the keys each kernel sees, width, head dimension). A
    document mask (``attention_mask: document``) lets flash attention skip the blocks across
    documents: its executed work is ``s.attention_work`` (sum of d^2 over the documents / s^2)
    of that, while the model FLOPs, which ignore the mask as Megatron's formula does, stay as
    they are. Its bytes (Q, K, V in, the output out) do not change. Standard attention
    computes every score and masks it.
    """
    t, keys = s.tokens, s.seq_len
    head_dim = s.q_width // max(s.heads, 1)
    flops = 4.0 * t * keys * s.q_width
    qkv = t * (s.q_width + 2 * s.kv_width) * s.act_bytes
    if s.cp > 1:
        qkv += (s.cp - 1) * t * 2 * s.kv_width * s.act_bytes  # remote K/V chunks
    if s.flash:
        data = qkv + t * s.q_width * s.act_bytes
        return [Kernel("attn.flash", flops * s.attention_work, data,
                       s.gemm_dtype if not s.fp8 else "bf16",
                       (t, _kernel_keys(s), s.q_width, head_dim),
                       "attention")]
    # Unfused attention (Megatron before flash attention): two batched GEMMs per head, with
    # K = head_dim for the scores and K = keys for the weighted sum, and a fused
    # scale-mask-softmax (plus dropout) over the s x s scores between them.
    scores = s.heads * t * keys
    masks = 1 if s.dropout else 0
    return [
        Kernel("attn.qk", flops / 2, qkv + scores * s.act_bytes, s.gemm_dtype,
               (s.heads * t, keys, head_dim), "gemm"),
        Kernel("attn.softmax", 0.0, scores * ((2 + 2 * masks) * s.act_bytes + masks), "bf16",
               (scores,), "softmax"),
        Kernel("attn.av", flops / 2, scores * s.act_bytes + t * s.q_width * 2 * s.act_bytes,
               s.gemm_dtype, (s.heads * t, head_dim, keys), "gemm"),
    ]


def layer_forward(s: LayerShapes, moe: bool = False) -> list[Step]:
    """One layer's forward pass on this rank (a MoE layer's when ``moe``)."""
    steps = _attention_block(s)
    return steps + (moe_block(s) if moe else _mlp_block(s))


def _mla(s: LayerShapes) -> list[Step]:
    """Multi-head latent attention (DeepSeek-V2/V3, Megatron-Core MLASelfAttention): the query
    and the key/value latent are projected down (not split by tensor parallelism), normalized
    and projected up per head (split by tp); the rotary part of the key is shared by the heads.
    Attention runs with query/key width ``nope + rope`` and value width ``v`` per head."""
    assert s.mla is not None
    m, t, h = s.mla, s.tokens, s.hidden
    qk, heads = m.nope + m.rope, m.heads
    steps: list[Step] = []
    if m.q_lora:
        steps += _fp8_cast("q_down", t * h, s)
        steps += [_gemm("q_down", t, m.q_lora, h, s),
                  eltwise("q_norm", t * m.q_lora, s, klass="norm")]
        steps += _fp8_cast("q_up", t * m.q_lora, s)
        steps += [_gemm("q_up", t, heads * qk, m.q_lora, s)]
    else:
        steps += _fp8_cast("q_proj", t * h, s)
        steps += [_gemm("q_proj", t, heads * qk, h, s)]
    steps += [_gemm("kv_down", t, m.kv_lora + m.rope, h, s),
              eltwise("kv_norm", t * m.kv_lora, s, klass="norm")]
    steps += _fp8_cast("kv_up", t * m.kv_lora, s)
    steps += [_gemm("kv_up", t, heads * (m.nope + m.v), m.kv_lora, s),
              eltwise("rope", t * (heads + 1) * m.rope, s)]
    steps += _mla_core(s)
    steps += _fp8_cast("proj", t * heads * m.v, s)
    steps += [_gemm("proj", t, h, heads * m.v, s)]
    return steps


def _mla_core(s: LayerShapes) -> list[Step]:
    """MLA's fused attention: scores at the query/key width ``nope + rope``, the weighted sum
    at the value width ``v``, per head (the Megatron convention: causal not halved)."""
    assert s.mla is not None
    m, t, keys = s.mla, s.tokens, s.seq_len
    qk = m.nope + m.rope
    flops = 2.0 * t * keys * m.heads * (qk + m.v)
    data = t * m.heads * (2 * qk + 2 * m.v) * s.act_bytes  # Q, K, V in, the output out
    return [Kernel("attn.flash", flops * s.attention_work, data,
                   s.gemm_dtype if not s.fp8 else "bf16", (t, _kernel_keys(s), m.heads * qk, qk),
                   "attention")]


def _kernel_keys(s: LayerShapes) -> int:
    """The keys each fused attention kernel of this rank sees: the whole sequence, or under
    context parallelism one rank's chunk of it per step of the ring (Megatron-Core's default
    ``p2p`` exchange runs one kernel per K/V chunk received)."""
    return max(1, s.seq_len // s.cp)


def _attention_block(s: LayerShapes) -> list[Step]:
    """Norm, QKV (or MLA's projections), attention and the output projection, with their
    tensor-parallel communication, up to the first residual add."""
    h, sp = s.hidden, s.sequence_parallel
    steps: list[Step] = [fusable("ln1", "norm", s.sp_tokens * h, s, klass="norm")]
    steps += _norm_gather("ln1.all_gather", s, fused=s.mla is None)
    steps += _mla(s) if s.mla is not None else _qkv_attention(s)
    steps += _tp("proj.reduce_scatter", "reduce_scatter", s) if sp else _tp(
        "proj.all_reduce", "all_reduce", s)
    steps += [residual("residual1", s.sp_tokens * h, s),
              fusable("ln2", "norm", s.sp_tokens * h, s, klass="norm")]
    return steps


def _qkv_attention(s: LayerShapes) -> list[Step]:
    """MHA / GQA: the QKV projection, query/key norms, RoPE, attention, output projection."""
    t, h = s.tokens, s.hidden
    steps: list[Step] = _norm_linear_cast("qkv", t * h, s)
    steps += [_gemm("qkv", t, s.q_width + 2 * s.kv_width, h, s)]
    steps += eager_only("qkv.bias", "bias", t * (s.q_width + 2 * s.kv_width), s)
    if s.qk_norm:  # Qwen3 / Megatron --qk-layernorm: normalized before RoPE
        steps += [fusable("q_norm", "norm", t * s.q_width, s, klass="norm"),
                  fusable("k_norm", "norm", t * s.kv_width, s, klass="norm")]
    if s.rotary:  # learned or no position embeddings rotate nothing
        steps += rope("rope", t * (s.q_width + s.kv_width), s)
    steps += _cp_kv("attn.cp_kv_gather", "all_gather", s)
    steps += eager_only("attn.layout", "attention_layout",
                        t * 2 * (s.q_width + s.kv_width), s)
    steps += attention_core(s)
    steps += _fp8_cast("proj", t * s.q_width, s)
    steps += [_gemm("proj", t, h, s.q_width, s)]
    return steps


def _mlp_block(s: LayerShapes, norm_fused: bool = True) -> list[Step]:
    """The dense MLP, from the second norm's output to the second residual add (a MoE
    layer's shared experts: ``norm_fused`` False, their input gathered and cast on its own)."""
    t, h = s.tokens, s.hidden
    up = 2 * s.ffn if s.gated else s.ffn
    sp = s.sequence_parallel
    steps: list[Step] = _norm_gather("ln2.all_gather", s, fused=norm_fused)
    steps += (_norm_linear_cast if norm_fused else _fp8_cast)("mlp_up", t * h, s)
    steps += [_gemm("mlp_up", t, up, h, s),
              # one fused kernel (Megatron's jit_fuser / bias_swiglu): gated reads the gate
              # and the up halves; gelu, relu, squared_relu and xielu read one input
              fusable("mlp_act", "activation" if s.gated else "gelu", t * s.ffn, s,
                      reads=2 if s.gated else 1)]
    steps += _fp8_cast("mlp_down", t * s.ffn, s)
    steps += [_gemm("mlp_down", t, h, s.ffn, s)]
    steps += _tp("mlp.reduce_scatter", "reduce_scatter", s) if sp else _tp(
        "mlp.all_reduce", "all_reduce", s)
    steps += [residual("residual2", s.sp_tokens * h, s)]
    return steps


def grouped_gemm(name: str, m: int, n: int, k: int, groups: int, dtype: str = "bf16",
                 act_bytes: float = 2.0, weight_bytes: float = 2.0,
                 spread_m: float = 0.0) -> Kernel:
    """``groups`` experts' (m x k) @ (k x n) GEMMs as one grouped GEMM: every expert's weight
    is read, and their tiles share the GPU's waves (each expert's M spread by ``spread_m``
    around ``m`` under random routing)."""
    data = groups * ((m * k + m * n) * act_bytes + k * n * weight_bytes)
    return Kernel(name, 2.0 * m * n * k * groups, data, dtype, (m, n, k), "gemm",
                  groups=groups, spread_m=spread_m)


def _grouped(name: str, m: int, n: int, k: int, groups: int, s: LayerShapes) -> Kernel:
    spread = s.moe.expert_spread if s.moe is not None else 0.0
    return grouped_gemm(name, m, n, k, groups, s.gemm_dtype, s.act_bytes, s.weight_bytes,
                        spread)


def _expert_bias(tokens: int, h: int, experts: int, s: LayerShapes) -> Kernel:
    """The experts' output biases as Megatron-Core adds them (``TEGroupedMLP._apply_bias``,
    NVIDIA/Megatron-LM@core_v0.15.0 ``moe/experts.py``; the up-projection's bias is fused into
    its activation): per expert, its bias times each token's routing probability (written
    out) and that added to the expert's output, then the experts' outputs concatenated, 12
    bytes per output element in 16 bits and two kernels per expert plus the copy."""
    return Kernel("experts.bias", 0.0, 6.0 * tokens * h * s.act_bytes, "bf16", (tokens, h),
                  kernels=2 * experts + 1)


def _ep(name: str, collective: str, nbytes: float, group: str, size: int,
        dedup: Dedup = NO_DEDUP, host_sync: bool = False) -> list[Step]:
    if size == 1:
        return []
    return [Comm(name, collective, group, nbytes, size, dedup,  # type: ignore[arg-type]
                 host_sync)]


def moe_block(s: LayerShapes) -> list[Step]:
    """A Megatron-Core MoE layer after its norm, with the all-to-all token dispatcher.

    Each rank routes its own ``sp_tokens`` (the router GEMM and a top-k over the experts'
    scores), permutes the ``top_k`` copies of each token by expert, and sends them to the ranks
    of its expert-parallel group that hold those experts (all-to-all over ``ep``; an all-gather
    over ``etp`` when experts are tensor-parallel). It receives as many token copies as it
    sent, times the busiest rank's imbalance, and runs its ``experts / ep`` experts as grouped
    GEMMs whose per-expert M is ``sp_tokens x top_k x etp x imbalance / local experts``; the
    results travel back (reduce-scatter over etp, all-to-all over ep) and are summed with
    their routing weights. Shared experts run as a dense MLP beside them, tensor-parallel
    like the attention (its sequence-parallel gather and scatter included). The dispatch
    waits for the host (``Comm.host_sync``), which must read the token counts before it can
    issue the dispatch and the expert GEMMs (with a capacity factor Megatron reads them a
    little earlier, before the permutation: the same one wait a layer). Between the router
    GEMM and the permutation run the routing's and the dispatcher's chains of small kernels
    (:mod:`ghsim.workload.routing`), the balancing loss's all-reduce of its token counts over
    tensor-parallel ranks, and the all-to-all dispatcher's all-gather of every rank's tokens
    per expert."""
    assert s.moe is not None
    m = s.moe
    t, h, e = s.sp_tokens, s.hidden, s.act_bytes
    slots = t * m.top_k
    routing, dispatch = m.routing, m.dispatch
    steps: list[Step] = [
        _gemm("router", t, m.experts, h, replace(s, gemm_dtype="bf16", weight_bytes=e)),
        # about one fp32 pass over the tokens' expert scores a kernel
        Kernel("router.routing", 0.0, routing.forward * t * m.experts * 4, "fp32",
               (t, m.experts), kernels=routing.forward, backward_kernels=routing.backward),
    ]
    if m.balancing_loss and s.tp > 1:  # the loss's tokens per expert, over the whole sequence
        steps += [Comm("router.aux_all_reduce", "all_reduce", "tp", m.experts * 8, s.tp)]
    if m.alltoall and m.ep > 1:  # every rank's tokens per expert, for the split sizes
        steps += [Comm("moe.counts_all_gather", "all_gather", "ep", m.ep * m.experts * 8, m.ep)]
    if dispatch.forward:  # about one pass over a boolean routing map a kernel
        steps += [Kernel("moe.preprocess", 0.0, dispatch.forward * t * m.experts, "int64",
                         (t, m.experts), kernels=dispatch.forward,
                         backward_kernels=dispatch.backward)]
    steps += [eltwise("moe.permute", slots * h, s)]
    # the host reads the per-expert token counts before the dispatch (Comm.host_sync)
    steps += _ep("moe.dispatch", "all_to_all", slots * h * e, "ep", m.ep, m.dedup,
                 host_sync=True)
    received = slots * m.etp
    steps += _ep("moe.etp_all_gather", "all_gather", received * h * e, "etp", m.etp)
    if m.multihot is not None:  # DeepEP's received indices to a routing map: 8 B a copy
        launches = m.multihot.launches
        steps += [Kernel("moe.multihot", 0.0, launches.forward * received * 8, "int64",
                         (received,), kernels=launches.forward,
                         backward_kernels=launches.backward,
                         host_syncs=m.multihot.forward_syncs,
                         backward_syncs=m.multihot.backward_syncs)]
    per_expert = m.rows_per_expert(t)
    tokens = per_expert * m.local_experts
    up = 2 * m.expert_ffn if s.gated else m.expert_ffn
    steps += _fp8_cast("experts.up", tokens * h, s, m.local_experts)
    steps += [_grouped("experts.up", per_expert, up, h, m.local_experts, s)]
    if "clamp" in s.eager:  # PyTorch ops on both halves before the fused activation
        steps += [fusable("experts.act_clamp", "clamp", tokens * up, s)]
    steps += [eltwise("experts.act", tokens * m.expert_ffn, s, reads=2 if s.gated else 1)]
    steps += _fp8_cast("experts.down", tokens * m.expert_ffn, s, m.local_experts)
    steps += [_grouped("experts.down", per_expert, h, m.expert_ffn, m.local_experts, s)]
    if m.bias:
        steps += [_expert_bias(tokens, h, m.local_experts, s)]
    steps += _ep("moe.etp_reduce_scatter", "reduce_scatter", received * h * e, "etp", m.etp)
    steps += _ep("moe.combine", "all_to_all", slots * h * e, "ep", m.ep, m.dedup)
    steps += [Kernel("moe.unpermute", 0.0, (slots + t) * h * e, "bf16", (slots * h,))]
    if m.shared_ffn:
        shared = replace(s, ffn=m.shared_ffn)
        steps += _mlp_block(shared, norm_fused=False)[:-1]  # the residual add is below
    steps += [residual("residual2", t * h, s)]
    return steps


_WEIGHTLESS_GEMMS = ("attn.qk", "attn.av")
"""GEMMs of two activations (unfused attention): their second backward GEMM is an activation
gradient, not a weight gradient."""


def _backward_of(kernel: Kernel, s: LayerShapes) -> list[Step]:
    """Data- and weight-gradient kernels of a forward kernel.

    A weight-gradient GEMM accumulates into the parameter's main gradient, which it reads and
    writes in ``s.grad_bytes``, besides reading the layer's input and output gradient:
    Megatron's gradient_accumulation_fusion (on by default) hands Transformer Engine
    ``fuse_wgrad_accumulation``, whose wgrad GEMM writes ``out=main_grad`` in its dtype with
    ``accumulate`` (NVIDIA/TransformerEngine@d0067d0 module/linear.py; only a micro-batch TE
    knows is the first skips the read). Where its K, the tokens a weight saw in the
    micro-batch, is small (experts with few tokens each), that traffic outweighs its
    arithmetic."""
    if kernel.klass == "gemm":
        m, n, k = kernel.shape
        # the tokens are the weight gradient's K: no partial tiles of theirs
        wgrad = replace(kernel, name=f"{kernel.name}.wgrad", shape=(k, n, m), spread_m=0.0)
        if kernel.name not in _WEIGHTLESS_GEMMS:
            inputs = (m * k + m * n) * s.act_bytes
            wgrad = replace(wgrad, bytes=kernel.groups * (inputs + 2 * k * n * s.grad_bytes))
        return [replace(kernel, name=f"{kernel.name}.dgrad", shape=(m, k, n)), wgrad]
    if kernel.klass == "attention":
        return [replace(kernel, name=f"{kernel.name}.bwd", flops=2 * kernel.flops,
                        bytes=2 * kernel.bytes)]
    if kernel.eager is not None:  # the op's autograd kernels
        forward, _, backward, kernels = EAGER[kernel.eager]
        ratio = backward / forward
        klass = "elementwise" if kernel.eager in REDUCED_BACKWARD else kernel.klass
        return [replace(kernel, name=f"{kernel.name}.bwd", bytes=kernel.bytes * ratio,
                        kernels=kernels, klass=klass, elements=kernel.elements * ratio)]
    if kernel.backward_kernels:
        scale = kernel.backward_kernels / kernel.kernels
        return [replace(kernel, name=f"{kernel.name}.bwd", bytes=1.5 * kernel.bytes * scale,
                        kernels=kernel.backward_kernels, backward_kernels=0,
                        host_syncs=kernel.backward_syncs, backward_syncs=0)]
    return [replace(kernel, name=f"{kernel.name}.bwd", bytes=1.5 * kernel.bytes)]


_BACKWARD_COMM = {  # forward collective -> what its backward runs
    "ln1.all_gather": [("ln1.bwd_reduce_scatter", "reduce_scatter"),
                       ("qkv.wgrad_all_gather", "all_gather")],
    "ln2.all_gather": [("ln2.bwd_reduce_scatter", "reduce_scatter"),
                       ("mlp_up.wgrad_all_gather", "all_gather")],
    "proj.reduce_scatter": [("proj.bwd_all_gather", "all_gather")],
    "mlp.reduce_scatter": [("mlp.bwd_all_gather", "all_gather")],
    "moe.dispatch": [("moe.dispatch_bwd", "all_to_all")],
    "moe.combine": [("moe.combine_bwd", "all_to_all")],
    "moe.etp_all_gather": [("moe.etp_all_gather_bwd", "reduce_scatter")],
    "moe.etp_reduce_scatter": [("moe.etp_reduce_scatter_bwd", "all_gather")],
    "router.aux_all_reduce": [],  # the loss's gradient needs no token counts
    "moe.counts_all_gather": [],  # the backward reuses the forward's split sizes
}
_NO_SP_BACKWARD = {"proj.all_reduce": "ln1.bwd_all_reduce", "mlp.all_reduce": "ln2.bwd_all_reduce"}


def _as_recompute(kernel: Kernel) -> Kernel:
    return replace(kernel, recompute=True)


_MODULE_STEPS: dict[str, tuple[str, ...]] = {
    "layernorm": ("ln1", "ln2"),
    "moe_act": ("experts.act_clamp", "experts.act"),
    "mla_up_proj": ("q_up", "kv_up", "rope"),
}
"""Selective recompute: the forward steps (by name, with their FP8 casts) each module redoes;
core_attn, mlp, shared_experts and moe are matched in :func:`_redoes`."""


def _redoes(module: str, name: str, moe: bool) -> bool:
    """Whether recomputing ``module`` redoes the forward step ``name`` of a (MoE) layer."""
    base = name.removesuffix(".fp8_cast_transpose")
    if module in _MODULE_STEPS:
        return base in _MODULE_STEPS[module]
    if module == "mlp":  # a dense layer's MLP (Megatron: "recompute the dense MLP layer")
        return not moe and base.startswith("mlp_")
    if module == "shared_experts":  # the MLP of a MoE layer is its shared experts'
        return moe and base.startswith("mlp_")
    if module == "moe":  # the whole block: router, permutations, all-to-alls, experts, and
        # the shared experts with their tensor-parallel collectives
        shared = base.startswith("mlp_") or base in ("mlp.reduce_scatter", "ln2.all_gather")
        return moe and (base.startswith(("router", "moe.", "experts.")) or shared)
    return False


def _recomputed(forward: list[Step], s: LayerShapes, moe: bool = False) -> list[Step]:
    """Forward work redone before the backward pass, marked as recompute: the whole layer
    (full), or the modules selective recompute names (``s.recompute_modules``)."""
    if s.recompute == "full":
        redone: list[Step] = []
        for step in forward:
            redone.append(_as_recompute(step) if isinstance(step, Kernel) else step)
        return redone
    if s.recompute != "selective":
        return []
    steps: list[Step] = []
    if s.recomputes("core_attn"):
        core = _mla_core(s) if s.mla is not None else attention_core(s)
        steps += [_as_recompute(k) for k in core if isinstance(k, Kernel)]
    for step in forward:
        if any(_redoes(module, step.name, moe) for module in s.recompute_modules):
            steps.append(_as_recompute(step) if isinstance(step, Kernel) else step)
    return steps


def layer_backward(s: LayerShapes, moe: bool = False) -> list[Step]:
    """One layer's backward pass on this rank (a MoE layer's when ``moe``), recomputation
    included."""
    forward = layer_forward(s, moe)
    steps = _recomputed(forward, s, moe)
    for step in reversed(forward):
        if isinstance(step, Kernel):
            steps += _backward_of(step, s)
        elif step.name in _NO_SP_BACKWARD:
            steps.append(replace(step, name=_NO_SP_BACKWARD[step.name]))
        elif step.group == "cp":
            # the ring passes the K/V chunks again and their gradients back: twice the bytes
            steps.append(replace(step, name="attn.cp_kv_dkv_ring_bwd", bytes=2 * step.bytes))
        else:
            # the counts are known from the forward; a norm's gradient is 16-bit whatever
            # its output's width (an FP8 gather's wgrad re-gather keeps the forward's bytes)
            steps += [replace(step, name=name, collective=kind,  # type: ignore[arg-type]
                              host_sync=False,
                              bytes=_tp_bytes(s)
                              if name.endswith("bwd_reduce_scatter") else step.bytes)
                      for name, kind in _BACKWARD_COMM[step.name]]
    return steps


def embedding_forward(s: LayerShapes) -> list[Step]:
    """Token embedding lookup (plus the learned position embedding's, added to it: one more
    read), scattered to the sequence-parallel layout."""
    return [eltwise("embedding", s.sp_tokens * s.hidden, s, reads=1 if s.rotary else 2)]


def embedding_backward(s: LayerShapes) -> list[Step]:
    return [eltwise("embedding.bwd", s.sp_tokens * s.hidden, s, reads=2)]


def _logits(s: LayerShapes) -> Kernel:
    """The output layer's GEMM. Under FP8 it stays BF16: Megatron's output layer is its own
    ColumnParallelLinear, not a Transformer Engine module, so fp8_autocast leaves it alone."""
    if not s.fp8:
        return _gemm("logits", s.tokens, s.vocab, s.hidden, s)
    return _gemm("logits", s.tokens, s.vocab, s.hidden, replace(s, gemm_dtype="bf16",
                                                                  weight_bytes=s.act_bytes))


def head_forward(s: LayerShapes) -> list[Step]:
    """Final norm, logits GEMM over this rank's vocabulary shard, and the cross-entropy loss."""
    steps: list[Step] = [fusable("final_ln", "norm", s.sp_tokens * s.hidden, s, klass="norm")]
    steps += _tp("final_ln.all_gather", "all_gather", s) if s.sequence_parallel else []
    steps += [_logits(s), *_loss(s, backward=False)]
    return steps


def _loss(s: LayerShapes, backward: bool) -> list[Step]:
    """Megatron's vocab-parallel cross-entropy over this rank's logits, as its unfused code
    moves them (megatron/core/tensor_parallel/cross_entropy.py): the forward pass upcasts the
    16-bit logits to fp32 (read 2, write 4 bytes a logit), takes their maximum (read 4),
    subtracts it, exponentiates and divides by the sum in place (read and write 4 each) and
    sums (read 4); the backward pass scales the saved softmax by the loss gradient in place
    (read and write 4) and casts it back for the output layer's GEMMs (read 4, write 2). The
    subtraction, the division and the scaling broadcast one value a token over the vocabulary,
    so they run as PyTorch's non-vectorized kernels, one element a logit each (``loss.broadcast``,
    ``loss.bwd.broadcast``; on the A100 traces at 197 and 190 G elements/s in fp32, the same
    rate as 16-bit copies: ``python benchmarks/strided_kernels.py``); the other passes stream.
    The fused version (--cross-entropy-loss-fusion, megatron/core/fusions/fused_cross_entropy.py
    as of early 2025, swiss-ai/Megatron-LM@415da45c) takes the maximum in the upcast's pass
    and the shift in the exponential's, and scales and casts the gradient in one pass, in
    compiled kernels. Transformer Engine's fused version (``cross_entropy_impl`` te, TE v2.9
    transformer_engine/pytorch/triton/cross_entropy.py) never leaves the logits' width: an
    online-softmax pass reads them, a second reads them again and writes the gradient in
    their place, and the backward pass scales it in place (read and write). Streaming passes
    are costed at the stream rate."""
    upcast = s.act_bytes + 4 if s.act_bytes != 4 else 0  # fp32 logits are not copied
    broadcasts = 0  # the unfused code's passes that broadcast over the vocabulary
    if s.cross_entropy_fusion and s.cross_entropy_impl == "te":
        per_logit = (2 if backward else 3) * s.act_bytes
    elif backward:
        per_logit = (upcast or 8) if s.cross_entropy_fusion else upcast
        broadcasts = 0 if s.cross_entropy_fusion else 1  # the scaling
    elif s.cross_entropy_fusion:
        per_logit = (upcast or 4) + 8 + 4 + 8  # upcast + max, exp(x - max), sum, divide
    else:
        per_logit = upcast + 4 + 8 + 4  # upcast, max, exp, sum
        broadcasts = 2  # the shift and the division
    name = "loss.bwd" if backward else "loss"
    logits = s.tokens * s.vocab
    steps: list[Step] = []
    if per_logit:
        steps.append(Kernel(name, 0.0, float(logits * per_logit), "fp32", (s.tokens, s.vocab),
                            "loss"))
    if broadcasts:
        steps.append(Kernel(f"{name}.broadcast", 0.0, float(logits * 8 * broadcasts), "fp32",
                            (s.tokens, s.vocab), "strided", kernels=broadcasts,
                            elements=float(logits * broadcasts)))
    return steps


def mtp_forward(s: LayerShapes, moe: bool) -> list[Step]:
    """One multi-token-prediction module (DeepSeek-V3, Megatron-Core MultiTokenPredictionLayer)
    on the last stage: the next token's embedding and the hidden state are normalized, joined
    and projected back to the hidden width (a 2h x h GEMM), run through one transformer layer,
    and scored by the shared output layer and its loss."""
    t, h = s.sp_tokens, s.hidden
    steps: list[Step] = [eltwise("mtp.embedding", t * h, s),
                         eltwise("mtp.enorm", t * h, s, klass="norm"),
                         eltwise("mtp.hnorm", t * h, s, klass="norm"),
                         _gemm("mtp.proj", t, h, 2 * h, replace(s, gemm_dtype="bf16",
                                                                weight_bytes=s.act_bytes))]
    steps += layer_forward(s, moe)
    return steps + [replace(k, name=f"mtp.{k.name}") if isinstance(k, Kernel) else k
                    for k in head_forward(s)]


def mtp_backward(s: LayerShapes, moe: bool) -> list[Step]:
    """The backward pass of :func:`mtp_forward`, its head first."""
    steps: list[Step] = [replace(k, name=f"mtp.{k.name}") if isinstance(k, Kernel) else k
                         for k in head_backward(s)]
    steps += layer_backward(s, moe)
    t, h = s.sp_tokens, s.hidden
    projection = _gemm("mtp.proj", t, h, 2 * h, replace(s, gemm_dtype="bf16",
                                                         weight_bytes=s.act_bytes))
    steps += _backward_of(projection, s)
    steps += [eltwise("mtp.norms.bwd", 2 * t * h, s, reads=2, klass="norm"),
              eltwise("mtp.embedding.bwd", t * h, s, reads=2)]
    return steps


def head_backward(s: LayerShapes) -> list[Step]:
    steps: list[Step] = _loss(s, backward=True)
    steps += _backward_of(_logits(s), s)
    if s.sequence_parallel:
        steps += _tp("final_ln.bwd_reduce_scatter", "reduce_scatter", s)
    elif s.tp > 1:
        steps += _tp("final_ln.bwd_all_reduce", "all_reduce", s)
    steps += _backward_of(fusable("final_ln", "norm", s.sp_tokens * s.hidden, s,
                                  klass="norm"), s)
    return steps
