"""What the console tables say, by hand: the breakdown's shares of the step, the error against
a published parameter count, validate's summary line."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from ghsim.cli import main
from ghsim.config import load_scenario
from ghsim.engine.simulate import simulate
from ghsim.report.console import mape_clause, render_result


def test_the_breakdown_gives_each_part_its_share_of_the_step() -> None:
    result = simulate(load_scenario("llama3-8b-gh200", ["model.layers=2"])).to_dict()
    console = Console(record=True, width=200)
    render_result(result, "t", console)
    text = console.export_text()
    step = result["step_time_s"]
    shown = 0
    for part, seconds in result["breakdown_s"].items():
        if seconds > 0:
            row = re.search(rf"^\s*{re.escape(part)}\s+(\S+)\s+(\S+)%", text, re.MULTILINE)
            assert row is not None, part
            assert float(row.group(2)) == pytest.approx(100 * seconds / step, abs=0.051)
            shown += 1
    assert shown >= 2


def test_a_model_s_error_against_its_published_size(capsys: pytest.CaptureFixture[str]) -> None:
    """Llama 2 7B counts 6,738,415,616 parameters against the 6.738 B published: +0.0062 %,
    shown as +0.01 %."""
    assert main(["inspect", "llama2-7b"]) == 0
    assert re.search(r"published\s+6\.74 B \(\+0\.01%\)", capsys.readouterr().out)


def test_validate_s_summary_gives_the_mape_and_the_worst_error() -> None:
    assert mape_clause({"mape": 0.05, "max_abs_error": 0.2}) == "MAPE 5.0%, worst 20.0%"
    assert mape_clause({"mape": None, "max_abs_error": None}) == (
        "MAPE n/a (no point simulated)")
