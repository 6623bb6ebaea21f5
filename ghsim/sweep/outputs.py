"""What ``ghsim sweep -o DIR`` writes: results.json, results.csv, plots (PNG, SVG), report.html."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from ghsim.config.sweep import Point
from ghsim.errors import InputError, printable
from ghsim.outputs import atomic_open, dumps_strict, write_text
from ghsim.report.html import setup_rows, sweep_report
from ghsim.report.plots import PARTS, save, sweep_figures
from ghsim.serving.costs import PARTS as SERVING_PARTS
from ghsim.sweep.record import has_result
from ghsim.sweep.runner import SweepOutcome

COLUMNS = ("rank", "label", "step_time_s", "tokens_per_s", "tokens_per_s_per_gpu",
           "model_tflops_per_gpu", "mfu", "fits", "does_not_fit", "hbm_peak_bytes",
           "hbm_capacity_bytes", "h2d_bytes", "d2h_bytes", "host_link_utilization",
           "busiest_stage_share", "bottleneck", "error", "skipped", "digest")
SERVING_COLUMNS = ("rank", "label", "output_tokens_per_s", "output_tokens_per_s_per_gpu",
                   "ttft_p99_s", "tpot_p99_s", "fits", "does_not_fit", "hbm_peak_bytes",
                   "hbm_capacity_bytes", "bottleneck", "error", "skipped", "digest")
"""The columns of a sweep over a served model; its breakdown columns are the serving parts
(``ghsim.serving.costs.PARTS``)."""
"""``does_not_fit`` names the memory tiers that overflow (``hbm``, ``hbm+lpddr``; empty when
the point fits); ``h2d_bytes`` / ``d2h_bytes`` are the host-link (C2C or PCIe) bytes one GPU
moves per step each way and ``host_link_utilization`` the busier direction's share of the
step; ``busiest_stage_share`` is the busiest pipeline stage's compute-stream share of the step
(the result's ``stages``; empty without pipeline parallelism)."""


def summary_line(outcome: SweepOutcome) -> str:
    total = len(outcome.sweep.points())
    failed = sum(1 for r in outcome.records if r["error"])
    skipped = sum(1 for r in outcome.records if r["skipped"])
    text = (f"{len(outcome.records)} of {total} points: {outcome.simulated} simulated, "
            f"{outcome.cached} from the cache, {skipped} filtered out, {failed} invalid")
    return text + (" (interrupted)" if outcome.interrupted else "")


def report_summary(outcome: SweepOutcome) -> str:
    """The summary line of ``report.html``: like :func:`summary_line` without what came from
    the cache, so that the page is the same file however often the sweep is run."""
    total = len(outcome.sweep.points())
    done = sum(1 for r in outcome.records if has_result(r))
    failed = sum(1 for r in outcome.records if r["error"])
    skipped = sum(1 for r in outcome.records if r["skipped"])
    text = (f"{len(outcome.records)} of {total} points: {done} with results, {skipped} filtered "
            f"out, {failed} invalid")
    return text + (" (interrupted)" if outcome.interrupted else "")


def sweep_setup(outcome: SweepOutcome) -> list[tuple[str, str]]:
    """The base scenario's system, GPUs, model and layout, and what the sweep varies."""
    sweep = outcome.sweep
    rows = [("base scenario", str(sweep.spec.base.name or "(inline)"))]
    try:
        base = sweep.scenario(Point(-1, ())).spec.model_dump(mode="json")
    except InputError:
        base = sweep.spec.base.model_dump(mode="json")
    rows += [(f"base {key}", text) for key, text in setup_rows(base)]
    rows += [(f"varies {key}", ", ".join(map(str, values)))
             for key, values in sweep.spec.grid.items()]
    rows += [(f"case {index + 1}", ", ".join(f"{k}={v}" for k, v in case.items()))
             for index, case in enumerate(sweep.spec.cases)]
    if sweep.spec.filter:
        rows.append(("filter", sweep.spec.filter))
    rows.append(("ranked by", sweep.rank_by + (" (highest first)" if sweep.descending
                                               else " (lowest first)")))
    return rows


def as_json(outcome: SweepOutcome) -> dict[str, Any]:
    return {"sweep": outcome.sweep.spec.name, "results": outcome.ranked(),
            "best": outcome.best(), "interrupted": outcome.interrupted,
            "summary": summary_line(outcome)}


def write_outputs(outcome: SweepOutcome, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    ranked = outcome.ranked()
    write_text(directory / "results.json",
               dumps_strict(as_json(outcome), str(directory / "results.json"), indent=2) + "\n")
    axes = sorted({key for r in ranked for key in r["overrides"]})
    serving = outcome.sweep.serving
    columns = SERVING_COLUMNS if serving else COLUMNS
    parts = SERVING_PARTS if serving else PARTS
    with atomic_open(directory / "results.csv", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*columns, *axes, *(f"breakdown_{p}_s" for p in parts)])
        for rank, record in enumerate(ranked, 1):
            breakdown = record["breakdown_s"] or {}
            row = [rank if has_result(record) else "",
                   *(record.get(c) for c in columns[1:]),
                   *(record["overrides"].get(a, "") for a in axes),
                   *(breakdown.get(p, "") for p in parts)]
            writer.writerow([printable(cell) if isinstance(cell, str) else cell for cell in row])
    svgs = save(sweep_figures(ranked), directory)
    spec = outcome.sweep.spec
    write_text(directory / "report.html",
               sweep_report(spec.name, spec.description, ranked, svgs, report_summary(outcome),
                            sweep_setup(outcome)))
