"""``simulate(scenario) -> Result``: lower, build, cost, replay, attribute."""

from __future__ import annotations

from typing import Any

from ghsim.config import Scenario
from ghsim.costmodel.collectives import CommCostModel, comm_cost_model
from ghsim.costmodel.gpu import gpu_cost_model
from ghsim.engine.attribution import breakdown, critical_class
from ghsim.engine.result import Result
from ghsim.engine.simulator import Simulator, Timeline
from ghsim.version import __version__
from ghsim.workload.ir import Workload
from ghsim.workload.lower import lower
from ghsim.workload.shapes import GEMM_DTYPE
from ghsim.workload.summary import memory_profile

_WHY = {
    "pipeline_bubble": "pipeline stages wait for each other during warm-up and cool-down",
    "tp": "tensor-parallel collectives run between the layer's kernels on the compute stream",
    "cp": "context-parallel key/value exchanges are exposed",
    "dp": "data-parallel gradient or weight collectives are not hidden behind compute",
    "pp": "pipeline activations and gradients are exposed while in flight",
}


def _bottleneck(parts: dict[str, float], compute: dict[str, float], step: float,
                links: dict[str, str]) -> dict[str, Any]:
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
        why = f"{_WHY.get(key, key)}: {share:.0%} of the step"
    return {"resource": resource, "cause": key, "share": share, "why": why}


def _links(timeline: Timeline, step: float) -> list[dict[str, Any]]:
    cls = critical_class(timeline)
    assert cls.links is not None
    return [{"name": f"{cls.rank_class.name}.{name}", "bytes": usage.bytes,
             "utilization": usage.busy_s / step if step else 0.0}
            for name, usage in sorted(cls.links.usage.items())]


def _group_links(workload: Workload, comm: CommCostModel) -> dict[str, str]:
    groups = workload.classes[0].groups
    names: dict[str, str] = {}
    for kind in ("tp", "cp", "dp"):
        if groups[kind].size > 1:
            names[kind] = comm.channel(groups[kind]).link
    names["pp"] = "nic" if groups["pp"].domains > 1 else "nvlink"
    return names


def simulate(scenario: Scenario) -> Result:
    """Simulate one optimizer step of ``scenario``."""
    spec, layout = scenario.spec, scenario.layout
    workload = lower(scenario)
    gpu = gpu_cost_model(spec.system.node.gpu)
    comm = comm_cost_model(spec.system)
    timeline = Simulator(workload, gpu, comm, layout.gpus_per_domain).run()
    step = timeline.step_time_s
    parts, compute = breakdown(timeline)
    tokens_per_s = layout.tokens_per_step / step
    model_flops_per_gpu = workload.model_flops_per_step / step / layout.num_gpus
    peak = gpu.peak_flops[GEMM_DTYPE[spec.training.precision]]
    profiles = [memory_profile(c) for c in workload.classes]
    hbm_peak = max(p.peak for p in profiles)
    gpu_part = spec.system.node.gpu.gpu
    assert gpu_part is not None
    capacity = gpu_part.memory.capacity_bytes
    warnings = []
    if hbm_peak > capacity:
        warnings.append(f"the step does not fit: HBM peak {hbm_peak / 2**30:.1f} GiB exceeds "
                        f"{capacity / 2**30:.1f} GiB per GPU")
    if spec.offload.strategy != "none":
        warnings.append(f"offload strategy {spec.offload.strategy!r} is not simulated yet; "
                        "the step runs as if nothing were offloaded")
    return Result(
        step_time_s=step,
        tokens_per_s=tokens_per_s,
        tokens_per_s_per_gpu=tokens_per_s / layout.num_gpus,
        model_tflops_per_gpu=model_flops_per_gpu / 1e12,
        mfu=model_flops_per_gpu / peak,
        breakdown_s=parts,
        compute_breakdown_s=compute,
        bottleneck=_bottleneck(parts, compute, step, _group_links(workload, comm)),
        memory={"hbm": {"peak_bytes": hbm_peak, "capacity_bytes": capacity},
                "fits": hbm_peak <= capacity},
        links=_links(timeline, step),
        warnings=warnings,
        inputs={"scenario": spec.model_dump(mode="json"), "source": scenario.source,
                "overrides": list(scenario.overrides), "digest": scenario.digest(),
                "ghsim_version": __version__},
        workload={"rank_classes": len(workload.classes),
                  "ops": sum(len(c.ops) for c in workload.classes),
                  "model_flops_per_step": workload.model_flops_per_step,
                  "hardware_flops_per_step": workload.hardware_flops_per_step},
        timeline=timeline,
    )
