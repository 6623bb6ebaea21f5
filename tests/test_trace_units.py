"""What the trace readers take from a record, by hand: Nsight Systems' nanoseconds, a traced
matrix multiply's FLOPs, a collective's bytes, an execution trace's tensor sizes, and the
fields they refuse."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ghsim.importers.checks import Fields, TraceError
from ghsim.importers.classify import dtype_bytes, gemm_flops, message_bytes
from ghsim.importers.kineto import GpuEvent
from ghsim.importers.nsys import read_nsys
from ghsim.importers.pytorch_et import _bytes
from ghsim.importers.replay import SourceGpu, _op, source_gpu
from ghsim.workload.ir import Kernel, Op

NSYS = (Path(__file__).resolve().parent / "data" / "traces" / "extra-p_extrap"
        / "tests__data__nsight__nsys_db__con_kernel.sqlite")


def test_nsys_kernels_keep_their_nanoseconds_as_microseconds() -> None:
    db = sqlite3.connect(NSYS)
    try:
        rows = db.execute("select start, end from CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    finally:
        db.close()
    kernels = [e for e in read_nsys(NSYS).events if e.kind == "kernel"]
    assert sorted((e.start_us, e.dur_us) for e in kernels) == sorted(
        (start / 1e3, end / 1e3 - start / 1e3) for start, end in rows)


def test_matrix_multiply_flops_by_hand() -> None:
    assert gemm_flops("aten::mm", [[8, 16], [16, 32]]) == (2.0 * 8 * 32 * 16, (8, 32, 16))
    # addmm's first input is the bias
    assert gemm_flops("aten::addmm", [[32], [8, 16], [16, 32]]) == (2.0 * 8 * 32 * 16,
                                                                      (8, 32, 16))
    # a batch of 4 products: the batch folds into m
    assert gemm_flops("aten::bmm", [[4, 8, 16], [4, 16, 32]]) == (2.0 * 32 * 32 * 16,
                                                                   (32, 32, 16))
    assert gemm_flops("aten::baddbmm", [[4, 8, 32], [4, 8, 16], [4, 16, 32]]) == (
        2.0 * 32 * 32 * 16, (32, 32, 16))
    # linear: every leading dimension of the input is a row, the weight is (n, k)
    assert gemm_flops("aten::linear", [[2, 3, 16], [32, 16]]) == (2.0 * 6 * 32 * 16,
                                                                   (6, 32, 16))
    assert gemm_flops("aten::relu", [[8, 16]]) is None


def test_collective_bytes_by_hand() -> None:
    # Kineto's NCCL metadata names c10 scalar types (HTA's nccl_data trace has Float, Byte and
    # Long collectives)
    assert message_bytes({"In msg nelems": 1000, "dtype": "Float"}) == 4000.0
    assert message_bytes({"In msg nelems": 1000, "dtype": "Byte"}) == 1000.0
    assert message_bytes({"In msg nelems": 1000, "dtype": "Long"}) == 8000.0
    assert message_bytes({"In msg nelems": 1000, "dtype": "BFloat16"}) == 2000.0
    assert message_bytes({"In msg nelems": 1000, "dtype": "torch.float32"}) == 4000.0
    assert message_bytes({"In msg nelems": 1000}) == 2000.0  # no type: 16-bit
    # record_param_comms or nccl:* operators: the input tensors' elements, at their type's size
    assert message_bytes({"Input Dims": [[[4, 8], [16]]]}) == 2.0 * (32 + 16)
    assert message_bytes({"Input Dims": [[4, 8]], "Input type": ["c10::Half"]}) == 2.0 * 32
    assert message_bytes({"Input Dims": [[4, 8]], "Input type": ["float"]}) == 4.0 * 32
    assert message_bytes({"Input Dims": [[[4, 8]]], "Input type": ["TensorList"]}) == 2.0 * 32
    assert message_bytes({}) is None


def test_type_names_traces_use() -> None:
    sizes = {"Float": 4, "BFloat16": 2, "Half": 2, "Byte": 1, "Long": 8, "Double": 8,
             "Bool": 1, "Float8_e4m3fn": 1, "torch.bfloat16": 2, "torch.float64": 8,
             "Tensor(c10::Half)": 2, "Tensor(c10::BFloat16)": 2, "Tensor(float)": 4,
             "Tensor(long int)": 8, "Tensor(long)": 8, "Tensor(unsigned char)": 1,
             "Tensor(double)": 8, "Tensor(bool)": 1}
    assert {name: dtype_bytes(name) for name in sizes} == sizes
    assert dtype_bytes("Tensor(a!)") is None and dtype_bytes("TensorList") is None


def test_execution_trace_tensor_bytes_by_type() -> None:
    assert _bytes([[4, 8], [16]], ["Tensor(c10::BFloat16)", "Tensor(float)"]) == 64 + 64
    assert _bytes([[4, 8]], ["Tensor(c10::Half)"]) == 64
    assert _bytes([[4, 8]], ["Tensor(long int)"]) == 256
    assert _bytes([[4, 8]], ["Tensor(unsigned char)"]) == 32
    assert _bytes([[4, 8]], ["Tensor(a)"]) == 128  # no size named: 4 bytes an element
    assert _bytes([[4, 8], "not a shape"], ["Tensor(float)", "Int"]) == 128


def _gpus() -> tuple[SourceGpu, SourceGpu]:
    """The A100 a trace was taken on and the H100 it is recosted for."""
    a100 = source_gpu("NVIDIA A100-SXM4-80GB", "bf16")
    h100 = source_gpu("NVIDIA H100 80GB HBM3", "bf16")
    assert a100 is not None and h100 is not None
    return a100, h100


def _recost(event: GpuEvent) -> Op:
    a100, h100 = _gpus()
    ctx = {"group": None, "dtype": "bf16", "target": h100, "source": a100, "fallback": 0.0}
    return _op(0, event, "compute", (), 0.0, "recost", ctx)


def test_recost_scales_what_it_cannot_classify_by_the_gpus_peaks() -> None:
    a100, h100 = _gpus()
    # a memory-bound kernel by the two HBMs' bandwidths, a GEMM without shapes by the peaks
    norm = _recost(GpuEvent("layer_norm", "kernel", 7, 0.0, 100.0, "norm"))
    assert norm.attrs["fallback_s"] == pytest.approx(100e-6 * a100.bandwidth / h100.bandwidth)
    gemm = _recost(GpuEvent("sm80_gemm", "kernel", 7, 0.0, 100.0, "gemm"))
    assert gemm.attrs["fallback_s"] == pytest.approx(100e-6 * a100.flops / h100.flops)
    assert h100.flops / a100.flops == pytest.approx(989.4 / 312, rel=1e-3)


def test_recost_gemms_read_and_write_16_bit_matrices() -> None:
    m, n, k = 1024, 2048, 512
    op = _recost(GpuEvent("sm80_gemm", "kernel", 7, 0.0, 100.0, "gemm", flops=2.0 * m * n * k,
                          shape=(m, n, k)))
    (kernel,) = op.body
    assert isinstance(kernel, Kernel)
    assert (kernel.flops, kernel.bytes, kernel.shape) == (2.0 * m * n * k,
                                                          2.0 * (m * k + k * n + m * n), (m, n, k))


@pytest.mark.parametrize("value", [True, False, 1.5, "3", None, -1, 2**63])
def test_an_integer_field_takes_integers_only(value: object) -> None:
    """JSON's true is not the integer 1: a pid, a stream or an index given as a boolean is a
    broken trace, named with its record and field."""
    with pytest.raises(TraceError, match=r"traceEvents\[7\]\.args\.stream: expected an "
                       "integer from 0 to"):
        Fields("rank0.json", "traceEvents[7]").integer(value, "args.stream")


def test_an_integer_field_keeps_whole_numbers() -> None:
    fields = Fields("rank0.json", "traceEvents[7]")
    assert fields.integer(7, "pid") == 7
    assert fields.integer(7.0, "pid") == 7
