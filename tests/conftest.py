"""Shared fixtures: where the repository, its shipped files and its test data live."""

from __future__ import annotations

from pathlib import Path

import pytest

from ghsim.cli import _cores

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
TRACES = DATA / "traces"
"""Real public trace files (see tests/data/traces/README.md and MANIFEST.tsv)."""
CORES = _cores()
"""The accuracy tests simulate their sets' points on every core available."""
SMALL = "configs/scenarios/llama3-70b-gh200-nvl32.yaml"
"""A small shipped scenario the engine tests override."""
DGX = [
    "system=dgx-h100", "num_gpus=32", "model=llama2-13b", "model.layers=8",
    "training.seq_len=2048", "training.global_batch=32", "training.precision=bf16",
    "parallelism.tp=2", "parallelism.pp=2", "parallelism.vp=2",
]
"""Overrides of SMALL: four DGX H100 nodes, tp 2 and pp 2, whose NICs and NVLinks carry
unequal loads."""


def shipped(*folders: str) -> list[Path]:
    """Every YAML file under the given folders of the repository, sorted."""
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.yaml"))


@pytest.fixture
def calibration_file() -> Path:
    return ROOT / "validation" / "calibration.yaml"


SLOWEST_FIRST = ("test_calibration.py", "test_accuracy_sets.py", "test_serving.py",
                 "test_hostile.py", "test_import.py", "test_sweep.py")
"""Modules that simulate whole validation sets or run many subprocesses, in the order they
should start: pytest-xdist (``--dist loadscope --no-loadscope-reorder``, pyproject.toml)
hands its workers whole modules in collection order, and a long module started last would
leave the other core idle while it runs."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, run the slowest modules first (a stable sort: every module keeps its
    own order). A serial run (``-n 0``) keeps the order it was given: tools/mutation_check.py
    names the tests most likely to catch a sabotage first, and stops at the first failure."""
    if not hasattr(config, "workerinput"):
        return
    rank = {name: index for index, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
