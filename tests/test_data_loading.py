"""The data loader (``training.data_loading``): its workers run ahead of the training loop, so a
step takes at least the step's samples x the time a worker takes for one, over the workers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ghsim.cli import main
from ghsim.config import load_scenario
from ghsim.engine.simulate import data_loading_s, simulate

SMALL = ["model.layers=2", "num_gpus=8", "parallelism.tp=8", "training.global_batch=8",
         "training.micro_batch=2", "training.seq_len=2048"]
"""llama3-8b-gh200 cut to 2 layers on one node: 4 micro-batches of 2 a step, one rank group."""


def _loading(ms: float, workers: int = 2) -> list[str]:
    return [*SMALL, f"training.data_loading.sample_read_ms={ms}",
            f"training.data_loading.workers={workers}",
            "training.data_loading.source=a storage benchmark"]


def test_a_slow_loader_paces_the_step_by_hand() -> None:
    """8 samples a step at 1 s each over 2 workers: 4 s, whatever the GPUs take; the breakdown
    still adds up to the step, and names the loader."""
    gpu_only = simulate(load_scenario("llama3-8b-gh200", SMALL)).step_time_s
    assert gpu_only < 4.0
    result = simulate(load_scenario("llama3-8b-gh200", _loading(1000.0)))
    assert result.step_time_s == pytest.approx(8 * 1.0 / 2)
    assert result.breakdown_s["data_loading"] == pytest.approx(4.0 - gpu_only)
    assert sum(result.breakdown_s.values()) == pytest.approx(result.step_time_s)
    assert result.bottleneck["cause"] == "data_loading"
    assert any("data loader paces the step" in w for w in result.warnings)
    # twice the workers, half the step
    assert simulate(load_scenario("llama3-8b-gh200", _loading(1000.0, workers=4))
                    ).step_time_s == pytest.approx(2.0)


def test_a_loader_that_keeps_up_costs_nothing() -> None:
    scenario = load_scenario("llama3-8b-gh200", _loading(0.01))
    assert 0 < data_loading_s(scenario) < 1e-3
    assert simulate(scenario).step_time_s == simulate(
        load_scenario("llama3-8b-gh200", SMALL)).step_time_s


def test_the_loader_shows_in_the_written_results(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["run", "llama3-8b-gh200", "-o", str(out),
                 *(f"--set={o}" for o in _loading(1000.0))]) == 0
    written = json.loads((out / "result.json").read_text())
    assert written["step_time_s"] == pytest.approx(4.0)
    assert "data_loading" in written["breakdown_s"]
    capsys.readouterr()


def test_a_loader_without_its_source_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "llama3-8b-gh200", "--set", "training.data_loading.sample_read_ms=5"]
                ) == 2
    assert "training.data_loading.source" in capsys.readouterr().err
