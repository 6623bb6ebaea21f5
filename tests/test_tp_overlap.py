"""Tensor-parallel communication overlap (Megatron --tp-comm-overlap, TE userbuffers)."""

from __future__ import annotations

import pytest

from ghsim.config import load_scenario
from ghsim.engine.body import overlapped_s, segments
from ghsim.engine.simulate import simulate
from ghsim.workload.ir import Comm, Kernel

TP8 = ["system=dgx-h100", "num_gpus=8", "model=llama2-13b", "model.layers=4",
       "training.seq_len=4096", "training.global_batch=8", "training.precision=bf16",
       "parallelism.tp=8", "parallelism.sequence_parallel=true"]


def test_an_overlapped_pair_takes_the_longer_plus_one_chunk() -> None:
    # GEMM 8 ms slowed 18.9 % for the 4 ms the exchange runs beside it, in 8 chunks:
    # 8 + 0.756 + 0.5 ms
    assert overlapped_s(8e-3, 4e-3, 0.189, 8) == pytest.approx(8.756e-3 + 0.5e-3)
    # a short exchange costs the GEMM only its own seconds of slowdown, never more than it hides
    assert overlapped_s(8e-3, 0.4e-3, 0.189, 8) < 8e-3 + 0.4e-3
    # the GEMM the shorter: slowed for all of its own seconds, hidden behind the exchange
    assert overlapped_s(2e-3, 10e-3, 0.189, 8) == pytest.approx(10e-3 + 0.25e-3)
    # the exchange longer than the GEMM: 10 ms + one GEMM chunk of 1 ms
    assert overlapped_s(8e-3, 10e-3, 0.0, 8) == pytest.approx(11e-3)


def _kernel(name: str, klass: str = "gemm") -> Kernel:
    return Kernel(name, 1.0, 1.0, "bf16", (128, 128, 128), klass)


def test_all_gathers_pair_with_the_gemm_after_them_and_reduce_scatters_before() -> None:
    body = (_kernel("ln1", "norm"), Comm("ln1.all_gather", "all_gather", "tp", 1.0, 8),
            _kernel("qkv.fp8_cast_transpose", "elementwise"), _kernel("qkv"),
            _kernel("attn", "attention"), _kernel("proj"),
            Comm("proj.reduce_scatter", "reduce_scatter", "tp", 1.0, 8),
            Comm("x.all_reduce", "all_reduce", "tp", 1.0, 8))
    seconds = {"ln1": 1.0, "qkv.fp8_cast_transpose": 2.0, "qkv": 10.0, "attn": 5.0,
               "proj": 7.0}
    laid = segments(body, lambda k: seconds[k.name], overlap=True)
    assert [(s.kernel_s, s.comm.name if s.comm else None, s.overlap_s) for s in laid] == [
        (1.0, "ln1.all_gather", 10.0),       # beside qkv, past its FP8 cast
        (2.0 + 5.0, "proj.reduce_scatter", 7.0),
        (0.0, "x.all_reduce", 0.0),          # all-reduces never overlap
    ]
    plain = segments(body, lambda k: seconds[k.name], overlap=False)
    assert sum(s.kernel_s for s in plain) == pytest.approx(sum(seconds.values()))
    assert all(s.overlap_s == 0 for s in plain)


def test_overlap_hides_tensor_parallel_time_and_never_slows_the_step() -> None:
    off = simulate(load_scenario("llama3-8b-gh200", TP8))
    on = simulate(load_scenario("llama3-8b-gh200", [*TP8, "parallelism.tp_comm_overlap=true"]))
    assert on.breakdown_s["tp"] < 0.8 * off.breakdown_s["tp"]
    assert on.step_time_s < off.step_time_s
    assert sum(on.breakdown_s.values()) == pytest.approx(on.step_time_s, rel=1e-6)


def test_overlap_needs_sequence_parallelism() -> None:
    no_sp = [*TP8, "parallelism.sequence_parallel=false"]
    off = simulate(load_scenario("llama3-8b-gh200", no_sp)).step_time_s
    on = simulate(load_scenario("llama3-8b-gh200",
                                [*no_sp, "parallelism.tp_comm_overlap=true"])).step_time_s
    assert on == pytest.approx(off, rel=1e-12)
