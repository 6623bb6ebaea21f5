"""``kind: model``: a decoder-only transformer's architecture."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ghsim.config.schema.base import (
    DocumentSpec,
    Name,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Sources,
    Spec,
)

Activation = Literal["gelu", "relu", "squared_relu", "xielu", "swiglu", "geglu"]
_GATED: frozenset[str] = frozenset({"swiglu", "geglu"})
LEARNED_ACTIVATION_PARAMS: dict[str, int] = {"xielu": 2}
"""Learned scalars of one MLP's activation function. xIELU (Huang and Schlag 2024, 'Deriving
Activation Functions Using Integration', arXiv:2411.13010; Apertus) learns alpha_p and alpha_n
per layer: swiss-ai/Megatron-LM@5fbc12419176b5cbbb96a31b4d6f1f100c2935c1
megatron/core/activations.py, class XIELU (two one-element nn.Parameters, beta and eps fixed)."""


MEGATRON = "NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553"
"""The Megatron-LM snapshot the MoE, MLA and MTP conventions below are read from."""


LoadBalancing = Literal["aux_loss", "seq_aux_loss", "global_aux_loss", "none"]
"""Megatron's --moe-router-load-balancing-type values ghsim costs."""


class MoeSpec(Spec):
    """Mixture-of-Experts MLPs (``model.moe``); absent for a dense model.

    Layer placement, with 0-based layer indices: layers ``0 .. dense_layers - 1`` are dense (their
    MLP is ``model.ffn_hidden`` wide); after them, layer ``i`` is MoE when
    ``(i - dense_layers) % layer_freq == 0``. With ``dense_layers: 0`` this is Megatron-Core's
    integer ``--moe-layer-freq`` exactly (megatron/core/models/gpt/gpt_layer_specs.py at
    ``MEGATRON``: ``1 if (i % moe_layer_freq == 0) else 0``, so ``layer_freq: 2`` makes layers 0,
    2, 4, ... MoE); Llama 4 Maverick, whose MoE layers are 1, 3, 5, ... (``(layer_id + 1) %
    interleave_moe_layer_step == 0`` in meta-llama/llama-models models/llama4/model.py) is
    ``dense_layers: 1, layer_freq: 2``. DeepSeek-V3's ``[0]*3+[1]*58`` is ``dense_layers: 3``.
    """

    experts: PositiveInt = Field(description="Routed experts per MoE layer.")
    top_k: PositiveInt = Field(
        description="Routed experts each token is sent to (<= experts; Megatron "
        "--moe-router-topk)."
    )
    expert_ffn_hidden: PositiveInt = Field(
        description="Hidden width of one routed expert's MLP (Megatron --moe-ffn-hidden-size, "
        "HF moe_intermediate_size). Experts are gated when model.gated_mlp is, with biases "
        "when model.bias is, like the dense MLP."
    )
    shared_experts: NonNegativeInt = Field(
        default=0, description="Shared experts every token goes through in each MoE layer "
        "(DeepSeek n_shared_experts, Llama 4's shared_expert)."
    )
    shared_expert_ffn_hidden: PositiveInt | None = Field(
        default=None, description="Hidden width of ONE shared expert; required when "
        "shared_experts > 0. Megatron's --moe-shared-expert-intermediate-size is the TOTAL of "
        "all shared experts (megatron/core/transformer/transformer_config.py: 'It should be "
        "equal to num_shared_experts * ffn_size_of_each_shared_expert'), i.e. shared_experts * "
        "shared_expert_ffn_hidden here.",
    )
    dense_layers: NonNegativeInt = Field(
        default=0, description="The first k layers are dense, with model.ffn_hidden "
        "(DeepSeek first_k_dense_replace)."
    )
    layer_freq: PositiveInt = Field(
        default=1, description="After the dense layers, one MoE layer every layer_freq layers, "
        "starting with the first: layer i is MoE when (i - dense_layers) % layer_freq == 0 "
        "(0-based); the others are dense. With dense_layers 0 this is Megatron's integer "
        "--moe-layer-freq (layers 0, N, 2N, ... MoE).",
    )
    capacity_factor: PositiveFloat | None = Field(
        default=None, description="Token-dropping capacity per expert, as a multiple of the "
        "balanced share (Megatron --moe-expert-capacity-factor); absent = dropless."
    )
    router: Literal["softmax", "sigmoid"] = Field(
        default="softmax", description="Router score function (Megatron "
        "--moe-router-score-function): softmax (Mixtral, Qwen3, GPT-OSS, Llama 4) or sigmoid "
        "(DeepSeek-V3).",
    )
    router_groups: PositiveInt | None = Field(
        default=None, description="Group-limited routing: experts are split into this many "
        "groups (Megatron --moe-router-num-groups, DeepSeek n_expert_groups); give "
        "router_topk_groups with it.",
    )
    router_topk_groups: PositiveInt | None = Field(
        default=None, description="Groups each token may route into (Megatron "
        "--moe-router-group-topk, DeepSeek topk_group / n_limited_groups); needs router_groups.",
    )
    load_balancing: LoadBalancing = Field(
        default="aux_loss", description="The router's load-balancing loss (Megatron "
        "--moe-router-load-balancing-type, default aux_loss): its scores, token counts and "
        "sums run as small kernels in every MoE layer (ghsim.workload.routing), and with tp > "
        "1 its token counts are all-reduced over the tensor-parallel group. none: no loss "
        "(GPT-OSS on Megatron-Bridge).",
    )
    expert_bias: bool = Field(
        default=False, description="Auxiliary-loss-free balancing (Megatron "
        "--moe-router-enable-expert-bias, DeepSeek-V3): a per-expert bias added to the "
        "scores for the top-k choice, and each layer counting its tokens per expert for the "
        "bias's update.",
    )
    routing: Literal["balanced", "dealt", "measured"] = Field(
        default="balanced", description="balanced: forced balance as Megatron runs it "
        "(--moe-router-force-load-balancing, as NVIDIA's MoE benchmarks do: random logits "
        "replace the router's, two more small kernels, and the rest of the routing still "
        "runs), so each token's experts are a random set: every expert gets the same tokens "
        "on average, but each layer pass waits for the busiest rank of the expert-parallel "
        "group, which receives the expected largest of the ranks' random loads, and each "
        "expert's random share pays its own partial GEMM tile (ghsim.workload.imbalance); "
        "dealt: NeMo Automodel's FakeBalancedGate, which gives token i experts i k to i k + "
        "k - 1 (mod experts): every expert exactly the same tokens, and a token's experts in "
        "a row, on the fewest ranks DeepEP then sends it to; measured: the router's real "
        "choices, the busiest expert rank receiving `imbalance` times the mean.",
    )
    imbalance: float | None = Field(
        default=None, ge=1.0, description="Tokens of the busiest expert rank divided by the "
        "mean over expert ranks (>= 1); required with routing: measured, forbidden with "
        "balanced.",
    )
    imbalance_source: Name | None = Field(
        default=None, description="Where the measured imbalance comes from; required with "
        "routing: measured."
    )

    @model_validator(mode="after")
    def _consistent(self) -> MoeSpec:
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds experts ({self.experts})")
        if self.shared_experts > 0 and self.shared_expert_ffn_hidden is None:
            raise ValueError("shared_experts > 0 needs shared_expert_ffn_hidden")
        if self.shared_experts == 0 and self.shared_expert_ffn_hidden is not None:
            raise ValueError("shared_expert_ffn_hidden is given but shared_experts is 0")
        if self.routing == "dealt" and (self.experts % self.top_k or self.router_groups):
            raise ValueError(
                f"routing 'dealt' (FakeBalancedGate's blocks of top_k experts in a row) needs "
                f"experts ({self.experts}) to be a multiple of top_k ({self.top_k}) and no "
                "router_groups")
        if (self.router_groups is None) != (self.router_topk_groups is None):
            raise ValueError("give both router_groups and router_topk_groups, or neither")
        if self.router_groups is not None and self.router_topk_groups is not None:
            if self.experts % self.router_groups:
                raise ValueError(
                    f"experts ({self.experts}) is not a multiple of router_groups "
                    f"({self.router_groups})"
                )
            if self.router_topk_groups > self.router_groups:
                raise ValueError(
                    f"router_topk_groups ({self.router_topk_groups}) exceeds router_groups "
                    f"({self.router_groups})"
                )
            reachable = self.router_topk_groups * (self.experts // self.router_groups)
            if self.top_k > reachable:
                raise ValueError(
                    f"top_k ({self.top_k}) exceeds the {reachable} experts of "
                    f"router_topk_groups groups"
                )
        if self.routing == "measured":
            if self.imbalance is None or self.imbalance_source is None:
                raise ValueError("routing 'measured' needs imbalance and imbalance_source")
        elif self.imbalance is not None or self.imbalance_source is not None:
            raise ValueError(
                "imbalance and imbalance_source go with routing: measured (balanced and "
                "dealt routing have their own)"
            )
        return self


_MLA_KEYS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


class AttentionSpec(Spec):
    """The attention block's kind (``model.attention``); absent = mha or gqa from the heads."""

    type: Literal["mha", "gqa", "mla"] | None = Field(
        default=None, description="mha (kv_heads == heads), gqa (kv_heads < heads, MQA "
        "included) or mla (DeepSeek multi-head latent attention, kv_heads == heads). Default: "
        "mha when kv_heads == heads, else gqa.",
    )
    q_lora_rank: PositiveInt | None = Field(
        default=None, description="MLA: rank of the query down-projection (DeepSeek-V3 1536); "
        "absent = queries are not compressed (one hidden x heads*(nope+rope) matrix, as "
        "DeepSeek-V2-Lite).",
    )
    kv_lora_rank: PositiveInt | None = Field(
        default=None, description="MLA: rank of the compressed key/value latent (DeepSeek-V3 "
        "512); required with mla.",
    )
    qk_nope_head_dim: PositiveInt | None = Field(
        default=None, description="MLA: per-head query/key width without rotary embedding "
        "(Megatron --qk-head-dim; DeepSeek-V3 128); required with mla.",
    )
    qk_rope_head_dim: PositiveInt | None = Field(
        default=None, description="MLA: per-head rotary query/key width, the key part shared "
        "by the heads (Megatron --qk-pos-emb-head-dim; DeepSeek-V3 64); required with mla.",
    )
    v_head_dim: PositiveInt | None = Field(
        default=None, description="MLA: per-head value width (DeepSeek-V3 128); required "
        "with mla.",
    )
    sliding_window: PositiveInt | None = Field(
        default=None, description="Tokens each query attends back to in sliding-window layers "
        "(GPT-OSS 128). Changes only the executed attention work, never the parameters or the "
        "model FLOPs (Megatron's formula ignores windows).",
    )
    full_attention_every: PositiveInt | None = Field(
        default=None, description="With sliding_window: every N-th layer attends fully, the "
        "others use the window: 0-based layer i is full when (i + 1) % N == 0 (Megatron "
        "window_attn_skip_freq, megatron/core/transformer/utils.py is_layer_window_attention "
        "with its 1-based layer_number; GPT-OSS: N = 2, layers 1, 3, 5, ... full). Absent: "
        "every layer uses the window.",
    )
    sinks: bool = Field(
        default=False, description="A learned softmax sink per head (GPT-OSS; Megatron "
        "softmax_type 'learnable'): one parameter per head per layer.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> AttentionSpec:
        if self.type == "mla":
            missing = [key for key in _MLA_KEYS if getattr(self, key) is None]
            if missing:
                raise ValueError(f"attention type 'mla' needs {', '.join(missing)}")
        else:
            given = [key for key in ("q_lora_rank", *_MLA_KEYS) if getattr(self, key) is not None]
            if given:
                raise ValueError(f"{', '.join(given)} only go with attention type 'mla'")
        if self.full_attention_every is not None and self.sliding_window is None:
            raise ValueError("full_attention_every needs sliding_window")
        return self


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
    activation_clamp: PositiveFloat | None = Field(
        default=None, description="A gated activation whose halves are clamped first (GPT-OSS's "
        "SwiGLU limit, 7.0: the gate at most the limit, the linear half within plus or minus "
        "it; Megatron --activation-func-clamp-value). Free inside a fused activation kernel; "
        "a framework that clamps with separate PyTorch ops says so with training.eager_ops "
        "[clamp]. Needs gated_mlp and moe.",
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
    attention: AttentionSpec | None = Field(
        default=None, description="The attention block's kind: mha / gqa (from heads and "
        "kv_heads when absent) or mla, and optional sliding-window layers and sinks.",
    )
    moe: MoeSpec | None = Field(
        default=None, description="Mixture-of-Experts MLPs; absent = a dense model.",
    )
    mtp_layers: NonNegativeInt = Field(
        default=0, description="DeepSeek-V3 multi-token-prediction modules (Megatron "
        "--mtp-num-layers): each adds two norms, a 2*hidden x hidden projection, one "
        "transformer layer (MoE when the last layer is, as Megatron builds it) and a final "
        "norm, sharing the embedding and output head.",
    )
    published_params: PositiveFloat | None = Field(
        default=None, description="The parameter count its authors publish, for checking; "
        "of the main model, without multi-token-prediction modules (DeepSeek-V3 publishes "
        "671B for the main model and its MTP module's 11.5B apart).",
    )
    published_active_params: PositiveFloat | None = Field(
        default=None, description="The parameters per token its authors publish for an MoE "
        "model (all but the routed experts a token does not use), of the main model like "
        "published_params, for checking.",
    )
    published_active_excludes_embedding: bool = Field(
        default=False, description="The authors' active count leaves the input embedding out "
        "(OpenAI's gpt-oss figures do; Qwen, DeepSeek, Mistral and Meta count it).",
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
        if self.activation_clamp is not None and not (self.gated_mlp and self.moe):
            raise ValueError("activation_clamp clamps the halves of the experts' gated "
                             "activation: it needs gated_mlp true and a moe section")
        if self.activation is not None and (self.activation in _GATED) != self.gated_mlp:
            raise ValueError(
                f"activation {self.activation!r} contradicts gated_mlp: {self.gated_mlp}"
            )
        if self.position_embedding == "learned" and self.max_position_embeddings is None:
            raise ValueError("position_embedding 'learned' needs max_position_embeddings")
        kind = self.attention.type if self.attention is not None else None
        if kind == "mha" and self.kv_heads != self.heads:
            raise ValueError(
                f"attention type 'mha' needs kv_heads == heads, got {self.kv_heads} and "
                f"{self.heads}"
            )
        if kind == "gqa" and self.kv_heads == self.heads:
            raise ValueError(
                f"attention type 'gqa' needs kv_heads < heads, got {self.kv_heads} of both"
            )
        if kind == "mla":
            if self.kv_heads != self.heads:
                raise ValueError(
                    "attention type 'mla' gives every head its own keys and values: kv_heads "
                    f"must equal heads ({self.heads}), got {self.kv_heads}"
                )
            if self.qk_norm:
                raise ValueError(
                    "qk_norm is for mha / gqa: MLA's latent norms are part of attention type "
                    "'mla' and always counted"
                )
            if self.bias:
                raise ValueError("attention type 'mla' with bias: true is not modelled")
        if self.moe is not None and self.moe.dense_layers >= self.layers:
            raise ValueError(
                f"moe.dense_layers ({self.moe.dense_layers}) leaves no MoE layer of the "
                f"{self.layers}"
            )
        return self

    @property
    def head_dim_resolved(self) -> int:
        """Width of one attention head."""
        return self.head_dim if self.head_dim is not None else self.hidden // self.heads

    @property
    def attention_type(self) -> Literal["mha", "gqa", "mla"]:
        """``attention.type``, or mha / gqa from the heads when it is not given."""
        if self.attention is not None and self.attention.type is not None:
            return self.attention.type
        return "mha" if self.kv_heads == self.heads else "gqa"

    @property
    def activation_resolved(self) -> Activation:
        if self.activation is not None:
            return self.activation
        return "swiglu" if self.gated_mlp else "gelu"
