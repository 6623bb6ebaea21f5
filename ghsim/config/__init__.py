"""Configuration: YAML schemas, loading, name resolution, overrides and the parallel layout."""

from ghsim.config.api import (
    Scenario,
    inputs_of,
    load_any_scenario,
    load_file,
    load_hardware,
    load_model,
    load_scenario,
    load_system,
    load_validation_points,
    scenario_from_spec,
    serving_scenario_from_spec,
    unread_overrides,
)
from ghsim.config.layout import Layout
from ghsim.config.serving_layout import ServingScenario

__all__ = [
    "Layout",
    "Scenario",
    "ServingScenario",
    "inputs_of",
    "load_any_scenario",
    "load_file",
    "load_hardware",
    "load_model",
    "load_scenario",
    "load_system",
    "load_validation_points",
    "scenario_from_spec",
    "serving_scenario_from_spec",
    "unread_overrides",
]
