"""Serving results on the terminal and as a Perfetto trace."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ghsim.config.serving_layout import ServingScenario
from ghsim.report.console import (
    _safe,
    _show,
    bound_by_cell,
    clock_text,
    is_plain,
    mape_clause,
    not_fitting_clause,
    render_subsets,
    wrap_name,
)
from ghsim.serving.engine import EngineRun
from ghsim.units import format_bytes


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:,.1f}"


@_safe
def render_serving(result: dict[str, Any], name: str, console: Console) -> None:
    """The summary of ``ghsim run`` on a serving scenario."""
    utilisation = ""
    if result.get("model_tflops_per_gpu") is not None:
        utilisation = f", {result['model_tflops_per_gpu']:,.0f} model TFLOP/s per GPU"
        if result.get("mfu") is not None:
            utilisation += f", MFU {result['mfu']:.1%}"
    console.print(f"[bold]{name}[/]: {result['output_tokens_per_s']:,.0f} output tokens/s "
                  f"({result['output_tokens_per_s_per_gpu']:,.0f} per GPU{utilisation})")
    if "ttft_s" in result:
        table = Table(title="Latency (ms)", title_justify="left")
        for column in ("", "mean", "p50", "p90", "p99"):
            table.add_column(column, justify="left" if not column else "right")
        for label, key in (("time to first token", "ttft_s"), ("time per output token",
                                                               "tpot_s"),
                           ("end to end", "e2e_latency_s")):
            stats = result[key]
            table.add_row(label, *(_ms(stats[k]) for k in ("mean", "p50", "p90", "p99")))
        _show(console, table)
        batch = result["batch"]
        console.print(f"batch: {batch['mean_running']:.1f} requests on average (at most "
                      f"{batch['max_running']}), KV cache {batch['mean_kv_occupancy']:.0%} "
                      f"full on average; {batch['iterations']:,} iterations"
                      + (f"; {batch['paused']:,} pauses (KV blocks ran out: the paused "
                         f"requests prefilled again)" if batch.get("paused") else ""))
        busy = result["busy_s"] or 1.0
        parts = ", ".join(f"{k} {v / busy:.0%}" for k, v in result["breakdown_s"].items()
                          if v / busy >= 0.005)
        console.print(f"time: {parts}")
        search = result.get("rate_search")
        if search:
            console.print(f"highest rate meeting the latency targets: "
                          f"{search['rate_per_s']:.3g} requests/s ({len(search['tried'])} runs)")
    memory = result["memory"]
    console.print(f"HBM per GPU: {format_bytes(memory['hbm']['peak_bytes'])} of "
                  f"{format_bytes(memory['hbm']['capacity_bytes'])} (weights "
                  f"{format_bytes(memory['weights_bytes'])}, KV cache "
                  f"{format_bytes(memory['kv_pool_bytes'])}); host KV "
                  f"{format_bytes(memory['host']['peak_bytes'])}")
    clock = clock_text(result.get("gpu_clock"))
    if clock:
        console.print(f"GPU compute clock: {clock}")
    bottleneck = result["bottleneck"]
    console.print(f"bound by [bold]{bottleneck['resource']}[/]: {bottleneck['why']}")
    for tip in result["advice"]:
        console.print(f"  - {tip}")
    for warning in result["warnings"]:
        console.print(f"[yellow]warning:[/] {warning}")


@_safe
def render_serving_validation(outcomes: list[dict[str, Any]], summary: dict[str, Any],
                              console: Console) -> None:
    """The table of ``ghsim validate`` on inference points: throughput measured, predicted
    and the error, then mean TTFT and TPOT predicted / measured where they were published."""
    table = Table(title="Predicted against measured output tokens/s", title_justify="left")
    for column in ("point", "measured", "predicted", "error", "TTFT / TPOT ms", "bound by"):
        table.add_column(column, justify="left" if column in ("point", "bound by") else "right")
    width = max(24, console.width - (66 if is_plain(console) else 78))
    for o in outcomes:
        name = wrap_name(o["id"], width)
        if o["failed"]:
            table.add_row(name, "-", "-", "[red]failed[/]", "", o["failed"])
            continue
        error = o["error"]
        style = "red" if abs(error) > 0.2 else ("yellow" if abs(error) > 0.1 else "green")
        latency = []
        for key in ("ttft_ms", "tpot_ms"):
            m, p = o.get(f"measured_{key}"), o.get(f"predicted_{key}")
            if m is not None and p is not None:
                latency.append(f"{p:,.0f}/{m:,.0f}")
        table.add_row(name, f"{o['measured']:,.0f}", f"{o['predicted']:,.0f}",
                      f"[{style}]{error:+.1%}[/]", "\n".join(latency), bound_by_cell(o))
    _show(console, table)
    console.print(f"{mape_clause(summary)} over "
                  f"{summary['simulated']} simulated points ({summary['failed']} failed"
                  f"{not_fitting_clause(summary)}); latencies predicted / measured.")
    render_subsets(summary, console)


def serving_trace(run: EngineRun, keep: int) -> dict[str, Any]:
    """A Chrome / Perfetto trace of the run: each iteration a slice (every n-th when there are
    more than ``keep``), and counters of the running batch, the queue and the KV cache."""
    log = run.iterations
    count = len(log.start_s)
    step = max(1, -(-count // keep)) if keep else count + 1
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "replica 0"}},
        {"ph": "M", "pid": 0, "tid": 0, "name": "thread_name", "args": {"name": "iterations"}},
    ]
    for i in range(0, count, step):
        ts = log.start_s[i] * 1e6
        kind = "prefill+decode" if log.prefill_tokens[i] and log.decode_seqs[i] else (
            "prefill" if log.prefill_tokens[i] else "decode")
        events.append({"ph": "X", "pid": 0, "tid": 0, "ts": ts, "dur": log.duration_s[i] * 1e6,
                       "name": kind, "args": {"decode_seqs": log.decode_seqs[i],
                                              "prefill_tokens": log.prefill_tokens[i]}})
        events.append({"ph": "C", "pid": 0, "ts": ts, "name": "batch",
                       "args": {"running": log.running[i], "waiting": log.waiting[i]}})
        events.append({"ph": "C", "pid": 0, "ts": ts, "name": "kv_blocks",
                       "args": {"hbm": log.hbm_blocks_used[i],
                                "host": log.host_blocks_used[i]}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def serving_view(scenario: ServingScenario) -> dict[str, Any]:
    """``ghsim inspect`` of a serving scenario: the layout, the engine's limits and the memory
    budget of one GPU (what the KV cache holds), without simulating."""
    from ghsim.serving.memory import engine_limits, mean_tokens, serving_memory
    from ghsim.workload.modelsize import parameter_count

    spec = scenario.spec
    memory = serving_memory(spec)
    requests = spec.inference.requests
    tokens = mean_tokens(requests.input_tokens) + mean_tokens(requests.output_tokens)
    per_request = spec.inference.beam_width * -(-tokens // memory.block_tokens)
    batch, budget = engine_limits(spec)
    count = parameter_count(spec.model)
    return {
        "kind": "scenario", "form": "serving", "name": scenario.name, "source": scenario.source,
        "params": count.total, "active_params": count.active,
        "model_flops_per_token": 2.0 * count.active,
        "system": spec.system.name, "model": spec.model.name, "num_gpus": spec.num_gpus,
        "replicas": scenario.replicas, "tp": spec.parallelism.tp, "ep": spec.parallelism.ep,
        "precision": spec.inference.precision, "kv_cache_dtype": spec.inference.kv_dtype,
        "max_batch_size": batch, "max_num_tokens": budget,
        "memory_per_gpu": {
            "capacity_bytes": memory.capacity_bytes, "weights_bytes": memory.weights_bytes,
            "activation_bytes": memory.activation_bytes, "logits_bytes": memory.logits_bytes,
            "runtime_bytes": memory.runtime_bytes, "kv_pool_bytes": memory.kv_pool_bytes,
            "kv_bytes_per_token": memory.kv_bytes_per_token, "kv_blocks": memory.hbm_blocks,
            "host_kv_bytes": memory.host_kv_bytes, "fits": memory.fits,
        },
        "mean_requests_in_hbm": memory.hbm_blocks / per_request if per_request else 0.0,
    }


@_safe
def render_serving_view(view: dict[str, Any], console: Console) -> None:
    """The terminal form of :func:`serving_view`."""
    memory = view["memory_per_gpu"]
    console.print(f"[bold]{view['name']}[/]: {view['model']} on {view['num_gpus']} GPU(s) of "
                  f"{view['system']}, {view['replicas']} replica(s) of tp {view['tp']}"
                  f"{' ep ' + str(view['ep']) if view['ep'] > 1 else ''}; "
                  f"{view['precision']} weights, {view['kv_cache_dtype']} KV cache")
    console.print(f"engine: max_batch_size {view['max_batch_size']}, max_num_tokens "
                  f"{view['max_num_tokens']}")
    console.print(f"HBM per GPU {format_bytes(memory['capacity_bytes'])}: weights "
                  f"{format_bytes(memory['weights_bytes'])}, activations "
                  f"{format_bytes(memory['activation_bytes'])}, logits "
                  f"{format_bytes(memory['logits_bytes'])}, runtime "
                  f"{format_bytes(memory['runtime_bytes'])}, KV cache "
                  f"{format_bytes(max(0.0, memory['kv_pool_bytes']))} "
                  f"({memory['kv_blocks']:,} blocks, "
                  f"{format_bytes(memory['kv_bytes_per_token'])} a token)")
    console.print(f"the KV cache holds {view['mean_requests_in_hbm']:.1f} requests of the "
                  f"mean length")
