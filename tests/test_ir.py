"""The workload IR by hand: FLOP sums over shared bodies and rank classes, host launches of a
grouped GEMM, and the DAG check the lowering runs on every rank class."""

from __future__ import annotations

import pytest

from ghsim.workload.ir import (
    Kernel,
    Op,
    RankClass,
    Workload,
    WorkloadError,
    check_dag,
    class_flops,
)


def _class(ops: list[Op], multiplicity: int = 1) -> RankClass:
    return RankClass("stage0", 0, multiplicity, ops, [], {}, 0)


def _chain(deps: list[tuple[int, ...]]) -> RankClass:
    return _class([Op(i, "compute", f"op{i}", "compute", deps=d) for i, d in enumerate(deps)])


GEMM = Kernel("gemm", 100.0, 0.0, "bf16", (8, 8, 8), "gemm")
REDO = Kernel("gemm_recompute", 30.0, 0.0, "bf16", (8, 8, 8), "gemm", recompute=True)


def test_class_flops_counts_a_shared_body_once_per_op() -> None:
    """Micro-batches share one body tuple: three ops of it are three times its FLOPs."""
    body = (GEMM, REDO)
    ops = [Op(i, "compute", f"mb{i}", "compute", body=body) for i in range(3)]
    ops.append(Op(3, "compute", "other", "compute", body=(GEMM,)))
    rank = _class(ops)
    assert class_flops(rank) == 3 * 130.0 + 100.0
    assert class_flops(rank, recompute=False) == 3 * 100.0 + 100.0
    assert class_flops(rank, recompute=True) == 3 * 30.0


def test_hardware_flops_count_every_rank_of_a_class() -> None:
    first = _class([Op(0, "compute", "a", "compute", body=(GEMM,))], multiplicity=6)
    second = _class([Op(0, "compute", "b", "compute", body=(REDO,))], multiplicity=2)
    workload = Workload([first, second], 8, 0.0, 0)
    assert workload.hardware_flops_per_step == 6 * 100.0 + 2 * 30.0


def test_grouped_gemm_launches_each_group() -> None:
    """Eight experts' GEMMs and two quantization kernels: 2 + 8 - 1 launches."""
    grouped = Kernel("experts", 1.0, 0.0, "fp8", (4, 4, 4), "gemm", groups=8, kernels=2)
    assert grouped.launches == 9
    assert GEMM.launches == 1


def test_a_valid_dag_passes() -> None:
    check_dag(_chain([(), (0,), (0, 1)]))


@pytest.mark.parametrize(("deps", "message"), [
    ([(), (2,), (1,)], "dependency cycle: op1 -> op2 -> op1"),
    ([(1,), (0,)], "dependency cycle: op0 -> op1 -> op0"),
    ([(), (1,)], "dependency 1 names no other op"),
    ([(), (5,)], "dependency 5 names no other op"),
    ([(-1,)], "dependency -1 names no other op"),
])
def test_a_broken_dag_is_refused(deps: list[tuple[int, ...]], message: str) -> None:
    with pytest.raises(WorkloadError, match=message.replace("->", "\\->")):
        check_dag(_chain(deps), "scenario.yaml")


def test_ops_out_of_order_are_refused() -> None:
    rank = _class([Op(1, "compute", "a", "compute"), Op(0, "compute", "b", "compute")])
    with pytest.raises(WorkloadError, match="id 1 != index"):
        check_dag(rank)
