"""``simulate(scenario) -> Result``: lower, build, cost, replay, attribute."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ghsim.config import Scenario, inputs_of, scenario_from_spec, unread_overrides
from ghsim.config.schema import ScenarioSpec
from ghsim.costmodel.gpu import clock_view, gpu_cost_model, unmodelled_power_cap
from ghsim.costmodel.host import host_cost_model
from ghsim.engine.attribution import breakdown, stage_load
from ghsim.engine.links import busiest_links, host_usage
from ghsim.engine.result import Result
from ghsim.engine.simulator import KernelIssue, Simulator, Timeline
from ghsim.errors import LimitError
from ghsim.fabric.traffic import traffic_planner
from ghsim.importers.replay import replay_workload
from ghsim.importers.workload_file import read_workload
from ghsim.workload.ir import Workload
from ghsim.workload.lower import lower
from ghsim.workload.microbench import microbenchmark_workload
from ghsim.workload.shapes import GEMM_DTYPE
from ghsim.workload.summary import memory_profile, timed_peak

_WHY = {
    "pipeline_bubble": "pipeline stages wait for each other during warm-up and cool-down",
    "tp": "tensor-parallel collectives run between the layer's kernels on the compute stream",
    "cp": "context-parallel key/value exchanges are exposed",
    "dp": "data-parallel gradient or weight collectives are not hidden behind compute",
    "ep": "expert-parallel token exchanges (MoE dispatch and combine all-to-alls) run between "
          "the layer's kernels on the compute stream",
    "pp": "pipeline activations and gradients are exposed while in flight",
    "cpu": "the host CPU keeps the GPU waiting (the optimizer step on the host, kernels "
           "shorter than the framework's time to issue them, or, in an imported trace, kernels "
           "launched later than the GPU could run them)",
    "offload": "copies between HBM and host memory over the host link are exposed",
    "migration": "unified-memory page migration stalls the kernels that fault",
    "data_loading": "the data loader's workers cannot read the step's samples as fast as the "
                    "GPUs consume them, however far ahead they prefetch",
}


_WHY_REPLAY = {
    "cpu": "kernels start as late as the trace's own host CPU launched them (the launch timing "
           "recorded with the trace, not the simulated system's CPU)",
}


def _bottleneck(parts: dict[str, float], compute: dict[str, float], step: float,
                links: dict[str, str], replay: bool = False) -> dict[str, Any]:
    key = max(parts, key=lambda k: parts[k])
    share = parts[key] / step if step else 0.0
    if key == "compute":
        matmul = compute["gemm"] + compute["attention"] + compute["recompute"]
        memory_bound = compute["elementwise"] + compute["optimizer"]
        resource = "gpu_tensor_cores" if matmul >= memory_bound else "hbm_bandwidth"
        why = (f"GPU kernels take {share:.0%} of the step; matrix work is "
               f"{matmul / max(parts['compute'], 1e-30):.0%} of them")
        if compute["recompute"]:
            why += f", recomputation {compute['recompute'] / parts['compute']:.0%}"
    else:
        resource = {"pipeline_bubble": "pipeline_schedule"}.get(key, links.get(key, key))
        reason = (_WHY_REPLAY if replay else {}).get(key) or _WHY.get(key, key)
        why = f"{reason}: {share:.0%} of the step"
    return {"resource": resource, "cause": key, "share": share, "why": why}


def _group_links(workload: Workload) -> dict[str, str]:
    groups = workload.classes[0].groups
    names: dict[str, str] = {}
    for kind in ("tp", "cp", "ep", "dp", "pp"):
        if groups[kind].size > 1:
            names[kind] = "nic" if groups[kind].domains > 1 else "nvlink"
    return names


def _host_links(spec: ScenarioSpec, link: str, workload: Workload) -> dict[str, str]:
    cpu = "grace_cpu" if spec.system.node.cpu.name.startswith("grace") else "host_cpu"
    if "replay" in workload.attrs:
        # A replayed trace waits on the launches its own host recorded, not on the simulated
        # system's CPU: Grace only when the trace was recorded on Grace Hopper.
        devices = workload.attrs.get("devices") or [""]
        cpu = "grace_cpu" if all("GH200" in d.upper() for d in devices) else "host_cpu"
    path = "nvlink_c2c" if link == "c2c" else "pcie"
    return {"offload": path, "migration": f"{path} (page migration)", "cpu": cpu}


def memory_capacities(spec: ScenarioSpec, gpus_per_node: int) -> dict[str, float]:
    """Capacity per GPU of each memory tier (host memory shared by the node's GPUs in use)."""
    node = spec.system.node
    gpu, cpu = node.gpu.gpu, node.cpu.cpu
    assert gpu is not None and cpu is not None
    host_tier = "lpddr" if cpu.memory.type == "lpddr5x" else "host_ddr"
    return {"hbm": gpu.memory.capacity_bytes,
            host_tier: cpu.memory.capacity_bytes * node.cpus / gpus_per_node}


def _hbm_peak(scenario: Scenario) -> float:
    return max(memory_profile(c).peak for c in lower(scenario).classes)


def _peak_batch(scenario: Scenario) -> Any:
    """The training block with only as many micro-batches as the schedule keeps in flight at
    its memory peak (1F1B holds at most pp, the interleaved schedule at most 2 pp vp, per
    stage), so asking another strategy for its HBM peak does not lower the whole step."""
    training, layout = scenario.spec.training, scenario.layout
    in_flight = 2 * layout.pp * layout.vp + 1
    if layout.micro_batches <= in_flight:
        return training
    return training.model_copy(update={
        "global_batch": training.micro_batch * layout.dp * in_flight})


def _what_would_fit(scenario: Scenario, capacity: float) -> str:
    """A sentence naming an offload strategy under which the step would fit, if one does."""
    for strategy in ("optimizer", "activations", "params"):
        if strategy == scenario.spec.offload.strategy:
            continue
        offload = scenario.spec.offload.model_copy(update={"strategy": strategy})
        other = scenario_from_spec(scenario.spec.model_copy(update={
            "offload": offload, "training": _peak_batch(scenario)}), scenario.source)
        try:
            peak = _hbm_peak(other)
        except LimitError:
            continue  # too large to lower with this strategy: not a suggestion to make
        if peak <= capacity:
            return (f"; {strategy} offload would bring the HBM peak to {peak / 2**30:.0f} GiB "
                    f"of {capacity / 2**30:.0f}")
    return "; no single offload strategy makes it fit: add GPUs or parallelism"


def memory_placement(workload: Workload, tiers: list[str]) -> dict[str, dict[str, float]]:
    """Where the model states live, per GPU: for each tier, the weights, gradients and optimizer
    states the lowered step places there and its peak replayed in program order (of the rank
    class with the highest peak in that tier). ``ghsim run`` reports it beside the timed peaks
    and ``ghsim inspect`` shows it: one computation, so the two never disagree."""
    placement: dict[str, dict[str, float]] = {}
    for tier in tiers:
        heaviest = max((memory_profile(c, tier) for c in workload.classes), key=lambda p: p.peak)
        placement[tier] = {"weights": heaviest.weights, "gradients": heaviest.gradients,
                           "optimizer": heaviest.optimizer,
                           "model_states": heaviest.weights + heaviest.gradients
                           + heaviest.optimizer,
                           "activations": heaviest.activations, "peak": heaviest.peak}
    return placement


def records_memory(workload: Workload) -> bool:
    """Whether the workload records its allocations (an imported trace does not)."""
    return any(c.memory for c in workload.classes)


def _memory(scenario: Scenario, workload: Workload,
            timeline: Timeline) -> tuple[dict[str, Any], list[str]]:
    """Peak of each memory tier inside the step (per GPU), when it happens, where the model
    states live, and whether the step fits; warnings say what does not fit and what would make
    it fit. A workload without allocations (a replayed trace) has memory "not tracked"."""
    if not records_memory(workload):
        return {"tracked": False, "fits": None, "does_not_fit": []}, []
    capacities = memory_capacities(scenario.spec, scenario.layout.gpus_per_node)
    placement = memory_placement(workload, list(capacities))
    memory: dict[str, Any] = {}
    warnings: list[str] = []
    short: list[str] = []
    for tier, capacity in capacities.items():
        peak, when = max((timed_peak(c.rank_class, tier, c.end_of) for c in timeline.classes),
                         key=lambda x: x[0])
        states = placement[tier]
        memory[tier] = {"peak_bytes": peak, "capacity_bytes": capacity, "peak_at_s": when,
                        "states_bytes": {k: states[k] for k in ("weights", "gradients",
                                                                "optimizer")}}
        if peak > capacity:
            short.append(tier)
            message = (f"the step does not fit: {tier.upper()} peak {peak / 2**30:.1f} GiB "
                       f"exceeds {capacity / 2**30:.1f} GiB per GPU")
            if tier == "hbm":
                message += _what_would_fit(scenario, capacity)
            warnings.append(message)
    memory["fits"] = not short
    memory["does_not_fit"] = short
    return memory, warnings


def _microbenchmark_result(scenario: Scenario, timeline: Timeline, parts: dict[str, float],
                           compute: dict[str, float]) -> Result:
    """The Result of a one-operation microbenchmark: its time and achieved bandwidth."""
    bench = scenario.spec.microbenchmark
    assert bench is not None
    step = timeline.step_time_s
    nbytes = bench.gib * 2**30
    return Result(
        step_time_s=step, tokens_per_s=None, tokens_per_s_per_gpu=None,
        model_tflops_per_gpu=None, mfu=None, breakdown_s=parts, compute_breakdown_s=compute,
        bottleneck={"resource": bench.operation, "cause": "microbenchmark", "share": 1.0,
                    "why": f"{bench.operation} of {bench.gib:g} GiB at "
                           f"{nbytes / step / 1e9:.1f} GB/s"},
        memory={"tracked": False, "fits": None, "does_not_fit": []},
        host=host_usage(timeline, step, "microbenchmark"),
        links=busiest_links(timeline, step), warnings=[],
        inputs=inputs_of(scenario),
        workload={"microbenchmark": bench.operation, "bytes": nbytes,
                  "bandwidth_gb_s": nbytes / step / 1e9},
        gpu_clock=clock_view(scenario.spec.system.node, scenario.source),
        timeline=timeline,
    )


def workload_path(scenario: Scenario) -> Path | None:
    """The workload file a replaying scenario reads (relative to the current folder, else to
    the scenario's file), or None."""
    if scenario.spec.workload is None:
        return None
    path = Path(scenario.spec.workload)
    if not path.is_absolute() and not path.exists():
        path = Path(scenario.source).parent / path
    return path


def scenario_workload(scenario: Scenario) -> Workload:
    """The work to simulate: a microbenchmark, an imported trace, or the lowered model."""
    spec = scenario.spec
    if spec.microbenchmark is not None:
        return microbenchmark_workload(scenario)
    path = workload_path(scenario)
    if path is not None:
        document = read_workload(path)
        workload = replay_workload(scenario, document, spec.replay)
        workload.attrs["devices"] = [str(r.get("device") or "") for r in document["ranks"]]
        return workload
    return lower(scenario)


LAUNCH_BOUND_SHARE = 0.5
"""A replayed step whose main stream waits on kernel launches for at least this share of it is
called launch-bound."""


def _replay_warnings(workload: Workload, timeline: Timeline) -> list[str]:
    if "replay" not in workload.attrs:
        return []
    measured = workload.attrs["measured_s"]
    replayed = [c.end_s for c in timeline.classes]
    if not all(measured):
        notes = [f"replay {workload.attrs['replay']}: {len(measured)} ranks; the trace records "
                 f"no durations, replayed {max(replayed) * 1e3:.1f} ms"]
    else:
        worst = max(abs(r / m - 1) for r, m in zip(replayed, measured, strict=True))
        notes = [f"replay {workload.attrs['replay']}: {len(measured)} ranks, measured "
                 f"iteration {max(measured) * 1e3:.1f} ms, replayed {max(replayed) * 1e3:.1f} "
                 f"ms (worst rank {worst:.1%} apart)"]
    if workload.attrs["replay"] != "recost":
        return notes
    notes.append(f"{workload.attrs['fallback_share']:.0%} of the measured kernel time could "
                 "not be re-costed and was scaled from the source GPU's peaks")
    # Re-costed kernels still start no earlier than the trace's host launched them.
    waits = [(sum(wait for op, wait in c.launch_wait_s.items()
                  if c.rank_class.ops[op].stream == "compute") / end, c.rank_class.name)
             for c, end in zip(timeline.classes, replayed, strict=True) if end > 0]
    share, name = max(waits, default=(0.0, ""))
    if share >= LAUNCH_BOUND_SHARE:
        notes.append(f"the trace is launch-bound: on {name} the GPU waits {share:.0%} of the "
                     "replayed step for kernels its host CPU had not launched yet; launch times "
                     "are replayed as recorded, so faster hardware cannot shorten that part (a "
                     "trace with less host overhead, e.g. with CUDA graphs, would)")
    return notes


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Keep Python's cyclic garbage collector out of lowering and simulation: they allocate
    millions of small acyclic objects, and the collector's passes over them cost a quarter to
    a third of the run (nothing they build is freed by it)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _kernel_issue(spec: ScenarioSpec, workload: Workload) -> KernelIssue:
    """The host thread issuing the lowered step's kernels; none for a replayed trace (its own
    launch times are replayed) or a microbenchmark."""
    cpu = spec.system.node.cpu.cpu
    per_kernel = cpu.compute.kernel_issue_us if cpu is not None else None
    if not per_kernel or "replay" in workload.attrs or spec.microbenchmark is not None:
        return KernelIssue()
    extra = (cpu.compute.kernel_launch_us or 0.0) if cpu is not None else 0.0
    backward = (cpu.compute.backward_issue_ratio or 1.0) if cpu is not None else 1.0
    return KernelIssue(per_kernel * 1e-6, spec.training.cuda_graphs, extra * 1e-6, backward)


def data_loading_s(scenario: Scenario) -> float:
    """Seconds a rank's data loader needs, in steady state, for one step's samples (every
    micro-batch's, read by its workers side by side; ``training.data_loading``): a step takes
    at least this, since the loader runs ahead of the training loop but cannot outpace its own
    workers. 0 where the scenario does not say."""
    loading = scenario.spec.training.data_loading
    if loading is None:
        return 0.0
    samples = scenario.layout.micro_batches * scenario.spec.training.micro_batch
    return samples * loading.sample_read_ms * 1e-3 / loading.workers


def simulate(scenario: Scenario) -> Result:
    """Simulate one optimizer step of ``scenario``."""
    with _collector_paused():
        return _simulate(scenario)


def _simulate(scenario: Scenario) -> Result:
    spec, layout = scenario.spec, scenario.layout
    workload = scenario_workload(scenario)
    clock = clock_view(spec.system.node, scenario.source, spec.num_gpus)
    gpu = gpu_cost_model(spec.system.node.gpu, clock["step_ghz"],
                         grouped_gap_us=spec.training.grouped_gemm_gap_us,
                         attention=spec.training.attention)
    planner = traffic_planner(spec.system, layout)
    host = host_cost_model(spec.system)
    overlap = spec.parallelism.tp_comm_overlap and spec.parallelism.sequence_parallel
    timeline = Simulator(workload, gpu, planner, host, overlap, _kernel_issue(spec, workload),
                         spec.parallelism.moe_a2a_overlap).run()
    step = timeline.step_time_s
    parts, compute = breakdown(timeline)
    if spec.microbenchmark is not None:
        return _microbenchmark_result(scenario, timeline, parts, compute)
    loader, loading = data_loading_s(scenario), []
    if loader > step:  # the GPUs wait for samples (not in the trace, which shows their work)
        parts["data_loading"] = loader - step
        loading = [f"the data loader paces the step: {loader:.3g} s of sample reads a step "
                   f"against {step:.3g} s of GPU work (training.data_loading); the trace shows "
                   "the work only"]
        step = loader
    host_link = spec.system.node.gpu.gpu.host_link.type if spec.system.node.gpu.gpu else "c2c"
    # A replayed trace carries neither tokens nor model FLOPs: those rates are not applicable.
    tokens_per_s = layout.tokens_per_step / step if workload.tokens_per_step else None
    model_flops_per_gpu = (workload.model_flops_per_step / step / layout.num_gpus
                           if workload.model_flops_per_step else None)
    # MFU against the datasheet peak: a capped GPU shows the utilisation it loses
    peak = gpu.rated_peak_of(GEMM_DTYPE[spec.training.precision])
    memory, warnings = _memory(scenario, workload, timeline)
    warnings += _replay_warnings(workload, timeline)
    cap = unmodelled_power_cap(spec.system.node)
    warnings += [cap] if cap else []
    warnings += loading
    warnings += unread_overrides(scenario)
    return Result(
        step_time_s=step,
        tokens_per_s=tokens_per_s,
        tokens_per_s_per_gpu=None if tokens_per_s is None else tokens_per_s / layout.num_gpus,
        model_tflops_per_gpu=None if model_flops_per_gpu is None else model_flops_per_gpu / 1e12,
        mfu=None if model_flops_per_gpu is None else model_flops_per_gpu / peak,
        breakdown_s=parts,
        compute_breakdown_s=compute,
        bottleneck=_bottleneck(parts, compute, step,
                               {**_group_links(workload), **_host_links(spec, host_link, workload)},
                               replay="replay" in workload.attrs),
        memory=memory,
        host=host_usage(timeline, step, host_link),
        links=busiest_links(timeline, step),
        warnings=warnings,
        inputs=inputs_of(scenario),
        workload={"rank_classes": len(workload.classes),
                  "ops": sum(len(c.ops) for c in workload.classes),
                  "model_flops_per_step": workload.model_flops_per_step,
                  "hardware_flops_per_step": workload.hardware_flops_per_step},
        gpu_clock=clock,
        stages=stage_load(timeline),
        timeline=timeline,
    )
