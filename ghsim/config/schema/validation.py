"""``kind: validation_points``: published step times of real runs, each with its scenario."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ghsim.config.schema.base import DocumentSpec, Name, PositiveFloat, Spec
from ghsim.config.schema.scenario import ScenarioSpec


class MeasuredSpec(Spec):
    """What was measured."""

    step_time_s: PositiveFloat
    how: str = ""


class ValidationPointSpec(Spec):
    """One published measurement and the scenario that reproduces it."""

    id: Name
    confidence: Literal["high", "medium", "low"]
    measured: MeasuredSpec
    source: Name
    notes: str = ""
    scenario: ScenarioSpec


class ValidationPointsSpec(DocumentSpec):
    """A file of validation points."""

    KIND = "validation_points"

    metric: str = ""
    points: list[ValidationPointSpec] = Field(min_length=1)
