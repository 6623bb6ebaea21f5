"""What ``ghsim inspect --json`` shows, by hand: a NIC's rates, a model's embedding
parameters, a scenario's FLOPs per step."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ghsim.cli import main


def _inspect(name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["inspect", name, "--json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_a_nic_shows_its_line_rate_and_its_nccl_rate(capsys: pytest.CaptureFixture[str]) -> None:
    """ConnectX-7 NDR: 400 Gb/s is 50 GB/s; NCCL moves 0.94 of it (the file's
    nccl_efficiency, FACTS.md T2#18: 47 of 50 GB/s)."""
    rates = _inspect("cx7-ndr400", capsys)["rates"]["nic_bytes_per_s"]
    assert rates == {"line_rate": 50e9, "nccl_busbw": pytest.approx(0.94 * 50e9)}


def test_an_untied_model_counts_both_vocabulary_matrices(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Llama 2 7B: an input embedding and an output layer of 32,000 x 4,096 each."""
    view = _inspect("llama2-7b", capsys)
    assert view["params_embedding"] == 2 * 32000 * 4096
    assert view["params"] == view["params_non_embedding"] + view["params_embedding"]


def test_a_scenario_counts_the_flops_of_every_replica(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Two data-parallel replicas: a step is the global batch of 128 sequences of 8,192
    tokens, whatever the replicas."""
    view = _inspect("llama3-70b-gh200-nvl32", capsys)
    assert view["layout"]["dp"] == 2
    assert view["tokens_per_step"] == 128 * 8192
    assert view["model_flops_per_step"] == view["model_flops_per_token"] * 128 * 8192
