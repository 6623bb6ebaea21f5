"""Every user mistake in tests/data/broken/ and every broken ``--set`` ends the same way: exit
status 2 and one line on stderr, ``ghsim: error: <file or --set ...>: <key path>: <message>``.

Each corpus file starts with ``# expect: <substring>`` (the line must contain it) and may carry
``# key: <key.path>`` (the line must name it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ghsim.cli import main
from tests.conftest import ROOT

BROKEN = ROOT / "tests" / "data" / "broken"
CORPUS = sorted(BROKEN.glob("*.yaml"))
SCENARIO = ROOT / "configs" / "scenarios" / "llama3-70b-gh200-nvl32.yaml"
PREFIX = "ghsim: error: "


@dataclass(frozen=True)
class Case:
    """One broken input: what to run and what the error line must contain."""

    argv: tuple[str, ...]
    names: str
    """The file name, or the ``--set ...`` label, that the line must name."""
    expect: str
    key: str | None = None


def header(path: Path) -> tuple[str, str | None]:
    """The ``# expect:`` and ``# key:`` comments at the top of a corpus file."""
    lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
    assert lines and lines[0].startswith("# expect: "), f"{path.name}: no '# expect:' first line"
    expect = lines[0].removeprefix("# expect: ").strip()
    key = None
    if len(lines) > 1 and lines[1].startswith("# key: "):
        key = lines[1].removeprefix("# key: ").strip()
    assert expect, f"{path.name}: empty '# expect:'"
    return expect, key


def file_case(path: Path) -> Case:
    expect, key = header(path)
    return Case(("inspect", str(path)), path.name, expect, key)


def shown(text: str) -> str:
    """An override as the error line shows it (newlines and other control characters escaped)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


# (override, expected substring, key path or None), each applied to SCENARIO.
OVERRIDES: list[tuple[str, str, str | None]] = [
    ("parallelism.tpp=4", "unknown key 'tpp' (did you mean 'tp'?)", "parallelism.tpp"),
    ("training.seq_lne=4096", "did you mean 'seq_len'", "training.seq_lne"),
    ("parallelism.tp", "expected KEY.PATH=VALUE", None),
    ("=4", "expected KEY.PATH=VALUE", None),
    ("parallelism.tp=", "expected a value after '='", "parallelism.tp"),
    ("parallelism..tp=1", "expected a dotted key path", "parallelism..tp"),
    ("parallelism.tp=four", "expected an integer, got 'four'", "parallelism.tp"),
    ("training.grouped_gemm_gap_us=-1", "expected a number >= 0, got -1",
     "training.grouped_gemm_gap_us"),
    ("parallelism.tp=[1", "the value is not valid YAML", "parallelism.tp"),
    ("parallelism.tp=1\n2", "expected an integer", "parallelism.tp"),
    ("parallelism.tp=3", "expected a divisor of the model's 64 attention heads, got 3",
     "parallelism.tp"),
    ("parallelism.dp=3", "expected num_gpus / (tp x pp x cp) = 32 / 16 = 2, got 3",
     "parallelism.dp"),
    ("parallelism.vp=0", "expected a number > 0, got 0", "parallelism.vp"),
    ("num_gpus=33", "expected whole nodes", "num_gpus"),
    ("training.precision=bf61", "expected one of fp32, bf16, fp16 or fp8, got 'bf61'",
     "training.precision"),
    ("training.seq_len.x=1", "expected a mapping to hold key 'x', found the value 8192",
     "training.seq_len.x"),
    ("parallelism[0]=1", "expected a list to index, found a mapping", "parallelism[0]"),
    ("system.node.gpus=-2", "expected a number > 0, got -2", "system.node.gpus"),
    ("system.node.gpu.gpu.memory.capacity_gib=.nan", "expected a finite number, got nan",
     "system.node.gpu.gpu.memory.capacity_gib"),
    ("system.node.nics=0", "a fabric needs node.nics > 0", "system"),
    ("system.fabric.switch_radix=3", "switch_radix must be an even number >= 4, got 3",
     "system.fabric"),
    ("model.heads=7", "heads (7) must be a multiple of kv_heads (8)", "model"),
    ("model=llama9", "no model named 'llama9'", "model"),
    ("system=dgx-h10", "did you mean 'dgx-h100'", "system"),
    ("model=../nowhere/llama3-70b.yaml", "does not exist", "model"),
    (f"system={ROOT / 'models' / 'llama3-8b.yaml'}", "is a model file", "system"),
    ("system=null", "expected the name of a system file or a mapping", "system"),
    ("sources.x=1", "unknown key 'sources'", "sources"),
    ("kind=model", "expected 'scenario' here, got 'model'", None),
    ("schema_version=2", "got 2", "schema_version"),
    ("name=" + "[" * 80 + "]" * 80, "nested at most 64 deep (ghsim.limits.MAX_YAML_DEPTH)",
     "name"),
    ("name=&a [1, *a]", "an alias refers to a node that contains it", "name"),
    ('name="\\udc80"', "malformed YAML: found invalid Unicode character escape code", "name"),
    ("num_gpus=2000000", "expected at most 1,048,576 GPUs (ghsim.limits.MAX_GPUS)", "num_gpus"),
    # a key that takes a number or a mapping: the member the value was written for speaks
    ("system.node.gpu.gpu.compute.gemm_k_half.bf16=0", "expected a number > 0, got 0",
     "system.node.gpu.gpu.compute.gemm_k_half.bf16"),
    ("system.node.gpu.gpu.compute.gemm_k_half=abc", "expected a number, got 'abc'",
     "system.node.gpu.gpu.compute.gemm_k_half"),
    ("system.node.gpu.gpu.compute.causal_attention_diagonal_tokens=-1",
     "expected a number >= 0, got -1",
     "system.node.gpu.gpu.compute.causal_attention_diagonal_tokens"),
    ("system.node.gpu.gpu.compute.attention_head_dim_efficiency={64: 0, 128: 1}",
     "expected a number > 0, got 0",
     "system.node.gpu.gpu.compute.attention_head_dim_efficiency[64]"),
    ("parallelism.last_stage_layers=6", "other 80 - 6 layers to split evenly over the other "
     "3 pipeline stages", "parallelism.last_stage_layers"),
    # the NVL32 nodes join through a switch system; GPUs linked directly cannot (fuzzing: a
    # ValueError from the route builder)
    ("system.node.nvlink.topology=direct", "expected node.nvlink.topology 'switch', got "
     "'direct'", "system"),
    # a board below its fixed power gave the clock a complex root (found by fuzzing)
    ("system.node.gpu.gpu.compute.board_power_w=100", "fixed_power_w (320 W) must be below "
     "board_power_w (100 W)", "system.node.gpu.gpu.compute"),
    # a node of a million CPUs took minutes and gigabytes to build (found by fuzzing)
    ("system.node.cpus=1048576", "expected a number <= 1024, got 1048576", "system.node.cpus"),
    # a measured rate above the capacity it is a share of (1.22 x the GH200 144 GB's HBM)
    ("system.node.gpu.gpu.memory.stream_bandwidth_gb_s=6000", "stream_bandwidth_gb_s = 6000 "
     "GB/s is more than peak_bandwidth_gb_s = 4900 GB/s", "system.node.gpu.gpu.memory"),
    ("system.node.gpu.gpu.compute.flops_per_clock_per_sm={bf16: 4096}",
     "must list at least fp32", "system.node.gpu.gpu.compute"),
    ("system.node.gpu.gpu.unified_memory.fault_batch_us=20",
     "fault_batch_us needs fault_batch_pages", "system.node.gpu.gpu.unified_memory"),
    # sequence parallelism splits the sequence over tp 4: 8190 tokens do not split
    ("training.seq_len=8190", "expected each context-parallel rank's 8190 tokens (seq_len / "
     "cp) divisible by tp 4", "parallelism.sequence_parallel"),
]

FILE_CASES = [pytest.param(file_case(path), id=path.stem) for path in CORPUS]
OVERRIDE_CASES = [
    pytest.param(
        Case(("inspect", str(SCENARIO), "--set", text), shown(f"--set {text}"), expect, key),
        id=shown(text),
    )
    for text, expect, key in OVERRIDES
]


def check_line(stderr: str, case: Case) -> None:
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}: {stderr!r}"
    assert stderr.endswith("\n")
    line = lines[0]
    assert line.startswith(PREFIX), line
    assert case.names in line, f"{case.names!r} not named in {line!r}"
    assert case.expect in line, f"{case.expect!r} not in {line!r}"
    if case.key is not None:
        assert f": {case.key}: " in line, f"key path {case.key!r} not in {line!r}"


def run_in_process(case: Case, capsys: pytest.CaptureFixture[str]) -> str:
    status = main(list(case.argv))
    captured = capsys.readouterr()
    assert status == 2, f"exit status {status}; stderr {captured.err!r}"
    return captured.err


@pytest.mark.parametrize("case", FILE_CASES)
def test_broken_file(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    check_line(run_in_process(case, capsys), case)


@pytest.mark.parametrize("case", OVERRIDE_CASES)
def test_broken_override(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    check_line(run_in_process(case, capsys), case)


SERVING = ROOT / "configs" / "scenarios" / "llama3.1-70b-fp8-gh200-serving.yaml"
REQUESTS = "inference.requests"


@pytest.mark.parametrize(("overrides", "expect", "key"), [
    ((f"{REQUESTS}.output_tokens={{distribution: uniform, mean: 100, min: 50, max: 40}}",),
     "max (40) is below min (50)", f"{REQUESTS}.output_tokens"),
    ((f"{REQUESTS}.output_tokens={{distribution: uniform, mean: 100}}",),
     "distribution 'uniform' needs max", f"{REQUESTS}.output_tokens"),
    ((f"{REQUESTS}.warmup=3000",), "warmup (3000) leaves no request of the 3000 to measure",
     REQUESTS),
    ((f"{REQUESTS}.arrival=concurrency",), "arrival 'concurrency' needs concurrency",
     REQUESTS),
    ((f"{REQUESTS}.arrival=poisson", f"{REQUESTS}.rate_per_s=1", "inference.find_max_rate=true"),
     "find_max_rate needs latency_targets (ttft_ms or tpot_ms)", "inference"),
], ids=["max-below-min", "uniform-without-max", "warmup-is-every-request",
        "concurrency-without-clients", "find-max-rate-without-targets"])
def test_a_broken_request_stream_is_refused(overrides: tuple[str, ...], expect: str, key: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A served model's request stream that cannot be measured as written."""
    argv = ["inspect", str(SERVING), *(a for o in overrides for a in ("--set", o))]
    case = Case(tuple(argv), "--set inference.", expect, key)
    check_line(run_in_process(case, capsys), case)


def test_override_list_index_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    points = tmp_path / "points.yaml"
    points.write_text(
        "schema_version: 1\nkind: validation_points\npoints:\n"
        "  - id: one\n    confidence: low\n    measured: {step_time_s: 1.5}\n    source: a paper\n"
        "    scenario: {system: dgx-h100, num_gpus: 8, model: llama3-8b, training: {seq_len: 4096,"
        " micro_batch: 1, global_batch: 8, precision: bf16}}\n"
    )
    assert main(["inspect", str(points), "--json"]) == 0  # the file itself is fine
    capsys.readouterr()
    text = "points[3].measured.step_time_s=2"
    case = Case(("inspect", str(points), "--set", text), f"--set {text}",
                "index 3 is out of range (the list has 1)", "points[3]")
    check_line(run_in_process(case, capsys), case)


def test_corpus_is_large_and_every_file_has_a_header() -> None:
    assert len(CORPUS) >= 36
    assert len(OVERRIDES) >= 10
    for path in CORPUS:
        header(path)
    bodies = [
        b"\n".join(line for line in path.read_bytes().split(b"\n") if not line.startswith(b"#"))
        for path in CORPUS
    ]
    assert len(set(bodies)) == len(bodies), "two corpus files hold the same mistake"


def test_running_the_corpus_leaves_it_unmodified(capsys: pytest.CaptureFixture[str]) -> None:
    before = {path.name: path.read_bytes() for path in CORPUS}
    for path in CORPUS:
        assert main(["inspect", str(path), "--json"]) == 2
    for text, _, _ in OVERRIDES:
        assert main(["inspect", str(SCENARIO), "--set", text]) == 2
    capsys.readouterr()
    after = {path.name: path.read_bytes() for path in sorted(BROKEN.glob("*.yaml"))}
    assert after == before
    assert sorted(p.name for p in BROKEN.iterdir()) == sorted(before)


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", str(BROKEN / "yaml-unclosed-bracket.yaml")],
        ["inspect", str(BROKEN / "unknown-key-parallelism-tpp.yaml"), "--json"],
        ["inspect", str(SCENARIO), "--set", "parallelism.tp=3"],
    ],
    ids=["malformed-yaml", "unknown-key", "override"],
)
def test_real_process(argv: list[str]) -> None:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    result = subprocess.run(
        [sys.executable, "-m", "ghsim", *argv],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(PREFIX)


@pytest.mark.parametrize(("sets", "key", "expect"), [
    # two NICs beside two of a DGX H100's eight PCIe GPUs: the other six reached none
    (["system.node.nics=2"], "system.node", "expected nics >= gpus (8), got 2"),
    # one NIC on one of two x86 sockets with no link between them (found by fuzzing: a
    # ValueError from the route builder)
    (["system.node.nic_attach=cpu", "system.node.nics=1", "system.node.cpu_link=null"],
     "node.nics", "gpu4 reaches none"),
])
def test_a_node_whose_gpus_reach_no_nic_is_refused(
        sets: list[str], key: str, expect: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "llama3-8b-gh200", "--set", "system=dgx-h100", "--set", "num_gpus=16"]
    for text in sets:
        argv += ["--set", text]
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and f": {key}: " in err[0] and expect in err[0], err
