"""Every unit conversion ghsim makes, in one place.

Inside ghsim every quantity is SI: bytes, seconds, bytes per second, FLOP per second.
YAML keys carry their unit in the name (``capacity_gib``, ``bandwidth_gb_s``, ``latency_ns``,
``peak_tflops``) and are converted once, at load, with the factors below.
1 GB/s is 1e9 B/s (DESIGN.md section 7).
"""

from __future__ import annotations

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KIB = 2**10
MIB = 2**20
GIB = 2**30
TIB = 2**40

GB_S = 1e9
"""One GB/s in bytes per second."""
GBIT_S = 1e9 / 8
"""One Gb/s (network line rates) in bytes per second."""
TFLOPS = 1e12
"""One TFLOP/s in FLOP per second."""
GHZ = 1e9

NS = 1e-9
US = 1e-6
MS = 1e-3


def gib_to_bytes(value_gib: float) -> float:
    """Bytes in ``value_gib`` binary gigabytes."""
    return value_gib * GIB


def gb_s_to_bytes_per_s(value_gb_s: float) -> float:
    """Bytes per second in ``value_gb_s`` GB/s (decimal)."""
    return value_gb_s * GB_S


def tflops_to_flops(value_tflops: float) -> float:
    """FLOP per second in ``value_tflops`` TFLOP/s."""
    return value_tflops * TFLOPS


def format_bytes(value_bytes: float) -> str:
    """A human-readable binary size: ``96.0 GiB``."""
    for unit, factor in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(value_bytes) >= factor:
            return f"{value_bytes / factor:.1f} {unit}"
    return f"{value_bytes:.0f} B"


def format_rate(value_bytes_per_s: float) -> str:
    """A human-readable decimal bandwidth: ``450 GB/s``."""
    for unit, factor in (("TB/s", TB), ("GB/s", GB), ("MB/s", MB)):
        if abs(value_bytes_per_s) >= factor:
            return f"{value_bytes_per_s / factor:.4g} {unit}"
    return f"{value_bytes_per_s:.4g} B/s"


def format_flops(value_flops: float) -> str:
    """A human-readable FLOP/s figure: ``989.4 TFLOP/s``."""
    for unit, factor in (("EFLOP/s", 1e18), ("PFLOP/s", 1e15), ("TFLOP/s", 1e12), ("GFLOP/s", 1e9)):
        if abs(value_flops) >= factor:
            return f"{value_flops / factor:.4g} {unit}"
    return f"{value_flops:.4g} FLOP/s"


def format_seconds(value_s: float) -> str:
    """A human-readable duration: ``344 ns``, ``20 us``, ``1.2 s``."""
    for unit, factor in (("s", 1.0), ("ms", MS), ("us", US)):
        if abs(value_s) >= factor:
            return f"{value_s / factor:.4g} {unit}"
    return f"{value_s / NS:.4g} ns"
