"""Accuracy on the published measurements of ../shared/validation/calibration.yaml.

DESIGN.md section 9: mean absolute percentage error at most 8 % over every point, no point off
by more than 20 %, with every constant from a cited measurement (none fitted per point).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ghsim.cli import main
from ghsim.engine.validation import summarize, validate_file


def test_calibration_accuracy(calibration_file: Path) -> None:
    outcomes = validate_file(calibration_file)
    summary = summarize(outcomes)
    failed = [o.failed for o in outcomes if o.failed]
    assert not failed, failed
    assert summary["simulated"] == 30
    report = ", ".join(f"{o.id} {o.error:+.1%}" for o in outcomes if o.error is not None)
    assert summary["mape"] <= 0.08, report
    assert summary["max_abs_error"] <= 0.20, report


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
