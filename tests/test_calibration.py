"""Accuracy on the published measurements of ../shared/validation/calibration.yaml.

DESIGN.md section 9: mean absolute percentage error at most 8 % over every point, no point off
by more than 20 %, with every constant from a cited measurement (none fitted per point).
"""

from __future__ import annotations

from pathlib import Path

from ghsim.engine.validation import summarize, validate_file


def test_calibration_accuracy(calibration_file: Path) -> None:
    outcomes = validate_file(calibration_file)
    summary = summarize(outcomes)
    failed = [o.failed for o in outcomes if o.failed]
    assert not failed, failed
    assert summary["simulated"] == 30
    report = ", ".join(f"{o.id} {o.error:+.1%}" for o in outcomes if o.error is not None)
    assert summary["mape"] <= 0.08, report
    assert summary["max_abs_error"] <= 0.20, report
