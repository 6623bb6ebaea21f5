"""Microbenchmark workloads: one data movement instead of a training step.

They put ghsim's access paths beside the measurements of FACTS.md Table 2: a copy-engine copy
each way over the host link, the GPU reading or writing host memory in place, the CPU reading or
writing GPU memory, and STREAM on HBM and on host memory.
"""

from __future__ import annotations

from ghsim.config import Scenario
from ghsim.workload.ir import Kernel, Op, RankClass, Workload
from ghsim.workload.placement import place_groups


def microbenchmark_workload(scenario: Scenario) -> Workload:
    """A one-op workload for the scenario's ``microbenchmark``."""
    bench = scenario.spec.microbenchmark
    assert bench is not None
    nbytes = bench.gib * 2**30
    operation = bench.operation
    if operation == "stream_hbm":
        kernel = Kernel("stream", 0.0, nbytes, "fp32", (int(nbytes),), "stream")
        op = Op(0, "compute", "stream_hbm", "compute", body=(kernel,))
    elif operation == "stream_host":
        # STREAM triad: two arrays read for each written
        op = Op(0, "cpu", "stream_host", "cpu", bytes=nbytes,
                attrs={"cores": None, "read_share": 2 / 3})
    elif operation in ("h2d_copy", "d2h_copy"):
        direction = operation[:3]
        op = Op(0, "copy", operation, direction, bytes=nbytes, attrs={"direction": direction})
    else:
        direction = "h2d" if operation in ("gpu_read_host", "cpu_write_device") else "d2h"
        op = Op(0, "copy", operation, direction, bytes=nbytes,
                attrs={"direction": direction, "access": operation})
    rank_class = RankClass("microbenchmark", 0, 1, [op], [],
                           place_groups(scenario.layout, 0), 0)
    return Workload([rank_class], 1, 0.0, 0, attrs={"microbenchmark": operation})
