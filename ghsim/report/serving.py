"""Serving results on the terminal and as a Perfetto trace."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ghsim.report.console import _safe, _show, is_plain, wrap_name
from ghsim.serving.engine import EngineRun
from ghsim.units import format_bytes


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:,.1f}"


@_safe
def render_serving(result: dict[str, Any], name: str, console: Console) -> None:
    """The summary of ``ghsim run`` on a serving scenario."""
    console.print(f"[bold]{name}[/]: {result['output_tokens_per_s']:,.0f} output tokens/s "
                  f"({result['output_tokens_per_s_per_gpu']:,.0f} per GPU)")
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
                      f"full on average; {batch['iterations']:,} iterations")
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
    bottleneck = result["bottleneck"]
    console.print(f"bound by [bold]{bottleneck['resource']}[/]: {bottleneck['why']}")
    for tip in result["advice"]:
        console.print(f"  - {tip}")
    for warning in result["warnings"]:
        console.print(f"[yellow]warning:[/] {warning}")


@_safe
def render_serving_validation(outcomes: list[dict[str, Any]], summary: dict[str, Any],
                              console: Console) -> None:
    """The table of ``ghsim validate`` on inference points."""
    table = Table(title="Predicted against measured output tokens/s", title_justify="left")
    for column in ("point", "measured", "predicted", "error", "TTFT ms", "TPOT ms",
                   "bound by"):
        table.add_column(column, justify="left" if column in ("point", "bound by") else "right")
    width = max(20, console.width - (80 if is_plain(console) else 92))
    for o in outcomes:
        name = wrap_name(o["id"], width)
        if o["failed"]:
            table.add_row(name, "-", "-", "[red]failed[/]", "", "", o["failed"])
            continue
        error = o["error"]
        style = "red" if abs(error) > 0.2 else ("yellow" if abs(error) > 0.1 else "green")
        latency = []
        for key in ("ttft_ms", "tpot_ms"):
            m, p = o.get(f"measured_{key}"), o.get(f"predicted_{key}")
            latency.append(f"{p:,.0f} / {m:,.0f}" if m is not None and p is not None else "")
        table.add_row(name, f"{o['measured']:,.1f}", f"{o['predicted']:,.1f}",
                      f"[{style}]{error:+.1%}[/]", *latency, o["bottleneck"] or "")
    _show(console, table)
    console.print(f"MAPE {summary['mape']:.1%}, worst {summary['max_abs_error']:.1%} over "
                  f"{summary['simulated']} simulated points ({summary['failed']} failed); "
                  "latencies predicted / measured.")


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
