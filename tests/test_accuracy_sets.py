"""Accuracy on validation/moe.yaml (issue 13) and validation/gh200.yaml (issue 11).

Their own module, apart from tests/test_calibration.py, so that pytest-xdist (which hands each
worker whole modules) runs them beside the calibration set rather than after it.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import pytest

from ghsim.engine.validation import summarize, validate_file
from tests.conftest import CORES, ROOT


def _benchmark(name: str) -> ModuleType:
    """A script of benchmarks/ as a module (the scripts import one another by name)."""
    folder = str(ROOT / "benchmarks")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)


def test_moe_points_all_simulate_within_a_regression_bound() -> None:
    """validation/moe.yaml (issue 13): every point simulates and fits, as a measured run did
    (GPT-OSS-120B did not while the table's MBS 4, the Blackwell presets', stood for the H100
    preset's 1), within the issue's target MAPE of 15 %; today's is 14.0 % (worst -35 %,
    Qwen3-235B at tp 4 / ep 8). It was 17.6 % before the router's small kernels, GPT-OSS's
    eager clamps and RoPE and DeepEP's unfused routing map were costed, 15.3 % before NCCL's
    all-to-all took its own measured NVLink rate, Megatron's forced balance its random
    routing's busiest rank and partial tiles, and NeMo Automodel's dealt blocks of experts
    the one or two ranks DeepEP sends a token to."""
    outcomes = validate_file(ROOT / "validation" / "moe.yaml", workers=CORES)
    summary = summarize(outcomes)
    assert not [o.failed for o in outcomes if o.failed]
    assert summary["simulated"] == 9
    assert summary["not_fitting"] == 0, [o.does_not_fit for o in outcomes]
    report = ", ".join(f"{o.id} {o.error:+.1%}" for o in outcomes if o.error is not None)
    assert summary["mape"] <= 0.15, report


def test_gh200_points_all_fit_in_memory_within_a_regression_bound() -> None:
    """A measured run ran, so its scenario fits: SuperOffload's Qwen3-14B on one 96 GB GH200
    did not while ZeRO-Offload's gradients were (wrongly) kept whole in HBM. The issue's
    target is a MAPE of 12 %; today's is 13.3 % (the two small models, 300M and GPT 800M,
    still miss by -66 and -13 %, and the Alps runs are 2-14 % fast, the February 2025 ones
    at the 624 W module cap of the time), so the bound only guards against regressions."""
    outcomes = validate_file(ROOT / "validation" / "gh200.yaml", workers=CORES)
    summary = summarize(outcomes)
    assert summary["not_fitting"] == 0, [o.does_not_fit for o in outcomes]
    report = ", ".join(f"{o.id} {o.error:+.1%}" for o in outcomes if o.error is not None)
    assert summary["simulated"] == 12 and summary["mape"] <= 0.155, report


def test_caraml_800m_on_four_gpu_systems_within_its_published_figure() -> None:
    """CARAML's GPT-800M (legacy Megatron-LM f7727433, fp16) at global batches 16-512 on 4
    A100s, 4 H100 SXMs, one GH200 and a JEDI node, as FZJ-JSC/CARAML@f9a1705's figure
    llm_training/result/LLM_tflops_nvidia_jedi_wai.png plots them (benchmarks/caraml_gpus.py).
    Its PyTorch-2.2-era TorchScript runs Megatron's bias-GELU and bias-dropout-add op by op,
    and its local transformer adds the QKV bias and copies q, k, v and the output around the
    flash kernel with PyTorch ops: costed as one fused kernel each the 24 runs were 38 % fast on
    average (worst -53 %); the bias-GELU op by op 17.7 % (worst -36 %), the rest as well
    13.3 % (worst -32 %, the single GH200 at global batch 16), and PyTorch's non-vectorized
    kernels (RoPE, the bias, the copies) at their measured rate 10.5 % (worst -29 %)."""
    caraml_gpus = _benchmark("caraml_gpus")

    errors = [predicted / measured - 1 for _, _, measured, predicted in caraml_gpus.runs()]
    assert len(errors) == 24 and sum(abs(e) for e in errors) / len(errors) <= 0.15, errors


def test_gh200_runs_outside_the_validation_sets() -> None:
    """Published GH200 runs no validation file holds (benchmarks/data/gh200_heldout.yaml,
    benchmarks/gh200_heldout.py): CSCS's Megatron regression runs on Alps (eth-cscs/
    cscs-reframe-tests PR #346: Llama-3 8B on 64 GPUs at 7028.67 tokens/s/GPU, 70B on 128 at
    845.78, each a 10-iteration mean with the first) within 20 % on average (today 13.6 %, both
    fast), and every low-confidence run (Bielik 7B's 'over 9,200' tokens/s/GPU, two Apertus
    rates read off figures) simulated. Nothing was fitted to them."""
    gh200_heldout = _benchmark("gh200_heldout")

    rows = gh200_heldout.rows()
    assert len(rows) == 5 and all(g > 0 for _, _, _, g, _ in rows)
    medium = [abs(g / m - 1) for _, c, m, g, bound in rows if c != "low" and not bound]
    assert len(medium) == 2 and sum(medium) / len(medium) <= 0.20, medium


def test_megatron_weak_scaling_table_outside_the_validation_sets() -> None:
    """The Megatron-LM README's weak-scaling table (NVIDIA/Megatron-LM@f2e5db402c
    images/model_table.png; benchmarks/megatron_weak_scaling.py): its transcription agrees with
    itself (per-GPU teraFLOP/s x GPUs is the aggregate column, over 989.4 the MFU column), and
    ghsim, without interleaving, is within 15 % of its nine BF16 H100 runs on average (today
    9.0 %; the 1.7B and 7.1B models come out 19 % and 14 % fast, the 32B 26 % slow on its
    exposed FP32 gradient reduce-scatter). Nothing was fitted to them."""
    table = _benchmark("megatron_weak_scaling")

    rows = table.table()
    assert len(rows) == 9
    for row in rows:
        assert row.tflops_per_gpu * row.gpus / 1e3 == pytest.approx(row.aggregate_pflops,
                                                                    abs=0.06), row.name
        assert row.tflops_per_gpu / 989.4 == pytest.approx(row.mfu, abs=0.006), row.name
        assert row.tp * row.pp * row.dp == row.gpus, row.name
    errors = [table.predicted_s(row, interleaved=False) / table.measured_s(row) - 1
              for row in rows]
    assert sum(abs(e) for e in errors) / len(errors) <= 0.15, errors


def test_trtllm_perf_overview_dense_rows_outside_the_validation_sets() -> None:
    """TensorRT-LLM v1.0's performance overview (NVIDIA/TensorRT-LLM@00f37686
    docs/source/performance/perf-overview.md; benchmarks/trtllm_perf_overview.py), rows no
    validation file holds: Llama 3.3 70B and Llama 3.1 8B at TP 1 and 2 on H100 and H200, ten
    input/output lengths each, within 10 % on average (today 7 %). Llama 3.1 405B at TP 8 is
    predicted 5-32 % fast (all 20 rows too fast), which the bound below only guards."""
    trtllm_perf_overview = _benchmark("trtllm_perf_overview")

    errors: dict[bool, list[float]] = {True: [], False: []}
    for _, _, tp, _, _, measured, ghsim in trtllm_perf_overview.rows():
        errors[tp == 8].append(ghsim / measured - 1)
    small = errors[False]
    assert len(small) == 40 and sum(abs(e) for e in small) / len(small) <= 0.10, small
    assert len(errors[True]) == 20 and max(errors[True]) <= 0.35, errors[True]
