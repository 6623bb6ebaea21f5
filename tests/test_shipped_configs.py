"""Every shipped file loads, cites a source for every number, and inspects cleanly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ghsim.cli import main
from ghsim.config import load_file
from ghsim.config.sources import dangling_sources, unsourced_numbers
from ghsim.config.yamlio import read_mapping
from tests.conftest import shipped

ALL = shipped("configs", "models")
CITED = shipped("configs/hardware", "configs/systems", "models")


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def test_the_library_is_complete() -> None:
    stems = {p.stem for p in ALL}
    assert {"gh200-96gb", "gh200-144gb", "h100-sxm5-80gb", "h200-sxm-141gb", "a100-sxm4-80gb",
            "grace", "xeon-8480c", "epyc-7742"} <= stems
    assert {"gh200-single", "gh200-nvl2", "gh200-quad", "gh200-nvl32", "dgx-gh200", "dgx-h100",
            "dgx-h200", "dgx-a100"} <= stems
    assert {"gpt3-175b", "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b",
            "llama3.1-405b", "nemotron4-340b", "qwen3-14b"} <= stems
    assert {"deepseek-v3", "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-20b", "gpt-oss-120b",
            "mixtral-8x22b", "llama4-scout", "llama4-maverick"} <= stems


@pytest.mark.parametrize("path", CITED, ids=_id)
def test_every_number_has_a_source(path: Path) -> None:
    document = read_mapping(path)
    assert unsourced_numbers(document) == []
    assert dangling_sources(document) == []


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_inspect_renders(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    load_file(path)
    assert main(["inspect", str(path)]) == 0
    assert capsys.readouterr().out.strip()


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_inspect_json_is_one_object(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(path), "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["kind"] == read_mapping(path)["kind"]
    if view["kind"] in ("model", "scenario"):
        assert view["params"] > 0 and view["model_flops_per_token"] > 0


def test_inspect_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "gh200-nvl32", "--json", "--gpus", "64"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["totals"]["num_gpus"] == 64
    assert view["totals"]["num_nvlink_domains"] == 2
