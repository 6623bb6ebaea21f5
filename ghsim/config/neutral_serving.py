"""Published serving measurements in the neutral form (``../shared/validation/inference.yaml``:
``kind: inference_points`` whose points give the system, model, precision, software and a
``workload`` instead of a serving scenario) read as ghsim's own inference points.

A workload names how the requests came (``workload.kind``):

``fixed_length``        trtllm-bench at maximum load: every request queued at once, of fixed
                        lengths, as many as TensorRT-LLM's performance overview generates for those
                        lengths (NVIDIA/TensorRT-LLM@00f37686 docs/source/performance/perf-
                        overview.md, "Preparing a Dataset": 30000 requests for 128/128, 3000 up to
                        2500 tokens, 1500 up to 5500, 1000 beyond), engine limits by trtllm-bench's
                        build heuristic and the KV cache at 0.95 of free memory ("in many cases");
``fixed_length_concurrency``  a fixed number of streaming clients (genai-perf): 10 requests a
                        client and at least 100, each client's first left out as warm-up, as the
                        converted NIM points run them;
``mlperf_offline`` / ``mlperf_server``  MLPerf Inference's dataset for the model: the output mean
                        the dataset text gives ("about 291 output tokens per sample"), the input
                        mean and the spreads the converted set assumes for that dataset
                        (:data:`MLPERF`), the benchmark's max_new_tokens each request's limit;
                        KV blocks handed out as sequences grow (``max_utilization``, the
                        default of NVIDIA's harness), or, where beams are searched, reserved
                        to the limit at admission;
                        offline runs queue the benchmark's minimum query count for each GPU, so
                        that every replica, however the GPUs are split, serves a full query in
                        its steady state as the submissions' 2400 s runs do; server runs search
                        the highest Poisson rate whose p99 TTFT and TPOT meet the workload's
                        limits (MLPerf's ``target_latency_percentile`` 99).

What a submission tuned (its engine's batch size and token budget) the form does not give:
TensorRT-LLM's builder defaults stand for it, and the point's notes say so. A workload kind or
dataset ghsim does not know is left as it is, and the point fails with the key named.
"""

from __future__ import annotations

import re
from typing import Any

from ghsim.config.search import find_named, known_names

MLPERF: dict[str, dict[str, Any]] = {
    "llama2-70b": {"count": 24576, "max_output": 1024, "beam": 1, "kv_fraction": 0.9,
                   "limits": (2000, 200),
                   "input": {"distribution": "lognormal", "mean": 200, "std": 150, "min": 8,
                             "max": 1023},
                   "output": {"std": 250, "min": 1, "max": 1024}},
    "mixtral-8x7b": {"count": 15000, "max_output": 1024, "beam": 1, "kv_fraction": 0.9,
                     "limits": (2000, 200),
                     "input": {"distribution": "lognormal", "mean": 339, "std": 240, "min": 8,
                               "max": 2047},
                     "output": {"std": 120, "min": 2, "max": 1024}},
    "gptj": {"count": 13368, "max_output": 128, "beam": 4, "kv_fraction": 0.95,
             "input": {"distribution": "lognormal", "mean": 940, "std": 400, "min": 64,
                       "max": 1919},
             "output": {"std": 25, "min": 30, "max": 128}},
}
"""MLPerf Inference v4.x datasets by model, as validation/inference.yaml's converted points
state them with their sources: the offline query counts, max_new_tokens (mlcommons/inference
language/*: 1024, GPT-J 128 with 4 beams), the server runs' TTFT and TPOT limits where the
workload does not give them (mlperf.conf: 2000 and 200 ms), the KV cache fraction of NVIDIA's
submissions, and the assumed input lengths (OpenOrca prompts about 200 tokens, the Mixtral mix
339, CNN/DailyMail articles about 940 GPT-2 tokens; no citable mean exists) with lognormal
spreads."""

_SERVER_REQUESTS = 4000
_SERVER_MIN_S = 120.0
"""MLPerf server runs simulated: at least 4,000 requests and 120 s of arrivals (MLPerf runs at
least 600 s), as the converted set does."""

_MEASURED = {"ttft_mean_ms": "ttft_ms", "tpot_mean_ms": "tpot_ms",
             "inter_token_latency_ms": "tpot_ms"}
"""The form's latency names and the schema's (NIM's inter-token latency is its TPOT)."""


def with_readings(notes: str, readings: list[str]) -> str:
    """A converted point's notes followed by what the reader made of the form's words (nothing
    added when it read nothing)."""
    if not readings:
        return notes
    return f"{notes} [Read from the neutral form: {'; '.join(readings)}.]".strip()


def is_neutral_inference(document: dict[str, Any]) -> bool:
    """Whether an ``inference_points`` file is in the neutral form: a point with a workload and
    no scenario."""
    points = document.get("points")
    return document.get("kind") == "inference_points" and isinstance(points, list) and any(
        isinstance(p, dict) and "workload" in p and "scenario" not in p for p in points)


def inference_point(point: dict[str, Any]) -> dict[str, Any]:
    """One neutral-form serving point as an inference point with its scenario (a point that
    has a scenario is returned as it is)."""
    if "scenario" in point or not isinstance(point.get("workload"), dict):
        return point
    workload: dict[str, Any] = point["workload"]
    readings: list[str] = []
    inference: dict[str, Any] = {key: point[key] for key in ("precision",) if key in point}
    software = str(point.get("software", ""))
    model = _model_name(point.get("model"), readings)
    kind = workload.get("kind")
    gpus = point.get("num_gpus", 1)
    if kind == "fixed_length":
        _fixed(workload, software, inference, readings)
    elif kind == "fixed_length_concurrency":
        _clients(workload, inference, readings)
    elif kind in ("mlperf_offline", "mlperf_server"):
        _mlperf(str(model), workload, kind == "mlperf_server", inference, readings, gpus)
    else:
        inference["workload"] = workload  # left for the schema to name
    scenario = {"name": str(point.get("id", "point")),
                "system": _system(point.get("system"), point.get("system_description"),
                                  readings),
                "num_gpus": gpus, "model": model, "inference": inference,
                "parallelism": point.get("parallelism") or {"tp": 1}}
    choose = not point.get("parallelism") and gpus != 1
    if choose:
        readings.append("tensor-parallel size not given: ghsim's choice (choose_tp)")
    said = [f"{key}: {point[key]}" for key in ("system_description", "software")
            if point.get(key)]
    if workload.get("dataset"):
        said.append(f"dataset: {workload['dataset']}")
    notes = with_readings(" ".join([*said, str(point.get("notes", ""))]).strip(), readings)
    given: dict[str, Any] = {key: point[key] for key in ("id", "confidence", "source")
                             if key in point}
    if "measured" in point:
        given["measured"] = _measured(point["measured"])
    return {**given, "notes": notes, "choose_tp": choose, "scenario": scenario}


def _key(name: str) -> str:
    """A model name with case, spaces and punctuation left out: 'Llama-3.1-8B' is llama318b."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _model_name(model: Any, readings: list[str]) -> Any:
    """The shipped (or local) model a neutral point names, matched without case and
    punctuation where its spelling differs ('Llama-3.1-70B' is llama3.1-70b); a name that
    matches none, or several, is left for the loader to report."""
    if not isinstance(model, str) or find_named("model", model) is not None:
        return model
    matches = [name for name in known_names("model") if _key(name) == _key(model)]
    if len(matches) != 1:
        return model
    readings.append(f"model {matches[0]} for {model!r}")
    return matches[0]


def _system(system: Any, description: Any, readings: list[str]) -> Any:
    """The system a point names, or its power-capped variant where the description says the
    run was MLPerf's MaxQ (power-capped) category and ghsim ships that variant
    (``dgx-h200-maxq``)."""
    if not (isinstance(system, str) and isinstance(description, str)
            and "maxq" in description.lower()):
        return system
    capped = f"{system}-maxq"
    if find_named("system", capped) is None:
        return system
    readings.append(f"system {capped} (the description says MaxQ)")
    return capped


def _measured(measured: Any) -> Any:
    if not isinstance(measured, dict):
        return measured
    return {_MEASURED.get(key, key): value for key, value in measured.items()}


def requests_for(input_tokens: int, output_tokens: int) -> int:
    """trtllm-bench's dataset size for fixed lengths, by the performance overview's table."""
    total = input_tokens + output_tokens
    if total <= 256:
        return 30000
    if total <= 2500:
        return 3000
    if total <= 5500:
        return 1500
    return 1000


def _fixed(workload: dict[str, Any], software: str, inference: dict[str, Any],
           readings: list[str]) -> None:
    isl, osl = workload.get("input_tokens"), workload.get("output_tokens")
    count = requests_for(isl, osl) if isinstance(isl, int) and isinstance(osl, int) else 1000
    inference["requests"] = {"count": count, "input_tokens": isl, "output_tokens": osl}
    readings.append(f"{count} requests queued at once (trtllm-bench's dataset size)")
    if "TensorRT-LLM" in software:
        inference["scheduler"] = {"tuning": "trtllm_bench", "kv_memory_fraction": 0.95}
        readings.append("engine limits by trtllm-bench's build heuristic, KV cache at 0.95")


def _clients(workload: dict[str, Any], inference: dict[str, Any],
             readings: list[str]) -> None:
    clients = workload.get("concurrency")
    count = max(100, 10 * clients) if isinstance(clients, int) else 100
    inference["requests"] = {
        "arrival": "concurrency", "concurrency": clients, "count": count,
        "input_tokens": workload.get("input_tokens"),
        "output_tokens": workload.get("output_tokens"),
        "warmup": clients if isinstance(clients, int) and clients < count else 0}
    inference["scheduler"] = {"chunked_prefill": False}
    readings.append(f"{count} requests from {clients} clients, each one's first as warm-up")


def _mlperf(model: str, workload: dict[str, Any], server: bool, inference: dict[str, Any],
            readings: list[str], gpus: Any = 1) -> None:
    rules = MLPERF.get(model)
    if rules is None:
        inference["workload"] = workload  # no dataset known for it: the schema names the key
        return
    said = re.search(r"about (\d+(?:\.\d+)?) output tokens", str(workload.get("dataset", "")))
    mean = float(said.group(1)) if said else None
    if mean is None:
        inference["workload"] = workload
        return
    output = {"distribution": "lognormal", "mean": mean, **rules["output"]}
    per_gpu = gpus if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus > 0 else 1
    requests: dict[str, Any] = {"count": rules["count"] * per_gpu,
                                "input_tokens": dict(rules["input"]),
                                "output_tokens": output, "max_output_tokens": rules["max_output"]}
    readings.append(f"MLPerf's {model} dataset: output mean {mean:g} (the dataset text), input "
                    f"mean {rules['input']['mean']} (assumed, as the converted set)")
    if not server and per_gpu > 1:
        readings.append(f"{rules['count']:,} requests (the minimum query count) for each of "
                        f"the {per_gpu} GPUs")
    if server:
        requests.update(count=_SERVER_REQUESTS, arrival="poisson", rate_per_s=1.0,
                        min_duration_s=_SERVER_MIN_S)
        inference["find_max_rate"] = True
        ttft, tpot = rules.get("limits", (None, None))
        inference["latency_targets"] = {"percentile": 99,
                                        "ttft_ms": workload.get("ttft_limit_ms", ttft),
                                        "tpot_ms": workload.get("tpot_limit_ms", tpot)}
        readings.append("the highest Poisson rate meeting the p99 limits")
    inference["requests"] = requests
    inference["scheduler"] = {"kv_memory_fraction": rules["kv_fraction"]}
    if rules["beam"] > 1:
        inference["beam_width"] = rules["beam"]
    else:  # NVIDIA's MLPerf harness (harness_llm/main_llm.cc): trtllm_batch_sched_policy
        inference["scheduler"]["capacity"] = "max_utilization"  # defaults to max_util
        readings.append("KV blocks handed out as sequences grow (max_utilization, the MLPerf "
                        "harness's default)")
    readings.append("engine batch and token limits: TensorRT-LLM's builder defaults (the "
                    "submission's are not in the form)")
