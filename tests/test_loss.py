"""The cross-entropy loss over the vocabulary: the bytes Megatron's code moves, by hand, and the
fusion knob moving a simulated step the way it moves the real one."""

from __future__ import annotations

import pytest

from ghsim import simulate
from ghsim.config import load_scenario
from ghsim.errors import InputError
from ghsim.workload.ir import Kernel
from ghsim.workload.lower import lower

TOKENS, VOCAB = 2048, 32000
BASE = ["system=gh200-single", "num_gpus=1", "model.layers=1", "model.hidden=1024",
        "model.heads=8", "model.kv_heads=8", "model.ffn_hidden=4096", f"model.vocab={VOCAB}",
        "training.seq_len=2048", "training.micro_batch=1", "training.global_batch=1",
        "training.attention=flash", "parallelism.recompute=none", "offload.strategy=none"]


def _loss_kernels(*extra: str) -> dict[str, Kernel]:
    workload = lower(load_scenario("llama3-8b-gh200", [*BASE, *extra]))
    return {step.name: step for op in workload.classes[0].ops for step in op.body
            if isinstance(step, Kernel) and step.klass == "loss"}


@pytest.mark.parametrize(("precision", "fusion", "forward", "backward"), [
    # unfused (megatron/core/tensor_parallel/cross_entropy.py), 16-bit logits:
    # float() 2 + 4, max 4, x - max 4 + 4, exp 4 + 4, sum 4, divide 4 + 4 | scale 4 + 4, cast 4 + 2
    ("bf16", False, 2 + 4 + 4 + 8 + 8 + 4 + 8, 8 + 6),
    # fused: float() with max 2 + 4, exp(x - max) 4 + 4, sum 4, divide 4 + 4 | scale and cast 4 + 2
    ("bf16", True, 6 + 8 + 4 + 8, 6),
    # fp32 logits are not copied: max 4 and the rest; no cast back
    ("fp32", False, 4 + 8 + 8 + 4 + 8, 8),
    ("fp32", True, 4 + 8 + 4 + 8, 8),
])
def test_loss_moves_the_bytes_megatrons_passes_move(precision: str, fusion: bool,
                                                     forward: int, backward: int) -> None:
    kernels = _loss_kernels(f"training.precision={precision}",
                            f"training.cross_entropy_fusion={str(fusion).lower()}")
    assert kernels["loss"].bytes == TOKENS * VOCAB * forward
    assert kernels["loss.bwd"].bytes == TOKENS * VOCAB * backward


@pytest.mark.parametrize(("precision", "forward", "backward"), [
    # Transformer Engine's Triton kernels: online softmax reads 2, the loss kernel reads 2 and
    # writes the gradient in place 2 | the backward scales it in place 2 + 2
    ("bf16", 2 + 2 + 2, 2 + 2),
    ("fp32", 4 + 4 + 4, 4 + 4),
])
def test_transformer_engines_fused_loss_moves_the_logits_three_times_and_twice_back(
        precision: str, forward: int, backward: int) -> None:
    kernels = _loss_kernels(f"training.precision={precision}", "training.cross_entropy_fusion=true",
                            "training.cross_entropy_fusion_impl=te")
    assert kernels["loss"].bytes == TOKENS * VOCAB * forward
    assert kernels["loss.bwd"].bytes == TOKENS * VOCAB * backward


def test_transformer_engines_loss_is_the_cheapest_and_needs_the_fusion() -> None:
    def step(*extra: str) -> float:
        return simulate(load_scenario("llama3-8b-gh200", [*BASE, *extra])).step_time_s

    native = step("training.cross_entropy_fusion=true")
    assert step("training.cross_entropy_fusion=true",
                "training.cross_entropy_fusion_impl=te") < native
    with pytest.raises(InputError, match="needs cross_entropy_fusion true"):
        load_scenario("llama3-8b-gh200", [*BASE, "training.cross_entropy_fusion_impl=te"])


def test_fusing_the_loss_shortens_the_step_and_a_larger_vocabulary_lengthens_it() -> None:
    def step(*extra: str) -> float:
        return simulate(load_scenario("llama3-8b-gh200", [*BASE, *extra])).step_time_s

    unfused = step()
    assert step("training.cross_entropy_fusion=true") < unfused
    assert step("model.vocab=128000") > unfused
