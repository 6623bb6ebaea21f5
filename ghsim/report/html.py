"""``report.html``: one self-contained page (inline SVG plots and CSS, no network) with the
summary, the plots and the tables, to attach to a purchasing or design discussion."""

from __future__ import annotations

import html
import re
from typing import Any

from ghsim.version import __version__

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
    head = "".join(f'<th class="{"l" if i < left else ""}">{html.escape(h)}</th>'
                   for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{cell}</td>'
                         for i, cell in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def page(title: str, intro: str, sections: list[tuple[str, str]]) -> str:
    """A whole HTML document."""
    parts = "".join(f"<h2>{html.escape(name)}</h2>{content}" for name, content in sections)
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p>{intro}</p>{parts}"
            f"<p class=\"note\">Made by ghsim {__version__}.</p></body></html>")


def _gib(value: float | None) -> str:
    return "-" if value is None else f"{value / 2**30:.1f}"


def sweep_report(name: str, description: str, ranked: list[dict[str, Any]],
                 svgs: dict[str, str], summary: str) -> str:
    rows = []
    for rank, r in enumerate(ranked, 1):
        if r["step_time_s"] is None:
            why = html.escape(r["error"] or r["skipped"] or "")
            rows.append([html.escape(r["label"]), "-", "-", "-", "-", "-", f'<span class="bad">'
                         f"{why}</span>"])
            continue
        fits = "yes" if r["fits"] else '<span class="bad">no</span>'
        rows.append([html.escape(r["label"]), f"{rank}", f"{r['step_time_s']:.3f}",
                     f"{r['mfu']:.1%}", _gib(r["hbm_peak_bytes"]), fits,
                     html.escape(str(r["bottleneck"]))])
    table = _table(["point", "rank", "step (s)", "MFU", "HBM peak (GiB)", "fits", "bound by"],
                   rows)
    figures = "".join(f"<figure>{_svg(svg)}</figure>" for svg in svgs.values())
    return page(f"ghsim sweep: {name}", html.escape(description) + "<br>" + html.escape(summary),
                [("Plots", figures), ("Ranked results", table)])


def run_report(name: str, result: dict[str, Any], svgs: dict[str, str]) -> str:
    step = result["step_time_s"]
    headline = _table(["quantity", "value"], [
        ["step time", f"{step:.4g} s"],
        ["tokens/s per GPU", f"{result['tokens_per_s_per_gpu']:,.0f}"],
        ["model TFLOP/s per GPU", f"{result['model_tflops_per_gpu']:.1f}"],
        ["MFU", f"{result['mfu']:.1%}"],
        ["bottleneck", html.escape(f"{result['bottleneck']['resource']}: "
                                   f"{result['bottleneck']['why']}")]])
    parts = _table(["part", "seconds", "share"], [
        [k, f"{v:.4g}", f"{v / step:.1%}"] for k, v in result["breakdown_s"].items() if v > 0])
    memory = _table(["tier", "peak (GiB)", "capacity (GiB)"], [
        [tier, _gib(d["peak_bytes"]), _gib(d["capacity_bytes"])]
        for tier, d in result["memory"].items() if isinstance(d, dict)])
    warnings = "".join(f'<p class="bad">{html.escape(w)}</p>' for w in result["warnings"])
    figures = "".join(f"<figure>{_svg(svg)}</figure>" for svg in svgs.values())
    return page(f"ghsim run: {name}", "One simulated optimizer step.",
                [("Summary", headline + warnings), ("Where the time goes", parts + figures),
                 ("Memory per GPU", memory)])
