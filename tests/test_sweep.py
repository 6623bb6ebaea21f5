"""Sweeps: axis checks before anything runs, local and Dask execution, outputs, the example."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ghsim.cli import main
from ghsim.config.sweep import load_sweep
from ghsim.sweep import run_sweep
from tests.conftest import ROOT

SWEEP = """\
schema_version: 1
kind: sweep
name: small
base: llama3-70b-gh200-nvl32
grid:
  {axis}
cases:
  - {{model.layers: 8, training.global_batch: 16, parallelism.vp: 2}}
filter: "parallelism.tp * parallelism.pp <= 16"
"""
GOOD_AXIS = "parallelism.tp: [2, 4, 8]\n  parallelism.pp: [2, 4]"


def write(tmp_path: Path, axis: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP.format(axis=axis))
    return path


@pytest.mark.parametrize(("axis", "key", "expect"), [
    ("parallelism.tpp: [2, 4]", "grid.parallelism.tpp", "did you mean 'tp'"),
    ("parallelism.tp: []", "grid.parallelism.tp", "expected a non-empty list"),
    ("parallelism.tp: [2, two]", "grid.parallelism.tp[1]", "expected an integer, got 'two'"),
    ("training.precision: [bf16, bf61]", "grid.training.precision[1]", "expected one of"),
    ("system: [gh200-nvl32, dgx-h10]", "grid.system[1]", "did you mean 'dgx-h100'"),
])
def test_a_bad_axis_exits_2_before_simulating(tmp_path: Path, axis: str, key: str, expect: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, axis)
    assert main(["sweep", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f": {key}: " in err[0] and expect in err[0], err
    assert not (tmp_path / "out").exists()  # nothing ran, nothing written


def test_invalid_combinations_are_skipped_not_fatal(tmp_path: Path) -> None:
    sweep = load_sweep(write(tmp_path, GOOD_AXIS))
    outcome = run_sweep(sweep, workers=1)
    assert len(outcome.records) == 6
    skipped = [r for r in outcome.records if r["skipped"]]
    assert len(skipped) == 1  # tp 8 x pp 4 = 32 > 16
    assert all(r["step_time_s"] for r in outcome.records if not r["skipped"])
    ranked = outcome.ranked()
    times = [r["step_time_s"] for r in ranked if r["step_time_s"] is not None]
    assert times == sorted(times)


def test_a_grid_axis_inside_a_cases_system_moves_the_prediction(tmp_path: Path) -> None:
    """A case that names the system and a grid axis inside that system: the axis applies after
    the system is chosen (outer keys first), so every limit gives its own step time (all three
    used to run at full power, the case's system replacing the axis's key)."""
    path = tmp_path / "sweep.yaml"
    path.write_text("""\
schema_version: 1
kind: sweep
name: power
base: llama3-8b-gh200
grid:
  system.node.gpu_power_limit_w: [400, 500, 700]
cases:
  - {system: dgx-h200, num_gpus: 1, model.layers: 2, training.seq_len: 1024,
     training.global_batch: 2, offload.strategy: none}
""")
    records = run_sweep(load_sweep(path), workers=1).records
    times = {r["overrides"]["system.node.gpu_power_limit_w"]: r["step_time_s"] for r in records}
    assert times[400] > times[500] > times[700]


def test_outputs_cache_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, GOOD_AXIS)
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--workers", "2", "-o", str(out), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["best"] is not None and len(first["results"]) == 6
    for name in ("results.csv", "results.json", "report.html", "step_vs_hbm.png",
                 "step_vs_hbm.svg", "breakdown.png", "breakdown.svg"):
        assert (out / name).stat().st_size > 0, name
    report = (out / "report.html").read_text()
    assert "<svg" in report
    assert not re.search(r"(https?:|//[a-z]|<script|<link|src=)", report), "network reference"
    # Re-running finds every simulated point in the cache.
    assert main(["sweep", str(path), "-o", str(out), "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert "0 simulated, 5 from the cache" in second["summary"]
    assert [r["step_time_s"] for r in second["results"]] == [
        r["step_time_s"] for r in first["results"]]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_dask_cluster_gives_the_local_results(tmp_path: Path) -> None:
    pytest.importorskip("distributed", reason="dask.distributed is not installed")
    sweep = load_sweep(write(tmp_path, GOOD_AXIS))
    local = run_sweep(sweep, workers=1)
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host",
                               "127.0.0.1", "--port", str(port), "--no-dashboard"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        time.sleep(2)
        for _ in range(2):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "1",
                 "--nthreads", "1", "--no-dashboard"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        remote = run_sweep(sweep, scheduler=address)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
    key = lambda r: r["index"]  # noqa: E731
    assert [(r["index"], r["step_time_s"], r["skipped"]) for r in sorted(remote.records, key=key)] \
        == [(r["index"], r["step_time_s"], r["skipped"]) for r in sorted(local.records, key=key)]


@pytest.mark.parametrize("name", ["offload_study", "serving_capacity"])
def test_example_prints_its_saved_output(name: str) -> None:
    result = subprocess.run([sys.executable, str(ROOT / "examples" / f"{name}.py")],
                            capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout == (ROOT / "examples" / f"{name}.out").read_text()


@pytest.mark.parametrize("path", sorted((ROOT / "configs" / "sweeps").glob("*.yaml")),
                         ids=lambda p: p.stem)
def test_shipped_sweeps_load(path: Path) -> None:
    sweep = load_sweep(path)
    assert sweep.points()


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    from screenshot_report import chromium, screenshot

    if chromium() is None:
        pytest.skip("chromium is not installed (apt-get install chromium to run this check)")
    image = pytest.importorskip("matplotlib.image")
    path = write(tmp_path, GOOD_AXIS)
    assert main(["sweep", str(path), "--workers", "1", "-o", str(tmp_path / "out"),
                 "--json"]) == 0
    png = tmp_path / "report.png"
    screenshot(tmp_path / "out" / "report.html", png)
    pixels = image.imread(str(png))
    colours = {tuple(p) for p in pixels[::8, ::8].reshape(-1, pixels.shape[-1]).tolist()}
    assert len(colours) > 20, "the page rendered (nearly) blank"
