"""The sabotages of tools/mutation_check.py still apply to the code: each one's original text is
found exactly once (a review that rewrites a line would otherwise leave the check to fail only
when someone runs it), and each changes it."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from tests.conftest import ROOT


def _mutation_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_check",
                                                  ROOT / "tools" / "mutation_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


MUTATION_CHECK = _mutation_check()


@pytest.mark.parametrize("sabotage", MUTATION_CHECK.SABOTAGES, ids=lambda s: s.name)
def test_every_sabotage_still_applies(sabotage: object) -> None:
    target = sabotage.target(ROOT)  # type: ignore[attr-defined]
    assert target.is_file()
    assert sabotage.replacement != sabotage.original  # type: ignore[attr-defined]


def test_sabotage_names_are_unique() -> None:
    names = [s.name for s in MUTATION_CHECK.SABOTAGES]
    assert len(names) == len(set(names))
