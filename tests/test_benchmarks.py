"""Speed and memory targets, run only with ``pytest -m benchmark`` (never in the default run).

Each benchmark script prints its figures and exits non-zero when it misses its target.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.benchmark
@pytest.mark.parametrize(
    "script", ["bench_graph.py", "bench_lower.py", "bench_simulate.py", "bench_pages.py",
               "bench_import.py", "bench_startup.py",
               "bench_sweep.py", "bench_serving.py"]
)
def test_benchmark_meets_its_target(script: str) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script)],
        capture_output=True, text=True, check=False,
    )
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
