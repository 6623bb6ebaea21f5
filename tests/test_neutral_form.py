"""The neutral form of published MoE runs (``kind: validation_points_moe``, as
../shared/validation/moe.yaml writes them) read by ``ghsim validate`` as it stands: each reading
of its words checked against the scenario keys it stands for, and a word ghsim cannot read fails
its point alone, with the schema's message naming the key."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from ghsim.cli import main
from ghsim.config import load_model, load_system
from ghsim.config.neutral import from_neutral
from ghsim.config.yamlio import read_mapping

NEUTRAL = Path(__file__).parent / "data" / "neutral_moe.yaml"


def _points() -> dict[str, dict[str, Any]]:
    converted = from_neutral(read_mapping(NEUTRAL))
    assert converted["kind"] == "validation_points" and "conventions" not in converted
    return {p["id"]: p for p in converted["points"]}


def test_the_words_of_deepseek_v3s_router_layers_and_precision_become_scenario_keys() -> None:
    point = _points()["mbridge_25.09_deepseekv3_h100_1024"]
    scenario = point["scenario"]
    moe, training = scenario["model"]["moe"], scenario["training"]
    # "sigmoid, aux-loss-free bias, group-limited (8 groups, top-4 groups / node-limited)"
    assert (moe["router"], moe["expert_bias"], moe["load_balancing"]) == ("sigmoid", True, "none")
    assert (moe["router_groups"], moe["router_topk_groups"]) == (8, 4)
    # "first 3 layers dense, layers 4-61 MoE ([0]*3+[1]*58)"; the dense MLP's width
    assert moe["dense_layers"] == 3 and "moe_layer_freq" not in moe
    assert scenario["model"]["ffn_hidden"] == 18432 and "dense_ffn_hidden" not in moe
    # "fp8_tensorwise (assumed; see notes)"
    assert (training["precision"], training["fp8_recipe"]) == ("fp8", "tensorwise")
    assert "grad_accum" not in training
    assert scenario["parallelism"]["recompute"] == "selective"
    assert "edp" not in scenario["parallelism"] and "framework" not in scenario
    # Megatron-Bridge's recipes, and every reading written down in the notes
    assert (training["cross_entropy_fusion_impl"], training["main_grads"]) == ("te", "bf16")
    assert "Read from the neutral form" in point["notes"] and "router sigmoid" in point["notes"]
    assert point["measured"]["step_time_s"] == 25.264
    assert "tokens_per_sec_per_gpu 1297" in point["measured"]["how"]


def test_automodels_gpt_oss_reads_its_windows_clamp_recompute_and_gate() -> None:
    scenario = _points()["automodel_gptoss_20b_h100_8"]["scenario"]
    attention, moe = scenario["model"]["attention"], scenario["model"]["moe"]
    # "alternating sliding-window / full attention (every 2nd layer full)", attention sinks
    assert (attention["sliding_window"], attention["full_attention_every"]) == (128, 2)
    assert attention["sinks"] is True and "window_pattern" not in attention
    # "softmax top-4; clamped SwiGLU": no balancing loss named; GPT-OSS's clamp
    assert scenario["model"]["activation_clamp"] == 7.0
    # "full (activation_checkpointing: true)"; NeMo Automodel's fake balanced gate
    assert scenario["parallelism"]["recompute"] == "full"
    assert "recompute_modules" not in scenario["parallelism"]
    assert (moe["routing"], moe["load_balancing"]) == ("dealt", "none")
    assert scenario["parallelism"]["moe_dispatcher"] == "deepep"
    assert scenario["training"]["deepep_fused_multihot"] is True


@pytest.mark.parametrize(("words", "dispatcher"), [
    ("DeepEP", "deepep"), ("flex/HybridEP", "deepep"), ("alltoall", "alltoall"),
    ("allgather", "allgather")])
def test_the_dispatcher_named_in_words(words: str, dispatcher: str) -> None:
    document = read_mapping(NEUTRAL)
    document["points"][0]["scenario"]["framework"]["dispatcher"] = words
    (point, *_) = from_neutral(document)["points"]
    assert point["scenario"]["parallelism"]["moe_dispatcher"] == dispatcher  # allgather: the
    # schema names it (ghsim has no all-gather dispatcher)


def test_selective_recompute_modules_are_megatrons_names() -> None:
    # "selective: norm, act"
    parallelism = _points()["zoo_qwen3_235b_h100_256_tp2_ep32_pp8"]["scenario"]["parallelism"]
    assert (parallelism["recompute"], parallelism["recompute_modules"]) == (
        "selective", ["layernorm", "moe_act"])


def test_other_kinds_pass_through_unchanged() -> None:
    document = {"schema_version": 1, "kind": "validation_points", "points": []}
    assert from_neutral(copy.deepcopy(document)) == document


def test_ghsim_validate_simulates_the_neutral_form(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", str(NEUTRAL), "--json", "--workers", "1",
                 "--only", "*qwen3_30b*", "--only", "automodel_gptoss*"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["simulated"] == 2 and report["failed"] == 0
    assert all(p["error"] is not None and abs(p["error"]) < 0.3 for p in report["points"])


def test_a_word_ghsim_cannot_read_fails_its_point_naming_the_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = NEUTRAL.read_text().replace(
        "router: softmax top-4; clamped SwiGLU", "router: learned hash routing")
    broken = tmp_path / "moe.yaml"
    broken.write_text(text)
    assert "learned hash routing" in text
    code = main(["validate", str(broken), "--json", "--workers", "1",
                 "--only", "*qwen3_30b*", "--only", "automodel_gptoss*"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["simulated"] == 1 and report["failed"] == 1
    (failed,) = [p["failed"] for p in report["points"] if p["failed"]]
    assert "scenario.model.moe.router" in failed and "learned hash routing" in failed
    assert broken.read_text() == text  # the user's file is read, never rewritten


# -- serving measurements in the neutral form (inference_points with a workload) ----------------

SERVING = Path(__file__).parent / "data" / "neutral_inference.yaml"


def _serving() -> dict[str, dict[str, Any]]:
    converted = from_neutral(read_mapping(SERVING))
    assert converted["kind"] == "inference_points"
    return {p["id"]: p for p in converted["points"]}


def test_each_workload_kind_becomes_its_request_stream() -> None:
    points = _serving()
    bench = points["trtllm015_gh200_96_llama31_8b_128_2048"]["scenario"]["inference"]
    assert bench["requests"] == {"count": 3000, "input_tokens": 128, "output_tokens": 2048}
    assert bench["scheduler"] == {"tuning": "trtllm_bench", "kv_memory_fraction": 0.95}
    nim = points["nim_llama33_70b_2xh100_tp2_5000_500_c5"]
    assert nim["scenario"]["inference"]["requests"] == {
        "arrival": "concurrency", "concurrency": 5, "count": 100, "input_tokens": 5000,
        "output_tokens": 500, "warmup": 5}
    assert (nim["measured"]["ttft_ms"], nim["measured"]["tpot_ms"]) == (546.7, 21.83)
    assert nim["scenario"]["parallelism"] == {"tp": 2} and nim["choose_tp"] is False
    gptj = points["mlperf41_h200x1_gptj_offline"]["scenario"]["inference"]
    # "CNN-DailyMail summarisation, about 69 output tokens per sample"; 4 beams, 128 at most
    assert gptj["requests"]["output_tokens"]["mean"] == 69.0
    assert (gptj["requests"]["max_output_tokens"], gptj["beam_width"]) == (128, 4)
    assert gptj["requests"]["count"] == 13368
    server = points["mlperf41_gh200_144_llama2_70b_server"]
    inference = server["scenario"]["inference"]
    assert inference["find_max_rate"] is True and inference["requests"]["arrival"] == "poisson"
    assert inference["latency_targets"] == {"percentile": 99, "ttft_ms": 2000, "tpot_ms": 200}
    assert inference["requests"]["output_tokens"]["mean"] == 291.0
    assert (server["measured"]["ttft_ms"], server["measured"]["tpot_ms"]) == (280, 161)
    # eight GPUs, no split given: ghsim chooses; the minimum query for each GPU, so that
    # every replica, however many, serves at least one
    eight = points["mlperf41_dgxh100_llama2_70b_offline"]
    assert eight["choose_tp"] is True
    assert eight["scenario"]["inference"]["requests"]["count"] == 8 * 24576
    # NVIDIA's harness hands KV blocks out as sequences grow; beam search keeps no-evict
    assert eight["scenario"]["inference"]["scheduler"]["capacity"] == "max_utilization"
    assert "capacity" not in gptj["scheduler"]


@pytest.mark.parametrize(("isl", "osl", "count"), [
    (128, 128, 30000), (128, 2048, 3000), (128, 4096, 1500), (1000, 2000, 1500),
    (2048, 128, 3000), (2048, 2048, 1500), (5000, 500, 1500), (1000, 1000, 3000),
    (500, 2000, 3000), (20000, 2000, 1000)])
def test_trtllm_bench_dataset_sizes_are_the_performance_overviews(isl: int, osl: int,
                                                                    count: int) -> None:
    from ghsim.config.neutral_serving import requests_for

    assert requests_for(isl, osl) == count


@pytest.mark.parametrize(("system", "model", "tp"), [
    ("dgx-h100", "llama2-70b", 2), ("dgx-h200", "llama2-70b", 1),
    ("dgx-h100", "mixtral-8x7b", 1), ("dgx-h100", "llama3.1-405b", 8)])
def test_an_unstated_split_is_the_smallest_tp_whose_weights_leave_room(
        system: str, model: str, tp: int) -> None:
    """FP8 weights: Llama 2 70B takes 69.5 GB, 81 % of an 80 GiB H100 alone, 41 % at TP 2,
    and 46 % of an H200; Mixtral 8x7B 47 GB, 55 %; Llama 3.1 405B takes 64 % of each H100 even
    at TP 8, so it takes all eight GPUs."""
    from ghsim.config.schema import ServingScenarioSpec
    from ghsim.serving.memory import smallest_tp

    spec = ServingScenarioSpec.model_validate({
        "name": "split", "system": load_system(system), "num_gpus": 8,
        "model": load_model(model), "inference": {
            "precision": "fp8", "requests": {"count": 1, "input_tokens": 1,
                                             "output_tokens": 1}}})
    assert smallest_tp(spec) == tp


def test_ghsim_validate_simulates_neutral_serving_points(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", str(SERVING), "--json", "--workers", "1"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["simulated"] == 5 and report["failed"] == 0
    errors = {p["id"]: p["error"] for p in report["points"]}
    assert all(abs(e) < 0.25 for e in errors.values()), errors


def test_an_unknown_workload_fails_its_point_naming_the_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = SERVING.read_text().replace("kind: fixed_length_concurrency", "kind: open_loop")
    broken = tmp_path / "inference.yaml"
    broken.write_text(text)
    code = main(["validate", str(broken), "--json", "--workers", "1", "--only", "nim_*"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["failed"] == 1
    (failed,) = [p["failed"] for p in report["points"]]
    assert "scenario.inference.workload" in failed


def test_a_model_spelled_otherwise_is_the_shipped_one_and_a_stranger_is_named() -> None:
    from ghsim.config.neutral_serving import inference_point

    point = read_mapping(SERVING)["points"][0]
    respelled = inference_point({**point, "model": "Llama-2-70B"})
    assert respelled["scenario"]["model"] == "llama2-70b"
    # and MLPerf's dataset for it is found under its shipped name
    assert respelled["scenario"]["inference"]["requests"]["max_output_tokens"] == 1024
    assert "model llama2-70b for 'Llama-2-70B'" in respelled["notes"]
    assert inference_point({**point, "model": "falcon-180b"})["scenario"]["model"] == "falcon-180b"


def test_a_maxq_run_is_served_on_the_power_capped_system() -> None:
    from ghsim.config.neutral_serving import inference_point

    point = read_mapping(SERVING)["points"][0]
    maxq = {**point, "system": "dgx-h200",
            "system_description": "8x H200 SXM 141 GB, MaxQ (power-capped)"}
    assert inference_point(maxq)["scenario"]["system"] == "dgx-h200-maxq"
    assert inference_point({**maxq, "system": "dgx-h100"})["scenario"]["system"] == "dgx-h100"


@pytest.mark.parametrize(("words", "dense", "freq"), [
    ("first 3 layers dense, layers 4-61 MoE ([0]*3+[1]*58)", 3, 1),
    ("every layer MoE (1)", 0, 1),
    ("alternating dense / MoE, MoE second ([0,1]*24)", 1, 2),
    ("[1, 0] * 24", 0, 2),
    ("first 2 layers dense", 2, 1)])
def test_which_layers_are_moe_read_from_megatrons_list_or_words(words: str, dense: int,
                                                                  freq: int) -> None:
    document = read_mapping(NEUTRAL)
    document["points"][0]["scenario"]["model"]["moe"]["moe_layer_freq"] = words
    moe = from_neutral(document)["points"][0]["scenario"]["model"]["moe"]
    assert (moe.get("dense_layers", 0), moe.get("layer_freq", 1)) == (dense, freq)
    assert "moe_layer_freq" not in moe


def test_a_layer_list_no_frequency_reproduces_is_left_for_the_schema() -> None:
    document = read_mapping(NEUTRAL)
    document["points"][0]["scenario"]["model"]["moe"]["moe_layer_freq"] = "[0,1,1]*20"
    moe = from_neutral(document)["points"][0]["scenario"]["model"]["moe"]
    assert moe["moe_layer_freq"] == "[0,1,1]*20"


def test_a_layer_list_of_absurd_length_is_not_spelled_out() -> None:
    document = read_mapping(NEUTRAL)
    document["points"][0]["scenario"]["model"]["moe"]["moe_layer_freq"] = "[1]*999999999999"
    moe = from_neutral(document)["points"][0]["scenario"]["model"]["moe"]
    assert moe["moe_layer_freq"] == "[1]*999999999999"  # the schema names it
