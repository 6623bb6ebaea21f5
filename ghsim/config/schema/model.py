"""``kind: model``: a decoder-only transformer's architecture."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ghsim.config.schema.base import DocumentSpec, Name, PositiveFloat, PositiveInt, Sources

Activation = Literal["gelu", "relu", "squared_relu", "xielu", "swiglu", "geglu"]
_GATED: frozenset[str] = frozenset({"swiglu", "geglu"})
LEARNED_ACTIVATION_PARAMS: dict[str, int] = {"xielu": 2}
"""Learned scalars of one MLP's activation function. xIELU (Huang and Schlag 2024, 'Deriving
Activation Functions Using Integration', arXiv:2411.13010; Apertus) learns alpha_p and alpha_n
per layer: swiss-ai/Megatron-LM@5fbc12419176b5cbbb96a31b4d6f1f100c2935c1
megatron/core/activations.py, class XIELU (two one-element nn.Parameters, beta and eps fixed)."""


class ModelSpec(DocumentSpec):
    """Architecture of a decoder-only transformer.

    The first eight fields are the contract (DESIGN.md section 7); the rest refine parameter counts
    and default to a bias-free, untied, rotary-embedding model.
    """

    KIND = "model"

    name: Name
    layers: PositiveInt
    hidden: PositiveInt
    heads: PositiveInt
    kv_heads: PositiveInt
    ffn_hidden: PositiveInt
    vocab: PositiveInt
    gated_mlp: bool
    head_dim: PositiveInt | None = Field(default=None, description="Default: hidden / heads.")
    activation: Activation | None = Field(
        default=None, description="The MLP's activation function; default: swiglu when "
        "gated_mlp, else gelu. Gated (needs gated_mlp: true): swiglu, geglu. Non-gated (up and "
        "down matrices only): gelu, relu, squared_relu (Primer), xielu (Apertus; "
        "arXiv:2411.13010, with two learned scalars per layer). Each is one fused element-wise "
        "kernel reading its input and writing its output.",
    )
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    position_embedding: Literal["learned", "rope", "none"] = "rope"
    max_position_embeddings: PositiveInt | None = None
    tied_embeddings: bool = Field(
        default=False, description="The output (logits) projection shares the input "
        "embedding's matrix: no output parameters, gradients or optimizer states of its own "
        "(with pp > 1 the last stage keeps a copy whose gradient is all-reduced with the first "
        "stage's).",
    )
    bias: bool = Field(default=False, description="Linear layers carry biases (GPT-2/3 style).")
    qk_norm: bool = Field(
        default=False, description="Norms on each head's queries and keys after the QKV "
        "projection (Qwen3, Apertus; Megatron --qk-layernorm): one weight of head_dim (and a "
        "bias with layernorm) shared by the heads, for queries and for keys, and two "
        "element-wise norm kernels per layer.",
    )
    dropout: float = Field(
        default=0.0, ge=0.0, lt=1.0,
        description="Hidden and attention dropout probability (Megatron GPT defaults: 0.1).",
    )
    published_params: PositiveFloat | None = Field(
        default=None, description="The parameter count its authors publish, for checking."
    )
    sources: Sources = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        if self.heads % self.kv_heads:
            raise ValueError(
                f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})"
            )
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(
                f"hidden ({self.hidden}) is not a multiple of heads ({self.heads}); give head_dim"
            )
        if self.activation is not None and (self.activation in _GATED) != self.gated_mlp:
            raise ValueError(
                f"activation {self.activation!r} contradicts gated_mlp: {self.gated_mlp}"
            )
        if self.position_embedding == "learned" and self.max_position_embeddings is None:
            raise ValueError("position_embedding 'learned' needs max_position_embeddings")
        return self

    @property
    def head_dim_resolved(self) -> int:
        """Width of one attention head."""
        return self.head_dim if self.head_dim is not None else self.hidden // self.heads

    @property
    def activation_resolved(self) -> Activation:
        if self.activation is not None:
            return self.activation
        return "swiglu" if self.gated_mlp else "gelu"
