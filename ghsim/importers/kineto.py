"""PyTorch profiler (Kineto) Chrome-trace JSON, read as a stream.

Events are parsed one at a time (ijson's C backend), and only what a replay needs is kept: GPU
kernels, copies and sets with their stream, times and correlation id; the runtime calls that
launched them; CPU operators (name, thread, time span, input shapes) to find each kernel's
launching operator by time nesting on its thread; ``ProfilerStep#N`` iterations. Both
timestamp bases (absolute, or relative to ``baseTimeNanoseconds``) and the legacy category
names of 2021-22 traces are accepted. Events that cannot be linked (an unknown correlation id)
are counted, not fatal; an event whose fields have the wrong type or range (a duration that is
negative, NaN or beyond a day) is refused, naming its index and field.
"""

from __future__ import annotations

import bisect
import gzip
import sys
import zlib
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import ijson

from ghsim.errors import InputError
from ghsim.files import open_trace
from ghsim.importers.checks import Fields, TraceError, check_count
from ghsim.importers.classify import collective_kind, gemm_flops, kernel_class, message_bytes
from ghsim.limits import MAX_GPUS, MAX_TRACE_EVENTS

__all__ = ["GpuEvent", "TraceError", "TraceRank", "json_items", "read_kineto"]

_CATEGORIES = {"Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset",
               "Runtime": "cuda_runtime", "Operator": "cpu_op", "Driver": "cuda_driver"}


_SHAPED = frozenset({"aten::mm", "aten::matmul", "aten::addmm", "aten::bmm", "aten::baddbmm",
                     "aten::linear"})
_KEEP_ARGS = ("Input Dims", "In msg nelems", "dtype", "Group size", "Collective name")
_NO_ARGS: dict[str, Any] = {}
_KERNEL_ARGS = ("stream", "correlation", "correlation id", "bytes", "In msg nelems", "dtype",
                "Group size", "Collective name")
_KEPT = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "cpu_op",
                   "cuda_sync"})
"""Categories of events a replay reads (and so checks); the others are skipped unread."""


@dataclass
class GpuEvent:
    """One kernel, copy or set on a GPU stream, linked to what launched it."""

    name: str
    kind: str
    """``kernel``, ``memcpy`` or ``memset``."""
    stream: int
    start_us: float
    dur_us: float
    klass: str
    launch_us: float | None = None
    op_name: str | None = None
    flops: float = 0.0
    shape: tuple[int, int, int] | None = None
    bytes: float = 0.0
    collective: str | None = None
    after: list[int] = field(default_factory=list)
    """Indices of events on other streams this one waits for (cudaStreamWaitEvent)."""
    op_start: float | None = None
    """Start of the launching operator (tells its launches apart from another call's)."""


@dataclass
class TraceRank:
    """One rank's trace, reduced to what a replay needs."""

    source: str
    rank: int
    device: str
    events: list[GpuEvent]
    iteration: tuple[str, float, float] | None
    """The chosen ``ProfilerStep#N``: name, start and end (microseconds)."""
    iterations: int
    orphans: Counter[str] = field(default_factory=Counter)
    bytes_read: int = 0


def _open(path: Path) -> IO[bytes]:
    """A regular trace file, inflated if gzip, both sizes capped (:func:`open_trace`)."""
    try:
        return open_trace(path)
    except TraceError:
        raise
    except InputError as error:
        raise TraceError(error.source, error.key_path, error.message) from None


def json_items(path: Path, prefix: str) -> Iterator[Any]:
    """Stream the JSON values at ``prefix`` of a (possibly gzipped) file; bad data is a
    :class:`TraceError`."""
    with _open(path) as handle:
        if path.stat().st_size == 0:
            raise TraceError(str(path), "", "empty file: expected a PyTorch profiler trace")
        try:
            yield from ijson.items(handle, prefix, use_float=True)
        except ijson.common.IncompleteJSONError as error:
            detail = str(error).splitlines()[0] if str(error) else "incomplete"
            raise TraceError(str(path), "", f"truncated or malformed JSON ({detail})") from None
        except (gzip.BadGzipFile, EOFError, zlib.error, OSError) as error:
            raise TraceError(str(path), "", f"corrupted gzip data ({error})") from None
        except ijson.common.JSONError as error:
            raise TraceError(str(path), "", f"malformed JSON ({error})") from None
        except (RecursionError, MemoryError):
            raise TraceError(str(path), "", "the JSON is nested too deeply to read") from None


class _ThreadOps:
    """The CPU operators of one thread, in flat arrays (a trace holds hundreds of thousands)."""

    def __init__(self) -> None:
        self.starts = array("d")
        self.ends = array("d")
        self.names: list[str] = []
        self.args: dict[int, dict[str, Any]] = {}

    def add(self, start: float, end: float, name: str, args: dict[str, Any]) -> None:
        if args:
            self.args[len(self.names)] = args
        self.starts.append(start)
        self.ends.append(end)
        self.names.append(name)

    def sort(self) -> None:
        order = sorted(range(len(self.names)), key=self.starts.__getitem__)
        self.starts = array("d", (self.starts[i] for i in order))
        self.ends = array("d", (self.ends[i] for i in order))
        self.names = [self.names[i] for i in order]
        where = {old: new for new, old in enumerate(order) if old in self.args}
        self.args = {where[old]: value for old, value in self.args.items()}

    def enclosing(self, moment: float) -> list[tuple[str, dict[str, Any], float]]:
        """Operators containing ``moment``, innermost first: (name, kept args, start)."""
        index = bisect.bisect_right(self.starts, moment)
        return [(self.names[i], self.args.get(i, _NO_ARGS), self.starts[i])
                for i in range(index - 1, max(-1, index - 65), -1)
                if self.starts[i] <= moment <= self.ends[i]]


class _Launches:
    """Runtime calls by correlation id, in flat arrays: id, time and thread of each."""

    def __init__(self) -> None:
        self.ids = array("q")
        self.times = array("d")
        self.threads = array("l")
        self.thread_keys: dict[tuple[Any, Any], int] = {}
        self.keys: list[tuple[Any, Any]] = []

    def add(self, correlation: int, time: float, thread: tuple[Any, Any]) -> None:
        if thread not in self.thread_keys:
            self.thread_keys[thread] = len(self.keys)
            self.keys.append(thread)
        self.ids.append(correlation)
        self.times.append(time)
        self.threads.append(self.thread_keys[thread])

    def sort(self) -> None:
        order = sorted(range(len(self.ids)), key=self.ids.__getitem__)
        self.ids = array("q", (self.ids[i] for i in order))
        self.times = array("d", (self.times[i] for i in order))
        self.threads = array("l", (self.threads[i] for i in order))

    def get(self, correlation: int) -> tuple[float, Any, Any] | None:
        index = bisect.bisect_left(self.ids, correlation)
        if index == len(self.ids) or self.ids[index] != correlation:
            return None
        pid, tid = self.keys[self.threads[index]]
        return self.times[index], pid, tid


@dataclass
class _Collected:
    gpu: list[dict[str, Any]] = field(default_factory=list)
    runtime: _Launches = field(default_factory=_Launches)
    ops: dict[tuple[Any, Any], _ThreadOps] = field(default_factory=dict)
    steps: list[tuple[str, float, float]] = field(default_factory=list)
    waits: list[tuple[int, int, int, int]] = field(default_factory=list)
    """Stream waits: waiting stream, recording stream, record and wait correlation ids."""
    events: int = 0


def _kernel_args(fields: Fields, args: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a GPU event that a replay reads, checked."""
    kept: dict[str, Any] = {}
    for key in _KERNEL_ARGS:
        if key not in args or args[key] is None:
            continue
        value = args[key]
        if key == "stream":
            value = fields.integer(value, "args.stream", -(2**31), 2**63 - 1)
        elif key in ("correlation", "correlation id"):
            value = fields.integer(value, f"args.{key}", -1)
        elif key in ("bytes", "In msg nelems"):
            value = fields.number(value, f"args.{key}")
        elif key == "Group size":
            value = fields.integer(value, "args.Group size")
        else:
            value = fields.text(value, f"args.{key}")
        kept[key] = value
    return kept


def _collect(path: Path) -> _Collected:
    """Every event of the trace that a replay needs, each checked where it is read."""
    seen = _Collected()
    source = str(path)
    kept = 0
    for index, event in enumerate(json_items(path, "traceEvents.item")):
        seen.events += 1
        fields = Fields(source, f"traceEvents[{index}]")
        if not isinstance(event, dict):
            raise fields.fail("", "an event object", event)
        if event.get("ph") != "X":
            continue
        raw_category = fields.text(event.get("cat"), "cat")
        category = _CATEGORIES.get(raw_category, raw_category)
        if category not in _KEPT and category != "user_annotation":
            continue
        args = fields.mapping(event.get("args"), "args")
        if "ts" not in event:
            raise fields.fail("ts", "a start time in microseconds", None)
        start = fields.timestamp(event["ts"], "ts")
        dur = fields.duration(event.get("dur", 0.0), "dur")
        name = fields.text(event.get("name"), "name")
        kept += 1
        if kept > MAX_TRACE_EVENTS:
            check_count(kept, source, "events a replay keeps")
        if category in ("kernel", "gpu_memcpy", "gpu_memset"):
            kernel_args = _kernel_args(fields, args)
            tid = fields.key(event.get("tid"), "tid")
            stream = kernel_args.get("stream", tid if isinstance(tid, int) else 0)
            seen.gpu.append({"name": sys.intern(name), "cat": category, "stream": stream,
                             "ts": start, "dur": dur, "args": kernel_args})
        elif category in ("cuda_runtime", "cuda_driver"):
            correlation = args.get("correlation")
            if correlation is not None:
                thread = (fields.key(event.get("pid"), "pid"), fields.key(event.get("tid"), "tid"))
                seen.runtime.add(fields.integer(correlation, "args.correlation", -1), start,
                                 thread)
        elif category == "cpu_op":
            keep = name in _SHAPED or "comms" in name or "nccl" in name
            thread = (fields.key(event.get("pid"), "pid"), fields.key(event.get("tid"), "tid"))
            if thread not in seen.ops:
                seen.ops[thread] = _ThreadOps()
            seen.ops[thread].add(start, start + dur, sys.intern(name),
                                 {k: args[k] for k in _KEEP_ARGS if k in args} if keep
                                 else _NO_ARGS)
        elif category == "cuda_sync" and args.get("cuda_sync_kind") == "Stream Wait Event":
            record = args.get("wait_on_cuda_event_record_corr_id")
            if record is not None and "stream" in args and "wait_on_stream" in args:
                low = -(2**31)
                seen.waits.append((
                    fields.integer(args["stream"], "args.stream", low),
                    fields.integer(args["wait_on_stream"], "args.wait_on_stream", low),
                    fields.integer(record, "args.wait_on_cuda_event_record_corr_id", -1),
                    fields.integer(args.get("correlation", -1), "args.correlation", -1)))
        elif category == "user_annotation" and name.startswith("ProfilerStep#"):
            seen.steps.append((name, start, start + dur))
    if seen.events == 0:
        raise TraceError(str(path), "traceEvents",
                         "expected a PyTorch profiler trace: a JSON object with traceEvents")
    return seen


def _link(event: dict[str, Any], seen: _Collected, orphans: Counter[str]) -> GpuEvent:
    args = event["args"]
    kind = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}[event["cat"]]
    klass = kernel_class(event["name"]) if kind == "kernel" else kind
    gpu = GpuEvent(event["name"], kind, event["stream"], event["ts"], event["dur"], klass,
                   bytes=float(args.get("bytes", 0.0)))
    correlation = args.get("correlation", args.get("correlation id"))
    launch = seen.runtime.get(correlation) if correlation is not None else None
    if launch is None:
        orphans["gpu event without its launching runtime call"] += 1
        return gpu
    gpu.launch_us = launch[0]
    thread = seen.ops.get((launch[1], launch[2]))
    stack = thread.enclosing(launch[0]) if thread is not None else []
    if not stack:
        orphans["runtime call outside any CPU operator"] += 1
        return gpu
    gpu.op_name, gpu.op_start = stack[0][0], stack[0][2]
    if klass == "gemm":
        for op_name, op_args, _ in stack:
            counted = gemm_flops(op_name, op_args.get("Input Dims") or [])
            if counted is not None:
                gpu.flops, gpu.shape = counted
                break
    if klass == "collective":
        gpu.collective = collective_kind(event["name"])
        sources = [args] + [a for n, a, _ in stack if "comms" in n or "nccl" in n]
        for source in sources:
            size = message_bytes(source)
            if size is not None:
                gpu.bytes = size
                break
    return gpu


def _metadata(path: Path) -> tuple[str, int | None]:
    """Device name and rank from the keys Kineto writes before ``traceEvents`` (read up to
    there only; the events are read once, by :func:`_collect`)."""
    found: dict[str, Any] = {}
    builder: ijson.ObjectBuilder | None = None
    current = ""
    with _open(path) as handle:
        try:
            for prefix, event, value in ijson.parse(handle):
                if prefix == "traceEvents" and event == "start_array":
                    break
                if builder is None and prefix in ("deviceProperties", "distributedInfo") \
                        and event in ("start_array", "start_map"):
                    builder, current = ijson.ObjectBuilder(), prefix
                if builder is not None:
                    builder.event(event, value)
                    if prefix == current and event in ("end_array", "end_map"):
                        found[current], builder = builder.value, None
        except ijson.common.JSONError:
            pass  # _collect reports what is wrong with the file
    properties = found.get("deviceProperties")
    device = ""
    if isinstance(properties, list) and properties and isinstance(properties[0], dict):
        device = Fields(str(path), "deviceProperties[0]").text(properties[0].get("name"), "name")
    info = found.get("distributedInfo")
    rank = None
    if isinstance(info, dict) and info.get("rank") is not None:
        rank = Fields(str(path), "distributedInfo").integer(info["rank"], "rank", 0, MAX_GPUS - 1)
    return device, rank


def _cross_stream(events: list[GpuEvent], seen: _Collected, orphans: Counter[str]) -> None:
    """Link each stream wait: the first op the waiting stream launched after the wait waits
    for the last op the recording stream launched before the event was recorded."""
    by_stream: dict[int, list[tuple[float, int]]] = {}
    for index, event in enumerate(events):
        if event.launch_us is not None:
            by_stream.setdefault(event.stream, []).append((event.launch_us, index))
    for waiting, recording, record, wait in seen.waits:
        record_at = seen.runtime.get(record)
        wait_at = seen.runtime.get(wait)
        if record_at is None or wait_at is None:
            orphans["stream wait without its event record or wait call"] += 1
            continue
        producers = [i for launched, i in by_stream.get(recording, []) if launched <= record_at[0]]
        consumers = [i for launched, i in by_stream.get(waiting, []) if launched >= wait_at[0]]
        if producers and consumers:
            events[consumers[0]].after.append(producers[-1])


def _host_only(seen: _Collected) -> list[GpuEvent]:
    """The outermost CPU operators of each thread, for a trace with no GPU activity."""
    events = []
    for ops in seen.ops.values():
        end = float("-inf")
        for start, stop, name in zip(ops.starts, ops.ends, ops.names, strict=True):
            if start >= end:
                events.append(GpuEvent(name, "cpu", -1, start, stop - start, "cpu"))
                end = stop
    return sorted(events, key=lambda e: e.start_us)


def read_kineto(path: Path, rank: int | None = None, step: str | None = None) -> TraceRank:
    """Read one rank's trace; keep the GPU work of one iteration (the last complete
    ``ProfilerStep``, or ``step``), or of the whole trace when it marks none."""
    seen = _collect(path)
    device, traced_rank = _metadata(path)
    for ops in seen.ops.values():
        ops.sort()
    seen.runtime.sort()
    orphans: Counter[str] = Counter()
    linked = [_link(raw, seen, orphans) for raw in sorted(seen.gpu,
                                                                       key=lambda e: e["ts"])]
    chosen = sorted((s for s in seen.steps if step is None or s[0] == step),
                    key=lambda s: -s[1])
    if step is not None and not chosen:
        raise TraceError(str(path), "", f"no iteration named {step!r}")
    iteration, events = None, linked
    for candidate in chosen:  # the latest iteration that launched GPU work
        inside = [e for e in linked
                  if candidate[1] <= (e.launch_us if e.launch_us is not None else e.start_us)
                  <= candidate[2]]
        if inside:
            iteration, events = candidate, inside
            break
    _cross_stream(events, seen, orphans)
    if not events:
        events = _host_only(seen)  # a CPU-only rank (e.g. a gloo process): its top-level ops
    if not events:
        raise TraceError(str(path), "", "the trace holds no GPU kernels, copies or sets")
    return TraceRank(str(path), traced_rank if traced_rank is not None else (rank or 0), device,
                     events, iteration, len(seen.steps), orphans, path.stat().st_size)
