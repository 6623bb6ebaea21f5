"""``ghsim validate``: simulate published measurements and compare."""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from ghsim.config import scenario_from_spec, serving_scenario_from_spec
from ghsim.config.layout import LayoutProblem, derive_layout
from ghsim.config.loader import load_entries
from ghsim.config.schema import InferencePointSpec, ServingScenarioSpec, ValidationPointSpec
from ghsim.config.schema.model import ModelSpec
from ghsim.engine.result import does_not_fit_line
from ghsim.engine.simulate import simulate
from ghsim.errors import InputError
from ghsim.serving import simulate_serving
from ghsim.serving.memory import mean_tokens, smallest_tp
from ghsim.workload.modelsize import parameter_count

SUBSETS = ("system", "precision", "model_size", "confidence")
"""What ``ghsim validate`` groups its errors by: the point's system, its precision (training or
serving), its model's size class and the source's confidence."""

SIZE_CLASSES = ((1e9, "<1B"), (10e9, "1-10B"), (100e9, "10-100B"), (float("inf"), ">=100B"))
"""Model size classes by total parameters (every expert counted for an MoE model)."""


def size_class(model: ModelSpec) -> str:
    """The :data:`SIZE_CLASSES` label of ``model``'s total parameter count."""
    total = parameter_count(model).total
    return next(label for limit, label in SIZE_CLASSES if total < limit)


def subsets_of(point: ValidationPointSpec | InferencePointSpec) -> dict[str, str]:
    """The :data:`SUBSETS` a validation or inference point belongs to."""
    scenario = point.scenario
    precision = (scenario.inference.precision if isinstance(scenario, ServingScenarioSpec)
                 else scenario.training.precision)
    return {"system": scenario.system.name, "precision": precision,
            "model_size": size_class(scenario.model), "confidence": point.confidence}


def selected(point_id: str, only: Iterable[str] | None) -> bool:
    """Whether a point's id matches one of the ``only`` glob patterns (all when None)."""
    patterns = list(only or ())
    return not patterns or any(fnmatchcase(point_id, pattern) for pattern in patterns)


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
    does_not_fit: str | None = None
    """Why the simulated step does not fit in memory (a measured run that ran did fit, so its
    scenario is wrong), or None."""
    subsets: dict[str, str] = field(default_factory=dict)
    """The point's :data:`SUBSETS`."""
    overrides: tuple[str, ...] = ()
    """The point's own overrides of its scenario (``KEY.PATH=VALUE``)."""


def validate_point(point: ValidationPointSpec, source: str, index: int) -> PointOutcome:
    measured = point.measured.step_time_s
    subsets = subsets_of(point)
    try:
        scenario = scenario_from_spec(point.scenario, source)
        result = simulate(scenario)
    except InputError as error:
        return PointOutcome(point.id, measured, None, None, failed=error.line(),
                            subsets=subsets, overrides=tuple(point.overrides))
    predicted = result.step_time_s
    return PointOutcome(point.id, measured, predicted, (predicted - measured) / measured,
                        bottleneck=result.bottleneck["resource"],
                        does_not_fit=does_not_fit_line(result.memory), subsets=subsets,
                        overrides=tuple(point.overrides))


def _layer_passes(point: ValidationPointSpec) -> float:
    """A rough size of a point's simulation: its micro-batches times a stage's layers (0 for a
    layout that does not divide, which fails at once)."""
    try:
        return derive_layout(point.scenario).layer_passes(point.scenario.model.layers)
    except LayoutProblem:
        return 0.0


def _worker_context() -> multiprocessing.context.BaseContext:
    """How worker processes start: from a fresh server process where the platform has one, so
    that none inherits a lock a thread of this one (a progress bar's) held at the fork."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else None)


def _run_points(work: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]],
                on_point: Callable[[int, int], None] | None, workers: int,
                sizes: Sequence[Any] | None = None) -> list[Any]:
    """``function(*args)`` of each item of ``work``, in order, on up to ``workers`` processes
    (one: in this one), the largest of ``sizes`` started first so that no long one starts
    last; ``on_point(done, total)`` after each."""
    total = len(work)
    if workers > 1 and total > 1:
        slots: list[Any] = [None] * total
        order = (sorted(range(total), key=lambda i: sizes[i], reverse=True) if sizes
                 else range(total))
        try:
            with ProcessPoolExecutor(max_workers=min(workers, total),
                                     mp_context=_worker_context()) as pool:
                futures = {pool.submit(work[i][0], *work[i][1]): i for i in order}
                for done, future in enumerate(as_completed(futures), 1):
                    slots[futures[future]] = future.result()
                    if on_point is not None:
                        on_point(done, total)
            return slots
        except (BrokenProcessPool, OSError):
            pass  # no worker processes here (a limit on processes or memory): in this one
    results = []
    for done, (function, args) in enumerate(work, 1):
        results.append(function(*args))
        if on_point is not None:
            on_point(done, total)
    return results


def _failed(outcome: type[PointOutcome] | type[ServingOutcome], index: int,
            line: str) -> PointOutcome | ServingOutcome:
    """The outcome of the ``index``-th entry of a file, which did not load."""
    return outcome(f"points[{index}]", None, None, None, failed=line)


def validate_file(path: str | Path, on_point: Callable[[int, int], None] | None = None,
                  only: Iterable[str] | None = None, workers: int = 1) -> list[PointOutcome]:
    """Simulate every point of a ``validation_points`` file (those whose id matches a glob of
    ``only``, when given) on up to ``workers`` processes; a broken point is reported as failed
    and the others still run. ``on_point(done, total)`` follows the progress."""
    entries = [entry for entry in load_entries(path, "validation_points", "points",
                                               ValidationPointSpec)
               if not isinstance(entry, ValidationPointSpec) or selected(entry.id, only)]
    work: list[tuple[Callable[..., Any], tuple[Any, ...]]] = [
        (_failed, (PointOutcome, index, entry.line())) if isinstance(entry, InputError)
        else (validate_point, (entry, str(path), index))
        for index, entry in enumerate(entries)]
    sizes = [_layer_passes(entry) if isinstance(entry, ValidationPointSpec) else 0.0
             for entry in entries] if workers > 1 else None
    return _run_points(work, on_point, workers, sizes)


def _errors(outcomes: Iterable[PointOutcome | ServingOutcome]) -> dict[str, float | int | None]:
    """MAPE and worst error (None where no point was simulated) and how many were."""
    errors = [abs(o.error) for o in outcomes if o.error is not None]
    return {"mape": sum(errors) / len(errors) if errors else None,
            "max_abs_error": max(errors) if errors else None,
            "simulated": len(errors)}


def summarize(outcomes: list[PointOutcome] | list[ServingOutcome]) -> dict[str, Any]:
    """Mean absolute percentage error and worst error over the simulated points (fractions),
    the points that failed or do not fit, and the same errors by each of :data:`SUBSETS`
    (``by[subset][value]``, values in the order they first appear)."""
    by: dict[str, dict[str, dict[str, float | int | None]]] = {}
    for subset in SUBSETS:
        values = list(dict.fromkeys(o.subsets[subset] for o in outcomes if subset in o.subsets))
        by[subset] = {value: _errors(o for o in outcomes if o.subsets.get(subset) == value)
                      for value in values}
    return {
        **_errors(outcomes),
        "failed": sum(1 for o in outcomes if o.failed),
        "not_fitting": sum(1 for o in outcomes if o.does_not_fit),
        "by": by,
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
    does_not_fit: str | None = None
    """Why the served model does not fit in memory, or None."""
    subsets: dict[str, str] = field(default_factory=dict)
    """The point's :data:`SUBSETS`."""


def validate_inference_point(point: InferencePointSpec, source: str) -> ServingOutcome:
    """Simulate one inference point and compare its throughput (and mean latencies)."""
    measured = point.measured
    subsets = subsets_of(point)
    spec = point.scenario
    if point.choose_tp:
        spec = spec.model_copy(update={"parallelism": spec.parallelism.model_copy(
            update={"tp": smallest_tp(spec)})})
    try:
        result = simulate_serving(serving_scenario_from_spec(spec, source)).to_dict()
    except InputError as error:
        return ServingOutcome(point.id, measured.output_tokens_per_s, None, None,
                              failed=error.line(), subsets=subsets)
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
        predicted_tpot_ms=mean_ms("tpot_s") if measured.tpot_ms is not None else None,
        does_not_fit=None if result["memory"]["fits"] else
        f"the model cannot be served: {result['bottleneck']['why']}",
        subsets=subsets)


def validate_inference_file(path: str | Path, on_point: Callable[[int, int], None] | None = None,
                            only: Iterable[str] | None = None,
                            workers: int = 1) -> list[ServingOutcome]:
    """Simulate every point of an ``inference_points`` file (those whose id matches a glob of
    ``only``, when given; a broken point fails alone) on up to ``workers`` processes."""
    entries = [entry for entry in load_entries(path, "inference_points", "points",
                                               InferencePointSpec)
               if not isinstance(entry, InferencePointSpec) or selected(entry.id, only)]
    work: list[tuple[Callable[..., Any], tuple[Any, ...]]] = [
        (_failed, (ServingOutcome, index, entry.line())) if isinstance(entry, InputError)
        else (validate_inference_point, (entry, str(path)))
        for index, entry in enumerate(entries)]
    sizes = [_serving_size(entry) if isinstance(entry, InferencePointSpec) else (False, 0.0)
             for entry in entries] if workers > 1 else None
    return _run_points(work, on_point, workers, sizes)


def _serving_size(point: InferencePointSpec) -> tuple[bool, float]:
    """A rough size of a serving point's simulation, for starting the largest first: a point
    that searches for its maximum rate runs several simulations, so those come first; then
    the output tokens its requests generate."""
    inference = point.scenario.inference
    requests = inference.requests
    return inference.find_max_rate, requests.count * mean_tokens(requests.output_tokens)
