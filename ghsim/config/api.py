"""The public loading functions: a name or path in, a validated spec out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ghsim.config.cursor import format_path, informational_key
from ghsim.config.layout import Layout, LayoutProblem, derive_layout
from ghsim.config.loader import load_tree
from ghsim.config.overrides import parse_key_path
from ghsim.config.schema import (
    DocumentSpec,
    HardwareSpec,
    ModelSpec,
    ParallelismSpec,
    ScenarioSpec,
    ServingScenarioSpec,
    SystemSpec,
    ValidationPointsSpec,
)
from ghsim.config.search import display, locate_any, not_found_any_message
from ghsim.config.serving_layout import ServingScenario, derive_serving_layout
from ghsim.errors import ConfigError, InputError, LayoutError
from ghsim.version import __version__

SpecT = TypeVar("SpecT", bound=DocumentSpec)


@dataclass(frozen=True)
class Scenario:
    """A validated scenario with its layout derived (``spec.parallelism.dp`` is filled in)."""

    spec: ScenarioSpec
    layout: Layout
    source: str
    overrides: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.spec.name or Path(self.source).stem

    def digest(self) -> str:
        """SHA-256 of the resolved scenario (:meth:`Spec.digest`)."""
        return self.spec.digest()


def _load(kind: str, reference: str | Path, overrides: Sequence[str], want: type[SpecT]) -> SpecT:
    spec, _ = load_tree(reference, kind, overrides)
    assert isinstance(spec, want)
    return spec


def load_hardware(reference: str | Path, overrides: Sequence[str] = ()) -> HardwareSpec:
    """Load a ``kind: hardware`` file by name (``gh200-96gb``) or path."""
    return _load("hardware", reference, overrides, HardwareSpec)


def load_system(reference: str | Path, overrides: Sequence[str] = ()) -> SystemSpec:
    """Load a ``kind: system`` file by name (``dgx-h100``) or path."""
    return _load("system", reference, overrides, SystemSpec)


def load_model(reference: str | Path, overrides: Sequence[str] = ()) -> ModelSpec:
    """Load a ``kind: model`` file by name (``llama3-70b``) or path."""
    return _load("model", reference, overrides, ModelSpec)


def load_validation_points(reference: str | Path) -> ValidationPointsSpec:
    """Load a ``kind: validation_points`` file."""
    return _load("validation_points", reference, (), ValidationPointsSpec)


def blame(problem: LayoutProblem, source: str, overrides: Sequence[str] = (),
          error: type[InputError] = LayoutError) -> InputError:
    """The error for ``problem``: against the last ``--set`` of its key path or of a related
    one, else against the scenario file."""
    where = format_path(problem.path)
    blamed = {where, *(format_path(path) for path in problem.related)}
    for text in reversed(overrides):
        if text.partition("=")[0].strip() in blamed:
            return error(f"--set {text}", where, problem.message)
    return error(source, where, problem.message)


def scenario_from_spec(
    spec: ScenarioSpec, source: str, overrides: Sequence[str] = ()
) -> Scenario:
    """Derive the layout of a validated scenario spec; raises :class:`LayoutError`."""
    try:
        layout = derive_layout(spec)
    except LayoutProblem as problem:
        raise blame(problem, source, overrides) from None
    parallelism = ParallelismSpec.model_validate(
        {**spec.parallelism.model_dump(), "dp": layout.dp, "vp": layout.vp}
    )
    resolved = spec.model_copy(update={"parallelism": parallelism})
    return Scenario(resolved, layout, source, tuple(overrides))


def serving_scenario_from_spec(spec: ServingScenarioSpec, source: str,
                               overrides: Sequence[str] = ()) -> ServingScenario:
    """Derive the layout of a validated serving spec; raises :class:`LayoutError`."""
    try:
        layout = derive_serving_layout(spec)
    except LayoutProblem as problem:
        raise blame(problem, source, overrides) from None
    return ServingScenario(spec, layout, source, tuple(overrides))


def load_any_scenario(reference: str | Path,
                      overrides: Sequence[str] = ()) -> Scenario | ServingScenario:
    """Load a ``kind: scenario`` file of either form: a training step (``training:``) or a
    served model (``inference:``)."""
    spec, path = load_tree(reference, "scenario", overrides)
    if isinstance(spec, ServingScenarioSpec):
        return serving_scenario_from_spec(spec, display(path), overrides)
    assert isinstance(spec, ScenarioSpec)
    return scenario_from_spec(spec, display(path), overrides)


def load_scenario(reference: str | Path, overrides: Sequence[str] = ()) -> Scenario:
    """Load a training scenario (``training:``); a serving scenario is an error here (use
    :func:`load_any_scenario`)."""
    scenario = load_any_scenario(reference, overrides)
    if isinstance(scenario, ServingScenario):
        raise ConfigError(scenario.source, "inference", "is a serving scenario: expected one "
                          "with training: here (ghsim run takes either)")
    return scenario


def load_file(reference: str | Path, overrides: Sequence[str] = ()) -> DocumentSpec:
    """Load a file of any kind, given by path or by name."""
    path = locate_any(str(reference))
    if path is None:
        raise ConfigError(str(reference), "", not_found_any_message(str(reference)))
    spec, _ = load_tree(path, None, overrides)
    return spec


def inputs_of(scenario: Scenario | ServingScenario) -> dict[str, Any]:
    """A result's ``inputs``: the resolved scenario (a file that runs again), where it came
    from, its overrides and digest, and the ghsim version."""
    return {"scenario": scenario.spec.resolved(), "source": scenario.source,
            "overrides": list(scenario.overrides), "digest": scenario.digest(),
            "ghsim_version": __version__}


def unread_overrides(scenario: Scenario | ServingScenario) -> list[str]:
    """A warning for each of the scenario's overrides that sets a key no mechanism reads (a
    label, a boost clock, a latency only routes show): it changes no figure."""
    warnings = []
    for text in scenario.overrides:
        # the value was read already, and the key parsed when it was applied: only the key
        path = parse_key_path(text.partition("=")[0].strip(), text)
        if informational_key(type(scenario.spec), path):
            warnings.append(f"{text} changes no figure: {format_path(path)} is "
                            "informational (nothing in the simulation reads it)")
    return warnings
