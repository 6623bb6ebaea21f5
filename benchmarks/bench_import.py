"""Benchmark: importing a Kineto trace, in MB/s of uncompressed JSON, and the parser's memory.

Builds a large rank file by repeating the events of a real Megatron trace (tests/data/traces)
until it holds about 200 MB of JSON, then imports it: prints the throughput (target: 20 MB/s or
better on one core) and the peak Python heap (tracemalloc) against the JSON text's size.
Run: ``python benchmarks/bench_import.py``.
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from ghsim.importers.kineto import read_kineto

ROOT = Path(__file__).resolve().parents[1]
SOURCE = (ROOT / "tests" / "data" / "traces" / "astra-sim_astra-sim" /
          "my_test__inputs__workload__megatron-tp8__megatron_kineto_0.json.gz")
TARGET_BYTES = 200 * 2**20


def build(path: Path) -> int:
    """Write a large trace: the source's events shifted in time, again and again."""
    trace = json.loads(gzip.decompress(SOURCE.read_bytes()))
    events = trace.pop("traceEvents")
    chunk = json.dumps(events)[1:-1]
    span = max(e.get("ts", 0) + e.get("dur", 0) for e in events) - min(
        e.get("ts", 0) for e in events if "ts" in e)
    copies = max(1, TARGET_BYTES // len(chunk))
    with path.open("w") as handle:
        handle.write('{"schemaVersion": 1, "traceEvents": [')
        for copy in range(copies):
            shifted = [{**e, "ts": e["ts"] + copy * span} if "ts" in e else e for e in events]
            handle.write((", " if copy else "") + json.dumps(shifted)[1:-1])
        handle.write("]}")
    return path.stat().st_size


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "big.json")
        size = build(path)
        start = time.perf_counter()
        rank = read_kineto(path)
        seconds = time.perf_counter() - start
        tracemalloc.start()
        read_kineto(path)
        _, heap = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    rate = size / seconds / 1e6
    print(f"{size / 1e6:.0f} MB of JSON, {len(rank.events):,} GPU events kept: "
          f"{rate:.1f} MB/s, peak heap {heap / 2**20:.0f} MiB "
          f"({heap / size:.0%} of the JSON text)")
    return 0 if rate >= 20 else 1


if __name__ == "__main__":
    sys.exit(main())
