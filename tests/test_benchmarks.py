"""Speed and memory targets, run only with ``pytest -m benchmark`` (never in the default run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.benchmark
def test_graph_builds_16384_gpus_under_2_s_and_1_gib() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_graph.py")],
        capture_output=True, text=True, check=False,
    )
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.benchmark
def test_lowering_gpt3_mlperf_under_1_s_and_500_mib() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_lower.py")],
        capture_output=True, text=True, check=False,
    )
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.benchmark
def test_simulation_speed() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_simulate.py")],
        capture_output=True, text=True, check=False,
    )
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
