"""Accuracy on the published measurements of validation/calibration.yaml, and ``ghsim validate``.

DESIGN.md section 9: mean absolute percentage error at most 8 % over every point, no point off
by more than 20 %, with every constant from a cited measurement (none fitted per point).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from ghsim import cli
from ghsim.cli import main
from ghsim.engine import validation
from ghsim.engine.validation import summarize, validate_file
from tests.conftest import CORES, ROOT


def test_a_set_simulated_in_parallel_is_the_set_simulated_in_turn(tmp_path: Path) -> None:
    """Worker processes change nothing but the time: the same outcomes, in the file's order,
    a broken point included."""
    path = tmp_path / "points.yaml"
    path.write_text(POINTS + POINTS.split("points:\n", 1)[1].replace("id: good", "id: again"))
    serial = validate_file(path, workers=1)
    assert [o.id for o in serial] == ["good", "points[1]", "again", "points[3]"]
    assert validate_file(path, workers=3) == serial


def test_without_worker_processes_a_set_runs_in_this_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no process can be started (a limit on processes or memory), the points run here."""
    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(11, "Resource temporarily unavailable")

    path = tmp_path / "points.yaml"
    path.write_text(POINTS)
    serial = validate_file(path, workers=1)
    monkeypatch.setattr(validation, "ProcessPoolExecutor", refuse)
    assert validate_file(path, workers=2) == serial


def test_calibration_accuracy(calibration_file: Path) -> None:
    outcomes = validate_file(calibration_file, workers=CORES)
    summary = summarize(outcomes)
    failed = [o.failed for o in outcomes if o.failed]
    assert not failed, failed
    assert summary["simulated"] == 30
    report = ", ".join(f"{o.id} {o.error:+.1%}" for o in outcomes if o.error is not None)
    # The targets: 6 % and 15 %. With causal attention costed as cuDNN runs it (docs/
    # hardware-facts.md T4#14), NeMo 24.07's runs on the FlashAttention-2 kernels its launcher
    # chose (NVTE_FUSED_ATTN=0, the points' notes) and FP8 norms that write FP8 themselves
    # (gathered in one byte), the Narayanan rows at their authors' micro-batches and NCCL's
    # measured size ramp inside a node (docs/hardware-facts.md T4#26-27) the set is at 4.6 %
    # and 11.1 %.
    assert summary["mape"] <= 0.06, report
    assert summary["max_abs_error"] <= 0.15, report
    # every run ran, so every scenario fits (Nemotron-340B did not while NeMo's master-weight
    # remainders were costed as whole FP32 masters)
    assert summary["not_fitting"] == 0, [o.id for o in outcomes if o.does_not_fit]


POINTS = """\
schema_version: 1
kind: validation_points
points:
- id: good
  confidence: high
  measured: {step_time_s: 1.0}
  source: test
  scenario:
    system: dgx-h100
    num_gpus: 8
    model: {name: tiny, layers: 4, hidden: 1024, heads: 16, kv_heads: 16, ffn_hidden: 4096,
            vocab: 32000, gated_mlp: false}
    training: {seq_len: 2048, micro_batch: 1, global_batch: 16, precision: bf16}
    parallelism: {tp: 8}
- id: bad
  confidence: high
  measured: {step_time_s: 1.0}
  source: test
  scenario:
    system: dgx-h10
    num_gpus: 8
    model: llama2-7b
    training: {seq_len: 2048, micro_batch: 1, global_batch: 16, precision: bf16}
"""


def test_a_broken_point_is_reported_and_the_others_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "points.yaml"
    path.write_text(POINTS)
    assert main(["validate", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    good, bad = report["points"]
    assert good["predicted_step_time_s"] > 0 and good["error"] is not None
    assert bad["failed"] and "did you mean 'dgx-h100'" in bad["failed"]
    assert report["simulated"] == 1 and report["failed"] == 1


def _no_simulation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Load and resolve every point as ``ghsim validate`` does, but skip the simulation (the
    shipped sets take a minute): each point is "predicted" at 1 s, in this process (the fakes
    would not reach worker processes that do not fork)."""
    def fake(_scenario: Any) -> SimpleNamespace:
        return SimpleNamespace(step_time_s=1.0, bottleneck={"resource": "none"}, memory={})

    def fake_serving(_scenario: Any) -> SimpleNamespace:
        data = {"output_tokens_per_s": 1.0, "bottleneck": {"resource": "none"},
                "ttft_s": {"mean": 1.0}, "tpot_s": {"mean": 1.0}, "memory": {"fits": True}}
        return SimpleNamespace(to_dict=lambda: data)
    monkeypatch.setattr(validation, "simulate", fake)
    monkeypatch.setattr(validation, "simulate_serving", fake_serving)
    monkeypatch.setattr(cli, "_cores", lambda: 1)


def test_a_shipped_set_by_name_from_another_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _no_simulation(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "calibration", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(report) == ["points", "mape", "max_abs_error", "simulated", "failed",
                            "not_fitting", "by", "kind"]
    assert report["simulated"] == 30 and report["failed"] == 0, report
    assert report["points"][0]["id"] == "nemo24.07_gpt3-5b_h100_64"


def test_a_local_set_of_that_name_comes_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``validation/calibration.yaml`` under the current folder shadows the shipped set, and
    is really simulated (one point of the shipped set: cheap)."""
    shipped = yaml.safe_load((ROOT / "validation" / "calibration.yaml").read_text())
    one = min(shipped["points"], key=lambda p: p["scenario"]["num_gpus"])
    (tmp_path / "validation").mkdir()
    (tmp_path / "validation" / "calibration.yaml").write_text(
        yaml.safe_dump({**shipped, "points": [one]}))
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "calibration", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (point,) = report["points"]
    assert point["id"] == one["id"] and point["predicted_step_time_s"] > 0
    assert abs(point["error"]) <= 0.20, point


def test_validate_all_runs_every_shipped_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _no_simulation(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "--all", "--json"]) == 0
    captured = capsys.readouterr()
    reports = json.loads(captured.out)
    assert list(reports) == ["calibration", "gh200", "inference", "moe"]
    assert reports["calibration"]["simulated"] == 30 and reports["gh200"]["simulated"] == 12
    assert reports["moe"]["simulated"] == 9 and reports["inference"]["simulated"] == 34
    assert reports["inference"]["kind"] == "inference_points"
    assert all(r["failed"] == 0 for r in reports.values()), reports
    assert not captured.err.strip()


@pytest.mark.parametrize("argv", [["validate"], ["validate", "--json"],
                                  ["validate", "calibration", "--all"]])
def test_validate_needs_one_file_or_all(argv: list[str],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_a_file_of_another_kind_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(ROOT / "configs" / "systems" / "dgx-h100.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "validation_points" in err[0], err


def test_the_inference_set_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``ghsim validate inference`` finds validation/inference.yaml by its name and runs it
    as serving points (kind inference_points), from any folder."""
    _no_simulation(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "inference", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kind"] == "inference_points" and report["simulated"] == 34
    assert report["points"][0]["predicted"] == 1.0


def _points(tmp_path: Path, *points: tuple[str, str, str, float]) -> Path:
    """A validation_points file of tiny points: (id, system, precision, measured step)."""
    entries = [{
        "id": point_id, "confidence": "high" if index == 0 else "low",
        "measured": {"step_time_s": measured}, "source": "test",
        "scenario": {"system": system, "num_gpus": 8,
                     "model": {"name": "tiny", "layers": 4, "hidden": 1024, "heads": 16,
                               "kv_heads": 16, "ffn_hidden": 4096, "vocab": 32000,
                               "gated_mlp": False},
                     "training": {"seq_len": 2048, "micro_batch": 1, "global_batch": 16,
                                  "precision": precision},
                     "parallelism": {"tp": 8}}}
        for index, (point_id, system, precision, measured) in enumerate(points)]
    path = tmp_path / "points.yaml"
    path.write_text(yaml.safe_dump({"schema_version": 1, "kind": "validation_points",
                                    "points": entries}))
    return path


def test_errors_by_subset_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Every point predicted at 1 s: measured 2 s is -50 %, 0.5 s +100 %, 1.25 s -20 %."""
    _no_simulation(monkeypatch)
    path = _points(tmp_path, ("a", "dgx-h100", "bf16", 2.0), ("b", "dgx-a100", "bf16", 0.5),
                   ("c", "dgx-h100", "fp8", 1.25))
    assert main(["validate", str(path), "--json"]) == 0
    by = json.loads(capsys.readouterr().out)["by"]
    assert by["system"]["dgx-h100"] == {"mape": pytest.approx(0.35), "simulated": 2,
                                        "max_abs_error": pytest.approx(0.5)}
    assert by["system"]["dgx-a100"]["mape"] == pytest.approx(1.0)
    assert by["precision"]["bf16"]["mape"] == pytest.approx(0.75)
    assert by["precision"]["fp8"]["mape"] == pytest.approx(0.2)
    assert list(by["model_size"]) == ["<1B"]
    assert by["confidence"]["high"]["simulated"] == 1 and by["confidence"]["low"][
        "max_abs_error"] == pytest.approx(1.0)
    assert main(["validate", str(path)]) == 0
    table = capsys.readouterr().out
    assert "Errors by subset" in table and "dgx-a100" in table and "100.0%" in table


@pytest.mark.parametrize(("threshold", "code"), [("60", 1), ("67%", 1), ("70", 0),
                                               ("70.0%", 0)])
def test_max_mape_gates_the_exit_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str], threshold: str,
                                        code: int) -> None:
    """Every point predicted at 1 s: errors 50 %, 100 %, 20 % and 100 %, MAPE 67.5 %."""
    _no_simulation(monkeypatch)
    path = _points(tmp_path, ("a", "dgx-h100", "bf16", 2.0), ("b", "dgx-a100", "bf16", 0.5),
                   ("c", "dgx-h100", "fp8", 1.25), ("d", "dgx-h100", "bf16", 0.5))
    assert main(["validate", str(path), "--json", "--max-mape", threshold]) == code
    captured = capsys.readouterr()
    assert json.loads(captured.out)["mape"] == pytest.approx(0.675)
    limit = float(threshold.rstrip("%")) / 100
    expected = [f"ghsim: validate {path}: MAPE 67.5% exceeds {limit:.1%} (--max-mape)"]
    assert captured.err.strip().splitlines() == (expected if code else [])


def test_max_mape_fails_on_a_failed_or_unfitting_point(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "points.yaml"
    path.write_text(POINTS)
    assert main(["validate", str(path), "--max-mape", "1000"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"ghsim: validate {path}: 1 point(s) failed (--max-mape)"]
    huge = _points(tmp_path, ("huge", "dgx-h100", "bf16", 1.0))
    document = yaml.safe_load(huge.read_text())
    document["points"][0]["scenario"].update(
        model="llama2-70b", num_gpus=1, parallelism={"tp": 1})
    huge.write_text(yaml.safe_dump(document))
    assert main(["validate", str(huge), "--json", "--max-mape", "1000"]) == 1
    captured = capsys.readouterr()
    (point,) = json.loads(captured.out)["points"]
    assert point["does_not_fit"].startswith("the step does not fit in memory: HBM peak")
    assert "1 point(s) do not fit in memory" in captured.err
    assert main(["validate", str(huge)]) == 0  # without the gate, the table flags it
    assert "does not fit" in capsys.readouterr().out


def test_only_selects_points_by_glob(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    _no_simulation(monkeypatch)
    path = _points(tmp_path, ("mlperf_a", "dgx-h100", "bf16", 2.0),
                   ("nemo_b", "dgx-a100", "bf16", 0.5), ("mlperf_c", "dgx-h100", "fp8", 1.0))
    assert main(["validate", str(path), "--json", "--only", "mlperf_*"]) == 0
    assert [p["id"] for p in json.loads(capsys.readouterr().out)["points"]] == [
        "mlperf_a", "mlperf_c"]
    assert main(["validate", str(path), "--json", "--only", "x*", "--only", "nemo_?"]) == 0
    assert [p["id"] for p in json.loads(capsys.readouterr().out)["points"]] == ["nemo_b"]
    assert main(["validate", str(path), "--only", "llama*"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "matches no point id" in err[0], err
    assert main(["validate", "--all", "--json", "--only", "caraml_*"]) == 0
    assert list(json.loads(capsys.readouterr().out)) == ["gh200"]


@pytest.mark.parametrize("value", ["abc", "-3", "nan", "inf"])
def test_max_mape_must_be_a_percentage(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["validate", "calibration", "--max-mape", value])
    assert exit_info.value.code == 2
    assert "percentage" in capsys.readouterr().err


def test_a_points_overrides_set_its_scenario_as_the_run_had_it(tmp_path: Path) -> None:
    """A point's ``overrides`` change its scenario as ``--set`` would (here a GH200 module cap
    of 624 W against the system file's 660): the same point with them runs slower, and the
    loaded scenario carries the value."""
    path = _points(tmp_path, ("capped", "alps-gh200", "bf16", 1.0), ("as_shipped", "alps-gh200",
                                                                      "bf16", 1.0))
    document = yaml.safe_load(path.read_text())
    document["points"][0]["overrides"] = ["system.node.power_limit_w=624"]
    document["points"][0]["scenario"]["num_gpus"] = document["points"][1]["scenario"][
        "num_gpus"] = 4
    for point in document["points"]:
        point["scenario"]["parallelism"] = {"tp": 4}
    path.write_text(yaml.safe_dump(document))
    capped, shipped = validate_file(path)
    assert capped.predicted_step_time_s is not None and shipped.predicted_step_time_s is not None
    assert capped.predicted_step_time_s > shipped.predicted_step_time_s
    from ghsim.config.api import load_validation_points

    points = load_validation_points(path).points
    assert points[0].scenario.system.node.power_limit_w == 624
    assert points[1].scenario.system.node.power_limit_w == 660
    assert capped.overrides == ("system.node.power_limit_w=624",) and shipped.overrides == ()


@pytest.mark.parametrize(("override", "expected"), [
    ("system.node.power_limit=624", "scenario.system.node.power_limit: unknown key "
                                    "'power_limit' (did you mean 'power_limit_w'?)"),
    ("system.node.power_limit_w=abc", "scenario.system.node.power_limit_w: expected a number"),
    ("624", "expected KEY.PATH=VALUE"),
])
def test_a_broken_point_override_fails_that_point_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], override: str, expected: str) -> None:
    path = _points(tmp_path, ("broken", "alps-gh200", "bf16", 1.0))
    document = yaml.safe_load(path.read_text())
    document["points"][0]["overrides"] = [override]
    path.write_text(yaml.safe_dump(document))
    assert main(["validate", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (point,) = report["points"]
    assert point["failed"].startswith(f"{path} points[0].overrides[0]: ")
    assert expected in point["failed"]
    # nothing was simulated: no MAPE (it used to be NaN, which the JSON writer refused)
    assert report["mape"] is None and report["max_abs_error"] is None
    assert main(["validate", str(path)]) == 0
    assert "MAPE n/a (no point simulated)" in capsys.readouterr().out
    assert main(["validate", str(path), "--max-mape", "10"]) == 1
    assert "no point was simulated; 1 point(s) failed" in capsys.readouterr().err
