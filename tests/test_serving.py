"""Serving simulation: hand-computed iterations, engine bookkeeping, memory, properties, the
capacity effect of HBM size, KV offload, and the published points of validation/inference.yaml."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from ghsim.cli import main
from ghsim.config import load_any_scenario, serving_scenario_from_spec
from ghsim.config.loader import load_entries
from ghsim.config.schema import InferencePointSpec
from ghsim.config.serving_layout import ServingScenario
from ghsim.errors import InputError
from ghsim.serving import simulate_serving
from ghsim.serving.costs import Batch, IterationModel
from ghsim.serving.memory import serving_memory, smallest_tp, trtllm_bench_limits
from ghsim.units import GIB
from ghsim.workload.modelsize import parameter_count

ROOT = Path(__file__).resolve().parents[1]
POINTS = ROOT / "validation" / "inference.yaml"


def scenario(**inference: Any) -> ServingScenario:
    """A serving scenario from an inline mapping: Llama 3 8B on one H200 unless overridden."""
    base: dict[str, Any] = {
        "schema_version": 1, "kind": "scenario", "name": "t", "system": "dgx-h200",
        "num_gpus": 1, "model": "llama3-8b",
        "inference": {"precision": "bf16",
                      "requests": {"count": 64, "input_tokens": 128, "output_tokens": 64}},
    }
    for key, value in inference.items():
        if key in ("system", "num_gpus", "model", "parallelism"):
            base[key] = value
        else:
            base["inference"][key] = value
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scenario.yaml"
        path.write_text(yaml.safe_dump(base))
        loaded = load_any_scenario(path)
    assert isinstance(loaded, ServingScenario)
    return loaded


# -- iteration costs by hand ----------------------------------------------------------------------


def test_bandwidth_bound_decode_step_is_the_weight_and_kv_read_time() -> None:
    """64 sequences of 8,000 cached tokens on one H200, BF16: each decode iteration reads the
    weights once and every sequence's KV cache; launches, norms and the host add the rest."""
    s = scenario(requests={"count": 64, "input_tokens": 8000, "output_tokens": 256},
                 scheduler={"max_batch_size": 64, "chunked_prefill": True})
    result = simulate_serving(s)
    run = result.run
    assert run is not None
    log = run.iterations
    decode = [i for i, p in enumerate(log.prefill_tokens) if p == 0 and log.decode_seqs[i] == 64]
    assert len(decode) > 30
    memory = serving_memory(s.spec)
    count = parameter_count(s.spec.model)
    read_weights = (count.total - count.embedding) * 2.0  # BF16, all but the embedding table
    weight_rate = 4800e9 * 0.6567  # H200 HBM3e peak x skinny-GEMM efficiency (configs/hardware)
    kv_rate = 4800e9 * 0.8501  # x STREAM efficiency: decode attention reads the KV cache
    # Each sequence holds its prompt, its first token and at most 255 tokens generated since.
    low = read_weights / weight_rate + 64 * 8001 * memory.kv_bytes_per_token / kv_rate
    high = read_weights / weight_rate + 64 * (8001 + 255) * memory.kv_bytes_per_token / kv_rate
    for i in decode:
        assert low <= log.duration_s[i] <= 1.10 * high


def test_iteration_parts_add_up_and_move_with_the_batch() -> None:
    model = IterationModel(scenario())
    small = model.iteration(Batch(decode_seqs=8, logits_rows=8, decode_ctx_hbm=8 * 1000), 8)
    large = model.iteration(Batch(decode_seqs=256, logits_rows=256,
                                  decode_ctx_hbm=256 * 1000), 256)
    assert small.total_s == pytest.approx(sum(small.parts.values()))
    # Weight reads do not grow with the batch on the plain roofline (decode is weight-streaming:
    # only the activations' bytes do); KV reads do, 32x for 32x the sequences. At 256 rows the
    # tensor-core time nears the memory time, which the rounded roofline charges for on top.
    plain = IterationModel(scenario())
    plain.gpu = dataclasses.replace(plain.gpu, ridge_exponent=math.inf)
    plain_small = plain.iteration(Batch(decode_seqs=8, logits_rows=8, decode_ctx_hbm=8000), 8)
    plain_large = plain.iteration(Batch(decode_seqs=256, logits_rows=256,
                                        decode_ctx_hbm=256 * 1000), 256)
    assert plain_small.parts["weights"] < plain_large.parts["weights"] \
        <= plain_small.parts["weights"] * 1.10
    assert plain_large.parts["weights"] < large.parts["weights"] \
        <= plain_large.parts["weights"] * 2 ** (1 / model.gpu.ridge_exponent)
    assert large.parts["kv_read"] == pytest.approx(32 * small.parts["kv_read"], rel=0.05)
    prefill = model.iteration(Batch(prefill_tokens=8192, prefill_pairs=8192 * 4096.5,
                                    logits_rows=1), 1)
    assert prefill.parts["gemm"] > prefill.parts["weights"]  # prefill is compute-bound


def test_small_m_gemm_is_memory_bound_and_large_m_compute_bound() -> None:
    model = IterationModel(scenario())
    n = k = 4096
    weights = n * k * 2.0
    seconds, compute = model.gemm_s(16, n, k, "bf16", weights)
    assert not compute
    # the bytes at the skinny-GEMM rate; the rounded roofline adds under 0.5 % this far from
    # the ridge (16 rows padded to 64 of tensor-core work)
    assert seconds == pytest.approx((weights + 16 * (k * 2 + n * 2))
                                    / model.weight_stream_bytes_per_s, rel=0.005)
    _, compute = model.gemm_s(8192, n, k, "bf16", weights)
    assert compute


# -- engine bookkeeping ---------------------------------------------------------------------------


def test_iteration_counts_of_in_flight_and_one_at_a_time() -> None:
    """Four requests that all fit: one prefill iteration, then output - 1 decode iterations;
    with max_batch_size 1 each request takes its own output-token count of iterations."""
    lengths = {"count": 4, "input_tokens": 100, "output_tokens": 10}
    together = simulate_serving(scenario(requests=lengths)).run
    assert together is not None
    assert len(together.iterations.start_s) == 1 + 9
    alone = simulate_serving(scenario(requests=lengths, scheduler={"max_batch_size": 1})).run
    assert alone is not None
    assert len(alone.iterations.start_s) == 4 * 10
    first = sorted(r.first_token_s for r in alone.requests)
    assert first == sorted(first) and first[0] < first[-1]
    assert all(r.finish_s > r.first_token_s for r in alone.requests)


def test_static_batching_waits_for_the_longest_request() -> None:
    lengths = {"count": 4, "input_tokens": 100,
               "output_tokens": {"distribution": "uniform", "mean": 30, "min": 10, "max": 50}}
    static = simulate_serving(scenario(requests=lengths, scheduler={
        "policy": "static", "max_batch_size": 2})).run
    inflight = simulate_serving(scenario(requests=lengths, scheduler={
        "max_batch_size": 2})).run
    assert static is not None and inflight is not None
    assert static.end_s > inflight.end_s


def test_token_budget_splits_prompts_with_chunked_prefill() -> None:
    s = scenario(requests={"count": 1, "input_tokens": 5000, "output_tokens": 2},
                 scheduler={"max_num_tokens": 2048, "chunked_prefill": True})
    run = simulate_serving(s).run
    assert run is not None
    assert run.iterations.prefill_tokens[:3].tolist() == [2048, 2048, 904]


def test_prompt_longer_than_the_budget_without_chunking_is_an_input_error() -> None:
    s = scenario(requests={"count": 1, "input_tokens": 5000, "output_tokens": 2},
                 scheduler={"max_num_tokens": 2048})
    with pytest.raises(InputError, match="chunked_prefill"):
        simulate_serving(s)


# -- memory ---------------------------------------------------------------------------------------


def test_weights_and_kv_bytes_by_hand() -> None:
    s = scenario(precision="fp8", model="llama3-70b")
    memory = serving_memory(s.spec)
    # FP8 linear layers, BF16 embedding and lm_head (ModelOpt leaves them), BF16 norms
    count = parameter_count(s.spec.model)
    norms = 80 * count.norms_per_layer + count.final_norm
    linear = count.total - count.embedding - count.output - norms
    assert memory.weights_bytes == linear + 2 * (count.embedding + count.output + norms)
    assert memory.kv_bytes_per_token == 2 * 80 * 8 * 128 * 1  # FP8 KV cache by default
    wide_kv = serving_memory(scenario(precision="fp8", kv_cache_dtype="bf16",
                                      model="llama3-70b").spec)
    assert wide_kv.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2  # its own dtype, not the weights'
    assert wide_kv.weights_bytes == memory.weights_bytes
    tp2 = serving_memory(scenario(precision="fp8", model="llama3-70b", num_gpus=2,
                                  parallelism={"tp": 2}).spec)
    assert tp2.kv_bytes_per_token == memory.kv_bytes_per_token / 2
    # tp splits the linear layers and the lm_head; the embedding and the norms are replicated
    assert tp2.weights_bytes == (linear + 2 * count.output) / 2 + 2 * (count.embedding + norms)


def test_an_unsplit_replica_takes_the_smallest_tp_leaving_room_for_its_kv_cache() -> None:
    # Llama 3 70B's FP8 weights (about 70 GB) are 82 % of an 80 GB H100, more than the 60 %
    # MLPerf submissions serve at: TP 2 (41 %); 46 % of an H200: TP 1; in BF16, TP 4 on H100
    def chosen(system: str, precision: str) -> int:
        return smallest_tp(scenario(precision=precision, model="llama3-70b", system=system,
                                    num_gpus=8).spec)
    assert chosen("dgx-h100", "fp8") == 2
    assert chosen("dgx-h200", "fp8") == 1
    assert chosen("dgx-h100", "bf16") == 4


def test_trtllm_bench_heuristic_by_hand() -> None:
    """Llama 3.1 70B FP8 on one H100 at 128/2048: (80 GiB - 70.55e9 B) x 0.95 of KV room at
    160 KiB a token holds 40.8 requests of 2176 tokens: max_batch_size 64, tokens 2048."""
    s = scenario(precision="fp8", model="llama3.1-70b", system="dgx-h100")
    weight = parameter_count(s.spec.model).total / GIB
    requests = (80 - weight) * 0.95 / (2 * 80 * 8 * 128 / GIB * 2176)
    assert requests == pytest.approx(40.8, abs=0.1)
    assert trtllm_bench_limits(s.spec, 128, 2048) == (64, 2048)


# -- properties -----------------------------------------------------------------------------------


def test_more_hbm_never_lowers_throughput() -> None:
    rates = []
    for gib in (90, 100, 120, 141):
        s = scenario(precision="fp8", model="llama3-70b",
                     requests={"count": 200, "input_tokens": 1024, "output_tokens": 1024})
        spec = s.spec
        gpu = spec.system.node.gpu.gpu
        assert gpu is not None
        memory = gpu.memory.model_copy(update={"capacity_gib": gib})
        part = spec.system.node.gpu.model_copy(update={"gpu": gpu.model_copy(
            update={"memory": memory})})
        system = spec.system.model_copy(update={"node": spec.system.node.model_copy(
            update={"gpu": part})})
        rates.append(simulate_serving(ServingScenario(
            spec.model_copy(update={"system": system}), s.layout, "t")).output_tokens_per_s)
    assert rates == sorted(rates) and rates[-1] > 1.5 * rates[0]


def test_server_beyond_saturation_reports_growing_ttft() -> None:
    def ttft(count: int) -> float:
        s = scenario(requests={"count": count, "input_tokens": 512, "output_tokens": 128,
                               "arrival": "poisson", "rate_per_s": 500.0})
        return float(simulate_serving(s).to_dict()["ttft_s"]["mean"])

    assert ttft(800) > 1.5 * ttft(400)


def test_rate_search_meets_the_targets_and_the_next_rate_does_not() -> None:
    s = scenario(requests={"count": 300, "input_tokens": 512, "output_tokens": 128,
                           "arrival": "poisson", "rate_per_s": 1.0},
                 latency_targets={"ttft_ms": 500, "tpot_ms": 50}, find_max_rate=True)
    data = simulate_serving(s).to_dict()
    assert data["latency_targets"]["met"]
    tried = data["rate_search"]["tried"]
    rate = data["rate_search"]["rate_per_s"]
    assert any(not t["meets_targets"] and t["rate_per_s"] > rate for t in tried)
    assert all(t["rate_per_s"] <= rate for t in tried if t["meets_targets"])


def test_long_context_runs_with_kv_offload_and_is_bound_by_c2c() -> None:
    """One 400k-token prompt of Llama 3 70B FP8 needs 61 GiB of KV cache: more than a GH200
    96 GB leaves (25 GiB). Without offload it cannot be served; with the rest in LPDDR5X,
    read in place over NVLink-C2C or copied back for every iteration, it runs, and C2C
    bounds it."""
    lengths = {"count": 1, "input_tokens": 400_000, "output_tokens": 8000}
    base = {"system": "gh200-single", "model": "llama3-70b", "precision": "fp8",
            "requests": lengths, "scheduler": {"chunked_prefill": True}}
    alone = simulate_serving(scenario(**base)).to_dict()
    assert not alone["memory"]["fits"] and alone["output_tokens_per_s"] == 0
    offloaded = simulate_serving(scenario(**base, kv_offload={"policy": "in_place"})).to_dict()
    assert offloaded["memory"]["fits"]
    assert offloaded["memory"]["host"]["peak_bytes"] > 10 * GIB
    assert offloaded["bottleneck"]["resource"] == "c2c"
    reloaded = simulate_serving(scenario(**base, kv_offload={"policy": "reload"})).to_dict()
    assert reloaded["bottleneck"]["resource"] == "c2c"


def test_offload_over_pcie_is_slower_than_over_c2c() -> None:
    lengths = {"count": 4, "input_tokens": 60_000, "output_tokens": 500}
    rates = {}
    for system in ("gh200-single", "dgx-h100"):
        s = scenario(system=system, model="llama3-70b", precision="fp8", requests=lengths,
                     scheduler={"chunked_prefill": True}, kv_offload={"policy": "reload"})
        rates[system] = simulate_serving(s).output_tokens_per_s
    assert rates["gh200-single"] > 2 * rates["dgx-h100"]


# -- published points -----------------------------------------------------------------------------


def _point(point_id: str) -> InferencePointSpec:
    for entry in load_entries(POINTS, "inference_points", "points", InferencePointSpec):
        assert isinstance(entry, InferencePointSpec)
        if entry.id == point_id:
            return entry
    raise KeyError(point_id)


def _predicted(point_id: str) -> float:
    point = _point(point_id)
    return simulate_serving(serving_scenario_from_spec(point.scenario, str(POINTS))
                            ).output_tokens_per_s


def test_capacity_effect_of_hbm_size_matches_the_published_ratios() -> None:
    """TensorRT-LLM's tables (perf-overview.md, 0.15 and 0.17), Llama 3.1 70B FP8 TP1 at
    128/2048: GH200 96 GB / H100 80 GB = 1940.3 / 804.7 = 2.41; H200 / GH200 = 4165.7 /
    2082.7 = 2.00. The issue's target is 15 % on both: predicted 2.52 and 2.26 (13 % high;
    2.45 on the plain roofline, before GEMMs near the ridge, which H200's 2.7x larger decode
    batch runs, were costed on the rounded one)."""
    gh200 = _predicted("trtllm015_gh200_96_llama31_70b_128_2048_tp1")
    h100 = _predicted("trtllm015_h100_llama31_70b_128_2048_tp1")
    h200 = _predicted("trtllm017_h200_llama31_70b_128_2048_tp1")
    assert gh200 / h100 == pytest.approx(1940.3 / 804.7, rel=0.15)
    assert h200 / gh200 == pytest.approx(4165.7 / 2082.7, rel=0.15)


def test_an_offline_run_s_replicas_serve_in_their_steady_state() -> None:
    """An MLPerf offline run queues its whole query at once (samples_per_query in its
    mlperf_log_summary.txt: 971,520 on DGX H100 for Mixtral) and lasts 2400 s or more, so the
    batch's start and drain are a sliver of it. The shipped point queues that query: its
    replicas' throughput is what half as many requests give. With the benchmark's minimum
    query (15,000), each of the 8 replicas served 1,875 requests and ran 22 % slow."""
    point = _point("mlperf41_dgxh100_mixtral_8x7b_offline")
    assert point.scenario.inference is not None
    requests = point.scenario.inference.requests
    assert requests.count == 971520
    shipped = simulate_serving(serving_scenario_from_spec(point.scenario, str(POINTS)))
    inference = point.scenario.inference.model_copy(
        update={"requests": requests.model_copy(update={"count": requests.count // 2})})
    half = point.scenario.model_copy(update={"inference": inference})
    halved = simulate_serving(serving_scenario_from_spec(half, str(POINTS)))
    assert halved.output_tokens_per_s == pytest.approx(shipped.output_tokens_per_s, rel=0.02)


def test_nim_curve_saturates_at_the_kv_capacity() -> None:
    """NIM 1.8, Llama 3.3 70B FP8 TP2 on 2x H100, 5000/500: throughput saturates near 920
    tokens/s from 100 clients while inter-token latency flattens near 93 ms."""
    c50, c100, c250 = (_predicted(f"nim_llama33_70b_2xh100_tp2_5000_500_c{c}")
                       for c in (50, 100, 250))
    assert c100 > c50
    assert c250 == pytest.approx(c100, rel=0.10)
    assert c100 == pytest.approx(917.3, rel=0.15)


def test_validation_file_converts_every_point() -> None:
    entries = list(load_entries(POINTS, "inference_points", "points", InferencePointSpec))
    assert len(entries) == 34
    assert all(isinstance(e, InferencePointSpec) for e in entries)


def test_inline_mapping_and_file_loading_agree(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("schema_version: 1\nkind: scenario\nsystem: dgx-h200\nnum_gpus: 1\n"
                    "model: llama3-8b\ninference:\n  precision: bf16\n  requests:\n"
                    "    count: 64\n    input_tokens: 128\n    output_tokens: 64\n")
    loaded = load_any_scenario(path)
    assert isinstance(loaded, ServingScenario)
    assert math.isclose(simulate_serving(loaded).output_tokens_per_s,
                        simulate_serving(scenario()).output_tokens_per_s)


# -- the command line -----------------------------------------------------------------------------


def test_run_writes_result_and_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["run", "llama3.1-70b-fp8-gh200-serving", "--set", "inference.requests.count=200",
                 "-o", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "serving" and data["output_tokens_per_s"] > 0
    # forward model FLOPs: 2 x 70.55e9 active parameters a prompt or output token, one GPU
    tokens = data["output_tokens_per_s"] + data["input_tokens_per_s"]
    assert data["model_tflops_per_gpu"] == pytest.approx(2 * 70_553_706_496 * tokens / 1e12)
    assert data["mfu"] == pytest.approx(data["model_tflops_per_gpu"] / 1978.9, rel=0.01)
    assert json.loads((out / "result.json").read_text()) == data
    trace = json.loads((out / "trace.json").read_text())["traceEvents"]
    assert {e["ph"] for e in trace} >= {"X", "C", "M"}
    assert main(["inspect", "llama3.1-70b-fp8-gh200-serving", "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["kind"] == "scenario" and view["form"] == "serving"
    assert view["memory_per_gpu"]["kv_blocks"] > 0


@pytest.mark.parametrize(("override", "key"), [
    ("inference.requests.arrival=poisson", "inference.requests"),
    ("inference.scheduler.max_num_tokens=64", "inference.requests.input_tokens"),
    ("inference.requests.concurrency=3", "inference.requests"),
    ("parallelism.tp=3", "parallelism.tp"),
    ("inference.kv_offload.policy=sideways", "inference.kv_offload.policy"),
])
def test_bad_serving_input_is_one_line_and_exit_2(
        override: str, key: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["run", "llama3.1-70b-fp8-gh200-serving", "--set",
            "inference.scheduler.chunked_prefill=false", "--set", override]
    assert main(base) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and key in err[0], err


def test_inference_points_stay_within_a_regression_bound() -> None:
    """All 34 points of validation/inference.yaml simulate; their throughput MAPE is held at
    today's figure (15.0 %, the issue's target 15 %: see the README for the misses; it was
    11.7 % while two errors cancelled ghsim's overprediction of TensorRT-LLM's large batches:
    too few MLPerf offline requests and KV blocks reserved to the output limit)."""
    from ghsim.engine.validation import summarize, validate_inference_file
    from tests.conftest import CORES

    outcomes = validate_inference_file(POINTS, workers=CORES)
    summary = summarize(outcomes)
    assert summary["simulated"] == 34 and summary["failed"] == 0
    assert summary["mape"] <= 0.155, summary
    nim = {o.id.rsplit("_c", 1)[1]: o for o in outcomes if o.id.startswith("nim_")}
    for clients in ("1", "5", "25", "50"):  # before saturation: TTFT and inter-token latency
        o = nim[clients]                      # within 25 % (the judged item)
        assert o.predicted_tpot_ms == pytest.approx(o.measured_tpot_ms, rel=0.25), clients
        assert o.predicted_ttft_ms == pytest.approx(o.measured_ttft_ms, rel=0.25), clients
    # the knee: from 50 to 100 clients the KV cache fills and the queue, not the engine,
    # sets the first token (measured 0.83 -> 8.0 s)
    assert nim["100"].predicted_ttft_ms > 4 * nim["50"].predicted_ttft_ms


@pytest.mark.parametrize(("overrides", "key"), [
    (["inference.requests.count=1000000000"], "inference.requests"),
    (["inference.requests.output_tokens=100000000"], "inference.requests"),
    (["inference.requests.input_tokens={distribution: lognormal, mean: 200, std: 100}"],
     "inference.requests.input_tokens"),
    (["inference.requests.arrival=poisson", "inference.requests.rate_per_s=1e12",
      "inference.requests.min_duration_s=1e6"], "inference.requests"),
    # 262,144 prompts of 100k tokens: within the request limit, 12.8 M prefill iterations
    # (found by fuzzing: it ran for minutes and gigabytes under a 20 M iteration limit)
    (["inference.requests.count=262144", "inference.requests.input_tokens=100000",
      "inference.scheduler.chunked_prefill=true"], "inference.requests"),
])
def test_runaway_serving_input_is_refused_at_once(
        overrides: list[str], key: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A request stream that would exhaust memory or run for hours is a one-line error before
    anything is simulated (ghsim.limits.MAX_SERVING_REQUESTS / MAX_SERVING_ITERATIONS)."""
    import time

    argv = ["run", "llama3.1-70b-fp8-gh200-serving"]
    for text in overrides:
        argv += ["--set", text]
    start = time.monotonic()
    assert main(argv) == 2
    assert time.monotonic() - start < 10
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and key in err[0], err


# -- what-if sweeps over a served model -----------------------------------------------------------


def test_a_sweep_over_a_served_model_ranks_throughput_highest_first(tmp_path: Path) -> None:
    import csv
    import json

    from ghsim.config.sweep import load_sweep
    from ghsim.sweep.outputs import write_outputs
    from ghsim.sweep.runner import run_sweep

    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "schema_version": 1, "kind": "sweep", "name": "t",
        "base": "llama3.1-70b-fp8-gh200-serving",
        "grid": {"inference.requests.count": [200]},
        "cases": [{"system": "dgx-h100"}, {"system": "gh200-single"},
                  {"system": "gh200-single", "inference.kv_offload.policy": "in_place"},
                  {"system": "dgx-h100", "inference.kv_offload.policy": "in_place"}]}))
    sweep = load_sweep(path)
    assert sweep.serving and sweep.rank_by == "output_tokens_per_s" and sweep.descending
    outcome = run_sweep(sweep, workers=1)
    ranked = outcome.ranked()
    rates = [r["output_tokens_per_s"] for r in ranked if r["output_tokens_per_s"] is not None]
    assert len(rates) == 3 and rates == sorted(rates, reverse=True)
    assert ranked[-1]["error"] and "gpu_read_host" in ranked[-1]["error"]  # PCIe: no rate
    assert ranked[0]["overrides"]["system"] == "gh200-single"
    assert outcome.best() is ranked[0]
    write_outputs(outcome, tmp_path / "out")
    rows = list(csv.DictReader((tmp_path / "out" / "results.csv").open()))
    assert rows[0]["rank"] == "1" and float(rows[0]["output_tokens_per_s"]) == rates[0]
    assert "breakdown_weights_s" in rows[0]
    assert json.loads((tmp_path / "out" / "results.json").read_text())["best"]["label"]
    assert "Best that can be served" in (tmp_path / "out" / "report.html").read_text()


def test_a_serving_sweep_axis_of_a_training_key_is_refused(tmp_path: Path) -> None:
    from ghsim.config.sweep import load_sweep

    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "schema_version": 1, "kind": "sweep", "name": "t",
        "base": "llama3.1-70b-fp8-gh200-serving", "grid": {"training.seq_len": [1024]}}))
    with pytest.raises(InputError, match="training"):
        load_sweep(path)
    path.write_text(yaml.safe_dump({
        "schema_version": 1, "kind": "sweep", "name": "t", "rank_by": "step_time_s",
        "base": "llama3.1-70b-fp8-gh200-serving", "grid": {"system": ["dgx-h100"]}}))
    with pytest.raises(InputError, match="output_tokens_per_s"):
        load_sweep(path)


# -- multi-head latent attention ------------------------------------------------------------------


def test_mla_keeps_the_latent_kv_cache_whole_on_every_gpu() -> None:
    """DeepSeek-V3 caches kv_lora_rank + qk_rope_head_dim = 512 + 64 values a token a layer
    (inference/model.py kv_cache and pe_cache), 61 layers, one byte each in FP8: 35,136 B a
    token on every GPU, whatever tp is (the latent serves all heads)."""
    tp8 = scenario(model="deepseek-v3", precision="fp8", system="dgx-h200", num_gpus=8,
                   parallelism={"tp": 8, "ep": 8})
    tp4 = scenario(model="deepseek-v3", precision="fp8", system="dgx-h200", num_gpus=4,
                   parallelism={"tp": 4, "ep": 4})
    for s in (tp8, tp4):
        assert serving_memory(s.spec).kv_bytes_per_token == 61 * (512 + 64) * 1
    # 8 x 80 GB cannot hold 671B FP8 weights; 8 x 141 GB can
    h100 = scenario(model="deepseek-v3", precision="fp8", system="dgx-h100", num_gpus=8,
                    parallelism={"tp": 8, "ep": 8})
    assert not serving_memory(h100.spec).fits and serving_memory(tp8.spec).fits


def test_a_prefill_chunk_costs_its_kernel_as_training_does() -> None:
    """Llama 3 8B on one H200 prefills a 2,048-token prompt as one chunk: 32 layers of one
    causal kernel over 2,048 keys (32 heads of 128), which runs the chunk's triangle and the
    diagonal's tiles whole, 2,048 x (1,024 + 208) pairs of 4 x 4,096 FLOPs, at the H200's
    measured rate for 2,048 keys, 0.486 x 989.4 x 2,048 / 2,268 TFLOP/s. The same prompt in
    two chunks of 1,024 costs more: the first kernel sees fewer keys, and each chunk pays its
    own diagonal."""
    model = IterationModel(scenario())
    gpu = model.gpu
    one = Batch(prefill_tokens=2048, prefill_pairs=2048 * 1024.5, prefill_chunks=((2048, 0),))
    flops = 32 * 4 * 4096 * 2048 * (1024 + 208)
    rate = gpu.peak_flops["bf16"] * 0.486 * 2048 / (2048 + 220)
    assert model.iteration(one, 1).parts["attention"] == pytest.approx(flops / rate, rel=1e-9)
    first = Batch(prefill_tokens=1024, prefill_pairs=1024 * 512.5, prefill_chunks=((1024, 0),))
    second = Batch(prefill_tokens=1024, prefill_pairs=1024 * (1024 + 512.5),
                   prefill_past_tokens=1024, prefill_chunks=((1024, 1024),))
    chunked = sum(model.iteration(b, 1).parts["attention"] for b in (first, second))
    assert chunked > model.iteration(one, 1).parts["attention"]


def test_mla_decode_attention_turns_compute_bound_with_all_heads_on_a_gpu() -> None:
    """Absorbed MLA decode does 2 (2 x 512 + 64) FLOPs per head per cached token for its 576
    bytes of FP8 latent. With all 128 heads on a GPU (tp 1) that is 484 FLOPs a byte, beyond
    Hopper's ridge: compute bounds it (FlashMLA's 660 TFLOP/s compute-bound figure is this
    case); with 16 heads a GPU (tp 8), 60 FLOPs a byte, the latent's bandwidth does."""
    batch = Batch(decode_seqs=64, logits_rows=64, decode_ctx_hbm=64 * 8000)
    for tp, bound in ((1, "compute"), (8, "bandwidth")):
        model = IterationModel(scenario(model="deepseek-v3", precision="fp8",
                                        system="dgx-h200", num_gpus=tp,
                                        parallelism={"tp": tp, "ep": tp}))
        gpu = model.gpu
        flops = 61 * 2 * (128 // tp) * (2 * 512 + 64) * 64 * 8000
        compute = flops / (gpu.peak_flops["bf16"] * gpu.attention_efficiency["bf16"])
        reads = 61 * (64 * 8000 * 576 + 64 * (128 // tp) * 576 * 4) / gpu.hbm_bytes_per_s
        expected = compute if bound == "compute" else reads  # launch gaps are a part apart
        assert model.kv_layer_bytes == 576
        assert (compute > reads) == (bound == "compute")
        assert model.iteration(batch, 64).parts["kv_read"] == pytest.approx(expected, rel=1e-6)


# -- sliding-window attention ---------------------------------------------------------------------


def test_windowed_layers_keep_and_read_at_most_the_window() -> None:
    """GPT-OSS: every other layer attends to a 128-token window. A 4,096-token request then
    reserves half its layers' KV for 4,096 tokens and half for 128, 2,112 tokens of all
    layers (33 blocks of 64, not 64); its decode iterations read min(context, 128) in those."""
    from ghsim.serving.engine import EngineConfig, ReplicaEngine, request_blocks
    from ghsim.serving.memory import window_of
    from ghsim.serving.requests import Request

    s = scenario(model="gpt-oss-20b", precision="bf16")
    window = window_of(s.spec.model)
    assert window is not None and (window.tokens, window.windowed, window.layers) == (128, 12, 24)
    request = Request(0, 4000, 96, reserve_tokens=4096)
    assert request_blocks(request, 64, 1, window) == 33
    assert request_blocks(request, 64, 1, None) == 64

    from tests.serving_stub import OneMillisecond

    recorder = OneMillisecond()
    config = EngineConfig(policy="inflight", max_batch_size=8, max_num_tokens=8192,
                          chunked_prefill=False, block_tokens=64, hbm_blocks=1000,
                          host_blocks=0, beam_width=1, arrival="offline", rate_per_s=None,
                          concurrency=None, window=window)
    short = Request(0, 100, 64, reserve_tokens=164)  # its context passes the window
    engine = ReplicaEngine(recorder, config, [short], None)  # type: ignore[arg-type]
    engine.run()
    decode = [b for b in recorder.batches if b.decode_seqs]
    assert [b.decode_ctx_hbm for b in decode] == [101 + k for k in range(63)]
    assert [b.decode_ctx_window for b in decode] == [min(101 + k, 128) for k in range(63)]


def test_a_window_halves_long_context_decode_reads() -> None:
    model = IterationModel(scenario(model="gpt-oss-20b", precision="bf16"))
    ctx = 64 * 8000
    windowed = model.iteration(Batch(decode_seqs=64, logits_rows=64, decode_ctx_hbm=ctx,
                                     decode_ctx_window=64 * 128), 64).parts["kv_read"]
    unwindowed = model.iteration(Batch(decode_seqs=64, logits_rows=64, decode_ctx_hbm=ctx,
                                       decode_ctx_window=ctx), 64).parts["kv_read"]
    assert windowed == pytest.approx(unwindowed * (12 + 12 * 128 / 8000) / 24, rel=0.02)


def test_gpt_oss_120b_with_mxfp4_experts_fits_one_80_gb_gpu() -> None:
    """OpenAI's gpt-oss model card (arXiv:2508.10925): with its MoE weights in MXFP4 (4.25 bits
    a parameter), gpt-oss-120b runs within a single 80 GB GPU; in BF16 it needs three."""
    base = {"model": "gpt-oss-120b", "system": "dgx-h100", "precision": "bf16"}
    mxfp4 = serving_memory(scenario(**base, expert_precision="mxfp4").spec)
    bf16 = serving_memory(scenario(**base).spec)
    assert mxfp4.fits and mxfp4.weights_bytes < 70 * GIB
    assert not bf16.fits and bf16.weights_bytes > 200 * GIB
    # MXFP4 experts stream a quarter of BF16's bytes, so decode's expert reads shrink with them
    h200 = {**base, "system": "dgx-h200"}
    one = IterationModel(scenario(**h200, expert_precision="mxfp4"))
    two = IterationModel(scenario(**h200))
    batch = Batch(decode_seqs=8, logits_rows=8, decode_ctx_hbm=8 * 1000)
    assert one.iteration(batch, 8).parts["weights"] < 0.4 * two.iteration(batch, 8).parts[
        "weights"]


def test_a_board_power_limit_slows_compute_bound_iterations_only() -> None:
    """MaxQ: a 500 W limit on an H200 (320 W of it fixed) runs compute at (180 / 380)^(1/3) of
    the clock: a prefill (compute-bound GEMMs) slows by that, a small decode step
    (weight-streaming) hardly at all."""
    full = IterationModel(scenario())
    limited = IterationModel(scenario(system="dgx-h200-maxq"))
    assert limited.gpu.peak_of("bf16") / full.gpu.peak_of("bf16") == pytest.approx(
        (180 / 380) ** (1 / 3), rel=1e-9)
    prefill = Batch(prefill_tokens=8192, prefill_pairs=8192 * 4096.5, logits_rows=1)
    decode = Batch(decode_seqs=8, logits_rows=8, decode_ctx_hbm=8 * 1000)
    slow = limited.iteration(prefill, 1).parts["gemm"] / full.iteration(prefill, 1).parts["gemm"]
    assert slow == pytest.approx(full.gpu.peak_of("bf16") / limited.gpu.peak_of("bf16"), rel=0.02)
    assert limited.iteration(decode, 8).parts["weights"] == pytest.approx(
        full.iteration(decode, 8).parts["weights"], rel=0.01)


def test_a_serving_result_reports_the_clock_a_board_limit_leaves() -> None:
    data = simulate_serving(scenario(system="dgx-h200-maxq")).to_dict()
    capped = 1.83 * (180 / 380) ** (1 / 3)
    assert data["gpu_clock"] == {"compute_ghz": pytest.approx(capped), "part_ghz": 1.83,
                                 "power_limit_w": 500, "step_ghz": pytest.approx(capped),
                                 "synchronized_gpus": 1}  # one GPU: its own pace


def test_the_shipped_fixed_power_is_what_the_maxq_runs_fit() -> None:
    """benchmarks/power_clock.py fits the H200's fixed power to MLPerf v4.1's mixtral and gptj
    MaxQ runs; the shipped value is its best on a grid around it, and both runs come within
    5 % of their measured MaxQ / MaxP ratio there."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import power_clock

    best, ratios = power_clock.fit([300.0, 320.0, 340.0])
    shipped = IterationModel(scenario()).spec.system.node.gpu.gpu.compute  # type: ignore
    assert best == shipped.fixed_power_w == 320
    for name, (_, _, _, measured) in power_clock.RUNS.items():
        assert ratios[best][name] == pytest.approx(measured, rel=0.05), name



def test_clients_whose_requests_arrive_in_one_burst_are_measured_from_arrival_to_finish() -> None:
    """Eight clients with 100k-token prompts, 16 requests: the 8 measured ones arrive within
    seconds of each other, as the warm-up ones finish, so the window of arrivals holds no
    steady state (it had given 2 output tokens/s where 40 requests give 12). Such a run is
    measured as genai-perf measures one: the measured requests' tokens from the first one's
    arrival to the last one's finish."""
    def run(count: int) -> dict[str, Any]:
        return simulate_serving(load_any_scenario("llama3.1-70b-fp8-gh200-long-context", [
            f"inference.requests.count={count}"])).data
    burst, longer = run(16), run(40)
    assert burst["requests_per_replica"] == 8
    assert burst["output_tokens_per_s"] == pytest.approx(8 * 1000 / burst["duration_s"])
    assert burst["output_tokens_per_s"] == pytest.approx(longer["output_tokens_per_s"], rel=0.25)


def test_a_replica_splits_its_gpus_as_expert_parallel_times_expert_tensor_parallel() -> None:
    """TensorRT-LLM lays a MoE replica's tp GPUs out as moe_ep x moe_tp: Mixtral on four GPUs
    with ep 2 gives each expert to two GPUs, split two ways."""
    s = scenario(system="dgx-h100", num_gpus=4, model="mixtral-8x7b",
                 parallelism={"tp": 4, "ep": 2})
    assert (s.layout.tp, s.layout.ep, s.layout.etp, s.layout.dp) == (4, 2, 2, 1)
    dense = scenario(system="dgx-h100", num_gpus=4, parallelism={"tp": 2})
    assert (dense.layout.ep, dense.layout.etp, dense.layout.dp) == (1, 1, 2)


def test_inspect_counts_every_beams_blocks_of_a_request(
        capsys: pytest.CaptureFixture[str]) -> None:
    """128 prompt and 2,048 output tokens fill 34 blocks of 64; with 4 beams a request holds
    4 x 34 of the KV pool's blocks."""
    assert main(["inspect", "llama3.1-70b-fp8-gh200-serving", "--json",
                 "--set", "inference.beam_width=4"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["mean_requests_in_hbm"] == view["memory_per_gpu"]["kv_blocks"] / (4 * 34)
