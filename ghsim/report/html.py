"""``report.html``: one self-contained page (inline SVG plots and CSS, no network) with the
summary, the plots and the tables, to attach to a purchasing or design discussion."""

from __future__ import annotations

import html
import re
from typing import Any

from ghsim.errors import printable
from ghsim.version import __version__


def _escape(text: str) -> str:
    """HTML-escaped, with control characters and lone surrogates written as escapes."""
    return html.escape(printable(text))

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f0f0f0; } td.l, th.l { text-align: left; }
.bad { color: #b00; } .note { color: #555; font-size: 0.9em; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
"""


def _svg(svg: str) -> str:
    """An SVG document as inline HTML: no XML prolog, no metadata, no namespace URIs (inline SVG
    in HTML needs none), so the page names no network resource at all."""
    start = svg.find("<svg")
    body = svg[start:] if start >= 0 else ""
    body = re.sub(r"<metadata>.*?</metadata>", "", body, flags=re.S)
    return re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", body)


def _table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    head = "".join(f'<th class="{"l" if i < left else ""}">{_escape(h)}</th>'
                   for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{cell}</td>'
                         for i, cell in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def page(title: str, intro: str, sections: list[tuple[str, str]]) -> str:
    """A whole HTML document."""
    parts = "".join(f"<h2>{_escape(name)}</h2>{content}" for name, content in sections)
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_escape(title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{_escape(title)}</h1><p>{intro}</p>{parts}"
            f"<p class=\"note\">Made by ghsim {__version__}.</p></body></html>")


def _gib(value: float | None) -> str:
    return "-" if value is None else f"{value / 2**30:.1f}"


def _fits(memory_fits: bool | None, short: str | None) -> str:
    if memory_fits is None:
        return "not tracked"
    if memory_fits:
        return "yes"
    return f'<span class="bad">no: {_escape(short or "?")}</span>'


def _rate(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def setup_rows(scenario: dict[str, Any], overrides: list[str] | None = None,
               source: str | None = None) -> list[tuple[str, str]]:
    """What was simulated, as (quantity, text) rows: system, GPUs, model, layout, training,
    offload and the overrides given, from a resolved scenario (``Result.inputs["scenario"]``);
    for a served model its replicas, precision, request stream and scheduler."""
    if "inference" in scenario:
        return _serving_rows(scenario, overrides, source)
    par, training = scenario["parallelism"], scenario["training"]
    layout = " x ".join(f"{k} {par[k]}" for k in ("tp", "pp", "cp", "dp") if par.get(k))
    if (par.get("vp") or 1) > 1:
        layout += f", vp {par['vp']}"
    rows = [("system", str(scenario["system"]["name"])),
            ("GPUs", f"{scenario['num_gpus']:,}"),
            ("model", str(scenario["model"]["name"])),
            ("layout", layout + f"; ZeRO {par['zero_stage']}, recompute {par['recompute']}, "
                       f"sequence parallel {par['sequence_parallel']}"),
            ("training", f"seq {training['seq_len']}, micro-batch {training['micro_batch']}, "
                         f"global batch {training['global_batch']}, {training['precision']}"),
            ("offload", str(scenario["offload"]["strategy"]))]
    if scenario.get("workload"):
        rows.append(("workload", f"{scenario['workload']} (replay: {scenario['replay']})"))
    if source is not None:
        rows.append(("scenario file", source))
    if overrides is not None:
        rows.append(("overrides", ", ".join(overrides) or "none"))
    return rows


def _serving_rows(scenario: dict[str, Any], overrides: list[str] | None,
                  source: str | None) -> list[tuple[str, str]]:
    par, inference = scenario["parallelism"], scenario["inference"]
    requests, scheduler = inference["requests"], inference["scheduler"]

    def length(value: Any) -> str:
        return str(value) if not isinstance(value, dict) else (
            f"{value['distribution']} mean {value['mean']:g}")

    rows = [("system", str(scenario["system"]["name"])),
            ("GPUs", f"{scenario['num_gpus']:,}"),
            ("model", str(scenario["model"]["name"])),
            ("layout", f"tp {par['tp']}, ep {par['ep']} per replica"),
            ("serving", f"{inference['precision']}, {requests['count']:,} requests of "
                        f"{length(requests['input_tokens'])} in / "
                        f"{length(requests['output_tokens'])} out, {requests['arrival']}"),
            ("scheduler", f"{scheduler['policy']}, chunked prefill "
                          f"{scheduler['chunked_prefill']}, KV offload "
                          f"{inference['kv_offload']['policy']}")]
    if source is not None:
        rows.append(("scenario file", source))
    if overrides is not None:
        rows.append(("overrides", ", ".join(overrides) or "none"))
    return rows


def _setup_table(rows: list[tuple[str, str]]) -> str:
    return _table(["quantity", "value"], [[_escape(k), _escape(v)] for k, v in rows], left=2)


def sweep_report(name: str, description: str, ranked: list[dict[str, Any]],
                 svgs: dict[str, str], summary: str,
                 setup: list[tuple[str, str]] | None = None) -> str:
    """The page of a sweep: what it varies on which base, the plots, and every point ranked
    (those that do not fit in memory marked with the tier that overflows, and never best)."""
    axes: list[str] = []
    for r in ranked:
        axes += [key for key in r["overrides"] if key not in axes]
    if any(r.get("output_tokens_per_s") is not None for r in ranked):
        return _serving_sweep_report(name, description, ranked, axes, svgs, summary, setup)
    columns = ["rank", "step (s)", "MFU", "tokens/s per GPU", "HBM peak (GiB)", "fits",
               "host link down / up (GiB)", "bound by"]
    rows = []
    for rank, r in enumerate(ranked, 1):
        point = [_escape(str(r["overrides"].get(key, "-"))) for key in axes]
        if r["step_time_s"] is None:  # dashes, then why in the last column
            why = _escape(r["error"] or r["skipped"] or "")
            rows.append([*point, *["-"] * (len(columns) - 1), f'<span class="bad">{why}</span>'])
            continue
        host = "-" if r.get("h2d_bytes") is None else \
            f"{_gib(r['h2d_bytes'])} / {_gib(r['d2h_bytes'])}"
        rows.append([*point, f"{rank}", f"{r['step_time_s']:.3f}", _rate(r["mfu"], ".1%"),
                     _rate(r.get("tokens_per_s_per_gpu"), ",.0f"),
                     _gib(r["hbm_peak_bytes"]), _fits(r["fits"], r.get("does_not_fit")), host,
                     _escape(str(r["bottleneck"]))])
    table = _table([*axes, *columns], rows, left=len(axes))
    done = [r for r in ranked if r["step_time_s"] is not None]
    best = next((r for r in done if r["fits"] is not False), None)
    short = sum(1 for r in done if r["fits"] is False)
    notes = [f"Best that fits in memory: {_escape(best['label'])} ({best['step_time_s']:.3f} s)."
             if best else '<span class="bad">No point fits in memory.</span>']
    if short:
        notes.append(f"{short} point{'s' if short > 1 else ''} do{'es' if short == 1 else ''} "
                     "not fit in memory: ranked after those that do, never best, and left out "
                     "of the sensitivity plot.")
    summary_html = "".join(f"<p>{note}</p>" for note in notes)
    figures = "".join(f"<figure>{_svg(svg)}</figure>" for svg in svgs.values())
    return page(f"ghsim sweep: {name}", _escape(description) + "<br>" + _escape(summary),
                [("Setup", _setup_table(setup or []) + summary_html), ("Plots", figures),
                 ("Ranked results", table)])


def _serving_sweep_report(name: str, description: str, ranked: list[dict[str, Any]],
                          axes: list[str], svgs: dict[str, str], summary: str,
                          setup: list[tuple[str, str]] | None) -> str:
    """:func:`sweep_report` for a served model: throughput, p99 latencies, HBM, fits."""
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value * 1e3:,.1f}"

    rows = []
    for rank, r in enumerate(ranked, 1):
        point = [_escape(str(r["overrides"].get(key, "-"))) for key in axes]
        if r.get("output_tokens_per_s") is None:
            why = _escape(r["error"] or r["skipped"] or "")
            rows.append([*point, "-", "-", "-", "-", "-", "-", "-",
                         f'<span class="bad">{why}</span>'])
            continue
        rows.append([*point, f"{rank}", f"{r['output_tokens_per_s']:,.0f}",
                     f"{r['output_tokens_per_s_per_gpu']:,.0f}", ms(r["ttft_p99_s"]),
                     ms(r["tpot_p99_s"]), _gib(r["hbm_peak_bytes"]),
                     _fits(r["fits"], r.get("does_not_fit")), _escape(str(r["bottleneck"]))])
    table = _table([*axes, "rank", "output tokens/s", "per GPU", "TTFT p99 (ms)",
                    "TPOT p99 (ms)", "HBM peak (GiB)", "fits", "bound by"], rows,
                   left=len(axes))
    best = next((r for r in ranked if r.get("output_tokens_per_s") is not None
                 and r["fits"] is not False), None)
    note = (f"Best that can be served: {_escape(best['label'])} "
            f"({best['output_tokens_per_s']:,.0f} output tokens/s)." if best else
            '<span class="bad">No point can be served: the model does not fit.</span>')
    figures = "".join(f"<figure>{_svg(svg)}</figure>" for svg in svgs.values())
    return page(f"ghsim sweep: {name}", _escape(description) + "<br>" + _escape(summary),
                [("Setup", _setup_table(setup or []) + f"<p>{note}</p>"), ("Plots", figures),
                 ("Ranked results", table)])


def run_report(name: str, result: dict[str, Any], svgs: dict[str, str]) -> str:
    """The page of one run: what was simulated (system, GPUs, model, layout, overrides), the
    headline numbers, where the time goes, and memory per tier."""
    step = result["step_time_s"]
    memory = result["memory"]
    tiers = {tier: d for tier, d in memory.items() if isinstance(d, dict)}
    short = [t for t, d in tiers.items() if d["peak_bytes"] > d["capacity_bytes"]]
    fits = "not tracked" if not tiers else _fits(not short, "+".join(short))
    tokens = result["tokens_per_s_per_gpu"]
    headline = _table(["quantity", "value"], [
        ["step time", f"{step:.4g} s"],
        ["tokens/s per GPU", "n/a" if tokens is None else f"{tokens:,.0f}"],
        ["model TFLOP/s per GPU", _rate(result["model_tflops_per_gpu"], ".1f")],
        ["MFU", _rate(result["mfu"], ".1%")],
        ["fits in memory", fits],
        ["bottleneck", _escape(f"{result['bottleneck']['resource']}: "
                               f"{result['bottleneck']['why']}")]])
    inputs = result.get("inputs", {})
    setup = _setup_table(setup_rows(inputs["scenario"], list(inputs.get("overrides", [])),
                                    inputs.get("source"))) if "scenario" in inputs else ""
    parts = _table(["part", "seconds", "share"], [
        [k, f"{v:.4g}", f"{v / step:.1%}"] for k, v in result["breakdown_s"].items() if v > 0])
    stages = result.get("stages", [])
    if len(stages) > 1:  # each pipeline stage's load: the busiest paces the others
        parts += _table(["pipeline stage", "rank class", "compute stream busy (s)", "share"], [
            [str(row["stage"]), _escape(str(row["class"])), f"{row['busy_s']:.4g}",
             f"{row['busy_share']:.1%}"] for row in stages])
    memory_table = _table(["tier", "peak (GiB)", "capacity (GiB)", "fits"], [
        [tier, _gib(d["peak_bytes"]), _gib(d["capacity_bytes"]),
         _fits(d["peak_bytes"] <= d["capacity_bytes"], tier)] for tier, d in tiers.items()]) \
        if tiers else "<p>Not tracked: this workload records no allocations.</p>"
    warnings = "".join(f'<p class="bad">{_escape(w)}</p>' for w in result["warnings"])
    figures = "".join(f"<figure>{_svg(svg)}</figure>" for svg in svgs.values())
    return page(f"ghsim run: {name}", "One simulated optimizer step.",
                [("Setup", setup), ("Summary", headline + warnings),
                 ("Where the time goes", parts + figures), ("Memory per GPU", memory_table)])
