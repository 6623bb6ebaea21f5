"""The cost of one serving iteration on one replica: pure functions of the batch it runs.

An iteration (one forward pass of the engine) processes the prompt tokens of the requests being
prefilled and one token of every decoding sequence. Per layer on each of the replica's tp GPUs:

* the linear layers are GEMMs with M = every token of the iteration: a roofline of their FLOPs
  at the GPU's measured GEMM efficiency (M padded to the tensor core's instruction tile, the SMs
  filled by split-K / stream-K as cuBLASLt and TensorRT-LLM do for small M, or the training wave
  model where that is better) against their bytes, the weights above all, at the bandwidth a
  skinny GEMM measurably reaches (``gpu.memory.skinny_gemm_efficiency``, below STREAM: few rows
  leave too few loads in flight); decode is weight-streaming, prefill compute-bound, as the
  hardware makes them;
* MoE layers read only the experts their tokens are routed to: of ``E`` experts with top-k
  routing, ``M`` tokens touch ``E (1 - (1 - k/E)^M)`` of them (balanced routing), each a GEMM
  of ``M k / E`` rows;
* attention: prefill as fused causal attention (its FLOPs at the measured attention efficiency);
  decode as reading each sequence's KV cache at the HBM rate, or, for blocks offloaded to host
  memory, over NVLink-C2C / PCIe at the measured GPU-reads-host rate (``in_place``) or by copy
  engines ahead of use (``reload``, overlapped with the iteration);
* norms, activations and the KV-cache write are memory-bound kernels; every kernel costs the
  GPU's launch gap; the two tensor-parallel all-reduces of each layer are NCCL's, laid on the
  replica's NVLink by the fabric model.

The host's time per iteration (scheduling, sampling bookkeeping, detokenisation, streaming) adds
to the GPU's unless the engine overlaps it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ghsim.config.schema import ServingScenarioSpec
from ghsim.config.schema.hardware import HostLinkUse
from ghsim.config.serving_layout import ServingScenario
from ghsim.costmodel.gpu import GpuCostModel, gpu_cost_model, step_clock_ghz
from ghsim.errors import ConfigError
from ghsim.fabric.traffic import TrafficPlanner, traffic_planner
from ghsim.serving.memory import (
    DTYPE_BYTES,
    ReplicaShape,
    kv_width,
    replica_shape,
    window_of,
)
from ghsim.workload.ir import RankClass
from ghsim.workload.modelsize import mla_dims, parameter_count
from ghsim.workload.placement import place_groups
from ghsim.workload.summary import wire_bytes

BASE_MEMO = 65536
"""The most (tokens, rows) pairs whose layer and head costs an iteration model keeps."""

PARTS = ("gemm", "weights", "attention", "kv_read", "kv_host", "elementwise",
         "communication", "launch", "cpu")
"""Where an iteration's time goes: compute-bound GEMMs, weight-streaming (memory-bound) GEMMs,
prefill attention, decode KV reads from HBM, KV reads from host memory beyond what HBM's take,
memory-bound kernels, tensor-parallel all-reduces, launch gaps, and exposed host time."""

RESOURCE_OF = {"gemm": "compute", "attention": "compute", "weights": "hbm_bandwidth",
               "kv_read": "hbm_bandwidth", "elementwise": "hbm_bandwidth",
               "communication": "nvlink", "launch": "kernel_launch", "cpu": "cpu"}
"""The hardware resource each part of the time is bound by (kv_host: the host link)."""


@dataclass(frozen=True)
class Batch:
    """What one iteration processes on a replica."""

    prefill_tokens: int = 0
    """Prompt tokens prefilled (every chunk of the iteration)."""
    prefill_pairs: float = 0.0
    """Causal (query, key) pairs of the prefilled chunks: sum of c (p + (c + 1) / 2) for a
    chunk of c tokens after p already in the cache."""
    prefill_past_tokens: int = 0
    """Cached tokens the prefilled chunks attend to (chunked prefill)."""
    logits_rows: int = 0
    """Sequences that produce a token: every decoding one and each prompt finished now."""
    decode_seqs: int = 0
    """Sequences (beams) decoding one token."""
    decode_ctx_hbm: float = 0.0
    """Cached tokens the decoding sequences read from HBM."""
    decode_ctx_host: float = 0.0
    """Cached tokens they read from host memory (offloaded KV)."""
    prefill_window_pairs: float = 0.0
    """Sliding-window models: the prefilled chunks' (query, key) pairs inside the window."""
    prefill_chunks: tuple[tuple[int, int], ...] = ()
    """Each prefilled chunk's tokens and the tokens already in its sequence's cache: each is
    one fused attention kernel over ``cached + tokens`` keys (empty: cost the pairs at the
    long-sequence rate)."""
    decode_ctx_window: float = 0.0
    """Sliding-window models: sum over decoding sequences of min(context, window)."""

    @property
    def tokens(self) -> int:
        return self.prefill_tokens + self.decode_seqs


@dataclass
class IterationCost:
    """Seconds of one iteration, by part (:data:`PARTS`)."""

    parts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))

    @property
    def total_s(self) -> float:
        return sum(self.parts.values())

    def add(self, part: str, seconds: float) -> None:
        self.parts[part] += seconds


@dataclass(frozen=True)
class HostRates:
    """How fast a GPU reaches offloaded KV in its host's memory."""

    read_bytes_per_s: float
    """The GPU reading host memory in place (ATS over C2C, or zero-copy over PCIe)."""
    copy_bytes_per_s: float
    """Copy-engine host-to-device copies."""
    link: str
    """``c2c`` or ``pcie``."""


class IterationModel:
    """Costs iterations of one replica of a serving scenario (GEMM parts memoised by M)."""

    def __init__(self, scenario: ServingScenario) -> None:
        spec = scenario.spec
        self.spec: ServingScenarioSpec = spec
        self.shape: ReplicaShape = replica_shape(spec)
        part = spec.system.node.gpu
        # a replica's tp GPUs run each layer in step (its all-reduces): the slowest sets the pace
        self.gpu: GpuCostModel = gpu_cost_model(
            part, step_clock_ghz(spec.system.node, scenario.source, spec.parallelism.tp))
        gpu = part.gpu
        assert gpu is not None
        skinny = gpu.memory.rate_bytes_per_s("skinny_gemm")
        if skinny is None:
            raise ConfigError(part.name, "gpu.memory.skinny_gemm_efficiency", "is needed to "
                              "cost decode's weight-streaming GEMMs (with a source)")
        self.weight_stream_bytes_per_s = skinny
        mma_m = gpu.compute.gemm_min_tile_m
        if mma_m is None:
            raise ConfigError(part.name, "gpu.compute.gemm_min_tile_m",
                              "is needed to cost the small-M GEMMs of decode (with a source)")
        self.mma_m: int = mma_m
        inference = spec.inference
        try:
            self.gpu.peak_of(inference.precision)
        except ConfigError:
            raise ConfigError(scenario.source, "inference.precision", f"{part.name} has no "
                              f"{inference.precision} tensor cores (gpu.compute."
                              f"flops_per_clock_per_sm); serve in bf16 or fp16") from None
        self.wdtype = inference.precision
        self.wbytes = DTYPE_BYTES[inference.precision]
        expert = inference.expert_precision or inference.precision
        self.expert_wbytes = DTYPE_BYTES[expert]
        self.expert_dtype = "bf16" if expert == "mxfp4" else expert
        """MXFP4 experts are unpacked and multiplied in BF16 (no FP4 tensor cores)."""
        self.kv_layer_bytes = float(kv_width(spec.model, spec.parallelism.tp)
                                    * DTYPE_BYTES[inference.kv_dtype])
        """One token's KV cache in one layer on this GPU."""
        self.mla = mla_dims(spec.model)
        self.window = window_of(spec.model)
        self.attention_params = parameter_count(spec.model).attention_per_layer
        self.offload = inference.kv_offload.policy
        self.host = self._host_rates(spec)
        cpu = spec.system.node.cpu.cpu
        assert cpu is not None
        step_us = inference.host_step_us
        request_us = inference.host_request_us
        if step_us is None:
            step_us = cpu.compute.serving_step_us
        if request_us is None:
            request_us = cpu.compute.serving_request_us
        if step_us is None or request_us is None:
            missing = "serving_step_us" if step_us is None else "serving_request_us"
            raise ConfigError(spec.system.node.cpu.name, f"cpu.compute.{missing}",
                              "is needed to cost the serving engine's host time (with a "
                              "source), or give inference.host_step_us / host_request_us")
        self.host_step_s = step_us * 1e-6
        self.host_request_s = request_us * 1e-6
        self.overlap_host = inference.overlap_host
        self.planner: TrafficPlanner | None = None
        self.rank_class: RankClass | None = None
        if self.shape.tp > 1:
            layout = scenario.layout
            self.planner = traffic_planner(spec.system, layout)
            self.rank_class = RankClass("replica", 0, 1, [], [], place_groups(layout, 0), 0)
        self._layers_memo: dict[int, IterationCost] = {}
        self._head_memo: dict[int, IterationCost] = {}
        self._base_memo: dict[tuple[int, int], dict[str, float]] = {}
        self._allreduce_memo: dict[float, float] = {}
        self._attention_rates: tuple[GpuCostModel, float, tuple[int, int, int]] | None = None

    # -- rates ---------------------------------------------------------------------------------

    @staticmethod
    def _host_rates(spec: ServingScenarioSpec) -> HostRates | None:
        """The host-link rate the KV offload policy uses: in-place reads (in_place) or
        copy-engine copies to the GPU (reload); a :class:`ConfigError` if it is not known."""
        policy = spec.inference.kv_offload.policy
        if policy == "none":
            return None
        part = spec.system.node.gpu
        assert part.gpu is not None
        link = part.gpu.host_link
        use: HostLinkUse = "gpu_read_host" if policy == "in_place" else "h2d_copy"
        rate = link.rate_bytes_per_s(use)
        if rate is None:
            raise ConfigError(part.name, f"gpu.host_link.{use}_efficiency", f"is needed to "
                              f"cost KV cache offload policy {policy!r} (with a source)")
        return HostRates(rate if policy == "in_place" else 0.0,
                         rate if policy == "reload" else 0.0, link.type)

    # -- kernels -------------------------------------------------------------------------------

    def gemm_s(self, m: float, n: int, k: int, dtype: str, weight_bytes: float,
               groups: int = 1) -> tuple[float, bool]:
        """Seconds of ``groups`` GEMMs of ``m x n x k`` (``m`` may be fractional: the mean rows
        an expert gets) and whether compute bounds them; ``weight_bytes`` is the B operand."""
        if m <= 0:
            return 0.0, False
        flops = 2.0 * m * n * k * groups
        act = DTYPE_BYTES.get(dtype, 2)
        nbytes = weight_bytes + groups * m * (k * act + n * 2)
        rows = max(1, math.ceil(m))
        padded = rows / (math.ceil(rows / self.mma_m) * self.mma_m)
        split_k = padded * self.gpu.k_factor(k, dtype) / self.gpu.k_factor(
            self.gpu.reference_k(dtype), dtype)
        shape = max(min(1.0, split_k),
                    self.gpu.shape_efficiency(rows, n, k, dtype, groups))
        compute = flops / (self.gpu.peak_of(dtype) * self.gpu.gemm_efficiency_of(dtype) * shape)
        memory = nbytes / self.weight_stream_bytes_per_s
        return self.gpu.roofline_s(compute, memory), compute >= memory

    def _gemm(self, cost: IterationCost, m: float, n: int, k: int, dtype: str,
              groups: int = 1, weights: float | None = None) -> None:
        wbytes = DTYPE_BYTES.get(dtype, 2)
        seconds, compute_bound = self.gemm_s(
            m, n, k, dtype, weights if weights is not None else n * k * wbytes * groups, groups)
        if seconds:
            cost.add("gemm" if compute_bound else "weights", seconds)
            cost.add("launch", self.gpu.launch_s)

    def _memory_kernel(self, cost: IterationCost, nbytes: float) -> None:
        if nbytes > 0:
            cost.add("elementwise", nbytes / self.gpu.elementwise_bytes_per_s)
            cost.add("launch", self.gpu.launch_s)

    def allreduce_s(self, message_bytes: float) -> float:
        """One tensor-parallel all-reduce of ``message_bytes`` on the replica's GPUs."""
        if self.planner is None or self.rank_class is None or message_bytes <= 0:
            return 0.0
        if message_bytes not in self._allreduce_memo:
            group = self.rank_class.groups["tp"]
            wire = wire_bytes("all_reduce", message_bytes, group.size)
            plan = self.planner.collective(self.rank_class, group, "all_reduce", wire)
            self._allreduce_memo[message_bytes] = self.planner.alone_s(plan, wire)
        return self._allreduce_memo[message_bytes]

    # -- the parts that depend on M only -------------------------------------------------------

    def layers_cost(self, m: int) -> IterationCost:
        """Every layer's GEMMs, memory-bound kernels and all-reduces for ``m`` tokens."""
        if m not in self._layers_memo:
            self._layers_memo[m] = self._layers(m)
        return self._layers_memo[m]

    def _layers(self, m: int) -> IterationCost:
        s, dtype = self.shape, self.wdtype
        cost = IterationCost()
        if m <= 0:
            return cost
        h, hd = s.hidden, s.head_dim
        q, kv = s.heads * hd, s.kv_heads * hd
        dense_layers = s.layers - s.moe_layers
        one = IterationCost()
        if self.mla is None:
            self._gemm(one, m, q + 2 * kv, h, dtype)
            self._gemm(one, m, h, q, dtype)
        else:  # MLA's down and up projections, as one GEMM of the layer's attention weights
            self._gemm(one, m, max(1, self.attention_params // (s.tp * h)), h, dtype)
        self._memory_kernel(one, m * h * 2.0 * 2 * 2)  # two norms: read and write h
        self._memory_kernel(one, m * self.kv_layer_bytes)  # rotary and the KV-cache write
        allreduce = 2 * self.allreduce_s(m * h * 2.0)
        one.add("communication", allreduce)
        _scale_into(cost, one, s.layers)
        if dense_layers:
            mlp = IterationCost()
            self._mlp(mlp, m, s.ffn)
            _scale_into(cost, mlp, dense_layers)
        if s.moe_layers:
            moe = IterationCost()
            self._moe(moe, m)
            _scale_into(cost, moe, s.moe_layers)
        return cost

    def _mlp(self, cost: IterationCost, m: float, width: int, groups: int = 1,
             weight_groups: float | None = None, experts: bool = False) -> None:
        """An MLP of ``width`` on this GPU (``groups`` experts sharing a grouped GEMM, of
        which ``weight_groups`` are read; ``experts``: at the routed experts' precision)."""
        s = self.shape
        dtype, wbytes = ((self.expert_dtype, self.expert_wbytes) if experts
                         else (self.wdtype, self.wbytes))
        up = (s.mlp_matrices - 1) * width
        read = weight_groups if weight_groups is not None else groups
        self._gemm(cost, m, up, s.hidden, dtype, groups, up * s.hidden * wbytes * read)
        self._memory_kernel(cost, m * groups * width * 2.0 * (s.mlp_matrices))  # activation
        self._gemm(cost, m, s.hidden, width, dtype, groups, width * s.hidden * wbytes * read)

    def _moe(self, cost: IterationCost, m: int) -> None:
        s = self.shape
        self._gemm(cost, m, s.experts, s.hidden, "bf16")  # the router, in 16 bits
        self._memory_kernel(cost, m * s.hidden * 2.0 * 2 * s.top_k / max(1, s.experts)
                            * s.local_experts)  # permute and unpermute the routed copies
        rows = m * s.top_k / s.experts
        touched = s.local_experts * (1.0 - (1.0 - s.top_k / s.experts) ** m)
        self._mlp(cost, rows, s.expert_ffn, s.local_experts, touched, experts=True)
        if s.shared_ffn:
            self._mlp(cost, m, s.shared_ffn)

    def head_cost(self, rows: int) -> IterationCost:
        """The final norm, the lm_head (16-bit) and sampling for ``rows`` sequences."""
        if rows not in self._head_memo:
            s = self.shape
            cost = IterationCost()
            if rows > 0:
                vocab = s.vocab // s.tp
                self._memory_kernel(cost, rows * s.hidden * 2.0 * 2)
                self._gemm(cost, rows, vocab, s.hidden, "bf16")
                cost.add("communication", self._allgather_s(rows * vocab * 4.0))
                self._memory_kernel(cost, rows * s.vocab * 4.0)  # sampling reads the logits
            self._head_memo[rows] = cost
        return self._head_memo[rows]

    def _allgather_s(self, shard_bytes: float) -> float:
        """The logits' all-gather over tp, costed as an all-reduce of the same wire bytes."""
        if self.shape.tp <= 1:
            return 0.0
        n = self.shape.tp
        return self.allreduce_s(shard_bytes * n / 2.0)

    # -- one iteration -------------------------------------------------------------------------

    def iteration(self, batch: Batch, running: int) -> IterationCost:
        """The cost of ``batch`` with ``running`` requests in the batch (host bookkeeping)."""
        cost = IterationCost(dict(self._base(batch.tokens, batch.logits_rows)))
        self._attention(cost, batch)
        gpu_s = cost.total_s
        reload_s = 0.0
        if self.offload == "reload" and batch.decode_ctx_host > 0 and self.host is not None:
            full = self.shape.layers - (self.window.windowed if self.window else 0)
            reload_s = (batch.decode_ctx_host * self.kv_layer_bytes * full
                        / self.host.copy_bytes_per_s)
            cost.add("kv_host", max(0.0, reload_s - gpu_s))
            gpu_s = max(gpu_s, reload_s)
        host_s = self.host_step_s + self.host_request_s * running
        cost.add("cpu", max(0.0, host_s - gpu_s) if self.overlap_host else host_s)
        return cost

    def _base(self, tokens: int, rows: int) -> dict[str, float]:
        """The layers' cost for ``tokens`` plus the head's for ``rows``, by part (memoised, at
        most :data:`BASE_MEMO` pairs: a decode-only iteration's tokens are its rows)."""
        key = (tokens, rows)
        base = self._base_memo.get(key)
        if base is None:
            cost = IterationCost()
            _scale_into(cost, self.layers_cost(tokens), 1)
            _scale_into(cost, self.head_cost(rows), 1)
            if len(self._base_memo) >= BASE_MEMO:
                self._base_memo.clear()
            base = self._base_memo[key] = cost.parts
        return base

    def _rates(self) -> tuple[float, tuple[int, int, int]]:
        """Attention's FLOP rate and :meth:`_widths` (recomputed if ``self.gpu`` changed)."""
        if self._attention_rates is None or self._attention_rates[0] is not self.gpu:
            gpu = self.gpu
            rate = gpu.peak_of("bf16") * gpu.attention_efficiency_of("bf16")
            self._attention_rates = (gpu, rate, self._widths())
        return self._attention_rates[1], self._attention_rates[2]

    def _widths(self) -> tuple[int, int, int]:
        """FLOPs per (query, key) pair of prefill, FLOPs per cached token of decode, and the
        query width, on this GPU. MLA prefills with full heads of nope + rope (scores) and v
        (values) and decodes absorbed: every head scores the latent and the rotary key and
        sums the latent, 2 (2 kv_lora + rope) per head (DeepSeek inference/model.py, the
        'absorb' path)."""
        s = self.shape
        if self.mla is None:
            width = s.heads * s.head_dim
            return 4 * width, 4 * width, width
        m = self.mla
        prefill = 2 * s.heads * (m.nope + m.rope + m.v)
        decode = 2 * s.heads * (2 * m.kv_lora + m.rope)
        return prefill, decode, s.heads * (m.kv_lora + m.rope)

    def _prefill_compute_s(self, batch: Batch, per_pair: float, rate: float
                           ) -> tuple[float, float]:
        """Tensor-core seconds of one layer's prefill attention, full and windowed: each
        chunk's kernel runs its queries against the cached keys in full and against its own
        causally, the tiles on the diagonal whole (``causal_diagonal_tokens`` a query, at most
        the chunk's square), at the rate of a kernel over its keys and head dimension, as the
        training kernels are costed (:meth:`GpuCostModel.attention_s`)."""
        if not batch.prefill_chunks:
            return (per_pair * batch.prefill_pairs / rate,
                    per_pair * batch.prefill_window_pairs / rate)
        gpu, window = self.gpu, self.window
        head_dim = self._head_dim()
        full = windowed = 0.0
        for tokens, cached in batch.prefill_chunks:
            keys = cached + tokens
            # keys of its own each query runs: the causal kernel's share of the chunk's square
            # (a part without a measured share: the exact causal pairs)
            own = ((tokens + 1) / 2 if gpu.causal_diagonal_tokens is None
                   else tokens * gpu.causal_fraction(tokens))
            full += tokens * (cached + own) / gpu.attention_rate("bf16", keys, head_dim)
            if window is not None:
                seen = min(cached + own, window.tokens)
                windowed += tokens * seen / gpu.attention_rate(
                    "bf16", min(keys, window.tokens), head_dim)
        return per_pair * full, per_pair * windowed

    def _head_dim(self) -> int:
        """The head dimension of the prefill kernel's queries and keys."""
        if self.mla is not None:
            return self.mla.nope + self.mla.rope
        return self.shape.head_dim

    def _attention(self, cost: IterationCost, batch: Batch) -> None:
        """Prefill and decode attention of every layer: the layers with a sliding window
        (``self.window``) see at most the window's pairs and cached tokens, all in HBM."""
        s, gpu = self.shape, self.gpu
        layers = s.layers
        windowed = self.window.windowed if self.window is not None else 0
        full = layers - windowed
        rate, (per_pair, per_cached, width) = self._rates()
        bandwidth = gpu.hbm_bytes_per_s
        if batch.prefill_tokens:
            nbytes = (batch.prefill_tokens * (width * 2.0 + self.kv_layer_bytes)
                      + batch.prefill_past_tokens * self.kv_layer_bytes)
            full_s, window_s = self._prefill_compute_s(batch, per_pair, rate)
            seconds = full * max(full_s, nbytes / bandwidth)
            if windowed:
                seconds += windowed * max(window_s, nbytes / bandwidth)
            cost.add("attention", seconds)
            cost.add("launch", layers * gpu.launch_s)
        if batch.decode_seqs:
            ctx = batch.decode_ctx_hbm + batch.decode_ctx_host
            queries = batch.decode_seqs * width * 2.0 * 2
            hbm = batch.decode_ctx_hbm * self.kv_layer_bytes + queries
            one = max(per_cached * ctx / rate, hbm / bandwidth)
            seconds = full * one
            if windowed:
                seconds += windowed * max(
                    per_cached * batch.decode_ctx_window / rate,
                    (batch.decode_ctx_window * self.kv_layer_bytes + queries) / bandwidth)
            cost.add("kv_read", seconds)
            if self.offload == "in_place" and batch.decode_ctx_host and self.host is not None:
                host = batch.decode_ctx_host * self.kv_layer_bytes / self.host.read_bytes_per_s
                cost.add("kv_host", full * max(0.0, host - one))
            cost.add("launch", layers * gpu.launch_s)


def _scale_into(target: IterationCost, part: IterationCost, times: float) -> None:
    for key, value in part.parts.items():
        target.parts[key] += value * times
