"""One sweep point's result as a flat record (what tables, CSV and plots are made of)."""

from __future__ import annotations

from typing import Any

from ghsim.config import Scenario, ServingScenario
from ghsim.config.sweep import Point
from ghsim.engine.result import Result, memory_tracked, tiers_short
from ghsim.serving import ServingResult


def empty_record(point: Point) -> dict[str, Any]:
    return {"index": point.index, "label": point.label,
            "overrides": {key: value for key, value in point.overrides},
            "step_time_s": None, "tokens_per_s": None, "tokens_per_s_per_gpu": None,
            "model_tflops_per_gpu": None, "mfu": None, "fits": None, "hbm_peak_bytes": None,
            "hbm_capacity_bytes": None, "does_not_fit": None, "h2d_bytes": None,
            "d2h_bytes": None, "host_link_utilization": None, "busiest_stage_share": None,
            "bottleneck": None,
            "breakdown_s": None, "digest": None, "cache_key": None, "error": None,
            "skipped": None, "cached": False, "output_tokens_per_s": None,
            "output_tokens_per_s_per_gpu": None, "ttft_p99_s": None, "tpot_p99_s": None}


NUMBERS = ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "mfu",
           "hbm_peak_bytes", "hbm_capacity_bytes", "h2d_bytes", "d2h_bytes",
           "host_link_utilization", "busiest_stage_share", "output_tokens_per_s",
           "output_tokens_per_s_per_gpu", "ttft_p99_s", "tpot_p99_s")
"""The fields of a record that are a number or None (the last four: serving points)."""


def has_result(record: dict[str, Any]) -> bool:
    """Whether the point was simulated: a training step time or a serving throughput."""
    return record["step_time_s"] is not None or record.get("output_tokens_per_s") is not None


def serving_record(point: Point, scenario: ServingScenario,
                   result: ServingResult) -> dict[str, Any]:
    """The record of a simulated serving point (an :class:`InputError` if a number is not
    finite): throughput, p99 latencies, HBM peak per GPU, whether it fits, the bottleneck."""
    data = result.to_dict()
    record = empty_record(point)
    memory = data["memory"]

    def p99(key: str) -> float | None:
        stats = data.get(key)
        return None if stats is None else stats["p99"]

    record.update(
        output_tokens_per_s=data["output_tokens_per_s"],
        output_tokens_per_s_per_gpu=data["output_tokens_per_s_per_gpu"],
        ttft_p99_s=p99("ttft_s"), tpot_p99_s=p99("tpot_s"), fits=memory["fits"],
        hbm_peak_bytes=memory["hbm"]["peak_bytes"],
        hbm_capacity_bytes=memory["hbm"]["capacity_bytes"],
        does_not_fit=None if memory["fits"] else "hbm",
        bottleneck=data["bottleneck"]["resource"], breakdown_s=data.get("breakdown_s", {}),
        digest=scenario.digest(),
    )
    return record


def result_record(point: Point, scenario: Scenario, result: Result) -> dict[str, Any]:
    """The record of a simulated point (an :class:`InputError` if a number is not finite)."""
    result.check_finite()
    record = empty_record(point)
    hbm = result.memory.get("hbm", {})
    host = result.host
    tracked = memory_tracked(result.memory)
    record.update(
        step_time_s=result.step_time_s, tokens_per_s=result.tokens_per_s,
        tokens_per_s_per_gpu=result.tokens_per_s_per_gpu,
        model_tflops_per_gpu=result.model_tflops_per_gpu, mfu=result.mfu,
        fits=result.memory.get("fits"), hbm_peak_bytes=hbm.get("peak_bytes"),
        hbm_capacity_bytes=hbm.get("capacity_bytes"),
        does_not_fit="+".join(tiers_short(result.memory)) if tracked else None,
        h2d_bytes=host.get("h2d_bytes"), d2h_bytes=host.get("d2h_bytes"),
        host_link_utilization=max(host.get("h2d_utilization", 0.0),
                                  host.get("d2h_utilization", 0.0)),
        busiest_stage_share=(max(row["busy_share"] for row in result.stages)
                             if len(result.stages) > 1 else None),
        bottleneck=result.bottleneck["resource"], breakdown_s=result.breakdown_s,
        digest=scenario.digest(),
    )
    return record
