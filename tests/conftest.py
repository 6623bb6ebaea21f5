"""Shared fixtures: where the repository, its shipped configs and ../shared live."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


def shipped(*folders: str) -> list[Path]:
    """Every YAML file under the given folders of the repository, sorted."""
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.yaml"))


@pytest.fixture
def calibration_file() -> Path:
    path = SHARED / "validation" / "calibration.yaml"
    if not path.exists():
        pytest.skip(f"{path} is not present (it lives beside the checkout, in ../shared)")
    return path
