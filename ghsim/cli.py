"""The ``ghsim`` command line.

Exit status: 0 success; 2 bad input (one line on stderr naming the file, the key path and what
was expected), or a closed standard output; 1 an internal error, or standard output that fails
(a full disk, a reader that went away: one line, never a traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ghsim.errors import InputError, LimitError, printable
from ghsim.limits import MAX_CHAKRA_NPUS, MAX_GPUS, MAX_SEQ_LEN, MAX_WORKERS
from ghsim.names import SCHEMA_KINDS, TRACE_FORMATS
from ghsim.outputs import dumps_strict
from ghsim.version import __version__

if TYPE_CHECKING:
    from ghsim.config.api import Scenario
    from ghsim.config.serving_layout import ServingScenario
    from ghsim.engine.result import Result

# Each command imports what it needs when it runs (numpy, networkx, simpy, pydantic, rich and
# matplotlib cost most of a second), so `ghsim --help` and usage errors answer at once.


def _print_json(data: Any, source: str = "standard output") -> None:
    """Strict JSON (never NaN or Infinity) on standard output; a number that is not finite is
    an error at ``source`` (the file the data came from)."""
    sys.stdout.write(dumps_strict(data, source, indent=2, sort_keys=False, default=str) + "\n")


class StdoutError(Exception):
    """Standard output cannot be written (closed, full, or its reader went away)."""

    def __init__(self, reason: str, closed: bool) -> None:
        super().__init__(reason)
        self.closed = closed


_CLOSED = {errno.EBADF, errno.EINVAL}


class _Stdout:
    """``sys.stdout`` while a command runs: a failing write becomes :class:`StdoutError`, and
    text the stream cannot encode (a lone surrogate) is written escaped."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def _call(self, method: str, *args: Any) -> Any:
        if self.stream is None:
            raise StdoutError("is closed", closed=True)
        try:
            return getattr(self.stream, method)(*args)
        except UnicodeEncodeError:
            encoding = getattr(self.stream, "encoding", None) or "utf-8"
            text = args[0].encode(encoding, "backslashreplace").decode(encoding)
            return self._call(method, text)
        except ValueError:  # I/O operation on a closed file
            raise StdoutError("is closed", closed=True) from None
        except OSError as error:
            reason = error.strerror or str(error)
            if isinstance(error, BrokenPipeError):
                reason += " (the reader closed it)"
            raise StdoutError(f"cannot write: {reason}", error.errno in _CLOSED) from None

    def write(self, text: str) -> int:
        return int(self._call("write", text) or 0)

    def flush(self) -> None:
        self._call("flush")

    def isatty(self) -> bool:
        return self.stream is not None and bool(self._call("isatty"))

    def __getattr__(self, name: str) -> Any:
        if self.stream is None:
            raise AttributeError(name)
        return getattr(self.stream, name)


def _silence(stream: Any) -> None:
    """Point the failed stream's descriptor at /dev/null, so that the interpreter's last flush
    at exit does not fail again with a traceback."""
    with contextlib.suppress(Exception):
        descriptor = os.open(os.devnull, os.O_WRONLY)
        os.dup2(descriptor, stream.fileno())
        os.close(descriptor)


def _error(line: str) -> None:
    if sys.stderr is not None:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(f"ghsim: error: {line}\n")
            sys.stderr.flush()


def _positive_int(text: str, most: int, limit: str) -> int:
    """An argument that is a whole number from 1 to ``most`` (the limit named ``limit``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value > most:
        raise argparse.ArgumentTypeError(f"expected at most {most:,} (ghsim.limits.{limit}), "
                                         f"got {text[:40]!r}")
    return value


def _percent(text: str) -> float:
    """A percentage such as ``12`` or ``12.5%`` (as a fraction); at least 0."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 12 or 12.5%, got "
                                         f"{text[:40]!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite percentage of at least 0, got "
                                         f"{text[:40]!r}")
    return value / 100


def _gpus(text: str) -> int:
    return _positive_int(text, MAX_GPUS, "MAX_GPUS")


def _workers(text: str) -> int:
    return _positive_int(text, MAX_WORKERS, "MAX_WORKERS")


def _cores() -> int:
    """The cores this process may run on."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def _seq_len(text: str) -> int:
    return _positive_int(text, MAX_SEQ_LEN, "MAX_SEQ_LEN")


def cmd_inspect(args: argparse.Namespace) -> int:
    """Show a system, model, scenario, hardware part or validation file as resolved."""
    from rich.console import Console

    from ghsim.config import load_file, scenario_from_spec, serving_scenario_from_spec
    from ghsim.config.schema import ModelSpec, ScenarioSpec, ServingScenarioSpec, SystemSpec
    from ghsim.config.search import display, locate_any
    from ghsim.report import console as render
    from ghsim.report.views import (
        document_view,
        model_view,
        scenario_view,
        system_view,
        workload_view_of,
    )

    path = locate_any(args.file)
    spec = load_file(path or args.file, args.overrides)
    if isinstance(spec, ScenarioSpec):
        scenario = scenario_from_spec(spec, display(path) if path else args.file, args.overrides)
        view = scenario_view(scenario)
        if args.workload:
            view["workload"] = workload_view_of(scenario)
        if args.routes:
            from ghsim.report.routes import routes_view  # numpy and networkx: only here

            view["routes"] = routes_view(scenario)
    elif isinstance(spec, ServingScenarioSpec):
        from ghsim.report.serving import serving_view

        if args.workload or args.routes:
            raise InputError(args.file, "inference", "--workload and --routes show a training "
                             "step's work; a serving scenario has none")
        view = serving_view(serving_scenario_from_spec(
            spec, display(path) if path else args.file, args.overrides))
    elif isinstance(spec, SystemSpec):
        view = system_view(spec, args.gpus)
    elif isinstance(spec, ModelSpec):
        view = model_view(spec, args.seq_len)
    else:
        view = document_view(spec)
    if args.json:
        source = " ".join([args.file, *(f"--set {o}" for o in args.overrides)])
        _print_json(view, source)
        return 0
    console = Console()
    renderer: Callable[[dict[str, Any], Console], None] | None = {
        "system": render.render_system, "model": render.render_model,
        "scenario": render.render_scenario,
    }.get(view["kind"])
    if view.get("form") == "serving":
        from ghsim.report.serving import render_serving_view

        renderer = render_serving_view
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
    from ghsim.outputs import output_folder, write_text
    from ghsim.report import plots  # matplotlib: imported only when plots are written
    from ghsim.report.html import run_report
    from ghsim.report.trace import chrome_trace

    try:
        output_folder(directory)
        data = result.to_dict()
        write_text(directory / "result.json", dumps_strict(data, str(directory), indent=2) + "\n")
        if result.timeline is not None:
            trace = chrome_trace(result.timeline)
            write_text(directory / "trace.json", dumps_strict(trace, str(directory / "trace.json")))
        record = {"label": name, "breakdown_s": data["breakdown_s"]}
        svgs = plots.save({"breakdown": plots.breakdown([record])}, directory)
        write_text(directory / "report.html", run_report(name, data, svgs))
    except OSError as error:
        raise InputError(str(directory), "", f"cannot write outputs: {error.strerror}") from None


def cmd_run(args: argparse.Namespace) -> int:
    """Simulate one training step."""
    from rich.console import Console

    from ghsim.config import ServingScenario, load_any_scenario
    from ghsim.outputs import check_outputs, output_folder

    loaded = load_any_scenario(args.scenario, args.overrides)
    if isinstance(loaded, ServingScenario):
        return _run_serving(loaded, args)
    # the engine and the reports only once the scenario loaded: a refused one is answered
    # without their imports (numpy, simpy: about half a second)
    from ghsim.engine.result import does_not_fit_line
    from ghsim.engine.simulate import simulate
    from ghsim.report import console as render
    from ghsim.report.chakra import export_chakra, export_npus

    scenario = loaded
    if args.chakra_npus:
        _check_npu_export(args, scenario)
    directory = Path(args.output) if args.output is not None else None
    if directory is not None:  # checked before the simulation, so a mistake costs no time
        written = [directory / f for f in ("result.json", "trace.json", "report.html",
                                           "breakdown.png", "breakdown.svg")]
        check_outputs(written, [Path(scenario.source)])
        output_folder(directory, create=False)
    if args.chakra is not None:
        output_folder(Path(args.chakra), "--chakra", create=False)
    result = simulate(scenario)
    if directory is not None:
        _write_outputs(directory, result, scenario.name)
    if args.chakra is not None and result.timeline is not None:
        try:
            output_folder(Path(args.chakra), "--chakra")
            export = export_npus if args.chakra_npus else export_chakra
            export(result.timeline, Path(args.chakra))
        except OSError as error:
            raise InputError(args.chakra, "", f"cannot write: {error.strerror}") from None
    if args.json:
        _print_json(result.to_dict())
    else:
        render.render_result(result.to_dict(), scenario.name, Console())
    if (line := does_not_fit_line(result.memory)) is not None:  # exit 0: it is a prediction
        sys.stderr.write(f"ghsim: warning: {line}\n")
    return 0


def _check_npu_export(args: argparse.Namespace, scenario: Scenario) -> None:
    """``--chakra-npus``, refused before the simulation where it cannot be written."""
    if args.chakra is None:
        raise InputError("--chakra-npus", "", "names where to write: give --chakra DIR too")
    if scenario.spec.workload is not None:
        raise InputError("--chakra-npus", "", "writes a lowered step's NPUs; an imported "
                         "workload's ranks are written one file each by --chakra alone")
    if scenario.spec.num_gpus > MAX_CHAKRA_NPUS:
        raise LimitError("--chakra-npus", "", f"expected at most {MAX_CHAKRA_NPUS:,} NPUs "
                         f"(ghsim.limits.MAX_CHAKRA_NPUS), got {scenario.spec.num_gpus:,}")


def _run_serving(scenario: ServingScenario, args: argparse.Namespace) -> int:
    """``ghsim run`` on a serving scenario: result.json and trace.json with ``-o``."""
    from rich.console import Console

    from ghsim.outputs import check_outputs, output_folder, write_text
    from ghsim.report.serving import render_serving, serving_trace
    from ghsim.serving import simulate_serving

    if args.chakra is not None:
        raise InputError("--chakra", "", "exports a training step's execution trace; a serving "
                         "scenario has none")
    directory = Path(args.output) if args.output is not None else None
    if directory is not None:
        check_outputs([directory / "result.json", directory / "trace.json"],
                      [Path(scenario.source)])
        output_folder(directory, create=False)
    result = simulate_serving(scenario)
    data = result.to_dict()
    if directory is not None:
        try:
            output_folder(directory)
            write_text(directory / "result.json",
                       dumps_strict(data, str(directory), indent=2) + "\n")
            if result.run is not None:
                trace = serving_trace(result.run, scenario.spec.inference.timeline_iterations)
                write_text(directory / "trace.json",
                           dumps_strict(trace, str(directory / "trace.json")))
        except OSError as error:
            raise InputError(str(directory), "", f"cannot write outputs: "
                             f"{error.strerror}") from None
    if args.json:
        _print_json(data)
    else:
        render_serving(data, scenario.name, Console())
    if not data["memory"]["fits"]:
        sys.stderr.write(f"ghsim: warning: {data['warnings'][0]}\n")
    return 0


def _validation_report(points: str | Path, only: list[str] | None = None,
                       workers: int | None = None) -> dict[str, Any]:
    """``ghsim validate --json`` of one file (its points whose id matches a glob of ``only``,
    when given, simulated on ``workers`` processes, by default one a core available): every
    point's outcome, then the summary; a progress bar on standard error when it is a
    terminal."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from ghsim.config.search import find_named, is_path_like
    from ghsim.config.yamlio import read_mapping
    from ghsim.engine.validation import summarize, validate_file, validate_inference_file

    if not Path(points).is_file() and not is_path_like(str(points)):
        # a name: the shipped (or local) file of that stem in validation/, of either kind
        points = find_named("validation_points", str(points)) or points
    serving = Path(points).is_file() and read_mapping(Path(points)).get(
        "kind") == "inference_points"
    run = validate_inference_file if serving else validate_file
    console = Console(stderr=True)
    with Progress(BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=console,
                  disable=not console.is_terminal, transient=True) as progress:
        task = progress.add_task("validate", total=None)
        results = run(points, lambda done, total: progress.update(task, completed=done,
                                                                    total=total), only,
                      workers or _cores())
    return {"points": [asdict(o) for o in results], **summarize(results),
            "kind": "inference_points" if serving else "validation_points"}


def cmd_validate(args: argparse.Namespace) -> int:
    """Simulate every validation point and compare with the measurement; with ``--all``, every
    shipped set in the ``validation_points`` schema, the others skipped with one line each.
    Exit 1 when ``--max-mape`` is given and a set's MAPE exceeds it or one of its points failed
    or does not fit in memory."""
    from rich.console import Console

    from ghsim.config.search import display, find_path, shipped_files
    from ghsim.config.yamlio import read_mapping

    console = Console()
    reports: dict[str, dict[str, Any]] = {}
    if not args.all:
        points = find_path(args.points) or args.points
        report = _validation_report(points, args.only, args.workers)
        if args.only and not report["points"]:
            raise InputError(str(points), "", f"--only {' '.join(args.only)!r} matches no "
                             "point id")
        reports[str(args.points)] = report
        if args.json:
            _print_json(report)
        else:
            _render_validation(report, console)
        return _gate(reports, args.max_mape)
    for path in shipped_files("validation_points"):
        kind = read_mapping(path).get("kind")
        if kind not in ("validation_points", "inference_points"):
            sys.stderr.write(f"ghsim: validate --all: skipping {path.stem}: kind {kind!r} is "
                             "neither validation_points nor inference_points\n")
            continue
        report = _validation_report(path, args.only, args.workers)
        if args.only and not report["points"]:
            continue
        reports[path.stem] = report
        if not args.json:
            console.print(f"[bold]{path.stem}[/] ({display(path)})")
            _render_validation(report, console)
    if args.only and not reports:
        raise InputError("--only", "", f"{' '.join(args.only)!r} matches no point id of the "
                         "shipped sets")
    if args.json:
        _print_json(reports)
    return _gate(reports, args.max_mape)


def _gate(reports: dict[str, dict[str, Any]], max_mape: float | None) -> int:
    """``--max-mape``: 1, with a line on standard error for each set that misses it, when a
    set's MAPE exceeds ``max_mape`` or a point failed or does not fit; else 0."""
    if max_mape is None:
        return 0
    misses = []
    for name, report in reports.items():
        why = []
        if report["mape"] is None:
            why.append("no point was simulated")
        elif report["mape"] > max_mape:
            why.append(f"MAPE {report['mape']:.1%} exceeds {max_mape:.1%}")
        if report["failed"]:
            why.append(f"{report['failed']} point(s) failed")
        if report["not_fitting"]:
            why.append(f"{report['not_fitting']} point(s) do not fit in memory")
        if why:
            misses.append(f"ghsim: validate {name}: {'; '.join(why)} (--max-mape)\n")
    for line in misses:
        sys.stderr.write(line)
    return 1 if misses else 0


def _render_validation(report: dict[str, Any], console: Any) -> None:
    from ghsim.report import console as render

    if report["kind"] == "inference_points":
        from ghsim.report.serving import render_serving_validation

        render_serving_validation(report["points"], report, console)
    else:
        render.render_validation(report["points"], report, console)


def cmd_sweep(args: argparse.Namespace) -> int:
    """Run a what-if study and rank its points."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from ghsim.config.sweep import load_sweep
    from ghsim.outputs import check_outputs, directory_lock
    from ghsim.report import console as render
    from ghsim.sweep.runner import run_sweep

    sweep = load_sweep(args.sweep)
    # matplotlib (its plots) is imported only by the commands that write them
    from ghsim.sweep.outputs import as_json, summary_line, write_outputs

    output = Path(args.output) if args.output else None
    cache = output / "cache" if output else None
    console = Console(stderr=True)
    with contextlib.ExitStack() as stack:
        if output is not None:
            check_outputs([output / "results.json", output / "results.csv",
                           output / "report.html"], [Path(sweep.path)])
            stack.enter_context(directory_lock(output))
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                      MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                      console=console, disable=args.json or not console.is_terminal) as progress:
            task = progress.add_task(render.terminal_safe(sweep.spec.name),
                                     total=sweep.count())
            outcome = run_sweep(sweep, args.workers, args.scheduler, cache,
                                on_result=lambda _r, _n: progress.advance(task))
        if output is not None:
            try:
                write_outputs(outcome, output)
            except OSError as error:
                raise InputError(str(output), "",
                                 f"cannot write outputs: {error.strerror}") from None
    if args.json:
        _print_json(as_json(outcome), sweep.source)
    else:
        render.render_sweep(outcome.ranked(), summary_line(outcome), sweep.rank_by,
                            Console())
    return 130 if outcome.interrupted else 0


def cmd_import(args: argparse.Namespace) -> int:
    """Turn trace files into a workload file."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from ghsim.importers.cli_import import import_traces
    from ghsim.importers.cli_import import summary as import_summary

    progress_console = Console(stderr=True)
    with Progress(BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=progress_console, disable=not progress_console.is_terminal,
                  transient=True) as progress:
        task = progress.add_task("import", total=None)
        ranks = import_traces(
            args.traces, Path(args.output), args.format,
            lambda done, total: progress.update(task, completed=done, total=total))
    info = import_summary(ranks)
    if args.json:
        _print_json(info)
    else:
        Console().print_json(data=info)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    """Print the JSON Schema of one kind of file, or of all of them; offload strategies are
    listed as the policies registered now, so editors offer every one, new ones included."""
    from ghsim.config.schema_export import json_schema as plain_schema
    from ghsim.workload.offload import POLICIES

    def json_schema(kind: str) -> dict[str, Any]:
        schema = plain_schema(kind)
        offload = schema.get("$defs", {}).get("OffloadSpec", {}).get("properties", {})
        if "strategy" in offload:
            offload["strategy"]["enum"] = sorted(POLICIES)
        return schema

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


class _Parser(argparse.ArgumentParser):
    """A command-line mistake is one line on stderr and exit status 2, like every other input
    error: the message, then the usage on the same line."""

    def error(self, message: str) -> NoReturn:
        usage = " ".join(self.format_usage().split())
        _error(printable(f"{message} ({usage}; see {self.prog} --help)"))
        self.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
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
    inspect.add_argument("--gpus", type=_gpus, default=None,
                         help="system only: size the totals for this many GPUs")
    inspect.add_argument("--seq-len", type=_seq_len, default=2048,
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
                     help="also write the simulated step as Chakra .et files, one per rank "
                     "class")
    run.add_argument("--chakra-npus", action="store_true",
                     help="with --chakra: one file per NPU as ASTRA-sim reads them "
                     "(DIR/workload.N.et, DIR/comm_groups.json), with each collective's group "
                     "(tensor-parallel ones as nodes of their own) and each pipeline "
                     "transfer's peer")
    _add_common(run)
    run.set_defaults(handler=cmd_run)

    sweep = commands.add_parser(
        "sweep", help="run a what-if study: a grid or list of overrides on a base scenario",
        description="Run every point of a sweep file in parallel (local processes, or a Dask "
        "cluster with --scheduler), rank them, and with -o write results.csv, results.json, "
        "plots and report.html. Results are cached under -o DIR, keyed by the content of "
        "every input file and the ghsim version.",
    )
    sweep.add_argument("sweep", metavar="SWEEP", help="a sweep file, or a shipped sweep's name")
    sweep.add_argument("--workers", type=_workers, default=None,
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
        "against measured step time (or, for inference points, output tokens/s), the error of "
        "each and the mean absolute percentage error. Shipped sets: calibration (30 published "
        "training runs on DGX A100 and H100), gh200 (12 on GH200 systems), moe (9 "
        "Mixture-of-Experts runs on DGX H100), inference (34 serving measurements on GH200, "
        "H100 and H200); --all runs every one.",
    )
    which = validate.add_mutually_exclusive_group(required=True)
    which.add_argument("points", metavar="POINTS", nargs="?",
                       help="a validation_points file: a path, or a shipped set's name "
                       "(calibration, gh200, moe, inference)")
    which.add_argument("--all", action="store_true",
                       help="every shipped set in the validation_points schema")
    validate.add_argument("--json", action="store_true",
                          help="print one JSON object (with --all: one per set, by name)")
    validate.add_argument("--max-mape", metavar="PERCENT", type=_percent, default=None,
                          help="exit 1 when a set's MAPE exceeds PERCENT (e.g. 12 or 12.5%%), "
                          "or one of its points failed or does not fit in memory")
    validate.add_argument("--only", metavar="GLOB", action="append", default=None,
                          help="only the points whose id matches GLOB (repeatable), e.g. "
                          "'mlperf41_*'")
    validate.add_argument("--workers", type=_workers, default=None,
                          help="local worker processes simulating the points (default: the "
                          "cores available)")
    validate.set_defaults(handler=cmd_validate)

    trace = commands.add_parser(
        "import", help="turn profiler traces into a workload file a scenario can replay",
        description="Import PyTorch profiler (Kineto) traces, one file per rank or folders of "
        "them, into a workload file; a scenario with `workload: FILE` replays it as measured "
        "or re-costed on its hardware (`replay: recost`).",
    )
    trace.add_argument("traces", nargs="+", metavar="TRACE")
    trace.add_argument("--format", choices=TRACE_FORMATS, default="auto")
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
    stdout = sys.stdout
    sys.stdout = _Stdout(stdout)
    try:
        status = handler(args)
        sys.stdout.flush()
        return status
    except InputError as error:
        _error(error.line())
        return 2
    except StdoutError as error:
        _silence(stdout)
        _error(f"standard output: {error}")
        return 2 if error.closed else 1
    except MemoryError:
        _error("out of memory: this input needs more memory than the process may use (the "
               "limits of ghsim.limits bound what it reads and simulates)")
        return 1
    except KeyboardInterrupt:
        if sys.stderr is not None:
            sys.stderr.write("ghsim: interrupted\n")
        return 130
    finally:
        sys.stdout = stdout
        if stdout is not None:
            try:
                stdout.flush()
            except (OSError, ValueError):
                _silence(stdout)


if __name__ == "__main__":
    sys.exit(main())
