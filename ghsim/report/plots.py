"""Plots of a sweep (and of one run) with matplotlib's Agg backend, as PNG and SVG.

* ``step_vs_hbm``: step time against the HBM peak of each point, one colour and one marker
  per system (or per value of the sweep's first non-numeric axis), hollow markers for points
  that do not fit in memory, the legend outside the axes;
* ``breakdown``: where the time goes, stacked, for the best configurations (its title says so
  when it shows only the first ones; points that do not fit are hatched and labelled);
* ``sensitivity``: step time against each numeric axis (the best point that fits in memory for
  each value; points that do not fit are left out).

The files are reproducible: the same sweep gives the same bytes (a fixed SVG hash salt, no
date in the metadata).
"""

from __future__ import annotations

import io
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ghsim.errors import printable
from ghsim.outputs import atomic_open
from ghsim.report.keys import short_key, short_label

matplotlib.rcParams["svg.hashsalt"] = "ghsim"  # ids in the SVG files are the same every run
METADATA: dict[str, dict[str, str | None]] = {"svg": {"Date": None}, "png": {}}
"""``savefig`` metadata per format: no creation date, so that files are reproducible."""
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
SERIES_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                  "#7f7f7f", "#bcbd22", "#17becf")

PARTS = ("compute", "tp", "cp", "ep", "pp", "dp", "pipeline_bubble", "offload", "migration",
         "cpu", "other")
COLOURS = dict(zip(PARTS, ("#4c72b0", "#dd8452", "#55a868", "#e5ae38", "#c44e52", "#8172b3",
                           "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd"), strict=True))


def _label(text: Any) -> str:
    """A user's string as a plot label: control characters escaped, and ``$`` escaped so
    that matplotlib never parses it as mathtext."""
    return printable(str(text)).replace("$", r"\$")


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _series_key(records: list[dict[str, Any]]) -> str | None:
    """The axis whose values are told apart by colour and marker: ``system`` when the sweep
    varies it, else its first non-numeric axis."""
    keys: list[str] = []
    for record in records:
        keys += [k for k, v in record["overrides"].items() if k not in keys and not _numeric(v)]
    return "system" if "system" in keys else (keys[0] if keys else None)


def _does_not_fit(record: dict[str, Any]) -> str:
    return f" (does not fit: {record.get('does_not_fit') or '?'})" \
        if record.get("fits") is False else ""


def step_vs_hbm(records: list[dict[str, Any]]) -> Figure:
    records = [r for r in records if r.get("hbm_peak_bytes") is not None]
    figure, axes = plt.subplots(figsize=(8, 4.5))
    key = _series_key(records)
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        groups[str(record["overrides"].get(key, "as in the base")) if key else "points"].append(
            record)
    notes: list[tuple[float, float, str, str]] = []
    for index, (name, group) in enumerate(sorted(groups.items())):
        colour, marker = SERIES_COLOURS[index % 10], MARKERS[index % len(MARKERS)]
        for fits in (True, False):
            chosen = [r for r in group if (r["fits"] is not False) == fits]
            if not chosen:
                continue
            axes.scatter([r["hbm_peak_bytes"] / 2**30 for r in chosen],
                         [r["step_time_s"] for r in chosen], marker=marker, s=42,
                         facecolors=colour if fits else "none", edgecolors=colour,
                         linewidths=1.2, label=_label(name) if fits else None, zorder=3)
        if not any(r["fits"] is not False for r in group):  # a legend entry all the same
            axes.scatter([], [], marker=marker, color=colour, label=_label(name))
        notes += [(r["hbm_peak_bytes"] / 2**30, r["step_time_s"], colour,
                   ", ".join(f"{v}" for k, v in r["overrides"].items() if k != key))
                  for r in group]
    capacities = {r["hbm_capacity_bytes"] for r in records if r["hbm_capacity_bytes"]}
    for capacity in sorted(capacities):
        axes.axvline(capacity / 2**30, color="grey", linestyle="--", linewidth=0.8)
    _annotate(axes, notes)
    handles, _ = axes.get_legend_handles_labels()
    if any(r["fits"] is False for r in records):
        handles.append(Line2D([], [], marker="o", linestyle="", markerfacecolor="none",
                              markeredgecolor="black", label="hollow: does not fit in memory"))
    axes.set_xlabel("HBM peak per GPU (GiB); dashed: HBM capacity")
    axes.set_ylabel("step time (s)")
    axes.set_title("Step time against HBM peak")
    axes.legend(handles=handles, fontsize=7, title=_label(short_key(key)) if key else None,
                title_fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                borderaxespad=0.0)
    figure.tight_layout()
    return figure


def _annotate(axes: Any, notes: list[tuple[float, float, str, str]], most: int = 30) -> None:
    """Label each point with its other axes' values, skipping a label that would overlap one
    already placed (the table of the report has every point)."""
    if len(notes) > most:
        return
    axes.autoscale_view()
    placed: list[tuple[float, float, float]] = []
    for x, y, colour, text in sorted(notes, key=lambda n: (n[1], n[0])):
        if not text:
            continue
        px, py = axes.transData.transform((x, y))
        width = 3.6 * len(text)  # about 6-point text, in pixels at the figure's dpi
        if any(abs(py - qy) < 9 and px < qx + qw and qx < px + width for qx, qy, qw in placed):
            continue
        placed.append((px, py, width))
        axes.annotate(_label(text), (x, y), xytext=(4, 3), textcoords="offset points",
                      fontsize=6, color=colour)


def _bar_label(record: dict[str, Any]) -> str:
    label = short_label(record["overrides"]) if "overrides" in record else str(record["label"])
    return "\n".join(textwrap.wrap(_label(label + _does_not_fit(record)), 48,
                                   break_long_words=False)) or " "


def breakdown(records: list[dict[str, Any]], most: int = 20) -> Figure:
    """Stacked bars of where the time goes for the first ``most`` records (in their order);
    the title says how many of how many it shows."""
    shown = records[:most]
    labels = [_bar_label(r) for r in shown]
    lines = sum(label.count("\n") + 1 for label in labels)
    figure, axes = plt.subplots(figsize=(9, 0.22 * lines + 0.2 * len(shown) + 1.6))
    positions = list(range(len(shown)))
    left = [0.0] * len(shown)
    hatches = ["//" if r.get("fits") is False else "" for r in shown]
    for part in PARTS:
        widths = [(r["breakdown_s"] or {}).get(part, 0.0) for r in shown]
        if any(widths):
            bars = axes.barh(positions, widths, left=left, color=COLOURS[part], label=part)
            for bar, hatch in zip(bars, hatches, strict=True):
                bar.set_hatch(hatch)
            left = [a + b for a, b in zip(left, widths, strict=True)]
    axes.set_yticks(positions, labels)
    axes.invert_yaxis()
    axes.set_xlabel("seconds per step")
    title = "Where the time goes"
    if len(records) > len(shown):
        title += f": the first {len(shown)} of {len(records)} points, by rank"
    axes.set_title(title)
    axes.tick_params(axis="y", labelsize=7)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    figure.tight_layout()
    return figure


def sensitivity(records: list[dict[str, Any]]) -> Figure | None:
    """The best step time at each value of each numeric axis, over the points that fit in
    memory (a point that does not fit has no step time a user could get)."""
    axes_values: dict[str, dict[float, float]] = defaultdict(dict)
    for record in records:
        if record["fits"] is False:
            continue
        for key, value in record["overrides"].items():
            if _numeric(value):
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
        axes.set_xlabel(_label(short_key(key)), fontsize=8)
        axes.set_ylabel("best step time (s)")
    figure.suptitle("Sensitivity of the step time (points that fit in memory)")
    figure.tight_layout()
    return figure


def sweep_figures(records: list[dict[str, Any]]) -> dict[str, Figure]:
    """The plots of a sweep's simulated points (ranked)."""
    served = [r for r in records if r.get("output_tokens_per_s") is not None]
    if served:
        return {"throughput": throughput(served)}
    done = [r for r in records if r["step_time_s"] is not None]
    if not done:
        return {}
    figures: dict[str, Figure] = {}
    if any(r.get("hbm_peak_bytes") is not None for r in done):
        figures["step_vs_hbm"] = step_vs_hbm(done)
    figures["breakdown"] = breakdown(done)
    extra = sensitivity(done)
    if extra is not None:
        figures["sensitivity"] = extra
    return figures


def throughput(records: list[dict[str, Any]], most: int = 24) -> Figure:
    """Output tokens per second of a serving sweep's best points, one bar each (hatched, at 0,
    where the model cannot be served)."""
    shown = records[:most]
    labels = [_bar_label(r) for r in shown]
    lines = sum(label.count("\n") + 1 for label in labels)
    figure, axes = plt.subplots(figsize=(9, 0.22 * lines + 0.2 * len(shown) + 1.6))
    values = [r["output_tokens_per_s"] for r in shown]
    bars = axes.barh(range(len(shown)), values, color=SERIES_COLOURS[0])
    for bar, record in zip(bars, shown, strict=True):
        if record["fits"] is False:
            bar.set_hatch("//")
            bar.set_facecolor("none")
    axes.set_yticks(range(len(shown)), labels, fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel("output tokens per second (all GPUs)")
    title = "Throughput" + (f" (best {most} of {len(records)})" if len(records) > most else "")
    axes.set_title(title)
    figure.tight_layout()
    return figure


def save(figures: dict[str, Figure], directory: Path) -> dict[str, str]:
    """Write each figure as PNG and SVG; returns the SVG text of each, for the HTML report."""
    svgs = {}
    for name, figure in figures.items():
        for suffix, dpi in (("png", 120), ("svg", 72)):
            with atomic_open(directory / f"{name}.{suffix}", "wb") as handle:
                figure.savefig(handle, format=suffix, dpi=dpi, bbox_inches="tight",
                               metadata=METADATA[suffix])
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", bbox_inches="tight", metadata=METADATA["svg"])
        svgs[name] = buffer.getvalue()
        plt.close(figure)
    return svgs
