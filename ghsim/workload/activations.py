"""Activation memory that one layer keeps for its backward pass, per micro-batch, per rank.

Tensor by tensor as in Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", arXiv:2205.05198, section 4), generalized to grouped-query attention, gated
MLPs, flash attention, context parallelism and query/key norms (whose inputs, the projected
queries and keys, are kept beside the normalized Q, K and V the attention core keeps). For a
GPT layer with dropout, standard attention and tensor parallelism ``t`` this reproduces their
closed forms (bytes per layer):

* no sequence parallelism:  ``s b h (10 + 24/t + 5 a s / (h t))``
* sequence parallelism:     ``s b h (34/t + 5 a s / (h t))``
* selective recompute + SP: ``s b h 34/t``
* full recompute:           ``2 s b h`` (``/t`` with sequence parallelism)

Under FP8 the linear layers' saved inputs are the FP8 casts Transformer Engine multiplied with
(:attr:`~ghsim.workload.shapes.LayerShapes.saved_gemm_input_bytes`); norm inputs, Q, K, V
and the activation function's input stay in BF16.
"""

from __future__ import annotations

from ghsim.workload.shapes import LayerShapes


def layer_activation_bytes(s: LayerShapes, moe: bool = False) -> float:
    """Bytes one layer (a MoE layer's when ``moe``) stores between its forward and backward
    pass, for one micro-batch."""
    e, h = s.act_bytes, s.hidden
    t = s.tokens
    outside = s.sp_tokens  # tensors outside the tensor-parallel region (split with SP)
    if s.recompute == "full":
        return outside * h * e  # only the layer's input
    mask = 1 if s.dropout else 0  # one byte per element for each dropout mask
    g = s.saved_gemm_input_bytes  # a linear layer's saved input (FP8 under FP8)
    qkv: float = t * (s.q_width + 2 * s.kv_width) * e  # Q, K, V
    if s.mla is not None and s.recomputes("mla_up_proj"):  # the latents instead
        qkv = t * (s.mla.q_lora + s.mla.kv_lora) * g
    attention = float(
        outside * h * e  # norm input
        + outside * h * g  # QKV GEMM input (SP keeps it sharded and re-gathers it)
        + qkv
        + (t * (s.q_width + s.kv_width) * e if s.qk_norm else 0)  # Q and K norms' inputs
        + t * s.q_width * g  # attention output: the projection's input
        + outside * h * mask  # dropout mask after the projection
    )
    if not s.recomputes("core_attn"):
        attention += _attention_core_bytes(s)
    if moe and s.moe is not None:
        return float(attention + _moe_bytes(s))
    up = 2 * s.ffn if s.gated else s.ffn
    # the activation function's and the down projection's inputs, unless the MLP is redone
    inside = 0.0 if s.recomputes("mlp") else t * up * e + t * s.ffn * g
    mlp = float(
        outside * h * e  # norm input
        + outside * h * g  # up-projection input
        + inside
        + outside * h * mask  # dropout mask
    )
    return float(attention + mlp)


def _moe_bytes(s: LayerShapes) -> float:
    """A MoE block's saved tensors: the norm's input and the router's scores for its tokens,
    the permuted token copies (the experts' up-projection input), and per received token the
    activation function's and the down projection's inputs (and, with clamped halves, the
    clamps' output the activation keeps); a shared expert's as a dense MLP."""
    assert s.moe is not None
    m, e, h, t = s.moe, s.act_bytes, s.hidden, s.sp_tokens
    g = s.saved_gemm_input_bytes  # the experts' GEMM inputs (FP8 under FP8)
    received = t * m.top_k * m.etp * m.imbalance
    up = 2 * m.expert_ffn if s.gated else m.expert_ffn
    if s.recomputes("moe"):  # the whole block is redone from its input
        return float(t * h * e)
    down_input = 0.0 if s.recomputes("moe_act") else m.expert_ffn * g
    # clamped halves: the activation keeps their concatenation beside the clamps' input
    clamped = up * e if "clamp" in s.eager and not s.recomputes("moe_act") else 0.0
    routed = (t * h * e + t * m.experts * 4 + received * h * g
              + received * (up * e + clamped + down_input))
    shared = 0.0
    if m.shared_ffn:
        shared_up = 2 * m.shared_ffn if s.gated else m.shared_ffn
        shared = s.tokens * h * g
        if not s.recomputes("shared_experts"):
            shared += s.tokens * (shared_up * e + m.shared_ffn * g)
    return float(routed + shared)


def _attention_core_bytes(s: LayerShapes) -> float:
    """What the attention core keeps: the s x s scores (standard) or softmax statistics (flash)."""
    if s.flash:
        return float(s.heads * s.tokens * 4)  # one fp32 log-sum-exp per query and head
    scores = s.heads * s.tokens * s.seq_len
    if s.dropout:
        return float(scores * (2 * s.act_bytes + 1))  # softmax output, dropout mask, its output
    return float(scores * s.act_bytes)  # softmax output


def head_activation_bytes(s: LayerShapes) -> float:
    """The last stage's final norm input and FP32 logits kept for the loss's backward."""
    return float(s.sp_tokens * s.hidden * s.act_bytes + s.tokens * s.vocab * 4)
