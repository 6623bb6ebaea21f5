"""``kind: hardware``: one chip per file (a GPU, a CPU, or a NIC) with cited numbers.

Units are in the key names and converted to SI by the properties and methods of each class.
Every rate the simulator uses is a physical capacity times a measured efficiency: a file gives
the efficiency (``stream_efficiency`` of ``peak_bandwidth_gb_s``), or the measured absolute rate
(``stream_bandwidth_gb_s``), which validation turns into the efficiency of the capacity in the
same document. So an override of a capacity moves every rate given as an efficiency of it.
"""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ghsim import units
from ghsim.config.schema.base import (
    INFORMATIONAL,
    ROUTE,
    DocumentSpec,
    Fraction,
    Name,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    Sources,
    Spec,
)

Dtype = Literal["fp64", "fp64_tensor", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"]
MemoryUse = Literal["read", "write", "stream", "elementwise", "pointwise", "softmax",
                    "skinny_gemm"]
HostLinkUse = Literal["h2d_copy", "d2h_copy", "gpu_read_host", "gpu_write_host",
                      "cpu_read_device", "cpu_write_device"]
SharpFraction = Annotated[float, Field(gt=0, le=2)]
"""An efficiency that may exceed 1: NVLink SHARP reduces in the switch, so its bus bandwidth can
be above the links' own."""

MEMORY_USES: tuple[MemoryUse, ...] = ("read", "write", "stream", "elementwise", "pointwise",
                                     "softmax", "skinny_gemm")
HOST_LINK_USES: tuple[HostLinkUse, ...] = ("h2d_copy", "d2h_copy", "gpu_read_host",
                                           "gpu_write_host", "cpu_read_device",
                                           "cpu_write_device")


STRIDED_BYTES_PER_ELEMENT = 4
"""Bytes a non-vectorized element-wise kernel moves an element: a 16-bit read and a 16-bit
write (a copy, a bias or scale broadcast onto one tensor)."""


def _pinned(what: str, efficiency: str, capacity: str) -> str:
    """The description of a measured absolute rate that stands beside its efficiency."""
    return (f"{what}: a measured absolute rate; converted at load into {efficiency} of "
            f"{capacity}, so it stays fixed when that capacity is changed — give {efficiency} "
            "instead to let it follow the hardware.")


def _efficiency(what: str, capacity: str, cap: str = "0 < x <= 1") -> str:
    return (f"{what}, as a fraction of {capacity} ({cap}): the rate is this times {capacity}, "
            "so it follows that capacity when it is overridden.")


_SHOWN = (" Informational: ``ghsim inspect`` shows it on the memory's link, and no cost reads "
          "it: a GPU kernel is costed at its kind's measured rate (stream, elementwise, ...), "
          "the CPU at stream's, and traffic to or from another chip at the host link's.")


def _not_both(cls: type[Spec], value: Any, info: ValidationInfo) -> Any:
    """A field validator of an efficiency: its absolute alternative must not be given too."""
    name = info.field_name
    assert name is not None
    other = cls.alternative(name)
    if value is not None and other is not None and info.data.get(other) is not None:
        raise ValueError(f"give one of {other} or {name}, not both")
    return value


def _to_efficiency(spec: Spec, absolute: str, efficiency: str, capacity_gb_s: float,
                   capacity: str, most: float = 1.0) -> None:
    """Turn the measured absolute rate ``absolute`` (GB/s), if given, into ``efficiency``."""
    rate = getattr(spec, absolute)
    if rate is None:
        return
    value = rate / capacity_gb_s
    if value > most:
        bound = "more than" if most == 1.0 else f"more than {most:g} x"
        raise ValueError(
            f"{absolute} = {rate:g} GB/s is {bound} {capacity} = {capacity_gb_s:g} GB/s; "
            f"raise {capacity} too, or give {efficiency}"
        )
    spec._derive(efficiency, value)


class MemorySpec(Spec):
    """A memory attached to a chip (HBM on a GPU, LPDDR5X or DDR on a CPU)."""

    ALTERNATIVES = tuple((f"{use}_bandwidth_gb_s", f"{use}_efficiency") for use in MEMORY_USES)

    type: Literal["hbm2e", "hbm3", "hbm3e", "lpddr5x", "ddr4", "ddr5"]
    capacity_gib: PositiveFloat
    usable_capacity_gib: PositiveFloat | None = Field(
        default=None, description="What software can allocate (HBM less what the driver keeps, "
        "or the memory the OS leaves free); capacity_bytes, and so every memory budget, uses it "
        "in place of capacity_gib when given.",
    )
    peak_bandwidth_gb_s: PositiveFloat = Field(
        description="Peak bandwidth of the memory (datasheet): the capacity every *_efficiency "
        "of this memory multiplies."
    )
    read_bandwidth_gb_s: PositiveFloat | None = Field(
        default=None, json_schema_extra=INFORMATIONAL, description=_pinned(
            "Measured read bandwidth by the chip that owns the memory", "read_efficiency",
            "peak_bandwidth_gb_s") + _SHOWN)
    write_bandwidth_gb_s: PositiveFloat | None = Field(
        default=None, json_schema_extra=INFORMATIONAL, description=_pinned(
            "Measured write bandwidth by the chip that owns the memory", "write_efficiency",
            "peak_bandwidth_gb_s") + _SHOWN)
    stream_bandwidth_gb_s: PositiveFloat | None = Field(default=None, description=_pinned(
        "Measured or vendor-expected STREAM TRIAD bandwidth", "stream_efficiency",
        "peak_bandwidth_gb_s"))
    elementwise_bandwidth_gb_s: PositiveFloat | None = Field(default=None, description=_pinned(
        "Bandwidth element-wise and normalization kernels reach in training (measured), below "
        "STREAM because they are short and irregular", "elementwise_efficiency",
        "peak_bandwidth_gb_s"))
    pointwise_bandwidth_gb_s: PositiveFloat | None = Field(default=None, description=_pinned(
        "Bandwidth PyTorch's vectorized point-wise kernels (add, mul, tanh on contiguous "
        "tensors) reach (measured); a training.eager_ops op whose kernels are these runs at it. "
        "Absent: such an op runs at the element-wise bandwidth", "pointwise_efficiency",
        "peak_bandwidth_gb_s"))
    softmax_bandwidth_gb_s: PositiveFloat | None = Field(default=None, description=_pinned(
        "Bandwidth an unfused scale-mask-softmax over attention scores reaches in training "
        "(measured)", "softmax_efficiency", "peak_bandwidth_gb_s"))
    skinny_gemm_bandwidth_gb_s: PositiveFloat | None = Field(default=None, description=_pinned(
        "Serving: bandwidth a GEMM of few rows (decode's tokens) reaches streaming its weights "
        "(measured)", "skinny_gemm_efficiency", "peak_bandwidth_gb_s"))
    read_efficiency: Fraction | None = Field(
        default=None, json_schema_extra=INFORMATIONAL, description=_efficiency(
            "Read bandwidth the owning chip reaches", "peak_bandwidth_gb_s") + _SHOWN)
    write_efficiency: Fraction | None = Field(
        default=None, json_schema_extra=INFORMATIONAL, description=_efficiency(
            "Write bandwidth the owning chip reaches", "peak_bandwidth_gb_s") + _SHOWN)
    stream_efficiency: Fraction | None = Field(default=None, description=_efficiency(
        "STREAM TRIAD bandwidth", "peak_bandwidth_gb_s"))
    elementwise_efficiency: Fraction | None = Field(default=None, description=_efficiency(
        "Bandwidth element-wise and normalization kernels reach in training",
        "peak_bandwidth_gb_s"))
    pointwise_efficiency: Fraction | None = Field(default=None, description=_efficiency(
        "Bandwidth PyTorch's vectorized point-wise kernels on contiguous tensors reach (absent: "
        "the element-wise bandwidth)", "peak_bandwidth_gb_s"))
    softmax_efficiency: Fraction | None = Field(default=None, description=_efficiency(
        "Bandwidth an unfused scale-mask-softmax reaches in training", "peak_bandwidth_gb_s"))
    skinny_gemm_efficiency: Fraction | None = Field(default=None, description=_efficiency(
        "Serving: bandwidth a memory-bound GEMM of few rows reaches streaming its weights",
        "peak_bandwidth_gb_s"))
    latency_ns: PositiveFloat | None = Field(
        default=None, json_schema_extra=INFORMATIONAL, description="Load latency of the owning "
        "chip (pointer chase): the latency of the memory's link to its chip in the node graph, "
        "subtracted from the host link's remote-load latencies so that a route reproduces "
        "those measurements." + ROUTE,
    )

    _alone = field_validator(*(e for _, e in ALTERNATIVES))(classmethod(_not_both))

    @model_validator(mode="after")
    def _usable_within_capacity(self) -> MemorySpec:
        if self.usable_capacity_gib is not None and self.usable_capacity_gib > self.capacity_gib:
            raise ValueError("usable_capacity_gib must not exceed capacity_gib")
        return self

    @model_validator(mode="after")
    def _efficiencies(self) -> MemorySpec:
        for absolute, efficiency in self.ALTERNATIVES:
            _to_efficiency(self, absolute, efficiency, self.peak_bandwidth_gb_s,
                           "peak_bandwidth_gb_s")
        return self

    @property
    def capacity_bytes(self) -> float:
        """Usable capacity in bytes."""
        return units.gib_to_bytes(self.usable_capacity_gib or self.capacity_gib)

    @property
    def peak_bandwidth_bytes_per_s(self) -> float:
        return units.gb_s_to_bytes_per_s(self.peak_bandwidth_gb_s)

    def rate_bytes_per_s(self, kind: MemoryUse) -> float | None:
        """What ``kind`` of access reaches: its efficiency times the peak bandwidth, in B/s;
        None when the file gives neither the efficiency nor the absolute rate."""
        efficiency: float | None = getattr(self, f"{kind}_efficiency")
        return None if efficiency is None else efficiency * self.peak_bandwidth_bytes_per_s


class GpuComputeSpec(Spec):
    """The GPU's compute: SMs, clocks and dense FLOP per clock per SM, per dtype."""

    ALTERNATIVES = (("peak_tflops", "flops_per_clock_per_sm"),)

    architecture: Name = Field(
        json_schema_extra=INFORMATIONAL, description="Informational: a label; no rate depends "
        "on it (what a GPU computes, and how fast, is flops_per_clock_per_sm).")
    sms: PositiveInt = Field(description="SMs enabled; peak FLOP/s = sms x clock_ghz x "
                             "flops_per_clock_per_sm, and GEMMs run in waves of one tile per SM.")
    clock_ghz: PositiveFloat = Field(description="The clock the dense peaks (and so the measured "
                                     "efficiencies) refer to; peak FLOP/s scale with it.")
    max_clock_ghz: PositiveFloat | None = Field(
        default=None, json_schema_extra=INFORMATIONAL,
        description="Maximum boost clock. Informational: peak FLOP/s derive from "
        "clock_ghz, the clock the datasheet peaks are quoted at; nothing reads the boost clock.",
    )
    l2_cache_mb: PositiveFloat | None = Field(
        default=None, json_schema_extra=INFORMATIONAL,
        description="Informational: the cost model has no cache model; GEMM "
        "efficiencies are measured with the cache in place.",
    )
    copy_engines: PositiveInt | None = Field(
        default=None, json_schema_extra=INFORMATIONAL,
        description="Informational: copies are costed from the host link's "
        "measured h2d_copy / d2h_copy efficiencies, which include the copy engines; their "
        "number is not modelled.",
    )
    peak_tflops: dict[Dtype, PositiveFloat] | None = Field(
        default=None, description="Dense peak TFLOP/s per dtype: a measured absolute rate; "
        "converted at load into flops_per_clock_per_sm of sms x clock_ghz, so it stays fixed "
        "when that capacity is changed — give flops_per_clock_per_sm instead to let it follow "
        "the hardware. Each dtype is given here or in flops_per_clock_per_sm, not both.",
    )
    flops_per_clock_per_sm: dict[Dtype, PositiveFloat] = Field(
        default_factory=dict, description="Dense FLOP per clock per SM, per dtype (Hopper BF16: "
        "4096): peak FLOP/s = this x sms x clock_ghz, so the peak follows sms and clock_ghz "
        "when they are overridden.",
    )
    gemm_efficiency: dict[Dtype, Fraction] = Field(
        default_factory=dict,
        description="Measured fraction of the dense peak that large GEMMs reach, per dtype.",
    )
    attention_efficiency: dict[Dtype, Fraction] = Field(
        default_factory=dict,
        description="Measured fraction of the dense peak fused (flash) attention reaches, "
        "forward and backward together, per dtype: per FLOP the kernel executes, at long "
        "sequences where attention_half_rate_tokens is given.",
    )
    attention_half_rate_tokens: NonNegativeFloat | None = Field(
        default=None,
        description="A fused attention kernel over s keys runs at attention_efficiency x "
        "s / (s + this): its per-tile fixed work (loading Q, writing the output and its "
        "softmax statistics) weighs more at short sequences. Unset: the same rate at every s.",
    )
    attention_head_dim_efficiency: dict[PositiveInt, PositiveFloat] = Field(
        default_factory=dict,
        description="A fused attention kernel's rate at a head dimension relative to the one "
        "attention_efficiency was measured at (listed as 1), measured per head dimension; "
        "between two listed ones it is interpolated in log2 of the head dimension, beyond them "
        "the nearest is taken. Empty: the same rate at every head dimension.",
    )
    causal_attention_diagonal_tokens: NonNegativeFloat | None = Field(
        default=None,
        description="A causal fused attention kernel over s keys skips the tiles above the "
        "diagonal and executes 1/2 + this / s of the full s x s square (the diagonal's "
        "partly masked tiles in full). Unset: a causal kernel costs the whole square.",
    )
    flash2_attention_efficiency: dict[Dtype, Fraction] = Field(
        default_factory=dict,
        description="The same for FlashAttention-2's kernels (the flash-attn 2.x package, "
        "PyTorch SDPA's flash backend, Hugging Face's flash_attention_2), which scenarios "
        "with training.attention flash2 run, where they are slower than the part's best "
        "fused kernel (Hopper, whose TMA and warpgroup MMA FlashAttention-2 does not use); "
        "empty: attention_efficiency's.",
    )
    gemm_min_tile_m: PositiveInt | None = Field(
        default=None, description="Serving: the smallest M a tensor-core GEMM tile covers "
        "(Hopper's warpgroup MMA is m64nNk16): a GEMM of fewer rows (decode's few tokens) "
        "still costs that many rows of tensor-core work, spread over the SMs by split-K. "
        "Needed by serving scenarios.",
    )
    gemm_tile: list[PositiveInt] | None = Field(
        default=None, min_length=2, max_length=2,
        description="Output tile (rows, columns) one SM computes at a time; GEMMs run in waves "
        "of one tile per SM.",
    )
    gemm_k_half: PositiveFloat | dict[Dtype, PositiveFloat] | None = Field(
        default=None, description="Reduction length K at which a GEMM reaches half its "
        "large-K throughput (pipeline fill and epilogue): efficiency scales as K / (K + k_half). "
        "One number for every dtype, or one per dtype (FP8 halves the math per K element, so "
        "the same fixed cost per tile weighs more).",
    )
    gemm_reference_k: PositiveInt | None = Field(
        default=None, description="K of the shape at which gemm_efficiency was measured "
        "(with gemm_reference_shape, its K).",
    )
    gemm_reference_shape: dict[Dtype, list[PositiveInt]] | None = Field(
        default=None, description="Per dtype, the (M, N, K) of the measured shape whose "
        "throughput gemm_efficiency is: a GEMM is costed relative to it by its wave and K "
        "factors, never above it (the best shape of a sweep is the most any shape reached). "
        "Dtypes not listed use gemm_reference_k with full waves.",
    )
    board_power_w: PositiveFloat | None = Field(
        default=None, description="The power the GPU had when its efficiencies were "
        "measured, in W: its board's rated power (TGP), or, in a superchip module, what the "
        "module's measured power left it. Needed for system.node.gpu_power_limit_w and "
        "power_limit_w.",
    )
    fixed_power_w: float | None = Field(
        default=None, ge=0.0, description="Power the board draws whatever its SM clock (HBM, "
        "leakage, I/O), in W: under a board limit below board_power_w the SMs get the rest, and "
        "their dynamic power goes as the clock cubed (voltage scales with the clock), so "
        "compute runs at ((limit - fixed) / (board_power_w - fixed))^(1/3) of its clock. Needed "
        "for system.node.gpu_power_limit_w.",
    )
    gemm_ridge_exponent: float | None = Field(
        default=None, ge=1.0, description="p of the rounded roofline a GEMM follows: its time "
        "is (c^p + m^p)^(1/p) for tensor-core time c and memory time m. Far from the ridge point "
        "that is the longer of the two; near it (mid-sized M in serving, small hidden sizes in "
        "training) the mainloop cannot keep the tensor cores and HBM busy at once, and at c = m "
        "it costs 2^(1/p) times either. Absent: the plain roofline max(c, m).",
    )
    comm_overlap_slowdown: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Fraction by which compute kernels slow "
        "down while communication kernels run beside them on the same GPU.",
    )
    kernel_launch_us: PositiveFloat | None = Field(
        default=None, description="Time between back-to-back kernels on one stream."
    )
    grouped_gemm_gap_us: float | None = Field(
        default=None, ge=0.0, description="GPU time each further GEMM of a grouped GEMM adds "
        "where the framework runs the experts as separate GEMMs (Transformer Engine's "
        "GroupedLinear on Hopper: one cuBLAS GEMM per expert over four streams): a grouped "
        "GEMM takes the time of its tiles sharing the waves plus (groups - 1) times this. "
        "Absent: 0, a single grouped kernel.",
    )
    strided_elementwise_gelem_s: PositiveFloat | None = Field(
        default=None, description="Billions of elements a second PyTorch's non-vectorized "
        "element-wise kernels process (an operand a strided view or a broadcast: RoPE, a bias "
        "add, the copy of a permuted tensor), measured: the SMs' work per element bounds them, "
        "not the memory, so a faster HBM leaves them as they are. A training.eager_ops op whose "
        "kernels are these runs at it (each element a 16-bit read and a 16-bit write), and so "
        "do the unfused cross-entropy's broadcasts over the vocabulary, or at the memory's "
        "STREAM rate where that is slower. Absent: they run at the memory's element-wise rate.",
    )
    speed_spread: float | None = Field(
        default=None, ge=0.0, lt=0.5, description="Relative standard deviation of the "
        "sustained compute speed across GPUs of this part, each held at its power limit by "
        "its own power management (manufacturing variability, not run-to-run noise). A "
        "synchronous step moves at the pace of its slowest GPU: n GPUs compute at the clock "
        "divided by 1 + spread x the expected largest of n standard normal draws. Absent: "
        "identical GPUs.",
    )

    @field_validator("flops_per_clock_per_sm")
    @classmethod
    def _dtype_given_once(cls, value: dict[str, float], info: ValidationInfo) -> dict[str, float]:
        both = [dtype for dtype in value if dtype in (info.data.get("peak_tflops") or {})]
        if both:
            raise ValueError(f"give one of peak_tflops.{both[0]} or "
                             f"flops_per_clock_per_sm.{both[0]}, not both")
        return value

    @model_validator(mode="after")
    def _fixed_below_board(self) -> GpuComputeSpec:
        board, fixed = self.board_power_w, self.fixed_power_w
        if board is not None and fixed is not None and fixed >= board:
            raise ValueError(f"fixed_power_w ({fixed:g} W) must be below board_power_w "
                             f"({board:g} W): the SMs' share of the board is what the fixed "
                             f"power leaves")
        return self

    @model_validator(mode="after")
    def _reference_shapes(self) -> GpuComputeSpec:
        for dtype, shape in (self.gemm_reference_shape or {}).items():
            if len(shape) != 3:
                raise ValueError(f"gemm_reference_shape.{dtype} must be [M, N, K], got {shape}")
        return self

    @model_validator(mode="after")
    def _per_clock(self) -> GpuComputeSpec:
        if not self.peak_tflops and not self.flops_per_clock_per_sm:
            raise ValueError("give one of peak_tflops or flops_per_clock_per_sm")
        clocks = self.sms * self.clock_ghz * units.GHZ
        per_clock = dict(self.flops_per_clock_per_sm)
        for dtype, tflops in (self.peak_tflops or {}).items():
            per_clock[dtype] = units.tflops_to_flops(tflops) / clocks
        self._derive("flops_per_clock_per_sm", per_clock)
        if "fp32" not in per_clock:
            raise ValueError("peak_tflops or flops_per_clock_per_sm must list at least fp32")
        return self

    def peak_flops_per_s(self) -> dict[str, float]:
        """Dense peak FLOP/s per dtype: flops_per_clock_per_sm x sms x clock_ghz."""
        clocks = self.sms * self.clock_ghz * units.GHZ
        return {dtype: per_clock * clocks
                for dtype, per_clock in self.flops_per_clock_per_sm.items()}


class NvlinkSpec(Spec):
    """The GPU's NVLink ports and what NCCL achieves on them."""

    ALTERNATIVES = (("nccl_busbw_gb_s", "nccl_efficiency"),
                    ("nvls_allreduce_busbw_gb_s", "nvls_allreduce_efficiency"),
                    ("alltoall_busbw_gb_s", "alltoall_efficiency"))

    generation: PositiveInt = Field(
        json_schema_extra=INFORMATIONAL, description="Informational: the speed of a "
        "generation is in link_bandwidth_gb_s; nothing reads the number.")
    links: PositiveInt
    link_bandwidth_gb_s: PositiveFloat = Field(
        description="Per link, per direction; links x link_bandwidth_gb_s is the capacity the "
        "NVLink efficiencies multiply."
    )
    nccl_link_bandwidth_gb_s: PositiveFloat | None = Field(
        default=None, json_schema_extra=INFORMATIONAL,
        description="NCCL's modelled per-link bandwidth (its topology tables). "
        "Informational: collectives are costed from nccl_efficiency, measured, not from NCCL's "
        "own model.",
    )
    nccl_busbw_gb_s: PositiveFloat | None = Field(default=None, description=_pinned(
        "Measured NCCL bus bandwidth per GPU (ring, non-SHARP)", "nccl_efficiency",
        "links x link_bandwidth_gb_s"))
    nvls_allreduce_busbw_gb_s: PositiveFloat | None = Field(default=None, description=_pinned(
        "Measured NCCL all-reduce bus bandwidth with NVLink SHARP", "nvls_allreduce_efficiency",
        "links x link_bandwidth_gb_s"))
    nccl_efficiency: Fraction | None = Field(default=None, description=_efficiency(
        "NCCL bus bandwidth per GPU (ring, non-SHARP)", "links x link_bandwidth_gb_s"))
    nvls_allreduce_efficiency: SharpFraction | None = Field(default=None, description=_efficiency(
        "NCCL all-reduce bus bandwidth with NVLink SHARP", "links x link_bandwidth_gb_s",
        "0 < x <= 2: the switch reduces, so it may exceed 1"))
    alltoall_busbw_gb_s: PositiveFloat | None = Field(default=None, description=_pinned(
        "Measured NCCL all-to-all bus bandwidth per GPU", "alltoall_efficiency",
        "links x link_bandwidth_gb_s"))
    alltoall_efficiency: Fraction | None = Field(default=None, description=_efficiency(
        "NCCL all-to-all bus bandwidth per GPU (each member sends a share of its buffer to "
        "every other: the expert-parallel all-to-all dispatcher, Ulysses context parallelism)",
        "links x link_bandwidth_gb_s") + " Absent: nccl_efficiency, the ring's (no all-to-all "
        "measured on this part). DeepEP's NVLink kernels are not NCCL's: they take "
        "nccl_efficiency.")
    nccl_size_ramp: list[list[PositiveFloat]] | None = Field(
        default=None,
        description="Measured share of its large-message bus bandwidth that an NCCL "
        "collective inside one NVLink domain reaches, by the MiB each rank puts on the wire "
        "(an all-reduce of S bytes over n GPUs: 2 (n - 1) / n x S): [[mib, share], ...] in "
        "increasing mib, interpolated in log2(mib), flat beyond both ends. NCCL's tuning "
        "model, whose latencies and picks ghsim follows, assumes the full rate at every size "
        "and corrects only its trees (src/graph/tuning.cc treeCorrectionFactor); nccl-tests "
        "show rings and NVLS reaching half of it at a few MiB and all of it only near a GiB. "
        "Not applied to the LL protocol (its flags ride with every 8-byte line, so no chunk "
        "handshakes idle the links), to collectives that cross the network (no measurement "
        "here), nor to Transformer Engine's userbuffers exchanges (copies, not NCCL). Absent: "
        "the full rate at every size.",
    )
    collective_latency_us: PositiveFloat | None = Field(
        default=None,
        description="Measured per-step latency (alpha) of a small collective over NVLink; "
        "used for pipeline sends and all-to-alls. Ring, tree and NVLS latencies follow NCCL's "
        "own tuning model (ghsim/fabric/nccl.py), which this measurement checks.",
    )

    _alone = field_validator("nccl_efficiency", "nvls_allreduce_efficiency",
                             "alltoall_efficiency")(classmethod(_not_both))

    @field_validator("nccl_size_ramp")
    @classmethod
    def _ramp_pairs(cls, ramp: list[list[float]] | None) -> list[list[float]] | None:
        if ramp is not None:
            if not ramp:
                raise ValueError("give at least one [mib, share] pair, or leave the key out")
            for pair in ramp:
                if len(pair) != 2 or pair[1] > 1:
                    raise ValueError(f"each entry is [mib, share] with 0 < share <= 1, got "
                                     f"{pair}")
            sizes = [pair[0] for pair in ramp]
            if any(b <= a for a, b in itertools.pairwise(sizes)):
                raise ValueError(f"the sizes (MiB) must increase, got {sizes}")
        return ramp

    @model_validator(mode="after")
    def _efficiencies(self) -> NvlinkSpec:
        capacity = self.links * self.link_bandwidth_gb_s
        name = "links x link_bandwidth_gb_s"
        _to_efficiency(self, "nccl_busbw_gb_s", "nccl_efficiency", capacity, name)
        _to_efficiency(self, "nvls_allreduce_busbw_gb_s", "nvls_allreduce_efficiency",
                       capacity, name, most=2.0)
        _to_efficiency(self, "alltoall_busbw_gb_s", "alltoall_efficiency", capacity, name)
        return self

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """All links together, per direction."""
        return units.gb_s_to_bytes_per_s(self.links * self.link_bandwidth_gb_s)

    def nccl_busbw_bytes_per_s(self) -> float | None:
        """NCCL bus bandwidth per GPU (ring, non-SHARP) in B/s, or None if not given."""
        eff = self.nccl_efficiency
        return None if eff is None else eff * self.bandwidth_bytes_per_s

    def nvls_busbw_bytes_per_s(self) -> float | None:
        """NCCL all-reduce bus bandwidth with NVLink SHARP in B/s, or None if not given."""
        eff = self.nvls_allreduce_efficiency
        return None if eff is None else eff * self.bandwidth_bytes_per_s


class HostLinkSpec(Spec):
    """The link between a GPU and its CPU: NVLink-C2C (GH200) or PCIe (DGX)."""

    ALTERNATIVES = tuple((f"{use}_gb_s", f"{use}_efficiency") for use in HOST_LINK_USES)

    type: Literal["c2c", "pcie"]
    generation: PositiveInt | None = Field(
        default=None, json_schema_extra=INFORMATIONAL,
        description="Informational: the PCIe generation's speed is in "
        "bandwidth_gb_s; nothing reads the number.",
    )
    bandwidth_gb_s: PositiveFloat = Field(
        description="Peak, per direction: the capacity every *_efficiency of this link "
        "multiplies (and of unified-memory migration)."
    )
    coherent: bool = Field(
        default=False, description="Whether the link is hardware-coherent (ATS): the GPU "
        "reads and writes system memory in place, so unified_memory.allocator system needs it "
        "and access-counter migration defaults to on with it. Routes follow the link type (a "
        "GPU forwards between NVLink and its host link over c2c, never over pcie).",
    )
    h2d_copy_gb_s: PositiveFloat | None = Field(default=None, description=_pinned(
        "Measured host-to-device memcpy", "h2d_copy_efficiency", "bandwidth_gb_s"))
    d2h_copy_gb_s: PositiveFloat | None = Field(default=None, description=_pinned(
        "Measured device-to-host memcpy", "d2h_copy_efficiency", "bandwidth_gb_s"))
    gpu_read_host_gb_s: PositiveFloat | None = Field(default=None, description=_pinned(
        "Measured GPU kernel reading host memory in place", "gpu_read_host_efficiency",
        "bandwidth_gb_s"))
    gpu_write_host_gb_s: PositiveFloat | None = Field(default=None, description=_pinned(
        "Measured GPU kernel writing host memory in place", "gpu_write_host_efficiency",
        "bandwidth_gb_s"))
    cpu_read_device_gb_s: PositiveFloat | None = Field(default=None, description=_pinned(
        "Measured CPU reading GPU memory in place", "cpu_read_device_efficiency",
        "bandwidth_gb_s"))
    cpu_write_device_gb_s: PositiveFloat | None = Field(default=None, description=_pinned(
        "Measured CPU writing GPU memory in place", "cpu_write_device_efficiency",
        "bandwidth_gb_s"))
    h2d_copy_efficiency: Fraction | None = Field(default=None, description=_efficiency(
        "Host-to-device memcpy", "bandwidth_gb_s"))
    d2h_copy_efficiency: Fraction | None = Field(default=None, description=_efficiency(
        "Device-to-host memcpy", "bandwidth_gb_s"))
    gpu_read_host_efficiency: Fraction | None = Field(default=None, description=_efficiency(
        "GPU kernel reading host memory in place", "bandwidth_gb_s"))
    gpu_write_host_efficiency: Fraction | None = Field(default=None, description=_efficiency(
        "GPU kernel writing host memory in place", "bandwidth_gb_s"))
    cpu_read_device_efficiency: Fraction | None = Field(default=None, description=_efficiency(
        "CPU reading GPU memory in place", "bandwidth_gb_s"))
    cpu_write_device_efficiency: Fraction | None = Field(default=None, description=_efficiency(
        "CPU writing GPU memory in place", "bandwidth_gb_s"))
    gpu_host_latency_ns: PositiveFloat | None = Field(
        default=None, json_schema_extra=INFORMATIONAL, description="GPU load from host "
        "memory: the CPU -> GPU link's latency in the node graph is this less the host "
        "memory's latency_ns." + ROUTE,
    )
    cpu_device_latency_ns: PositiveFloat | None = Field(
        default=None, json_schema_extra=INFORMATIONAL, description="CPU load from GPU "
        "memory: the GPU -> CPU link's latency in the node graph is this less the GPU "
        "memory's latency_ns." + ROUTE,
    )

    _alone = field_validator(*(e for _, e in ALTERNATIVES))(classmethod(_not_both))

    @model_validator(mode="after")
    def _efficiencies(self) -> HostLinkSpec:
        for absolute, efficiency in self.ALTERNATIVES:
            _to_efficiency(self, absolute, efficiency, self.bandwidth_gb_s, "bandwidth_gb_s")
        return self

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return units.gb_s_to_bytes_per_s(self.bandwidth_gb_s)

    def rate_bytes_per_s(self, kind: HostLinkUse) -> float | None:
        """What ``kind`` of transfer reaches: its efficiency times the link's bandwidth per
        direction, in B/s; None when the file gives neither the efficiency nor the rate."""
        efficiency: float | None = getattr(self, f"{kind}_efficiency")
        return None if efficiency is None else efficiency * self.bandwidth_bytes_per_s


class UnifiedMemorySpec(Spec):
    """How the driver manages unified memory on this GPU: the page sizes, fault-driven migration
    of managed memory (``cudaMallocManaged``) and, on ATS systems, what system-allocated memory
    (``malloc``) does: read in place over the host link until access counters migrate it."""

    ALTERNATIVES = (("migration_bandwidth_gb_s", "migration_efficiency"),)

    gpu_page_mib: PositiveFloat = Field(description="GPU page-table page size: the unit the "
                                        "page model migrates, places and counts accesses in.")
    system_page_kib: PositiveFloat = Field(
        json_schema_extra=INFORMATIONAL,
        description="CPU (system) page size. Informational: migration moves GPU pages "
        "(gpu_page_mib); nothing reads the system page size."
    )
    allocator: Literal["managed", "system"] = Field(
        default="managed", description="How offload.strategy unified_memory allocates: managed "
        "(cudaMallocManaged: a kernel touching a page in host memory faults and migrates it at "
        "migration_bandwidth_gb_s, evicting the least recently used pages when HBM is full) or "
        "system (malloc on an ATS system, host_link.coherent: pages stay where they were first "
        "touched, the GPU reads and writes host memory in place at host_link's gpu_read_host / "
        "gpu_write_host rates, access counters may migrate hot regions to HBM, and HBM pages "
        "stream at system_allocated_hbm_efficiency). A property of the program rather than of "
        "the chip, kept here beside the driver settings; a scenario picks one with --set "
        "system.node.gpu.gpu.unified_memory.allocator=system.",
    )
    access_counter_migration: bool | None = Field(
        default=None, description="Whether access counters migrate hot regions of "
        "system-allocated memory to HBM (the nvidia-uvm parameter "
        "uvm_perf_access_counter_mimc_migration_enable). Unset: the driver's default, on where "
        "the host link is coherent (ATS) and off otherwise. Alps turns it off; a scenario can "
        "with --set system.node.gpu.gpu.unified_memory.access_counter_migration=false.",
    )
    access_counter_threshold: Annotated[int, Field(ge=1, le=65535)] | None = Field(
        default=None, description="Remote accesses to one gpu_page_mib region of host memory "
        "after which access counters migrate it to HBM, if HBM has room (allocator system, "
        "access_counter_migration on); counts carry over the step and restart when a region "
        "migrates.",
    )
    access_counter_bytes_per_access: PositiveFloat | None = Field(
        default=None, description="Bytes of one counted remote access: a kernel pass over a "
        "region of host memory counts gpu_page_mib / this accesses toward "
        "access_counter_threshold (reads and writes alike).",
    )
    fault_batch_us: PositiveFloat | None = Field(
        default=None, description="Cost of servicing one batch of GPU page faults, charged "
        "before the pages move, on top of migration_bandwidth_gb_s. Give it only where the "
        "migration rate is a copy rate that leaves fault service out; a measured end-to-end "
        "rate of faulted migration (GH200) already includes it. Unset: nothing extra.",
    )
    fault_batch_pages: PositiveInt | None = Field(
        default=None, description="GPU pages serviced per fault batch: a migration of n faulted "
        "pages costs ceil(n / this) x fault_batch_us. Needed with fault_batch_us.",
    )
    migration_bandwidth_gb_s: PositiveFloat | None = Field(default=None, description=_pinned(
        "Throughput of fault-driven migration of managed memory, per direction, fault service "
        "included (a migration is a flow capped at this rate on the host link's copy path, so "
        "it takes only its own share of the link)", "migration_efficiency",
        "the GPU's host_link.bandwidth_gb_s"))
    migration_efficiency: Fraction | None = Field(default=None, description=_efficiency(
        "Throughput of fault-driven migration of managed memory, per direction, fault service "
        "included", "the GPU's host_link.bandwidth_gb_s"))
    system_allocated_hbm_efficiency: Fraction | None = Field(
        default=None, description="Bandwidth GPU kernels reach on system-allocated memory "
        "resident in HBM, as a fraction of what they reach on cudaMalloc memory (0 < x <= 1): "
        "with allocator system every kernel's HBM traffic is costed at this fraction of its "
        "rate. Needed for allocator system.",
    )

    _alone = field_validator("migration_efficiency")(classmethod(_not_both))

    @model_validator(mode="after")
    def _one_rate(self) -> UnifiedMemorySpec:
        if self.migration_bandwidth_gb_s is None and self.migration_efficiency is None:
            raise ValueError("give one of migration_bandwidth_gb_s or migration_efficiency")
        if self.fault_batch_us is not None and self.fault_batch_pages is None:
            raise ValueError("fault_batch_us needs fault_batch_pages (pages per batch)")
        return self


class GpuSpec(Spec):
    """Everything on the GPU side of a part file."""

    compute: GpuComputeSpec
    memory: MemorySpec
    nvlink: NvlinkSpec | None = None
    host_link: HostLinkSpec
    unified_memory: UnifiedMemorySpec | None = None

    @model_validator(mode="after")
    def _migration_efficiency(self) -> GpuSpec:
        um = self.unified_memory
        if um is not None:
            _to_efficiency(um, "migration_bandwidth_gb_s", "migration_efficiency",
                           self.host_link.bandwidth_gb_s, "host_link.bandwidth_gb_s")
        return self

    def strided_elements_per_s(self) -> float | None:
        """Elements a second PyTorch's non-vectorized element-wise kernels process (the measured
        compute.strided_elementwise_gelem_s), None where the part gives no rate."""
        measured = self.compute.strided_elementwise_gelem_s
        return None if measured is None else measured * 1e9

    def strided_bytes_per_s(self) -> float | None:
        """What PyTorch's non-vectorized element-wise kernels move: the measured
        compute.strided_elementwise_gelem_s at a 16-bit read and a 16-bit write an element, or
        the memory's STREAM rate where that is lower; the element-wise rate where the part gives
        none (None without either)."""
        elements = self.strided_elements_per_s()
        if elements is None:
            return self.memory.rate_bytes_per_s("elementwise")
        rate = elements * STRIDED_BYTES_PER_ELEMENT
        stream = self.memory.rate_bytes_per_s("stream")
        return min(rate, stream) if stream is not None else rate

    def migration_bytes_per_s(self) -> float | None:
        """Fault-driven migration of managed memory, per direction and fault service included:
        its efficiency times the host link's bandwidth, in B/s; None without a unified_memory
        section."""
        um = self.unified_memory
        if um is None or um.migration_efficiency is None:
            return None
        return um.migration_efficiency * self.host_link.bandwidth_bytes_per_s

    def migration_by_access_counters(self) -> bool:
        """Whether access counters migrate hot regions of system-allocated memory to HBM: as
        unified_memory.access_counter_migration says, else the driver's default (on with a
        coherent, ATS host link; FACTS.md T1#35)."""
        um = self.unified_memory
        if um is None:
            return False
        if um.access_counter_migration is not None:
            return um.access_counter_migration
        return self.host_link.coherent


class CpuComputeSpec(Spec):
    """A CPU socket's cores, clocks and per-core FLOP per cycle."""

    architecture: Name = Field(json_schema_extra=INFORMATIONAL,
                               description="Informational: a label; no rate depends on it.")
    cores: PositiveInt
    clock_ghz: PositiveFloat
    max_clock_ghz: PositiveFloat | None = Field(
        default=None, json_schema_extra=INFORMATIONAL,
        description="Maximum boost clock. Informational: peak FLOP/s derive "
        "from clock_ghz; nothing reads the boost clock.",
    )
    flops_per_cycle_per_core: dict[Literal["fp64", "fp32"], PositiveFloat]
    l3_cache_mb: PositiveFloat | None = Field(
        default=None, json_schema_extra=INFORMATIONAL,
        description="Informational: there is no cache model; CPU work is costed "
        "from peak FLOP/s, per-core memory rates and the memory's STREAM bandwidth.",
    )
    core_read_gb_s: PositiveFloat | None = Field(
        default=None, description="What one core reaches reading its local memory (one "
        "thread streaming, measured): a core keeps only so many cache-line misses in flight. "
        "A host op on c cores (the optimizer of an offload strategy, offload.cpu_cores) "
        "streams its reads at most c times this, and never faster than the memory's stream "
        "rate. Absent: core_write_gb_s bounds reads too; with neither, a share of the "
        "cores reaches the memory's stream rate.",
    )
    core_write_gb_s: PositiveFloat | None = Field(
        default=None, description="What one core reaches writing its local memory (one "
        "thread streaming, measured); with core_read_gb_s it bounds a host op on few cores. "
        "Absent: core_read_gb_s bounds writes too.",
    )
    kernel_issue_us: float | None = Field(
        default=None, ge=0.0, description="CPU time one core spends, in a PyTorch training "
        "framework, to issue one GPU kernel: the Python module call, dispatcher, autograd "
        "bookkeeping and launch, measured per call. The framework thread issues a step's "
        "kernels one after another ahead of the GPU, so when kernels are shorter than this "
        "the GPU waits for its host (training.cuda_graphs replays a captured op with one "
        "launch). Absent or 0: the host never holds the GPU back.",
    )
    backward_issue_ratio: float | None = Field(
        default=None, ge=1.0, description="The framework's CPU time to issue a backward "
        "kernel over its time to issue a forward one (kernel_issue_us): autograd calls each "
        "module's backward from its engine thread, unpacks what the forward saved and runs "
        "the gradient hooks. Recomputed forward kernels in the backward pass cost a forward "
        "kernel's time. Absent: backward kernels cost what forward ones do.",
    )
    kernel_launch_us: float | None = Field(
        default=None, ge=0.0, description="CPU time of one more kernel launch issued from C++ "
        "inside an op that launches several (Transformer Engine's grouped GEMM on Hopper loops "
        "over the experts, one cuBLAS GEMM each): the driver's launch without the Python "
        "module call. Absent: such launches are free on the host.",
    )
    module_power_w: PositiveFloat | None = Field(
        default=None, description="On a superchip module (GH200), the power this CPU side "
        "(cores, LPDDR5X, the module's regulators) draws while its GPU trains, in W. A "
        "module cap (system.node.power_limit_w) serves it first, as the firmware serves Grace "
        "before Hopper, and the GPU gets the rest as its board limit. Absent: ghsim turns no "
        "module cap into a GPU limit.",
    )
    serving_step_us: float | None = Field(
        default=None, ge=0.0, description="Serving: host time per engine iteration outside "
        "the GPU's work (scheduling the batch, collecting the sampled tokens), serialised "
        "with the GPU unless the engine overlaps it (inference.overlap_host). Needed by "
        "serving scenarios that do not give inference.host_step_us.",
    )
    serving_request_us: float | None = Field(
        default=None, ge=0.0, description="Serving: host time per running request per "
        "iteration (its bookkeeping, detokenisation and streaming of the new token).",
    )

    def peak_flops(self, dtype: Literal["fp64", "fp32"]) -> float:
        """Peak FLOP/s of the socket at the base clock."""
        return self.cores * self.clock_ghz * units.GHZ * self.flops_per_cycle_per_core[dtype]


class CpuSpec(Spec):
    """A CPU socket and the memory it owns."""

    compute: CpuComputeSpec
    memory: MemorySpec


class NicSpec(Spec):
    """A network adapter and what collectives achieve through it."""

    ALTERNATIVES = (("nccl_busbw_gb_s", "nccl_efficiency"),)

    model: Name
    protocol: Literal["infiniband", "ethernet", "slingshot"] = Field(
        json_schema_extra=INFORMATIONAL, description="Informational: a NIC's rate is "
        "line_rate_gbit_s times its measured NCCL efficiency, and its latency "
        "collective_latency_us, whatever the protocol.")
    line_rate_gbit_s: PositiveFloat = Field(
        description="Per direction; the capacity nccl_efficiency multiplies (in bytes: / 8)."
    )
    nccl_busbw_gb_s: PositiveFloat | None = Field(default=None, description=_pinned(
        "Measured NCCL bus bandwidth per NIC", "nccl_efficiency", "line_rate_gbit_s"))
    nccl_efficiency: Fraction | None = Field(default=None, description=_efficiency(
        "NCCL bus bandwidth per NIC", "line_rate_gbit_s"))
    collective_latency_us: PositiveFloat | None = Field(
        default=None, description="Measured per-step latency (alpha) of a small collective "
        "across nodes; used for pipeline sends and all-to-alls (ring, tree and NVLS latencies "
        "follow NCCL's tuning model, ghsim/fabric/nccl.py)."
    )

    _alone = field_validator("nccl_efficiency")(classmethod(_not_both))

    @model_validator(mode="after")
    def _efficiencies(self) -> NicSpec:
        line_gb_s = self.line_rate_gbit_s * units.GBIT_S / units.GB_S
        _to_efficiency(self, "nccl_busbw_gb_s", "nccl_efficiency", line_gb_s,
                       "line_rate_gbit_s / 8")
        return self

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.line_rate_gbit_s * units.GBIT_S

    def nccl_busbw_bytes_per_s(self) -> float | None:
        """NCCL bus bandwidth per NIC in B/s, or None if not given."""
        eff = self.nccl_efficiency
        return None if eff is None else eff * self.bandwidth_bytes_per_s


class HardwareSpec(DocumentSpec):
    """``kind: hardware``: exactly one of ``gpu``, ``cpu`` or ``nic``."""

    KIND = "hardware"

    name: Name
    type: Literal["gpu", "cpu", "nic"]
    gpu: GpuSpec | None = None
    cpu: CpuSpec | None = None
    nic: NicSpec | None = None
    sources: Sources = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_section(self) -> HardwareSpec:
        given = [section for section in ("gpu", "cpu", "nic") if getattr(self, section) is not None]
        if given != [self.type]:
            raise ValueError(
                f"type {self.type!r} needs exactly the section {self.type!r}, got {given or 'none'}"
            )
        return self
