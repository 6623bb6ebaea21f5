"""The result of a serving simulation, as plain data: throughput, latency percentiles, memory,
where the time went, the bottleneck, and what would raise throughput."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ghsim.config.api import inputs_of
from ghsim.config.serving_layout import ServingScenario
from ghsim.costmodel.gpu import clock_view, unmodelled_power_cap
from ghsim.errors import InputError
from ghsim.outputs import NONFINITE, nonfinite_path
from ghsim.serving.costs import PARTS, RESOURCE_OF, IterationModel
from ghsim.serving.engine import EngineRun
from ghsim.serving.memory import ServingMemory
from ghsim.serving.requests import Request
from ghsim.units import GIB
from ghsim.workload.modelsize import parameter_count

PERCENTILES = (50, 90, 99)


@dataclass
class ServingResult:
    """One simulated serving run (all replicas)."""

    data: dict[str, Any]
    run: EngineRun | None = field(default=None, repr=False, compare=False)

    @property
    def output_tokens_per_s(self) -> float:
        return float(self.data["output_tokens_per_s"])

    def to_dict(self) -> dict[str, Any]:
        """The result JSON; raises :class:`InputError` when a number is not finite."""
        where = nonfinite_path(self.data)
        if where is not None:
            source = str(self.data["inputs"].get("source", "result"))
            raise InputError(source, f"result.{where}", f"the simulation produced a number "
                             f"that is not finite; {NONFINITE}")
        return self.data


def measured_requests(run: EngineRun, warmup: int, replicas: int) -> list[Request]:
    """The replica's requests the statistics count: all but its share of the ``warmup``
    first arrivals (all of them if the warm-up would leave none)."""
    skip = math.ceil(warmup / replicas)
    return sorted(run.requests, key=lambda r: r.arrival_s)[skip:] or run.requests


def latencies(requests: list[Request]) -> tuple[np.ndarray, np.ndarray]:
    """Time to first token of each request, and time per output token after the first of
    each that has more than one."""
    ttft = np.array([r.first_token_s - r.arrival_s for r in requests])
    tpot = np.array([(r.finish_s - r.first_token_s) / (r.output_tokens - 1)
                     for r in requests if r.output_tokens > 1])
    return ttft, tpot


def _stats(values: np.ndarray) -> dict[str, float | None]:
    if not values.size:
        return {"mean": None, **{f"p{q}": None for q in PERCENTILES}}
    return {"mean": float(values.mean()),
            **{f"p{q}": float(np.percentile(values, q)) for q in PERCENTILES}}


def _memory(memory: ServingMemory, run: EngineRun | None, host_link: str) -> dict[str, Any]:
    kv_hbm_peak = (run.peak_hbm_blocks if run else 0) * memory.block_bytes
    kv_host_peak = (run.peak_host_blocks if run else 0) * memory.block_bytes
    fixed = memory.weights_bytes + memory.activation_bytes + memory.logits_bytes + (
        memory.runtime_bytes)
    return {
        "hbm": {"peak_bytes": fixed + kv_hbm_peak, "capacity_bytes": memory.capacity_bytes},
        "host": {"peak_bytes": kv_host_peak, "capacity_bytes": memory.host_capacity_bytes},
        "weights_bytes": memory.weights_bytes,
        "activation_bytes": memory.activation_bytes,
        "logits_bytes": memory.logits_bytes,
        "runtime_bytes": memory.runtime_bytes,
        "kv_pool_bytes": max(0.0, memory.kv_pool_bytes),
        "kv_host_bytes": memory.host_kv_bytes,
        "host_link": host_link,
        "fits": memory.fits,
    }


def _resources(parts: dict[str, float], host_link: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for part, seconds in parts.items():
        resource = host_link if part == "kv_host" else RESOURCE_OF[part]
        out[resource] = out.get(resource, 0.0) + seconds
    return out


def _bottleneck(run: EngineRun, host_link: str) -> dict[str, Any]:
    resources = _resources(run.parts_s, host_link)
    busy = sum(resources.values()) or 1.0
    resource, seconds = max(resources.items(), key=lambda item: item[1])
    share = seconds / busy
    kv_held = run.limited_s.get("kv_capacity", 0.0) / (run.end_s or 1.0)
    iteration_why = f"{resource} takes {share:.0%} of the iterations' time"
    if kv_held >= 0.5:
        return {"resource": "kv_capacity", "share": kv_held, "why": (
            f"for {kv_held:.0%} of the run requests waited because the KV cache had no free "
            f"blocks for them: the batch is what the KV cache admits; within an iteration "
            f"{iteration_why}"), "iteration_resource": resource}
    return {"resource": resource, "share": share, "why": iteration_why,
            "iteration_resource": resource}


def _advice(scenario: ServingScenario, bottleneck: dict[str, Any],
            limited: dict[str, float], end_s: float) -> list[str]:
    """What would raise throughput, from the bottleneck and the limits that held requests:
    each a change the scenario can make (a key, a part, a layout), never a number."""
    spec = scenario.spec
    inference = spec.inference
    resource = bottleneck["resource"]
    tips: list[str] = []
    if resource == "kv_capacity":
        tips.append("more HBM per replica (a GPU with more memory, or a larger tp) admits a "
                    "larger batch")
        if inference.kv_dtype != "fp8":
            tips.append("an FP8 KV cache halves the bytes per token (inference.kv_cache_dtype)")
        if inference.kv_offload.policy == "none":
            tips.append("KV offload to host memory (inference.kv_offload.policy in_place or "
                        "reload) admits more requests at the host link's speed")
    if resource == "hbm_bandwidth":
        if inference.precision != "fp8":
            tips.append("FP8 weights halve the bytes each decode iteration reads")
        if limited.get("max_batch_size", 0.0) > 0.2 * end_s:
            tips.append("a larger max_batch_size amortises each weight read over more tokens")
        tips.append("a larger tp splits the weight reads over more GPUs' HBM")
    if resource == "compute":
        if inference.precision != "fp8":
            tips.append("FP8 GEMMs double the tensor-core rate")
        tips.append("more replicas (GPUs) are the way up once prefill and large batches are "
                    "compute-bound")
    if resource in ("c2c", "pcie"):
        tips.append(f"the offloaded KV cache is read over {resource}: more HBM, an FP8 KV "
                    "cache or a smaller batch keeps more of it local")
    if resource == "cpu":
        if not inference.overlap_host:
            tips.append("an overlapping scheduler (inference.overlap_host) hides the host's "
                        "time behind the GPU's")
        tips.append("a faster host CPU per GPU")
    if resource == "nvlink":
        tips.append("fewer tensor-parallel GPUs per replica (more replicas) cut all-reduce time")
    if limited.get("max_num_tokens", 0.0) > 0.2 * end_s:
        tips.append("a larger max_num_tokens (or chunked prefill) lets more prompt tokens into "
                    "each iteration")
    return tips


def _arrival_window_rate(run: EngineRun, measured: list[Request], fallback: float) -> float:
    """Tokens returned per second while requests were still arriving: the steady state of a
    server or of closed-loop clients (stable: rate x mean output; overloaded: the capacity),
    without the start-up and the drain after the last arrival. Where the arrivals span less
    than a request's mean life (a few clients in lockstep, whose requests all arrive in one
    burst) that window holds no steady state, and ``fallback`` is taken: the measured
    requests' tokens over the time from the first one's arrival to the last one's finish,
    genai-perf's benchmark duration."""
    start = min(r.arrival_s for r in measured)
    end = max(r.arrival_s for r in measured)
    life = sum(r.finish_s - r.arrival_s for r in measured) / len(measured)
    if end - start < life:
        return fallback
    log = run.iterations
    tokens = sum(n for t, n in zip(log.start_s, log.tokens_out, strict=True) if start <= t < end)
    return float(tokens / (end - start))


def build_result(scenario: ServingScenario, memory: ServingMemory, run: EngineRun | None,
                 model: IterationModel, limits: tuple[int, int], searched_rate: float | None,
                 tried: list[dict[str, float | bool]],
                 short_of_blocks: tuple[int, int] | None = None) -> ServingResult:
    """The result of ``run`` (None when nothing could be served: it does not fit)."""
    spec = scenario.spec
    inference = spec.inference
    replicas = scenario.replicas
    host_link = spec.system.node.gpu.gpu.host_link.type if spec.system.node.gpu.gpu else "pcie"
    warnings: list[str] = []
    inputs = inputs_of(scenario)
    engine = {"max_batch_size": limits[0], "max_num_tokens": limits[1],
              "kv_block_tokens": memory.block_tokens, "hbm_blocks": memory.hbm_blocks,
              "host_blocks": memory.host_blocks if inference.kv_offload.policy != "none" else 0,
              "kv_bytes_per_token": memory.kv_bytes_per_token, "replicas": replicas,
              "tp": spec.parallelism.tp, "ep": spec.parallelism.ep}
    base: dict[str, Any] = {"kind": "serving", "engine": engine,
                            "memory": _memory(memory, run, host_link),
                            "gpu_clock": clock_view(spec.system.node, scenario.source,
                                                  spec.parallelism.tp)}
    if run is None:
        if short_of_blocks is None:
            why = (f"weights {memory.weights_bytes / GIB:.1f} GiB, activations "
                   f"{memory.activation_bytes / GIB:.1f} GiB, logits "
                   f"{memory.logits_bytes / GIB:.1f} GiB and the runtime "
                   f"{memory.runtime_bytes / GIB:.1f} GiB leave no room for a KV block in "
                   f"{memory.capacity_bytes / GIB:.1f} GiB of HBM per GPU")
        else:
            need, have = short_of_blocks
            why = (f"the longest request needs {need} KV blocks, the KV cache has {have} "
                   f"({memory.block_tokens} tokens each)")
        base["memory"]["fits"] = False
        warnings.append(f"the model cannot be served: {why}")
        data = {"output_tokens_per_s": 0.0, "output_tokens_per_s_per_gpu": 0.0,
                **base, "bottleneck": {"resource": "memory", "why": why},
                "advice": ["more HBM per replica (a larger tp), FP8 weights or KV offload"],
                "warnings": warnings, "inputs": inputs}
        return ServingResult(data, None)
    reqs = measured_requests(run, inference.requests.warmup, replicas)
    out_tokens = float(sum(r.output_tokens for r in reqs))
    in_tokens = float(sum(r.input_tokens for r in reqs))
    start = min(r.arrival_s for r in reqs)
    span = max(r.finish_s for r in reqs) - start
    ttft, tpot = latencies(reqs)
    e2e = np.array([r.finish_s - r.arrival_s for r in reqs])
    log = run.iterations
    durations = np.array(log.duration_s)
    weights = durations / durations.sum() if durations.size else durations
    running = np.array(log.running, dtype=float)
    hbm_used = np.array(log.hbm_blocks_used, dtype=float)
    bottleneck = _bottleneck(run, host_link)
    targets = inference.latency_targets
    pct = targets.percentile
    ttft_at = float(np.percentile(ttft, pct)) * 1e3
    tpot_at = float(np.percentile(tpot, pct)) * 1e3 if tpot.size else None
    met: dict[str, Any] = {"ttft_ms": targets.ttft_ms, "tpot_ms": targets.tpot_ms,
                           "percentile": pct, "ttft_at_percentile_ms": ttft_at,
                           "tpot_at_percentile_ms": tpot_at}
    met["met"] = ((targets.ttft_ms is None or ttft_at <= targets.ttft_ms)
                  and (targets.tpot_ms is None or tpot_at is None
                       or tpot_at <= targets.tpot_ms))
    if inference.find_max_rate and not met["met"]:
        warnings.append("no arrival rate tried meets the latency targets; the result is at "
                        "the lowest rate tried")
    cap = unmodelled_power_cap(spec.system.node)
    if cap:
        warnings.append(cap)
    per_replica = out_tokens / span if span > 0 else math.nan
    if inference.requests.arrival != "offline":
        per_replica = _arrival_window_rate(run, reqs, per_replica)
    # Forward model FLOPs: 2 x active parameters a token (prompt and output tokens alike, the
    # attention term left out as the usual serving convention does), over every GPU.
    tokens_per_s = (per_replica * (1 + in_tokens / out_tokens) if out_tokens else 0.0)
    flops_per_gpu = 2.0 * parameter_count(spec.model).active * tokens_per_s * replicas / (
        spec.num_gpus)
    peak = model.gpu.rated_peak_of(inference.precision)  # MFU against the datasheet peak
    busy = sum(run.parts_s.values())
    data = {
        "output_tokens_per_s": per_replica * replicas,
        "output_tokens_per_s_per_gpu": per_replica * replicas / spec.num_gpus,
        "input_tokens_per_s": in_tokens / span * replicas if span > 0 else math.nan,
        "requests_per_s": len(reqs) / span * replicas if span > 0 else math.nan,
        "model_tflops_per_gpu": flops_per_gpu / 1e12,
        "mfu": flops_per_gpu / peak if peak else None,
        "duration_s": span,
        "requests_per_replica": len(reqs),
        "ttft_s": _stats(ttft),
        "tpot_s": _stats(tpot),
        "e2e_latency_s": _stats(e2e),
        "latency_targets": met,
        "rate_search": ({"rate_per_s": searched_rate, "tried": tried}
                        if searched_rate is not None else None),
        "batch": {
            "iterations": len(durations),
            "mean_running": float((running * weights).sum()) if running.size else 0.0,
            "max_running": int(running.max()) if running.size else 0,
            "mean_kv_occupancy": (float((hbm_used * weights).sum()) / memory.hbm_blocks
                                  if memory.hbm_blocks and hbm_used.size else 0.0),
            "peak_kv_occupancy": (float(hbm_used.max()) / memory.hbm_blocks
                                  if memory.hbm_blocks and hbm_used.size else 0.0),
            "held_by_s": dict(run.limited_s),
            "paused": run.paused,
        },
        "breakdown_s": {part: run.parts_s[part] for part in PARTS},
        "busy_s": busy,
        **base,
        "bottleneck": bottleneck,
        "advice": _advice(scenario, bottleneck, run.limited_s, run.end_s),
        "warnings": warnings,
        "inputs": inputs,
    }
    return ServingResult(data, run)
