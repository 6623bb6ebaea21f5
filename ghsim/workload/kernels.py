"""The kernels and inline collectives of one transformer layer, forward and backward, per rank.

FLOPs count matrix-multiply work only (GEMMs and the attention core), the Megatron convention of
FACTS.md, so that model FLOPs summed over ranks reproduce the published formula; normalization,
activation and other element-wise kernels carry their bytes and are costed as memory-bound.
Backward runs a data-gradient and a weight-gradient GEMM for every forward GEMM, and twice the
attention core's forward work.

Tensor parallelism (Megatron): without sequence parallelism an all-reduce follows the attention
output projection and the MLP down projection in the forward pass, and precedes the QKV and MLP
up projections in the backward pass. With sequence parallelism each all-reduce becomes an
all-gather before and a reduce-scatter after the tensor-parallel region, and the backward pass
gathers the block's input again for the weight gradient (Megatron keeps it sharded).
Context parallelism (ring attention) gathers keys and values around the cp ring in the forward
pass, and gathers them again and reduce-scatters their gradients in the backward pass.
"""

from __future__ import annotations

from dataclasses import replace

from ghsim.workload.ir import Comm, Kernel, Step
from ghsim.workload.shapes import LayerShapes


def _gemm(name: str, m: int, n: int, k: int, s: LayerShapes) -> Kernel:
    """An (m x k) @ (k x n) GEMM reading its input and weight and writing its output."""
    data = (m * k + m * n) * s.act_bytes + k * n * s.weight_bytes
    return Kernel(name, 2.0 * m * n * k, data, s.gemm_dtype, (m, n, k), "gemm")


def _eltwise(name: str, elements: int, s: LayerShapes, reads: int = 1, writes: int = 1,
             klass: str = "elementwise") -> Kernel:
    return Kernel(name, 0.0, elements * (reads + writes) * s.act_bytes, "bf16", (elements,), klass)


def _fp8_cast(name: str, elements: int, s: LayerShapes) -> list[Step]:
    """FP8 recipes quantize each GEMM input: Transformer Engine reads it in BF16 and writes it
    in FP8 twice, row-wise for this GEMM and transposed (column-wise) for the weight-gradient
    GEMM of the backward pass, since Hopper's FP8 GEMMs take only the TN layout
    (NVIDIA/TransformerEngine ``fused_cast_transpose``: ``input_cast`` and
    ``input_transpose``; ``quantize`` with ``columnwise_usage`` in training)."""
    if not s.fp8:
        return []
    data = float(elements * (s.act_bytes + 2))
    if s.fp8_recipe == "tensorwise":  # the tensor's amax is reduced before it is cast
        data += elements * s.act_bytes
    elif s.fp8_recipe == "blockwise":  # an FP32 scale per 128 values, row- and column-wise
        data += 2 * elements * 4 / 128
    return [Kernel(f"{name}.fp8_cast_transpose", 0.0, data, "bf16", (elements,))]


def _tp(name: str, collective: str, s: LayerShapes) -> list[Step]:
    if s.tp == 1:
        return []
    size = s.tokens * s.hidden * s.act_bytes
    return [Comm(name, collective, "tp", size, s.tp)]  # type: ignore[arg-type]


def _cp_kv(name: str, collective: str, s: LayerShapes) -> list[Step]:
    if s.cp == 1:
        return []
    size = 2 * s.tokens * s.cp * s.kv_width * s.act_bytes
    return [Comm(name, collective, "cp", size, s.cp)]  # type: ignore[arg-type]


def attention_core(s: LayerShapes) -> list[Step]:
    """Scores, softmax and the weighted sum of values, for this rank's queries.

    The FLOPs are those of the Megatron convention (``4 t s`` heads x head_dim, a causal mask
    not halved), so that they sum to the model FLOPs. A document mask (``attention_mask:
    document``) lets flash attention skip the blocks across documents: its executed work is
    ``s.attention_work`` (sum of d^2 over the documents / s^2) of that, while the model FLOPs,
    which ignore the mask as Megatron's formula does, stay as they are. Its bytes (Q, K, V in,
    the output out) do not change. Standard attention computes every score and masks it.
    """
    t, keys = s.tokens, s.seq_len
    flops = 4.0 * t * keys * s.q_width
    qkv = t * (s.q_width + 2 * s.kv_width) * s.act_bytes
    if s.cp > 1:
        qkv += (s.cp - 1) * t * 2 * s.kv_width * s.act_bytes  # remote K/V chunks
    if s.flash:
        data = qkv + t * s.q_width * s.act_bytes
        return [Kernel("attn.flash", flops * s.attention_work, data,
                       s.gemm_dtype if not s.fp8 else "bf16", (t, keys, s.q_width), "attention")]
    # Unfused attention (Megatron before flash attention): two batched GEMMs per head, with
    # K = head_dim for the scores and K = keys for the weighted sum, and a fused
    # scale-mask-softmax (plus dropout) over the s x s scores between them.
    scores = s.heads * t * keys
    head_dim = s.q_width // max(s.heads, 1)
    masks = 1 if s.dropout else 0
    return [
        Kernel("attn.qk", flops / 2, qkv + scores * s.act_bytes, s.gemm_dtype,
               (s.heads * t, keys, head_dim), "gemm"),
        Kernel("attn.softmax", 0.0, scores * ((2 + 2 * masks) * s.act_bytes + masks), "bf16",
               (scores,), "softmax"),
        Kernel("attn.av", flops / 2, scores * s.act_bytes + t * s.q_width * 2 * s.act_bytes,
               s.gemm_dtype, (s.heads * t, head_dim, keys), "gemm"),
    ]


def layer_forward(s: LayerShapes) -> list[Step]:
    """One layer's forward pass on this rank."""
    t, h = s.tokens, s.hidden
    up = 2 * s.ffn if s.gated else s.ffn
    sp = s.sequence_parallel
    steps: list[Step] = [_eltwise("ln1", s.sp_tokens * h, s, klass="norm")]
    steps += _tp("ln1.all_gather", "all_gather", s) if sp else []
    steps += _fp8_cast("qkv", t * h, s)
    steps += [_gemm("qkv", t, s.q_width + 2 * s.kv_width, h, s)]
    if s.qk_norm:  # Qwen3 / Megatron --qk-layernorm: normalized before RoPE
        steps += [_eltwise("q_norm", t * s.q_width, s, klass="norm"),
                  _eltwise("k_norm", t * s.kv_width, s, klass="norm")]
    steps += [_eltwise("rope", t * (s.q_width + s.kv_width), s)]
    steps += _cp_kv("attn.cp_kv_gather", "all_gather", s)
    steps += attention_core(s)
    steps += _fp8_cast("proj", t * s.q_width, s)
    steps += [_gemm("proj", t, h, s.q_width, s)]
    steps += _tp("proj.reduce_scatter", "reduce_scatter", s) if sp else _tp(
        "proj.all_reduce", "all_reduce", s)
    steps += [_eltwise("residual1", s.sp_tokens * h, s, reads=2),
              _eltwise("ln2", s.sp_tokens * h, s, klass="norm")]
    steps += _tp("ln2.all_gather", "all_gather", s) if sp else []
    steps += _fp8_cast("mlp_up", t * h, s)
    steps += [_gemm("mlp_up", t, up, h, s),
              # one fused kernel (Megatron's jit_fuser / bias_swiglu): gated reads the gate
              # and the up halves; gelu, relu, squared_relu and xielu read one input
              _eltwise("mlp_act", t * s.ffn, s, reads=2 if s.gated else 1)]
    steps += _fp8_cast("mlp_down", t * s.ffn, s)
    steps += [_gemm("mlp_down", t, h, s.ffn, s)]
    steps += _tp("mlp.reduce_scatter", "reduce_scatter", s) if sp else _tp(
        "mlp.all_reduce", "all_reduce", s)
    steps += [_eltwise("residual2", s.sp_tokens * h, s, reads=2)]
    return steps


def _backward_of(kernel: Kernel) -> list[Step]:
    """Data- and weight-gradient kernels of a forward kernel."""
    if kernel.klass == "gemm":
        m, n, k = kernel.shape
        return [replace(kernel, name=f"{kernel.name}.dgrad", shape=(m, k, n)),
                replace(kernel, name=f"{kernel.name}.wgrad", shape=(k, n, m))]
    if kernel.klass == "attention":
        return [replace(kernel, name=f"{kernel.name}.bwd", flops=2 * kernel.flops,
                        bytes=2 * kernel.bytes)]
    return [replace(kernel, name=f"{kernel.name}.bwd", bytes=1.5 * kernel.bytes)]


_BACKWARD_COMM = {  # forward collective -> what its backward runs
    "ln1.all_gather": [("ln1.bwd_reduce_scatter", "reduce_scatter"),
                       ("qkv.wgrad_all_gather", "all_gather")],
    "ln2.all_gather": [("ln2.bwd_reduce_scatter", "reduce_scatter"),
                       ("mlp_up.wgrad_all_gather", "all_gather")],
    "proj.reduce_scatter": [("proj.bwd_all_gather", "all_gather")],
    "mlp.reduce_scatter": [("mlp.bwd_all_gather", "all_gather")],
    "attn.cp_kv_gather": [("attn.cp_kv_gather_bwd", "all_gather"),
                          ("attn.cp_dkv_reduce_scatter", "reduce_scatter")],
}
_NO_SP_BACKWARD = {"proj.all_reduce": "ln1.bwd_all_reduce", "mlp.all_reduce": "ln2.bwd_all_reduce"}


def _as_recompute(kernel: Kernel) -> Kernel:
    return replace(kernel, recompute=True)


def _recomputed(forward: list[Step], s: LayerShapes) -> list[Step]:
    """Forward work redone before the backward pass, marked as recompute."""
    if s.recompute == "full":
        redone: list[Step] = []
        for step in forward:
            redone.append(_as_recompute(step) if isinstance(step, Kernel) else step)
        return redone
    if s.recompute == "selective":
        return [_as_recompute(k) for k in attention_core(s) if isinstance(k, Kernel)]
    return []


def layer_backward(s: LayerShapes) -> list[Step]:
    """One layer's backward pass on this rank, recomputation included."""
    forward = layer_forward(s)
    steps = _recomputed(forward, s)
    for step in reversed(forward):
        if isinstance(step, Kernel):
            steps += _backward_of(step)
        elif step.name in _NO_SP_BACKWARD:
            steps.append(replace(step, name=_NO_SP_BACKWARD[step.name]))
        else:
            steps += [replace(step, name=name, collective=kind)  # type: ignore[arg-type]
                      for name, kind in _BACKWARD_COMM[step.name]]
    return steps


def embedding_forward(s: LayerShapes) -> list[Step]:
    """Token (and position) embedding lookup, scattered to the sequence-parallel layout."""
    return [_eltwise("embedding", s.sp_tokens * s.hidden, s)]


def embedding_backward(s: LayerShapes) -> list[Step]:
    return [_eltwise("embedding.bwd", s.sp_tokens * s.hidden, s, reads=2)]


def _logits(s: LayerShapes) -> Kernel:
    """The output layer's GEMM. Under FP8 it stays BF16: Megatron's output layer is its own
    ColumnParallelLinear, not a Transformer Engine module, so fp8_autocast leaves it alone."""
    if not s.fp8:
        return _gemm("logits", s.tokens, s.vocab, s.hidden, s)
    return _gemm("logits", s.tokens, s.vocab, s.hidden, replace(s, gemm_dtype="bf16",
                                                                  weight_bytes=s.act_bytes))


def head_forward(s: LayerShapes) -> list[Step]:
    """Final norm, logits GEMM over this rank's vocabulary shard, and the cross-entropy loss."""
    steps: list[Step] = [_eltwise("final_ln", s.sp_tokens * s.hidden, s, klass="norm")]
    steps += _tp("final_ln.all_gather", "all_gather", s) if s.sequence_parallel else []
    steps += [_logits(s),
              Kernel("loss", 0.0, s.tokens * s.vocab * (s.act_bytes + 4), "fp32",
                     (s.tokens, s.vocab), "loss")]
    return steps


def head_backward(s: LayerShapes) -> list[Step]:
    steps: list[Step] = [Kernel("loss.bwd", 0.0, s.tokens * s.vocab * (s.act_bytes + 4), "fp32",
                                (s.tokens, s.vocab), "loss")]
    steps += _backward_of(_logits(s))
    if s.sequence_parallel:
        steps += _tp("final_ln.bwd_reduce_scatter", "reduce_scatter", s)
    elif s.tp > 1:
        steps += _tp("final_ln.bwd_all_reduce", "all_reduce", s)
    steps += [_eltwise("final_ln.bwd", s.sp_tokens * s.hidden, s, reads=2, klass="norm")]
    return steps
