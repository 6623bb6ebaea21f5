"""Measure training-kernel memory bandwidth from the real Megatron-LM traces in tests/data/traces.

The eight Kineto traces of Megatron-LM GPT (hidden 4096, 40 layers, seq 2048, micro-batch 4, TP 8,
fp16) on 8x A100-SXM4-80GB record every kernel's duration. Two memory-bound kernels have shapes
fixed by the model, so their bandwidth follows from the trace alone:

* ``cuApplyLayerNorm``: reads and writes 8192 tokens x 4096 fp16 values;
* ``scaled_upper_triang_masked_softmax``: reads and writes 4 sequences x 4 heads (32 / TP 8) x
  2048 x 2048 fp16 scores.

The figures it prints are the sources of ``elementwise_bandwidth_gb_s`` and
``softmax_bandwidth_gb_s`` in ``configs/hardware/a100-sxm4-80gb.yaml``.
Run: ``python benchmarks/trace_kernels.py [TRACES_DIR]``.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "tests" / "data" / "traces" / "astra-sim_astra-sim"
PATTERN = "my_test__inputs__workload__megatron-tp8__megatron_kineto_{}.json.gz"
LAYERNORM_BYTES = 8192 * 4096 * 2 * 2
SOFTMAX_BYTES = 4 * 4 * 2048 * 2048 * 2 * 2


def measure(folder: Path) -> dict[str, float]:
    """GB/s of the LayerNorm and softmax kernels over the eight ranks, and their count."""
    norm = softmax = 0.0
    norm_calls = softmax_calls = 0
    for rank in range(8):
        with gzip.open(folder / PATTERN.format(rank), "rt") as handle:
            events = json.load(handle)["traceEvents"]
        for event in events:
            if event.get("cat") != "kernel" or event.get("ph") != "X":
                continue
            if "cuApplyLayerNorm" in event["name"]:
                norm += event["dur"] * 1e-6
                norm_calls += 1
            elif "scaled_upper_triang_masked_softmax" in event["name"]:
                softmax += event["dur"] * 1e-6
                softmax_calls += 1
    return {
        "layernorm_gb_s": norm_calls * LAYERNORM_BYTES / norm / 1e9,
        "layernorm_kernels": norm_calls,
        "softmax_gb_s": softmax_calls * SOFTMAX_BYTES / softmax / 1e9,
        "softmax_kernels": softmax_calls,
    }


def main() -> int:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    figures = measure(folder)
    print(f"LayerNorm: {figures['layernorm_kernels']:.0f} kernels, "
          f"{figures['layernorm_gb_s']:.0f} GB/s")
    print(f"masked softmax: {figures['softmax_kernels']:.0f} kernels, "
          f"{figures['softmax_gb_s']:.0f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
