"""Rich rendering of the ``ghsim inspect`` views for a terminal.

Every string a view holds may come from a user's file or trace (a name, a description, a
label): each ``render_*`` function receives its view with every string made safe for a
terminal first (control characters and lone surrogates escaped, rich markup escaped), so a name
like ``"\x1b[31mred"`` or ``"[bold]x"`` is shown as written and never acts on the terminal.

On a terminal the tables have boxes and colour; anywhere else (a pipe, a file, a CI log) they
are plain text, without box drawing or colour, wrapped to the width (``COLUMNS``, 80 by
default). No cell is ever cut with an ellipsis: long text wraps, a long word folds, and a long
key path is shortened from the left (``…host_link.bandwidth_gb_s``) with its full name in a
legend line under the table.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ghsim.engine.result import memory_tracked, tiers_short
from ghsim.errors import printable
from ghsim.report.keys import short_key
from ghsim.units import format_bytes, format_flops, format_rate, format_seconds

F = TypeVar("F", bound=Callable[..., None])


def terminal_safe(value: Any) -> Any:
    """``value`` with every string (keys included) escaped for a terminal and for rich markup
    (newlines and tabs are kept: they cannot act on a terminal)."""
    if isinstance(value, str):
        return escape("\t".join("\n".join(printable(line) for line in part.split("\n"))
                                for part in value.split("\t")))
    if isinstance(value, dict):
        return {terminal_safe(k): terminal_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(terminal_safe(v) for v in value)
    return value


def _safe(render: F) -> F:
    """Make every argument of a ``render_*`` function (but the console) terminal-safe."""
    @functools.wraps(render)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        render(*(a if isinstance(a, Console) else terminal_safe(a) for a in args),
               **{k: v if isinstance(v, Console) else terminal_safe(v)
                  for k, v in kwargs.items()})
    return wrapper  # type: ignore[return-value]

_KIND_ORDER = ("gpu", "memory", "cpu", "nvswitch", "nic")
NOT_APPLICABLE = "n/a"
"""What a table shows for a rate the workload cannot have (the MFU of a replayed trace)."""


def is_plain(console: Console) -> bool:
    """Plain output: the console does not write to a terminal."""
    return not console.is_terminal


def _tables(item: Any) -> Iterable[Table]:
    if isinstance(item, Table):
        yield item
    elif isinstance(item, Group):
        for child in item.renderables:
            yield from _tables(child)


def _show(console: Console, *items: RenderableType) -> None:
    """Print ``items``; their tables never cut a cell (long text wraps, long words fold) and,
    off a terminal, lose their box drawing."""
    for item in items:
        for table in _tables(item):
            for column in table.columns:
                column.no_wrap = False
                column.overflow = "fold"
            if is_plain(console):
                _plain(table)
        console.print(item)


def _plain(table: Table) -> None:
    """No box drawing; one space between columns, none at the edges."""
    table.box, table.pad_edge, table.show_lines = None, False, False
    table.padding = (0, 1, 0, 0)


def wrap_name(name: str, width: int) -> str:
    """``name`` broken into lines of at most ``width`` characters after its ``_``, ``-``,
    ``.`` or ``/`` separators (a part longer than ``width`` stays whole: rich folds it)."""
    parts = re.findall(r"[^_\-./]*[_\-./]|[^_\-./]+$", name)
    lines = [""]
    for part in parts:
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        lines[-1] += part
    return "\n".join(lines)


def _header(key: str) -> str:
    """A column header for a key path: shortened, and broken after its last dot when long."""
    short = short_key(key)
    head, dot, last = short.rpartition(".")
    return f"{head}.\n{last}" if dot and len(short) > 14 else short


def legend_line(keys: Iterable[str]) -> str | None:
    """The line naming in full the key paths a table shortened, or None."""
    pairs = [f"{short_key(k)} = {k}" for k in keys if short_key(k) != k]
    return "Shortened: " + "; ".join(pairs) if pairs else None


def _rate(value: float | None, spec: str) -> str:
    return NOT_APPLICABLE if value is None else format(value, spec)


def fits_text(memory: dict[str, Any]) -> str:
    """``yes``, ``no: hbm`` (the tiers that do not fit, in red) or ``not tracked``."""
    if not memory_tracked(memory):
        return "not tracked"
    short = tiers_short(memory)
    return "yes" if not short else f"[red]no: {'+'.join(short)}[/]"


def record_fits(record: dict[str, Any]) -> str:
    """The fits cell of a sweep record: ``yes``, ``no: hbm`` or ``not tracked``."""
    if record["fits"] is None:
        return "not tracked"
    return "yes" if record["fits"] else f"no: {record.get('does_not_fit') or '?'}"


def _component_line(first: dict[str, Any], ids: list[str]) -> str:
    kind = first["kind"]
    many = f"{len(ids)}x " if len(ids) > 1 else ""
    names = ids[0] if len(ids) == 1 else f"{ids[0]}..{ids[-1]}"
    if kind == "gpu":
        peak = first["peak_flops"]
        return (f"{many}GPU {first['part']} [dim]({names})[/]: {first['sms']} SMs, "
                f"{format_flops(peak.get('bf16', peak['fp32']))} bf16 dense"
                + (f", {format_flops(peak['fp8'])} fp8" if "fp8" in peak else ""))
    if kind == "cpu":
        return (f"{many}CPU {first['part']} [dim]({names})[/]: {first['cores']} cores, "
                f"{format_flops(first['peak_flops']['fp64'])} fp64")
    if kind == "memory":
        return (f"{many}{first['memory'].upper()} [dim]({names})[/]: "
                f"{format_bytes(first['capacity_bytes'])} each")
    if kind == "nvswitch":
        chips = f", {first['chips']} chips" if first.get("chips") else ""
        return f"NVLink switch [dim]({first['scope']} level{chips})[/]"
    return (f"{many}NIC {first.get('part', '')} [dim]({names})[/]: "
            f"{format_rate(first['bandwidth_bytes_per_s'])} each way")


def _links_table(view: dict[str, Any]) -> Table:
    kinds = {c["id"]: c["kind"] if c["kind"] != "memory" else c["memory"]
             for c in view["components"]}
    grouped: dict[tuple[Any, ...], int] = defaultdict(int)
    for link in view["links"]:
        measured = ", ".join(f"{k} {format_rate(v)}"
                             for k, v in sorted(link["measured_bytes_per_s"].items()))
        key = (link["kind"], kinds[link["src"]], kinds[link["dst"]],
               link["bandwidth_bytes_per_s"], link["latency_s"], measured)
        grouped[key] += 1
    table = Table(title="Links of one node (per direction)", title_justify="left")
    for column in ("link", "from -> to", "count", "peak", "latency", "measured"):
        table.add_column(column, justify="right" if column in ("count", "peak") else "left")
    for (kind, src, dst, bandwidth, latency, measured), count in grouped.items():
        table.add_row(kind, f"{src} -> {dst}", str(count), format_rate(bandwidth),
                      format_seconds(latency) if latency else "-", measured or "-")
    return table


def _totals_table(totals: dict[str, Any], title: str) -> Table:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("GPUs / nodes / NVLink domains",
                  f"{totals['num_gpus']:,} / {totals['num_nodes']:,} / "
                  f"{totals['num_nvlink_domains']:,}")
    for kind, capacity in sorted(totals["memory_capacity_bytes"].items()):
        table.add_row(f"{kind.upper()} capacity", format_bytes(capacity))
    for dtype in ("fp8", "bf16", "tf32", "fp32", "fp64"):
        if dtype in totals["peak_flops"]:
            table.add_row(f"peak {dtype} (dense)", format_flops(totals["peak_flops"][dtype]))
    table.add_row("CPU cores", f"{totals['cpu_cores']:,}")
    table.add_row("NVLink per GPU", format_rate(totals["nvlink_bandwidth_bytes_per_s_per_gpu"]))
    table.add_row(f"NVLink domain bisection ({totals['gpus_per_nvlink_domain']} GPUs)",
                  format_rate(totals["nvlink_domain_bisection_bytes_per_s"]))
    fabric = totals["fabric_bisection_bytes_per_s"]
    table.add_row("fabric bisection", format_rate(fabric) if fabric else "- (one domain)")
    if totals["fabric_switches_per_tier"]:
        table.add_row("fabric switches per tier",
                      " / ".join(f"{n:,}" for n in totals["fabric_switches_per_tier"]))
    return table


def _sources_table(sources: dict[str, str], title: str = "Sources",
                   width: int = 80) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    # The key column as wide as its longest key path (up to 48 characters), so that key paths
    # wrap only between keys; the sources wrap in the rest of the width.
    longest = min(48, max((len(word) for key in sources for word in key.split()), default=3))
    table.add_column("key", style="cyan")
    table.add_column("source", max_width=max(24, width - longest - 5))
    for key, text in sources.items():
        table.add_row(key, text)
    return table


@_safe
def render_system(view: dict[str, Any], console: Console) -> None:
    tree = Tree(f"[bold]{view['name']}[/]: {view['node']}")
    by_kind: dict[str, dict[tuple[Any, ...], list[str]]] = defaultdict(lambda: defaultdict(list))
    for component in view["components"]:
        signature = (component.get("part"), component.get("memory"), component.get("scope"))
        by_kind[component["kind"]][signature].append(component["id"])
    first = {c["id"]: c for c in view["components"]}
    for kind in _KIND_ORDER:
        for ids in by_kind.get(kind, {}).values():
            tree.add(_component_line(first[ids[0]], ids))
    fabric = view["fabric"]
    if fabric:
        tree.add(f"fabric: {fabric['topology']}, {fabric['tiers']} tier(s) of "
                 f"{fabric['switch_radix']}-port switches, leaf {fabric['leaf_down_ports']} down "
                 f"/ {fabric['leaf_up_ports']} up")
    console.print(Text(view["description"], style="dim"))
    if is_plain(console):  # the tree as indented lines, without guide characters
        console.print(Text.from_markup(str(tree.label)))
        for child in tree.children:
            console.print(Text("  - ") + Text.from_markup(str(child.label)))
    else:
        console.print(tree)
    _show(console, _links_table(view),
          _totals_table(view["totals"], f"Totals at {view['totals']['num_gpus']:,} GPUs"),
          _sources_table(view["sources"], width=console.width),
          _sources_table({f"{part} {key}": text
                          for part, sources in view["part_sources"].items()
                          for key, text in sources.items()}, "Sources of the parts",
                         console.width))


@_safe
def render_model(view: dict[str, Any], console: Console) -> None:
    arch = view["architecture"]
    table = Table(title=f"{view['name']}", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    for key in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab"):
        table.add_row(key, f"{arch[key]:,}")
    table.add_row("head_dim", str(view["head_dim"]))
    table.add_row("mlp", f"{arch['activation'] or ('swiglu' if arch['gated_mlp'] else 'gelu')}"
                  f"{' (gated)' if arch['gated_mlp'] else ''}")
    table.add_row("norm / positions", f"{arch['norm']} / {arch['position_embedding']}")
    table.add_row("parameters", f"{view['params'] / 1e9:,.2f} B")
    table.add_row("  non-embedding", f"{view['params_non_embedding'] / 1e9:,.2f} B")
    if view["published_params"]:
        error = view["params"] / view["published_params"] - 1
        table.add_row("  published", f"{view['published_params'] / 1e9:,.2f} B ({error:+.2%})")
    if view["params_active"] != view["params"]:
        table.add_row("  active per token", f"{view['params_active'] / 1e9:,.2f} B")
        if view["published_active_params"]:
            error = view["params_active"] / view["published_active_params"] - 1
            table.add_row("  published active",
                          f"{view['published_active_params'] / 1e9:,.2f} B ({error:+.2%})")
    if view["params_mtp"]:
        table.add_row("  multi-token prediction", f"{view['params_mtp'] / 1e9:,.2f} B")
    for seq, flops in view["model_flops_per_token_by_seq_len"].items():
        table.add_row(f"training FLOPs/token @ seq {seq}", f"{flops:.4g}")
    console.print(Text(view["description"], style="dim"))
    _show(console, table)
    if view["sources"]:
        _show(console, _sources_table(view["sources"], width=console.width))


def clock_text(clock: dict[str, Any] | None) -> str | None:
    """"1.43 GHz of 1.83 (GPUs limited to 543 W)" when the GPUs compute below (or above)
    their part's clock, with "; 1.38 GHz for the slowest of 256 GPUs, which paces the step"
    when they differ among themselves (that alone when a typical GPU keeps the part's clock);
    else None."""
    if not clock:
        return None
    typical, step = clock["compute_ghz"], clock.get("step_ghz", clock["compute_ghz"])
    if typical == clock["part_ghz"] and step == typical:
        return None
    limit = clock["power_limit_w"]
    text = (f"{typical:.3g} GHz of {clock['part_ghz']:g}"
            + (f" (GPUs limited to {limit:.4g} W)" if limit is not None else ""))
    if step == typical:
        return text
    paced = f"{step:.3g} GHz for the slowest of {clock['synchronized_gpus']:,} GPUs, which paces"
    if typical == clock["part_ghz"]:
        return f"{paced} the step (a typical one: {typical:g})"
    return f"{text}; {paced} the step"


def experts_text(experts: dict[str, Any]) -> str:
    """``routing``: the busiest expert rank's load over the mean, and each expert's tokens."""
    spread = experts["tokens_per_expert_spread"]
    rows = f"{experts['tokens_per_expert']:,}" + (f" +- {spread:,.0f}" if spread else "")
    busiest = experts["busiest_rank_over_mean"] - 1
    where = (f"the busiest of {experts['ep']} expert ranks {busiest:+.1%} over the mean; "
             if experts["ep"] > 1 else "")
    return f"{experts['routing']} routing: {where}{rows} token copies an expert"


@_safe
def render_scenario(view: dict[str, Any], console: Console) -> None:
    layout, training, par = view["layout"], view["training"], view["parallelism"]
    table = Table(title=f"Scenario {view['name']}", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("system / GPUs", f"{view['system']} / {view['num_gpus']:,} "
                  f"({layout['num_nodes']:,} nodes)")
    table.add_row("model", f"{view['model']} ({view['params'] / 1e9:,.1f} B params)")
    table.add_row("training", f"seq {training['seq_len']}, micro-batch "
                  f"{training['micro_batch']}, global batch {training['global_batch']}, "
                  f"{training['precision']}, {training['attention']} attention")
    table.add_row("layout", f"tp {layout['tp']} x pp {layout['pp']} x cp {layout['cp']} x dp "
                  f"{layout['dp']}" + (f", vp {layout['vp']}" if layout["vp"] > 1 else "")
                  + (f"; experts ep {layout['ep']} x etp {layout['etp']} x edp {layout['edp']}"
                     if layout.get("moe") else ""))
    experts = view.get("experts")
    if experts:
        table.add_row("expert load a pass", experts_text(experts))
    table.add_row("options", f"sequence parallel {par['sequence_parallel']}, ZeRO "
                  f"{par['zero_stage']}, recompute {par['recompute']}, offload "
                  f"{view['offload']['strategy']}")
    clock = clock_text(view.get("gpu_clock"))
    if clock:
        table.add_row("GPU compute clock", clock)
    table.add_row("micro-batches per step", str(layout["micro_batches_per_step"]))
    table.add_row("tokens per step", f"{view['tokens_per_step']:,}")
    table.add_row("model FLOPs per step", f"{view['model_flops_per_step']:.4g}")
    memory = view["memory_per_gpu"]
    if not memory["tracked"]:
        table.add_row("memory per GPU", f"not tracked ({memory['why']})")
    for tier, data in memory.get("tiers", {}).items():
        table.add_row(f"{tier.upper()}/GPU: weights / grads / optimizer",
                      " / ".join(format_bytes(data[k])
                                 for k in ("weights", "gradients", "optimizer")))
        table.add_row(f"{tier.upper()}/GPU: peak / capacity",
                      f"{format_bytes(data['peak'])} / {format_bytes(data['capacity'])}"
                      + ("" if data["peak"] <= data["capacity"] else " [red](does not fit)[/]"))
    _show(console, table, _totals_table(view["totals"], "System at this size"))


def _gib(value: float) -> str:
    return f"{value / 2**30:.1f}"


@_safe
def render_workload(view: dict[str, Any], console: Console) -> None:
    """The lowered step: per rank class, work, traffic and memory."""
    table = Table(title=f"Workload: {view['num_rank_classes']} rank classes, {view['ops']:,} ops "
                  f"for {view['num_gpus']:,} GPUs (memory and traffic in GiB per GPU per step)",
                  title_justify="left")
    columns = ("class", "ranks", "ops", "TFLOP", "recomp", "sent tp/cp/pp/dp", "states",
               "activ.", "peak")
    for column in columns:
        table.add_column(column, justify="left" if column == "class" else "right")
    for c in view["rank_classes"]:
        memory = c["memory_per_gpu_bytes"]
        sent = c["collective_bytes_per_step"]
        hardware = c["hardware_flops_per_step_per_gpu"]
        recompute = hardware - c["model_flops_per_step_per_gpu"]
        table.add_row(
            c["name"], f"{c['multiplicity']:,}", f"{sum(c['ops_by_kind'].values()):,}",
            f"{hardware / 1e12:,.0f}", f"{recompute / max(hardware, 1):.0%}",
            "/".join(_gib(sent[k]) for k in ("tp", "cp", "pp", "dp")),
            _gib(memory["weights"] + memory["gradients"] + memory["optimizer"]),
            _gib(memory["activations"]), _gib(memory["peak"]),
        )
    _show(console, table)
    fits = "fits" if view["fits_in_hbm"] else "does NOT fit"
    console.print(
        f"Model FLOPs per step {view['model_flops_per_step']:.4g}, hardware FLOPs "
        f"{view['hardware_flops_per_step']:.4g}. Peak memory "
        f"{format_bytes(view['memory_per_gpu_bytes']['peak'])} on "
        f"{view['memory_peak_rank_class']} {fits} in "
        f"{format_bytes(view['hbm_capacity_bytes'])} of HBM."
    )


def _busiest_links(links: list[dict[str, Any]], rows: int = 8) -> Table:
    """The busiest links of the step: utilization is the mean share of capacity in use."""
    table = Table(title="Busiest links (whole system)", title_justify="left")
    for column in ("link", "kind", "utilization", "busy", "bytes", "traffic"):
        table.add_column(column, justify="right" if column in ("utilization", "busy", "bytes")
                         else "left")
    for link in links[:rows]:
        table.add_row(link["name"], link["kind"], f"{link['utilization']:.0%}",
                      f"{link['busy']:.0%}", format_bytes(link["bytes"]),
                      ", ".join(link["traffic"]))
    return table


def stages_text(stages: list[dict[str, Any]], listed: int = 16) -> str:
    """One line on the pipeline stages' loads: each stage's compute-stream busy share (up to
    ``listed`` stages, else the least and most busy), and which one paces the step; empty
    without pipeline stages."""
    by_stage = {row["stage"]: row["busy_share"] for row in stages}  # a class per stage
    if len(by_stage) < 2:
        return ""
    busiest = max(by_stage, key=lambda k: by_stage[k])
    if len(by_stage) <= listed:
        loads = ", ".join(f"{k}: {v:.0%}" for k, v in sorted(by_stage.items()))
    else:
        least = min(by_stage, key=lambda k: by_stage[k])
        loads = (f"{len(by_stage)} stages, from {by_stage[least]:.0%} (stage {least}) to "
                 f"{by_stage[busiest]:.0%}")
    spread = by_stage[busiest] - min(by_stage.values())
    pace = (f"; stage {busiest} is the busiest and paces the others" if spread > 0.05
            else "; the stages are balanced")
    return f"Pipeline stages, compute stream busy: {loads}{pace}."


@_safe
def render_result(result: dict[str, Any], name: str, console: Console) -> None:
    """The summary of ``ghsim run``."""
    step = result["step_time_s"]
    head = Table(title=f"{name}: one optimizer step", title_justify="left", show_header=False)
    head.add_column("what")
    head.add_column("value", justify="right")
    head.add_row("step time", format_seconds(step))
    tokens = result["tokens_per_s"]
    head.add_row("tokens/s (per GPU)", NOT_APPLICABLE if tokens is None else
                 f"{tokens:,.0f} ({result['tokens_per_s_per_gpu']:,.0f})")
    head.add_row("model TFLOP/s per GPU", _rate(result["model_tflops_per_gpu"], ",.1f"))
    head.add_row("MFU", _rate(result["mfu"], ".1%"))
    clock = clock_text(result.get("gpu_clock"))
    if clock:
        head.add_row("GPU compute clock", clock)
    head.add_row("fits in memory", fits_text(result["memory"]))
    last = [row for row in result.get("stages", []) if row.get("finishes_last")]
    which = (f"stage {last[0]['stage']}, the rank class that finishes last"
             if len(result.get("stages", [])) > 1 and last else "critical rank class")
    parts = Table(title=f"Where the time goes ({which})", title_justify="left")
    parts.add_column("part")
    parts.add_column("seconds", justify="right")
    parts.add_column("share", justify="right")
    for key, seconds in result["breakdown_s"].items():
        if seconds > 0:
            parts.add_row(key, f"{seconds:.4g}", f"{seconds / step:.1%}")
    for key, seconds in result["compute_breakdown_s"].items():
        if seconds > 0:
            parts.add_row(f"  compute: {key}", f"{seconds:.4g}", f"{seconds / step:.1%}",
                          style="dim")
    memory = Table(title="Memory per GPU", title_justify="left")
    for column in ("tier", "peak", "capacity", "fits", "peak at", "model states"):
        memory.add_column(column, justify="left" if column == "tier" else "right")
    for tier, data in result["memory"].items():
        if isinstance(data, dict):
            fits = data["peak_bytes"] <= data["capacity_bytes"]
            states = data.get("states_bytes")
            memory.add_row(tier, format_bytes(data["peak_bytes"]),
                           format_bytes(data["capacity_bytes"]),
                           "yes" if fits else f"[red]no: {tier}[/]",
                           f"{data['peak_at_s']:.3g} s",
                           format_bytes(sum(states.values())) if states else "-")
    _show(console, head, parts)
    stages = stages_text(result.get("stages", []))
    if stages:
        console.print(stages)
    bottleneck = result["bottleneck"]
    console.print(f"[bold]Bottleneck:[/] {bottleneck['resource']} - {bottleneck['why']}.")
    if memory.row_count:
        _show(console, memory)
    else:
        console.print("Memory per GPU: not tracked (this workload records no allocations).")
    if result.get("links"):
        _show(console, _busiest_links(result["links"]))
    host = result.get("host", {})
    if host.get("h2d_bytes") or host.get("d2h_bytes") or host.get("cpu_utilization"):
        console.print(
            f"Host link ({host['link']}): {format_bytes(host['h2d_bytes'])} down to the GPU "
            f"({host['h2d_utilization']:.0%} busy), {format_bytes(host['d2h_bytes'])} up "
            f"({host['d2h_utilization']:.0%} busy); host CPU busy {host['cpu_utilization']:.0%} "
            "of the step."
        )
    for warning in result["warnings"]:
        console.print(f"[yellow]warning:[/] {warning}")


@_safe
def render_validation(outcomes: list[dict[str, Any]], summary: dict[str, Any],
                      console: Console) -> None:
    """The table of ``ghsim validate``."""
    table = Table(title="Predicted against measured step time (seconds)", title_justify="left")
    for column in ("point", "measured", "predicted", "error", "bound by"):
        table.add_column(column, justify="left" if column in ("point", "bound by") else "right")
    # The other columns take about 44 characters (54 with boxes): a point's id wraps in the
    # rest, between the words of its name.
    width = max(20, console.width - (44 if is_plain(console) else 54))
    for o in outcomes:
        name = wrap_name(o["id"] + (" *" if o.get("overrides") else ""), width)
        if o["failed"]:
            table.add_row(name, "-", "-", "[red]failed[/]", o["failed"])
            continue
        error = o["error"]
        style = "red" if abs(error) > 0.2 else ("yellow" if abs(error) > 0.08 else "green")
        table.add_row(name, f"{o['measured_step_time_s']:.3f}",
                      f"{o['predicted_step_time_s']:.3f}", f"[{style}]{error:+.1%}[/]",
                      bound_by_cell(o))
    _show(console, table)
    console.print(f"{mape_clause(summary)} over "
                  f"{summary['simulated']} simulated points ({summary['failed']} failed"
                  f"{not_fitting_clause(summary)}).")
    if any(o.get("overrides") for o in outcomes):
        console.print("* run with the point's own overrides of its scenario (--json lists "
                      "them; the file's notes say why)")
    render_subsets(summary, console)


def bound_by_cell(outcome: dict[str, Any]) -> str:
    """A validation row's "bound by": the bottleneck, or that the step does not fit (a run
    that was measured did fit, so the scenario is wrong)."""
    if outcome.get("does_not_fit"):
        return "[red]does not fit[/]"
    return str(outcome["bottleneck"] or "")


def mape_clause(summary: dict[str, Any]) -> str:
    """"MAPE x %, worst y %", or that no point was simulated."""
    if summary["mape"] is None:
        return "MAPE n/a (no point simulated)"
    return f"MAPE {summary['mape']:.1%}, worst {summary['max_abs_error']:.1%}"


def not_fitting_clause(summary: dict[str, Any]) -> str:
    count = summary.get("not_fitting", 0)
    return f", {count} not fitting in memory" if count else ""


def render_subsets(summary: dict[str, Any], console: Console) -> None:
    """The MAPE and worst error of each subset of the points (by system, precision, model size
    and confidence), for the subsets that split the points."""
    table = Table(title="Errors by subset", title_justify="left")
    for column in ("by", "subset", "points", "MAPE", "worst"):
        table.add_column(column, justify="left" if column in ("by", "subset") else "right")
    for subset, values in summary.get("by", {}).items():
        if len(values) < 2:
            continue
        for index, (value, errors) in enumerate(values.items()):
            label = subset.replace("_", " ") if index == 0 else ""
            if not errors["simulated"]:  # every point of this subset failed
                table.add_row(label, value, "0", "-", "-")
                continue
            table.add_row(label, value, str(errors["simulated"]), f"{errors['mape']:.1%}",
                          f"{errors['max_abs_error']:.1%}")
    if table.row_count:
        _show(console, table)


def _natural_width(console: Console, table: Table) -> int:
    for column in table.columns:
        column.overflow = "fold"
    if is_plain(console):
        _plain(table)
    return console.measure(table, options=console.options.update(width=10**4)).maximum


RANKED_COLUMNS = {"tokens_per_s": ("tok/s", ",.0f"), "tokens_per_s_per_gpu": ("tok/s/GPU", ",.0f"),
                  "model_tflops_per_gpu": ("TFLOP/s/GPU", ",.1f"),
                  "output_tokens_per_s_per_gpu": ("tok/s/GPU", ",.0f")}
"""Result fields a sweep can rank by that its table does not otherwise show: the column each
gets when it is the ranking (header, format)."""


def _sweep_cells(r: dict[str, Any], serving: bool, ranked_by: str) -> list[str]:
    """A simulated point's result cells: the step and MFU of a training step, or the
    throughput and p99 latencies of a served model; the field ranked by if those are not it
    (:data:`RANKED_COLUMNS`); then HBM, fits, bound by."""
    fits, hbm = record_fits(r), r["hbm_peak_bytes"]
    if serving:
        def ms(value: float | None) -> str:
            return "-" if value is None else f"{value * 1e3:,.0f}"
        head = [f"{r['output_tokens_per_s']:,.0f}", ms(r["ttft_p99_s"]), ms(r["tpot_p99_s"])]
    else:
        head = [format_seconds(r["step_time_s"]), _rate(r["mfu"], ".1%")]
    if ranked_by in RANKED_COLUMNS:
        head.append(_rate(r.get(ranked_by), RANKED_COLUMNS[ranked_by][1]))
    return [*head, "-" if hbm is None else f"{hbm / 2**30:.1f}",
            f"[red]{fits}[/]" if r["fits"] is False else fits, str(r["bottleneck"])]


def _sweep_table(ranked: list[dict[str, Any]], rank_by: str, axes: list[str],
                 stacked: bool) -> Table:
    table = Table(title=f"Ranked by {rank_by}", title_justify="left")
    table.add_column("#", justify="right")
    if not stacked:
        for key in axes or ["point"]:
            table.add_column(_header(key))
    serving = any(r.get("output_tokens_per_s") is not None for r in ranked)
    heads = ("tok/s", "TTFT p99 ms", "TPOT p99 ms") if serving else ("step", "MFU")
    if rank_by in RANKED_COLUMNS:
        heads = (*heads, RANKED_COLUMNS[rank_by][0])
    for column in (*heads, "HBM GiB", "fits", "bound by"):
        table.add_column(column, justify="left" if column in ("fits", "bound by") else "right")
    if stacked:
        table.add_column(" / ".join(short_key(key) for key in axes), ratio=1)
    for rank, r in enumerate(ranked, 1):
        values = [str(r["overrides"].get(key, "-")) for key in axes]
        done = r.get("output_tokens_per_s") is not None if serving else (
            r["step_time_s"] is not None)
        if not done:
            number = "-"
            cells = [*(["-"] * (len(heads) + 2)), f"[dim]{r['error'] or r['skipped']}[/]"]
        else:
            number, cells = str(rank), _sweep_cells(r, serving, rank_by)
        if stacked:
            table.add_row(number, *cells, " / ".join(values))
        else:
            table.add_row(number, *(values if axes else [r["label"]]), *cells)
    return table


@_safe
def render_sweep(ranked: list[dict[str, Any]], summary: str, rank_by: str,
                 console: Console) -> None:
    """The ranked table of ``ghsim sweep``: one column per axis (a long key path shortened,
    named in full under the table), then the step, MFU, HBM peak, the tiers that do not fit
    and the bottleneck; where those columns are wider than the console, the axes' values share
    one last column that wraps between values. A point that does not fit ranks after those
    that do."""
    axes: list[str] = []
    for r in ranked:
        axes += [key for key in r["overrides"] if key not in axes]
    table = _sweep_table(ranked, rank_by, axes, stacked=False)
    if axes and _natural_width(console, table) > console.width:
        table = _sweep_table(ranked, rank_by, axes, stacked=True)
    _show(console, table)
    legend = legend_line(axes)
    if legend:
        console.print(legend, highlight=False)
    console.print(summary, highlight=False)


@_safe
def render_routes(view: dict[str, Any], console: Console) -> None:
    """``inspect --routes``: one table per rank class, a row per link of each group's flows."""
    for cls in view["classes"]:
        table = Table(title=f"{cls['class']} (x{cls['multiplicity']}, rank {cls['first_rank']})",
                      title_justify="left")
        for column in ("group", "share", "link", "kind", "copies", "GB/s", "eff", "alone"):
            table.add_column(column, justify="left" if column in ("group", "link", "kind")
                             else "right")
        for kind, group in cls["groups"].items():
            label = f"{kind} {group['collective']} ({group['algorithm']}, n={group['size']})"
            for share in group["shares"]:
                for index, link in enumerate(share["links"]):
                    table.add_row(label if index == 0 else "",
                                  f"{share['fraction']:.3g}" if index == 0 else "",
                                  link["link"], link["kind"], f"{link['copies']:g}",
                                  f"{link['capacity_gb_s']:.4g}", f"{link['efficiency']:.3g}",
                                  f"{share['alone_gb_s']:.4g}" if index == 0 else "")
                    label = ""
        _show(console, table)
