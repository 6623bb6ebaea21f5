"""NCCL's choice of algorithm and protocol, and their latencies, after its own tuning model.

NCCL predicts ``time = latency + bytes / bandwidth`` for every enabled algorithm x protocol pair
and runs the fastest (NVIDIA/nccl ``src/graph/tuning.cc`` and ``src/enqueue.cc`` at 5067397,
NCCL 2.30). ghsim takes NCCL's latency tables and its bandwidth factors as they are, with the
two corrections ``ncclTopoGetAlgoTime`` applies (a tree all-reduce's bandwidth by message size,
a cross-node ring's latency plateau); the bandwidth they multiply is not NCCL's per-channel
guess but what the collective's flows get on the system's links (measured NCCL efficiencies of
the links, Simple protocol, as nccl-tests reports for large messages). The LL protocols carry
flags beside the data (LL: 4 of every 8 bytes; LL128: 120 of 128), which ghsim models as extra
bytes on the wire.

NCCL's model is optimistic between a few MiB and a GiB: its pipeline moves a message in chunks
that shrink with the message (``calcCollChunking``), so the links idle between chunks and a
collective reaches its large-message bus bandwidth only near a GiB. NCCL corrects this for its
trees only (``treeCorrectionFactor``); nccl-tests show rings and NVLS ramping the same way.
:func:`size_ramp` reads the measured ramp of an NVLink domain (``gpu.nvlink.nccl_size_ramp``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ghsim.interpolate import log2_interpolate

PROTOCOLS = ("LL", "LL128", "Simple")

BASE_LATENCY_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "nvls": (0.0, 0.0, 0.0)}
"""``baseLat`` per algorithm, for LL / LL128 / Simple (tuning.cc:150-175)."""

HW_LATENCY_US = {
    ("tree", "nvlink"): (0.6, 1.25, 4.0), ("tree", "pci"): (1.0, 1.9, 4.0),
    ("tree", "net"): (5.0, 8.5, 14.0),
    ("ring", "nvlink"): (0.6, 1.9, 3.4), ("ring", "pci"): (1.0, 2.5, 5.7),
    ("ring", "net"): (2.7, 4.0, 14.0),
    ("nvls", "nvlink"): (math.inf, math.inf, 25.0), ("nvls", "net"): (math.inf, math.inf, 18.0),
}
"""``hwLat`` per algorithm and link type, LL / LL128 / Simple (tuning.cc:150-175); NVLS runs
only with Simple."""

NET_OVERHEAD_US = 1.0
"""Extra per-step latency of a ring that crosses the network (x3 for Simple; tuning.cc:228)."""

LL_MAX_BUSBW = {1: 141.0e9, 2: 39.0e9, 4: 20.4e9}
"""``llMaxBw`` for Hopper: one node, and across nodes (2, 4+; Intel-host rows), bytes/s."""


@dataclass(frozen=True)
class Choice:
    """What NCCL runs: algorithm, protocol, latency, and the wire-byte factor of the protocol
    (bytes on the wire per byte of payload, bandwidth factors folded in)."""

    algorithm: str
    protocol: str
    latency_s: float
    wire_factor: float

    def time_s(self, wire_bytes: float, busbw: float) -> float:
        return self.latency_s + wire_bytes * self.wire_factor / busbw


def _bandwidth_factor(algorithm: str, protocol: str, nodes: int, busbw: float) -> float:
    """Fraction of the Simple-protocol bus bandwidth the pair reaches (tuning.cc:327-336)."""
    if algorithm == "ring":
        if protocol == "LL":
            cap = LL_MAX_BUSBW[nodes if nodes <= 2 else 4]
            return min(0.5, cap / busbw)
        return 0.92 if protocol == "LL128" else 1.0
    if algorithm == "tree":
        if protocol == "LL":
            return 1 / 3.8
        if protocol == "LL128":
            return 7 / 9 if nodes == 1 else 120 / 128
        return 0.92
    return 1.0


def latency_s(algorithm: str, protocol: str, collective: str, ranks: int, nodes: int,
              intra: str) -> float:
    """NCCL's latency of one collective (tuning.cc:384-435); ``intra`` is ``nvlink`` or
    ``pci``, ``nodes`` the NVLink domains the group spans."""
    p = PROTOCOLS.index(protocol)
    base = BASE_LATENCY_US[algorithm][p]
    intra_us = HW_LATENCY_US[(algorithm, intra if algorithm != "nvls" else "nvlink")][p]
    inter_us = HW_LATENCY_US.get((algorithm, "net"), (0.0, 0.0, 0.0))[p]
    per_node = max(1, ranks // nodes)
    if algorithm == "ring":
        steps = 2 * (ranks - 1) if collective == "all_reduce" else ranks - 1
        crossings = (2 if collective == "all_reduce" else 1) * (nodes - 1)
        if nodes > 1:
            intra_us = max(intra_us, NET_OVERHEAD_US * (3 if protocol == "Simple" else 1))
        total = base + (steps - crossings) * intra_us + crossings * inter_us
    elif algorithm == "tree":
        levels = int(math.log2(nodes)) if nodes > 1 else 0
        total = base + 2 * ((per_node - 1) * intra_us + levels * inter_us)
    else:
        total = base + intra_us + (inter_us if nodes > 1 else 0.0)
    return total * 1e-6


TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9,
           1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9,
              .9, .9, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7,
               .8, .9, .9),
}
"""NCCL's ``treeCorrectionFactor`` (tuning.cc), by log2(message bytes / 64), 0-22: "trees are
not perfectly sticking to the model for medium sizes"; it scales a tree all-reduce's bandwidth
(``ncclTopoGetAlgoTime``)."""


RING_PLATEAU = 1.4
"""NCCL multiplies the latency of a Simple ring all-reduce across nodes by 1.4 (Ampere and
later) once each channel gives each rank 64 bytes or more: the "plateau effect of ring"
(``ncclTopoGetAlgoTime``, tuning.cc)."""
PLATEAU_CHANNELS = 32
"""ghsim does not track NCCL's channel count; it takes 32, so the plateau applies from 2 KiB a
rank (the condition only spares messages too small for a Simple ring to be picked)."""


def tree_correction(protocol: str, message_bytes: float) -> float:
    """NCCL's correction of a tree all-reduce's bandwidth for a message of ``message_bytes``."""
    log_size = int(math.log2(message_bytes / 64)) if message_bytes >= 64 else -1
    table = TREE_CORRECTION[protocol]
    return table[log_size] if 0 <= log_size < len(table) else 1.0


def choose(collective: str, ranks: int, nodes: int, intra: str, wire_bytes: float,
           ring_busbw: float, nvls_busbw: float | None,
           tree_busbw: float | None = None) -> Choice:
    """The fastest enabled algorithm x protocol for ``wire_bytes`` per rank, given the bus
    bandwidth the ring's flows (and NVLS's, where it runs, and the tree's, where its routes
    differ from the ring's) get alone."""
    algorithms = ["ring"]
    if collective == "all_reduce":
        algorithms.append("tree")
        if nvls_busbw is not None and nodes == 1 and ranks > 2:
            algorithms.append("nvls")
    message = wire_bytes * ranks / (2 * (ranks - 1)) if collective == "all_reduce" else 0.0
    best: tuple[float, Choice] | None = None
    for algorithm in algorithms:
        busbw = ring_busbw
        if algorithm == "nvls" and nvls_busbw:
            busbw = nvls_busbw
        elif algorithm == "tree" and tree_busbw:
            busbw = tree_busbw
        for protocol in (("Simple",) if algorithm == "nvls" else PROTOCOLS):
            factor = _bandwidth_factor(algorithm, protocol, nodes, busbw)
            latency = latency_s(algorithm, protocol, collective, ranks, nodes, intra)
            if collective == "all_reduce":
                if algorithm == "tree":
                    factor *= tree_correction(protocol, message)
                elif (algorithm == "ring" and protocol == "Simple" and nodes > 1
                      and message >= 64 * PLATEAU_CHANNELS * ranks):
                    latency *= RING_PLATEAU
            choice = Choice(algorithm, protocol, latency, 1.0 / factor)
            seconds = choice.time_s(wire_bytes, busbw)
            if best is None or seconds < best[0]:
                best = (seconds, choice)
    assert best is not None
    return best[1]


def size_ramp(wire_bytes: float, ramp: Sequence[Sequence[float]]) -> float:
    """The share of its large-message bus bandwidth a collective moving ``wire_bytes`` per
    rank reaches: ``ramp``'s [MiB, share] pairs interpolated in log2 of the size, flat beyond
    both ends."""
    return log2_interpolate(wire_bytes / 2**20, ramp)
