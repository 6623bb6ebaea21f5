"""``kind: sweep``: a base scenario and the axes to vary (a what-if study)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ghsim.config.schema.base import DocumentSpec, Name
from ghsim.config.schema.refs import Ref
from ghsim.config.schema.scenario import ScenarioSpec


class SweepSpec(DocumentSpec):
    """A grid and/or a list of cases of overrides on a base scenario."""

    KIND = "sweep"

    name: Name
    base: Annotated[ScenarioSpec, Ref("scenario")]
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
    rank_by: str = Field(default="step_time_s", description="Result field to rank by.")
    descending: bool = Field(default=False, description="Rank the largest first.")
