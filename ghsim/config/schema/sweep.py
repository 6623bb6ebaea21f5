"""``kind: sweep``: a base scenario and the axes to vary (a what-if study)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Discriminator, Field, Tag

from ghsim.config.schema.base import DocumentSpec, Name
from ghsim.config.schema.refs import Ref
from ghsim.config.schema.scenario import ScenarioSpec
from ghsim.config.schema.serving import ServingScenarioSpec

SCENARIO_FORMS = ("training-step", "served-model")
"""The tags of the two forms of a scenario in a union (they appear in validation error
locations, which the loader drops)."""


def scenario_form(value: Any) -> str:
    """Which form a scenario (a mapping or a validated spec) has: a served model when it has
    an ``inference:`` block and no ``training:``."""
    if isinstance(value, dict):
        serving = "inference" in value and "training" not in value
    else:
        serving = isinstance(value, ServingScenarioSpec)
    return SCENARIO_FORMS[1] if serving else SCENARIO_FORMS[0]


AnyScenario = Annotated[
    Annotated[ScenarioSpec, Tag(SCENARIO_FORMS[0])]
    | Annotated[ServingScenarioSpec, Tag(SCENARIO_FORMS[1])],
    Discriminator(scenario_form),
]
"""A training or a serving scenario, told apart by :func:`scenario_form`."""


class SweepSpec(DocumentSpec):
    """A grid and/or a list of cases of overrides on a base scenario."""

    KIND = "sweep"

    name: Name
    base: Annotated[AnyScenario, Ref("scenario")] = Field(
        description="The scenario every point varies: a training step (training:) or a served "
        "model (inference:).")
    grid: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="Key path -> values; every combination is a point (crossed).",
    )
    cases: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Override mappings (key path -> value); each is crossed with the grid.",
    )
    filter: str | None = Field(
        default=None, description="Expression over key paths; points where it is false are "
        "skipped, e.g. 'parallelism.tp * parallelism.pp <= 8'.",
    )
    rank_by: str | None = Field(
        default=None, description="Result field to rank by. Default: step_time_s for a "
        "training base (lowest first), output_tokens_per_s for a serving base (highest "
        "first).")
    descending: bool | None = Field(
        default=None, description="Rank the largest first. Default: as rank_by's default "
        "order (throughputs, model TFLOP/s and MFU highest first; times, latencies and "
        "memory lowest first).")
