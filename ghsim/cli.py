"""The ``ghsim`` command line.

Exit status: 0 success; 2 bad input (one line on stderr naming the file, the key path and what
was expected); 1 an internal error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ghsim.config import load_file, load_scenario, scenario_from_spec
from ghsim.config.schema import ModelSpec, ScenarioSpec, SystemSpec
from ghsim.config.schema_export import SCHEMA_KINDS, json_schema
from ghsim.config.search import display, locate_any
from ghsim.config.sweep import load_sweep
from ghsim.engine.result import Result
from ghsim.engine.simulate import simulate
from ghsim.engine.validation import summarize, validate_file
from ghsim.errors import InputError
from ghsim.importers.cli_import import FORMATS, import_traces
from ghsim.importers.cli_import import summary as import_summary
from ghsim.importers.export import export_chakra
from ghsim.outputs import directory_lock, refuse_inputs, write_text
from ghsim.report import console as render
from ghsim.report import plots
from ghsim.report.html import run_report
from ghsim.report.plots import save
from ghsim.report.routes import routes_view
from ghsim.report.trace import chrome_trace
from ghsim.report.views import (
    document_view,
    model_view,
    scenario_view,
    system_view,
    workload_view_of,
)
from ghsim.sweep.outputs import as_json, summary_line, write_outputs
from ghsim.sweep.runner import run_sweep
from ghsim.version import __version__


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def cmd_inspect(args: argparse.Namespace) -> int:
    """Show a system, model, scenario, hardware part or validation file as resolved."""
    path = locate_any(args.file)
    spec = load_file(path or args.file, args.overrides)
    if isinstance(spec, ScenarioSpec):
        scenario = scenario_from_spec(spec, display(path) if path else args.file, args.overrides)
        view = scenario_view(scenario)
        if args.workload:
            view["workload"] = workload_view_of(scenario)
        if args.routes:
            view["routes"] = routes_view(scenario)
    elif isinstance(spec, SystemSpec):
        view = system_view(spec, args.gpus)
    elif isinstance(spec, ModelSpec):
        view = model_view(spec, args.seq_len)
    else:
        view = document_view(spec)
    if args.json:
        _print_json(view)
        return 0
    console = Console()
    renderer: Callable[[dict[str, Any], Console], None] | None = {
        "system": render.render_system, "model": render.render_model,
        "scenario": render.render_scenario,
    }.get(view["kind"])
    if renderer is None:
        console.print_json(data=view)
    else:
        renderer(view, console)
    if "workload" in view:
        render.render_workload(view["workload"], console)
    if "routes" in view:
        render.render_routes(view["routes"], console)
    return 0


def _write_outputs(directory: Path, result: Result, name: str) -> None:
    """``-o DIR``: result.json, trace.json, breakdown plot, report.html."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        data = result.to_dict()
        write_text(directory / "result.json", json.dumps(data, indent=2) + "\n")
        if result.timeline is not None:
            trace = chrome_trace(result.timeline)
            write_text(directory / "trace.json", json.dumps(trace))
        record = {"label": name, "breakdown_s": data["breakdown_s"]}
        svgs = save({"breakdown": plots.breakdown([record])}, directory)
        write_text(directory / "report.html", run_report(name, data, svgs))
    except OSError as error:
        raise InputError(str(directory), "", f"cannot write outputs: {error.strerror}") from None


def cmd_run(args: argparse.Namespace) -> int:
    """Simulate one training step."""
    scenario = load_scenario(args.scenario, args.overrides)
    result = simulate(scenario)
    if args.output is not None:
        directory = Path(args.output)
        written = [directory / f for f in ("result.json", "trace.json", "report.html",
                                           "breakdown.png", "breakdown.svg")]
        refuse_inputs(written, [Path(scenario.source)])
        _write_outputs(directory, result, scenario.name)
    if args.chakra is not None and result.timeline is not None:
        try:
            export_chakra(result.timeline, Path(args.chakra))
        except OSError as error:
            raise InputError(args.chakra, "", f"cannot write: {error.strerror}") from None
    if args.json:
        _print_json(result.to_dict())
    else:
        render.render_result(result.to_dict(), scenario.name, Console())
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """Simulate every validation point and compare with the measurement."""
    results = validate_file(args.points)
    summary = summarize(results)
    outcomes = [asdict(o) for o in results]
    if args.json:
        _print_json({"points": outcomes, **summary})
    else:
        render.render_validation(outcomes, summary, Console())
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run a what-if study and rank its points."""
    sweep = load_sweep(args.sweep)
    output = Path(args.output) if args.output else None
    cache = output / "cache" if output else None
    console = Console(stderr=True)
    with contextlib.ExitStack() as stack:
        if output is not None:
            refuse_inputs([output / "results.json", output / "results.csv",
                           output / "report.html"], [Path(sweep.path)])
            stack.enter_context(directory_lock(output))
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                      MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                      console=console, disable=args.json or not console.is_terminal) as progress:
            task = progress.add_task(sweep.spec.name, total=len(sweep.points()))
            outcome = run_sweep(sweep, args.workers, args.scheduler, cache,
                                on_result=lambda _r, _n: progress.advance(task))
        if output is not None:
            try:
                write_outputs(outcome, output)
            except OSError as error:
                raise InputError(str(output), "",
                                 f"cannot write outputs: {error.strerror}") from None
    if args.json:
        _print_json(as_json(outcome))
    else:
        render.render_sweep(outcome.ranked(), summary_line(outcome), sweep.spec.rank_by,
                            Console())
    return 130 if outcome.interrupted else 0


def cmd_import(args: argparse.Namespace) -> int:
    """Turn trace files into a workload file."""
    ranks = import_traces(args.traces, Path(args.output), args.format)
    info = import_summary(ranks)
    if args.json:
        _print_json(info)
    else:
        Console().print_json(data=info)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema of one kind of file, or of all of them."""
    if args.kind is None:
        _print_json({kind: json_schema(kind) for kind in SCHEMA_KINDS})
    else:
        _print_json(json_schema(args.kind))
    return 0


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
        help="override a value of the file (or of a file it names); repeatable",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ghsim",
        description="Performance simulator for large-model training on Grace Hopper systems.",
    )
    parser.add_argument("--version", action="version", version=f"ghsim {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    inspect = commands.add_parser(
        "inspect", help="show a system, model or scenario as resolved",
        description="Show a system, model, scenario or hardware file as resolved: components, "
        "links, capacities, parameter counts, FLOPs and the parallel layout.",
    )
    inspect.add_argument("file", metavar="FILE", help="a path, or the name of a shipped file")
    inspect.add_argument("--json", action="store_true", help="print one JSON object")
    inspect.add_argument("--workload", action="store_true",
                         help="scenario only: lower it and show every rank class's work")
    inspect.add_argument("--routes", action="store_true",
                         help="scenario: each group's collective laid on the system graph (links, "
                         "copies of the flow on each, efficiency, rate alone)")
    inspect.add_argument("--gpus", type=_positive_int, default=None,
                         help="system only: size the totals for this many GPUs")
    inspect.add_argument("--seq-len", type=_positive_int, default=2048,
                         help="model only: sequence length for FLOPs per token (default 2048)")
    _add_common(inspect)
    inspect.set_defaults(handler=cmd_inspect)

    run = commands.add_parser(
        "run", help="simulate one training step of a scenario",
        description="Simulate one optimizer step: step time, where the time goes, the "
        "bottleneck, memory per tier.",
    )
    run.add_argument("scenario", metavar="SCENARIO", help="a path, or a shipped scenario's name")
    run.add_argument("--json", action="store_true", help="print the Result as one JSON object")
    run.add_argument("-o", "--output", metavar="DIR",
                     help="write result.json, trace.json, plots and report.html")
    run.add_argument("--chakra", metavar="DIR", default=None,
                     help="also write the simulated step as Chakra .et files (one per rank "
                     "class) for ASTRA-sim")
    _add_common(run)
    run.set_defaults(handler=cmd_run)

    sweep = commands.add_parser(
        "sweep", help="run a what-if study: a grid or list of overrides on a base scenario",
        description="Run every point of a sweep file in parallel (local processes, or a Dask "
        "cluster with --scheduler), rank them, and with -o write results.csv, results.json, "
        "plots and report.html. Results are cached by scenario hash under -o DIR.",
    )
    sweep.add_argument("sweep", metavar="SWEEP", help="a sweep file, or a shipped sweep's name")
    sweep.add_argument("--workers", type=_positive_int, default=None,
                       help="local worker processes (default: the cores available)")
    sweep.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="run on the Dask cluster at ADDRESS, e.g. tcp://host:8786")
    sweep.add_argument("--json", action="store_true", help="print one JSON object")
    sweep.add_argument("-o", "--output", metavar="DIR",
                       help="write results.csv, results.json, plots and report.html")
    sweep.set_defaults(handler=cmd_sweep)

    validate = commands.add_parser(
        "validate", help="simulate published measurements and compare",
        description="Simulate every point of a validation_points file and print predicted "
        "against measured step time, the error of each and the mean absolute percentage error.",
    )
    validate.add_argument("points", metavar="POINTS", help="a validation_points YAML file")
    validate.add_argument("--json", action="store_true", help="print one JSON object")
    validate.set_defaults(handler=cmd_validate)

    trace = commands.add_parser(
        "import", help="turn profiler traces into a workload file a scenario can replay",
        description="Import PyTorch profiler (Kineto) traces, one file per rank or folders of "
        "them, into a workload file; a scenario with `workload: FILE` replays it as measured "
        "or re-costed on its hardware (`replay: recost`).",
    )
    trace.add_argument("traces", nargs="+", metavar="TRACE")
    trace.add_argument("--format", choices=FORMATS, default="auto")
    trace.add_argument("-o", "--output", metavar="WORKLOAD", required=True,
                       help="the workload file to write (YAML)")
    trace.add_argument("--json", action="store_true", help="print the summary as JSON")
    trace.set_defaults(handler=cmd_import)

    schema = commands.add_parser(
        "schema", help="print the JSON Schema of the YAML files",
        description="Print the JSON Schema of one kind of YAML file (or all), for editors.",
    )
    schema.add_argument("kind", nargs="?", choices=SCHEMA_KINDS, metavar="KIND",
                        help=f"one of {', '.join(SCHEMA_KINDS)}")
    schema.set_defaults(handler=cmd_schema)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ghsim`` console script."""
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except InputError as error:
        sys.stderr.write(f"ghsim: error: {error.line()}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("ghsim: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
