"""What a GPU kernel is, from its name and the operator that launched it."""

from __future__ import annotations

import math
import re
from typing import Any

_GEMM = re.compile(r"gemm|cutlass|xmma|wgmma|cublas|s1688|h1688|s16816|h16816|ampere_(fp16|bf16|"
                   r"s|h)|sm\d+_xmma|matmul", re.I)
_COLLECTIVES = {"allreduce": "all_reduce", "allgather": "all_gather",
                "reducescatter": "reduce_scatter", "alltoall": "all_to_all",
                "broadcast": "broadcast", "sendrecv": "send_recv", "send": "send_recv",
                "recv": "send_recv"}
_MAX_FLOPS = 1e21
"""FLOPs of one matrix multiply beyond which its recorded shape is taken as corrupt (an hour of
an exaFLOP/s machine)."""
_MAX_BYTES = 2.0**50
"""Bytes of one collective's message beyond which its recorded size is taken as corrupt."""
_DTYPE_BYTES = {
    # c10 ScalarType names (Kineto's NCCL ``dtype``: Float, BFloat16, Byte, Long, ...), in
    # lower case, with their torch names and the C++ names execution traces give tensors
    **dict.fromkeys(("byte", "uint8", "unsigned char", "char", "int8", "signed char", "bool",
                     "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"), 1),
    **dict.fromkeys(("half", "float16", "bfloat16", "short", "int16", "short int", "uint16"), 2),
    **dict.fromkeys(("float", "float32", "int", "int32", "uint32", "complexhalf"), 4),
    **dict.fromkeys(("double", "float64", "long", "int64", "long int", "long long", "uint64",
                     "complexfloat"), 8),
    "complexdouble": 16,
}
DEFAULT_COLLECTIVE_DTYPE_BYTES = 2
"""Bytes an element of a collective whose record names no type: 16-bit, as training's are."""


def dtype_bytes(name: object) -> int | None:
    """Bytes an element of a tensor type takes, from the names traces give it: Kineto's
    collective ``dtype`` (``Float``, ``BFloat16``, ``Byte``, ``Long``), an execution trace's
    types (``Tensor(c10::Half)``, ``Tensor(long int)``, ``Tensor(unsigned char)``), torch's
    (``torch.float32``); None for anything else."""
    text = str(name).strip()
    if text.startswith("Tensor(") and text.endswith(")"):
        text = text[len("Tensor("):-1]
    return _DTYPE_BYTES.get(text.removeprefix("torch.").removeprefix("c10::").lower())


_STRIDED = re.compile(r"::elementwise_kernel<")
"""PyTorch's non-vectorized TensorIterator kernel (``at::native::elementwise_kernel<128, 4,
...>``), which runs a point-wise op whose operands are strided views or broadcasts: bound by
the SMs' work per element (``gpu.compute.strided_elementwise_gelem_s``), not by HBM. Its
vectorized, unrolled and indexed siblings (``vectorized_elementwise_kernel``, ...) are not it."""


def kernel_class(name: str) -> str:
    """``collective``, ``gemm``, ``attention``, ``softmax``, ``norm``, ``strided`` or
    ``elementwise``."""
    low = name.lower()
    if "nccl" in low:
        return "collective"
    if any(key in low for key in ("flash", "fmha", "attention", "attn")):
        return "attention"
    if "softmax" in low:
        return "softmax"
    if any(key in low for key in ("layernorm", "layer_norm", "rmsnorm", "rms_norm")):
        return "norm"
    if _GEMM.search(name):
        return "gemm"
    return "strided" if _STRIDED.search(name) else "elementwise"


def collective_kind(name: str) -> str:
    """The collective an NCCL kernel or ``nccl:...`` operator runs."""
    low = re.sub(r"[^a-z]", "", name.lower())
    for key, kind in _COLLECTIVES.items():
        if key in low:
            return kind
    return "all_reduce"


def _prod(dims: list[int]) -> int:
    return math.prod(int(d) for d in dims) if dims else 1


def gemm_flops(op_name: str, dims: list[Any]) -> tuple[float, tuple[int, int, int]] | None:
    """FLOPs and (m, n, k) of a matrix-multiply operator from its input shapes."""
    try:
        if op_name in ("aten::mm", "aten::matmul") and len(dims) >= 2 and len(dims[0]) == 2:
            (m, k), (_, n) = dims[0], dims[1]
        elif op_name == "aten::addmm" and len(dims) >= 3:
            (m, k), (_, n) = dims[1], dims[2]
        elif op_name == "aten::bmm" and len(dims) >= 2:
            (b, m, k), (_, _, n) = dims[0], dims[1]
            m = int(b) * int(m)
        elif op_name == "aten::baddbmm" and len(dims) >= 3:
            (b, m, k), (_, _, n) = dims[1], dims[2]
            m = int(b) * int(m)
        elif op_name == "aten::linear" and len(dims) >= 2:
            k = int(dims[0][-1])
            m = _prod(dims[0][:-1])
            n = int(dims[1][0])
        else:
            return None
        m, n, k = int(m), int(n), int(k)
        flops = 2.0 * m * n * k
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if min(m, n, k) < 0 or not math.isfinite(flops) or flops > _MAX_FLOPS:
        return None  # a corrupt shape: the kernel keeps its measured time
    return flops, (m, n, k)


def message_bytes(args: dict[str, Any]) -> float | None:
    """Bytes of a collective from kernel args or a ``record_param_comms`` operator's inputs,
    at the element size their type names (None when they give none, or only a corrupt
    size)."""
    try:
        if "In msg nelems" in args:
            size = dtype_bytes(args.get("dtype")) or DEFAULT_COLLECTIVE_DTYPE_BYTES
            total = float(args["In msg nelems"]) * size
        else:
            dims = args.get("Input Dims")
            if not (isinstance(dims, list) and dims and isinstance(dims[0], list)):
                return None
            first = dims[0]
            tensors = first if first and isinstance(first[0], list) else [first]
            types = args.get("Input type")
            named = dtype_bytes(types[0]) if isinstance(types, list) and types else None
            total = float(sum(_prod(t) for t in tensors if t)) * (
                named or DEFAULT_COLLECTIVE_DTYPE_BYTES)
    except (TypeError, ValueError, OverflowError):
        return None
    return total if math.isfinite(total) and 0.0 <= total <= _MAX_BYTES else None
