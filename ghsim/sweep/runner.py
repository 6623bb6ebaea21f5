"""Running a sweep: every point simulated in worker processes (or on a Dask cluster), results
streamed back as they finish, cached, ranked at the end.

A cache entry is named by :func:`cache_key`: the ghsim version, the resolved scenario (the
content of the scenario, system, hardware-part and model files it was built from, overrides
applied) and the bytes of the workload file it replays. Upgrading ghsim, editing any of those
files or re-importing a workload file under the same name therefore simulates the point again;
an entry that cannot be read back as a record (truncated, not JSON, wrong types) is simulated
again and rewritten.

The same function, :func:`run_point`, runs each point in both cases: locally through a
``ProcessPoolExecutor``, on a cluster through ``distributed.Client.submit``. A point whose
scenario is invalid (a layout that does not divide, a filter that rejects it) is recorded with
its reason; the others go on. Ctrl-C stops the sweep and keeps what has finished.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import ghsim
from ghsim.config import Scenario, ServingScenario
from ghsim.config.sweep import Point, Sweep, load_sweep
from ghsim.engine.simulate import simulate, workload_path
from ghsim.errors import InputError
from ghsim.files import open_regular, read_capped
from ghsim.limits import MAX_CONFIG_BYTES
from ghsim.serving import simulate_serving
from ghsim.sweep.record import NUMBERS, empty_record, has_result, result_record, serving_record
from ghsim.version import __version__


@lru_cache(maxsize=4)
def _sweep(path: str) -> Sweep:
    return load_sweep(path)


def run_point(sweep_path: str, point: Point, cache_dir: str | None = None) -> dict[str, Any]:
    """Simulate one point (in a worker); never raises for a bad point."""
    sweep = _sweep(sweep_path)
    record = empty_record(point)
    try:
        scenario = sweep.scenario(point)
        if not sweep.keep(scenario):
            record["skipped"] = f"filtered out by: {sweep.spec.filter}"
            return record
        key = cache_key(scenario)
        cached = Path(cache_dir, f"{key}.json") if cache_dir else None
        stored = _cached(cached, record) if cached is not None else None
        if stored is not None:
            stored.update(index=point.index, label=point.label, cached=True,
                          overrides=record["overrides"])
            return stored
        if isinstance(scenario, ServingScenario):
            result = serving_record(point, scenario, simulate_serving(scenario))
        else:
            result = result_record(point, scenario, simulate(scenario))
        result["cache_key"] = key
        return result
    except InputError as error:
        record["error"] = error.line()
        return record


def cache_key(scenario: Scenario | ServingScenario) -> str:
    """SHA-256 of what a point's result depends on: the ghsim version, the resolved scenario
    (every file it was built from, as resolved) and the workload file's bytes."""
    digest = hashlib.sha256(f"ghsim {__version__}\n".encode())
    digest.update(scenario.digest().encode())
    path = workload_path(scenario) if isinstance(scenario, Scenario) else None
    if path is not None:
        digest.update(b"\nworkload file\n")
        try:
            with open_regular(path) as handle:  # a FIFO or a device would never end
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        except (OSError, InputError) as error:  # simulating it will say what is wrong
            digest.update(f"unreadable: {error}".encode())
    return digest.hexdigest()


def _well_typed(stored: dict[str, Any]) -> bool:
    """Whether a record read back from the cache has the types ghsim writes."""
    if not all(stored[k] is None or (isinstance(stored[k], int | float)
                                     and not isinstance(stored[k], bool)) for k in NUMBERS):
        return False
    if not has_result(stored) or stored["fits"] not in (True, False, None):
        return False
    breakdown = stored["breakdown_s"]
    return isinstance(breakdown, dict) and all(
        isinstance(v, int | float) for v in breakdown.values()) and all(
        stored[k] is None or isinstance(stored[k], str)
        for k in ("label", "bottleneck", "digest", "does_not_fit", "error", "skipped"))


def _cached(path: Path, record: dict[str, Any]) -> dict[str, Any] | None:
    """A record from the cache, or None when there is none or it is not one ghsim wrote (the
    point is then simulated again and the entry rewritten)."""
    try:
        data = read_capped(path, MAX_CONFIG_BYTES, "ghsim.limits.MAX_CONFIG_BYTES")
        stored = json.loads(data, parse_constant=_no_constant)
    except (InputError, ValueError, RecursionError):
        return None
    if not isinstance(stored, dict) or set(stored) != set(record) or not _well_typed(stored):
        return None
    return stored


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@dataclass
class SweepOutcome:
    """The records of a sweep, ranked, and whether it ran to the end."""

    sweep: Sweep
    records: list[dict[str, Any]]
    interrupted: bool = False
    simulated: int = 0
    cached: int = 0
    errors: list[str] = field(default_factory=list)

    def ranked(self) -> list[dict[str, Any]]:
        """Valid results by ``rank_by``, those that fit in memory first and those without the
        field (a replayed trace's rates) after the others, ties broken by the points'
        overrides (never by which finished first); then skipped and failed points."""
        key, descending = self.sweep.rank_by, self.sweep.descending
        done = [r for r in self.records if has_result(r)]
        done.sort(key=lambda r: (r["fits"] is False, r[key] is None,
                                 -(r[key] or 0) if descending else (r[key] or 0),
                                 overrides_order(r["overrides"])))
        rest = sorted((r for r in self.records if not has_result(r)),
                      key=lambda r: r["index"])
        return done + rest

    def best(self) -> dict[str, Any] | None:
        """The first ranked point that fits in memory (or whose memory is not tracked); never
        one that does not fit."""
        ranked = [r for r in self.ranked() if has_result(r) and r["fits"] is not False]
        return ranked[0] if ranked else None


def overrides_order(overrides: dict[str, Any]) -> tuple[tuple[str, int, float, str], ...]:
    """A total order of points by their overrides (numbers by value, the rest as text)."""
    def value(item: Any) -> tuple[int, float, str]:
        if isinstance(item, int | float) and not isinstance(item, bool):
            return (0, float(item), "")
        return (1, 0.0, str(item))
    return tuple((key, *value(item)) for key, item in overrides.items())


def _store(cache_dir: str | None, record: dict[str, Any]) -> None:
    if not cache_dir or record.get("cache_key") is None or record.get("cached"):
        return
    path = Path(cache_dir, f"{record['cache_key']}.json")
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(record, allow_nan=False))
    temporary.replace(path)


def _local(sweep: Sweep, points: list[Point], workers: int,
           cache_dir: str | None) -> Iterator[dict[str, Any]]:
    if workers <= 1:
        for point in points:
            yield run_point(str(sweep.path), point, cache_dir)
        return
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures: list[Future[dict[str, Any]]] = [
            pool.submit(run_point, str(sweep.path), point, cache_dir) for point in points]
        try:
            for future in as_completed(futures):
                yield future.result()
        finally:
            for future in futures:
                future.cancel()


def dask_install_hint() -> str:
    """How to install the Dask extra: from a source checkout (an editable install, or ghsim
    run from the repository) ``pip install -e '.[dask]'`` in it; else from the index."""
    root = Path(ghsim.__file__).resolve().parents[1]
    if (root / "pyproject.toml").is_file() and (root / "ghsim").is_dir():
        return f"pip install -e '.[dask]' (in the source checkout {root})"
    return "pip install 'ghsim[dask]'"


def _dask(sweep: Sweep, points: list[Point], address: str,
          cache_dir: str | None) -> Iterator[dict[str, Any]]:
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError:
        raise InputError("--scheduler", "", f"needs dask.distributed: {dask_install_hint()}") \
            from None
    try:
        client = Client(address, timeout=30)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError) as error:
        raise InputError("--scheduler", "", f"cannot reach {address}: {error}") from None
    with client:
        futures = [client.submit(run_point, str(sweep.path.resolve()), point, cache_dir,
                                 pure=False) for point in points]
        try:
            for future in dask_completed(futures):  # type: ignore[no-untyped-call]
                yield future.result()
        finally:
            client.cancel(futures)  # type: ignore[no-untyped-call]


def _check_strategies(sweep: Sweep) -> None:
    """Offload strategies are registered policies, not schema values: a misspelt one in the
    grid or a case is a mistake in the sweep file, refused before any point runs."""
    from ghsim.workload.offload import policy_class

    key = "offload.strategy"
    given = [(f"grid.{key}", value) for value in sweep.spec.grid.get(key, [])]
    given += [(f"cases[{i}].{key}", case[key]) for i, case in enumerate(sweep.spec.cases)
              if key in case]
    for where, value in given:
        policy_class(str(value), sweep.source, where)


def run_sweep(sweep: Sweep, workers: int | None = None, scheduler: str | None = None,
              cache_dir: str | Path | None = None,
              on_result: Callable[[dict[str, Any], int], None] | None = None) -> SweepOutcome:
    """Run every point; ``on_result(record, total)`` is called as each one finishes."""
    if not sweep.serving:
        _check_strategies(sweep)
    points = sweep.points()
    cache = str(cache_dir) if cache_dir is not None else None
    if cache is not None:
        Path(cache).mkdir(parents=True, exist_ok=True)
    # Never more worker processes than points.
    local_workers = max(1, min(workers or os.cpu_count() or 1, len(points)))
    stream = (_dask(sweep, points, scheduler, cache) if scheduler is not None
              else _local(sweep, points, local_workers, cache))
    outcome = SweepOutcome(sweep, [])
    try:
        for record in stream:
            outcome.records.append(record)
            outcome.cached += bool(record.get("cached"))
            outcome.simulated += has_result(record) and not record.get("cached")
            _store(cache, record)
            if on_result is not None:
                on_result(record, len(points))
    except KeyboardInterrupt:
        outcome.interrupted = True
    return outcome
