"""The command line: exit codes, JSON Schema export, version."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ghsim.cli import main
from ghsim.config.schema_export import SCHEMA_KINDS


def test_schema_of_every_kind(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schemas = json.loads(capsys.readouterr().out)
    assert set(schemas) == set(SCHEMA_KINDS)
    # A scenario is a training step or a served model.
    training, serving = schemas["scenario"]["anyOf"]
    for scenario, block in ((training, "training"), (serving, "inference")):
        assert scenario["properties"]["kind"] == {"const": "scenario"}
        assert {"schema_version", "kind", "system", "model", block} <= set(scenario["required"])
        # A reference field takes a name or an inline mapping.
        assert scenario["properties"]["system"]["anyOf"][0]["type"] == "string"
    for spec in ("InferenceSpec", "RequestsSpec", "SchedulerSpec", "KvOffloadSpec"):
        properties = schemas["scenario"]["$defs"][spec]["properties"]
        assert all(p.get("description") for p in properties.values()), spec


def test_schema_of_one_kind(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "hardware"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["additionalProperties"] is False


def test_unknown_schema_kind_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["schema", "widget"])
    assert exit_info.value.code == 2


def test_not_found_suggests_a_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "dgx-h10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["ghsim: error: dgx-h10: no such file, and no shipped or local config of that "
                   "name (did you mean 'dgx-h100'?)"]


def test_real_process_exit_codes() -> None:
    ok = subprocess.run([sys.executable, "-m", "ghsim", "--version"], capture_output=True,
                        text=True, check=False)
    assert ok.returncode == 0 and ok.stdout.startswith("ghsim ")
    bad = subprocess.run(
        [sys.executable, "-m", "ghsim", "inspect", "llama3-8b-gh200", "--set", "num_gpus=0"],
        capture_output=True, text=True, check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        "ghsim: error: --set num_gpus=0: num_gpus: expected a number > 0, got 0"
    )


def test_the_light_names_agree_with_the_registries() -> None:
    from ghsim.config.schema_export import SCHEMA_KINDS as KINDS
    from ghsim.importers.cli_import import FORMATS
    from ghsim.names import SCHEMA_KINDS as NAMES
    from ghsim.names import TRACE_FORMATS

    assert tuple(NAMES) == tuple(KINDS)
    assert tuple(TRACE_FORMATS) == tuple(FORMATS)


def test_help_imports_nothing_heavy() -> None:
    code = ("import sys; from ghsim.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('numpy', 'networkx', 'simpy', 'pydantic', 'matplotlib', "
            "'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
