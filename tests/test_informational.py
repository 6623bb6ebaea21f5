"""Keys no mechanism reads are marked informational, and the mark tells the truth: setting one
changes no figure and says so, a sweep over one is refused, and editors see the mark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest

from ghsim.cli import main
from ghsim.config import load_any_scenario, load_scenario
from ghsim.config.cursor import KeyPath, format_path, informational_key, slot_at
from ghsim.config.schema import ScenarioSpec
from ghsim.engine.simulate import simulate

ONE = ["system=gh200-single", "num_gpus=1", "model.layers=4", "training.seq_len=2048",
       "training.global_batch=2", "training.micro_batch=1"]
CASES = {
    # Grace's optimizer and the host link's copies
    "gh200": [*ONE, "offload.strategy=optimizer"],
    # in-place access over C2C, access-counter migration, and the system allocator's HBM rate
    "gh200_system_memory": [*ONE, "model.layers=32", "training.global_batch=1",
                            "offload.strategy=unified_memory",
                            "system.node.gpu.gpu.unified_memory.allocator=system"],
    # NVSwitch, NICs and a fat tree, with the data-parallel traffic crossing leaves
    "dgx": ["system=dgx-h100", "num_gpus=16", "model.layers=4", "training.seq_len=2048",
            "training.global_batch=16", "parallelism.tp=8", "training.precision=bf16",
            "system.fabric.switch_radix=4", "system.fabric.nodes_per_unit=1"],
    # quad GH200 nodes: direct NVLink, Grace-to-Grace links, a dragonfly-free fat tree
    "quad": ["system=gh200-quad", "num_gpus=32", "model.layers=4", "training.seq_len=2048",
             "training.global_batch=64", "parallelism.tp=4", "parallelism.pp=2"],
}


def _leaves(value: Any, path: KeyPath) -> list[tuple[KeyPath, Any]]:
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in _leaves(item, (*path, key))]
    return [(path, value)]


def informational_settings(overrides: list[str]) -> list[str]:
    """A changed value for every informational key the scenario's resolved system holds."""
    spec = load_scenario("llama3-8b-gh200", overrides).spec
    settings = []
    for path, value in _leaves(spec.system.model_dump(), ("system",)):
        if value is None or not informational_key(ScenarioSpec, path):
            continue
        slot = slot_at(ScenarioSpec, path)
        choices = get_args(slot.bare) if slot is not None else ()
        changed = (next(c for c in choices if c != value) if choices and isinstance(value, str)
                   else "other" if isinstance(value, str)
                   else max(1, value // 2) if isinstance(value, int) else value / 2)
        settings.append(f"{format_path(path)}={changed}")
    return settings


def _figures(overrides: list[str]) -> tuple[float, Any, Any, Any]:
    result = simulate(load_scenario("llama3-8b-gh200", overrides))
    return result.step_time_s, result.memory, result.host, result.breakdown_s


@pytest.mark.parametrize("case", CASES)
def test_an_informational_key_changes_no_figure_and_says_so(case: str) -> None:
    overrides = CASES[case]
    settings = informational_settings(overrides)
    assert len(settings) >= 8  # labels, boost clocks, caches, latencies, generations
    before = _figures(overrides)
    for setting in settings:
        assert _figures([*overrides, setting]) == before, setting
    result = simulate(load_scenario("llama3-8b-gh200", [*overrides, settings[0]]))
    assert sum("changes no figure" in w for w in result.warnings) == 1


def test_a_key_a_mechanism_reads_moves_the_step_without_that_warning() -> None:
    """Halving HBM bandwidth is no informational change: the step moves, nothing is said."""
    base = simulate(load_scenario("llama3-8b-gh200", ONE))
    slower = simulate(load_scenario(
        "llama3-8b-gh200", [*ONE, "system.node.gpu.gpu.memory.peak_bandwidth_gb_s=2000"]))
    assert slower.step_time_s > base.step_time_s
    assert not any("changes no figure" in w for w in slower.warnings)


def test_a_served_model_says_it_too() -> None:
    scenario = load_any_scenario("llama3.1-70b-fp8-gh200-serving", [
        "inference.requests.count=16", "system.node.gpu.gpu.memory.latency_ns=1"])
    from ghsim.serving.simulate import simulate_serving
    warnings = simulate_serving(scenario).data["warnings"]
    assert any("memory.latency_ns is informational" in w for w in warnings)


def test_a_sweep_over_an_informational_key_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("schema_version: 1\nkind: sweep\nname: caches\nbase: llama3-8b-gh200\n"
                     "grid:\n  system.node.gpu.gpu.compute.l2_cache_mb: [10, 50]\n")
    assert main(["sweep", str(sweep), "-o", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0
    assert "l2_cache_mb is informational" in error
    assert not (tmp_path / "out").exists()


def test_the_schema_marks_them_for_editors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "hardware"]) == 0
    schema = json.loads(capsys.readouterr().out)
    marked = set()

    def walk(node: Any, name: str) -> None:
        if isinstance(node, dict):
            if node.get("informational") is True:
                marked.add(name)
            for key, item in node.items():
                walk(item, key)
        elif isinstance(node, list):
            for item in node:
                walk(item, name)
    walk(schema, "")
    assert {"l2_cache_mb", "max_clock_ghz", "read_efficiency", "latency_ns",
            "gpu_host_latency_ns", "system_page_kib", "nccl_link_bandwidth_gb_s"} <= marked
    assert "peak_bandwidth_gb_s" not in marked and "stream_efficiency" not in marked


def test_a_case_may_set_one_as_a_label_and_its_point_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A grid axis over an informational key studies nothing and is refused; a case may set
    one beside the keys that make it differ, as a label. Only the key of an override is read
    again to say so, so a value YAML would not take back (a name with a bracket) is no
    trouble."""
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("schema_version: 1\nkind: sweep\nname: labelled\nbase: llama3-8b-gh200\n"
                     "cases:\n  - {system.node.gpu.gpu.compute.architecture: '[capped',"
                     " training.global_batch: 16}\n  - {training.global_batch: 32}\n")
    assert main(["sweep", str(sweep), "--json", "-o", str(tmp_path / "out")]) == 0
    points = json.loads(capsys.readouterr().out)["results"]
    assert [p.get("error") for p in points] == [None, None]
    assert points[0]["step_time_s"] == pytest.approx(points[1]["step_time_s"] / 2, rel=0.05)
    scenario = load_scenario("llama3-8b-gh200", [
        "system.node.gpu.gpu.compute.architecture=hopper [capped]"])
    assert scenario.spec.system.node.gpu.gpu is not None
    assert scenario.spec.system.node.gpu.gpu.compute.architecture == "hopper [capped]"
    warnings = simulate(scenario).warnings
    assert any(w.startswith("system.node.gpu.gpu.compute.architecture=hopper [capped] "
                            "changes no figure") for w in warnings)
