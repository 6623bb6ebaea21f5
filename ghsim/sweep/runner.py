"""Running a sweep: every point simulated in worker processes (or on a Dask cluster), results
streamed back as they finish, cached by the resolved scenario's hash, ranked at the end.

The same function, :func:`run_point`, runs each point in both cases: locally through a
``ProcessPoolExecutor``, on a cluster through ``distributed.Client.submit``. A point whose
scenario is invalid (a layout that does not divide, a filter that rejects it) is recorded with
its reason; the others go on. Ctrl-C stops the sweep and keeps what has finished.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ghsim.config.sweep import Point, Sweep, load_sweep
from ghsim.engine.simulate import simulate
from ghsim.errors import InputError
from ghsim.sweep.record import empty_record, result_record


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
        digest = scenario.digest()
        cached = Path(cache_dir, f"{digest}.json") if cache_dir else None
        if cached is not None and cached.exists():
            stored = json.loads(cached.read_text())
            stored.update(index=point.index, label=point.label, cached=True,
                          overrides=record["overrides"])
            return dict(stored)
        return result_record(point, scenario, simulate(scenario))
    except InputError as error:
        record["error"] = error.line()
        return record


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
        """Valid results by ``rank_by`` (fitting ones first), then skipped and failed points."""
        key, descending = self.sweep.spec.rank_by, self.sweep.spec.descending
        done = [r for r in self.records if r["step_time_s"] is not None]
        done.sort(key=lambda r: (not r["fits"], -(r[key] or 0) if descending else (r[key] or 0)))
        rest = sorted((r for r in self.records if r["step_time_s"] is None),
                      key=lambda r: r["index"])
        return done + rest

    def best(self) -> dict[str, Any] | None:
        ranked = [r for r in self.ranked() if r["step_time_s"] is not None and r["fits"]]
        return ranked[0] if ranked else None


def _store(cache_dir: str | None, record: dict[str, Any]) -> None:
    if not cache_dir or record.get("digest") is None or record.get("cached"):
        return
    path = Path(cache_dir, f"{record['digest']}.json")
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(record))
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


def _dask(sweep: Sweep, points: list[Point], address: str,
          cache_dir: str | None) -> Iterator[dict[str, Any]]:
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError:
        raise InputError("--scheduler", "", "needs dask.distributed: pip install 'ghsim[dask]'") \
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


def run_sweep(sweep: Sweep, workers: int | None = None, scheduler: str | None = None,
              cache_dir: str | Path | None = None,
              on_result: Callable[[dict[str, Any], int], None] | None = None) -> SweepOutcome:
    """Run every point; ``on_result(record, total)`` is called as each one finishes."""
    points = sweep.points()
    cache = str(cache_dir) if cache_dir is not None else None
    if cache is not None:
        Path(cache).mkdir(parents=True, exist_ok=True)
    stream = (_dask(sweep, points, scheduler, cache) if scheduler is not None
              else _local(sweep, points, workers or os.cpu_count() or 1, cache))
    outcome = SweepOutcome(sweep, [])
    try:
        for record in stream:
            outcome.records.append(record)
            outcome.cached += bool(record.get("cached"))
            outcome.simulated += record["step_time_s"] is not None and not record.get("cached")
            _store(cache, record)
            if on_result is not None:
                on_result(record, len(points))
    except KeyboardInterrupt:
        outcome.interrupted = True
    return outcome
