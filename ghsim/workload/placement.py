"""Where each communication group's members sit: Megatron's rank order on the system.

Megatron-LM numbers ranks with tensor parallelism fastest, then context, then data, then
pipeline parallelism: ``rank = ((pp_i * dp + dp_i) * cp + cp_i) * tp + tp_i``. So tp groups are
consecutive GPUs (inside a node), and data-parallel and pipeline peers are strided across nodes.
"""

from __future__ import annotations

from ghsim.config.layout import Layout
from ghsim.workload.ir import Group


def rank_of(layout: Layout, tp_i: int = 0, cp_i: int = 0, dp_i: int = 0, pp_i: int = 0) -> int:
    """The global rank of a position in the tp x cp x dp x pp grid."""
    return ((pp_i * layout.dp + dp_i) * layout.cp + cp_i) * layout.tp + tp_i


def strides(layout: Layout) -> dict[str, tuple[int, int]]:
    """Size and rank stride of each group kind. The expert groups refold the ranks of a
    pipeline stage as etp x ep x edp, expert tensor parallelism fastest (Megatron-Core's
    parallel folding: the expert RankGenerator's order tp-ep-dp-pp)."""
    return {
        "tp": (layout.tp, 1),
        "cp": (layout.cp, layout.tp),
        "dp": (layout.dp_cp, layout.tp),  # the gradients' group: dp x cp (Layout.dp_cp)
        "pp": (layout.pp, layout.tp * layout.cp * layout.dp),
        "etp": (layout.etp, 1),
        "ep": (layout.ep, layout.etp),
        "edp": (layout.edp, layout.etp * layout.ep),
    }


def place_group(kind: str, layout: Layout, first_rank: int) -> Group:
    """The group of ``kind`` that contains ``first_rank``, as laid on nodes and NVLink domains."""
    size, stride = strides(layout)[kind]
    base = first_rank - (first_rank // stride % size) * stride
    members = [base + j * stride for j in range(size)]
    return Group(
        kind=kind,
        size=size,
        nodes=len({r // layout.gpus_per_node for r in members}),
        domains=len({r // layout.gpus_per_domain for r in members}),
        stride=stride,
    )


def place_groups(layout: Layout, first_rank: int) -> dict[str, Group]:
    """Every group kind of the rank ``first_rank`` (the expert groups etp, ep and edp too),
    plus ``embedding`` (the first and last pipeline stages, which all-reduce the gradients of
    tied embeddings)."""
    groups = {kind: place_group(kind, layout, first_rank)
              for kind in ("tp", "cp", "dp", "pp", "etp", "ep", "edp")}
    stride = strides(layout)["pp"][1]
    ends = [first_rank % stride, first_rank % stride + (layout.pp - 1) * stride]
    groups["embedding"] = Group(
        kind="embedding", size=2 if layout.pp > 1 else 1,
        nodes=len({r // layout.gpus_per_node for r in ends}),
        domains=len({r // layout.gpus_per_domain for r in ends}),
        stride=(layout.pp - 1) * stride,
    )
    return groups
