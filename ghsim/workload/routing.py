"""The small kernels a Megatron-Core MoE layer launches to route its tokens and to prepare
their dispatch, per layer and micro-batch.

Beside the router GEMM, the permutation and the all-to-alls (costed as steps of their own),
routing runs as a chain of small PyTorch kernels (top-k, softmax, scatters into dense
probabilities and a boolean routing map, the auxiliary loss's scores and sums), or, with
``training.moe_router_fusion``, as Transformer Engine's fused router kernels around a few
PyTorch ones; the dispatcher then counts tokens per expert and builds its maps. Each is tiny,
so what it costs is a launch: the GPU's gap between kernels and the host's time to issue it.

The counts are read from the code of NVIDIA/Megatron-LM core_r0.14.0 (32ad5c89) and
core_r0.15.0 (575b0fbd), which agree on every configuration here, with Transformer Engine
v2.8 (40c69e75) and DeepEP v1.2.1: ``moe/router.py`` (``TopKRouter.routing``,
``_apply_aux_loss``), ``moe/moe_utils.py`` (``topk_routing_with_score_function``,
``group_limited_topk``, ``compute_routing_scores_for_aux_loss``,
``switch_load_balancing_loss_func``, ``RandomSTE``, ``MoEAuxLossAutoScaler``) and
``moe/token_dispatcher.py``, each PyTorch op mapped to its CUDA kernels (``topk`` sorted: 2;
an out-of-place ``scatter``: a copy and the scatter; a boolean ``sum``: a cast and the
reduction; a view: none), and the routing replayed on a CPU to list every op that reaches
the backend, forward and backward. The check: NVIDIA's profile of DeepSeek-V3
(NVIDIA/Megatron-LM@eb0783b6 docs/discussions/deepseek-v3-gb200-optimization, "taking a
forward iteration as an example") counts 72 kernels from the router GEMM through the
all-to-all preprocessing, 31 with the router fusion and 17 with DeepEP; the same scope
counted here gives 73, 33 and 17 (the fusion removes 40 against its 41). Not counted: the
router GEMM backward's four dtype casts with an fp32 router, the scaling by
``--moe-router-topk-scaling-factor`` (one kernel), a capacity factor's top-k of each
expert's tokens and its masks (token dropping), the all-gather of the token counts spanning
tp x ep ranks rather than ep alone, and older Megatron-Core releases' slightly different
chains (core_r0.12.0: 20 forward kernels where 0.14 has 27).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ghsim.config.schema.model import LoadBalancing


@dataclass(frozen=True)
class Launches:
    """Kernels of a forward step and of its backward."""

    forward: int
    backward: int


def routing_kernels(score: Literal["softmax", "sigmoid"], grouped: bool, balancing: LoadBalancing,
                    expert_bias: bool, forced: bool, fused: bool) -> Launches:
    """Kernels of the routing between the router GEMM's logits and the dispatcher: the score
    function and top-k (group-limited when ``grouped``), the dense probabilities and routing
    map, the load-balancing loss unless ``balancing`` is none, the expert-bias token count
    with ``expert_bias``, and the random logits of ``--moe-router-force-load-balancing``
    (``forced``: a clone and a normal fill, which replace the logits; everything else still
    runs)."""
    aux = balancing != "none"
    seq = balancing == "seq_aux_loss"
    forward = (2 if forced else 0) + (3 if expert_bias else 0)  # bias: the count's cast, sum, add
    if fused:
        # TE fused_topk_with_score_function; with a loss fused_compute_score_for_moe_aux_loss
        # and fused_moe_aux_loss, the routing map's sum (a cast and the reduction), the
        # tracker's two, and the sequence loss's division by the batch
        forward += 1 + ((6 + seq) if aux else 0)
        # each TE function backward, a zeros fill for each boolean routing map's gradient,
        # the loss scaler's two, and the sum of the logits' two gradients
        backward = 2 + ((6 + seq) if aux else 0)
        return Launches(forward, backward)
    # top-k (2: a selection and a sort), or group-limited: the groups' scores and top-k, their
    # mask, the masked scores' top-k (13)
    topk = 13 if grouped else 2
    # the score function: a softmax of the chosen scores, or a sigmoid and its normalisation
    # over the top-k (sum, epsilon, division), with an expert bias its add and a gather
    scores = 1 if score == "softmax" else 4 + (2 if expert_bias else 0)
    # then the dense probabilities (zeros, copy, scatter) and map (the same, an int, a bool)
    forward += scores + topk + 8
    if aux:
        # the loss's own scores and map (softmax 8; sigmoid 11 with its normalisation), the
        # tokens per expert (2), the switch loss (4), the tracker (2), /batch for seq
        forward += (8 if score == "softmax" else 11) + 2 + 4 + 2 + seq
    # backward: the routing path (softmax: gather, softmax, top-k's zeros and scatter; the
    # sigmoid's normalisation, bias and group mask: 17, DeepSeek-V3's counted), and with a
    # loss the scaler (2), the loss chain (2), its scores (softmax 1, sigmoid 3), /batch for
    # seq and the sum of the logits' two gradients
    backward = 4 if score == "softmax" else 17
    if aux:
        backward += 2 + 2 + (1 if score == "softmax" else 3) + seq + 1
    return Launches(forward, backward)


@dataclass(frozen=True)
class Multihot:
    """DeepEP's received expert indices turned into a routing map and dense probabilities
    before the permutation: kernels forward and backward, and the host's waits."""

    launches: Launches
    forward_syncs: int
    backward_syncs: int


def deepep_multihot(fused: bool) -> Multihot:
    """Megatron-Core's ``_DeepepManager.get_permuted_hidden_states_by_experts``
    (token_dispatcher.py at core_v0.15.0). When ``fused`` (experimental features and permute
    fusion): one Triton kernel (``fused_indices_to_multihot``), backward a zeros fill and its
    inverse. Otherwise ``_indices_to_multihot``'s PyTorch ops: two zeros, the mask,
    ``indices[mask]`` (a nonzero and the gather), an arange, the mask's per-row count (a cast
    and a sum), ``repeat_interleave`` by those counts, an index_put, ``probs[mask]``, another
    index_put and the map's bool: 17 kernels, the boolean indexings and the repeat each
    waiting for their output size on the host (3 waits). Backward the probabilities'
    gradient gathers from the dense one and scatters back through the mask (zeros, a gather,
    a nonzero and an accumulating index_put), the mask's nonzero waiting once more."""
    if fused:
        return Multihot(Launches(1, 2), 0, 0)
    return Multihot(Launches(17, 5), 3, 1)


def dispatch_kernels(dispatcher: Literal["alltoall", "deepep"], ep: int,
                     local_experts: int) -> Launches:
    """Kernels the token dispatcher launches around the permutation and the all-to-alls
    (neither included): with the all-to-all dispatcher, the tokens per expert and the split
    sizes (six reductions and a copy) and Transformer Engine's three row-map kernels, and with
    several local experts the sorts of their chunks after the dispatch and before the combine
    (five); backward the row map's zeros fill and the two sorts. DeepEP: its top-k of the
    probabilities, dispatch layout, notify and combine-notify kernels and the row map;
    backward its cached notifies, the zeros of two gradients and the top-k's scatter (its
    indices-to-multihot conversion is :func:`deepep_multihot`). Without expert parallelism
    only the token count (2) and the row map (3) remain."""
    if ep == 1:
        return Launches(5, 1)
    if dispatcher == "deepep":
        return Launches(8, 6)
    sort = local_experts > 1
    return Launches(10 + (5 if sort else 0), 1 + (2 if sort else 0))
