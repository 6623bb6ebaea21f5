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
            if isinstance(step, Kernel) and step.name.startswith("loss")}


def _bytes(kernels: dict[str, Kernel], name: str) -> float:
    """A loss pass's bytes, its streaming and broadcasting kernels together."""
    return sum(k.bytes for n, k in kernels.items() if n in (name, f"{name}.broadcast"))


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
    assert _bytes(kernels, "loss") == TOKENS * VOCAB * forward
    assert _bytes(kernels, "loss.bwd") == TOKENS * VOCAB * backward
    # unfused, the shift, the division and the gradient's scaling broadcast a value a token
    # over the vocabulary: PyTorch's non-vectorized kernels, one element a logit each (fp32,
    # 8 bytes); the fused code's passes all stream
    broadcast = {n: (k.elements, k.bytes, k.kernels) for n, k in kernels.items()
                 if k.klass == "strided"}
    logits = TOKENS * VOCAB
    assert broadcast == ({} if fusion else {"loss.broadcast": (2 * logits, 16 * logits, 2),
                                            "loss.bwd.broadcast": (logits, 8 * logits, 1)})


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
    assert _bytes(kernels, "loss") == TOKENS * VOCAB * forward
    assert _bytes(kernels, "loss.bwd") == TOKENS * VOCAB * backward
    assert all(k.klass == "loss" for k in kernels.values())


def test_unfused_loss_broadcasts_cost_their_elements_not_their_bytes() -> None:
    """The unfused loss's fp32 shift and division, 2 x 2048 x 32000 elements: on a GH200 at
    the measured 321.6 billion elements a second (plus one launch gap each), not at 8 bytes
    an element over HBM; they move 16 bytes a logit, which STREAM would carry in less time."""
    from ghsim.config.api import load_hardware
    from ghsim.costmodel.gpu import gpu_cost_model

    broadcast = _loss_kernels()["loss.broadcast"]
    gpu = gpu_cost_model(load_hardware("gh200-96gb"))
    elements = 2 * TOKENS * VOCAB
    assert gpu.kernel_s(broadcast) == pytest.approx(elements / 321.6e9 + 2 * 3e-6)
    assert broadcast.bytes / gpu.hbm_bytes_per_s < elements / 321.6e9


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
