"""Model and training features real runs use, each against numbers worked out by hand: the
optimizer (its states and its step's traffic), the gradient dtype (memory and the data-parallel
collectives), document masking (executed attention work, not model FLOPs), xIELU and squared
ReLU (non-gated MLPs), QK norms and tied embeddings.

The tiny model: 2 layers, hidden 64, 4 heads of 16, ffn 256, vocab 1000, RMSNorm, untied, no
biases. Its parameters: per layer 4 h^2 (QKV + projection) + 2 h f (up + down) + 2 h (norms)
= 16384 + 32768 + 128 = 49280; with the embedding and output (64000 each) and the final norm
(64): 2 * 49280 + 128000 + 64 = 226624.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from ghsim.config import Scenario, load_system, scenario_from_spec
from ghsim.config.schema import ModelSpec, ScenarioSpec, TrainingSpec
from ghsim.workload.activations import layer_activation_bytes
from ghsim.workload.ir import Kernel, Op, RankClass, Workload
from ghsim.workload.kernels import layer_backward, layer_forward
from ghsim.workload.lower import lower
from ghsim.workload.modelsize import model_flops_per_token, parameter_count
from ghsim.workload.shapes import layer_shapes
from ghsim.workload.states import model_state_bytes

TINY: dict[str, Any] = {"name": "tiny", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 4,
                        "ffn_hidden": 256, "vocab": 1000, "gated_mlp": False, "norm": "rmsnorm"}
PARAMS = 226_624
S = 2048  # sequence length; one sequence per micro-batch


def scenario(model: dict[str, Any] | None = None, num_gpus: int = 1, system: str = "dgx-h100",
             offload: str = "none", **training: Any) -> Scenario:
    par = {key: training.pop(key) for key in ("zero_stage",) if key in training}
    spec = ScenarioSpec.model_validate({
        "name": "features", "system": load_system(system), "num_gpus": num_gpus,
        "model": {**TINY, **(model or {})},
        "training": {"seq_len": S, "micro_batch": 1, "global_batch": 2 * num_gpus,
                     "precision": "bf16", **training},
        "parallelism": par, "offload": {"strategy": offload},
    })
    return scenario_from_spec(spec, "features")


def only_class(workload: Workload) -> RankClass:
    (cls,) = workload.classes
    return cls


def states_at_start(cls: RankClass) -> dict[str, float]:
    totals: dict[str, float] = {}
    for event in cls.memory:
        if event.op == -1:
            totals[event.category] = totals.get(event.category, 0.0) + event.bytes
    return totals


def op_named(cls: RankClass, name: str) -> Op:
    (op,) = [op for op in cls.ops if op.name == name]
    return op


def kernels_named(cls: RankClass, name: str) -> list[Kernel]:
    return [k for op in cls.ops for k in op.kernels() if k.name == name]


# -- the optimizer: states and step traffic ---------------------------------------------------

def test_tiny_model_has_the_hand_counted_parameters() -> None:
    assert parameter_count(ModelSpec.model_validate(TINY)).total == PARAMS


@pytest.mark.parametrize(("optimizer", "state_bytes"), [
    ("adam", 12), ("adamw", 12), ("ademamix", 16), ("sgd", 8)])
def test_optimizer_states_per_parameter_under_mixed_precision(optimizer: str,
                                                              state_bytes: int) -> None:
    """FP32 master (4) + moments: Adam's m, v (8); AdEMAMix's m1, m2, nu (12); SGD's momentum
    (4). Weights BF16 (2), gradients FP32 (4, Megatron's default with bf16)."""
    sc = scenario(optimizer=optimizer)
    states = model_state_bytes(sc.spec, dp=1)
    assert (states.weights, states.gradients, states.optimizer) == (
        2 * PARAMS, 4 * PARAMS, state_bytes * PARAMS)
    lowered = states_at_start(only_class(lower(sc)))
    assert lowered == {"weights": 2 * PARAMS, "gradients": 4 * PARAMS,
                       "optimizer": state_bytes * PARAMS}


def test_ademamix_exact_state_bytes_of_the_tiny_model() -> None:
    states = model_state_bytes(scenario(optimizer="ademamix").spec, dp=1)
    assert states.optimizer == 3_625_984  # 16 x 226,624
    assert states.total == 453_248 + 906_496 + 3_625_984


def test_fp32_training_keeps_no_separate_master_weight() -> None:
    states = model_state_bytes(scenario(optimizer="ademamix", precision="fp32").spec, dp=1)
    assert (states.weights, states.gradients, states.optimizer) == (
        4 * PARAMS, 4 * PARAMS, 12 * PARAMS)


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_master_weight_remainders_keep_two_bytes(precision: str) -> None:
    """apex's store_param_remainders (NeMo's DistributedFusedAdam over a BF16 model): the
    optimizer keeps the master's low 16 bits (2 B) beside Adam's m, v (8 B), 10 B instead of
    12; ZeRO 1 over four ranks shards the 10; weights and gradients do not change (FP8 adds
    its weight cache, 2 B for each of the 2 x (4 h^2 + 2 h f) = 98,304 GEMM weights)."""
    one = model_state_bytes(scenario(master_weights="remainders", precision=precision).spec,
                            dp=1)
    assert (one.weights, one.gradients, one.optimizer) == (2 * PARAMS, 4 * PARAMS, 10 * PARAMS)
    sc = scenario(num_gpus=4, master_weights="remainders", precision=precision, zero_stage=1)
    cache = 2 * 98_304 if precision == "fp8" else 0
    assert states_at_start(only_class(lower(sc))) == pytest.approx(
        {"weights": 2 * PARAMS + cache, "gradients": 4 * PARAMS, "optimizer": 10 * PARAMS / 4})


@pytest.mark.parametrize("precision", ["fp16", "fp32"])
def test_master_weight_remainders_need_bf16_weights(precision: str) -> None:
    with pytest.raises(ValidationError, match="remainders"):
        TrainingSpec.model_validate({"seq_len": 8, "micro_batch": 1, "global_batch": 1,
                                     "precision": precision, "master_weights": "remainders"})


@pytest.mark.parametrize(("extra", "name", "per_param"), [
    ({"master_weights": "remainders"}, "adam", 28),    # 4 + 2 (weight) + 10 + 10 + 2
    ({"master_weights": "remainders", "main_grads": "bf16"}, "adam", 26),
    ({}, "adam", 30),                                  # 4 + 12 + 12 + 2
    ({"main_grads": "bf16"}, "adam", 28),              # 2 + 12 + 12 + 2
    ({"optimizer": "adamw"}, "adamw", 30),
    ({"optimizer": "ademamix"}, "ademamix", 38),       # 4 + 16 + 16 + 2
    ({"optimizer": "ademamix", "main_grads": "bf16"}, "ademamix", 36),
    ({"optimizer": "sgd"}, "sgd", 22),                 # 4 + 8 + 8 + 2
    ({"precision": "fp32"}, "adam", 28),               # 4 + 12 + 12, the weight is the master
    ({"precision": "fp32", "optimizer": "sgd"}, "sgd", 20),
    ({"precision": "fp16"}, "adam", 28),               # FP16 gradients (2)
])
def test_optimizer_step_traffic(extra: dict[str, str], name: str, per_param: int) -> None:
    cls = only_class(lower(scenario(**extra)))
    (kernel,) = op_named(cls, f"optimizer.{name}").kernels()
    assert kernel.bytes == per_param * PARAMS


@pytest.mark.parametrize("zero", [1, 2])
def test_zero_shards_the_ademamix_states(zero: int) -> None:
    """Four data-parallel ranks: ZeRO 1 shards the 16 B of optimizer states (and the step),
    ZeRO 2 also the FP32 gradients; the BF16 weights stay whole."""
    sc = scenario(num_gpus=4, optimizer="ademamix", zero_stage=zero)
    cls = only_class(lower(sc))
    grads = 4 * PARAMS / (4 if zero >= 2 else 1)
    assert states_at_start(cls) == pytest.approx(
        {"weights": 2 * PARAMS, "gradients": grads, "optimizer": 16 * PARAMS / 4})
    (kernel,) = op_named(cls, "optimizer.ademamix").kernels()
    assert kernel.bytes == pytest.approx(38 * PARAMS / 4)


def test_host_optimizer_step_follows_the_optimizer() -> None:
    """ZeRO-Offload on one GH200: the FP32 gradients (4 B) go down, Grace streams AdEMAMix's
    38 B a parameter, the BF16 weights (2 B) come up; its 16 B of states live in LPDDR5X."""
    cls = only_class(lower(scenario(system="gh200-single", offload="optimizer",
                                    optimizer="ademamix")))
    assert op_named(cls, "offload.grads_d2h").bytes == 4 * PARAMS
    assert op_named(cls, "offload.adam").bytes == 38 * PARAMS
    assert op_named(cls, "offload.weights_h2d").bytes == 2 * PARAMS
    host = sum(e.bytes for e in cls.memory if e.category == "optimizer" and e.tier == "lpddr")
    assert host == 16 * PARAMS


# -- gradient dtype --------------------------------------------------------------------------

@pytest.mark.parametrize(("precision", "expected"), [
    ("bf16", "fp32"), ("fp8", "fp32"), ("fp16", "fp16"), ("fp32", "fp32")])
def test_main_grads_default_is_megatrons(precision: str, expected: str) -> None:
    training = TrainingSpec.model_validate(
        {"seq_len": S, "micro_batch": 1, "global_batch": 1, "precision": precision})
    assert training.main_grads_resolved == expected


@pytest.mark.parametrize(("precision", "main_grads"), [
    ("fp16", "bf16"), ("fp32", "bf16"), ("bf16", "fp16"), ("fp32", "fp16")])
def test_main_grads_must_fit_the_precision(precision: str, main_grads: str) -> None:
    with pytest.raises(ValidationError, match="main_grads"):
        TrainingSpec.model_validate({"seq_len": S, "micro_batch": 1, "global_batch": 1,
                                     "precision": precision, "main_grads": main_grads})


@pytest.mark.parametrize(("main_grads", "per_param"), [(None, 4), ("fp32", 4), ("bf16", 2)])
def test_data_parallel_gradient_all_reduce_follows_main_grads(main_grads: str | None,
                                                              per_param: int) -> None:
    extra = {} if main_grads is None else {"main_grads": main_grads}
    cls = only_class(lower(scenario(num_gpus=2, **extra)))
    reduced = sum(op.bytes for op in cls.ops if op.name.startswith("dp.grad_all_reduce"))
    assert reduced == per_param * PARAMS
    assert states_at_start(cls)["gradients"] == per_param * PARAMS
    gathers = [op for op in cls.ops if op.name.startswith("dp.param_all_gather")]
    assert not gathers  # ZeRO 0: no weight gather, whatever the gradient dtype


# -- document masking ------------------------------------------------------------------------

def _flash_flops(sc: Scenario) -> float:
    cls = only_class(lower(sc))
    (kernel, *_) = kernels_named(cls, "attn.flash")
    return kernel.flops


def test_document_mask_halves_attention_when_documents_are_half_the_sequence() -> None:
    """Causal within documents of d = s/2 tokens: 2 (d^2 / 2) = s^2 / 4 of the s^2 / 2 scores
    of a causal mask. Forward 4 s s (4 x 16) = 1,073,741,824 FLOPs; forward and backward
    (x 3) of 2 layers, 2 sequences: the step executes 6,442,450,944 FLOPs less; model FLOPs
    (Megatron's formula ignores the mask) are unchanged."""
    causal = scenario()
    document = scenario(attention_mask="document", mean_document_tokens=S // 2)
    assert _flash_flops(causal) == 4 * S * S * 64 == 1_073_741_824
    assert _flash_flops(document) == 1_073_741_824 / 2
    causal_work, document_work = lower(causal), lower(document)
    assert document_work.model_flops_per_step == causal_work.model_flops_per_step
    saved = causal_work.hardware_flops_per_step - document_work.hardware_flops_per_step
    assert saved == 0.5 * 3 * 1_073_741_824 * 2 * 2 == 6_442_450_944
    per_token = model_flops_per_token(document.spec.model, S)
    assert document_work.model_flops_per_step == per_token * 2 * S


def test_document_mask_with_a_remainder_document() -> None:
    """d = 768 in s = 2048: two documents of 768 and one of 512:
    (2 x 768^2 + 512^2) / 2048^2 = 1,441,792 / 4,194,304 = 0.34375."""
    document = scenario(attention_mask="document", mean_document_tokens=768)
    assert document.spec.training.attention_work_fraction == 0.34375
    assert _flash_flops(document) == 1_073_741_824 * 0.34375


def test_standard_attention_computes_every_score_whatever_the_mask() -> None:
    causal = only_class(lower(scenario(attention="standard")))
    document = only_class(lower(scenario(attention="standard", attention_mask="document",
                                         mean_document_tokens=256)))
    for name in ("attn.qk", "attn.av"):
        assert [k.flops for k in kernels_named(document, name)] == [
            k.flops for k in kernels_named(causal, name)]


@pytest.mark.parametrize(("extra", "message"), [
    ({"attention_mask": "document"}, "needs mean_document_tokens"),
    ({"attention_mask": "document", "mean_document_tokens": S + 1}, "exceeds seq_len"),
    ({"mean_document_tokens": 512}, "only used with attention_mask 'document'"),
])
def test_document_mask_keys_are_checked(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TrainingSpec.model_validate({"seq_len": S, "micro_batch": 1, "global_batch": 1,
                                     "precision": "bf16", **extra})


# -- activations -----------------------------------------------------------------------------

@pytest.mark.parametrize(("activation", "extra_params"), [
    ("xielu", 2), ("squared_relu", 0), ("gelu", 0)])
def test_non_gated_activations_have_two_matrices(activation: str, extra_params: int) -> None:
    """xIELU and squared ReLU are non-gated: up (h x f) and down (f x h) only; xIELU adds its
    two learned scalars per layer. The activation kernel reads the t x f up output and writes
    its t x f result (BF16): 2048 x 256 x 2 x 2 = 2,097,152 B; FLOPs are those of any
    non-gated MLP."""
    model = ModelSpec.model_validate({**TINY, "activation": activation})
    count = parameter_count(model)
    assert count.mlp_per_layer == 2 * 64 * 256 + extra_params
    assert count.total == PARAMS + 2 * extra_params
    assert model_flops_per_token(model, S) == model_flops_per_token(
        ModelSpec.model_validate(TINY), S)
    sc = scenario({"activation": activation})
    forward = {k.name: k for k in layer_forward(layer_shapes(sc.spec, sc.layout))
               if isinstance(k, Kernel)}
    assert forward["mlp_up"].shape == (S, 256, 64)
    assert forward["mlp_act"].bytes == 2_097_152


@pytest.mark.parametrize("activation", ["xielu", "squared_relu"])
def test_non_gated_activation_rejects_gated_mlp(activation: str) -> None:
    with pytest.raises(ValidationError, match="contradicts gated_mlp"):
        ModelSpec.model_validate({**TINY, "gated_mlp": True, "activation": activation})


# -- QK norm ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("norm", "per_layer"), [("rmsnorm", 2 * 16), ("layernorm", 4 * 16)])
def test_qk_norm_parameters(norm: str, per_layer: int) -> None:
    """A norm of head_dim (16) for queries and one for keys, shared by the heads (with a bias
    each under layernorm)."""
    plain = parameter_count(ModelSpec.model_validate({**TINY, "norm": norm}))
    qk = parameter_count(ModelSpec.model_validate({**TINY, "norm": norm, "qk_norm": True}))
    assert qk.attention_per_layer - plain.attention_per_layer == per_layer
    assert qk.total - plain.total == 2 * per_layer


def test_qk_norm_adds_two_norm_kernels_and_their_inputs() -> None:
    """With 2 KV heads: q_norm over t x 64 and k_norm over t x 32 elements, read and written in
    BF16 (524,288 and 262,144 B), backward at 1.5 times; their inputs (t x 96 x 2 =
    393,216 B) are kept for the backward pass; model FLOPs unchanged."""
    model = {"kv_heads": 2}
    plain, qk = scenario(model), scenario({**model, "qk_norm": True})
    shapes, qk_shapes = (layer_shapes(s.spec, s.layout) for s in (plain, qk))
    forward = {k.name: k for k in layer_forward(qk_shapes) if isinstance(k, Kernel)}
    assert (forward["q_norm"].bytes, forward["q_norm"].klass) == (524_288, "norm")
    assert (forward["k_norm"].bytes, forward["k_norm"].klass) == (262_144, "norm")
    names = [k.name for k in layer_forward(qk_shapes) if isinstance(k, Kernel)]
    assert names.index("qkv") < names.index("q_norm") < names.index("rope")
    backward = {k.name: k for k in layer_backward(qk_shapes) if isinstance(k, Kernel)}
    assert backward["q_norm.bwd"].bytes == 1.5 * 524_288
    assert backward["k_norm.bwd"].bytes == 1.5 * 262_144
    assert {k.name for k in layer_forward(shapes) if isinstance(k, Kernel)} == set(
        forward) - {"q_norm", "k_norm"}
    assert layer_activation_bytes(qk_shapes) - layer_activation_bytes(shapes) == 393_216
    assert lower(qk).model_flops_per_step == lower(plain).model_flops_per_step


@pytest.mark.parametrize(("precision", "recipe", "per_token"), [
    ("bf16", None, 32.0), ("fp8", "delayed", 25.0), ("fp8", "blockwise", 25.0 + 7 / 32)])
def test_fp8_keeps_the_linear_layers_inputs_in_fp8(precision: str, recipe: str | None,
                                                   per_token: float) -> None:
    """Transformer Engine keeps a linear layer's FP8 input for its weight gradient: of a GPT
    layer's 32 h bytes a token in BF16 (norm inputs 2 + 2, QKV input 2, Q K V 6, projection
    input 2, up-projection input 2, GELU input 8, down-projection input 8), the four GEMM inputs
    (h, h, h, 4h elements) take one byte each under FP8: 25 h; blockwise scaling adds an FP32
    scale per 128 of them. The attention core's FP32 log-sum-exp is the same in both."""
    extra = {"fp8_recipe": recipe} if recipe else {}
    sc = scenario(precision=precision, **extra)
    shapes = layer_shapes(sc.spec, sc.layout)
    core = TINY["heads"] * S * 4
    assert layer_activation_bytes(shapes) == pytest.approx(per_token * TINY["hidden"] * S + core)


@pytest.mark.parametrize(("precision", "zero_stage", "cached"), [
    ("fp8", 0, True), ("bf16", 0, False), ("fp8", 3, False)])
def test_fp8_caches_each_gemm_weight_and_its_transpose(precision: str, zero_stage: int,
                                                       cached: bool) -> None:
    """Under FP8 the attention and MLP weights keep an FP8 copy and its transpose for the
    step (2 B a parameter), the embedding, the output layer and the norms none; BF16 keeps
    none, nor does ZeRO-3, which gathers the weights anew every pass."""
    sc = scenario(num_gpus=1, precision=precision, zero_stage=zero_stage)
    count = parameter_count(sc.spec.model)
    cache = [e for e in only_class(lower(sc)).memory if e.buffer == "weights.fp8_cache"]
    gemm = TINY["layers"] * (count.attention_per_layer + count.mlp_per_layer)
    assert sum(e.bytes for e in cache) == (2 * gemm if cached else 0)


# -- tied embeddings -------------------------------------------------------------------------

def test_learned_positions_rotate_nothing_and_add_at_the_embedding() -> None:
    """GPT-2/3-style learned positions: no RoPE kernel in a layer (RoPE reads and writes
    t x (64 + 64) BF16 elements: 1,048,576 B), and the embedding reads its position table's
    rows besides the token rows (t x 64 x 2 B x 3 = 786,432 B, not 524,288); the table itself
    is 2048 x 64 more parameters; model FLOPs unchanged."""
    from ghsim.workload.kernels import embedding_forward
    rope = scenario()
    learned = scenario({"position_embedding": "learned", "max_position_embeddings": S})
    rope_shapes, learned_shapes = (layer_shapes(s.spec, s.layout) for s in (rope, learned))
    rotated = {k.name: k for k in layer_forward(rope_shapes) if isinstance(k, Kernel)}
    assert rotated["rope"].bytes == 1_048_576
    assert {k.name for k in layer_forward(learned_shapes) if isinstance(k, Kernel)} == set(
        rotated) - {"rope"}
    assert "rope.bwd" not in {k.name for k in layer_backward(learned_shapes)}
    (lookup,) = embedding_forward(learned_shapes)
    assert isinstance(lookup, Kernel) and lookup.bytes == 786_432
    assert parameter_count(learned.spec.model).total == PARAMS + S * 64
    assert lower(learned).model_flops_per_step == lower(rope).model_flops_per_step


def test_untied_output_matrix_has_parameters_gradients_states_and_traffic() -> None:
    """Untied: the V x h output matrix (64,000 parameters) adds its BF16 weight, FP32 gradient,
    Adam's 12 B of states and its 4 B gradient to the data-parallel all-reduce; the logits GEMM
    runs either way and model FLOPs do not change."""
    tied, untied = scenario({"tied_embeddings": True}, num_gpus=2), scenario(num_gpus=2)
    extra = 1000 * 64
    assert parameter_count(untied.spec.model).total - parameter_count(
        tied.spec.model).total == extra
    tied_cls, untied_cls = only_class(lower(tied)), only_class(lower(untied))
    difference = {key: value - states_at_start(tied_cls)[key]
                  for key, value in states_at_start(untied_cls).items()}
    assert difference == {"weights": 2 * extra, "gradients": 4 * extra, "optimizer": 12 * extra}

    def reduced(cls: RankClass) -> float:
        return sum(op.bytes for op in cls.ops if op.name.startswith("dp.grad_all_reduce"))

    assert reduced(untied_cls) - reduced(tied_cls) == 4 * extra
    assert [k.flops for k in kernels_named(untied_cls, "logits")] == [
        k.flops for k in kernels_named(tied_cls, "logits")]
    assert lower(untied).model_flops_per_step == lower(tied).model_flops_per_step


# -- ops run as separate PyTorch kernels (Hugging Face modeling code) ---------------------------

def _kernels(sc: Scenario, backward: bool = False) -> dict[str, Kernel]:
    shapes = layer_shapes(sc.spec, sc.layout)
    steps = layer_backward(shapes) if backward else layer_forward(shapes)
    return {k.name: k for k in steps if isinstance(k, Kernel)}


def test_eager_ops_move_the_bytes_counted_by_hand() -> None:
    """One sequence of 2048 tokens, hidden 64, 4 heads of 16, ffn 256, bf16. RMSNorm eager: 36
    bytes an element forward in 5 kernels, 88 backward in 10; RoPE over queries and keys: 14
    and 14 in 4 non-vectorized kernels for each of them both ways, and the sum of its products
    (6 and 6, one vectorized kernel each way for each); the gated activation over the ffn: 10
    and 18 in 2 and 3. Fused: one kernel, 2 bytes read and written an element (the activation
    reads both halves)."""
    model = {"gated_mlp": True, "qk_norm": True}
    fused = _kernels(scenario(model))
    eager = _kernels(scenario(model, eager_ops=["norm", "rope", "activation"]))
    eager_bwd = _kernels(scenario(model, eager_ops=["norm", "rope", "activation"]), True)
    t, h, f = S, 64, 256
    assert fused["ln1"].bytes == t * h * 4 and fused["ln1"].kernels == 1
    assert fused["mlp_act"].bytes == t * f * 6
    for name, elements, forward, backward, kernels in (
            ("ln1", t * h, 36, 88, (5, 10)), ("ln2", t * h, 36, 88, (5, 10)),
            ("q_norm", t * h, 36, 88, (5, 10)), ("k_norm", t * h, 36, 88, (5, 10)),
            ("rope", t * 2 * h, 14, 14, (8, 8)), ("rope.sum", t * 2 * h, 6, 6, (2, 2)),
            ("mlp_act", t * f, 10, 18, (2, 3))):
        assert eager[name].bytes == elements * forward, name
        assert eager_bwd[f"{name}.bwd"].bytes == pytest.approx(elements * backward), name
        assert (eager[name].kernels, eager_bwd[f"{name}.bwd"].kernels) == kernels, name
        # Hugging Face's SiLU and product run on two projections' contiguous outputs
        # (PyTorch's vectorized kernels), RoPE on broadcasts and strided views (its
        # non-vectorized ones); its norms are mostly contiguous kernels around a reduction
        klass = {"mlp_act": "pointwise", "rope": "strided", "rope.sum": "pointwise"}.get(
            name) or fused[name].klass
        assert eager[name].klass == klass, name
    # another non-gated activation, a GELU without a bias (F.gelu), and a LayerNorm are one
    # PyTorch kernel either way
    for plain in ({"activation": "squared_relu", "bias": True}, {"activation": "gelu"}):
        assert (_kernels(scenario(plain, eager_ops=["activation"]))["mlp_act"]
                == _kernels(scenario(plain))["mlp_act"])
    layernorm = {"norm": "layernorm"}
    assert (_kernels(scenario(layernorm, eager_ops=["norm"]))["ln1"]
            == _kernels(scenario(layernorm))["ln1"])


def test_eager_bias_gelu_is_megatrons_formula_op_by_op_at_the_pointwise_rate() -> None:
    """Megatron's bias_gelu (x = bias + y; x * 0.5 * (1 + tanh(0.79788456 x (1 + 0.044715 x
    x)))) run op by op, for a model with biases, over 2048 tokens x ffn 256 in bf16: 10
    kernels forward moving 23 two-byte values an element (46 bytes), bias_gelu_back's 19
    moving 46 (92 bytes); fused, one kernel of 4 bytes an element. Its kernels are PyTorch's
    vectorized point-wise ones: on an H100 each second moves 0.8546 x 3350 GB/s of them, not
    the element-wise 0.4818."""
    from ghsim.config.api import load_hardware
    from ghsim.costmodel.gpu import gpu_cost_model

    elements, bias = S * TINY["ffn_hidden"], {"bias": True}
    fused = _kernels(scenario(bias))["mlp_act"]
    eager = _kernels(scenario(bias, eager_ops=["activation"]))["mlp_act"]
    eager_bwd = _kernels(scenario(bias, eager_ops=["activation"]), True)["mlp_act.bwd"]
    assert (fused.bytes, fused.kernels, fused.klass) == (elements * 4, 1, "elementwise")
    assert (eager.bytes, eager.kernels, eager.klass) == (elements * 46, 10, "pointwise")
    assert (eager_bwd.bytes, eager_bwd.kernels) == (pytest.approx(elements * 92), 19)
    h100 = load_hardware("h100-sxm5-80gb")
    gpu = gpu_cost_model(h100)
    launches = 10 * 3e-6  # the part's kernel_launch_us, once a kernel
    assert gpu.kernel_s(eager) == pytest.approx(eager.bytes / (0.8546 * 3350e9) + launches)
    assert h100.gpu is not None
    no_pointwise = h100.model_copy(update={"gpu": h100.gpu.model_copy(update={
        "memory": h100.gpu.memory.model_copy(update={"pointwise_efficiency": None})})})
    assert gpu_cost_model(no_pointwise).kernel_s(eager) == pytest.approx(
        eager.bytes / (0.4818 * 3350e9) + launches)


def test_strided_eager_kernels_run_at_the_measured_rate_whatever_the_hbm() -> None:
    """RoPE run op by op over 2048 tokens x (64 + 64) query and key columns, bf16: 14 bytes
    an element in 8 kernels, PyTorch's non-vectorized ones. An H100 processes 321.6 billion
    elements a second of them (gpu.compute.strided_elementwise_gelem_s, measured on an H200:
    bound by the SMs, not HBM), a 16-bit read and write each, 1286.4 GB/s; the same with its
    HBM doubled; with HBM below STREAM's share of it, the STREAM rate (0.8501 x 1000 GB/s); on
    a part that gives no rate, the element-wise one (0.4818 x 3350)."""
    from ghsim.config.api import load_hardware
    from ghsim.costmodel.gpu import gpu_cost_model

    rope = _kernels(scenario(eager_ops=["rope"]))["rope"]
    assert (rope.bytes, rope.kernels, rope.klass) == (S * 128 * 14, 8, "strided")
    launches = 8 * 3e-6
    h100 = load_hardware("h100-sxm5-80gb")
    assert h100.gpu is not None
    gpu, memory = h100.gpu, h100.gpu.memory

    def with_(compute: dict[str, object], hbm: float = 3350) -> float:
        part = h100.model_copy(update={"gpu": gpu.model_copy(update={
            "compute": gpu.compute.model_copy(update=compute),
            "memory": memory.model_copy(update={"peak_bandwidth_gb_s": hbm})})})
        return gpu_cost_model(part).kernel_s(rope)

    assert with_({}) == pytest.approx(rope.bytes / 1286.4e9 + launches)
    assert with_({}, hbm=6700) == pytest.approx(rope.bytes / 1286.4e9 + launches)
    assert with_({}, hbm=1000) == pytest.approx(rope.bytes / (0.8501 * 1000e9) + launches)
    assert with_({"strided_elementwise_gelem_s": None}) == pytest.approx(
        rope.bytes / (0.4818 * 3350e9) + launches)
    # ghsim inspect shows the rate the kernels get
    from ghsim.report.views import hardware_view
    assert hardware_view(h100)["rates"]["memory_bytes_per_s"]["strided"] == pytest.approx(
        1286.4e9)


LEGACY = ["residual", "bias", "attention_layout"]


def test_legacy_megatron_ops_move_the_bytes_counted_by_hand() -> None:
    """Legacy Megatron's local transformer op by op, over 2048 tokens, hidden 64 (4 heads of
    16, no grouping), bf16. Its bias-dropout-add with a bias and dropout: the bias add (4
    bytes an element), dropout (4 and a one-byte mask) and the residual add (6), 15 bytes in 3
    kernels; backward the gradients' sum (9), dropout's (5) and the bias gradient (2), 16 in
    3; with the bias only 10 and 11 in 2 each, with dropout only 11 and 14 in 2 each. Fused:
    one kernel of 6 bytes, 7 with dropout's mask. The QKV bias: 4 bytes an element of the 3 x
    64 wide output forward, 2 backward, a kernel each; without eager ops a GEMM epilogue's (no
    step). The flash path's copies of q, k, v and the output (4 x 64 wide): 4 bytes an
    element, in 4 kernels forward and 2 backward."""
    t, h = S, 64
    both = {"bias": True, "dropout": 0.1}
    eager = _kernels(scenario(both, eager_ops=LEGACY))
    eager_bwd = _kernels(scenario(both, eager_ops=LEGACY), True)
    for name in ("residual1", "residual2"):
        assert (eager[name].bytes, eager[name].kernels, eager[name].klass) == (
            t * h * 15, 3, "pointwise")
        assert (eager_bwd[f"{name}.bwd"].bytes, eager_bwd[f"{name}.bwd"].kernels) == (
            pytest.approx(t * h * 16), 3)
    assert (eager["qkv.bias"].bytes, eager["qkv.bias"].kernels) == (t * 3 * h * 4, 1)
    assert eager_bwd["qkv.bias.bwd"].bytes == pytest.approx(t * 3 * h * 2)
    layout, layout_bwd = eager["attn.layout"], eager_bwd["attn.layout.bwd"]
    assert (layout.bytes, layout.kernels, layout.klass) == (t * 4 * h * 4, 4, "strided")
    # the bias add broadcasts (PyTorch's non-vectorized kernel); its gradient is a sum over
    # the tokens, a reduction over contiguous rows
    assert (eager["qkv.bias"].klass, eager_bwd["qkv.bias.bwd"].klass) == ("strided",
                                                                          "elementwise")
    assert eager_bwd["attn.layout.bwd"].klass == "strided"
    assert (layout_bwd.bytes, layout_bwd.kernels) == (pytest.approx(t * 4 * h * 4), 2)
    for model, forward, backward in (({"bias": True}, 10, 11), ({"dropout": 0.1}, 11, 14)):
        one = _kernels(scenario(model, eager_ops=LEGACY))["residual1"]
        one_bwd = _kernels(scenario(model, eager_ops=LEGACY), True)["residual1.bwd"]
        assert (one.bytes, one.kernels) == (t * h * forward, 2), model
        assert (one_bwd.bytes, one_bwd.kernels) == (pytest.approx(t * h * backward), 2), model
    fused = _kernels(scenario(both))
    assert (fused["residual1"].bytes, fused["residual1"].kernels) == (t * h * 7, 1)
    assert "qkv.bias" not in fused and "attn.layout" not in fused
    # without a bias or dropout the bias-dropout-add is the plain add; no bias, no bias add;
    # standard attention has no flash layout to copy into
    plain = _kernels(scenario(eager_ops=LEGACY))
    assert plain["residual1"] == _kernels(scenario())["residual1"]
    assert "qkv.bias" not in plain
    assert "attn.layout" not in _kernels(scenario(both, attention="standard",
                                                  eager_ops=LEGACY))


def test_each_eager_op_slows_a_step_and_none_leaves_it_as_it_was() -> None:
    from ghsim.engine.simulate import simulate

    model = {"gated_mlp": True, "qk_norm": True, "layers": 4, "bias": True, "dropout": 0.1}
    ops = ["norm", "rope", "activation", *LEGACY]
    times = [simulate(scenario(model, eager_ops=ops[:n])).step_time_s
             for n in range(len(ops) + 1)]
    assert times == sorted(times) and len(set(times)) == len(ops) + 1
    assert times[0] == simulate(scenario(model)).step_time_s
