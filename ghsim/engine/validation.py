"""``ghsim validate``: simulate published measurements and compare."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ghsim.config import scenario_from_spec
from ghsim.config.loader import load_entries
from ghsim.config.schema import ValidationPointSpec
from ghsim.engine.simulate import simulate
from ghsim.errors import InputError


@dataclass(frozen=True)
class PointOutcome:
    """One validation point: measured, predicted, signed error; or why it failed."""

    id: str
    measured_step_time_s: float | None
    predicted_step_time_s: float | None
    error: float | None
    """(predicted - measured) / measured."""
    failed: str | None = None
    bottleneck: str | None = None


def validate_point(point: ValidationPointSpec, source: str, index: int) -> PointOutcome:
    measured = point.measured.step_time_s
    try:
        scenario = scenario_from_spec(point.scenario, source)
        result = simulate(scenario)
    except InputError as error:
        return PointOutcome(point.id, measured, None, None, failed=error.line())
    predicted = result.step_time_s
    return PointOutcome(point.id, measured, predicted, (predicted - measured) / measured,
                        bottleneck=result.bottleneck["resource"])


def validate_file(path: str | Path,
                  on_point: Callable[[int, int], None] | None = None) -> list[PointOutcome]:
    """Simulate every point of a ``validation_points`` file; a broken point is reported as
    failed and the others still run. ``on_point(done, total)`` follows the progress."""
    outcomes = []
    entries = list(load_entries(path, "validation_points", "points", ValidationPointSpec))
    for index, entry in enumerate(entries):
        if isinstance(entry, InputError):
            outcomes.append(PointOutcome(f"points[{index}]", None, None, None,
                                         failed=entry.line()))
        else:
            assert isinstance(entry, ValidationPointSpec)
            outcomes.append(validate_point(entry, str(path), index))
        if on_point is not None:
            on_point(index + 1, len(entries))
    return outcomes


def summarize(outcomes: list[PointOutcome]) -> dict[str, float | int]:
    """Mean absolute percentage error and worst error over the simulated points (fractions)."""
    errors = [abs(o.error) for o in outcomes if o.error is not None]
    return {
        "mape": sum(errors) / len(errors) if errors else float("nan"),
        "max_abs_error": max(errors) if errors else float("nan"),
        "simulated": len(errors),
        "failed": sum(1 for o in outcomes if o.failed),
    }
