"""What ``ghsim sweep -o DIR`` writes: results.json, results.csv, plots (PNG, SVG), report.html."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from ghsim.outputs import atomic_open, write_text
from ghsim.report.html import sweep_report
from ghsim.report.plots import PARTS, save, sweep_figures
from ghsim.sweep.runner import SweepOutcome

COLUMNS = ("rank", "label", "step_time_s", "tokens_per_s", "tokens_per_s_per_gpu",
           "model_tflops_per_gpu", "mfu", "fits", "hbm_peak_bytes", "hbm_capacity_bytes",
           "bottleneck", "error", "skipped", "digest")


def summary_line(outcome: SweepOutcome) -> str:
    total = len(outcome.sweep.points())
    failed = sum(1 for r in outcome.records if r["error"])
    skipped = sum(1 for r in outcome.records if r["skipped"])
    text = (f"{len(outcome.records)} of {total} points: {outcome.simulated} simulated, "
            f"{outcome.cached} from the cache, {skipped} filtered out, {failed} invalid")
    return text + (" (interrupted)" if outcome.interrupted else "")


def as_json(outcome: SweepOutcome) -> dict[str, Any]:
    return {"sweep": outcome.sweep.spec.name, "results": outcome.ranked(),
            "best": outcome.best(), "interrupted": outcome.interrupted,
            "summary": summary_line(outcome)}


def write_outputs(outcome: SweepOutcome, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    ranked = outcome.ranked()
    write_text(directory / "results.json", json.dumps(as_json(outcome), indent=2) + "\n")
    axes = sorted({key for r in ranked for key in r["overrides"]})
    with atomic_open(directory / "results.csv", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*COLUMNS, *axes, *(f"breakdown_{p}_s" for p in PARTS)])
        for rank, record in enumerate(ranked, 1):
            breakdown = record["breakdown_s"] or {}
            writer.writerow([rank if record["step_time_s"] is not None else "",
                             *(record.get(c) for c in COLUMNS[1:]),
                             *(record["overrides"].get(a, "") for a in axes),
                             *(breakdown.get(p, "") for p in PARTS)])
    svgs = save(sweep_figures(ranked), directory)
    spec = outcome.sweep.spec
    write_text(directory / "report.html",
               sweep_report(spec.name, spec.description, ranked, svgs, summary_line(outcome)))
