"""What the schema decides by itself: the defaults it resolves the way Megatron-LM does, the
combinations it refuses, and the digest and resolved form that make a scenario the same one
however it was written (a result's inputs run again, a sweep's cache)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ghsim.cli import main
from ghsim.config import load_scenario
from ghsim.config.schema.scenario import TrainingSpec
from ghsim.engine.simulate import simulate
from ghsim.errors import ConfigError

from .conftest import ROOT

TRAINING = {"seq_len": 2048, "micro_batch": 1, "global_batch": 8}


def _training(**keys: Any) -> TrainingSpec:
    return TrainingSpec.model_validate({**TRAINING, **keys})


# -- defaults resolved as Megatron-LM resolves them ----------------------------------------------

@pytest.mark.parametrize(("precision", "checked"), [
    ("bf16", True), ("fp8", True), ("fp32", True), ("fp16", False)])
def test_the_gradient_nan_check_is_off_by_default_only_under_fp16(precision: str,
                                                                  checked: bool) -> None:
    """Megatron-LM turns --check-for-nan-in-loss-and-grad off with --fp16 (dynamic loss
    scaling finds the NaNs itself) and leaves it on otherwise; a given value wins."""
    assert _training(precision=precision).grad_nan_check_resolved is checked
    assert _training(precision=precision, grad_nan_check=not checked) \
        .grad_nan_check_resolved is (not checked)


def test_fp8_runs_delayed_scaling_unless_told_and_other_precisions_none() -> None:
    assert _training(precision="fp8").fp8_recipe_resolved == "delayed"
    assert _training(precision="fp8", fp8_recipe="blockwise").fp8_recipe_resolved == "blockwise"
    assert _training(precision="bf16").fp8_recipe_resolved is None


@pytest.mark.parametrize(("keys", "says"), [
    ({"precision": "bf16", "fp8_recipe": "delayed"}, "fp8_recipe needs precision fp8"),
    ({"precision": "bf16", "main_grads": "fp16"}, "main_grads 'fp16' needs precision fp16"),
    ({"precision": "fp16", "main_grads": "bf16"}, "main_grads 'bf16' needs precision bf16"),
    ({"precision": "fp16", "master_weights": "remainders"}, "needs BF16 weights"),
    ({"precision": "bf16", "cross_entropy_fusion_impl": "te"}, "needs cross_entropy_fusion"),
])
def test_contradictory_training_keys_are_refused(tmp_path: Path, keys: dict[str, Any],
                                                 says: str) -> None:
    """Through the loader, as a user meets them: one line naming the file and the block."""
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({
        "schema_version": 1, "kind": "scenario", "system": "gh200-single", "num_gpus": 1,
        "model": "llama3-8b", "training": {**TRAINING, **keys}}))
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    assert says in caught.value.line() and "training" in caught.value.line()


# -- one scenario, however it is written ---------------------------------------------------------

def _reversed(value: Any) -> Any:
    """``value`` with every mapping's keys in reverse order."""
    if isinstance(value, dict):
        return {key: _reversed(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed(item) for item in value]
    return value


@pytest.mark.parametrize("name", ["llama3-70b-gh200-nvl32", "gpt3-175b-mlperf-h100-10752"])
def test_a_result_s_inputs_run_again_as_the_same_scenario(tmp_path: Path, name: str) -> None:
    """``inputs.scenario`` of a result, written back as a file with every mapping's keys in
    reverse order, loads (it never gives both keys of a pair such as a memory's bandwidth and
    its efficiency, where the hardware file gave one) and has the digest the result records."""
    scenario = load_scenario(name, ["num_gpus=64", "training.global_batch=64"]
                             if "nvl32" in name else ["num_gpus=512",
                                                      "training.global_batch=64"])
    inputs = simulate(scenario).to_dict()["inputs"]
    path = tmp_path / "again.yaml"
    path.write_text(yaml.safe_dump(_reversed(inputs["scenario"]), sort_keys=False))
    again = load_scenario(path)
    assert again.spec.digest() == inputs["digest"] == scenario.spec.digest()


def test_a_model_given_inline_is_the_same_scenario_as_its_file(tmp_path: Path) -> None:
    """The model file's schema_version and kind say what the file is, not what it describes:
    the same model written inline (where they may be left out) gives the same digest."""
    by_name = load_scenario("llama3-8b-gh200")
    lines = (ROOT / "models" / "llama3-8b.yaml").read_text().splitlines()
    envelope = [line for line in lines if line.startswith(("schema_version:", "kind:"))]
    assert envelope == ["schema_version: 1", "kind: model"]
    model = "".join(f"  {line}\n" for line in lines if line not in envelope)
    text = (ROOT / "configs" / "scenarios" / "llama3-8b-gh200.yaml").read_text()
    path = tmp_path / "inline.yaml"
    path.write_text(text.replace("model: llama3-8b\n", "model:\n" + model))
    inline = load_scenario(path)
    assert inline.spec.model.name == by_name.spec.model.name
    assert inline.spec.digest() == by_name.spec.digest()


def test_a_validation_file_without_points_is_refused(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("schema_version: 1\nkind: validation_points\npoints: []\n")
    assert main(["validate", str(path)]) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"ghsim: error: {path}: points:") and "\n" not in line
    assert main(["schema", "validation_points"]) == 0  # and editors say so before a run
    assert json.loads(capsys.readouterr().out)["properties"]["points"]["minItems"] == 1
