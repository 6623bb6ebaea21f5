"""Closed forms for a transformer's size: parameter counts and model FLOPs per token.

FLOPs follow the Megatron/NeMo convention of FACTS.md: training FLOPs per token =
3 * [L * (2h(h + 2*kv*hd) + 2h^2 + c*h*ffn + 4*s*h) + 2hV], with c = 6 for gated MLPs and 4
otherwise; causal attention is not halved and recompute is not counted. ``2h(h + 2 kv hd)`` is
the QKV projection, ``2h^2`` the output projection; with ``head_dim`` given, ``heads * head_dim``
replaces the first ``h`` of each. The model FLOPs ignore the attention mask, as Megatron's
formula does: a document mask (``training.attention_mask``) changes only the executed attention
work (:func:`ghsim.workload.kernels.attention_core`), never these.
"""

from __future__ import annotations

from dataclasses import dataclass

from ghsim.config.schema import ModelSpec
from ghsim.config.schema.model import LEARNED_ACTIVATION_PARAMS


@dataclass(frozen=True)
class ParamCount:
    """Parameters of a model, by part."""

    embedding: int
    """Input token embedding plus learned positions."""
    output: int
    """The output (logits) projection; zero when tied to the embedding."""
    attention_per_layer: int
    mlp_per_layer: int
    norms_per_layer: int
    final_norm: int
    layers: int

    @property
    def per_layer(self) -> int:
        return self.attention_per_layer + self.mlp_per_layer + self.norms_per_layer

    @property
    def non_embedding(self) -> int:
        """Parameters outside the embedding and output projection."""
        return self.layers * self.per_layer + self.final_norm

    @property
    def total(self) -> int:
        return self.embedding + self.output + self.non_embedding


def parameter_count(model: ModelSpec) -> ParamCount:
    """Count the parameters of ``model``: biases, norms (with ``qk_norm`` one of ``head_dim``
    for the queries and one for the keys, as Megatron's ``--qk-layernorm`` and Qwen3 share
    them over heads) and an activation's learned scalars (xIELU's two) included; the output
    projection only when untied."""
    h, hd = model.hidden, model.head_dim_resolved
    q_width, kv_width = model.heads * hd, model.kv_heads * hd
    attention = h * q_width + 2 * h * kv_width + q_width * h
    gated = model.gated_mlp
    mlp = (3 if gated else 2) * h * model.ffn_hidden
    if model.bias:
        attention += q_width + 2 * kv_width + h
        mlp += (2 if gated else 1) * model.ffn_hidden + h
    per_width = 2 if model.norm == "layernorm" else 1  # a weight, and a bias with layernorm
    if model.qk_norm:
        attention += 2 * per_width * hd  # one norm for queries, one for keys, shared by heads
    mlp += LEARNED_ACTIVATION_PARAMS.get(model.activation_resolved, 0)
    norm_width = per_width * h
    embedding = model.vocab * h
    if model.position_embedding == "learned":
        assert model.max_position_embeddings is not None  # checked by ModelSpec
        embedding += model.max_position_embeddings * h
    return ParamCount(
        embedding=embedding,
        output=0 if model.tied_embeddings else model.vocab * h,
        attention_per_layer=attention,
        mlp_per_layer=mlp,
        norms_per_layer=2 * norm_width,
        final_norm=norm_width,
        layers=model.layers,
    )


def model_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """Training (forward + backward) model FLOPs per token at ``seq_len`` (FACTS.md formula)."""
    h, hd, L = model.hidden, model.head_dim_resolved, model.layers
    q_width = model.heads * hd
    qkv = 2 * h * (q_width + 2 * model.kv_heads * hd)
    projection = 2 * q_width * h
    mlp = (6 if model.gated_mlp else 4) * h * model.ffn_hidden
    attention_scores = 4 * seq_len * q_width
    logits = 2 * h * model.vocab
    return 3.0 * (L * (qkv + projection + mlp + attention_scores) + logits)
