"""What a reader of report.html and of a sweep's plots is shown, by hand: a run that does not fit
says so, a sweep's best point fits, names are escaped, the layout and the pipeline stages are
there; each plot draws the points it says it draws; key paths and durations are written
readably."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from matplotlib.collections import PathCollection

from ghsim.config import load_scenario
from ghsim.engine.simulate import simulate
from ghsim.report import plots
from ghsim.report.html import run_report, sweep_report
from ghsim.report.keys import short_key
from ghsim.units import format_seconds

PIPELINED = ["num_gpus=4", "parallelism.pp=2", "parallelism.vp=2", "model.layers=8"]
"""llama3-8b-gh200 on 4 GPUs, two pipeline stages of two chunks each."""


@pytest.fixture(scope="module")
def pipelined() -> dict[str, Any]:
    return simulate(load_scenario("llama3-8b-gh200", PIPELINED)).to_dict()


def _cell(page: str, label: str) -> str:
    """The text of the cell after the row label ``label``."""
    start = page.index(f'<td class="l">{label}</td>') + len(f'<td class="l">{label}</td>')
    start = page.index(">", start) + 1
    return page[start:page.index("</td>", start)]


# -- report.html of one run ----------------------------------------------------------------------

def test_a_run_report_shows_the_layout_the_stages_and_that_it_fits(
        pipelined: dict[str, Any]) -> None:
    page = run_report("p", pipelined, {})
    assert "tp 1 x pp 2 x cp 1 x dp 2, vp 2;" in _cell(page, "layout")
    assert _cell(page, "fits in memory") == "yes"
    for row in pipelined["stages"]:  # each stage's busy time, the slowest pacing the rest
        assert f'<td class="">{row["busy_share"]:.1%}</td>' in page
    assert page.count('<th class="l">pipeline stage</th>') == 1


def test_a_run_report_says_which_tier_does_not_fit(pipelined: dict[str, Any]) -> None:
    result = copy.deepcopy(pipelined)
    hbm = result["memory"]["hbm"]
    hbm["peak_bytes"] = hbm["capacity_bytes"] + 1  # one byte short
    page = run_report("p", result, {})
    assert _cell(page, "fits in memory") == '<span class="bad">no: hbm</span>'
    assert '<td class="">yes</td>' in page  # the LPDDR5X tier still fits


def test_names_are_escaped_in_the_page(pipelined: dict[str, Any]) -> None:
    result = copy.deepcopy(pipelined)
    result["inputs"]["scenario"]["model"]["name"] = "<script>alert(1)</script>"
    page = run_report("<b>run</b>", result, {})
    assert "<script>" not in page and "<b>run" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


# -- a sweep's page and plots --------------------------------------------------------------------

def _record(index: int, step: float, fits: bool, peak_gib: float,
            overrides: dict[str, Any]) -> dict[str, Any]:
    return {"index": index, "label": f"point {index}", "step_time_s": step, "fits": fits,
            "overrides": overrides, "mfu": 0.4, "tokens_per_s_per_gpu": 1e3,
            "hbm_peak_bytes": peak_gib * 2**30, "hbm_capacity_bytes": 96 * 2**30,
            "h2d_bytes": None, "d2h_bytes": None, "bottleneck": "gpu_tensor_cores",
            "does_not_fit": None if fits else "hbm", "error": None, "skipped": None,
            "breakdown_s": {"compute": step}}


RECORDS = [  # ranked: those that fit first; two non-numeric axes, the system second
    _record(0, 2.0, True, 60, {"offload.strategy": "none", "system": "gh200-nvl2", "tp": 1}),
    _record(1, 3.0, True, 50, {"offload.strategy": "none", "system": "dgx-h100", "tp": 1}),
    _record(2, 4.0, True, 40, {"offload.strategy": "optimizer", "system": "gh200-nvl2",
                               "tp": 2}),
    _record(3, 1.0, False, 120, {"offload.strategy": "none", "system": "dgx-h100", "tp": 2}),
]


def test_a_sweep_s_best_point_is_the_fastest_that_fits() -> None:
    page = sweep_report("s", "", [RECORDS[3], *RECORDS[:3]], {}, "4 points")
    assert "Best that fits in memory: point 0 (2.000 s)." in page
    assert "1 point does not fit in memory" in page


def test_the_sensitivity_plot_shows_the_best_point_that_fits_at_each_value() -> None:
    """At tp 1 the best is 2.0 s; at tp 2 the 1.0 s point does not fit, so 4.0 s."""
    figure = plots.sensitivity(RECORDS)
    assert figure is not None
    (axes,) = figure.axes
    (line,) = axes.get_lines()
    assert list(line.get_xdata()) == [1.0, 2.0] and list(line.get_ydata()) == [2.0, 4.0]


def test_step_against_hbm_colours_by_system_and_hollows_what_does_not_fit() -> None:
    """The system tells the series apart, whichever axis comes first."""
    figure = plots.step_vs_hbm(RECORDS)
    (axes,) = figure.axes
    assert axes.get_legend().get_title().get_text() == "system"
    hollow = [c for c in axes.collections if isinstance(c, PathCollection)
              and [tuple(o) for o in c.get_offsets()] == [(120.0, 1.0)]]
    assert len(hollow) == 1 and len(hollow[0].get_facecolors()) == 0
    filled = [c for c in axes.collections if isinstance(c, PathCollection)
              and (60.0, 2.0) in [tuple(o) for o in c.get_offsets()]]
    assert len(filled) == 1 and len(filled[0].get_facecolors()) > 0


def test_a_dollar_in_a_label_is_text_not_mathtext() -> None:
    figure = plots.breakdown([{**RECORDS[0], "overrides": {"name": "$x$"}}])
    (axes, *_) = figure.axes
    assert axes.get_yticklabels()[0].get_text() == r"name=\$x\$"


def test_saved_plots_carry_no_date(tmp_path: Path) -> None:
    """The same sweep gives the same bytes: no creation date in the SVG metadata."""
    first = plots.save({"b": plots.breakdown(RECORDS)}, tmp_path)["b"]
    second = plots.save({"b": plots.breakdown(RECORDS)}, tmp_path)["b"]
    assert first == second and "<dc:date>" not in first
    assert "<dc:date>" not in (tmp_path / "b.svg").read_text()


# -- key paths and durations as a reader sees them -----------------------------------------------

@pytest.mark.parametrize("width", [12, 20, 24, 25, 26, 40])
def test_a_shortened_key_path_fits_its_width_and_keeps_its_last_part(width: int) -> None:
    key = "system.node.gpu.gpu.host_link.bandwidth_gb_s"
    short = short_key(key, width)
    assert short.endswith("bandwidth_gb_s")
    assert len(short) <= max(width, len("…bandwidth_gb_s"))
    assert short == key or (short.startswith("…") and key.endswith(short[1:]))
    if width in (25, 26):  # the last parts that fit whole, behind the ellipsis
        assert short == "…host_link.bandwidth_gb_s"


@pytest.mark.parametrize(("seconds", "text"), [
    (344e-9, "344 ns"), (20e-6, "20 us"), (1.5e-3, "1.5 ms"), (1.2, "1.2 s"), (0.0, "0 ns")])
def test_durations_are_written_in_the_unit_that_reads_best(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text
