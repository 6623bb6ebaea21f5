"""The simulated step: invariants, determinism, the Result contract, the timeline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ghsim.cli import main
from ghsim.config import load_scenario, load_validation_points
from ghsim.config.sweep import Point
from ghsim.engine.attribution import BREAKDOWN_KEYS
from ghsim.engine.result import Result
from ghsim.engine.simulate import simulate
from ghsim.report.console import stages_text
from ghsim.report.trace import chrome_trace
from ghsim.sweep.record import result_record
from tests.conftest import DGX, SMALL

BASE = [
    "model.layers=8", "training.seq_len=2048", "training.global_batch=16",
    "parallelism.vp=2",
]


def step(overrides: list[str], base: list[str] = DGX) -> float:
    return simulate(load_scenario(SMALL, [*base, *overrides])).step_time_s


@pytest.fixture(scope="module")
def small() -> Result:
    """SMALL with BASE simulated once for the tests that only read its result."""
    return simulate(load_scenario(SMALL, BASE))


def test_result_contract(small: Result) -> None:
    result = small.to_dict()
    for key in ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu",
                "mfu", "breakdown_s", "bottleneck", "memory", "links", "warnings", "inputs",
                "gpu_clock", "stages"):
        assert key in result
    from ghsim.stats import expected_largest_normal as slowest_of

    gpus = result["inputs"]["scenario"]["num_gpus"]
    assert result["gpu_clock"] == {  # the slowest of the step's GPUs sets its pace (T4#11)
        "compute_ghz": 1.83, "part_ghz": 1.83, "power_limit_w": None,
        "step_ghz": pytest.approx(1.83 / (1 + 0.017 * slowest_of(gpus))),
        "synchronized_gpus": gpus}
    assert set(result["breakdown_s"]) == set(BREAKDOWN_KEYS)
    assert sum(result["breakdown_s"].values()) == pytest.approx(result["step_time_s"], rel=1e-6)
    assert result["memory"]["hbm"]["capacity_bytes"] == 141 * 2**30
    assert result["inputs"]["digest"] and result["inputs"]["ghsim_version"]
    assert 0 < result["mfu"] < 1
    assert result["bottleneck"]["resource"] and result["bottleneck"]["why"]
    json.dumps(result)  # plain data


def test_each_stage_reports_its_compute_stream_load() -> None:
    """A stage's busy time is its compute stream's: the sum of its compute ops' parts (kernels,
    the collectives and host waits inside them). An untied 256k-vocabulary head sits on the
    last stage: it loads that stage and leaves the first alone, and the report says the last
    stage paces the pipeline; with a 512-token vocabulary the two stages are within 2 %."""
    def stages(vocab: list[str]) -> tuple[list[dict[str, object]], object]:
        result = simulate(load_scenario(SMALL, [*DGX, *vocab]))
        assert result.timeline is not None
        for row, cls in zip(result.stages, result.timeline.classes, strict=True):
            parts = sum(sum(p.values()) for p in cls.compute_parts.values())
            assert row["busy_s"] == pytest.approx(parts)
            assert row["busy_share"] == pytest.approx(parts / result.step_time_s)
        return result.stages, result.to_dict()["stages"]

    small, _ = stages(["model.vocab=512"])
    big, as_json = stages(["model.vocab=256000", "model.tied_embeddings=false"])
    assert [row["stage"] for row in big] == [0, 1] and as_json == big
    assert sum(bool(row["finishes_last"]) for row in big) == 1  # the breakdown's class
    assert small[1]["busy_s"] == pytest.approx(small[0]["busy_s"], rel=0.02)
    head_last = big[1]["busy_s"] - small[1]["busy_s"]  # type: ignore[operator]
    head_first = big[0]["busy_s"] - small[0]["busy_s"]  # type: ignore[operator]
    assert head_last > 10 * head_first > 0
    assert "stage 1 is the busiest and paces the others" in stages_text(big)
    assert stages_text(small).endswith("the stages are balanced.")
    assert stages_text(big[:1]) == ""  # one stage: nothing to compare
    # a sweep's record carries the busiest stage's share, the CSV's busiest_stage_share
    scenario = load_scenario(SMALL, [*DGX, "model.vocab=256000", "model.tied_embeddings=false"])
    record = result_record(Point(0, ()), scenario, simulate(scenario))
    assert record["busiest_stage_share"] == pytest.approx(big[1]["busy_share"])


def test_deterministic() -> None:
    first = simulate(load_scenario(SMALL, BASE)).to_dict()
    second = simulate(load_scenario(SMALL, BASE)).to_dict()
    assert first == second


# A measured rate (peak_tflops.bf16) pinned by an override, or a physical capacity that the
# measured efficiencies multiply (the rates on it move with it); DGX H100 values.
FASTER = {
    "system.node.gpu.gpu.compute.peak_tflops.bf16={}": 989.4,
    "system.node.gpu.gpu.compute.clock_ghz={}": 1.83,
    "system.node.gpu.gpu.memory.peak_bandwidth_gb_s={}": 3350,
    "system.node.gpu.gpu.nvlink.link_bandwidth_gb_s={}": 25,
    "system.node.nic.nic.line_rate_gbit_s={}": 400,
}


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(sorted(FASTER)), st.floats(min_value=1.0, max_value=4.0))
def test_more_bandwidth_or_flops_never_slows_the_step(template: str, factor: float) -> None:
    base = FASTER[template]
    faster = step([template.format(base * factor)])
    assert faster <= step([template.format(base)]) * (1 + 1e-9)


def test_step_is_never_shorter_than_the_busiest_resource() -> None:
    result = simulate(load_scenario(SMALL, DGX))
    assert result.timeline is not None
    for cls in result.timeline.classes:
        compute = sum(sum(p.values()) for p in cls.compute_parts.values())
        assert result.step_time_s >= compute * (1 - 1e-9)
    network = result.timeline.network
    assert network is not None and network.usage
    for usage in network.usage.values():
        assert result.step_time_s >= usage.busy_s * (1 - 1e-9)
        assert usage.load_s <= usage.busy_s * (1 + 1e-9) + 1e-15


def test_more_replicas_change_only_data_parallel_communication() -> None:
    """With identical GPUs; with a speed spread, compute also waits for a slower slowest GPU."""
    def run(dp: int, spread: float = 0.0) -> dict[str, float]:
        overrides = [f"num_gpus={4 * dp}", f"training.global_batch={16 * dp}",
                     f"system.node.gpu.gpu.compute.speed_spread={spread}"]
        result = simulate(load_scenario(SMALL, [*DGX, *overrides]))
        return {**result.breakdown_s, **result.compute_breakdown_s}

    two, eight = run(2), run(8)
    for key in ("gemm", "attention", "elementwise", "recompute"):
        assert eight[key] == pytest.approx(two[key], rel=1e-9), key
    # tensor-parallel flows share NVLink with the (larger) data-parallel traffic beside them
    assert eight["tp"] == pytest.approx(two["tp"], rel=1e-2)
    assert run(8, 0.017)["gemm"] > run(2, 0.017)["gemm"] > two["gemm"]


@pytest.mark.parametrize(("scenario", "sets"), [
    # GH200 files give rates one way of two (migration_bandwidth_gb_s, h2d_copy_efficiency),
    # and head dimensions as numbers (attention_head_dim_efficiency: {128: ...})
    ("llama3-8b-gh200-offload", ["model.layers=2", "training.global_batch=2"]),
    # a validation point's inline scenario has no schema_version or kind
    ("gh200:swissai_llama32_1b_alps_4gpu_mbs3_s8192", ["model.layers=2"]),
    ("llama3.1-70b-fp8-gh200-serving", ["inference.requests.count=40"]),
])
def test_a_results_inputs_run_again(scenario: str, sets: list[str], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A result's ``inputs.scenario``, saved as JSON (which writes every key as a string) or as
    YAML with sorted keys, runs again to the same figures and digest. (Derived alternatives
    were written beside the keys they came from, the number keys came back as strings, and an
    inline scenario lacked its schema_version: each copy exited 2.)"""
    if scenario.startswith("gh200:"):
        point = next(p for p in load_validation_points("gh200").points
                     if p.id == scenario.removeprefix("gh200:"))
        source = tmp_path / "point.yaml"
        source.write_text(yaml.safe_dump({"schema_version": 1, "kind": "scenario",
                                          **point.scenario.model_dump(exclude_unset=True)}))
        scenario = str(source)
    args = [arg for override in sets for arg in ("--set", override)]

    def run(path: str, *args: str) -> dict[str, Any]:
        assert main(["run", path, *args, "--json"]) == 0
        result: dict[str, Any] = json.loads(capsys.readouterr().out)
        return result
    first = run(scenario, *args)
    saved = first["inputs"]["scenario"]
    (tmp_path / "again.json").write_text(json.dumps(saved))
    (tmp_path / "again.yaml").write_text(yaml.safe_dump(saved, sort_keys=True))
    for again in (run(str(tmp_path / "again.json")), run(str(tmp_path / "again.yaml"))):
        for key in ("step_time_s", "output_tokens_per_s", "breakdown_s"):
            assert again.get(key) == first.get(key)
        assert again["inputs"]["digest"] == first["inputs"]["digest"]


def test_trace_opens_in_perfetto(tmp_path: Path) -> None:
    sets = [arg for override in BASE for arg in ("--set", override)]
    assert main(["run", SMALL, *sets, "-o", str(tmp_path), "--json"]) == 0
    trace = json.loads((tmp_path / "trace.json").read_text())
    result = json.loads((tmp_path / "result.json").read_text())
    events = trace["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert len(processes) == 5  # one per rank class (pp 4), and the links' counters
    assert sum(1 for name in processes.values() if name == "links (utilization)") == 1
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("name") == "thread_name"}
    assert "compute" in threads.values() and "pp_send" in threads.values()
    assert "tp/cp collectives (on compute)" in threads.values()
    counters = [e for e in events if e["ph"] == "C" and "utilization" in e["args"]]
    assert counters and all(0 <= e["args"]["utilization"] <= 1 for e in counters)
    assert any("nvswitch" in e["name"] for e in counters)
    spans = [e for e in events if e["ph"] == "X"]
    assert all((e["pid"], e["tid"]) in threads for e in spans)
    end_us = max(e["ts"] + e["dur"] for e in spans)
    assert end_us == pytest.approx(result["step_time_s"] * 1e6, rel=1e-9)


def test_memory_counters_change_as_their_ops_end(small: Result) -> None:
    # a buffer is allocated or freed at the end of its op (static ones from the start), as
    # the run's memory peaks count them
    timeline = small.timeline
    assert timeline is not None
    events = chrome_trace(timeline)["traceEvents"]
    for pid, cls in enumerate(timeline.classes):
        seen = {e["ts"] for e in events
                if e["ph"] == "C" and e["pid"] == pid and e["name"].startswith("memory")}
        memory = cls.rank_class.memory
        expected = {cls.end_of[m.op] * 1e6 for m in memory if m.op >= 0}
        assert expected and seen == expected | ({0.0} if any(m.op < 0 for m in memory) else set())


def test_chrome_trace_is_plain_json(small: Result) -> None:
    assert small.timeline is not None
    json.dumps(chrome_trace(small.timeline))
