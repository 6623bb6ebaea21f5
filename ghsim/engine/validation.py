"""``ghsim validate``: simulate published measurements and compare."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ghsim.config import scenario_from_spec, serving_scenario_from_spec
from ghsim.config.loader import load_entries
from ghsim.config.schema import InferencePointSpec, ValidationPointSpec
from ghsim.engine.simulate import simulate
from ghsim.errors import InputError
from ghsim.serving import simulate_serving


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


def summarize(outcomes: list[PointOutcome] | list[ServingOutcome]) -> dict[str, float | int]:
    """Mean absolute percentage error and worst error over the simulated points (fractions)."""
    errors = [abs(o.error) for o in outcomes if o.error is not None]
    return {
        "mape": sum(errors) / len(errors) if errors else float("nan"),
        "max_abs_error": max(errors) if errors else float("nan"),
        "simulated": len(errors),
        "failed": sum(1 for o in outcomes if o.failed),
    }


@dataclass(frozen=True)
class ServingOutcome:
    """One inference point: measured and predicted output tokens/s (and latencies)."""

    id: str
    measured: float | None
    predicted: float | None
    error: float | None
    """(predicted - measured) / measured of the throughput."""
    failed: str | None = None
    bottleneck: str | None = None
    measured_ttft_ms: float | None = None
    predicted_ttft_ms: float | None = None
    measured_tpot_ms: float | None = None
    predicted_tpot_ms: float | None = None


def validate_inference_point(point: InferencePointSpec, source: str) -> ServingOutcome:
    """Simulate one inference point and compare its throughput (and mean latencies)."""
    measured = point.measured
    try:
        result = simulate_serving(serving_scenario_from_spec(point.scenario, source)).to_dict()
    except InputError as error:
        return ServingOutcome(point.id, measured.output_tokens_per_s, None, None,
                              failed=error.line())
    predicted = result["output_tokens_per_s"]

    def mean_ms(key: str) -> float | None:
        stats = result.get(key)
        return stats["mean"] * 1e3 if stats and stats["mean"] is not None else None

    return ServingOutcome(
        point.id, measured.output_tokens_per_s, predicted,
        (predicted - measured.output_tokens_per_s) / measured.output_tokens_per_s,
        bottleneck=result["bottleneck"]["resource"],
        measured_ttft_ms=measured.ttft_ms,
        predicted_ttft_ms=mean_ms("ttft_s") if measured.ttft_ms is not None else None,
        measured_tpot_ms=measured.tpot_ms,
        predicted_tpot_ms=mean_ms("tpot_s") if measured.tpot_ms is not None else None)


def validate_inference_file(path: str | Path, on_point: Callable[[int, int], None] | None = None
                            ) -> list[ServingOutcome]:
    """Simulate every point of an ``inference_points`` file (a broken point fails alone)."""
    outcomes: list[ServingOutcome] = []
    entries = list(load_entries(path, "inference_points", "points", InferencePointSpec))
    for index, entry in enumerate(entries):
        if isinstance(entry, InputError):
            outcomes.append(ServingOutcome(f"points[{index}]", None, None, None,
                                           failed=entry.line()))
        else:
            assert isinstance(entry, InferencePointSpec)
            outcomes.append(validate_inference_point(entry, str(path)))
        if on_point is not None:
            on_point(index + 1, len(entries))
    return outcomes
