"""The validated specs of every YAML kind, and the registry from ``kind`` to spec class."""

from __future__ import annotations

from pydantic import BaseModel

from ghsim.config.schema.base import SCHEMA_VERSION, DocumentSpec, Spec
from ghsim.config.schema.hardware import CpuSpec, GpuSpec, HardwareSpec, MemorySpec, NicSpec
from ghsim.config.schema.model import ModelSpec
from ghsim.config.schema.scenario import (
    OffloadSpec,
    ParallelismSpec,
    ScenarioSpec,
    TrainingSpec,
)
from ghsim.config.schema.serving import (
    InferencePointSpec,
    InferencePointsSpec,
    InferenceSpec,
    ServingScenarioSpec,
)
from ghsim.config.schema.sweep import SweepSpec
from ghsim.config.schema.system import FabricSpec, NodeSpec, SystemSpec
from ghsim.config.schema.validation import ValidationPointSpec, ValidationPointsSpec

SPEC_BY_KIND: dict[str, type[DocumentSpec]] = {
    "hardware": HardwareSpec,
    "system": SystemSpec,
    "model": ModelSpec,
    "scenario": ScenarioSpec,
    "validation_points": ValidationPointsSpec,
    "sweep": SweepSpec,
    "inference_points": InferencePointsSpec,
}
"""Kinds whose files ghsim loads, keyed by the YAML ``kind``. Later kinds register here."""


def spec_for_document(kind: str, document: dict[str, object]) -> type[DocumentSpec] | None:
    """The spec class of a document: a scenario with an ``inference:`` block (and no
    ``training:``) is a serving scenario."""
    if kind == "scenario" and "inference" in document and "training" not in document:
        return ServingScenarioSpec
    return SPEC_BY_KIND.get(kind)


def spec_for_kind(kind: str) -> type[BaseModel] | None:
    """The spec class of ``kind``, or None if ghsim knows no such kind."""
    return SPEC_BY_KIND.get(kind)


__all__ = [
    "SCHEMA_VERSION",
    "SPEC_BY_KIND",
    "CpuSpec",
    "DocumentSpec",
    "FabricSpec",
    "GpuSpec",
    "HardwareSpec",
    "InferencePointSpec",
    "InferencePointsSpec",
    "InferenceSpec",
    "MemorySpec",
    "ModelSpec",
    "NicSpec",
    "NodeSpec",
    "OffloadSpec",
    "ParallelismSpec",
    "ScenarioSpec",
    "ServingScenarioSpec",
    "Spec",
    "SweepSpec",
    "SystemSpec",
    "TrainingSpec",
    "ValidationPointSpec",
    "ValidationPointsSpec",
    "spec_for_document",
    "spec_for_kind",
]
