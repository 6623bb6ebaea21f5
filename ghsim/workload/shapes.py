"""The tensor sizes one rank sees, from a model, a training setup and a parallel layout."""

from __future__ import annotations

from dataclasses import dataclass

from ghsim.config.layout import Layout
from ghsim.config.schema import ScenarioSpec

ACTIVATION_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 2}
"""Bytes per activation element: FP8 recipes keep activations and communication in BF16."""
GEMM_DTYPE = {"fp32": "tf32", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8"}
"""Tensor-core dtype of the GEMMs (PyTorch runs FP32 matmuls as TF32 on Ampere and later)."""
WEIGHT_READ_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
"""Bytes per weight read by a GEMM (FP8 recipes cache FP8 copies of the weights)."""


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
    gemm_dtype: str
    flash: bool
    dropout: bool
    recompute: str
    fp8: bool
    fp8_recipe: str | None
    """Transformer Engine's FP8 scaling recipe (``TrainingSpec.fp8_recipe_resolved``)."""
    qk_norm: bool
    """Per-head norms on the queries and keys (two norm kernels after the QKV projection)."""
    attention_work: float
    """Executed attention work relative to a causal mask over the whole sequence (document
    masking: ``TrainingSpec.attention_work_fraction``)."""

    @property
    def sp_tokens(self) -> int:
        """Tokens on this rank outside the tensor-parallel region (split by tp with SP)."""
        return self.tokens // self.tp if self.sequence_parallel else self.tokens


def layer_shapes(spec: ScenarioSpec, layout: Layout) -> LayerShapes:
    """The per-rank shapes of ``spec`` under ``layout``."""
    model, training, par = spec.model, spec.training, spec.parallelism
    tp, hd = layout.tp, model.head_dim_resolved
    kv_heads_local = max(1, model.kv_heads // tp)
    return LayerShapes(
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
        gemm_dtype=GEMM_DTYPE[training.precision],
        flash=training.attention == "flash",
        dropout=model.dropout > 0,
        recompute=par.recompute,
        fp8=training.precision == "fp8",
        fp8_recipe=training.fp8_recipe_resolved,
        qk_norm=model.qk_norm,
        attention_work=training.attention_work_fraction,
    )
