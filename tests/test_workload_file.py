"""A workload file holds what a replay needs of each traced event: written and read back, an
imported rank's events come back as they were (times to the nanosecond, cross-stream waits,
shapes, bytes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ghsim.importers.kineto import read_kineto
from ghsim.importers.nsys import read_nsys
from ghsim.importers.workload_file import events_of, read_workload, write_workload
from tests.conftest import TRACES

# PyTorch's profiler in whole microseconds, with cross-stream waits (cudaStreamWaitEvent)
ALEXNET = (TRACES / "facebookresearch_HolisticTraceAnalysis"
           / "tests__data__critical_path__alexnet__benchmark_result_2869224_1695835535_trace"
             ".json.gz")
# Nsight Systems in nanoseconds: fractions of a microsecond to keep
NSYS = TRACES / "extra-p_extrap" / "tests__data__nsight__nsys_db__con_kernel.sqlite"


@pytest.mark.parametrize("trace", [ALEXNET, NSYS], ids=["kineto-waits", "nsys-nanoseconds"])
def test_a_rank_survives_the_round_trip(tmp_path: Path, trace: Path) -> None:
    rank = read_nsys(trace, 0) if trace.suffix == ".sqlite" else read_kineto(trace, 0)
    assert any(e.after for e in rank.events) or any(e.dur_us % 1 for e in rank.events)
    path = tmp_path / "rank.yaml"
    write_workload(path, "rank", [rank])
    (data,) = read_workload(path)["ranks"]
    back = events_of(data)
    assert len(back) == len(rank.events)
    for mine, theirs in zip(rank.events, back, strict=True):
        assert (theirs.name, theirs.kind, theirs.klass, theirs.stream) == (
            mine.name, mine.kind, mine.klass, mine.stream)
        assert theirs.start_us == pytest.approx(mine.start_us, abs=5e-4)
        assert theirs.dur_us == pytest.approx(mine.dur_us, abs=5e-4)
        assert theirs.after == mine.after
        assert (theirs.flops, theirs.shape, theirs.bytes, theirs.collective) == (
            mine.flops, mine.shape, mine.bytes, mine.collective)
    assert data["measured_s"] == pytest.approx(
        (max(e.start_us + e.dur_us for e in rank.events) - min(e.start_us for e in rank.events))
        * 1e-6 if rank.iteration is None else (rank.iteration[2] - rank.iteration[1]) * 1e-6)
