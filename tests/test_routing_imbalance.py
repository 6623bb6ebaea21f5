"""Balanced routing as Megatron forces it (--moe-router-force-load-balancing, random sets):
the busiest expert rank's expected load and each expert's spread in closed form, against a
by-hand case and against routing drawn as Megatron draws it (normal logits, top-k,
group-limited where asked); the grouped GEMMs' expected partial tiles; what the scenario does
with them; and NeMo Automodel's dealt blocks."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from ghsim.config import load_scenario
from ghsim.config.api import load_hardware
from ghsim.costmodel.gpu import expected_tiles, gpu_cost_model
from ghsim.engine.simulate import simulate
from ghsim.stats import expected_largest_normal
from ghsim.workload.imbalance import random_expert_spread, random_routing_imbalance
from ghsim.workload.shapes import layer_shapes
from tests.test_moe import TINY_MOE as _TINY

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import routing_imbalance

TINY_MOE = [*_TINY, "num_gpus=8", "training.global_batch=8", "parallelism.ep=8",
            "model.moe.routing=balanced"]
"""The tiny MoE of tests/test_moe.py (16 experts, top-4, 1,024 tokens a rank) on 8 ranks."""


def _drawn(experts: int, top_k: int, ep: int, tokens: int, groups: int = 1, picked: int = 1,
           trials: int = 400) -> tuple[float, float]:
    """benchmarks/routing_imbalance.py's drawing of Megatron's forced routing, seeded."""
    return routing_imbalance.drawn(experts, top_k, ep, tokens, groups, picked, trials,
                                   np.random.default_rng(7))


def test_two_ranks_of_one_copy_by_hand() -> None:
    """4 experts, top-1, 2 ranks, 10,000 tokens: a token lands on a rank with probability
    1/2, so its load is binomial, 5,000 +- 50; the two loads sum to 10,000 (correlation -1),
    and the busier lies sqrt(2) x 50 x (Blom's expected largest of 2 normals) above."""
    expected = 1 + math.sqrt(2) * 50 * expected_largest_normal(2) / 5000
    assert random_routing_imbalance(4, 1, 2, 10_000) == pytest.approx(expected, rel=1e-12)
    # one expert of four: binomial(10,000, 1/4)
    assert random_expert_spread(4, 1, 10_000) == pytest.approx(math.sqrt(10_000 * 0.25 * 0.75))
    assert random_routing_imbalance(4, 1, 1, 10_000) == 1.0


@pytest.mark.parametrize("case", [
    (128, 8, 8, 2048, 1, 1),  # Qwen3-style top-8 of 128
    (8, 2, 8, 4096, 1, 1),  # Mixtral-style top-2 of 8, one expert a rank
    (256, 8, 64, 512, 8, 4),  # DeepSeek-V3: 4 of 8 groups, a rank inside one group
])
def test_the_closed_form_matches_routing_drawn_as_megatron_draws_it(case: tuple) -> None:
    """The busiest rank's excess over the mean within 10 % of 400 drawn passes' (whose own
    error is a few %), and one expert's spread within 5 %."""
    experts, top_k, ep, tokens, groups, picked = case
    busiest, spread = _drawn(*case)
    modelled = random_routing_imbalance(experts, top_k, ep, tokens, groups, picked)
    assert modelled - 1 == pytest.approx(busiest - 1, rel=0.10)
    assert random_expert_spread(experts, top_k, tokens, groups, picked) == pytest.approx(
        spread, rel=0.05)


def test_whole_groups_a_rank_are_bounded_from_above() -> None:
    """Two whole groups a rank: the picked groups each tend to give their share of the top-k,
    so the closed form (uniform among the picked groups' experts) overstates the busiest
    rank's excess, by at most 15 % (documented in ghsim.workload.imbalance)."""
    busiest, _ = _drawn(256, 8, 4, 1024, 8, 4)
    modelled = random_routing_imbalance(256, 8, 4, 1024, 8, 4)
    assert busiest - 1 < modelled - 1 < 1.15 * (busiest - 1)


def test_more_tokens_a_pass_even_the_load_out() -> None:
    """The excess falls as 1 / sqrt(tokens) and grows with the ranks that can be the busiest."""
    excess = [random_routing_imbalance(128, 8, 8, n) - 1 for n in (1024, 4096, 16384)]
    assert excess[0] == pytest.approx(2 * excess[1]) and excess[1] == pytest.approx(2 * excess[2])
    assert random_routing_imbalance(128, 8, 8, 4096) < random_routing_imbalance(128, 8, 32, 4096)


def test_expected_tiles_by_hand() -> None:
    """512 rows exactly fill four 128-row tiles; a random 512 +- 22 needs a fifth half the
    time (P(M > 512) = 1/2, P(M > 384) = 1 - 3e-9); 520 rows fixed need five."""
    assert expected_tiles(512, 0.0, 128) == 4.0
    assert expected_tiles(520, 0.0, 128) == 5.0
    assert expected_tiles(512, 22.0, 128) == pytest.approx(4.5, abs=1e-6)
    assert 4.5 < expected_tiles(520, 22.0, 128) < 5.0


def test_a_grouped_gemm_of_random_experts_pays_their_partial_tiles() -> None:
    """16 experts of 512 +- 22 rows by 1,024 columns on an H100 (132 SMs, 128 x 128 tiles):
    16 x 4.5 x 8 = 576 tiles in 5 waves, against 512 in 4 when every expert has 512."""
    gpu = gpu_cost_model(load_hardware("h100-sxm5-80gb"))
    useful = 16 * 512 * 1024
    assert gpu.wave_efficiency(512, 1024, 16) == pytest.approx(useful / (4 * 132 * 128 * 128))
    assert gpu.wave_efficiency(512, 1024, 16, 22.0) == pytest.approx(
        useful / (5 * 132 * 128 * 128))


def _experts_up(*extra: str):  # type: ignore[no-untyped-def]
    scenario = load_scenario("llama3-8b-gh200", [*TINY_MOE, *extra])
    shapes = layer_shapes(scenario.spec, scenario.layout)
    return shapes


def test_random_routing_gives_the_busiest_rank_its_excess_and_each_expert_its_spread() -> None:
    """8 ranks of 2 experts, 1,024 tokens each, top-4 of 16: the group routes 8,192 tokens."""
    moe = _experts_up("model.moe.routing=balanced").moe
    assert moe is not None
    assert moe.imbalance == pytest.approx(random_routing_imbalance(16, 4, 8, 8192))
    assert moe.expert_spread == pytest.approx(random_expert_spread(16, 4, 8192))
    dealt = _experts_up("model.moe.routing=dealt").moe
    assert dealt is not None and (dealt.imbalance, dealt.expert_spread) == (1.0, 0.0)
    # token dropping pads every expert to its capacity: no excess, no spread
    dropped = _experts_up("model.moe.routing=balanced", "model.moe.capacity_factor=1.0").moe
    assert dropped is not None and (dropped.imbalance, dropped.expert_spread) == (1.0, 0.0)


def test_random_sets_are_slower_than_dealt_blocks() -> None:
    steps = [simulate(load_scenario("llama3-8b-gh200", [*TINY_MOE, f"model.moe.routing={r}"]))
             .step_time_s for r in ("dealt", "balanced")]
    assert steps[1] > steps[0]


def test_inspect_shows_the_expert_load_a_pass(capsys: pytest.CaptureFixture[str]) -> None:
    """`ghsim inspect` of a scenario gives each expert's tokens a pass and the busiest rank's
    excess: 1,024 tokens x top-4 on 2 experts a rank is 2,048 copies an expert, times the
    busiest rank's share, and none for a dense model."""
    import json

    from ghsim.cli import main
    from ghsim.report.views import experts_view

    sc = load_scenario("llama3-8b-gh200", [*TINY_MOE, "model.moe.routing=balanced"])
    view = experts_view(sc)
    imbalance = random_routing_imbalance(16, 4, 8, 8192)
    assert view == {"routing": "balanced", "ep": 8, "busiest_rank_over_mean": imbalance,
                    "tokens_per_expert": math.ceil(2048 * imbalance),
                    "tokens_per_expert_spread": random_expert_spread(16, 4, 8192)}
    assert experts_view(load_scenario("llama3-8b-gh200")) is None
    assert main(["inspect", "llama3-8b-gh200", "--json",
                 *(f"--set={o}" for o in [*TINY_MOE, "model.moe.routing=balanced"])]) == 0
    shown = json.loads(capsys.readouterr().out)["experts"]
    assert shown["tokens_per_expert"] == view["tokens_per_expert"]
    assert main(["inspect", "llama3-8b-gh200",
                 *(f"--set={o}" for o in [*TINY_MOE, "model.moe.routing=balanced"])]) == 0
    shown_text = " ".join(capsys.readouterr().out.split())  # the table wraps its cells
    assert "expert load a pass" in shown_text and "balanced routing: the busiest of 8" in shown_text


def test_dealt_routing_sends_a_token_to_the_one_rank_its_block_lies_on() -> None:
    """NeMo Automodel's FakeBalancedGate gives token i experts 4i .. 4i + 3 (mod 16): 16
    experts on 8 ranks hold 2 each, so a block spans 2 ranks, and DeepEP sends the token to
    those 2: half its copies travel, where random experts reach 8 (1 - (7/8)^4) = 3.31 ranks.
    With 32 experts (4 a rank) a block lies on one rank: a quarter travel."""
    from ghsim.fabric.traffic import _deduplicated

    deepep = [*TINY_MOE, "parallelism.moe_dispatcher=deepep"]
    dealt = _experts_up(*deepep, "model.moe.routing=dealt").moe
    balanced = _experts_up(*deepep).moe
    assert dealt is not None and balanced is not None
    assert dealt.dedup == (4, 4, 1, True) and (dealt.imbalance, dealt.expert_spread) == (1.0, 0.0)
    assert _deduplicated(dealt.dedup, 8) == pytest.approx(2 / 4)
    assert _deduplicated(balanced.dedup, 8) == pytest.approx(8 * (1 - (7 / 8) ** 4) / 4)
    wide = _experts_up(*deepep, "model.moe.routing=dealt", "model.moe.experts=32").moe
    assert wide is not None and _deduplicated(wide.dedup, 8) == pytest.approx(1 / 4)


def test_picked_groups_lie_on_the_domains_by_hand() -> None:
    """4 of 8 groups on 2 domains of 4 groups: a domain is missed only when all 4 picked
    groups lie on the other, 1 in C(8, 4) = 70; a group spanning 2 of 8 domains covers 2."""
    from ghsim.fabric.traffic import _domains_of_groups

    assert _domains_of_groups(8, 4, 2) == pytest.approx(2 * (1 - 1 / 70))
    assert _domains_of_groups(4, 1, 8) == 2.0


def test_dealt_routing_needs_whole_blocks() -> None:
    from ghsim.errors import InputError

    with pytest.raises(InputError, match="multiple of top_k"):
        load_scenario("llama3-8b-gh200", [*TINY_MOE, "model.moe.routing=dealt",
                                          "model.moe.top_k=3"])
