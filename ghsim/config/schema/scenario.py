"""``kind: scenario``: a system, a model, a training setup, a parallel layout, an offload plan."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ghsim.config.schema.base import (
    DocumentSpec,
    Name,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Spec,
)
from ghsim.config.schema.model import ModelSpec
from ghsim.config.schema.refs import Ref
from ghsim.config.schema.system import SystemSpec

Precision = Literal["fp32", "bf16", "fp16", "fp8"]


Optimizer = Literal["adam", "adamw", "ademamix", "sgd"]
MainGrads = Literal["fp32", "bf16", "fp16"]
Attention = Literal["flash", "flash2", "standard"]
"""Which attention kernels run (``training.attention``)."""


class DataLoadingSpec(Spec):
    """How fast a rank's data loader produces training samples (``training.data_loading``)."""

    workers: PositiveInt = Field(
        default=2, description="Worker processes reading samples for a rank, all at once "
        "(Megatron-LM --num-workers, default 2; PyTorch DataLoader num_workers).",
    )
    sample_read_ms: PositiveFloat = Field(
        description="Time one worker takes to produce one sample (storage reads, index "
        "lookups, collation), measured on the system: a profile of the loader or a benchmark "
        "of the storage the samples come from.",
    )
    source: Name = Field(description="Where sample_read_ms comes from.")


class TrainingSpec(Spec):
    """What one optimizer step processes, in which precision, with which optimizer.

    ``main_grads`` follows Megatron-LM (NVIDIA/Megatron-LM@d98e8a64ddf34856e74b24714e3bedb2f5a39553
    megatron/training/arguments.py, ``validate_args``): with ``--bf16`` it sets
    ``accumulate_allreduce_grads_in_fp32 = True`` unless ``--main-grads-dtype bf16`` (a choice of
    ``--use-precision-aware-optimizer``, default fp32) or ``--grad-reduce-in-bf16`` is given, and
    ``training.py`` hands that flag to DDP as ``grad_reduce_in_fp32``: the gradient buffers and
    the data-parallel reduce-scatter / all-reduce are FP32. With ``--fp16`` nothing forces it, so
    gradients stay FP16 unless ``--accumulate-allreduce-grads-in-fp32`` is given. FP8 recipes
    run with ``--bf16`` and behave as bf16.
    """

    seq_len: PositiveInt
    micro_batch: PositiveInt = Field(description="Sequences per micro-batch per replica.")
    global_batch: PositiveInt = Field(description="Sequences per optimizer step.")
    precision: Precision
    attention: Attention = Field(
        default="flash",
        description="flash: the GPU's best fused kernel (cuDNN's or FlashAttention-3's on "
        "Hopper, as Transformer Engine picks; FlashAttention-2 on Ampere), stores no s x s "
        "scores; flash2: FlashAttention-2's kernels, as legacy Megatron-LM's "
        "--use-flash-attn, PyTorch SDPA's flash backend, Hugging Face's flash_attention_2 and "
        "Transformer Engine 1.x under NVTE_FUSED_ATTN=0 (NeMo's 2024 launcher) run them, at "
        "the part's flash2_attention_efficiency; standard: "
        "unfused, stores the scores.",
    )
    optimizer: Optimizer = Field(
        default="adam", description="adam / adamw: two FP32 moments; ademamix (Pagliardini et "
        "al. 2024, arXiv:2409.03137, Algorithm 1): three FP32 moments (fast EMA m1, slow EMA m2, "
        "second moment nu); sgd: SGD with one FP32 momentum. Under mixed precision each also "
        "keeps an FP32 master weight: 12, 12, 16 and 8 B of optimizer state a parameter (8, 8, "
        "12, 4 in fp32), sharded by ZeRO >= 1; its step reads the gradient and the states, "
        "writes the states back and the BF16 weight.",
    )
    main_grads: MainGrads | None = Field(
        default=None, description="Dtype of the gradient buffers and of the data-parallel "
        "gradient reduce-scatter / all-reduce. Default as Megatron-LM: fp32 for bf16 and fp8 "
        "(it forces accumulate_allreduce_grads_in_fp32 with --bf16), fp16 for fp16, fp32 for "
        "fp32. bf16 is Megatron's --use-precision-aware-optimizer --main-grads-dtype bf16 (bf16 "
        "and fp8 only); fp16 needs precision fp16.",
    )
    master_weights: Literal["fp32", "remainders"] = Field(
        default="fp32", description="How the optimizer keeps the FP32 master copy of BF16 "
        "weights (bf16 and fp8 only): fp32, a whole 4 B copy a parameter; remainders, only "
        "its low 16 bits (2 B), the BF16 weight being its high 16, as apex's "
        "DistributedFusedAdam store_param_remainders (NeMo 1.x/2.0 sets it for an FP32 "
        "optimizer over a BF16 model: megatron_base_model.py setup_optimization) and "
        "Megatron-Core's precision-aware optimizer (--store-param-remainders) keep it.",
    )
    attention_mask: Literal["causal", "document"] = Field(
        default="causal", description="causal: every token attends to all earlier tokens of its "
        "sequence. document: also not across the documents packed into a sequence (Megatron "
        "--reset-attention-mask, as Apertus trains); flash attention then skips the masked "
        "blocks, so the executed attention work is sum(d^2) / s^2 of the causal one, for "
        "documents of d tokens in a sequence of s (see mean_document_tokens). The model FLOPs "
        "(MFU) keep Megatron's convention and do not change; standard (unfused) attention "
        "computes every score and masks it, so it does not change either.",
    )
    mean_document_tokens: PositiveInt | None = Field(
        default=None, description="attention_mask document only (and then required): mean "
        "length in tokens of the documents packed into a sequence, at most seq_len. Modelled as "
        "seq_len // d documents of exactly d tokens and one of the remaining seq_len % d, so "
        "the attention work is (n d^2 + r^2) / s^2 of the causal one (d / s when d divides s); "
        "a spread of lengths with the same mean does more work (sum d^2 grows with the "
        "variance), so this is a lower bound.",
    )

    grad_nan_check: bool | None = Field(
        default=None, description="Megatron's check of each gradient bucket before its "
        "data-parallel reduction (--check-for-nan-in-loss-and-grad, on by default; "
        "DistributedDataParallelConfig.check_for_nan_in_grad): the bucket's norm, one "
        "reduction kernel reading its gradients, whose NaN test the host waits for before it "
        "scales the bucket and launches the collective (NVIDIA/Megatron-LM core_v0.8.0 "
        "megatron/core/distributed/param_and_grad_buffer.py start_grad_sync, 'assert not "
        "norm.isnan()'; from the rerun state machine on, check_grads tests NaN then Inf). "
        "Absent: Megatron's default, on except in FP16, whose dynamic loss scaling turns it "
        "off (megatron/training/arguments.py). Frameworks without it (DeepSpeed, plain "
        "PyTorch DDP) say false.",
    )
    cross_entropy_fusion: bool = Field(
        default=False, description="Megatron --cross-entropy-loss-fusion: the vocab-parallel "
        "cross-entropy's element-wise passes fused (megatron/core/fusions/"
        "fused_cross_entropy.py as of early 2025: the upcast with the maximum, the shift with "
        "the exponential, the gradient's scaling with its cast back), 26 instead of 38 bytes "
        "moved a logit in the forward pass of a 16-bit model and 6 instead of 14 in the "
        "backward pass. Default off, as in Megatron.",
    )
    cross_entropy_fusion_impl: Literal["native", "te"] = Field(
        default="native", description="Megatron --cross-entropy-fusion-impl, the fused "
        "cross-entropy's kernels (with cross_entropy_fusion only). native: Megatron-Core's "
        "fused passes (see cross_entropy_fusion). te: Transformer Engine's Triton kernels "
        "(transformer_engine/pytorch/triton/cross_entropy.py, TE v2.9): an online-softmax pass "
        "reads the logits, a second reads them again and writes the gradient in their place, "
        "and the backward pass scales it in place: 3 and 2 activation-widths moved a logit "
        "(6 and 4 bytes for 16-bit logits). Megatron-Bridge's performance scripts set it "
        "(NVIDIA-NeMo/Megatron-Bridge@fa0315ae2 scripts/performance/configs/*/*.yaml, v0.2.0 "
        "scripts/performance/utils/helpers.py).",
    )
    moe_router_fusion: bool = Field(
        default=False, description="Megatron --moe-router-fusion (Megatron-Core 0.14 and "
        "later; Megatron-Bridge's performance scripts set it): the router's top-k and score "
        "function, and its auxiliary loss's scores and loss, as Transformer Engine's fused "
        "kernels (one each, forward and backward) instead of about 20-50 small PyTorch "
        "kernels (ghsim.workload.routing). MoE models only; off by default, as in Megatron.",
    )
    deepep_fused_multihot: bool = Field(
        default=False, description="With the deepep dispatcher, the received tokens' expert "
        "indices become a routing map in one fused Triton kernel (fused_indices_to_multihot) "
        "instead of PyTorch ops whose boolean indexing and repeat_interleave make the host "
        "wait for the GPU three times a MoE layer forward and once backward "
        "(ghsim.workload.routing.deepep_multihot). Megatron-Core fuses it only with "
        "--enable-experimental and --moe-permute-fusion (token_dispatcher.py at core_v0.15.0; "
        "Megatron-Bridge's DeepSeek-V3 scripts set dist.enable_megatron_core_experimental); "
        "NeMo Automodel with permute fusion, which its MoE layers set. Off by default, as in "
        "Megatron.",
    )
    eager_ops: list[Literal["norm", "rope", "activation", "clamp", "residual", "bias",
                            "attention_layout"]] = Field(
        default_factory=list, description=(
            "Ops the framework runs as a sequence of separate PyTorch kernels instead of one "
            "fused kernel, as Hugging Face Transformers' modeling code does "
            "(huggingface/transformers@000c33fd models/qwen3/modeling_qwen3.py): norm, an RMSNorm "
            "in fp32 (upcast, square, mean, scale, downcast, weight: 36 bytes an element forward "
            "in 5 kernels, 88 backward in 10; a LayerNorm is one PyTorch kernel either way); "
            "rope, rotate_half's negate and concatenate with two products and a sum (20 bytes "
            "forward and 20 backward, in 5 kernels each for queries and for keys); activation, "
            "the gated MLP's SiLU and product (10 bytes an element of the up-projection forward "
            "in 2 kernels, 18 backward in 3), or, with model.bias, a GELU MLP's bias add and "
            "tanh-approximation formula as Megatron-LM's torch.jit.script bias_gelu runs under "
            "PyTorch 2.2 and later, whose TorchScript no longer fuses (46 bytes an element "
            "forward in 10 kernels, 92 backward in 19; Megatron-LM before 2024-01-19 and its "
            "forks; other non-gated activations, and F.gelu without a bias, are one kernel either "
            "way); clamp, a clamped activation's clamps (model.activation_clamp) before the fused "
            "activation, as Megatron-Core 0.15's experts run them "
            "(megatron/core/fusions/fused_bias_geglu.py weighted_bias_quick_geglu_impl: two "
            "clamps and a concatenation, 8 bytes an element of the up-projection forward in 3 "
            "kernels; clamp_backward's masks and wheres and the halves' concatenation, 15 "
            "backward in 7). Legacy Megatron-LM's local transformer "
            "(megatron/model/transformer.py before Megatron-Core, e.g. "
            "NVIDIA/Megatron-LM@f7727433, under PyTorch 2.2 and later) adds three: residual, its "
            "torch.jit.script bias_dropout_add op by op, the bias add, F.dropout and the residual "
            "add (with model.bias and model.dropout 15 bytes an element of the hidden state "
            "forward in 3 kernels, 16 backward in 3; fused, 7 and one kernel); bias, the QKV "
            "projection's bias added after its GEMM and its gradient summed by PyTorch (4 bytes "
            "an element of the QKV output forward, 2 backward; needs model.bias); "
            "attention_layout, the flash path's contiguous copies of q, k, v into flash-attn's "
            "layout and of its output back, and backward the output gradient's copy and the "
            "concatenation of dq, dk, dv (4 bytes an element of q, k, v and the output together, "
            "in 4 kernels forward and 2 backward; flash attention only). Byte counts are for "
            "16-bit activations, traced by hand from the autograd graph. Empty (default): fused, "
            "as Megatron-Core and Transformer Engine run the others (and as torch.compile fuses "
            "NeMo Automodel's clamps)."),
    )
    fp8_recipe: Literal["delayed", "tensorwise", "blockwise"] | None = Field(
        default=None, description="precision fp8 only: Transformer Engine's scaling recipe. "
        "delayed (DelayedScaling, TE's and NeMo's default on Hopper): each GEMM input is cast "
        "and transposed in one pass with the scale of earlier steps' amax history; tensorwise "
        "(Float8CurrentScaling): the tensor's own amax is reduced first, one more read of each "
        "input; blockwise (Float8BlockScaling, DeepSeek-V3's 1x128 / 128x128 tiles): scales are "
        "found inside the cast, which also writes one FP32 scale per 128 values. In every "
        "recipe attention, norms and the output layer (Megatron's, not a TE module) stay BF16. "
        "Default: delayed.",
    )
    data_loading: DataLoadingSpec | None = Field(
        default=None, description="The data loader, where reading samples may not keep up "
        "with the GPUs: its workers run ahead of the training loop (PyTorch prefetches), so "
        "in steady state a step takes at least the micro-batches' samples x sample_read_ms / "
        "workers, per rank that loads (Megatron: the first tensor-parallel rank of the first "
        "and last pipeline stages). Absent: loading is hidden behind the step.",
    )
    cuda_graphs: bool = Field(
        default=False, description="Replay each compute op (a layer's forward or backward "
        "pass, the optimizer) as a captured CUDA graph, one launch instead of one per kernel "
        "(Megatron-Core --enable-cuda-graph / --cuda-graph-impl, TE make_graphed_callables): "
        "the host's time to issue kernels (the CPU part's kernel_issue_us) no longer holds "
        "short kernels back. Off by default, as in Megatron-LM.",
    )
    grouped_gemm_gap_us: NonNegativeFloat | None = Field(
        default=None, description="GPU time, in microseconds, that each further expert GEMM "
        "of a grouped GEMM adds (Transformer Engine's GroupedLinear runs one cuBLAS GEMM per "
        "local expert over four streams on Hopper), for the software the run used instead of "
        "the GPU part's gpu.compute.grouped_gemm_gap_us, which is measured with current "
        "software. On H100 (NVIDIA/TransformerEngine PR #2045, docs/hardware-facts.md T4#18): "
        "2.12 with TE 2.7 and CUDA 12.9, 7.07 with TE 2.2; 0 for one grouped kernel. Default: "
        "the GPU part's value.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> TrainingSpec:
        if self.fp8_recipe is not None and self.precision != "fp8":
            raise ValueError(f"fp8_recipe needs precision fp8, got {self.precision!r}")
        if self.main_grads == "bf16" and self.precision not in ("bf16", "fp8"):
            raise ValueError(f"main_grads 'bf16' needs precision bf16 or fp8, got "
                             f"{self.precision!r}")
        if self.master_weights == "remainders" and self.precision not in ("bf16", "fp8"):
            raise ValueError(f"master_weights 'remainders' needs BF16 weights (precision bf16 "
                             f"or fp8), got {self.precision!r}")
        if self.main_grads == "fp16" and self.precision != "fp16":
            raise ValueError(f"main_grads 'fp16' needs precision fp16, got {self.precision!r}")
        if self.attention_mask == "document":
            if self.mean_document_tokens is None:
                raise ValueError("attention_mask 'document' needs mean_document_tokens")
            if self.mean_document_tokens > self.seq_len:
                raise ValueError(f"mean_document_tokens ({self.mean_document_tokens}) exceeds "
                                 f"seq_len ({self.seq_len}): documents are cut at the sequence "
                                 f"end; give at most seq_len")
        elif self.mean_document_tokens is not None:
            raise ValueError("mean_document_tokens is only used with attention_mask 'document'")
        if self.cross_entropy_fusion_impl != "native" and not self.cross_entropy_fusion:
            raise ValueError(f"cross_entropy_fusion_impl {self.cross_entropy_fusion_impl!r} "
                             f"chooses the fused cross-entropy's kernels: it needs "
                             f"cross_entropy_fusion true")
        return self

    @property
    def fp8_recipe_resolved(self) -> str | None:
        """The FP8 scaling recipe in effect (delayed by default), None without FP8."""
        if self.precision != "fp8":
            return None
        return self.fp8_recipe or "delayed"

    @property
    def main_grads_resolved(self) -> MainGrads:
        """The gradient dtype in effect (Megatron-LM's default when ``main_grads`` is unset)."""
        if self.main_grads is not None:
            return self.main_grads
        return "fp16" if self.precision == "fp16" else "fp32"

    @property
    def grad_nan_check_resolved(self) -> bool:
        """Whether each gradient bucket is checked for NaN (Megatron-LM's default when
        ``grad_nan_check`` is unset: on, except under FP16's dynamic loss scaling)."""
        if self.grad_nan_check is not None:
            return self.grad_nan_check
        return self.precision != "fp16"

    @property
    def attention_work_fraction(self) -> float:
        """Executed attention work (flash) relative to a causal mask over the whole sequence:
        sum over the documents of d_i^2 / s^2 (each document's causal triangle, d_i^2 / 2,
        against the sequence's, s^2 / 2)."""
        if self.attention_mask == "causal" or self.mean_document_tokens is None:
            return 1.0
        s, d = self.seq_len, self.mean_document_tokens
        full, rest = divmod(s, d)
        return (full * d * d + rest * rest) / (s * s)


RecomputeModule = Literal["core_attn", "layernorm", "moe_act", "mlp", "shared_experts", "moe",
                          "mla_up_proj"]
"""Megatron-Core's --recompute-modules names (TransformerConfig.recompute_modules)."""


class ParallelismSpec(Spec):
    """The parallel layout: tp x pp x cp x dp GPUs."""

    tp: PositiveInt = 1
    pp: PositiveInt = 1
    dp: PositiveInt | None = Field(default=None, description="Default: num_gpus / (tp*pp*cp).")
    cp: PositiveInt = 1
    vp: PositiveInt | None = Field(default=None, description="Interleaved virtual stages.")
    first_stage_layers: NonNegativeInt | None = Field(
        default=None, description="Transformer layers on the first pipeline stage (Megatron "
        "--decoder-first-pipeline-num-layers), split evenly over its vp chunks; the other "
        "stages share the rest evenly. Lighten the stage that also holds the embedding. "
        "Default: ghsim's even split.",
    )
    last_stage_layers: NonNegativeInt | None = Field(
        default=None, description="Transformer layers on the last pipeline stage (Megatron "
        "--decoder-last-pipeline-num-layers), split evenly over its vp chunks; multi-token-"
        "prediction modules come on top. Lighten the stage that also holds the output layer "
        "and the loss (the result's stages show which stage paces the pipeline). Default: "
        "ghsim's even split.",
    )
    ep: PositiveInt = Field(
        default=1, description="Expert-parallel size (Megatron --expert-model-parallel-size): "
        "each MoE layer's routed experts are split over ep ranks, which exchange tokens by "
        "all-to-all. With Megatron's parallel folding the expert layout refolds the ranks of a "
        "pipeline stage (tp x cp x dp) as etp x ep x edp, independent of the attention layout; "
        "the expert data-parallel size edp = num_gpus / (ep x etp x pp).",
    )
    etp: PositiveInt | None = Field(
        default=None, description="Expert tensor-parallel size (Megatron "
        "--expert-tensor-parallel-size): each expert's FFN split over etp ranks. Default: tp, "
        "as Megatron-Core defaults it.",
    )
    moe_dispatcher: Literal["alltoall", "deepep"] = Field(
        default="alltoall", description="How MoE tokens travel to their experts. alltoall "
        "(Megatron --moe-token-dispatcher-type alltoall): every routed copy of a token goes "
        "to its expert's rank. deepep (DeepEP, Megatron's flex dispatcher): a token crosses "
        "the network once per remote NVLink domain it is routed to and is forwarded to its "
        "experts there over NVLink (group-limited routing narrows the domains it can reach); "
        "inside its own domain it goes once to each rank holding one of its experts.",
    )
    moe_a2a_overlap: bool = Field(
        default=False, description="Hide the MoE dispatch and combine all-to-alls behind "
        "compute (Megatron-Core overlap_moe_expert_parallel_comm, which interleaves one "
        "micro-batch's forward with another's backward; DeepSeek's DualPipe): each runs beside "
        "a GEMM of its layer, as tp_comm_overlap does, and is exposed only where it is longer. "
        "Off by default, as in Megatron-LM.",
    )
    sequence_parallel: bool = False
    zero_stage: Literal[0, 1, 2, 3] = 0
    recompute: Literal["none", "selective", "full"] = "none"
    recompute_modules: list[RecomputeModule] | None = Field(
        default=None, min_length=1, description="With recompute selective (ignored otherwise, "
        "as Megatron ignores the flag without --recompute-granularity selective, so a sweep "
        "over recompute keeps it): the modules whose "
        "forward is redone in the backward pass instead of keeping their activations, as "
        "Megatron-Core's --recompute-modules names them: core_attn (the attention core; the "
        "default), layernorm (the norms: cheap to redo; their outputs stay saved by the GEMMs "
        "that use them), moe_act (the experts' activation function: its output, the experts' "
        "down-projection input, is not kept), mlp (a dense layer's MLP: only its input is "
        "kept), shared_experts (a MoE layer's shared experts, likewise), moe (the whole MoE "
        "block, router and all-to-alls included: only its input is kept), mla_up_proj (MLA's "
        "up-projections and RoPE: the latents are kept instead of the per-head Q, K, V).",
    )
    overlap_grad_reduce: bool = Field(
        default=True, description="Reduce gradient buckets during the backward pass. On by "
        "default as NeMo's and Megatron-Bridge's recipes set it; Megatron-LM itself defaults "
        "to off (--overlap-grad-reduce, store_true, megatron/training/arguments.py): set false "
        "for a run that does not pass the flag."
    )
    ddp_bucket_size: PositiveInt | None = Field(
        default=None, description="Parameters per data-parallel gradient bucket (Megatron "
        "--ddp-bucket-size). Absent: Megatron-Core's default, max(40M, 1M x dp). Megatron "
        "buckets only the first pipeline stage's first model chunk: every other chunk reduces "
        "its gradients as one bucket after its last backward pass (DistributedDataParallel "
        "drops bucket_size where pp_rank > 0, get_model passes disable_bucketing for model "
        "chunks after the first).",
    )
    overlap_param_gather: bool = Field(
        default=True, description="ZeRO >= 1: gather updated weights during the next forward. "
        "On by default as NeMo's recipes set it; Megatron-LM defaults to off "
        "(--overlap-param-gather, store_true)."
    )
    tp_comm_overlap: bool = Field(
        default=False, description="Overlap each sequence-parallel all-gather and "
        "reduce-scatter with the GEMM beside it, pipelined in tp chunks (Megatron-LM "
        "--tp-comm-overlap with Transformer Engine userbuffers; off by default in Megatron-LM, "
        "on in NeMo's large-model recipes). Needs sequence_parallel; all-reduces never overlap.",
    )

    @property
    def recompute_modules_resolved(self) -> tuple[str, ...]:
        """The modules recomputed: Megatron's default core_attn under selective recompute,
        none otherwise (full recompute redoes the whole layer)."""
        if self.recompute != "selective":
            return ()
        return tuple(dict.fromkeys(self.recompute_modules or ["core_attn"]))


class OffloadSpec(Spec):
    """Which offload strategy (DESIGN.md section 6) the step uses, and its knobs."""

    strategy: Name = Field(
        default="none", description="A registered offload policy (ghsim.workload.offload): "
        "none, optimizer, optimizer_overlap, params, activations, experts (MoE: routed experts in "
        "host memory, streamed per layer), unified_memory. A new policy registers itself "
        "with @register(name) and needs no change to this schema; the name is checked when "
        "the step is lowered (and before a sweep runs).",
    )
    fraction: float = Field(
        default=1.0, gt=0.0, le=1.0,
        description="Share of what the strategy moves (optimizer states, weights, activations) "
        "that lives in host memory.",
    )
    prefetch_layers: PositiveInt = Field(
        default=1, description="params / activations: layers fetched ahead of use."
    )
    cpu_cores: PositiveInt | None = Field(
        default=None, description="Host cores the CPU optimizer step uses (default: this GPU's "
        "share of the node's cores): it runs at the slowest of their arithmetic, what they "
        "stream of host memory (cpu.compute.core_read_gb_s / core_write_gb_s each), and the "
        "memory's stream rate.",
    )


class MicrobenchmarkSpec(Spec):
    """Replace the training step by one data movement, to set beside a measured microbenchmark."""

    operation: Literal[
        "h2d_copy", "d2h_copy", "gpu_read_host", "gpu_write_host", "cpu_read_device",
        "cpu_write_device", "stream_hbm", "stream_host",
    ] = Field(description="copy-engine copies, in-place access over the host link by either "
              "side, or STREAM on a memory from its own processor")
    gib: PositiveFloat = Field(description="Bytes moved, in GiB.")


class ScenarioSpec(DocumentSpec):
    """``kind: scenario``: everything one simulated training step needs."""

    KIND = "scenario"

    name: str = ""
    system: Annotated[SystemSpec, Ref("system")]
    num_gpus: PositiveInt
    model: Annotated[ModelSpec, Ref("model")]
    training: TrainingSpec
    parallelism: ParallelismSpec = Field(default_factory=ParallelismSpec)
    offload: OffloadSpec = Field(default_factory=OffloadSpec)
    workload: str | None = Field(
        default=None, description="A workload file written by `ghsim import` to replay instead "
        "of lowering the model (path relative to this file).",
    )
    replay: Literal["measured", "recost"] = Field(
        default="measured", description="workload only: replay the recorded durations, or "
        "re-cost each kernel and collective on this scenario's hardware.",
    )
    microbenchmark: MicrobenchmarkSpec | None = Field(
        default=None, description="Simulate this one operation instead of a training step.",
    )
    seed: NonNegativeInt = 0
