"""ghsim's NCCL all-reduce inside one NVLink domain against nccl-tests, size by size.

NCCL's tuning model (which ghsim follows for latencies and picks) costs a collective as a
latency plus its bytes at the large-message bus bandwidth. Measured, an 8-GPU all-reduce on an
NVSwitch node reaches half of that bandwidth at a few MiB and all of it only near a GiB: the
pipeline's chunks shrink with the message, and the links idle between them. NCCL corrects this
for its trees only (``treeCorrectionFactor`` in ``src/graph/tuning.cc``). ghsim reads the ramp
from ``gpu.nvlink.nccl_size_ramp``; this script holds the measurements it comes from, prints
ghsim against them with and without it, and with ``--derive`` prints the ramp the measurements
imply (the share of the bandwidth term of ghsim's NCCL model, latency kept, that the measured
time leaves): the values in the hardware files.

Measurements (nccl-tests ``all_reduce_perf``, in place, bus bandwidth by message size, powers
of two from 1 KiB to 8 GiB, 8 GPUs of one node):

* 8x H200 SXM, NCCL 2.20.5, NVLS: Azure ND H200 v5 (Azure/AI-benchmarking-guide@7f20e5fa,
  ``Azure_Results/ND_H200_v5_results.md``, "NCCL Bandwidth"). NVLink4 and NVSwitch as on a DGX
  H100: the H100's ramp too. vLLM's H100 benchmark of NCCL at 8 ranks agrees within 3 % from
  16 to 128 MiB (vllm-project/vllm#42324: 0.121, 0.195, 0.316, 0.561 ms).
* 8x A100 SXM 80 GB, NCCL 2.18.5, ring: Azure ND A100 v4 (Azure/AI-benchmarking-guide@3bb66cac,
  ``Azure_Results/ND_A100_v4_results.md``); its 8 GiB figure, 231.6 GB/s, is also the A100's
  large-message bus bandwidth (``gpu.nvlink.nccl_efficiency``), so the ramp and the rate it
  scales come from one table.

Run: ``python benchmarks/nccl_ramp.py [--derive]`` (a few seconds).
"""

from __future__ import annotations

import functools
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ghsim.config.api import load_scenario  # noqa: E402
from ghsim.fabric.traffic import traffic_planner  # noqa: E402
from ghsim.workload.lower import lower  # noqa: E402
from ghsim.workload.summary import wire_bytes  # noqa: E402

MIB = 2**20
H200_BUSBW = {1: 52.96, 2: 88.78, 4: 138.44, 8: 181.94, 16: 240.41, 32: 300.91, 64: 368.11,
              128: 412.45, 256: 432.24, 512: 442.72, 1024: 467.58, 2048: 472.57,
              4096: 477.41, 8192: 479.98}
A100_BUSBW = {1: 36.22, 2: 53.54, 4: 71.43, 8: 89.99, 16: 109.22, 32: 132.77, 64: 166.63,
              128: 174.18, 256: 213.87, 512: 221.58, 1024: 228.10, 2048: 230.22,
              4096: 230.48, 8192: 231.58}
MEASURED = {"dgx-h200": H200_BUSBW, "dgx-h100": H200_BUSBW, "dgx-a100": A100_BUSBW}
"""System -> {all-reduce message MiB: nccl-tests bus bandwidth GB/s}, 8 GPUs."""
VLLM_H100_US = {0.5: 24, 1: 25, 1.5: 33, 2: 37, 3: 44, 4: 50, 8: 76, 16: 121, 32: 195, 47.84: 267,
                64: 316, 128: 561}
"""An independent check, not used to derive the ramp: NCCL all-reduce (vLLM's pynccl) on H100,
MiB -> us, from vllm-project/vllm#42324 (the SM 9.0 / H100 table of its benchmark of device
communicators, 2026). The stored excerpt does not show the world size; it is taken as 8 ranks
because from 16 to 128 MiB it agrees within 3 % with Azure's 8-GPU table (measured on another
system, with nccl-tests), so the sizes below 16 MiB, where nccl-tests' per-operation floor
shapes Azure's figures, are the independent part of the check."""
ALPS_2NODE_US = {1: (164.3, 187.7), 2: (182.1, 180.6), 4: (292.7, 295.4), 8: (344.5, 345.7),
                 16: (461.7, 454.0), 32: (686.5, 686.6), 64: (1090.5, 1083.5),
                 128: (1916.4, 1907.8)}
"""Across nodes, where ghsim applies no ramp (shown, not used): nccl-tests 2.17.1 all-reduce on
two Alps nodes, 4 GH200 each, Slingshot-11 through the libfabric plugin (the CXI hook on),
MiB -> (out-of-place, in-place) us (eth-cscs/cscs-docs@80abed13
``docs/software/communication/nccl.md``, "All-reduce latency")."""
FLOOR_S = {"dgx-h200": 1024 * 1.75 / 0.06e9, "dgx-h100": 1024 * 1.75 / 0.06e9,
           "dgx-a100": 1024 * 1.75 / 0.04e9}
"""The same tables' 1 KiB all-reduce (0.06 and 0.04 GB/s): 30 and 45 us, the time nccl-tests
(no CUDA graphs) takes per operation however small; the ramp is read only from sizes measured
at twice that or more, where the floor no longer sets the time."""
GPUS = 8
NO_RAMP = "system.node.gpu.gpu.nvlink.nccl_size_ramp=null"


def measured_s(mib: int, busbw_gb_s: float, n: int = GPUS) -> float:
    """nccl-tests' time of an all-reduce from its bus bandwidth: 2 (n - 1) / n S / busbw."""
    return wire_bytes("all_reduce", mib * MIB, n) / (busbw_gb_s * 1e9)


@functools.cache
def _planner(system: str, gpus: int, group: str, ramp: bool):  # type: ignore[no-untyped-def]
    """The traffic planner and the rank class of ``gpus`` GPUs of ``system``, all in one
    tensor-parallel (``tp``) or data-parallel (``dp``) group."""
    spec = {"schema_version": 1, "kind": "scenario", "system": system, "num_gpus": gpus,
            "model": "llama3-8b",
            "training": {"seq_len": 2048, "micro_batch": 1, "global_batch": gpus,
                         "precision": "bf16", "attention": "flash"},
            "parallelism": {"tp": gpus if group == "tp" else 1, "pp": 1,
                            "dp": gpus if group == "dp" else 1, "recompute": "none"}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{system}-{group}{gpus}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        scenario = load_scenario(path, () if ramp else (NO_RAMP,))
    return traffic_planner(scenario.spec.system, scenario.layout), lower(scenario).classes[0]


def all_reduce(system: str, mib: float, ramp: bool = True, gpus: int = GPUS,
               group: str = "tp") -> tuple[float, float, str, str]:
    """ghsim's (seconds, latency seconds, algorithm, protocol) of an all-reduce of ``mib`` MiB
    over ``gpus`` GPUs of ``system`` in one ``group``, alone on the links."""
    planner, rank_class = _planner(system, gpus, group, ramp)
    members = rank_class.groups[group]
    wire = wire_bytes("all_reduce", mib * MIB, members.size)
    plan = planner.collective(rank_class, members, "all_reduce", wire)
    return planner.alone_s(plan, wire), plan.latency_s, plan.algorithm, plan.protocol


def rows(system: str) -> list[tuple[int, float, float, float]]:
    """(MiB, measured us, ghsim us with the ramp, without) for every measured size."""
    out = []
    for mib, busbw in MEASURED[system].items():
        out.append((mib, 1e6 * measured_s(mib, busbw), 1e6 * all_reduce(system, mib)[0],
                    1e6 * all_reduce(system, mib, ramp=False)[0]))
    return out


def implied_ramp(system: str) -> list[tuple[float, float]]:
    """[wire MiB per rank, share] the measurements imply: the bandwidth term of ghsim's model
    without the ramp over the measured time less the same latency (capped at 1); sizes NCCL
    runs with LL are left out (no ramp applies to LL), and those the per-operation floor of
    nccl-tests still shapes (:data:`FLOOR_S`)."""
    out = []
    for mib, busbw in MEASURED[system].items():
        seconds, latency, _, protocol = all_reduce(system, mib, ramp=False)
        if protocol == "LL" or measured_s(mib, busbw) < 2 * FLOOR_S[system]:
            continue
        share = (seconds - latency) / (measured_s(mib, busbw) - latency)
        out.append((wire_bytes("all_reduce", mib * MIB, GPUS) / MIB, min(1.0, share)))
    return out


def vllm_rows() -> list[tuple[float, float, float, float]]:
    """(MiB, vLLM's us, ghsim us with the ramp, without) for the H100 check."""
    return [(mib, measured, 1e6 * all_reduce("dgx-h100", mib)[0],
             1e6 * all_reduce("dgx-h100", mib, ramp=False)[0])
            for mib, measured in VLLM_H100_US.items()]


def alps_rows() -> list[tuple[float, float, float, float]]:
    """(MiB, measured us, ghsim us, the same) for the two-node Alps all-reduce (no ramp across
    nodes, so both ghsim columns agree)."""
    out = []
    for mib, (oop, inp) in ALPS_2NODE_US.items():
        seconds = all_reduce("alps-gh200", mib, group="dp")[0]
        out.append((float(mib), (oop + inp) / 2, 1e6 * seconds, 1e6 * seconds))
    return out


def _print(rows_: list[tuple[float, float, float, float]]) -> None:
    print(f"{'MiB':>6s} {'measured':>9s} {'ghsim':>9s} {'error':>7s} {'no ramp':>9s} "
          f"{'error':>7s}")
    for mib, measured, with_ramp, without in rows_:
        print(f"{mib:6g} {measured:9.1f} {with_ramp:9.1f} {with_ramp / measured - 1:+7.1%} "
              f"{without:9.1f} {without / measured - 1:+7.1%}")


def main() -> None:
    if "--derive" in sys.argv[1:]:
        for system in ("dgx-h200", "dgx-a100"):
            pairs = ", ".join(f"[{w:g}, {s:.3f}]" for w, s in implied_ramp(system))
            print(f"{system}: nccl_size_ramp: [{pairs}]")
        return
    for system in MEASURED:
        print(f"{system}: 8-GPU NCCL all-reduce, us (nccl-tests; ghsim with / without the ramp)")
        _print([(float(mib), *rest) for mib, *rest in rows(system)])
    print("dgx-h100 against vLLM's NCCL figures (vllm-project/vllm#42324; not used above)")
    _print(vllm_rows())
    print("alps-gh200, two nodes of 4 (across Slingshot: no ramp modelled; cscs-docs nccl.md)")
    _print(alps_rows())


if __name__ == "__main__":
    main()
