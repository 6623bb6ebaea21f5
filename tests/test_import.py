"""Importing real profiler traces and replaying them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from ghsim.cli import main
from ghsim.config import load_scenario
from ghsim.engine.simulate import simulate
from tests.conftest import TRACES

MEGATRON = sorted((TRACES / "astra-sim_astra-sim").glob("*megatron_kineto_*.json.gz"))
HTA = TRACES / "facebookresearch_HolisticTraceAnalysis"
KINETO = [
    *MEGATRON[:1],
    HTA / "tests__data__nccl_parser_config__nccl_data.json.gz",
    HTA / "tests__data__trace_filter__sampled_rank-0.json.gz",
    HTA / "tests__data__df_index_resolver__df_index_resolver.json.gz",
    HTA / "tests__data__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    HTA / "tests__data__triton_example__triton_example.json.gz",
    HTA / "tests__data__critical_path__cuda_event_sync__event_sync_trace.json.gz",
    HTA / "tests__data__critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
    HTA / "tests__data__trace_file_list__inference_rank_1.json.gz",
    HTA / "tests__data__execution_trace__benchmark_simple_add_trace.json.gz",
    TRACES / "facebookresearch_param" / "et_replay__tests__inputs__linear_kineto.json.gz",
]

SCENARIO = """\
schema_version: 1
kind: scenario
name: megatron-tp8-replay
system: dgx-a100
num_gpus: 8
model: llama2-7b
training: {{seq_len: 2048, micro_batch: 4, global_batch: 4, precision: fp16}}
parallelism: {{tp: 8}}
workload: {workload}
replay: {replay}
"""


@pytest.fixture(scope="module")
def megatron(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("megatron")
    assert main(["import", *map(str, MEGATRON), "-o", str(folder / "tp8.workload.yaml"),
                 "--json"]) == 0
    return folder


def _replay(folder: Path, replay: str) -> list[str]:
    scenario = folder / f"{replay}.yaml"
    scenario.write_text(SCENARIO.format(workload="tp8.workload.yaml", replay=replay))
    return simulate(load_scenario(scenario)).warnings


def test_measured_replay_reproduces_every_rank_within_5_percent(megatron: Path) -> None:
    (note,) = _replay(megatron, "measured")
    worst = float(note.split("worst rank ")[1].split("%")[0]) / 100
    assert "8 ranks" in note and worst <= 0.05, note


def test_recost_replay_on_the_same_gpu(megatron: Path) -> None:
    notes = _replay(megatron, "recost")
    worst = float(notes[0].split("worst rank ")[1].split("%")[0]) / 100
    assert worst <= 0.15, notes
    assert "could not be re-costed" in notes[1]


def test_recost_scales_each_fallback_kernel_by_what_bounds_it(megatron: Path) -> None:
    """The A100 traces re-costed on a DGX H200: a kernel the target's model cannot cost takes
    its measured time over the ratio of what bounds it. PyTorch's non-vectorized element-wise
    kernels (the QKV bias add, the permuted copies) are bound by the SMs' work per element: the
    parts' measured element rates, 321.6 / 218.3 G/s; a vectorized or fused one by HBM,
    4800 / 2039 GB/s."""
    from ghsim.engine.simulate import scenario_workload
    from ghsim.importers.classify import kernel_class

    assert kernel_class("void at::native::elementwise_kernel<128, 4, at::native::"
                        "gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<c10::Half> >") \
        == "strided"
    for name in ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor",
                 "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel",
                 "void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index"):
        assert kernel_class(name) == "elementwise", name
    scenario = megatron / "h200.yaml"
    scenario.write_text(SCENARIO.format(workload="tp8.workload.yaml", replay="recost").replace(
        "system: dgx-a100", "system: dgx-h200"))
    ops = scenario_workload(load_scenario(scenario)).classes[0].ops
    scaled: dict[str, list[float]] = {"strided": [], "elementwise": []}
    for op in ops:
        klass = op.attrs.get("klass")
        if klass in scaled and "fallback_s" in op.attrs:
            scaled[klass].append(op.attrs["fallback_s"])
    assert len(scaled["strided"]) == 88 and scaled["elementwise"]
    measured = _measured_s(MEGATRON[0])
    assert sum(scaled["strided"]) == pytest.approx(measured["strided"] * 218.3 / 321.6)
    assert sum(scaled["elementwise"]) == pytest.approx(measured["elementwise"] * 2039 / 4800)


def _measured_s(trace: Path) -> dict[str, float]:
    """Seconds rank 0's trace spent in PyTorch's non-vectorized element-wise kernels
    (``strided``) and in the other kernels its importer calls element-wise."""
    from ghsim.importers.classify import kernel_class

    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    seconds = {"strided": 0.0, "elementwise": 0.0}
    for event in events:
        if event.get("cat") == "kernel" and kernel_class(event["name"]) in seconds:
            seconds[kernel_class(event["name"])] += event["dur"] * 1e-6
    return seconds


def test_megatron_import_links_every_kernel(megatron: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(MEGATRON[0]), "-o", str(megatron / "r0.yaml"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["unlinked"] == {}
    assert info["collectives"] == {"all_reduce": 84}
    # 40 layers x 2 tensor-parallel all-reduces of micro-batch x seq x hidden fp16 values
    # (4 x 2048 x 4096 x 2 bytes), plus 4 smaller ones (embedding and loss).
    assert info["collective_bytes"]["all_reduce"] >= 80 * 4 * 2048 * 4096 * 2


@pytest.mark.parametrize(("content", "expect"), [
    (b"", "expected a PyTorch profiler trace"),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel"', "truncated or malformed JSON"),
    (b"\x1f\x8b\x08\x00garbage", "corrupted gzip data"),
    (b"[1, 2, 3]", "expected a PyTorch profiler trace"),
    (b'{"schemaVersion": 1, "traceEvents": []}', "expected a PyTorch profiler trace"),
    (b'{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1}]}',
     "holds no GPU kernels"),
])
def test_broken_traces_exit_2_with_one_line(tmp_path: Path, content: bytes, expect: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "rank0.json"
    path.write_bytes(content)
    assert main(["import", str(path), "-o", str(tmp_path / "w.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expect in err[0] and "rank0.json" in err[0], err


def test_truncated_gzip_member(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = gzip.compress(MEGATRON[0].read_bytes()[:0] + gzip.decompress(MEGATRON[0].read_bytes()))
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    assert main(["import", str(path), "-o", str(tmp_path / "w.yaml")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_forced_wrong_format_exits_2(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    nsys = sorted((TRACES / "extra-p_extrap").glob("*.sqlite"))[0]
    assert main(["import", str(nsys), "--format", "pytorch-et", "-o",
                 str(tmp_path / "w.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and nsys.name in err[0], err


CHAKRA = sorted((TRACES / "astra-sim_astra-sim").glob("*.et")) + sorted(
    (TRACES / "mlcommons_chakra").glob("*.et"))


@pytest.mark.parametrize("path", CHAKRA, ids=lambda p: p.name[-30:])
def test_chakra_fixtures_import(path: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(path), "-o", str(tmp_path / "w.yaml"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert sum(info["events_by_class"].values()) > 0


def test_chakra_export_reads_back_the_same_workload(megatron: Path) -> None:
    from ghsim.importers.chakra import chakra_rank
    from ghsim.report.chakra import export_chakra, timeline_ranks

    scenario = megatron / "measured.yaml"
    scenario.write_text(SCENARIO.format(workload="tp8.workload.yaml", replay="measured"))
    result = simulate(load_scenario(scenario))
    assert result.timeline is not None
    written = export_chakra(result.timeline, megatron / "et")
    assert len(written) == 8
    original = timeline_ranks(result.timeline)[0].events
    back = chakra_rank(written[0]).events
    assert [(e.klass, e.collective, e.bytes, e.flops) for e in back] == [
        (e.klass, e.collective, e.bytes, e.flops) for e in original]
    assert all(abs(a.dur_us - b.dur_us) <= 0.5 for a, b in zip(back, original, strict=True))
    # in Chakra's microseconds: the first rank class's ops took what the simulation gave them
    spans = result.timeline.classes[0].spans
    assert sum(e.dur_us for e in back) == pytest.approx(
        sum(s.end - s.start for s in spans) * 1e6, abs=0.5 * len(spans))


@pytest.mark.parametrize(("content", "expect"), [
    (b"", "empty file"),
    (b"\x05\x0a\x03", "truncated Chakra trace"),
    (b"\x02\xff\xff", "not a Chakra protobuf trace"),
])
def test_broken_chakra_exits_2(tmp_path: Path, content: bytes, expect: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "rank.0.et"
    path.write_bytes(content)
    assert main(["import", str(path), "-o", str(tmp_path / "w.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expect in err[0], err


ALL_TRACES = sorted(p for p in TRACES.glob("*/*")
                    if not p.name.startswith(("LICENSE", "MANIFEST", "README")))


def test_the_fixtures_are_the_manifest() -> None:
    """Every shipped trace has its provenance line, and every line its file."""
    lines = (TRACES / "MANIFEST.tsv").read_text().splitlines()[1:]
    listed = {line.split("\t")[0] for line in lines}
    assert listed == {str(p.relative_to(TRACES)) for p in TRACES.glob("*/*")}
    assert len(MEGATRON) == 8 and all(p.exists() for p in KINETO)


@pytest.mark.parametrize("path", ALL_TRACES, ids=lambda p: p.name[-45:])
def test_every_shipped_trace_imports(path: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Each shipped trace imports (once: the largest take seconds); a single-rank Kineto
    profile is one rank's workload."""
    assert main(["import", str(path), "-o", str(tmp_path / "w.yaml"), "--json"]) == 0, \
        capsys.readouterr().err
    info = json.loads(capsys.readouterr().out)
    assert sum(info["events_by_class"].values()) > 0
    if path in KINETO:
        assert info["ranks"] == 1, info


def test_broken_nsys_export_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "profile.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    assert main(["import", str(path), "-o", str(tmp_path / "w.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not an Nsight Systems SQLite export" in err[0], err


def test_execution_trace_replays_recost(tmp_path: Path) -> None:
    et = TRACES / "facebookresearch_param" / "et_replay__tests__inputs__linear_et.json.gz"
    assert main(["import", str(et), "-o", str(tmp_path / "et.workload.yaml"), "--json"]) == 0
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO.format(workload="et.workload.yaml", replay="recost").replace(
        "num_gpus: 8", "num_gpus: 1").replace("tp: 8", "tp: 1").replace(
        "system: dgx-a100", "system: gh200-single"))
    result = simulate(load_scenario(scenario))
    assert result.step_time_s > 0
    assert result.compute_breakdown_s["gemm"] > 0


def test_stream_waits_become_dependencies() -> None:
    from ghsim.importers.kineto import read_kineto

    alexnet = HTA / ("tests__data__critical_path__alexnet__"
                     "benchmark_result_2869224_1695835535_trace.json.gz")
    rank = read_kineto(alexnet)
    linked = [(i, a) for i, e in enumerate(rank.events) for a in e.after]
    assert linked, "cudaStreamWaitEvent pairs should link ops across streams"
    for consumer, producer in linked:
        assert rank.events[consumer].stream != rank.events[producer].stream
        assert rank.events[producer].start_us + rank.events[producer].dur_us <= \
            rank.events[consumer].start_us + 1.0  # the recorded timeline honours each wait


def test_execution_trace_fills_shapes_a_profile_lacks(tmp_path: Path) -> None:
    from ghsim.importers.cli_import import import_traces

    original = import_traces([str(MEGATRON[0])], tmp_path / "a.yaml")[0]
    trace = json.loads(gzip.decompress(MEGATRON[0].read_bytes()))
    for event in trace["traceEvents"]:
        (event.get("args") or {}).pop("Input Dims", None)  # a profile without record_shapes
    stripped = tmp_path / "kineto_0.json"
    stripped.write_text(json.dumps(trace))
    bare = import_traces([str(stripped)], tmp_path / "b.yaml")[0]
    assert not any(e.flops for e in bare.events)
    et = next((TRACES / "astra-sim_astra-sim").glob("*megatron_et_0.json.gz"))
    (joined,) = import_traces([str(et), str(stripped)], tmp_path / "c.yaml")
    assert [e.flops for e in joined.events] == [e.flops for e in original.events]


def test_a_folder_of_mixed_formats_imports(tmp_path: Path) -> None:
    """Chakra .et files beside Kineto and execution-trace pairs (issue 12: this crashed)."""
    from ghsim.importers.cli_import import import_traces

    folder = tmp_path / "mixed"
    folder.mkdir()
    source = TRACES / "astra-sim_astra-sim"
    for path in [*sorted(source.glob("*.et"))[:2], *sorted(source.glob("*kineto_0*")),
                 *sorted(source.glob("*megatron_et_0*"))]:
        (folder / path.name).write_bytes(path.read_bytes())
    ranks = import_traces([str(folder)], tmp_path / "w.yaml")
    assert len(ranks) == 3
    assert (tmp_path / "w.yaml").exists()
