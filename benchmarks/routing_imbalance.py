"""Random routing's busiest expert rank, closed form against routing drawn as Megatron draws it.

``model.moe.routing: balanced`` (Megatron's ``--moe-router-force-load-balancing``: normal logits,
group-limited top-k where the model has groups, then top-k) makes every expert equally loaded
only on average; each layer pass waits for the busiest rank of the expert-parallel group.
``ghsim.workload.imbalance`` gives that rank's expected load over the mean in closed form. This
prints it beside the mean over drawn passes, for the shipped MoE models with 512 tokens a rank
in a pass (a 4,096-token micro-batch split eight ways by sequence parallelism; the excess falls
as one over the square root of the tokens).

Nothing is fitted. Where a rank holds whole router groups (DeepSeek-V3 at EP 8) the closed form
overstates the excess (documented in ghsim.workload.imbalance). Run:
``python benchmarks/routing_imbalance.py`` (about a minute).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ghsim.workload.imbalance import random_routing_imbalance  # noqa: E402

# name: (experts, top_k, router groups, groups a token may pick)
MODELS = {
    "DeepSeek-V3": (256, 8, 8, 4),
    "Qwen3-235B-A22B": (128, 8, 1, 1),
    "GPT-OSS-120B": (128, 4, 1, 1),
    "Mixtral 8x22B": (8, 2, 1, 1),
}
TOKENS_PER_RANK = 512
PASSES = 100


def drawn(experts: int, top_k: int, ep: int, tokens: int, groups: int, picked: int,
          passes: int, rng: np.random.Generator) -> tuple[float, float]:
    """Route ``tokens`` tokens ``passes`` times as Megatron's forced balance does (normal
    logits, the ``picked`` groups with the largest sums of their top ``top_k / picked``
    logits, then the top-k among them): the busiest of ``ep`` ranks' load over the mean,
    averaged, and the standard deviation of the first expert's copies."""
    per_group, local = experts // groups, experts // ep
    busiest, first = [], []
    for _ in range(passes):
        logits = rng.standard_normal((tokens, experts))
        if groups > 1:
            scores = np.sort(logits.reshape(tokens, groups, per_group), axis=2)
            best = np.argsort(-scores[:, :, -(top_k // picked):].sum(axis=2), axis=1)[:, :picked]
            allowed = np.zeros((tokens, groups), dtype=bool)
            np.put_along_axis(allowed, best, True, axis=1)
            logits = np.where(np.repeat(allowed, per_group, axis=1), logits, -np.inf)
        chosen = np.argpartition(-logits, top_k, axis=1)[:, :top_k].ravel()
        loads = np.bincount(chosen // local, minlength=ep)
        busiest.append(loads.max() / loads.mean())
        first.append(np.count_nonzero(chosen == 0))
    return float(np.mean(busiest)), float(np.std(first))


def main() -> None:
    rng = np.random.default_rng(2026)
    print(f"{'model':16s} {'ep':>3s} {'tokens':>7s} {'closed form':>12s} {'drawn':>8s}")
    for name, (experts, top_k, groups, picked) in MODELS.items():
        for ep in (8, 32, 64):
            if experts % ep:
                continue
            tokens = TOKENS_PER_RANK * ep  # the group's tokens in a pass
            modelled = random_routing_imbalance(experts, top_k, ep, tokens, groups, picked)
            measured, _ = drawn(experts, top_k, ep, tokens, groups, picked, PASSES, rng)
            print(f"{name:16s} {ep:3d} {tokens:7,d} {100 * (modelled - 1):+11.2f}% "
                  f"{100 * (measured - 1):+7.2f}%")
    print(f"(the busiest rank's token copies over the mean; {PASSES} drawn passes each, whose "
          "own error is a few % of the excess)")


if __name__ == "__main__":
    main()
