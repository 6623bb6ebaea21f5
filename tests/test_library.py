"""The library face, ``import ghsim``: every exported name resolves, and the module's own
examples (a step, a served model, a sweep, a validation set) run as written."""

from __future__ import annotations

import doctest

import ghsim


def test_every_exported_name_resolves() -> None:
    for name in ghsim.__all__:
        assert getattr(ghsim, name) is not None, name
    assert sorted(ghsim.__all__) == ghsim.__all__
    assert set(ghsim.__all__) <= set(dir(ghsim))


def test_the_module_examples_run() -> None:
    failures, tried = doctest.testmod(ghsim, report=True)
    assert tried >= 10 and failures == 0
