"""Defects found by trying ghsim as a new user (issue 12, item 6): sweep reports and plots,
80-column output, the sweep cache, reproducible outputs, what does not fit, replayed traces,
the run report and trace, inspect against run, and finding files by name."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import random
import re
import types
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from rich.console import Console

from ghsim.cli import main
from ghsim.config import load_scenario
from ghsim.config.search import known_names
from ghsim.config.sweep import load_sweep
from ghsim.engine.simulate import simulate
from ghsim.errors import InputError
from ghsim.report import console as render
from ghsim.report import plots
from ghsim.sweep import run_sweep
from ghsim.sweep import runner as sweep_runner
from ghsim.sweep.outputs import write_outputs
from ghsim.sweep.runner import SweepOutcome, dask_install_hint
from tests.conftest import TRACES

BOX = set("┏┳┓┡╇┩│┃━─└┴┘┌┬┐├┼┤╭╮╰╯")
LONG_KEY = "system.node.gpu.gpu.host_link.bandwidth_gb_s"
SWEEP = f"""\
schema_version: 1
kind: sweep
name: fit-and-c2c
description: Offload or not on two GH200s, at two C2C bandwidths.
base: qwen3-14b-gh200
grid:
  system: [gh200-single, gh200-nvl2]
  offload.strategy: [none, optimizer]
cases:
  - {{{LONG_KEY}: 225}}
  - {{{LONG_KEY}: 450}}
"""


@contextlib.contextmanager
def _columns(width: int) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", str(width))
        yield


def _plain_80(text: str) -> None:
    """Every line fits in 80 columns, without box drawing, colour or a cut cell."""
    assert all(len(line) <= 80 for line in text.splitlines()), max(text.splitlines(), key=len)
    assert not BOX & set(text), "box drawing off a terminal"
    assert "\x1b[" not in text, "colour off a terminal"


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The sweep above run once through the command line at 80 columns, with -o."""
    folder = tmp_path_factory.mktemp("sweep")
    path = folder / "sweep.yaml"
    path.write_text(SWEEP)
    out = folder / "out"
    stdout = io.StringIO()
    with _columns(80), contextlib.redirect_stdout(stdout):
        assert main(["sweep", str(path), "--workers", "8", "-o", str(out)]) == 0
    return {"path": path, "out": out, "stdout": stdout.getvalue()}


def _results(swept: dict[str, Any]) -> list[dict[str, Any]]:
    return list(json.loads((swept["out"] / "results.json").read_text())["results"])


# 1. What does not fit is never best, is left out of the sensitivity plot, and is marked.

def test_a_point_that_does_not_fit_is_never_best_nor_in_the_sensitivity_plot(
        swept: dict[str, Any]) -> None:
    results = _results(swept)
    short = [r for r in results if r["fits"] is False]
    assert short and all(r["overrides"]["offload.strategy"] == "none" for r in short)
    fastest = min(results, key=lambda r: r["step_time_s"])
    assert fastest["fits"] is False  # without offload it is faster, but it does not fit
    best = json.loads((swept["out"] / "results.json").read_text())["best"]
    assert best["fits"] is True
    figure = plots.sensitivity(results)
    assert figure is not None
    (line,) = figure.axes[0].get_lines()
    fitting = [r for r in results if r["fits"]]
    for x, y in zip(*line.get_data(), strict=True):
        assert y == min(r["step_time_s"] for r in fitting if r["overrides"][LONG_KEY] == x)
    report = (swept["out"] / "report.html").read_text()
    assert "Best that fits in memory: " + best["label"] in report
    assert "no: hbm" in report


def test_the_csv_says_which_tier_does_not_fit_and_the_host_link_traffic(
        swept: dict[str, Any]) -> None:
    with (swept["out"] / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 8
    for row in rows:
        assert row["does_not_fit"] == ("hbm" if row["offload.strategy"] == "none" else "")
        assert 0 <= float(row["host_link_utilization"]) <= 1
        assert row["busiest_stage_share"] == ""  # one GPU: no pipeline stages to compare
        moved = float(row["h2d_bytes"]) + float(row["d2h_bytes"])
        assert (moved > 0) == (row["offload.strategy"] == "optimizer")


def _records(count: int, systems: tuple[str, ...] = ("gh200-single", "gh200-nvl2")
             ) -> list[dict[str, Any]]:
    return [{"label": f"system={systems[i % len(systems)]}, offload.strategy=s{i}, "
                      "a.very.long.key.path.that.goes.on.and.on=12345",
             "overrides": {"system": systems[i % len(systems)], "offload.strategy": f"s{i}"},
             "step_time_s": 10.0 + i, "hbm_peak_bytes": 50e9 + 5e9 * (i // 2),
             "hbm_capacity_bytes": 96e9, "fits": i % 5 != 4, "does_not_fit": "hbm",
             "breakdown_s": {"compute": 9.0, "offload": 1.0 + i}} for i in range(count)]


def _inside(figure: Any) -> None:
    """Every tick label of every axes lies inside the saved figure, and the legend outside
    the axes (it covers no data)."""
    renderer = figure.canvas.get_renderer()
    figure.canvas.draw()
    for axes in figure.axes:
        for label in axes.get_yticklabels():
            assert label.get_window_extent(renderer).x0 >= 0, label.get_text()
        legend = axes.get_legend()
        if legend is not None:
            assert legend.get_window_extent(renderer).x0 >= \
                axes.get_window_extent(renderer).x1 - 1


def test_each_system_has_its_own_marker_and_colour_and_the_legend_is_outside() -> None:
    figure = plots.step_vs_hbm(_records(6))
    axes = figure.axes[0]
    series: dict[str, tuple[Any, Any]] = {}
    for collection in axes.collections:
        if collection.get_label().startswith("gh200") and len(collection.get_offsets()):
            path = collection.get_paths()[0].vertices.round(3).tobytes()
            series[collection.get_label()] = (path, tuple(collection.get_edgecolor()[0]))
    assert set(series) == {"gh200-single", "gh200-nvl2"}
    (marker_a, colour_a), (marker_b, colour_b) = series.values()
    assert marker_a != marker_b and colour_a != colour_b
    _inside(figure)


def test_the_breakdown_says_it_shows_only_the_first_points_and_labels_fit() -> None:
    figure = plots.breakdown(_records(25))
    title = figure.axes[0].get_title()
    assert "20 of 25" in title
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    assert any("does not fit: hbm" in label.replace("\n", " ") for label in labels)
    _inside(figure)
    assert "of" not in plots.breakdown(_records(3)).axes[0].get_title()


# 2. 80 columns: nothing cut, plain text off a terminal.

def test_sweep_table_at_80_columns(swept: dict[str, Any]) -> None:
    text = swept["stdout"]
    _plain_80(text)
    assert "…" + "host_link.bandwidth_gb_s" in text
    assert f"…host_link.bandwidth_gb_s = {LONG_KEY}" in " ".join(text.split())  # the legend
    assert text.count("no: hbm") == 4
    for value in ("gh200-single", "gh200-nvl2", "optimizer"):
        assert value in text


def test_validation_table_at_80_columns() -> None:
    ids = ["swissai_llama31_8b_alps_256gpu_tp2_mbs4_s4096_and_some_more",
           "caraml_gpt800m_jedi_4gpu_mbs4_gbs2048_s2048"]
    outcomes = [{"id": i, "failed": None, "error": -0.25, "measured_step_time_s": 2.0,
                 "predicted_step_time_s": 1.5, "bottleneck": "gpu_tensor_cores"} for i in ids]
    summary = {"mape": 0.25, "max_abs_error": 0.25, "simulated": 2, "failed": 0}
    out = io.StringIO()
    render.render_validation(outcomes, summary, Console(file=out, width=80))
    text = out.getvalue()
    _plain_80(text)
    assert "…" not in text
    for point in ids:
        for part in point.split("_"):
            assert part in text


def test_inspect_at_80_columns_shows_every_key_path_whole(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["inspect", "gh200-nvl32"]) == 0
    text = capsys.readouterr().out
    _plain_80(text)
    assert "…" not in text
    assert main(["inspect", "gh200-nvl32", "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    for sources in view["part_sources"].values():
        for key in sources:
            for path in key.split(", "):
                assert path in text, path


def test_short_key() -> None:
    from ghsim.report.keys import short_key

    assert short_key(LONG_KEY) == "…host_link.bandwidth_gb_s"
    assert short_key("offload.strategy") == "offload.strategy"
    assert short_key("a." + "b" * 40) == "…" + "b" * 40


# 3. The cache: keyed by every input's content and the version; a bad entry is recomputed.

REPLAY = """\
schema_version: 1
kind: scenario
name: all-reduce-replay
system: dgx-a100
num_gpus: 8
model: llama2-7b
training: {seq_len: 2048, micro_batch: 4, global_batch: 4, precision: fp16}
parallelism: {tp: 8}
workload: ar.workload.yaml
replay: recost
"""
REPLAY_SWEEP = """\
schema_version: 1
kind: sweep
name: all-reduce
base: replay.yaml
grid:
  system: [dgx-a100, dgx-h100]
"""
ALL_REDUCE = sorted((TRACES / "astra-sim_astra-sim").glob("*all_reduce.*.et"))
MEGATRON_0 = next((TRACES / "astra-sim_astra-sim").glob("*megatron_kineto_0.json.gz"))


@pytest.fixture
def replay_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A two-point sweep of a replayed 1 MB all-reduce (8 ranks): quick to simulate."""
    assert main(["import", *map(str, ALL_REDUCE), "-o", str(tmp_path / "ar.workload.yaml"),
                 "--json"]) == 0
    capsys.readouterr()
    (tmp_path / "replay.yaml").write_text(REPLAY)
    (tmp_path / "sweep.yaml").write_text(REPLAY_SWEEP)
    return tmp_path


def _steps(outcome: SweepOutcome) -> list[float]:
    return [r["step_time_s"] for r in sorted(outcome.records, key=lambda r: r["index"])]


def test_a_reimported_workload_or_an_upgrade_is_not_served_from_the_cache(
        replay_sweep: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = replay_sweep / "cache"
    sweep = load_sweep(replay_sweep / "sweep.yaml")
    first = run_sweep(sweep, workers=1, cache_dir=cache)
    assert first.simulated == 2 and first.cached == 0
    again = run_sweep(sweep, workers=1, cache_dir=cache)
    assert again.cached == 2 and _steps(again) == _steps(first)
    # The workload file re-imported from another trace (here: every message twice as large).
    workload = replay_sweep / "ar.workload.yaml"
    document = yaml.safe_load(workload.read_text())
    for rank in document["ranks"]:
        rank["events"]["bytes"] = [2 * b if b else b for b in rank["events"]["bytes"]]
    workload.write_text(yaml.safe_dump(document, default_flow_style=None, sort_keys=False))
    sweep_runner._sweep.cache_clear()
    changed = run_sweep(sweep, workers=1, cache_dir=cache)
    assert changed.cached == 0 and changed.simulated == 2
    assert all(b > a for a, b in zip(_steps(first), _steps(changed), strict=True))
    # An upgrade of ghsim.
    monkeypatch.setattr(sweep_runner, "__version__", "99.0")
    upgraded = run_sweep(sweep, workers=1, cache_dir=cache)
    assert upgraded.cached == 0 and upgraded.simulated == 2


@pytest.mark.parametrize("content", [
    '{"index": 0, "label": "x", "step_time_', "[1, 2]", "null",
    "WRONG_TYPES",
])
def test_a_corrupt_cache_entry_is_recomputed(replay_sweep: Path, content: str) -> None:
    cache = replay_sweep / "cache"
    sweep = load_sweep(replay_sweep / "sweep.yaml")
    first = run_sweep(sweep, workers=1, cache_dir=cache)
    for entry in cache.glob("*.json"):
        record = json.loads(entry.read_text())
        if content == "WRONG_TYPES":
            record.update(step_time_s="fast", breakdown_s=[1, 2])
            entry.write_text(json.dumps(record))
        else:
            entry.write_text(content)
    again = run_sweep(sweep, workers=1, cache_dir=cache)
    assert again.cached == 0 and again.simulated == 2
    assert _steps(again) == _steps(first)
    assert run_sweep(sweep, workers=1, cache_dir=cache).cached == 2  # rewritten


# 4. Ties, reproducible files, workers.

def test_ties_are_ranked_by_overrides_not_by_completion() -> None:
    sweep = types.SimpleNamespace(spec=types.SimpleNamespace(rank_by="step_time_s",
                                                             descending=False),
                                  rank_by="step_time_s", descending=False)
    records = [{"index": i, "overrides": {"system": s, "parallelism.tp": tp},
                "step_time_s": 1.0, "fits": True}
               for i, (s, tp) in enumerate([("b", 2), ("a", 8), ("a", 2), ("b", 16)])]
    orders = set()
    for seed in range(6):
        shuffled = records[:]
        random.Random(seed).shuffle(shuffled)
        ranked = SweepOutcome(sweep, shuffled).ranked()  # type: ignore[arg-type]
        orders.add(tuple(r["index"] for r in ranked))
    assert orders == {(2, 1, 0, 3)}  # a/2, a/8, b/2, b/16


def test_report_and_plots_are_the_same_files_on_every_run(swept: dict[str, Any],
                                                          tmp_path: Path) -> None:
    sweep = load_sweep(swept["path"])
    outcome = run_sweep(sweep, workers=1, cache_dir=swept["out"] / "cache")
    assert outcome.cached == 8  # the second run comes from the cache
    write_outputs(outcome, tmp_path)
    for name in ("report.html", "step_vs_hbm.svg", "step_vs_hbm.png", "breakdown.svg",
                 "breakdown.png", "sensitivity.svg", "results.csv"):
        assert (tmp_path / name).read_bytes() == (swept["out"] / name).read_bytes(), name
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:", (tmp_path / "breakdown.svg").read_text())


class _Pool:
    """A ProcessPoolExecutor stand-in that runs inline and remembers its size."""

    sizes: ClassVar[list[int]] = []

    def __init__(self, max_workers: int) -> None:
        self.sizes.append(max_workers)

    def __enter__(self) -> _Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, function: Any, *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(function(*args))
        return future


def test_no_more_worker_processes_than_points(replay_sweep: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep_runner, "ProcessPoolExecutor", _Pool)
    _Pool.sizes.clear()
    outcome = run_sweep(load_sweep(replay_sweep / "sweep.yaml"), workers=64)
    assert len(outcome.records) == 2 and _Pool.sizes == [2]


# 5 and 9. Which tier does not fit, everywhere; a line on stderr.

def test_run_says_which_tier_does_not_fit(capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["run", "qwen3-14b-gh200", "--set", "offload.strategy=none"]) == 0
    captured = capsys.readouterr()
    assert "no: hbm" in captured.out
    _plain_80(captured.out)
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("ghsim: warning: the step does not fit in memory: HBM peak")
    assert main(["run", "qwen3-14b-gh200", "--set", "offload.strategy=optimizer"]) == 0
    assert capsys.readouterr().err == ""


# 6. Replayed traces: no MFU, no tokens, memory not tracked, the right CPU, launch-bound.

def test_a_replayed_trace_has_no_mfu_tokens_or_memory(replay_sweep: Path) -> None:
    result = simulate(load_scenario(replay_sweep / "replay.yaml"))
    data = json.loads(json.dumps(result.to_dict()))
    for key in ("mfu", "tokens_per_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu"):
        assert data[key] is None, key
    assert data["memory"]["tracked"] is False and data["memory"]["fits"] is None
    out = io.StringIO()
    render.render_result(data, "replay", Console(file=out, width=100))
    text = out.getvalue()
    assert re.search(r"MFU\s+n/a", text) and re.search(r"tokens/s \(per GPU\)\s+n/a", text)
    assert "not tracked" in text and "0 B" not in text


def test_a_launch_bound_trace_recosted_on_gh200(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(MEGATRON_0), "-o", str(tmp_path / "a100.workload.yaml"),
                 "--json"]) == 0
    capsys.readouterr()
    scenario = tmp_path / "recost.yaml"
    scenario.write_text(REPLAY.replace("dgx-a100", "gh200-single").replace(
        "num_gpus: 8", "num_gpus: 1").replace("tp: 8", "tp: 1").replace(
        "ar.workload.yaml", "a100.workload.yaml"))
    result = simulate(load_scenario(scenario))
    assert result.bottleneck["cause"] == "cpu"
    assert result.bottleneck["resource"] == "host_cpu"  # recorded on an x86 host, not Grace
    assert any(w.startswith("the trace is launch-bound") for w in result.warnings), \
        result.warnings


# 7. The run report states the setup; the trace has memory counters.

def test_run_report_and_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "qwen3-14b-gh200", "--set", "offload.strategy=optimizer", "-o",
                 str(tmp_path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    report = (tmp_path / "report.html").read_text()
    for text in ("gh200-nvl2", "Qwen3 14B", "tp 1 x pp 1 x cp 1 x dp 1",
                 "offload.strategy=optimizer", "<td class=\"l\">GPUs</td>"):
        assert text in report, text
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    counters: dict[str, list[float]] = {}
    for event in events:
        if event["ph"] == "C" and event["name"].startswith("memory"):
            counters.setdefault(event["name"], []).append(event["args"]["GiB"])
    assert set(counters) == {"memory HBM (GiB)", "memory LPDDR (host) (GiB)"}
    for name, tier in (("memory HBM (GiB)", "hbm"), ("memory LPDDR (host) (GiB)", "lpddr")):
        assert max(counters[name]) == pytest.approx(
            result["memory"][tier]["peak_bytes"] / 2**30, rel=1e-6)


# 8. inspect and run place the model states alike.

def test_inspect_and_run_agree_on_memory(capsys: pytest.CaptureFixture[str]) -> None:
    overrides = ["--set", "offload.strategy=optimizer"]
    assert main(["inspect", "qwen3-14b-gh200", *overrides, "--json"]) == 0
    view = json.loads(capsys.readouterr().out)["memory_per_gpu"]
    assert main(["run", "qwen3-14b-gh200", *overrides, "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["memory"]
    assert view["tiers"]["hbm"]["optimizer"] == 0 < view["tiers"]["lpddr"]["optimizer"]
    for tier in ("hbm", "lpddr"):
        for state in ("weights", "gradients", "optimizer"):
            assert view["tiers"][tier][state] == run[tier]["states_bytes"][state], (tier, state)
        assert view["tiers"][tier]["capacity"] == run[tier]["capacity_bytes"]


# 10. Names in sub-folders; the Dask hint from a checkout.

def test_microbenchmarks_are_found_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert "gh200-h2d-copy" in known_names("scenario")
    assert main(["run", "gh200-h2d-copy", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["workload"]["microbenchmark"] == "h2d_copy" and result["mfu"] is None
    assert main(["inspect", "gh200-stream-hbm", "--json"]) == 0


def test_dask_hint_from_a_checkout(replay_sweep: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert dask_install_hint().startswith("pip install -e '.[dask]'")
    monkeypatch.setitem(__import__("sys").modules, "distributed", None)
    with pytest.raises(InputError, match=r"pip install -e '\.\[dask\]'"):
        run_sweep(load_sweep(replay_sweep / "sweep.yaml"), scheduler="tcp://127.0.0.1:1")
