"""``ghsim import``: trace files (one per rank, or folders of them) into a workload file."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ghsim.errors import InputError
from ghsim.files import check_regular
from ghsim.importers.chakra import chakra_rank, feeder_rank
from ghsim.importers.join import join_execution_trace
from ghsim.importers.kineto import TraceRank, read_kineto
from ghsim.importers.nsys import read_nsys
from ghsim.importers.pytorch_et import is_execution_trace, read_pytorch_et
from ghsim.importers.workload_file import write_workload
from ghsim.outputs import check_outputs, output_folder

READERS: dict[str, Callable[[Path, int], TraceRank]] = {
    "kineto": read_kineto,
    "pytorch-et": read_pytorch_et,
    "chakra": chakra_rank,
    "chakra-json": feeder_rank,
    "nsys": read_nsys,
}
"""One reader per format: a path and the rank it stands for in, a replayable rank out."""
FORMATS = ("auto", *READERS)
_SUFFIXES = (".json", ".json.gz", ".et", ".et.gz", ".sqlite", ".db")


def trace_files(arguments: list[str]) -> list[Path]:
    """The files named, with folders expanded to the JSON traces inside them."""
    files: list[Path] = []
    for argument in arguments:
        path = Path(argument)
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.name.endswith(_SUFFIXES))
            if not inside:
                raise InputError(argument, "", "the folder holds no trace files (.json, "
                                 ".json.gz, .et, .sqlite)")
            files += inside
        elif path.exists():
            files.append(path)
        else:
            raise InputError(argument, "", "no such trace file")
    for path in files:  # before anything is opened: a FIFO would block, /dev/zero never end
        check_regular(path, str(path), "a trace file")
    return files


def detect(path: Path) -> str:
    """The format of a trace file, from its name and, for JSON, its top-level keys."""
    name = path.name
    if name.endswith(".et") or name.endswith(".et.gz"):
        return "chakra"
    if name.endswith((".sqlite", ".db")):
        return "nsys"
    if name.endswith(".json") and _has_key(path, "workload_graph"):
        return "chakra-json"
    return "pytorch-et" if is_execution_trace(path) else "kineto"


def _has_key(path: Path, key: str) -> bool:
    try:
        with path.open("rb") as handle:
            return key.encode() in handle.read(4096)
    except OSError:
        return False


def import_traces(arguments: list[str], output: Path, fmt: str = "auto",
                  on_file: Callable[[int, int], None] | None = None) -> list[TraceRank]:
    """Read every trace (one rank each) and write the workload file. Given both profiler traces
    and execution traces (automatic detection), the i-th execution trace is joined with the
    i-th profiler trace: it fills in the shapes the profile lacks. ``on_file(done, total)``
    follows the progress."""
    files = trace_files(arguments)
    check_outputs([output], files)  # before any trace is read
    output_folder(output.parent, "-o", create=False)
    kinds = [detect(path) if fmt == "auto" else fmt for path in files]
    profiles = [p for p, k in zip(files, kinds, strict=True) if k == "kineto"]
    executions = [p for p, k in zip(files, kinds, strict=True) if k == "pytorch-et"]
    joined = fmt == "auto" and profiles and len(profiles) == len(executions)
    ranks: list[TraceRank] = []
    profiled: list[TraceRank] = []
    for index, (path, kind) in enumerate(zip(files, kinds, strict=True)):
        if joined and kind == "pytorch-et":
            continue
        ranks.append(READERS[kind](path, len(ranks) if joined else index))
        if kind == "kineto":
            profiled.append(ranks[-1])
        if on_file is not None:
            on_file(index + 1, len(files))
    if joined:  # only the profiler traces take shapes from the execution traces
        for rank, execution in zip(profiled, executions, strict=True):
            join_execution_trace(rank, execution)
    seen = Counter(r.rank for r in ranks)
    if any(count > 1 for count in seen.values()):
        ranks = [TraceRank(r.source, i, r.device, r.events, r.iteration, r.iterations,
                           r.orphans, r.bytes_read) for i, r in enumerate(ranks)]
    output_folder(output.parent, "-o")
    try:
        write_workload(output, output.name.split(".")[0], ranks)
    except OSError as error:
        raise InputError(str(output), "", f"cannot write: {error.strerror}") from None
    return ranks


def summary(ranks: list[TraceRank]) -> dict[str, Any]:
    """What was imported: ranks, iterations, kernels by class, collectives, orphans."""
    classes: Counter[str] = Counter()
    collectives: Counter[str] = Counter()
    collective_bytes: dict[str, float] = {}
    orphans: Counter[str] = Counter()
    for rank in ranks:
        classes.update(e.klass for e in rank.events)
        for event in rank.events:
            if event.collective:
                collectives[event.collective] += 1
                collective_bytes[event.collective] = (
                    collective_bytes.get(event.collective, 0.0) + event.bytes)
        orphans.update(rank.orphans)
    return {
        "ranks": len(ranks),
        "devices": sorted({r.device for r in ranks}),
        "iterations": {r.rank: r.iteration[0] if r.iteration else None for r in ranks},
        "measured_iteration_ms": {r.rank: (r.iteration[2] - r.iteration[1]) / 1e3
                                  if r.iteration else None for r in ranks},
        "events_by_class": dict(classes),
        "collectives": dict(collectives),
        "collective_bytes": dict(collective_bytes),
        "unlinked": dict(orphans),
        "bytes_read": sum(r.bytes_read for r in ranks),
    }
