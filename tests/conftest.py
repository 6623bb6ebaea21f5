"""Shared fixtures: where the repository, its shipped files and its test data live."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
TRACES = DATA / "traces"
"""Real public trace files (see tests/data/traces/README.md and MANIFEST.tsv)."""


def shipped(*folders: str) -> list[Path]:
    """Every YAML file under the given folders of the repository, sorted."""
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.yaml"))


@pytest.fixture
def calibration_file() -> Path:
    return ROOT / "validation" / "calibration.yaml"
