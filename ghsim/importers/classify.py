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
DTYPE_BYTES = {"c10::Half": 2, "c10::BFloat16": 2, "float": 4, "c10::Float8_e4m3fn": 1,
               "double": 8, "Half": 2, "BFloat16": 2, "Float": 4, "half": 2, "bfloat16": 2}


def kernel_class(name: str) -> str:
    """``collective``, ``gemm``, ``attention``, ``softmax``, ``norm`` or ``elementwise``."""
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
    return "elementwise"


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
    """Bytes of a collective from kernel args or a ``record_param_comms`` operator's inputs
    (None when they give none, or only a corrupt size)."""
    try:
        if "In msg nelems" in args:
            size = DTYPE_BYTES.get(str(args.get("dtype", "")).replace("torch.", ""), 2)
            total = float(args["In msg nelems"]) * size
        else:
            dims = args.get("Input Dims")
            if not (isinstance(dims, list) and dims and isinstance(dims[0], list)):
                return None
            first = dims[0]
            tensors = first if first and isinstance(first[0], list) else [first]
            total = float(sum(_prod(t) for t in tensors if t)) * 2
    except (TypeError, ValueError, OverflowError):
        return None
    return total if math.isfinite(total) and 0.0 <= total <= _MAX_BYTES else None
