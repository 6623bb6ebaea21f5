"""Plots of a sweep (and of one run) with matplotlib's Agg backend, as PNG and SVG.

* ``step_vs_hbm``: step time against the HBM peak of each point, one colour per offload
  strategy, crosses for points that do not fit;
* ``breakdown``: where the time goes, stacked, for the best configurations;
* ``sensitivity``: step time against each numeric axis (the best point for each value).
"""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from ghsim.outputs import atomic_open

PARTS = ("compute", "tp", "cp", "pp", "dp", "pipeline_bubble", "offload", "migration", "cpu",
         "other")
COLOURS = dict(zip(PARTS, ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3",
                           "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd"), strict=True))


def _strategy(record: dict[str, Any]) -> str:
    return str(record["overrides"].get("offload.strategy", "as in the base"))


def step_vs_hbm(records: list[dict[str, Any]]) -> Figure:
    figure, axes = plt.subplots(figsize=(7, 4.5))
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        groups[_strategy(record)].append(record)
    for name, group in sorted(groups.items()):
        for fits, marker in ((True, "o"), (False, "x")):
            chosen = [r for r in group if bool(r["fits"]) == fits]
            if chosen:
                axes.scatter([r["hbm_peak_bytes"] / 2**30 for r in chosen],
                             [r["step_time_s"] for r in chosen], marker=marker,
                             label=f"{name}{'' if fits else ' (does not fit)'}")
    capacities = {r["hbm_capacity_bytes"] for r in records if r["hbm_capacity_bytes"]}
    for capacity in sorted(capacities):
        axes.axvline(capacity / 2**30, color="grey", linestyle="--", linewidth=0.8)
    axes.set_xlabel("HBM peak per GPU (GiB); dashed: capacity")
    axes.set_ylabel("step time (s)")
    axes.set_title("Step time against HBM peak")
    axes.legend(fontsize=7)
    figure.tight_layout()
    return figure


def breakdown(records: list[dict[str, Any]], most: int = 20) -> Figure:
    shown = records[:most]
    figure, axes = plt.subplots(figsize=(8, 0.35 * len(shown) + 1.5))
    labels = [r["label"] for r in shown]
    left = [0.0] * len(shown)
    for part in PARTS:
        widths = [(r["breakdown_s"] or {}).get(part, 0.0) for r in shown]
        if any(widths):
            axes.barh(labels, widths, left=left, color=COLOURS[part], label=part)
            left = [a + b for a, b in zip(left, widths, strict=True)]
    axes.invert_yaxis()
    axes.set_xlabel("seconds per step")
    axes.set_title("Where the time goes")
    axes.tick_params(axis="y", labelsize=7)
    axes.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    return figure


def sensitivity(records: list[dict[str, Any]]) -> Figure | None:
    axes_values: dict[str, dict[float, float]] = defaultdict(dict)
    for record in records:
        for key, value in record["overrides"].items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                best = axes_values[key].get(float(value))
                step = record["step_time_s"]
                axes_values[key][float(value)] = step if best is None else min(best, step)
    numeric = {k: v for k, v in axes_values.items() if len(v) > 1}
    if not numeric:
        return None
    figure, grid = plt.subplots(1, len(numeric), figsize=(4 * len(numeric), 3.5), squeeze=False)
    for axes, (key, values) in zip(grid[0], sorted(numeric.items()), strict=True):
        xs = sorted(values)
        axes.plot(xs, [values[x] for x in xs], marker="o")
        axes.set_xlabel(key, fontsize=8)
        axes.set_ylabel("best step time (s)")
    figure.suptitle("Sensitivity of the step time")
    figure.tight_layout()
    return figure


def sweep_figures(records: list[dict[str, Any]]) -> dict[str, Figure]:
    """The plots of a sweep's simulated points (ranked)."""
    done = [r for r in records if r["step_time_s"] is not None]
    if not done:
        return {}
    figures = {"step_vs_hbm": step_vs_hbm(done), "breakdown": breakdown(done)}
    extra = sensitivity(done)
    if extra is not None:
        figures["sensitivity"] = extra
    return figures


def save(figures: dict[str, Figure], directory: Path) -> dict[str, str]:
    """Write each figure as PNG and SVG; returns the SVG text of each, for the HTML report."""
    svgs = {}
    for name, figure in figures.items():
        for suffix, dpi in (("png", 120), ("svg", 72)):
            with atomic_open(directory / f"{name}.{suffix}", "wb") as handle:
                figure.savefig(handle, format=suffix, dpi=dpi)
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg")
        svgs[name] = buffer.getvalue()
        plt.close(figure)
    return svgs
