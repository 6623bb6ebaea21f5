"""How many more token copies the busiest expert rank receives than the mean when a router
picks experts at random, as Megatron-Core's ``--moe-router-force-load-balancing`` does
(``model.moe.routing: balanced``).

That flag replaces the router's logits by normal draws (``RandomSTE`` in
``megatron/core/transformer/moe/moe_utils.py``, NVIDIA/Megatron-LM core_r0.14.0 onwards, and
the same ``apply_random_logits`` in the Megatron-MoE-ModelZoo runs), so each token's ``top_k``
experts are a uniformly random set of distinct experts; with group-limited routing the token's
groups are a random set of ``picked`` of the ``groups`` too (the groups' scores are sums of
random logits) and its experts a random set among theirs. Every expert then receives the same
number of copies *on average*, but each layer pass draws afresh, and the pass waits for the
busiest rank of the expert-parallel group: the combine all-to-all cannot finish before that
rank's experts have run.

A rank holds ``e = experts / ep`` experts. One token sends it ``X`` copies, a hypergeometric
draw of the token's ``top_k`` among its eligible experts, ``S`` of which are the rank's:
``E[X | S] = k S / n`` and ``Var[X | S] = k (S / n)(1 - S / n)(n - k) / (n - 1)`` for ``n``
eligible experts (all of them without a group limit). With a group limit ``S`` is itself
random: the rank's group is picked or not (a rank inside one group), or a hypergeometric number
of the rank's whole groups is (a rank of several groups). ``Var X`` is the mean of the
conditional variance plus the variance of the conditional mean. The ``M`` tokens of the group
(every member's own, ``tokens x ep x etp``) route independently, so a rank's load has mean
``M k e / experts`` and variance ``M Var X``; the ``ep`` loads sum to ``M k`` exactly, so any two
correlate by ``-1 / (ep - 1)`` and the busiest lies ``sqrt(ep / (ep - 1))`` times the expected
largest of ``ep`` independent normal draws above the mean, in standard deviations.

Without a group limit the token's experts are exactly a uniform random set, and the form is
exact up to the normal approximation and Blom's order statistic (checked against routing drawn
as Megatron draws it, tests/test_routing_imbalance.py). With a group limit the top-k inside the
picked groups is not uniform: the groups were picked for their largest logits, so each tends to
give its share. Where a rank holds a few experts of one group (DeepSeek-V3 at EP 64) that
matters little (variance 3 % high against drawn routing); where it holds whole groups (EP 8 or
fewer for DeepSeek-V3) the form overstates the variance by up to a quarter, the busiest rank's
excess by about a tenth.
"""

from __future__ import annotations

import math

from ghsim.stats import expected_largest_normal


def _hypergeometric(population: int, successes: int, draws: int) -> tuple[float, float]:
    """Mean and variance of the successes among ``draws`` taken without replacement."""
    p = successes / population
    mean = draws * p
    if population <= 1:
        return mean, 0.0
    return mean, draws * p * (1 - p) * (population - draws) / (population - 1)


def _copies_per_token(experts: int, local: int, top_k: int, groups: int,
                      picked: int) -> tuple[float, float]:
    """Mean and variance of the copies one token sends to a rank holding ``local`` experts."""
    per_group = experts // groups
    eligible = picked * per_group
    # (probability, the rank's eligible experts) of each way the token's groups can fall
    if groups <= 1 or picked >= groups:
        cases = [(1.0, local)]
    elif per_group % local == 0:  # the rank's experts lie in one group
        cases = [(picked / groups, local), (1 - picked / groups, 0)]
    elif local % per_group == 0:  # the rank holds whole groups, ``j`` of them picked
        own = local // per_group
        total = math.comb(groups, picked)
        cases = [(math.comb(own, j) * math.comb(groups - own, picked - j) / total, j * per_group)
                 for j in range(max(0, picked - (groups - own)), min(own, picked) + 1)]
    else:  # groups that straddle ranks: the token's experts taken as free of the limit
        return _hypergeometric(experts, local, top_k)
    moments = [(p, *_hypergeometric(eligible, s, top_k)) for p, s in cases]
    mean = sum(p * m for p, m, _ in moments)
    spread = sum(p * (v + m * m) for p, m, v in moments) - mean * mean
    return mean, max(0.0, spread)


def random_expert_spread(experts: int, top_k: int, tokens: int, groups: int = 1,
                         picked: int = 1) -> float:
    """Standard deviation of the token copies one expert receives from ``tokens`` randomly
    routed tokens (its mean is ``tokens x top_k / experts``)."""
    _, variance = _copies_per_token(experts, 1, top_k, groups, picked)
    return math.sqrt(max(0, tokens) * variance)


def random_routing_imbalance(experts: int, top_k: int, ep: int, tokens: int,
                             groups: int = 1, picked: int = 1) -> float:
    """The busiest expert rank's expected token copies over the mean, for ``tokens`` tokens
    (the expert-parallel group's, in one pass) each routed to ``top_k`` random experts (within
    ``picked`` random groups of ``groups``); 1 without expert parallelism."""
    if ep <= 1 or tokens <= 0:
        return 1.0
    mean, variance = _copies_per_token(experts, experts // ep, top_k, groups, picked)
    sigma = math.sqrt(tokens * variance)
    return 1.0 + sigma * math.sqrt(ep / (ep - 1)) * expected_largest_normal(ep) / (tokens * mean)
