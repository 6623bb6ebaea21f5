"""Closed forms for a transformer's size: parameter counts and model FLOPs per token.

Dense models (no ``model.moe``, no MLA, no MTP modules) keep the Megatron/NeMo convention of
FACTS.md: training FLOPs per token = 3 * [L * (2h(h + 2*kv*hd) + 2h^2 + c*h*ffn + 4*s*h) + 2hV],
with c = 6 for gated MLPs and 4 otherwise; causal attention is not halved and recompute is not
counted. ``2h(h + 2 kv hd)`` is the QKV projection, ``2h^2`` the output projection; with
``head_dim`` given, ``heads * head_dim`` replaces the first ``h`` of each.

Mixture-of-Experts, MLA and MTP models follow Megatron-Core's own formula instead
(:func:`megatron_flops_per_token`, a port of ``num_floating_point_operations`` in
megatron/training/training.py at NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553),
so that ghsim's model FLOPs and MFU agree with the TFLOP/s the published MoE runs report. That
formula differs from the dense one above in one term only: since Megatron-LM 8873b55 (2025-03-06,
"Fixes in number of floating-point operation estimates for MoE and attention layer") it halves
the core attention for the causal mask (6*s*heads*hd per layer and token where the dense formula
has 12*s*heads*hd); it also uses the padded vocabulary where ghsim uses ``model.vocab``.

The model FLOPs ignore the attention mask, as Megatron's formula does: a document mask
(``training.attention_mask``) or a sliding window (``model.attention.sliding_window``) changes only
the executed attention work (:func:`ghsim.workload.kernels.attention_core`), never these.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ghsim.config.schema import ModelSpec
from ghsim.config.schema.model import LEARNED_ACTIVATION_PARAMS


@dataclass(frozen=True)
class ParamCount:
    """Parameters of a model, by part.

    For a dense model the per-layer fields describe every layer. For an MoE model
    ``attention_per_layer`` and ``norms_per_layer`` are those of every layer, ``mlp_per_layer``
    and :attr:`per_layer` describe a *dense* layer (its MLP ``model.ffn_hidden`` wide: the
    ``moe.dense_layers`` first layers, and those ``moe.layer_freq`` skips), and
    :attr:`moe_per_layer` an MoE layer; :func:`layer_params` gives any one layer's size.
    Multi-token-prediction (MTP) modules are counted in :attr:`mtp`, outside ``layers``.
    """

    embedding: int
    """Input token embedding plus learned positions."""
    output: int
    """The output (logits) projection; zero when tied to the embedding."""
    attention_per_layer: int
    """One layer's attention block: projections (MLA's down/up projections and latent norms),
    biases, qk norms, sinks."""
    mlp_per_layer: int
    """One dense layer's MLP (``model.ffn_hidden`` wide)."""
    norms_per_layer: int
    """One layer's two norms (before attention and before the MLP)."""
    final_norm: int
    layers: int
    """Transformer layers of the main model (MTP modules not included)."""
    moe_layers: int = 0
    """How many of ``layers`` are MoE layers (:func:`is_moe_layer`)."""
    expert: int = 0
    """Parameters of ONE routed expert (its MLP, ``moe.expert_ffn_hidden`` wide)."""
    experts: int = 0
    """Routed experts per MoE layer."""
    top_k: int = 0
    """Routed experts each token uses per MoE layer."""
    router_per_moe_layer: int = 0
    """The router (gate) of one MoE layer: ``experts x hidden`` (+ a bias per expert with
    ``model.bias``)."""
    shared_per_moe_layer: int = 0
    """All shared experts of one MoE layer together."""
    mtp: int = 0
    """Every MTP module's parameters (two norms, the 2h x h projection, its transformer layer
    and final norm), excluding the embedding and output head they share with the main model."""
    mtp_layers: int = 0
    """MTP modules (``model.mtp_layers``)."""
    mtp_moe_layers: int = 0
    """MTP modules whose transformer layer is an MoE layer (all of them when the main model's
    last layer is MoE, as Megatron builds them; else none)."""

    @property
    def per_layer(self) -> int:
        """A dense layer: every layer of a dense model (see the class docstring for MoE)."""
        return self.attention_per_layer + self.mlp_per_layer + self.norms_per_layer

    @property
    def dense_layers(self) -> int:
        """Layers of the main model whose MLP is dense."""
        return self.layers - self.moe_layers

    @property
    def moe_mlp_per_layer(self) -> int:
        """The MLP part of an MoE layer: router, shared experts and every routed expert."""
        return self.router_per_moe_layer + self.shared_per_moe_layer + self.experts * self.expert

    @property
    def moe_per_layer(self) -> int:
        """An MoE layer: attention + norms + router + shared experts + all routed experts
        (zero for a dense model)."""
        if not self.moe_layers:
            return 0
        return self.attention_per_layer + self.norms_per_layer + self.moe_mlp_per_layer

    @property
    def inactive_per_moe_layer(self) -> int:
        """Routed-expert parameters of one MoE layer that one token does not use."""
        return (self.experts - self.top_k) * self.expert

    @property
    def non_embedding(self) -> int:
        """Parameters outside the embedding and output projection (MTP modules included)."""
        return (self.dense_layers * self.per_layer + self.moe_layers * self.moe_per_layer
                + self.final_norm + self.mtp)

    @property
    def total(self) -> int:
        """Every parameter, MTP modules included."""
        return self.embedding + self.output + self.non_embedding

    @property
    def active(self) -> int:
        """Parameters one token uses: everything but the ``experts - top_k`` routed experts of
        each MoE layer (MTP modules' included) that it is not routed to. Equals :attr:`total`
        for a dense model. The input embedding counts in full, as Qwen, DeepSeek, Mistral and
        Meta count it."""
        return self.total - (self.moe_layers + self.mtp_moe_layers) * self.inactive_per_moe_layer

    @property
    def main_total(self) -> int:
        """:attr:`total` without the MTP modules: the main model, as published counts go."""
        return self.total - self.mtp

    @property
    def main_active(self) -> int:
        """:attr:`active` of the main model (without the MTP modules)."""
        return self.main_total - self.moe_layers * self.inactive_per_moe_layer


def _check_index(model: ModelSpec, index: int) -> None:
    if not 0 <= index < model.layers:
        raise IndexError(f"layer index {index} outside 0..{model.layers - 1}")


def is_moe_layer(model: ModelSpec, index: int) -> bool:
    """Whether 0-based layer ``index`` of the main model has an MoE MLP: ``index >=
    moe.dense_layers`` and ``(index - moe.dense_layers) % moe.layer_freq == 0`` (Megatron's
    integer ``--moe-layer-freq`` when ``dense_layers`` is 0; see
    :class:`ghsim.config.schema.model.MoeSpec`). Always False for a dense model."""
    _check_index(model, index)
    moe = model.moe
    if moe is None or index < moe.dense_layers:
        return False
    return (index - moe.dense_layers) % moe.layer_freq == 0


def moe_layer_count(model: ModelSpec) -> int:
    """How many layers of the main model are MoE layers."""
    moe = model.moe
    if moe is None:
        return 0
    after = model.layers - moe.dense_layers
    return (after + moe.layer_freq - 1) // moe.layer_freq


def attention_window(model: ModelSpec, index: int) -> int | None:
    """The sliding window (tokens) of 0-based layer ``index``, or None where it attends fully:
    every layer has ``attention.sliding_window`` unless ``(index + 1) %
    attention.full_attention_every == 0`` (Megatron ``window_attn_skip_freq``)."""
    _check_index(model, index)
    spec = model.attention
    if spec is None or spec.sliding_window is None:
        return None
    every = spec.full_attention_every
    if every is not None and (index + 1) % every == 0:
        return None
    return spec.sliding_window


def _mlp(model: ModelSpec, width: int) -> int:
    """One MLP (dense, routed or shared expert) ``width`` wide: up (and gate) and down
    matrices, biases with ``model.bias``, and the activation's learned scalars."""
    h, gated = model.hidden, model.gated_mlp
    params = (3 if gated else 2) * h * width
    if model.bias:
        params += (2 if gated else 1) * width + h
    return params + LEARNED_ACTIVATION_PARAMS.get(model.activation_resolved, 0)


@dataclass(frozen=True)
class MlaDims:
    """Multi-head latent attention's widths (``model.attention``, type mla)."""

    q_lora: int | None
    """Rank of the query down-projection; None: queries are projected directly."""
    kv_lora: int
    nope: int
    rope: int
    v: int


def mla_dims(model: ModelSpec) -> MlaDims | None:
    """The MLA widths of ``model``, None unless its attention is MLA (the keys are required
    with mla, checked by AttentionSpec)."""
    spec = model.attention
    if model.attention_type != "mla" or spec is None:
        return None
    assert spec.kv_lora_rank is not None and spec.qk_nope_head_dim is not None
    assert spec.qk_rope_head_dim is not None and spec.v_head_dim is not None
    return MlaDims(spec.q_lora_rank, spec.kv_lora_rank, spec.qk_nope_head_dim,
                   spec.qk_rope_head_dim, spec.v_head_dim)


def _attention(model: ModelSpec, per_width: int) -> int:
    h, hd, heads = model.hidden, model.head_dim_resolved, model.heads
    spec = model.attention
    mla = mla_dims(model)
    if mla is not None:
        nope, rope, v = mla.nope, mla.rope, mla.v
        q_width = heads * (nope + rope)
        if mla.q_lora is None:
            attention = h * q_width
        else:  # down projection, its norm, up projection
            attention = h * mla.q_lora + per_width * mla.q_lora
            attention += mla.q_lora * q_width
        kv = mla.kv_lora
        attention += h * (kv + rope) + per_width * kv + kv * heads * (nope + v)
        attention += heads * v * h
    else:
        q_width, kv_width = heads * hd, model.kv_heads * hd
        attention = h * q_width + 2 * h * kv_width + q_width * h
        if model.bias:
            attention += q_width + 2 * kv_width + h
        if model.qk_norm:
            attention += 2 * per_width * hd  # one norm for queries, one for keys, shared by heads
    if spec is not None and spec.sinks:
        attention += heads
    return attention


def parameter_count(model: ModelSpec) -> ParamCount:
    """Count the parameters of ``model``: biases, norms (with ``qk_norm`` one of ``head_dim``
    for the queries and one for the keys, as Megatron's ``--qk-layernorm`` and Qwen3 share
    them over heads) and an activation's learned scalars (xIELU's two) included; the output
    projection only when untied.

    MLA (``attention.type: mla``): query down ``h x q_lora`` + its norm ``q_lora`` + query up
    ``q_lora x heads*(nope+rope)`` (``h x heads*(nope+rope)`` without ``q_lora_rank``), key/value
    down ``h x (kv_lora + rope)`` + its norm ``kv_lora`` + up ``kv_lora x heads*(nope+v)``, output
    ``heads*v x h``. MoE: each routed and shared expert is an MLP like the dense one, the router
    ``experts x h`` (DeepSeek-V3's per-expert routing bias is a buffer in Megatron, not
    counted). Sinks: one per head per layer."""
    h = model.hidden
    per_width = 2 if model.norm == "layernorm" else 1  # a weight, and a bias with layernorm
    attention = _attention(model, per_width)
    mlp = _mlp(model, model.ffn_hidden)
    norm_width = per_width * h
    embedding = model.vocab * h
    if model.position_embedding == "learned":
        assert model.max_position_embeddings is not None  # checked by ModelSpec
        embedding += model.max_position_embeddings * h
    moe = model.moe
    expert = experts = top_k = router = shared = 0
    if moe is not None:
        expert, experts, top_k = _mlp(model, moe.expert_ffn_hidden), moe.experts, moe.top_k
        router = moe.experts * h + (moe.experts if model.bias else 0)
        if moe.shared_experts:
            assert moe.shared_expert_ffn_hidden is not None  # checked by MoeSpec
            shared = moe.shared_experts * _mlp(model, moe.shared_expert_ffn_hidden)
    moe_layers = moe_layer_count(model)
    last_is_moe = is_moe_layer(model, model.layers - 1)
    count = ParamCount(
        embedding=embedding,
        output=0 if model.tied_embeddings else model.vocab * h,
        attention_per_layer=attention,
        mlp_per_layer=mlp,
        norms_per_layer=2 * norm_width,
        final_norm=norm_width,
        layers=model.layers,
        moe_layers=moe_layers,
        expert=expert,
        experts=experts,
        top_k=top_k,
        router_per_moe_layer=router,
        shared_per_moe_layer=shared,
    )
    if not model.mtp_layers:
        return count
    # Megatron's MultiTokenPredictionLayer: enorm, hnorm, eh_proj (2h -> h, no bias), one
    # transformer layer built like the last decoder layer, final layernorm.
    layer = count.moe_per_layer if last_is_moe else count.per_layer
    module = 3 * norm_width + 2 * h * h + layer
    return replace(count, mtp=model.mtp_layers * module, mtp_layers=model.mtp_layers,
                   mtp_moe_layers=model.mtp_layers if last_is_moe else 0)


def layer_params(model: ModelSpec, index: int) -> int:
    """Parameters of 0-based layer ``index`` of the main model (attention, norms and its dense
    or MoE MLP), so that a pipeline stage can sum its own layers."""
    count = parameter_count(model)
    return count.moe_per_layer if is_moe_layer(model, index) else count.per_layer


def _plain_dense(model: ModelSpec) -> bool:
    return model.moe is None and model.attention_type != "mla" and model.mtp_layers == 0


def model_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """Training (forward + backward) model FLOPs per token at ``seq_len``: the FACTS.md
    formula for a plain dense model, Megatron-Core's (:func:`megatron_flops_per_token`) for MoE,
    MLA and MTP models."""
    if not _plain_dense(model):
        return megatron_flops_per_token(model, seq_len)
    h, hd, L = model.hidden, model.head_dim_resolved, model.layers
    q_width = model.heads * hd
    qkv = 2 * h * (q_width + 2 * model.kv_heads * hd)
    projection = 2 * q_width * h
    mlp = (6 if model.gated_mlp else 4) * h * model.ffn_hidden
    attention_scores = 4 * seq_len * q_width
    logits = 2 * h * model.vocab
    return 3.0 * (L * (qkv + projection + mlp + attention_scores) + logits)


def megatron_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """Megatron-Core's training FLOPs per token at ``seq_len`` (unpacked sequences of that
    length): ``num_floating_point_operations`` / ``transformer_flops`` of
    megatron/training/training.py at NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
    (the file last changed in da5a81d4), divided by ``batch * seq_len``.

    Per token, with 3 (forward, weight and data gradient) x 2 (multiply-add) = 6 per weight:
    ``6h * c * (ffn * dense_layers + moe_ffn * top_k * moe_layers + shared_ffn * moe_layers)``
    with ``c`` = 3 for gated (SwiGLU) MLPs and 2 otherwise; plus the attention projections of
    every layer (GQA ``6 (h (q + 2 kv) + q h)``; MLA ``6 (q_term + kv_lora (h + heads (nope + v)
    + 1) + h rope + heads v h)`` with ``q_term = q_lora (h + heads (nope + rope) + 1)``, or
    ``h heads (nope + rope)`` without ``q_lora``); plus core attention ``s * 6 q`` per layer
    (causal: QK^T and PV halved), ``s * 6 (heads (nope + rope) / 2 + heads v / 2)`` for MLA;
    plus ``6 * mtp * (3h + 2h^2)`` for the MTP modules' norms and projection and ``6 h V (1 +
    mtp)`` for the logits. ``moe_layers`` follows ``--moe-layer-freq``; the MTP modules count
    as extra layers (MoE when the last layer is). ``shared_ffn`` is Megatron's total
    ``--moe-shared-expert-intermediate-size`` = ``shared_experts * shared_expert_ffn_hidden``.
    Biases, norms, routers and sinks are not counted, as in Megatron; ``V`` is ``model.vocab``
    (Megatron pads it to a multiple of 128 x tp)."""
    h, L, heads = model.hidden, model.layers, model.heads
    mtp = model.mtp_layers
    c = 3 if model.gated_mlp else 2
    moe = model.moe
    moe_layers = moe_layer_count(model)
    dense_layers = L - moe_layers
    if is_moe_layer(model, L - 1):
        moe_layers += mtp
    else:
        dense_layers += mtp
    layers = L + mtp
    routed = shared = 0
    if moe is not None:
        routed = moe.expert_ffn_hidden * moe.top_k
        shared = moe.shared_experts * (moe.shared_expert_ffn_hidden or 0)
    mlp = 6 * h * c * (model.ffn_hidden * dense_layers + (routed + shared) * moe_layers)
    mla = mla_dims(model)
    if mla is not None:
        nope, rope, v = mla.nope, mla.rope, mla.v
        if mla.q_lora is None:
            q_term = h * heads * (nope + rope)
        else:
            q_term = mla.q_lora * (h + heads * (nope + rope) + 1)
        kv_term = mla.kv_lora * (h + heads * (nope + v) + 1) + h * rope
        projections = 6 * (q_term + kv_term + heads * v * h)
        core = 6 * (heads * (nope + rope) / 2 + heads * v / 2)
    else:
        hd = model.head_dim_resolved
        q, kv = heads * hd, model.kv_heads * hd
        projections = 6 * (h * (q + 2 * kv) + q * h)
        core = 6 * q / 2 * 2  # causal mask halves it; QK^T and (QK^T)V
    mtp_extra = 6 * mtp * (3 * h + 2 * h * h)
    logits = 6 * h * model.vocab * (mtp + 1)
    return float(mlp + projections * layers + mtp_extra + logits + seq_len * core * layers)
