"""GPU kernel costs: a roofline with measured efficiencies and wave quantization.

Peaks are SMs x clock x FLOP per clock per SM, and bandwidths fractions of the HBM's peak, so
a lower clock or slower memory moves every kernel. A GEMM's throughput is set relative to the
measured best shape of a sweep (``gemm_efficiency`` at ``gemm_reference_shape``) by two factors
that shape sweeps show: the wave efficiency (the fraction of tile slots doing useful work when
the output's tiles are spread one per SM in waves: tile and wave quantization, and skinny
outputs that leave SMs idle) and the reduction-length factor ``K / (K + k_half)`` (pipeline fill
and epilogue per tile, heavier for FP8); it never exceeds the best shape, the most any shape of
the sweep reached (large GEMMs plateau there, bounded by power and clocks rather than by their
shape). A fused attention kernel executes the tiles of its causal mask on and below the diagonal
(``1/2 + causal_attention_diagonal_tokens / s`` of the square Megatron counts) at ``peak x
attention_efficiency x s / (s + attention_half_rate_tokens)``, times a measured factor for its
head dimension; everything is also
bounded by HBM traffic at the achievable (STREAM) bandwidth, which is what skinny GEMMs hit, and
near the ridge point, where the two are alike, the roofline is rounded: (c^p + m^p)^(1/p) with a
measured ``gemm_ridge_exponent``; element-wise kernels are memory-bound (the loss's plain
streaming passes at the streaming rate, normalization and fused activations at the measured
element-wise rate, PyTorch's vectorized point-wise kernels at theirs); PyTorch's
non-vectorized kernels, whose operands are strided views or broadcasts, are bound by the SMs'
work per element instead, and process a measured number of elements a second whatever the HBM.
Each kernel costs the launch gap on top.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from ghsim.config.schema import HardwareSpec, NodeSpec
from ghsim.config.schema.scenario import Attention
from ghsim.errors import ConfigError
from ghsim.interpolate import log2_interpolate
from ghsim.stats import expected_largest_normal
from ghsim.workload.ir import Kernel

_FALLBACK = {"fp16": "bf16", "bf16": "fp16"}


@dataclass(frozen=True)
class GpuCostModel:
    """What the cost of a kernel depends on, in SI units."""

    part: str
    peak_flops: dict[str, float]
    gemm_efficiency: dict[str, float]
    attention_efficiency: dict[str, float]
    hbm_bytes_per_s: float
    elementwise_bytes_per_s: float
    pointwise_bytes_per_s: float
    """PyTorch's vectorized point-wise kernels (klass ``pointwise``): the part's
    ``pointwise_efficiency``, or the element-wise rate where it gives none."""
    strided_elements_per_s: float
    """PyTorch's non-vectorized element-wise kernels (klass ``strided``): the part's
    ``strided_elementwise_gelem_s`` (0 where it gives none: such kernels then stream at the
    element-wise rate)."""
    softmax_bytes_per_s: float
    sms: int
    tile: tuple[int, int]
    launch_s: float
    k_half: dict[str, float]
    """Per dtype (``"*"``: every dtype not listed)."""
    reference: dict[str, tuple[int, int, int]]
    """Per dtype (``"*"``: the rest): the (M, N, K) at which gemm_efficiency was measured; M
    and N of 0 stand for full waves."""
    overlap_slowdown: float
    """Fraction by which kernels slow down while communication runs beside them."""
    ridge_exponent: float = math.inf
    """p of the rounded roofline (c^p + m^p)^(1/p) of a GEMM (infinite: max(c, m))."""
    clock_scale: float = 1.0
    """The sustained clock over the part's own: ``peak_flops`` are scaled by it."""
    grouped_gap_s: float = 0.0
    """GPU time each further GEMM of a grouped GEMM adds (its experts run as separate GEMMs)."""
    attention_half_rate_tokens: float = 0.0
    """A fused attention kernel over s keys runs at ``s / (s + this)`` of its long-sequence
    rate (0: the same rate at every s)."""
    causal_diagonal_tokens: float | None = None
    """A causal kernel over s keys executes ``1/2 + this / s`` of the full square (None: all
    of it)."""
    attention_head_dims: tuple[tuple[int, float], ...] = ()
    """(head dimension, rate relative to attention_efficiency's), in increasing head dimension
    (empty: the same rate at every head dimension)."""

    def attention_head_dim_factor(self, head_dim: int) -> float:
        """The fused attention rate at ``head_dim`` relative to ``attention_efficiency``'s:
        interpolated in log2 of the head dimension between the measured ones, the nearest
        beyond them."""
        points = self.attention_head_dims
        if not points or head_dim <= 0:
            return 1.0
        return log2_interpolate(head_dim, points)

    def _lookup(self, table: dict[str, float], dtype: str, what: str) -> float:
        value = table.get(dtype, table.get(_FALLBACK.get(dtype, "")))
        if value is None:
            hint = ("; this GPU has no FP8 tensor cores: set training.precision to bf16"
                    if dtype == "fp8" else "")
            raise ConfigError(self.part, f"gpu.compute.{what}",
                              f"has no entry for {dtype!r}, which this scenario runs{hint}")
        return value

    def peak_of(self, dtype: str) -> float:
        """Dense tensor-core FLOP/s in ``dtype`` (a :class:`ConfigError` if the GPU has none)."""
        return self._lookup(self.peak_flops, dtype, "flops_per_clock_per_sm")

    def rated_peak_of(self, dtype: str) -> float:
        """Dense tensor-core FLOP/s in ``dtype`` at the part's own clock: the datasheet peak
        MFU is measured against, whatever clock a cap or a setting leaves."""
        return self.peak_of(dtype) / self.clock_scale

    def gemm_efficiency_of(self, dtype: str) -> float:
        """The measured best-shape GEMM efficiency in ``dtype``."""
        return self._lookup(self.gemm_efficiency, dtype, "gemm_efficiency")

    def attention_efficiency_of(self, dtype: str) -> float:
        """The measured fused-attention efficiency in ``dtype``."""
        return self._lookup(self.attention_efficiency, dtype, "attention_efficiency")

    def reference_k(self, dtype: str) -> int:
        """K of the shape ``gemm_efficiency`` was measured at, in ``dtype``."""
        return self._reference(dtype)[2]

    def wave_efficiency(self, m: int, n: int, groups: int = 1, spread_m: float = 0.0) -> float:
        """Useful fraction of the tile slots ``groups`` GEMMs with an ``m x n`` output each
        occupy when their tiles share the waves, as a grouped GEMM schedules them (1 for ``m``
        or ``n`` of 0: full waves). With ``spread_m``, each GEMM's M is a normal draw around
        ``m`` and pays the tiles it is expected to need (:func:`expected_tiles`)."""
        if m <= 0 or n <= 0:
            return 1.0
        tm, tn = self.tile
        tiles = groups * expected_tiles(m, spread_m, tm) * math.ceil(n / tn)
        waves = math.ceil(tiles / self.sms)
        return (groups * m * n) / (waves * self.sms * tm * tn)

    def _k_half(self, dtype: str) -> float:
        return self.k_half.get(dtype, self.k_half.get(_FALLBACK.get(dtype, ""),
                                                        self.k_half["*"]))

    def _reference(self, dtype: str) -> tuple[int, int, int]:
        return self.reference.get(dtype, self.reference.get(_FALLBACK.get(dtype, ""),
                                                            self.reference["*"]))

    def k_factor(self, k: int, dtype: str = "bf16") -> float:
        """``k / (k + k_half)``: the share of a tile's time spent in its main loop."""
        return k / (k + self._k_half(dtype))

    def shape_efficiency(self, m: int, n: int, k: int, dtype: str = "bf16",
                         groups: int = 1, spread_m: float = 0.0) -> float:
        """Throughput of an ``m x n x k`` GEMM (``groups`` of them, grouped, their M spread by
        ``spread_m``) relative to the measured reference shape's: the ratio of their wave and
        K factors, at most 1."""
        rm, rn, rk = self._reference(dtype)
        this = self.wave_efficiency(m, n, groups, spread_m) * self.k_factor(k, dtype)
        return min(1.0, this / (self.wave_efficiency(rm, rn) * self.k_factor(rk, dtype)))

    def roofline_s(self, compute_s: float, memory_s: float) -> float:
        """A GEMM of ``compute_s`` on the tensor cores and ``memory_s`` of HBM traffic on the
        rounded roofline: the longer of the two far from the ridge point, ``2^(1/p)`` times
        either at it (``p = ridge_exponent``)."""
        longer, shorter = max(compute_s, memory_s), min(compute_s, memory_s)
        if math.isinf(self.ridge_exponent) or longer <= 0.0:
            return longer
        p = self.ridge_exponent
        return float(longer * (1.0 + (shorter / longer) ** p) ** (1.0 / p))

    def gemm_s(self, kernel: Kernel) -> float:
        m, n, k = kernel.shape
        peak = self.peak_of(kernel.dtype)
        efficiency = self.gemm_efficiency_of(kernel.dtype)
        efficiency *= self.shape_efficiency(m, n, k, kernel.dtype, kernel.groups,
                                            kernel.spread_m)
        # An empty GEMM (no rows, columns or reduction: a rank or expert given no tokens)
        # computes nothing; its shape factor is 0, so it is not divided by.
        compute = kernel.flops / (peak * efficiency) if kernel.flops > 0 else 0.0
        return self.roofline_s(compute, kernel.bytes / self.hbm_bytes_per_s)

    def attention_rate(self, dtype: str, keys: int, head_dim: int = 0) -> float:
        """FLOP/s a fused attention kernel over ``keys`` keys (0: long sequences) at
        ``head_dim`` (0: the measured one) executes."""
        rate = self.peak_of(dtype) * self.attention_efficiency_of(dtype)
        rate *= self.attention_head_dim_factor(head_dim)
        return rate * keys / (keys + self.attention_half_rate_tokens) if keys > 0 else rate

    def causal_fraction(self, keys: int) -> float:
        """The share of the full ``keys`` x ``keys`` square a causal kernel executes: the
        tiles on and below the diagonal (1 where the part does not say)."""
        if self.causal_diagonal_tokens is None or keys <= 0:
            return 1.0
        return min(1.0, 0.5 + self.causal_diagonal_tokens / keys)

    def attention_s(self, kernel: Kernel) -> float:
        """A causal fused attention kernel (``shape``: queries, the keys each kernel sees,
        width, head dimension): ``flops`` are the full square's (Megatron's count); it
        executes the tiles on and below the diagonal, at a rate that rises with the keys."""
        keys = kernel.shape[1] if len(kernel.shape) > 1 else 0
        head_dim = kernel.shape[3] if len(kernel.shape) > 3 else 0
        executed = kernel.flops * self.causal_fraction(keys)
        return max(executed / self.attention_rate(kernel.dtype, keys, head_dim),
                   kernel.bytes / self.hbm_bytes_per_s)

    def kernel_s(self, kernel: Kernel) -> float:
        """Seconds one kernel step takes on an otherwise idle GPU: its work, the launch gap
        of each kernel it launches one after another, and the measured gap of each further
        GEMM of a grouped GEMM."""
        if kernel.klass == "gemm":
            busy = self.gemm_s(kernel)
        elif kernel.klass == "attention":
            busy = self.attention_s(kernel)
        elif kernel.klass in ("stream", "loss"):
            busy = kernel.bytes / self.hbm_bytes_per_s
        elif kernel.klass == "softmax":
            busy = kernel.bytes / self.softmax_bytes_per_s
        elif kernel.klass == "pointwise":
            busy = kernel.bytes / self.pointwise_bytes_per_s
        elif kernel.klass == "strided":
            busy = self.strided_s(kernel)
        else:
            busy = kernel.bytes / self.elementwise_bytes_per_s
        return (busy + self.launch_s * kernel.kernels
                + self.grouped_gap_s * (kernel.groups - 1))

    def strided_s(self, kernel: Kernel) -> float:
        """A non-vectorized element-wise kernel: its elements at the measured element rate, or
        its bytes at the STREAM rate where that takes longer; its bytes at the element-wise
        rate on a part that gives no element rate."""
        if not self.strided_elements_per_s:
            return kernel.bytes / self.elementwise_bytes_per_s
        return max(kernel.elements / self.strided_elements_per_s,
                   kernel.bytes / self.hbm_bytes_per_s)


def expected_tiles(m: float, spread: float, tile: int) -> float:
    """Row tiles a GEMM of ``m`` rows needs, ``ceil(m / tile)``; for ``m`` a normal draw of
    standard deviation ``spread`` (an expert's random share of the tokens), their expectation
    ``sum over j >= 0 of P(M > j tile)``, M cut at zero."""
    if spread <= 0.0:
        return float(math.ceil(m / tile))
    dist = NormalDist(m, spread)
    last = math.ceil((m + 8.0 * spread) / tile)
    return sum(1.0 - dist.cdf(j * tile) for j in range(last + 1))


def gpu_cost_model(part: HardwareSpec, clock_ghz: float | None = None,
                   grouped_gap_us: float | None = None,
                   attention: Attention = "flash") -> GpuCostModel:
    """The cost model of a GPU part (at a sustained SM clock of ``clock_ghz``, if given, instead
    of the clock its peaks refer to; with ``grouped_gap_us``, the gap each further GEMM of a
    grouped GEMM adds under the run's software, instead of the part's measured one; with
    ``attention`` ``flash2``, FlashAttention-2's efficiency where the part gives one), or a
    :class:`ConfigError` naming what it lacks."""
    gpu = part.gpu
    if gpu is None:
        raise ConfigError(part.name, "gpu", "expected a GPU part")
    compute, memory = gpu.compute, gpu.memory
    rates = {use: memory.rate_bytes_per_s(use)
             for use in ("stream", "elementwise", "pointwise", "softmax")}
    missing = [
        key for key, value in (
            ("gpu.compute.gemm_efficiency", compute.gemm_efficiency),
            ("gpu.compute.attention_efficiency", compute.attention_efficiency),
            ("gpu.compute.gemm_tile", compute.gemm_tile),
            ("gpu.compute.kernel_launch_us", compute.kernel_launch_us),
            ("gpu.compute.gemm_k_half", compute.gemm_k_half),
            ("gpu.compute.gemm_reference_k", compute.gemm_reference_k),
            ("gpu.compute.comm_overlap_slowdown", compute.comm_overlap_slowdown),
            ("gpu.memory.stream_efficiency", rates["stream"]),
            ("gpu.memory.elementwise_efficiency", rates["elementwise"]),
            ("gpu.memory.softmax_efficiency", rates["softmax"]),
        ) if value is None or value == {}  # 0 is a value (no slowdown beside communication)
    ]
    if missing:
        raise ConfigError(part.name, missing[0], "is needed to simulate this GPU (with a source)")
    assert compute.gemm_tile and compute.kernel_launch_us
    assert compute.gemm_k_half and compute.gemm_reference_k
    k_half: dict[str, float] = (
        {str(d): v for d, v in compute.gemm_k_half.items()}
        if isinstance(compute.gemm_k_half, dict) else {"*": compute.gemm_k_half})
    if "*" not in k_half:
        k_half["*"] = max(k_half.values())  # a dtype not listed: the heavier fixed cost
    reference = {str(d): (s[0], s[1], s[2])
                 for d, s in (compute.gemm_reference_shape or {}).items()}
    reference["*"] = (0, 0, compute.gemm_reference_k)
    scale = clock_ghz / compute.clock_ghz if clock_ghz else 1.0
    attention_efficiency = dict(compute.attention_efficiency)
    if attention == "flash2":  # FlashAttention-2's own where the part gives it
        attention_efficiency.update(compute.flash2_attention_efficiency)
    return GpuCostModel(
        part=part.name,
        peak_flops={dtype: flops * scale for dtype, flops in compute.peak_flops_per_s().items()},
        gemm_efficiency={str(k): v for k, v in compute.gemm_efficiency.items()},
        attention_efficiency={str(k): v for k, v in attention_efficiency.items()},
        hbm_bytes_per_s=rates["stream"] or 0.0,
        elementwise_bytes_per_s=rates["elementwise"] or 0.0,
        pointwise_bytes_per_s=rates["pointwise"] or rates["elementwise"] or 0.0,
        strided_elements_per_s=gpu.strided_elements_per_s() or 0.0,
        softmax_bytes_per_s=rates["softmax"] or 0.0,
        sms=compute.sms,
        tile=(compute.gemm_tile[0], compute.gemm_tile[1]),
        launch_s=compute.kernel_launch_us * 1e-6,
        k_half={str(d): float(v) for d, v in k_half.items()},
        reference=reference,
        overlap_slowdown=compute.comm_overlap_slowdown or 0.0,
        ridge_exponent=compute.gemm_ridge_exponent or math.inf,
        clock_scale=scale,
        grouped_gap_s=((compute.grouped_gemm_gap_us or 0.0) if grouped_gap_us is None
                       else grouped_gap_us) * 1e-6,
        attention_half_rate_tokens=compute.attention_half_rate_tokens or 0.0,
        causal_diagonal_tokens=compute.causal_attention_diagonal_tokens,
        attention_head_dims=tuple(sorted(compute.attention_head_dim_efficiency.items())),
    )


def _cpu_side_w(node: NodeSpec) -> float | None:
    """What the CPU side of the node's superchip module takes first from a module cap
    (``cpu.compute.module_power_w``), None when its CPU part does not say."""
    return node.cpu.cpu.compute.module_power_w if node.cpu.cpu else None


def gpu_power_limit_w(node: NodeSpec, source: str = "scenario") -> float | None:
    """The power each GPU of ``node`` may draw, in W: its board limit ``gpu_power_limit_w``,
    or what a module cap ``power_limit_w`` leaves once the CPU side of the superchip has
    taken its ``module_power_w`` (Grace is served first), the lower of the two when both
    apply; a given sustained clock ``gpu_clock_ghz`` already says what the module cap leaves.
    None when nothing limits the GPU below the power its efficiencies refer to."""
    limits = [node.gpu_power_limit_w] if node.gpu_power_limit_w is not None else []
    cpu_side = _cpu_side_w(node)
    if node.power_limit_w is not None and cpu_side is not None and node.gpu_clock_ghz is None:
        if node.power_limit_w <= cpu_side:
            raise ConfigError(source, "system.node.power_limit_w",
                              f"is {node.power_limit_w:g} W: expected more than the "
                              f"{cpu_side:g} W the {node.cpu.name} side of the module takes "
                              f"first (cpu.compute.module_power_w)")
        limits.append(node.power_limit_w - cpu_side)
    return min(limits) if limits else None


def sustained_clock_ghz(node: NodeSpec, source: str = "scenario") -> float | None:
    """The SM clock a node's GPUs compute at: ``gpu_clock_ghz`` (or the part's clock), slowed
    by the GPU's power limit (:func:`gpu_power_limit_w`): the SMs get what the board's fixed
    power (HBM, leakage) leaves, and their dynamic power goes as the clock cubed. None when
    nothing sets or limits the clock (the part's own). ``source`` names the scenario in
    errors."""
    limit = gpu_power_limit_w(node, source)
    if limit is None:
        return node.gpu_clock_ghz
    gpu = node.gpu.gpu
    if gpu is None:
        raise ConfigError(node.gpu.name, "gpu", "expected a GPU part")
    compute = gpu.compute
    for key, value in (("board_power_w", compute.board_power_w),
                       ("fixed_power_w", compute.fixed_power_w)):
        if value is None:
            raise ConfigError(node.gpu.name, f"gpu.compute.{key}", "is needed to apply "
                              "a GPU power limit (with a source)")
    assert compute.board_power_w is not None and compute.fixed_power_w is not None
    board, fixed = compute.board_power_w, compute.fixed_power_w
    if limit <= fixed:
        key = ("system.node.gpu_power_limit_w" if limit == node.gpu_power_limit_w
               else "system.node.power_limit_w")
        raise ConfigError(source, key,
                          f"leaves the GPU {limit:g} W: expected more than the {fixed:g} W "
                          f"{node.gpu.name} draws whatever its clock (gpu.compute.fixed_power_w)")
    share = min(1.0, (limit - fixed) / (board - fixed))
    return float((node.gpu_clock_ghz or compute.clock_ghz) * share ** (1.0 / 3.0))


def _paced_ghz(node: NodeSpec, typical: float, gpus: int) -> float:
    """The clock of the slowest of ``gpus`` GPUs that typically sustain ``typical``: below it
    by ``gpu.compute.speed_spread`` times the expected largest of ``gpus`` normal draws."""
    compute = node.gpu.gpu.compute if node.gpu.gpu else None
    spread = (compute.speed_spread or 0.0) if compute else 0.0
    return typical / (1.0 + spread * expected_largest_normal(gpus))


def _typical_ghz(node: NodeSpec, source: str) -> float:
    """The clock a typical GPU of the node sustains: :func:`sustained_clock_ghz`, or the
    part's own."""
    return sustained_clock_ghz(node, source) or (
        node.gpu.gpu.compute.clock_ghz if node.gpu.gpu else 0.0)


def step_clock_ghz(node: NodeSpec, source: str = "scenario", gpus: int = 1) -> float:
    """The clock a synchronous step of ``gpus`` of a node's GPUs moves at: its slowest GPU's,
    below the clock a typical one sustains."""
    return _paced_ghz(node, _typical_ghz(node, source), gpus)


def clock_view(node: NodeSpec, source: str = "scenario",
               gpus: int = 1) -> dict[str, float | int | None]:
    """The clock a node's GPUs compute at, the part's own, the power limit that set it (None
    without one), and the clock a synchronous step of ``gpus`` of them moves at (its slowest
    GPU's), as results and ``ghsim inspect`` report them."""
    typical = _typical_ghz(node, source)
    return {"compute_ghz": typical,
            "part_ghz": node.gpu.gpu.compute.clock_ghz if node.gpu.gpu else 0.0,
            "power_limit_w": gpu_power_limit_w(node, source),
            "step_ghz": _paced_ghz(node, typical, gpus), "synchronized_gpus": gpus}


def unmodelled_power_cap(node: NodeSpec) -> str | None:
    """The warning a result carries when a module power cap is known but nothing turns it into
    a clock (the CPU part has no module_power_w, and neither gpu_power_limit_w nor
    gpu_clock_ghz is given); None otherwise."""
    if node.power_limit_w is None or node.gpu_clock_ghz is not None \
            or node.gpu_power_limit_w is not None or _cpu_side_w(node) is not None:
        return None
    clock = node.gpu.gpu.compute.clock_ghz if node.gpu.gpu else 0.0
    return (f"the GPU modules are capped at {node.power_limit_w:g} W, which ghsim cannot "
            f"turn into a clock ({node.cpu.name} gives no cpu.compute.module_power_w): "
            f"compute runs at {clock:g} GHz, the clock {node.gpu.name}'s measured efficiencies "
            f"refer to; set system.node.gpu_power_limit_w to Hopper's share of the cap, or "
            f"system.node.gpu_clock_ghz to the clock the system sustains")

