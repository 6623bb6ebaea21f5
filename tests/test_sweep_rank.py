"""How a sweep ranks, shows and records its points (an interrupted one too), and how its filter
reads: by hand, on made-up records and one simulated point."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from ghsim.cli import main
from ghsim.config import Scenario
from ghsim.config.expression import evaluate, lookup_in, parse_filter
from ghsim.config.sweep import Sweep, load_sweep
from ghsim.engine.simulate import simulate
from ghsim.report.console import render_sweep
from ghsim.sweep import runner
from ghsim.sweep.outputs import (
    COLUMNS,
    report_summary,
    summary_line,
    sweep_setup,
    write_outputs,
)
from ghsim.sweep.record import result_record
from ghsim.sweep.runner import SweepOutcome

SWEEP = Path(__file__).resolve().parents[1] / "configs" / "sweeps" / "offload-14b-gh200.yaml"


def _sweep(rank_by: str | None = None) -> Sweep:
    """The shipped study, ranked by ``rank_by`` where given."""
    sweep = load_sweep(SWEEP)
    if rank_by is not None:
        sweep.spec = sweep.spec.model_copy(update={"rank_by": rank_by})
    return sweep


def _record(index: int, step: float | None, fits: bool | None = True,
            **overrides: Any) -> dict[str, Any]:
    return {"index": index, "step_time_s": step, "fits": fits, "overrides": overrides,
            "tokens_per_s": None if step is None else 1e4 / step, "mfu": 0.5,
            "hbm_peak_bytes": 2**30, "bottleneck": "gpu_tensor_cores", "does_not_fit": "hbm",
            "error": None, "skipped": "filtered out"}


def _ids(records: list[dict[str, Any]]) -> list[int]:
    return [r["index"] for r in records]


def test_fitting_points_rank_first_by_the_metric_then_by_their_overrides() -> None:
    sweep = _sweep()
    assert sweep.rank_by == "step_time_s" and not sweep.descending  # fastest first
    records = [_record(0, 2.0, tp=2), _record(1, 1.0, fits=False, tp=1),
               _record(2, 3.0, tp=4), _record(3, None, fits=None, tp=8),
               _record(4, 2.0, tp=1), _record(5, None, fits=None, tp=3)]
    outcome = SweepOutcome(sweep, records)
    # the one that does not fit goes after every one that does, however fast; a tie at 2.0 s
    # is broken by the overrides (tp 1 before tp 2); unsimulated points last, in file order
    assert _ids(outcome.ranked()) == [4, 0, 2, 1, 3, 5]
    best = outcome.best()
    assert best is not None and best["index"] == 4


def test_the_best_point_is_never_one_that_does_not_fit() -> None:
    outcome = SweepOutcome(_sweep(), [_record(0, 1.0, fits=False),
                                               _record(1, 2.0, fits=False)])
    assert _ids(outcome.ranked()) == [0, 1]
    assert outcome.best() is None


def test_a_throughput_ranks_highest_first() -> None:
    sweep = _sweep("tokens_per_s")
    assert sweep.descending
    outcome = SweepOutcome(sweep, [_record(0, 2.0), _record(1, 1.0), _record(2, 4.0)])
    assert _ids(outcome.ranked()) == [1, 0, 2]


def test_points_without_the_ranked_field_come_after_those_with_it() -> None:
    sweep = _sweep("hbm_peak_bytes")
    records = [dict(_record(0, 1.0), hbm_peak_bytes=None), dict(_record(1, 1.0), hbm_peak_bytes=5),
               dict(_record(2, 1.0), hbm_peak_bytes=3)]
    assert _ids(SweepOutcome(sweep, records).ranked()) == [2, 1, 0]


def test_the_table_shows_the_field_it_ranks_by() -> None:
    sweep = _sweep("tokens_per_s")
    outcome = SweepOutcome(sweep, [_record(0, 2.0, tp=2), _record(1, 4.0, tp=1)])
    console = Console(record=True, width=200, color_system=None)
    render_sweep(outcome.ranked(), "2 points", sweep.rank_by, console)
    lines = console.export_text().splitlines()
    header = next(line for line in lines if "step" in line)
    assert "tok/s" in header
    rows = [line.split() for line in lines[lines.index(header) + 1:] if "%" in line]
    assert [row[:6] for row in rows] == [["1", "2", "2", "s", "50.0%", "5,000"],
                                         ["2", "1", "4", "s", "50.0%", "2,500"]]


def test_a_point_s_record_carries_its_peak_and_its_busier_host_direction() -> None:
    sweep = _sweep()
    wanted = {"system": "gh200-single", "offload.strategy": "optimizer"}
    point = next(p for p in sweep.points() if dict(p.overrides) == wanted)
    scenario = sweep.scenario(point)
    assert isinstance(scenario, Scenario)
    result = simulate(scenario)
    hbm = result.memory["hbm"]
    record = result_record(point, scenario, result)
    assert record["hbm_peak_bytes"] == hbm["peak_bytes"] < hbm["capacity_bytes"]
    assert record["hbm_capacity_bytes"] == hbm["capacity_bytes"]
    # the host link's busier direction, whichever it is
    for down, up in ((0.25, 0.5), (0.5, 0.25)):
        result.host.update(h2d_utilization=down, d2h_utilization=up)
        assert result_record(point, scenario, result)["host_link_utilization"] == 0.5


@pytest.mark.parametrize(("text", "expected"), [
    ("1 < parallelism.tp < 8", True),            # chained: both comparisons hold
    ("1 < parallelism.tp < 3", False),           # the second one fails
    ("parallelism.tp > 8 or num_gpus == 16", True),
    ("parallelism.tp > 8 and num_gpus == 16", False),
    ("not parallelism.tp in [1, 2]", True),
    ("num_gpus // parallelism.tp % 3 == 1", True),   # 16 // 4 = 4, 4 % 3 = 1
    ("max(parallelism.tp, 6) - min(2, num_gpus) == 4", True),
    ("abs(1 - parallelism.tp) == 3", True),
    ("num_gpus / parallelism.tp == 4.0", True),
])
def test_filters_evaluate_as_python_would(text: str, expected: bool) -> None:
    values = {"num_gpus": 16, "parallelism": {"tp": 4}}
    assert evaluate(parse_filter(text), lookup_in(values)) is expected


def _outcome_of_every_kind() -> SweepOutcome:
    """Two simulated points, two filtered out, one invalid; one simulated here, one cached."""
    records = [{**_record(0, 2.0, tp=2), "skipped": None},
               {**_record(1, 1.0, tp=1), "skipped": None},
               _record(2, None, fits=None, tp=4),
               {**_record(3, None, fits=None, tp=8), "skipped": None,
                "error": "tp 8 does not divide 12 heads"},
               _record(4, None, fits=None, tp=16)]
    for record in records:
        record.update(label=f"tp={record['overrides']['tp']}",
                      breakdown_s={"compute": record["step_time_s"]}
                      if record["step_time_s"] else None)
        for column in COLUMNS[1:]:
            record.setdefault(column, None)
    return SweepOutcome(_sweep(), records, simulated=1, cached=1)


def test_the_summary_counts_each_kind_of_point() -> None:
    outcome = _outcome_of_every_kind()
    assert summary_line(outcome) == (
        "5 of 12 points: 1 simulated, 1 from the cache, 2 filtered out, 1 invalid")
    assert report_summary(outcome) == (
        "5 of 12 points: 2 with results, 2 filtered out, 1 invalid")


def test_the_report_says_which_way_it_ranks() -> None:
    assert dict(sweep_setup(SweepOutcome(_sweep(), [])))["ranked by"] == (
        "step_time_s (lowest first)")
    assert dict(sweep_setup(SweepOutcome(_sweep("tokens_per_s"), [])))["ranked by"] == (
        "tokens_per_s (highest first)")


def test_results_csv_ranks_only_simulated_points(tmp_path: Path) -> None:
    write_outputs(_outcome_of_every_kind(), tmp_path)
    with (tmp_path / "results.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["rank"], row["label"], row["tp"]) for row in rows] == [
        ("1", "tp=1", "1"), ("2", "tp=2", "2"), ("", "tp=4", "4"), ("", "tp=8", "8"),
        ("", "tp=16", "16")]
    assert rows[3]["error"] == "tp 8 does not divide 12 heads"
    assert rows[0]["breakdown_compute_s"] == "1.0"


def test_an_interrupted_sweep_writes_what_it_has_and_exits_130(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C after the first point: its result is kept and written, and the exit status says
    the study is incomplete (130, as a shell reports SIGINT), never 0."""
    real = runner._local

    def first_then_interrupt(*args: Any) -> Iterator[dict[str, Any]]:
        yield next(real(*args))
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "_local", first_then_interrupt)
    assert main(["sweep", str(SWEEP), "-o", str(tmp_path), "--workers", "1", "--json"]) == 130
    printed = json.loads(capsys.readouterr().out)
    written = json.loads((tmp_path / "results.json").read_text())
    assert printed["interrupted"] is written["interrupted"] is True
    assert len(written["results"]) == 1 and written["summary"].startswith("1 of 12 points")

