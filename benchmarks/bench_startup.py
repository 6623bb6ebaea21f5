"""Benchmark: how long a ``ghsim`` command takes to start and to refuse a broken input.

Every command pays for starting Python, importing what it needs, parsing its YAML files (the
scenario, its system, the hardware parts and the model: 5 to 7 documents) and validating them;
a command refused for a typo pays only that. This times ``ghsim run <shipped scenario> --set
training.seq_len=x`` (everything up to the refusal) and ``ghsim --help`` (the bare start) as
real processes, median of 7 each, and prints both (target: a refusal under 1.0 s). On the
2-core development machine, 21 runs interleaved with the previous commit's: 0.69 s with
PyYAML's pure-Python parser and schemas built at import, 0.59 s with libyaml's parser and
schemas built on first use (``inspect`` of the same scenario 1.28 -> 1.21 s); this machine's
neighbours make single runs vary by up to 50 %, so compare medians taken side by side.
Run: ``python benchmarks/bench_startup.py``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 1.0
REPEATS = 7


def median_s(argv: list[str], status: int) -> float:
    """Median wall seconds of ``python -m ghsim *argv``, which must exit with ``status``."""
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "ghsim", *argv], cwd=ROOT,
                              capture_output=True, check=False)
        times.append(time.perf_counter() - start)
        assert done.returncode == status, (argv, done.returncode, done.stderr)
    return statistics.median(times)


def main() -> int:
    bare = median_s(["--help"], 0)
    refused = median_s(["run", "llama3-8b-gh200", "--set", "training.seq_len=x"], 2)
    print(f"ghsim --help (the bare start):                  {bare:.2f} s")
    print(f"ghsim run llama3-8b-gh200 --set training.seq_len=x: {refused:.2f} s to refuse "
          f"(target < {TARGET_S} s)")
    return 0 if refused < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
