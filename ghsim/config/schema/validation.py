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
    overrides: list[str] = Field(
        default_factory=list, description="Keys where the run differed from the files its "
        "scenario names, as ``--set`` takes them (KEY.PATH=VALUE, the path inside the "
        "scenario): a system's power cap at the time of the run, say. Applied before the "
        "scenario is validated; the notes say why.",
    )
    scenario: ScenarioSpec


class ValidationPointsSpec(DocumentSpec):
    """A file of validation points."""

    KIND = "validation_points"

    metric: str = ""
    points: list[ValidationPointSpec] = Field(min_length=1)
