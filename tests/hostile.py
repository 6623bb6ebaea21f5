"""The hostile corpus: inputs built to make ghsim hang, exhaust memory, crash or print raw
control characters, written into a folder by :func:`generate` (nothing large is committed: a
gzip bomb is a few concatenated members, a 65 MiB file is sparse).

Each :class:`Case` is one ``ghsim`` command line and the exit status it must end with: 2 (one
line naming the file, the key and what was expected), 1 (standard output that fails), or 0
where the input is in fact valid. ``tests/test_hostile.py`` runs every case as a real process
under a memory limit and a timeout. ``tests/data/broken/`` (``tests/test_broken_inputs.py``)
holds the ordinary mistakes; this corpus holds the extreme and the malicious ones.
"""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import yaml

SCENARIO = "llama3-8b-gh200"
"""The shipped scenario the ``--set`` cases start from (one GH200, one pipeline stage)."""
GPU = "system.node.gpu.gpu"


@dataclass(frozen=True)
class Case:
    """One command line of the corpus and how it must end."""

    name: str
    argv: tuple[str | bytes, ...]
    """Arguments after ``ghsim``."""
    status: int
    expect: str = ""
    """A substring of the last line on stderr (an error's line must say what was expected)."""
    stdout: str = "pipe"
    """``pipe``; ``full`` (``/dev/full``); ``closed`` (no descriptor 1); ``broken`` (a pipe whose
    reader has gone)."""
    fsize: int | None = None
    """``RLIMIT_FSIZE`` in bytes: files larger fail to write (a full disk)."""
    clean: bool = False
    """Standard output (and any report written) must hold no raw control character."""
    outputs: tuple[str, ...] = field(default=())
    """Files the case writes (relative to the corpus folder) to check for raw control
    characters when ``clean``."""

    @property
    def json(self) -> bool:
        """Whether standard output must be strict JSON (``--json`` that succeeded)."""
        return "--json" in self.argv and self.status == 0 and self.stdout == "pipe"


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _gzip_bomb(path: Path, head: bytes, chunk: bytes, members: int, tail: bytes) -> Path:
    """A gzip file inflating to ``head + chunk * members + tail``: one compressed member
    repeated (``gzip`` reads concatenated members), so it is written in milliseconds."""
    member = gzip.compress(chunk, compresslevel=9)
    data = gzip.compress(head) + member * members + gzip.compress(tail)
    return _write(path, data)


def _run(*overrides: str, json_output: bool = True) -> tuple[str, ...]:
    argv: list[str] = ["run", SCENARIO]
    for text in overrides:
        argv += ["--set", text]
    return (*argv, "--json") if json_output else tuple(argv)


# -- scenarios ---------------------------------------------------------------------------------

def _scenario_cases() -> list[Case]:
    page = f"{GPU}.unified_memory.gpu_page_mib"
    bandwidth = f"{GPU}.memory.peak_bandwidth_gb_s"
    return [
        Case("gpus-1e8", _run("num_gpus=100000000", "training.global_batch=100000000"), 2,
             "MAX_GPUS"),
        Case("seq-len-1e7", _run("training.seq_len=10000000"), 0),
        Case("sequences-1e12", _run("training.global_batch=1000000000000"), 2,
             "MAX_SIMULATED_OPS"),
        Case("layers-1e6", _run("model.layers=1000000"), 2, "MAX_SIMULATED_OPS"),
        Case("hidden-1e50-float", _run("model.hidden=1e50"), 2, "expected an integer"),
        Case("hidden-1e50-int", _run("model.hidden=1" + "0" * 50), 2, "expected a number <="),
        Case("micro-batch-1e9", _run("training.micro_batch=1000000000",
                                     "training.global_batch=1000000000"), 0),
        Case("bandwidth-1e-300", _run(f"{bandwidth}=1e-300"), 0),
        Case("bandwidth-1e300", _run(f"{bandwidth}=1e300"), 0),
        Case("bandwidth-subnormal", _run(f"{bandwidth}=1e-320"), 2, "not finite"),
        Case("capacity-1e300", _run(f"{GPU}.memory.capacity_gib=1e300"), 2, "not finite"),
        Case("page-1e-6-mib", _run("offload.strategy=unified_memory", f"{page}=1e-6"), 2,
             "MAX_PAGES"),
        Case("page-1e-6-mib-unused", _run(f"{page}=1e-6"), 0),
        Case("page-1e300-mib", _run("offload.strategy=unified_memory", f"{page}=1e300"), 2,
             "not finite"),
        Case("inspect-json-capacity-1e300", ("inspect", SCENARIO, "--json", "--set",
                                             f"{GPU}.memory.capacity_gib=1e300"), 2,
             "is not a finite number"),
        Case("inspect-gpus-1e10", ("inspect", "dgx-h100", "--gpus", "10000000000"), 2,
             "MAX_GPUS"),
        Case("inspect-gpus-1e400", ("inspect", "dgx-h100", "--gpus", "8" + "0" * 400), 2,
             "MAX_GPUS"),
        Case("inspect-seq-len-1e13", ("inspect", "llama3-8b", "--seq-len", "10000000000000"), 2,
             "MAX_SEQ_LEN"),
        Case("sweep-workers-1e5", ("sweep", "nvl32-vs-dgx-h100", "--workers", "100000"), 2,
             "MAX_WORKERS"),
        Case("inspect-workload-1e12", ("inspect", SCENARIO, "--workload", "--set",
                                       "training.global_batch=1000000000000"), 2,
             "MAX_SIMULATED_OPS"),
    ]


# -- YAML and files ----------------------------------------------------------------------------

_HEADER = "schema_version: 1\nkind: scenario\n"
_BODY = ("system: gh200-single\nnum_gpus: 1\nmodel: llama3-8b\ntraining: {seq_len: 4096, "
         "micro_batch: 1, global_batch: 16, precision: bf16}\nparallelism: {recompute: full}\n")


def _yaml_cases(folder: Path) -> list[Case]:
    """What cannot be committed as a file of tests/data/broken/ (which holds the alias bombs,
    the deep nesting and the lone surrogate): FIFOs, devices, a 65 MiB file, huge ``--set``s."""
    fifo = folder / "in" / "fifo.yaml"
    os.mkfifo(fifo)
    os.mkfifo(folder / "in" / "fifo-model.yaml")
    via_fifo = _write(folder / "in" / "model-is-a-fifo.yaml",
                      _HEADER + _BODY.replace("model: llama3-8b", "model: ./fifo-model.yaml"))
    big = folder / "in" / "big.yaml"
    with big.open("wb") as handle:  # sparse: 65 MiB that take no disk
        handle.write(_HEADER.encode())
        handle.truncate(65 * 2**20)
    directory = folder / "in" / "a-folder.yaml"
    directory.mkdir()
    workload_fifo = _write(folder / "in" / "workload-fifo.yaml",
                           _HEADER + _BODY + "workload: ./fifo.yaml\n")
    return [
        Case("set-nested-10000", ("inspect", SCENARIO, "--set",
                                  "x=" + "[" * 10000 + "]" * 10000), 2, "MAX_YAML_DEPTH"),
        Case("set-mapping-nested-5000", ("inspect", SCENARIO, "--set",
                                         "x=" + "{a: " * 5000 + "1" + "}" * 5000), 2,
             "MAX_YAML_DEPTH"),
        Case("set-alias-bomb", ("inspect", SCENARIO, "--set", "x=[" + ", ".join(
            ["&a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"] + [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 10)
                                                      + "]" for i in range(1, 10)]) + "]"), 2,
             "MAX_ALIAS_NODES"),
        Case("dev-zero-scenario", ("run", "/dev/zero"), 2, "found a character device"),
        Case("dev-zero-inspect", ("inspect", "/dev/zero", "--json"), 2, "character device"),
        Case("fifo-scenario", ("run", str(fifo)), 2, "found a FIFO"),
        Case("fifo-referenced-model", ("inspect", str(via_fifo)), 2, "found a FIFO"),
        Case("fifo-workload", ("run", str(workload_fifo)), 2, "found a FIFO"),
        Case("fifo-workload-sweep", ("sweep", str(_write(
            folder / "in" / "sweep-fifo-workload.yaml", "schema_version: 1\nkind: sweep\nname: "
            "f\nbase: workload-fifo.yaml\ngrid:\n  parallelism.recompute: [full]\n")),
            "--json", "--workers", "1"), 0),
        Case("directory-scenario", ("run", str(directory)), 2, "found a directory"),
        Case("yaml-65-mib", ("inspect", str(big)), 2, "MAX_CONFIG_BYTES"),
        Case("set-undecodable-bytes", ("inspect", SCENARIO, "--set", b"name=\xff\xfe"), 2,
             "expected valid Unicode text, got the lone surrogate \\udcff"),
        Case("path-undecodable-bytes", ("inspect", b"/nowhere/\xff.yaml"), 2,
             "\\udcff.yaml"),
    ]


# -- names and strings shown ---------------------------------------------------------------------

def _name_cases(folder: Path) -> list[Case]:
    evil = _write(folder / "in" / "evil-name.yaml", _HEADER + 'name: "\\e[31mred\\a [bold]x '
                  '$\\\\alpha$ \\e]0;title\\a end"\n'
                  'description: "\\e[2J cleared"\n' + _BODY)
    return [
        Case("name-escape-run", ("run", str(evil)), 0, clean=True),
        Case("name-escape-run-json", ("run", str(evil), "--json"), 0, clean=True),
        Case("name-escape-inspect", ("inspect", str(evil)), 0, clean=True),
        Case("name-escape-report", ("run", str(evil), "-o", str(folder / "out" / "evil")), 0,
             clean=True, outputs=("out/evil/report.html", "out/evil/result.json")),
        Case("set-escape-error", ("inspect", SCENARIO, "--set", "parallelism.tp\x1b[31m=1"), 2,
             "\\x1b[31m"),
        Case("set-escape-name", ("inspect", SCENARIO, "--set", "name=\x1b[31mred"), 2,
             "not valid YAML"),
    ]


# -- sweeps ------------------------------------------------------------------------------------

def _sweep(folder: Path, name: str, body: str) -> Path:
    return _write(folder / "in" / f"sweep-{name}.yaml",
                  f"schema_version: 1\nkind: sweep\nname: {name}\nbase: {SCENARIO}\n{body}")


def _filter(folder: Path, name: str, expression: str) -> Path:
    return _sweep(folder, name, "grid:\n  parallelism.recompute: [full]\nfilter: "
                  + json.dumps(expression) + "\n")


def _sweep_cases(folder: Path) -> list[Case]:
    axes = ("training.micro_batch", "training.global_batch", "training.seq_len", "model.layers",
            "model.hidden", "model.heads", "model.kv_heads", "model.ffn_hidden", "model.vocab")
    grid = "grid:\n" + "".join(f"  {axis}: [{', '.join(map(str, range(1, 11)))}]\n"
                               for axis in axes)
    billion = _sweep(folder, "billion-points", grid)
    product = " * ".join(["9" * 45] * 20)
    cases = {
        "misspelt-key": ("parallelism.tpp * parallelism.pp <= 16", "did you mean 'tp'"),
        "dunder": ("parallelism.__class__ == 1", "'__class__' is not allowed"),
        "too-long": (" + ".join(["num_gpus"] * 200) + " > 0", "MAX_FILTER_CHARS"),
        "too-deep": ("not " * 60 + "num_gpus", "MAX_FILTER_DEPTH"),
        "string-times-1e9": ("'a' * 1000000000 == 'b'", "needs numbers"),
        "power-tower": ("10 ** 10 ** 10 > 1", "Pow is not allowed"),
        "import-call": ("__import__('os').system('true') == 0", "expected calls of"),
        "lambda": ("(lambda: 1)() == 1", "expected calls of"),
        "huge-product": (f"{product} > 0", "MAX_FILTER_INT_BITS"),
        "comprehension": ("[x for x in [1]] == [1]", "ListComp is not allowed"),
        "parse-error": ("num_gpus >", "not a valid expression"),
    }
    result = [Case("sweep-1e9-points", ("sweep", str(billion), "--json", "--workers", "1"), 2,
                   "MAX_SWEEP_POINTS")]
    for name, (expression, expect) in cases.items():
        path = _filter(folder, name, expression)
        result.append(Case(f"filter-{name}", ("sweep", str(path), "--json", "--workers", "1"),
                           2, expect))
    valid = _filter(folder, "valid", "max(parallelism.tp, 1) * parallelism.pp <= 16 and "
                    "abs(num_gpus) in [1, 2] and parallelism.dp >= 1")
    result.append(Case("filter-valid", ("sweep", str(valid), "--json", "--workers", "1"), 0))
    return result


# -- traces ------------------------------------------------------------------------------------

def _kineto(events: list[object], **extra: object) -> str:
    return json.dumps({**extra, "traceEvents": events})


KERNEL = {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7,
          "ts": 1000.0, "dur": 50.0, "args": {"stream": 7, "correlation": 11}}
LAUNCH = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
          "ts": 990.0, "dur": 5.0, "args": {"correlation": 11}}
OP = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 980.0,
      "dur": 30.0, "args": {"Input Dims": [[64, 64], [64, 64]]}}


def _with(base: dict[str, object], **changes: object) -> dict[str, object]:
    event = {**base, **changes}
    return {k: v for k, v in event.items() if v is not _DROP}


_DROP = object()


def _kineto_cases(folder: Path) -> list[Case]:
    good = [OP, LAUNCH, KERNEL]
    variants: dict[str, tuple[list[object] | str, int, str]] = {
        "valid": (good, 0, ""),
        "unknown-correlation": ([OP, LAUNCH, _with(KERNEL, args={"correlation": 999})], 0,
                                ""),
        "dur-string": ([OP, LAUNCH, _with(KERNEL, dur="fifty")], 2, "traceEvents[2].dur"),
        "dur-negative": ([OP, LAUNCH, _with(KERNEL, dur=-5)], 2, "traceEvents[2].dur"),
        "dur-1e300": ([OP, LAUNCH, _with(KERNEL, dur=1e300)], 2, "MAX_EVENT_US"),
        "ts-missing": ([OP, LAUNCH, _with(KERNEL, ts=_DROP)], 2, "traceEvents[2].ts"),
        "ts-1e300": ([OP, _with(LAUNCH, ts=1e300), KERNEL], 2, "traceEvents[1].ts"),
        "args-list": ([OP, LAUNCH, _with(KERNEL, args=[1, 2])], 2, "traceEvents[2].args"),
        "correlation-string": ([OP, _with(LAUNCH, args={"correlation": "x"}), KERNEL], 2,
                               "traceEvents[1].args.correlation"),
        "stream-float": ([OP, LAUNCH, _with(KERNEL, args={"stream": 7.5})], 2,
                         "args.stream"),
        "cat-list": ([OP, LAUNCH, _with(KERNEL, cat=["kernel"])], 2, "traceEvents[2].cat"),
        "tid-list": ([_with(OP, tid=[1]), LAUNCH, KERNEL], 2, "traceEvents[0].tid"),
        "name-number": ([OP, LAUNCH, _with(KERNEL, name=12)], 2, "traceEvents[2].name"),
        "event-not-object": ([OP, [1, 2], KERNEL], 2, "traceEvents[1]"),
        "gemm-dims-huge": ([_with(OP, args={"Input Dims": [[10**15, 10**15], [10**15, 1]]}),
                            LAUNCH, KERNEL], 0, ""),
        "nccl-bytes-string": ([_with(OP, name="nccl:all_reduce",
                                     args={"In msg nelems": "many"}), LAUNCH,
                               _with(KERNEL, name="ncclKernel_AllReduce")], 0, ""),
        "events-not-a-list": ("{\"traceEvents\": 5}", 2, "expected a PyTorch profiler trace"),
        "rank-string": (_kineto(good, distributedInfo={"rank": "zero"}), 2,
                        "distributedInfo.rank"),
        "nan-literal": ("{\"traceEvents\": [{\"ph\": \"X\", \"dur\": NaN}]}", 2, "JSON"),
        "nested-5000": ("{\"traceEvents\": [" + "[" * 5000 + "]" * 5000 + "]}", 2,
                        "expected an event object"),
        "args-nested-5000": ([OP, LAUNCH, _with(KERNEL, args={
            "stream": json.loads("[" * 900 + "]" * 900)})], 2, "args.stream"),
    }
    cases = []
    for name, (events, status, expect) in variants.items():
        text = events if isinstance(events, str) else _kineto(events)
        path = _write(folder / "in" / "kineto" / f"{name}.json", text)
        cases.append(Case(f"kineto-{name}", ("import", str(path), "-o",
                                             str(folder / "out" / f"kineto-{name}.yaml"),
                                             "--json"), status, expect))
    spaces = _gzip_bomb(folder / "in" / "kineto" / "bomb-spaces.json.gz", b'{"traceEvents": [',
                        b" " * 2**24, 4, b"]}")
    event = (json.dumps(KERNEL) + ",").encode()
    events = _gzip_bomb(folder / "in" / "kineto" / "bomb-events.json.gz", b'{"traceEvents": [',
                        event * (2**22 // len(event)), 8, json.dumps(KERNEL).encode() + b"]}")
    for name, path in (("bomb-spaces", spaces), ("bomb-events", events)):
        cases.append(Case(f"kineto-{name}", ("import", str(path), "-o",
                                             str(folder / "out" / f"{name}.yaml")), 2,
                          "gzip bomb"))
    return cases


def _execution_trace_cases(folder: Path) -> list[Case]:
    node = {"id": 2, "name": "aten::mm", "parent": 1, "inputs": {
        "values": [], "shapes": [[64, 64], [64, 64]], "types": ["Tensor(float)"] * 2}}
    root = {"id": 1, "name": "[pytorch|profiler|execution_trace|thread]", "parent": 0}
    variants: dict[str, tuple[list[object], int, str]] = {
        "valid": ([root, node], 0, ""),
        "id-string": ([root, {**node, "id": "two"}], 2, "nodes[1].id"),
        "id-float": ([root, {**node, "id": 2.5}], 2, "nodes[1].id"),
        "id-missing": ([root, {k: v for k, v in node.items() if k != "id"}], 2, "nodes[1].id"),
        "parent-object": ([root, {**node, "parent": {"id": 1}}], 2, "nodes[1].parent"),
        "shapes-string": ([root, {**node, "inputs": {"shapes": "64x64"}}], 2,
                          "nodes[1].inputs.shapes"),
        "node-not-object": ([root, 7], 2, "nodes[1]"),
    }
    cases = []
    for name, (nodes, status, expect) in variants.items():
        path = _write(folder / "in" / "et" / f"{name}.json",
                      json.dumps({"schema": "1.0.2-chakra.0.0.4", "nodes": nodes}))
        cases.append(Case(f"et-{name}", ("import", str(path), "--format", "pytorch-et", "-o",
                                         str(folder / "out" / f"et-{name}.yaml"), "--json"),
                          status, expect))
    return cases


def _chakra(nodes: list[dict[str, object]]) -> bytes:
    from google.protobuf.internal.encoder import _VarintBytes

    from ghsim.importers.chakra import NODE_TYPES, GlobalMetadata, Node

    def framed(message: object) -> bytes:
        payload = message.SerializeToString()  # type: ignore[attr-defined]
        return bytes(_VarintBytes(len(payload))) + payload

    data = framed(GlobalMetadata(version="0.0.4"))
    for index, spec in enumerate(nodes):
        node = Node(id=index, name=str(spec.get("name", f"n{index}")),
                    type=NODE_TYPES.index(str(spec["type"])),
                    duration_micros=int(spec.get("dur", 10)))  # type: ignore[call-overload]
        for key in ("comm_type", "comm_size", "num_ops"):
            if key in spec:
                node.attr.add(name=key, int64_val=int(spec[key]))  # type: ignore[call-overload]
        data += framed(node)
    return data


def _chakra_cases(folder: Path) -> list[Case]:
    coll = {"type": "COMM_COLL_NODE", "comm_type": 0, "comm_size": 1024}
    comp = {"type": "COMP_NODE", "num_ops": 1000}
    variants: dict[str, tuple[list[dict[str, object]], int, str]] = {
        "valid": ([comp, coll], 0, ""),
        "comm-type-42": ([comp, {**coll, "comm_type": 42}], 2, "nodes[1].attr.comm_type"),
        "comm-size-negative": ([comp, {**coll, "comm_size": -1}], 2, "nodes[1].attr.comm_size"),
        "duration-2e19": ([{**comp, "dur": 2**64 - 1}, coll], 2, "nodes[0].duration_micros"),
    }
    cases = []
    for name, (nodes, status, expect) in variants.items():
        path = _write(folder / "in" / "chakra" / f"{name}.0.et", _chakra(nodes))
        cases.append(Case(f"chakra-{name}", ("import", str(path), "-o",
                                             str(folder / "out" / f"chakra-{name}.yaml"),
                                             "--json"), status, expect))
    sparse = folder / "in" / "chakra" / "sparse.0.et"
    with sparse.open("wb") as handle:  # 600 MiB that take no disk
        handle.truncate(600 * 2**20)
    cases.append(Case("chakra-600-mib", ("import", str(sparse), "-o",
                                         str(folder / "out" / "chakra-sparse.yaml")), 2,
                      "MAX_TRACE_READ_BYTES"))
    bomb = _gzip_bomb(folder / "in" / "chakra" / "bomb.0.et.gz", b"", b"\0" * 2**24, 24, b"")
    cases.append(Case("chakra-gzip-bomb", ("import", str(bomb), "-o",
                                           str(folder / "out" / "chakra-bomb.yaml")), 2,
                      "gzip bomb"))
    feeder = {"Id": 1, "Name": "allreduce", "NodeType": 7, "runtime": 5, "comm_type": 0,
              "comm_size": 1024}
    feeders: dict[str, tuple[str, int, str]] = {
        "valid": (json.dumps({"workload_graph": [feeder]}), 0, ""),
        "node-type-string": (json.dumps({"workload_graph": [{**feeder, "NodeType": "coll"}]}),
                             2, "workload_graph[0].NodeType"),
        "comm-type-99": (json.dumps({"workload_graph": [{**feeder, "comm_type": 99}]}), 2,
                         "workload_graph[0].comm_type"),
        "runtime-nan": ('{"workload_graph": [{"Id": 1, "NodeType": 4, "runtime": NaN}]}', 2,
                        "not a JSON number"),
        "runtime-1e300": (json.dumps({"workload_graph": [{**feeder, "runtime": 1e300}]}), 2,
                          "workload_graph[0].runtime"),
        "nested": ('{"workload_graph": ' + "[" * 100000 + "]" * 100000 + "}", 2,
                   "nested too deeply"),
    }
    for name, (text, status, expect) in feeders.items():
        path = _write(folder / "in" / "chakra" / f"feeder-{name}.json", text)
        cases.append(Case(f"chakra-json-{name}", ("import", str(path), "--format", "chakra-json",
                                                  "-o", str(folder / "out" / f"cj-{name}.yaml"),
                                                  "--json"), status, expect))
    return cases


_NSYS_KERNEL = ("create table CUPTI_ACTIVITY_KIND_KERNEL (start integer, end integer, "
                "streamId integer, correlationId integer, shortName integer)")


def _nsys(path: Path, statements: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    with db:
        for statement in statements:
            db.execute(statement)
    db.close()
    return path


def _nsys_cases(folder: Path) -> list[Case]:
    strings = ["create table StringIds (id integer, value text)",
               "insert into StringIds values (1, 'ampere_sgemm_128x64_nn')"]
    runtime = ["create table CUPTI_ACTIVITY_KIND_RUNTIME (correlationId integer, start integer)",
               "insert into CUPTI_ACTIVITY_KIND_RUNTIME values (5, 900)"]
    kernel = [_NSYS_KERNEL]
    variants: dict[str, tuple[list[str], int, str]] = {
        "valid": ([*strings, *runtime, *kernel,
                   "insert into CUPTI_ACTIVITY_KIND_KERNEL values (1000, 2000, 7, 5, 1)"], 0, ""),
        "no-kernel-table": ([*strings, *runtime], 2, "CUPTI_ACTIVITY_KIND_KERNEL table"),
        "kernel-missing-column": ([*strings, "create table CUPTI_ACTIVITY_KIND_KERNEL (start "
                                   "integer, streamId integer, correlationId integer, shortName "
                                   "integer)"], 2, "column(s) end"),
        "runtime-missing-column": (["create table CUPTI_ACTIVITY_KIND_RUNTIME (start integer)",
                                    *kernel], 2, "CUPTI_ACTIVITY_KIND_RUNTIME"),
        "end-before-start": ([*strings, *kernel, "insert into CUPTI_ACTIVITY_KIND_KERNEL values "
                              "(2000, 1000, 7, 5, 1)"], 2, "[row 0].end"),
        "start-text": ([*strings, *kernel, "insert into CUPTI_ACTIVITY_KIND_KERNEL values "
                        "('soon', 1000, 7, 5, 1)"], 2, "[row 0].start"),
        "stream-null": ([*strings, *kernel, "insert into CUPTI_ACTIVITY_KIND_KERNEL values "
                         "(1000, 2000, NULL, 5, 1)"], 2, "[row 0].streamId"),
        "duration-1e300": ([*strings, *kernel, "insert into CUPTI_ACTIVITY_KIND_KERNEL values "
                            "(0, 1e300, 7, 5, 1)"], 2, "[row 0].end"),
        "name-not-utf8": (["create table StringIds (id integer, value text)",
                           "insert into StringIds values (1, CAST(X'ff41' AS TEXT))", *runtime,
                           *kernel, "insert into CUPTI_ACTIVITY_KIND_KERNEL values "
                           "(1000, 2000, 7, 5, 1)"], 2, "Could not decode to UTF-8"),
    }
    cases = []
    for name, (statements, status, expect) in variants.items():
        path = _nsys(folder / "in" / "nsys" / f"{name}.sqlite", statements)
        cases.append(Case(f"nsys-{name}", ("import", str(path), "-o",
                                           str(folder / "out" / f"nsys-{name}.yaml"), "--json"),
                          status, expect))
    # A real export with one byte of a view's SQL turned into 0xda (a byte flip found by
    # fuzzing): SQLite's error quotes the bytes, which Python cannot decode as UTF-8.
    real = (Path(__file__).parent / "data" / "traces" / "extra-p_extrap"
            / "tests__data__nsight__nsys_db__con_kernel.sqlite").read_bytes()
    at = real.index(b"GROUP BY eventK)\n     -- The total") + len(b"GROUP BY eventK)")
    path = folder / "in" / "nsys" / "schema-not-utf8.sqlite"
    path.write_bytes(real[:at] + b"\xda" + real[at + 1:])
    cases.append(Case("nsys-schema-not-utf8", ("import", str(path), "-o",
                                               str(folder / "out" / "nsys-schema.yaml")),
                      2, "text that is not UTF-8"))
    return cases


def _file_trace_cases(folder: Path) -> list[Case]:
    fifo = folder / "in" / "traces" / "rank0.json"
    fifo.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fifo)
    empty = folder / "in" / "empty-folder"
    empty.mkdir()
    nsys_fifo = folder / "in" / "traces" / "profile.sqlite"
    os.mkfifo(nsys_fifo)
    return [
        Case("trace-fifo", ("import", str(fifo), "-o", str(folder / "out" / "f.yaml")), 2,
             "found a FIFO"),
        Case("trace-folder-of-fifos", ("import", str(fifo.parent), "-o",
                                       str(folder / "out" / "f.yaml")), 2, "found a FIFO"),
        Case("trace-dev-zero", ("import", "/dev/zero", "--format", "kineto", "-o",
                                str(folder / "out" / "z.yaml")), 2, "character device"),
        Case("trace-dev-zero-chakra", ("import", "/dev/zero", "--format", "chakra", "-o",
                                       str(folder / "out" / "z.yaml")), 2, "character device"),
        Case("trace-empty-folder", ("import", str(empty), "-o", str(folder / "out" / "e.yaml")),
             2, "holds no trace files"),
    ]


# -- workload files ----------------------------------------------------------------------------

def _workload_cases(folder: Path) -> list[Case]:
    from ghsim.importers.kineto import GpuEvent, TraceRank
    from ghsim.importers.workload_file import rank_to_data

    events = [GpuEvent("gemm", "kernel", 7, 0.0, 100.0, "gemm", 0.0, flops=1e9),
              GpuEvent("add", "kernel", 7, 100.0, 10.0, "elementwise", 90.0, bytes=1e6)]
    rank = rank_to_data(TraceRank("rank0.json", 0, "NVIDIA H100", events, None, 0))

    def workload(label: str, **columns: object) -> Case:
        data = json.loads(json.dumps(rank))
        for key, value in columns.items():
            if key in data["events"]:
                data["events"][key] = value
            else:
                data[key] = value
        document = {"schema_version": 1, "kind": "workload", "name": label, "ranks": [data]}
        _write(folder / "in" / "workloads" / f"{label}.workload.yaml", yaml.safe_dump(document))
        scenario = _write(folder / "in" / "workloads" / f"{label}.yaml",
                          _HEADER + _BODY + f"workload: {label}.workload.yaml\n"
                          "replay: measured\n")
        status = 0 if label == "valid" else 2
        expect = {"name-index": "events.name[1]", "after-index": "events.after[1]",
                  "dur-negative": "events.dur_us[0]", "dur-1e300": "events.dur_us[0]",
                  "kind-unknown": "events.kind[0]", "rank-string": "ranks[0].rank",
                  "stream-float": "events.stream[0]"}.get(label, "")
        return Case(f"workload-{label}", ("run", str(scenario), "--json"), status, expect)

    return [
        workload("valid"),
        workload("name-index", name=[0, 5]),
        workload("after-index", after=[[], [7]]),
        workload("dur-negative", dur_us=[-1.0, 10.0]),
        workload("dur-1e300", dur_us=[1e300, 10.0]),
        workload("kind-unknown", kind=["warp", "kernel"]),
        workload("rank-string", rank="zero"),
        workload("stream-float", stream=[7.5, 7]),
    ]


# -- outputs -----------------------------------------------------------------------------------

def _output_cases(folder: Path) -> list[Case]:
    plain = _write(folder / "in" / "a-file", "not a folder\n")
    out = folder / "out"
    trace = _write(folder / "in" / "kineto-ok.json", _kineto([OP, LAUNCH, KERNEL]))
    return [
        Case("stdout-full-json", _run(), 1, "No space left on device", stdout="full"),
        Case("stdout-full-table", ("inspect", SCENARIO), 1, "No space left on device",
             stdout="full"),
        Case("stdout-closed", ("inspect", SCENARIO, "--json"), 2, "standard output: is closed",
             stdout="closed"),
        Case("stdout-closed-table", ("inspect", SCENARIO), 2, "standard output: is closed",
             stdout="closed"),
        Case("stdout-broken-pipe", _run(), 1, "Broken pipe", stdout="broken"),
        Case("schema-stdout-full", ("schema",), 1, "No space left on device", stdout="full"),
        Case("schema-broken-pipe", ("schema",), 1, "Broken pipe", stdout="broken"),
        Case("output-is-a-file", ("run", SCENARIO, "-o", str(plain)), 2,
             "expected a folder for the outputs, found a regular file"),
        Case("output-is-dev-full", ("run", SCENARIO, "-o", "/dev/full"), 2,
             "found a character device"),
        Case("output-under-a-file", ("run", SCENARIO, "-o", str(plain / "x")), 2,
             "Not a directory"),
        Case("output-disk-full", ("run", SCENARIO, "-o", str(out / "full")), 2,
             "cannot write outputs: File too large", fsize=4096),
        Case("chakra-output-is-a-file", ("run", SCENARIO, "--chakra", str(plain)), 2,
             "found a regular file"),
        Case("import-output-dev-full", ("import", str(trace), "-o", "/dev/full"), 2,
             "expected a regular file to write, found a character device"),
        Case("import-output-folder", ("import", str(trace), "-o", str(folder / "in")), 2,
             "found a directory"),
        Case("import-output-disk-full", ("import", str(trace), "-o", str(out / "w.yaml")), 2,
             "File too large", fsize=64),
        Case("sweep-output-is-a-file", ("sweep", str(_filter(folder, "out", "num_gpus > 0")),
                                        "-o", str(plain), "--workers", "1"), 2,
             "found a regular file"),
    ]


def generate(folder: Path) -> list[Case]:
    """Write every hostile input under ``folder/in`` (outputs go to ``folder/out``) and return
    the cases, each the arguments of one ``ghsim`` command and the exit status it must have."""
    (folder / "in").mkdir(parents=True, exist_ok=True)
    (folder / "out").mkdir(parents=True, exist_ok=True)
    cases = [*_scenario_cases(), *_yaml_cases(folder), *_name_cases(folder),
             *_sweep_cases(folder), *_kineto_cases(folder), *_execution_trace_cases(folder),
             *_chakra_cases(folder), *_nsys_cases(folder), *_file_trace_cases(folder),
             *_workload_cases(folder), *_output_cases(folder)]
    names = [case.name for case in cases]
    assert len(set(names)) == len(names), "two hostile cases share a name"
    return cases
