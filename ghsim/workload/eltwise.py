"""Element-wise kernels of a layer: norms, RoPE, activations, residual adds and biases, each
one fused kernel, or, where the framework runs the op eagerly (``training.eager_ops``), the
separate PyTorch kernels it launches, with the bytes they move (:data:`EAGER`)."""

from __future__ import annotations

from dataclasses import replace

from ghsim.config.schema.hardware import STRIDED_BYTES_PER_ELEMENT
from ghsim.workload.ir import Kernel, Step
from ghsim.workload.shapes import LayerShapes


def eltwise(name: str, elements: int, s: LayerShapes, reads: int = 1, writes: int = 1,
            klass: str = "elementwise") -> Kernel:
    """One fused memory-bound kernel over ``elements`` activations: it reads ``reads`` and
    writes ``writes`` tensors of them, at the activations' bytes an element."""
    return Kernel(name, 0.0, elements * (reads + writes) * s.act_bytes, "bf16", (elements,), klass)


def fusable(name: str, op: str, elements: int, s: LayerShapes, reads: int = 1,
            klass: str = "elementwise") -> Kernel:
    """A norm, RoPE or activation: one fused kernel reading ``reads`` inputs, or, where the
    framework runs ``op`` eagerly (``training.eager_ops``), its PyTorch kernels (:data:`EAGER`)."""
    if op not in s.eager:
        return eltwise(name, elements, s, reads=reads, klass=klass)
    return _eager(name, op, elements, s, klass)


def _eager(name: str, op: str, elements: int, s: LayerShapes, klass: str = "elementwise"
           ) -> Kernel:
    """The PyTorch kernels of ``op`` (:data:`EAGER`) over ``elements`` inputs: vectorized ones
    at the point-wise rate, non-vectorized ones counted by the elements they process (the
    table's 16-bit bytes, 4 an element), the rest as ``klass``."""
    forward, kernels, _, _ = EAGER[op]
    kind = "pointwise" if op in VECTORIZED else "strided" if op in STRIDED else klass
    processed = elements * forward / STRIDED_BYTES_PER_ELEMENT if kind == "strided" else 0.0
    return Kernel(name, 0.0, elements * forward * s.act_bytes / 2, "bf16", (elements,),
                  kind, kernels=kernels, eager=op, elements=processed)


def rope(name: str, elements: int, s: LayerShapes) -> list[Step]:
    """RoPE over ``elements`` query and key values: one fused kernel, or, run op by op
    (``rope`` in ``training.eager_ops``), its non-vectorized kernels and the vectorized sum of
    its two products (``rope_sum``)."""
    steps: list[Step] = [fusable(name, "rope", elements, s)]
    if "rope" in s.eager:
        steps.append(_eager(f"{name}.sum", "rope_sum", elements, s))
    return steps


def eager_only(name: str, op: str, elements: int, s: LayerShapes) -> list[Step]:
    """A step that exists only where the framework runs ``op`` as PyTorch kernels (a bias a
    fused GEMM epilogue adds, layout copies a kernel reading strided tensors avoids): its
    :data:`EAGER` kernels, or nothing."""
    if op not in s.eager:
        return []
    return [fusable(name, op, elements, s)]


RESIDUAL_OPS = ("residual", "residual_bias", "residual_dropout")


def residual(name: str, elements: int, s: LayerShapes) -> Kernel:
    """The residual add with what precedes it, the projection's bias add and dropout
    (Megatron's bias-dropout-add): one fused kernel reading the two streams and writing the
    sum, and with dropout its one-byte mask; or, run op by op (``residual``), its PyTorch
    kernels."""
    op = next((o for o in RESIDUAL_OPS if o in s.eager), None)
    if op is not None:
        return fusable(name, op, elements, s, reads=2)
    kernel = eltwise(name, elements, s, reads=2)
    return replace(kernel, bytes=kernel.bytes + (elements if s.dropout else 0))


EAGER: dict[str, tuple[float, int, float, int]] = {
    "norm": (36.0, 5, 88.0, 10),
    "rope": (14.0, 8, 14.0, 8),
    "rope_sum": (6.0, 2, 6.0, 2),
    "activation": (10.0, 2, 18.0, 3),
    "gelu": (46.0, 10, 92.0, 19),
    "clamp": (8.0, 3, 15.0, 7),
}
"""An op run as separate PyTorch kernels (``training.eager_ops``; Hugging Face Transformers'
modeling code, huggingface/transformers@000c33fd models/qwen3/modeling_qwen3.py): bytes moved
per element of its input with 16-bit activations and kernels launched, forward and backward.
RMSNorm upcasts to fp32 (2 + 4), squares (4 + 4), averages (4), scales (4 + 4), downcasts
(4 + 2) and applies its weight (2 + 2); its autograd graph runs each step backward (weight,
downcast, scale and its reduction, square, the two gradients' sum, upcast). RoPE's
``q * cos + rotate_half(q) * sin`` negates half (1 + 1), concatenates (2 + 2) and multiplies
twice (4 + 4), on a strided half, strided views and broadcast ``cos`` and ``sin`` (``rope``,
PyTorch's non-vectorized kernels), and adds the two products (6: ``rope_sum``, a vectorized
kernel on two contiguous tensors); backward the products by sin and cos, the negation and the
slices' copy (``rope``: 4 + 4 + 2 + 4) and the two gradients' sum (``rope_sum``: 6): five
kernels each way, for the queries and again for the keys. The gated
MLP's ``act(gate) * up``: SiLU (2 + 2 per element of the up-projection's half) and the product
(4 + 2); backward both products and SiLU's gradient.
A GELU MLP's activation with biases (``gelu``; without, ``F.gelu`` is one kernel) is
Megatron-LM's ``bias_gelu``, the tanh approximation with the up-projection's bias added
(megatron/model/fused_bias_gelu.py at NVIDIA/Megatron-LM@f7727433), op by op, as
``torch.jit.script`` runs it under PyTorch 2.2 and later, where TorchScript's nvFuser is a no-op
(pytorch/pytorch@v2.2.0 torch/csrc/jit/python/init.cpp: "_jit_set_nvfuser_enabled is
deprecated and a no-op") and Megatron's ``set_jit_fusion_options`` has turned the other fuser
(NNC) off on the GPU; Megatron-LM moved to ``torch.compile`` on 2024-01-19 (473225f9,
megatron/core/jit.py). Forward: the bias add (2 + 2), ``x * 0.5`` (2 + 2), ``0.79788456 * x``
(2 + 2), ``0.044715 * x`` (2 + 2), ``* x`` (4 + 2), ``1 +`` (2 + 2), the product (4 + 2), tanh
(2 + 2), ``1.0 +`` (2 + 2) and the product (4 + 2); ``bias_gelu_back`` recomputes the bias add
and tanh (seven kernels, 32 bytes), builds ``ff`` (eleven, 54 bytes) and multiplies it by the
gradient (4 + 2). Fused, the same work reads the input and writes the output once (2 + 2), and
backward reads two and writes one.
A clamped gated activation's clamps (``model.activation_clamp``, Megatron-Core 0.15's
``weighted_bias_quick_geglu_impl``): each half clamped (2 + 2) and the halves concatenated
(2 + 2); backward PyTorch's ``clamp_backward``, a mask and a ``where`` for the gate's upper
bound (3 + 5 per element of its half), two masks, their ``and`` and a ``where`` for the
linear half's two bounds (3 + 3 + 3 + 5), and the halves' gradients concatenated (2 + 2)."""

EAGER.update({
    # legacy Megatron's bias_dropout_add (``residual``) by what it adds: see :func:`residual`
    "residual": (15.0, 3, 16.0, 3),
    "residual_bias": (10.0, 2, 11.0, 2),
    "residual_dropout": (11.0, 2, 14.0, 2),
    "bias": (4.0, 1, 2.0, 1),
    "attention_layout": (4.0, 4, 4.0, 2),
})
"""Legacy Megatron-LM's local transformer (NVIDIA/Megatron-LM@f7727433 megatron/model/
transformer.py), op by op under PyTorch 2.2 and later as the bias-GELU above. ``residual``:
``bias_dropout_add`` (a ``torch.jit.script`` function) before each residual add, per element of
the hidden state: the bias add (2 + 2; the bias broadcasts), ``F.dropout``'s fused kernel (2 +
2 and its one-byte mask), and the residual add (4 + 2); backward the residual gradients' sum
as fused (9, the fused step's 1.5 x 6), dropout's backward (2 + 1 read, 2 written) and the
bias gradient's sum over the tokens (2): ``residual_bias`` without dropout, ``residual_dropout``
without a bias (the ops absent drop out). ``bias``: the QKV projection's bias, which legacy
``ColumnParallelLinear`` adds after its GEMM (megatron/core/tensor_parallel/layers.py:
``output = output + bias``, backward ``grad_output.sum(dim=0)``; the other linear layers skip
the add into the fused bias-GELU and bias-dropout-add) per element of the QKV output: 2 + 2
forward, 2 backward. ``attention_layout``: the flash path's copies, per element of q, k, v and
the output together: ``rearrange(x, 's b ... -> b s ...').contiguous()`` of q, k and v and
``rearrange(out, 'b s h d -> s b (h d)').contiguous()`` (2 + 2 each, four kernels); backward
the output gradient's copy into flash-attn's ``(b s)`` layout and ``torch.split``'s gradient,
the concatenation of dq, dk and dv into the QKV projection's layout (the same bytes in two
kernels). Keys and values count at their own width: with grouped queries legacy Megatron
first expands them to every head (``repeat_interleave``), which is not counted."""

VECTORIZED = frozenset({"gelu", "activation", "rope_sum", *RESIDUAL_OPS})
"""Eager ops whose kernels are PyTorch's vectorized point-wise kernels, costed at the part's
``pointwise_efficiency``: every operand contiguous and of one shape. Megatron's bias-GELU works
on the up-projection's output and what was computed from it (the bias add alone broadcasts, 4
of 46 bytes forward and 4 of 92 backward, and is counted with them), and its bias-dropout-add
on the projection's output, its mask and the residual stream (the bias add broadcasts);
Hugging Face's gated MLP multiplies two projections' own outputs,
``act_fn(gate_proj(x)) * up_proj(x)``
(huggingface/transformers@000c33fd models/qwen3/modeling_qwen3.py ``Qwen3MLP``). The others
run on strided views or broadcasts (RoPE on the QKV output's split heads and ``torch.cat``, a
clamp on a chunk of the gated up-projection, RMSNorm's per-row scale and weight), which
PyTorch's TensorIterator hands to its slower non-vectorized ``elementwise_kernel`` (ghsim's
H200 trace of a plain PyTorch Llama 300M whose probe model chunks one up-projection: SiLU on
the chunk at 0.30 of peak, its product at 0.45, a contiguous add at 0.96;
benchmarks/device/data/h200-2026-12-04/dense_llama-300m_steady_trace.json.gz): see
:data:`STRIDED`."""

STRIDED = frozenset({"rope", "bias", "attention_layout", "clamp"})
"""Eager ops whose kernels are PyTorch's non-vectorized ``elementwise_kernel``, costed at the
part's ``gpu.compute.strided_elementwise_gelem_s``: RoPE's products with ``cos`` and ``sin``
broadcast over the heads and its negation of a strided half, a bias broadcast over the tokens,
the flash path's copies of transposed tensors, a clamp on a chunk of the gated up-projection.
Such kernels process about the same number of elements a second whether they move 4, 6 or 8
bytes an element: on an H200 284-362 billion, on an A100 190-247, 1.43 an SM a cycle on both;
the SMs' work per element bounds them, not HBM (``python benchmarks/strided_kernels.py``,
docs/hardware-facts.md T4#30). An eager RMSNorm (``norm``) is mostly contiguous kernels (the
upcast, the square, the downcast) around a reduction, with its scale and weight broadcast: it
stays at the element-wise rate, as a fused norm does."""

REDUCED_BACKWARD = frozenset({"bias"})
"""Eager ops whose backward is a reduction rather than their forward's kernels: a bias's
gradient sums the output gradient over the tokens (``grad_output.sum(dim=0)``), PyTorch's
``reduce_kernel`` reading contiguous rows, which runs at the element-wise rate (the H200 probe's
sums of repeated keys' and values' gradients: about 1.9 TB/s, 0.4 of its HBM peak)."""
