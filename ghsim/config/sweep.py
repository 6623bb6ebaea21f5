"""Loading a sweep: its base scenario, its points (grid x cases), the filter, and the scenario
of each point. Every axis, the filter's key paths and the number of points (at most
``ghsim.limits.MAX_SWEEP_POINTS``, counted before any is built) are checked before anything is
simulated."""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ghsim.config.api import Scenario, scenario_from_spec, serving_scenario_from_spec
from ghsim.config.cursor import Slot, informational_key, slot_at
from ghsim.config.diagnose import describe
from ghsim.config.expression import (
    ExpressionError,
    evaluate,
    key_paths,
    lookup_in,
    parse_filter,
)
from ghsim.config.loader import _Tree, load_tree
from ghsim.config.overrides import Override, outer_first, parse_key_path
from ghsim.config.schema import ScenarioSpec, ServingScenarioSpec, SweepSpec
from ghsim.config.serving_layout import ServingScenario
from ghsim.errors import ConfigError, InputError, LayoutError, OverrideError
from ghsim.limits import MAX_SWEEP_POINTS

RANKABLE = ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu",
            "mfu", "hbm_peak_bytes")
"""Result fields a training sweep ranks by (rates highest first, the rest lowest)."""
SERVING_RANKABLE = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "ttft_p99_s",
                    "tpot_p99_s", "hbm_peak_bytes")
"""Result fields a serving sweep ranks by (throughputs highest first, latencies lowest)."""
HIGHER_IS_BETTER = frozenset({"tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu",
                              "mfu", "output_tokens_per_s", "output_tokens_per_s_per_gpu"})
"""Result fields whose largest value ranks first unless a sweep says ``descending: false``."""

AnyScenarioValue = Scenario | ServingScenario
"""A point's scenario: a training step or a served model."""


@dataclass(frozen=True)
class Point:
    """One combination of a sweep: the overrides applied to the base scenario."""

    index: int
    overrides: tuple[tuple[str, Any], ...]

    @property
    def label(self) -> str:
        return ", ".join(f"{key}={value}" for key, value in self.overrides) or "(base)"


class Sweep:
    """A validated sweep file, ready to expand into scenarios."""

    def __init__(self, spec: SweepSpec, path: Path) -> None:
        self.spec = spec
        self.path = path
        self.source = str(path)
        # What the files gave, not what validation derived from it (an efficiency derived from
        # a measured rate would otherwise come back beside that rate, and contradict it).
        self.base_data: dict[str, Any] = spec.base.model_dump(mode="python", exclude_unset=True)
        self.serving = isinstance(spec.base, ServingScenarioSpec)
        self.root: type[ScenarioSpec] | type[ServingScenarioSpec] = type(spec.base)
        self.filter = None
        if spec.filter is not None:
            try:
                self.filter = parse_filter(spec.filter)
            except ExpressionError as error:
                raise ConfigError(self.source, "filter", str(error)) from None

    @property
    def rank_by(self) -> str:
        """The result field points are ranked by (the form's default when not given)."""
        default = "output_tokens_per_s" if self.serving else "step_time_s"
        return self.spec.rank_by or default

    @property
    def descending(self) -> bool:
        """Whether the largest value ranks first (throughputs by default, when not given)."""
        if self.spec.descending is not None:
            return self.spec.descending
        return self.rank_by in HIGHER_IS_BETTER

    @property
    def rankable(self) -> tuple[str, ...]:
        return SERVING_RANKABLE if self.serving else RANKABLE

    def count(self) -> int:
        """How many points :meth:`points` makes (without making them)."""
        return math.prod(len(values) for values in self.spec.grid.values()) * max(
            1, len(self.spec.cases))

    def points(self) -> list[Point]:
        """Every point: each grid combination crossed with each case."""
        keys = list(self.spec.grid)
        combos = itertools.product(*(self.spec.grid[k] for k in keys)) if keys else [()]
        cases = self.spec.cases or [{}]
        points: list[Point] = []
        for combo in combos:
            for case in cases:
                overrides = (*zip(keys, combo, strict=True), *case.items())
                points.append(Point(len(points), tuple(overrides)))
        return points

    def scenario(self, point: Point) -> AnyScenarioValue:
        """The scenario of ``point``; raises :class:`InputError` if the combination is invalid."""
        tree = _Tree(self.root, copy.deepcopy(self.base_data), self.path)
        given = []
        for key, value in point.overrides:
            origin = f"{self.source}: {self._axis(key)}"
            given.append(Override(parse_key_path(key, origin), value, f"{key}={value}", origin))
        for override in outer_first(given):
            tree.apply(override)
        tree.resolve(tree.data, Slot(self.root), ())
        spec = tree.validate()
        overrides = [f"{key}={value}" for key, value in point.overrides]
        try:
            if isinstance(spec, ServingScenarioSpec):
                return serving_scenario_from_spec(spec, self.source, overrides)
            assert isinstance(spec, ScenarioSpec)
            return scenario_from_spec(spec, self.source, overrides)
        except LayoutError as error:
            if not error.source.startswith("--set "):
                raise
            key = error.source.removeprefix("--set ").partition("=")[0]
            raise LayoutError(f"{self.source}: {self._axis(key)}", error.key_path,
                              error.message) from None

    def _axis(self, key: str) -> str:
        return f"grid.{key}" if key in self.spec.grid else f"cases[].{key}"

    def keep(self, scenario: AnyScenarioValue) -> bool:
        """Whether the filter lets this point through."""
        if self.filter is None:
            return True
        try:
            return bool(evaluate(self.filter, _filter_lookup(scenario)))
        except (ExpressionError, TypeError, ZeroDivisionError, OverflowError) as error:
            raise ConfigError(self.source, "filter", str(error)) from None


def _filter_lookup(scenario: AnyScenarioValue) -> Any:
    """Key-path lookup of a filter over a point's resolved scenario (with the derived dp, or
    for a served model the derived replicas)."""
    data = scenario.spec.model_dump(mode="python")
    key = "replicas" if isinstance(scenario, ServingScenario) else "dp"
    data["parallelism"][key] = scenario.layout.dp
    return lookup_in(data)


def _check_axis(sweep: Sweep, where: str, key: str, values: list[Any],
                grid: bool = True) -> None:
    """An axis names a key of the scenario schema and each of its values loads on the base; a
    grid axis names a key some mechanism reads (a case may also set an informational one, as
    a label beside the keys that make it differ: its points carry the warning)."""
    try:
        path = parse_key_path(key, sweep.source)
    except OverrideError:
        raise ConfigError(sweep.source, where, f"expected a dotted key path, got {key!r}") from None
    for depth in range(1, len(path) + 1):
        if slot_at(sweep.root, path[:depth]) is None:
            hint = describe({"type": "extra_forbidden", "loc": path[:depth]}, sweep.root)
            raise ConfigError(sweep.source, where, hint)
    if grid and informational_key(sweep.root, path):
        raise ConfigError(sweep.source, where, f"{key} is informational (nothing in the "
                          "simulation reads it), so every point would give the same figures; "
                          "expected a key a mechanism reads")
    if not values:
        raise ConfigError(sweep.source, where, "expected a non-empty list of values")
    for index, value in enumerate(values):
        try:
            sweep.scenario(Point(-1, ((key, value),)))
        except LayoutError:
            continue  # a layout that only works with other axes' values: checked per point
        except InputError as error:
            raise ConfigError(sweep.source, f"{where}[{index}]", error.message) from None


def _check_filter(sweep: Sweep, tree: Any) -> None:
    """Every key path of the filter names a key of the scenario schema (or the derived
    ``parallelism.dp``), so that a misspelt one is an error before anything runs."""
    for key in key_paths(tree):
        path = tuple(key.split("."))
        if path == ("parallelism", "dp"):
            continue
        for depth in range(1, len(path) + 1):
            if slot_at(sweep.root, path[:depth]) is None:
                hint = describe({"type": "extra_forbidden", "loc": path[:depth]}, sweep.root)
                raise ConfigError(sweep.source, "filter", f"{key!r}: {hint}")
    try:
        base = sweep.scenario(Point(-1, ()))
    except InputError:
        return  # a base that only works with the axes' values: the filter is checked per point
    try:
        evaluate(tree, _filter_lookup(base))
    except (ExpressionError, TypeError) as error:
        raise ConfigError(sweep.source, "filter", f"on the base scenario: {error}") from None
    except (ZeroDivisionError, OverflowError):
        pass  # may depend on the axes' values


def load_sweep(reference: str | Path) -> Sweep:
    """Load a ``kind: sweep`` file and check every axis before anything runs."""
    spec, path = load_tree(reference, "sweep")
    assert isinstance(spec, SweepSpec)
    sweep = Sweep(spec, path)
    total = sweep.count()
    if total > MAX_SWEEP_POINTS:
        sizes = " x ".join(str(len(v)) for v in spec.grid.values())
        cases = f" x {len(spec.cases)} cases" if spec.cases else ""
        raise ConfigError(sweep.source, "grid", f"expected at most {MAX_SWEEP_POINTS:,} points "
                          f"(ghsim.limits.MAX_SWEEP_POINTS), got {total:,} ({sizes or '1'}"
                          f"{cases})")
    if sweep.filter is not None:
        _check_filter(sweep, sweep.filter)
    if sweep.rank_by not in sweep.rankable:
        form = "a serving" if sweep.serving else "a training"
        raise ConfigError(sweep.source, "rank_by", f"expected one of "
                          f"{', '.join(sweep.rankable)} for {form} base, got {sweep.rank_by!r}")
    for key, values in spec.grid.items():
        _check_axis(sweep, f"grid.{key}", key, values)
    for index, case in enumerate(spec.cases):
        for key, value in case.items():
            _check_axis(sweep, f"cases[{index}].{key}", key, [value], grid=False)
    if not spec.grid and not spec.cases:
        raise ConfigError(sweep.source, "grid", "expected a grid or cases to vary")
    return sweep
