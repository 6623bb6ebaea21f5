"""Mixture-of-Experts, MLA and MTP models: the schema's keys, parameter counts by hand, layer
placement, Megatron-Core's FLOPs formula expanded by hand, and the shipped MoE models against
their published parameter counts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from ghsim.cli import main
from ghsim.config import load_model
from ghsim.config.schema import ModelSpec
from ghsim.config.schema.model import AttentionSpec, MoeSpec
from ghsim.workload.modelsize import (
    attention_window,
    is_moe_layer,
    layer_params,
    megatron_flops_per_token,
    model_flops_per_token,
    moe_layer_count,
    parameter_count,
)
from tests.conftest import shipped
from tests.test_modelsize import PUBLISHED_MISSES

MOE_MODELS = ["deepseek-v3", "deepseek-r1", "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-20b",
              "gpt-oss-120b", "mixtral-8x22b", "mixtral-8x7b", "llama4-scout", "llama4-maverick"]
DENSE_MODELS = [p.stem for p in shipped("models") if p.stem not in MOE_MODELS]

# A tiny MoE model, counted on paper below: h 8, 2 query heads / 1 KV head of 4, dense MLP 16,
# 4 routed experts of 6 (top-2) and 1 shared expert of 5, layer 0 dense then every 2nd layer MoE.
TINY: dict[str, Any] = {
    "name": "tiny-moe", "layers": 4, "hidden": 8, "heads": 2, "kv_heads": 1, "head_dim": 4,
    "ffn_hidden": 16, "vocab": 10, "gated_mlp": True, "norm": "rmsnorm",
    "moe": {"experts": 4, "top_k": 2, "expert_ffn_hidden": 6, "shared_experts": 1,
            "shared_expert_ffn_hidden": 5, "dense_layers": 1, "layer_freq": 2},
}
ATTENTION = 8 * 8 + 2 * 8 * 4 + 8 * 8  # q (8 -> 2*4), k and v (8 -> 4 each), out (8 -> 8) = 192
NORMS = 2 * 8  # two RMSNorm weights a layer
DENSE_LAYER = ATTENTION + NORMS + 3 * 8 * 16  # 592
EXPERT = 3 * 8 * 6  # gate, up, down: 144
ROUTER = 4 * 8
SHARED = 3 * 8 * 5
MOE_LAYER = ATTENTION + NORMS + ROUTER + SHARED + 4 * EXPERT  # 936
TOTAL = 2 * DENSE_LAYER + 2 * MOE_LAYER + 8 + 2 * 10 * 8  # layers, final norm, embedding + head
ACTIVE = TOTAL - 2 * (4 - 2) * EXPERT  # two MoE layers, two unused experts each


def tiny(**changes: Any) -> ModelSpec:
    return ModelSpec.model_validate({**TINY, **changes})


def tiny_moe(**changes: Any) -> ModelSpec:
    return tiny(moe={**TINY["moe"], **changes})


# -- parameter counts by hand ------------------------------------------------------------------

def test_tiny_moe_counts_by_hand() -> None:
    count = parameter_count(tiny())
    assert (DENSE_LAYER, MOE_LAYER, TOTAL, ACTIVE) == (592, 936, 3224, 2648)
    assert count.attention_per_layer == ATTENTION
    assert count.per_layer == DENSE_LAYER  # a dense layer of an MoE model
    assert count.moe_per_layer == MOE_LAYER
    assert (count.moe_layers, count.dense_layers) == (2, 2)
    assert (count.expert, count.experts, count.top_k) == (EXPERT, 4, 2)
    assert (count.router_per_moe_layer, count.shared_per_moe_layer) == (ROUTER, SHARED)
    assert count.mtp == 0
    assert count.total == count.main_total == TOTAL
    assert count.active == count.main_active == ACTIVE
    assert count.non_embedding == TOTAL - 2 * 10 * 8


def test_layer_params_sum_to_the_model() -> None:
    model = tiny()
    layers = [layer_params(model, i) for i in range(model.layers)]
    assert layers == [DENSE_LAYER, MOE_LAYER, DENSE_LAYER, MOE_LAYER]
    count = parameter_count(model)
    assert sum(layers) + count.final_norm + count.embedding + count.output == count.total
    with pytest.raises(IndexError):
        layer_params(model, 4)


def test_two_shared_experts_count_twice() -> None:
    count = parameter_count(tiny_moe(shared_experts=2))
    assert count.shared_per_moe_layer == 2 * SHARED


def test_moe_with_biases_counts_expert_and_router_biases() -> None:
    count = parameter_count(tiny(bias=True))
    assert count.expert == EXPERT + 2 * 6 + 8  # gate and up biases (6 each), down bias (8)
    assert count.router_per_moe_layer == ROUTER + 4  # one bias per expert


def test_mtp_module_by_hand() -> None:
    # Megatron's MultiTokenPredictionLayer: enorm, hnorm, eh_proj (2h -> h), one transformer
    # layer like the last one (layer 3 is MoE here), final norm; embedding and head shared.
    count = parameter_count(tiny(mtp_layers=1))
    module = 2 * 8 + 2 * 8 * 8 + MOE_LAYER + 8
    assert count.mtp == module == 1088
    assert (count.mtp_layers, count.mtp_moe_layers) == (1, 1)
    assert count.total == TOTAL + module
    assert count.main_total == TOTAL
    assert count.active == ACTIVE + module - (4 - 2) * EXPERT
    assert count.main_active == ACTIVE


def test_mtp_after_a_dense_last_layer_is_dense() -> None:
    model = tiny(layers=5, mtp_layers=2)  # layer 4: (4 - 1) % 2 == 1, dense
    assert not is_moe_layer(model, 4)
    count = parameter_count(model)
    assert count.mtp == 2 * (2 * 8 + 2 * 8 * 8 + DENSE_LAYER + 8)
    assert count.mtp_moe_layers == 0


def test_mla_counts_by_hand() -> None:
    # h 16, 2 heads, q_lora 6, kv_lora 4, nope 3, rope 2, v 5, RMSNorm.
    attention = {"type": "mla", "q_lora_rank": 6, "kv_lora_rank": 4, "qk_nope_head_dim": 3,
                 "qk_rope_head_dim": 2, "v_head_dim": 5}
    base = {"name": "tiny-mla", "layers": 1, "hidden": 16, "heads": 2, "kv_heads": 2,
            "ffn_hidden": 8, "vocab": 10, "gated_mlp": True, "norm": "rmsnorm"}
    count = parameter_count(ModelSpec.model_validate({**base, "attention": attention}))
    q = 16 * 6 + 6 + 6 * 2 * (3 + 2)  # down, its norm, up to heads*(nope+rope)
    kv = 16 * (4 + 2) + 4 + 4 * 2 * (3 + 5)  # down to latent + shared rope key, norm, up
    out = 2 * 5 * 16
    assert count.attention_per_layer == q + kv + out == 486
    no_q_lora = {k: v for k, v in attention.items() if k != "q_lora_rank"}  # DeepSeek-V2-Lite
    count = parameter_count(ModelSpec.model_validate({**base, "attention": no_q_lora}))
    assert count.attention_per_layer == 16 * 2 * (3 + 2) + kv + out


def test_sinks_add_one_parameter_per_head() -> None:
    plain = parameter_count(tiny()).attention_per_layer
    sinks = parameter_count(tiny(attention={"sinks": True})).attention_per_layer
    assert sinks == plain + 2


# -- where the MoE layers are ------------------------------------------------------------------

def moe_pattern(model: ModelSpec) -> list[bool]:
    return [is_moe_layer(model, i) for i in range(model.layers)]


def test_layer_freq_is_megatrons_integer_moe_layer_freq() -> None:
    # megatron/core/models/gpt/gpt_layer_specs.py: [1 if (i % moe_layer_freq == 0) else 0]
    model = tiny(layers=6, moe={**TINY["moe"], "dense_layers": 0, "layer_freq": 2})
    assert moe_pattern(model) == [i % 2 == 0 for i in range(6)] == [True, False] * 3
    model = tiny(layers=7, moe={**TINY["moe"], "dense_layers": 0, "layer_freq": 3})
    assert moe_pattern(model) == [True, False, False, True, False, False, True]
    assert moe_layer_count(model) == 3


def test_dense_layers_come_first() -> None:
    model = tiny(layers=6, moe={**TINY["moe"], "dense_layers": 3, "layer_freq": 1})
    assert moe_pattern(model) == [False] * 3 + [True] * 3
    model = tiny(layers=8, moe={**TINY["moe"], "dense_layers": 1, "layer_freq": 2})
    assert moe_pattern(model) == [False, True] * 4  # Llama 4 Maverick's odd MoE layers
    assert moe_layer_count(model) == 4


def test_shipped_layer_placement() -> None:
    v3 = load_model("deepseek-v3")
    assert moe_pattern(v3) == [False] * 3 + [True] * 58  # Megatron ([0]*3+[1]*58)
    maverick = load_model("llama4-maverick")
    assert [i for i in range(48) if is_moe_layer(maverick, i)] == list(range(1, 48, 2))
    assert all(moe_pattern(load_model("llama4-scout")))
    assert not any(moe_pattern(load_model("llama3-8b")))
    for name in MOE_MODELS:
        model = load_model(name)
        assert sum(moe_pattern(model)) == moe_layer_count(model) == (
            parameter_count(model).moe_layers)


def test_gpt_oss_alternates_sliding_window_and_full_attention() -> None:
    model = load_model("gpt-oss-20b")
    # openai/gpt-oss model.py: sliding_window if layer_idx % 2 == 0 else 0
    assert [attention_window(model, i) for i in range(4)] == [128, None, 128, None]
    assert attention_window(load_model("llama3-8b"), 0) is None
    always = tiny(attention={"sliding_window": 64})
    assert [attention_window(always, i) for i in range(4)] == [64] * 4


# -- the schema --------------------------------------------------------------------------------

@pytest.mark.parametrize(("changes", "message"), [
    ({"top_k": 5}, "top_k (5) exceeds experts (4)"),
    ({"shared_expert_ffn_hidden": None}, "shared_experts > 0 needs shared_expert_ffn_hidden"),
    ({"shared_experts": 0}, "shared_experts is 0"),
    ({"router_groups": 2}, "both router_groups and router_topk_groups"),
    ({"router_topk_groups": 1}, "both router_groups and router_topk_groups"),
    ({"router_groups": 3, "router_topk_groups": 1}, "not a multiple of router_groups"),
    ({"router_groups": 2, "router_topk_groups": 3}, "exceeds router_groups"),
    ({"router_groups": 4, "router_topk_groups": 1}, "exceeds the 1 experts"),
    ({"routing": "measured"}, "needs imbalance and imbalance_source"),
    ({"routing": "measured", "imbalance": 1.4}, "needs imbalance and imbalance_source"),
    ({"imbalance": 1.4}, "go with routing: measured"),
    ({"imbalance_source": "a trace"}, "go with routing: measured"),
    ({"routing": "measured", "imbalance": 0.9, "imbalance_source": "x"}, "greater than or equal"),
    ({"dense_layers": 4}, "leaves no MoE layer"),
    ({"router": "relu"}, "softmax"),
    ({"capacity_factor": 0.0}, "greater than 0"),
])
def test_moe_mistakes_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        tiny_moe(**changes)


def test_moe_accepts_its_options() -> None:
    moe = tiny_moe(routing="measured", imbalance=1.3, imbalance_source="a profile",
                   capacity_factor=1.25, router="sigmoid", router_groups=2,
                   router_topk_groups=1).moe
    assert moe is not None and moe.imbalance == 1.3 and moe.capacity_factor == 1.25
    defaults = MoeSpec.model_validate({"experts": 8, "top_k": 2, "expert_ffn_hidden": 64})
    assert (defaults.shared_experts, defaults.dense_layers, defaults.layer_freq) == (0, 0, 1)
    assert (defaults.router, defaults.routing, defaults.capacity_factor) == (
        "softmax", "balanced", None)


@pytest.mark.parametrize(("changes", "message"), [
    ({"attention": {"type": "mha"}}, "'mha' needs kv_heads == heads"),
    ({"kv_heads": 2, "attention": {"type": "gqa"}}, "'gqa' needs kv_heads < heads"),
    ({"attention": {"type": "mla", "kv_lora_rank": 4}}, "needs qk_nope_head_dim"),
    ({"attention": {"type": "gqa", "kv_lora_rank": 4}}, "only go with attention type 'mla'"),
    ({"attention": {"q_lora_rank": 4}}, "only go with attention type 'mla'"),
    ({"attention": {"full_attention_every": 2}}, "full_attention_every needs sliding_window"),
    ({"attention": {"type": "flash"}}, "mha"),
])
def test_attention_mistakes_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        tiny(**changes)


def test_mla_must_be_consistent_with_the_heads() -> None:
    mla = {"type": "mla", "kv_lora_rank": 4, "qk_nope_head_dim": 2, "qk_rope_head_dim": 2,
           "v_head_dim": 2}
    with pytest.raises(ValidationError, match="kv_heads must equal heads"):
        tiny(attention=mla)
    with pytest.raises(ValidationError, match="qk_norm is for mha / gqa"):
        tiny(kv_heads=2, attention=mla, qk_norm=True)
    assert tiny(kv_heads=2, attention=mla).attention_type == "mla"


def test_attention_type_defaults_from_the_heads() -> None:
    assert tiny().attention_type == "gqa"
    assert tiny(kv_heads=2).attention_type == "mha"
    assert tiny(kv_heads=2, attention={"type": "mha"}).attention_type == "mha"
    assert AttentionSpec.model_validate({}).type is None


def test_every_new_key_has_a_description(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "model"]) == 0
    schema = json.loads(capsys.readouterr().out)
    for spec in ("MoeSpec", "AttentionSpec"):
        properties = schema["$defs"][spec]["properties"]
        assert properties and all(p.get("description") for p in properties.values()), spec
    for key in ("attention", "moe", "mtp_layers", "published_active_params",
                "published_active_excludes_embedding"):
        assert schema["properties"][key].get("description"), key


# -- FLOPs against Megatron-Core's formula, expanded by hand -----------------------------------
# megatron/training/training.py num_floating_point_operations at
# NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553, per token (batch * seq_length):
# 3 (fwd, wgrad, dgrad) x 2 (FMA) = 6 per weight; SwiGLU factor 3.

def test_deepseek_v3_flops_match_megatron_by_hand() -> None:
    h, s, vocab = 7168, 4096, 129280
    layers = 61 + 1  # the MTP module's layer counts as a layer; the last layer is MoE
    dense, moe = 3, 58 + 1
    mlp = 6 * h * (18432 * 3 * dense + (2048 * 8 * 3 + 2048 * 3) * moe)  # dense, routed, shared
    q_term = 1536 * (h + 128 * (128 + 64) + 1)  # q lora + rope + q norm
    kv_term = 512 * (h + 128 * (128 + 128) + 1) + h * 64  # kv lora + kv norm, rope key
    out = 128 * 128 * h
    attention = 6 * (q_term + kv_term + out) * layers
    core = s * 6 * (128 * (128 + 64) / 2 + 128 * 128 / 2) * layers
    mtp = 6 * 1 * (3 * h + 2 * h * h)  # MTP norms and eh projection
    logits = 6 * h * vocab * (1 + 1)  # final logits and the MTP module's
    megatron = mlp + attention + core + mtp + logits
    model = load_model("deepseek-v3")
    assert model_flops_per_token(model, s) == pytest.approx(megatron, rel=0.01)
    assert model_flops_per_token(model, s) == pytest.approx(megatron, rel=1e-12)
    # validation/moe.yaml: 338 model TFLOP/s at 1297 tokens/s per GPU (Megatron-Bridge 25.09)
    assert model_flops_per_token(model, s) == pytest.approx(338e12 / 1297, rel=0.01)


def test_qwen3_30b_a3b_flops_match_megatron_by_hand() -> None:
    h, s, vocab, layers = 2048, 4096, 151936, 48
    q, kv = 32 * 128, 4 * 128
    mlp = 6 * h * (768 * 8 * 3) * layers  # every layer MoE, top-8 routed, no shared expert
    attention = 6 * (h * (q + 2 * kv) + q * h) * layers
    core = s * 6 * q / 2 * 2 * layers  # causal half of QK^T and of (QK^T)V
    logits = 6 * h * vocab
    megatron = mlp + attention + core + logits
    model = load_model("qwen3-30b-a3b")
    assert model_flops_per_token(model, s) == pytest.approx(megatron, rel=0.01)
    assert model_flops_per_token(model, s) == pytest.approx(megatron, rel=1e-12)
    # validation/moe.yaml: 241 model TFLOP/s at 10494 tokens/s per GPU
    assert model_flops_per_token(model, s) == pytest.approx(241e12 / 10494, rel=0.01)


@pytest.mark.parametrize(("name", "gflops"), [("qwen3-235b-a22b", 148.0),
                                             ("mixtral-8x22b", 242.2)])
def test_flops_match_the_megatron_figures_of_the_moe_validation_set(name: str,
                                                                    gflops: float) -> None:
    # validation/moe.yaml notes: "Megatron FLOPs formula (148.0 GFLOP/token)", "242.2 GFLOP/token"
    assert model_flops_per_token(load_model(name), 4096) == pytest.approx(gflops * 1e9, rel=1e-3)


def test_layer_freq_in_the_flops() -> None:
    # Maverick: 24 dense layers of 16384 and 24 MoE layers (top-1 of 8192 + a shared 8192).
    model = load_model("llama4-maverick")
    h, s, vocab, layers, q, kv = 5120, 4096, 202048, 48, 40 * 128, 8 * 128
    mlp = 6 * h * 3 * (16384 * 24 + (8192 * 1 + 8192) * 24)
    attention = 6 * (h * (q + 2 * kv) + q * h) * layers
    core = s * 6 * q * layers
    assert megatron_flops_per_token(model, s) == pytest.approx(
        mlp + attention + core + 6 * h * vocab, rel=1e-12)


@pytest.mark.parametrize("name", DENSE_MODELS)
def test_dense_models_keep_todays_flops(name: str) -> None:
    model = load_model(name)
    h, hd, L, s = model.hidden, model.head_dim_resolved, model.layers, 4096
    q = model.heads * hd
    per_layer = (2 * h * (q + 2 * model.kv_heads * hd) + 2 * q * h
                 + (6 if model.gated_mlp else 4) * h * model.ffn_hidden + 4 * s * q)
    assert model_flops_per_token(model, s) == 3 * (L * per_layer + 2 * h * model.vocab)
    # Megatron-Core's formula halves the causal core attention (since Megatron-LM 8873b55);
    # ghsim keeps the FACTS.md convention for dense models. That is the only difference.
    assert megatron_flops_per_token(model, s) == pytest.approx(
        model_flops_per_token(model, s) - 6 * s * q * L, rel=1e-12)


@pytest.mark.parametrize("name", DENSE_MODELS)
def test_dense_models_have_no_moe_counts(name: str) -> None:
    model = load_model(name)
    count = parameter_count(model)
    assert (count.moe_layers, count.expert, count.experts, count.top_k, count.mtp) == (
        0, 0, 0, 0, 0)
    assert (count.router_per_moe_layer, count.shared_per_moe_layer, count.moe_per_layer) == (
        0, 0, 0)
    assert count.active == count.main_active == count.main_total == count.total
    assert count.non_embedding == count.layers * count.per_layer + count.final_norm
    assert {layer_params(model, i) for i in range(model.layers)} == {count.per_layer}


# -- the shipped MoE models against their published counts -------------------------------------

def _deviation(name: str, kind: str) -> float:
    model = load_model(name)
    count = parameter_count(model)
    if kind == "total":
        assert model.published_params is not None
        return count.main_total / model.published_params - 1
    assert model.published_active_params is not None
    active = count.main_active
    if model.published_active_excludes_embedding:
        active -= count.embedding
    return active / model.published_active_params - 1


@pytest.mark.parametrize("kind", ["total", "active"])
@pytest.mark.parametrize("name", MOE_MODELS)
def test_published_counts_within_1_percent(name: str, kind: str) -> None:
    deviation = _deviation(name, kind)
    miss = PUBLISHED_MISSES.get((name, kind))
    if miss is None:
        assert abs(deviation) <= 0.01, f"{name} {kind}: {deviation:+.2%}"
    else:  # a published figure a faithful architecture cannot meet; see PUBLISHED_MISSES
        bound, _why = miss
        assert 0.01 < abs(deviation) <= bound, f"{name} {kind}: {deviation:+.2%}"


def test_deepseek_v3_against_every_published_figure() -> None:
    count = parameter_count(load_model("deepseek-v3"))
    # README.md: 671B total / 37B activated (main model).
    assert count.main_total == 671_026_404_352
    assert count.main_total == pytest.approx(671e9, rel=1e-3)
    # README_WEIGHTS.md: the MTP module has 11.5B unique parameters (ghsim: 11.61B).
    assert count.mtp == pytest.approx(11.5e9, rel=0.01)
    # README.md: 685B on Hugging Face = 671B main + 14B MTP, where the MTP weights hold their
    # own copy of the embedding and the output head (0.93B each): 671.03 + 11.61 + 1.85.
    assert count.total + count.embedding + count.output == pytest.approx(685e9, rel=0.001)
    assert count.total == pytest.approx(685e9, rel=0.01)
    # Active: total minus the 248 unused routed experts of each of 58 MoE layers = 37.55B;
    # README_WEIGHTS.md's 36.7B (which it says includes the embedding and head) and the 37B
    # of the paper are both below the arithmetic of DeepSeek's own 671B.
    assert count.main_active == count.main_total - 58 * 248 * count.expert == 37_552_282_624


def test_gpt_oss_matches_the_model_card_to_the_digit() -> None:
    # Model card Table 1 gives 116.83B / 5.13B and 20.91B / 3.61B.
    big, small = parameter_count(load_model("gpt-oss-120b")), parameter_count(
        load_model("gpt-oss-20b"))
    assert round(big.total / 1e7) == 11683 and round((big.active - big.embedding) / 1e7) == 513
    assert round(small.total / 1e7) == 2091
    assert round((small.active - small.embedding) / 1e7) == 361
