"""Find hardware and system keys that move no prediction, or move it the wrong way.

Each numeric key of a scenario's resolved system (a part's compute, memory, links, unified
memory; the node, domain and fabric) is halved, one at a time, on a suite of small scenarios
that between them run every mechanism (each offload strategy, FP8, FlashAttention-2, a power
cap, tensor, pipeline and data parallelism across nodes, a MoE layout, the microbenchmarks, a
served model with and without KV offload). A key that changes no scenario's result is listed:
either no mechanism reads it (a defect, or a key to document as descriptive) or the suite lacks
the scenario that would. A key a scenario refuses halved (a count that must divide the GPUs, a
cap below what the CPU draws) loses 10 % instead.

The keys that move nothing are sorted three ways: marked informational in the schema (``--set``
on one warns, a sweep over one is refused; tests/test_informational.py checks that such a key
changes no figure), moving no case for a reason stated in ``EXPLAINED``, and the rest, which
make the script exit 1. So does a key that moves a case the wrong way: half a capacity (a
bandwidth, an efficiency, a clock, a count of SMs, links or cores, a power limit) must never
make a step faster or a served model quicker, half a cost (a latency, a launch, a gap, a
slowdown, a fixed power draw, an oversubscription) never slower. And so does a scenario knob
turned toward more work (a larger batch, sequence or model, more recomputation, an overlap
turned off, eager kernels, a costlier optimizer, longer prompts, less KV cache: ``SLOWER``)
that speeds a training step or a served model up.

Run: ``python tools/dead_knobs.py [-j N]`` (about 40 s on two cores).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ghsim.config import load_any_scenario
from ghsim.config.cursor import informational_key
from ghsim.config.overrides import parse_key_path
from ghsim.config.schema import ScenarioSpec
from ghsim.config.serving_layout import ServingScenario
from ghsim.engine.simulate import simulate
from ghsim.errors import InputError
from ghsim.serving.simulate import simulate_serving

MICRO = Path(__file__).resolve().parents[1] / "configs" / "scenarios" / "microbench"
ONE = ["system=gh200-single", "num_gpus=1", "model.layers=4", "training.seq_len=2048",
       "training.global_batch=2", "training.micro_batch=1"]
SUITE: dict[str, tuple[str, list[str]]] = {
    "compute": ("llama3-8b-gh200", [*ONE, "offload.strategy=none"]),
    "optimizer": ("llama3-8b-gh200", [*ONE, "offload.strategy=optimizer"]),
    "optimizer_one_core": ("llama3-8b-gh200", [*ONE, "offload.strategy=optimizer",
                                               "offload.cpu_cores=1"]),
    "optimizer_overlap": ("llama3-8b-gh200", [*ONE, "offload.strategy=optimizer_overlap"]),
    "params": ("llama3-8b-gh200", [*ONE, "offload.strategy=params"]),
    "activations": ("llama3-8b-gh200", [*ONE, "offload.strategy=activations"]),
    "unified_memory": ("llama3-8b-gh200", [  # the whole 8B model: its Adam states spill
        "system=gh200-single", "num_gpus=1", "training.seq_len=2048", "training.global_batch=1",
        "training.micro_batch=1", "offload.strategy=unified_memory"]),
    "system_allocated": ("llama3-8b-gh200", [
        "system=gh200-single", "num_gpus=1", "training.seq_len=2048", "training.global_batch=1",
        "training.micro_batch=1", "offload.strategy=unified_memory",
        "system.node.gpu.gpu.unified_memory.allocator=system"]),
    "managed_h100": ("llama3-8b-gh200", [
        "system=dgx-h100", "num_gpus=1", "training.seq_len=2048", "training.global_batch=1",
        "training.micro_batch=1", "offload.strategy=unified_memory"]),
    "fp8": ("llama3-8b-gh200", [*ONE, "offload.strategy=none", "training.precision=fp8"]),
    "fp16": ("llama3-8b-gh200", [*ONE, "offload.strategy=none", "training.precision=fp16"]),
    "flash2": ("llama3-8b-gh200", [*ONE, "offload.strategy=none", "training.attention=flash2"]),
    "flash2_fp16": ("llama3-8b-gh200", [*ONE, "offload.strategy=none", "training.precision=fp16",
                                        "training.attention=flash2"]),
    "head_dim_64": ("llama3-8b-gh200", [*ONE, "offload.strategy=none", "model.heads=64"]),
    "head_dim_256": ("llama3-8b-gh200", [*ONE, "offload.strategy=none", "model.heads=16",
                                         "model.kv_heads=4"]),
    "standard_attention": ("llama3-8b-gh200", [*ONE, "offload.strategy=none",
                                               "training.attention=standard"]),
    "eager_rope": ("llama3-8b-gh200", [*ONE, "offload.strategy=none",
                                       "training.eager_ops=[rope]"]),
    "capped": ("llama3-8b-gh200", [*ONE, "offload.strategy=none",
                                   "system.node.power_limit_w=450"]),
    "quad_nodes": ("llama3-8b-gh200", [
        "system=gh200-quad", "num_gpus=32", "model.layers=4", "training.seq_len=2048",
        "training.global_batch=64", "training.micro_batch=1", "parallelism.tp=4",
        "parallelism.pp=2", "offload.strategy=none"]),
    "quad_staged": ("llama3-8b-gh200", [
        "system=gh200-quad", "num_gpus=32", "model.layers=4", "training.seq_len=2048",
        "training.global_batch=32", "training.micro_batch=1", "offload.strategy=optimizer",
        "system.node.gpudirect_rdma=false", "system.fabric.switch_radix=8",
        "system.fabric.oversubscription=2"]),
    "dgx_tp8": ("llama3-8b-gh200", [
        "system=dgx-h100", "num_gpus=16", "model.layers=4", "training.seq_len=2048",
        "training.global_batch=16", "training.micro_batch=1", "parallelism.tp=8",
        "training.precision=bf16", "offload.strategy=none"]),
    "moe": ("qwen3-235b-gh200-nvl32", ["model.layers=4", "model.moe.dense_layers=0",
                                       "training.global_batch=64"]),
    "moe_dgx": ("qwen3-235b-gh200-nvl32", [
        "system=dgx-h100", "num_gpus=16", "model.layers=4", "model.moe.dense_layers=0",
        "training.global_batch=64", "parallelism.ep=8", "parallelism.tp=1"]),
    "serving": ("llama3.1-70b-fp8-gh200-serving", ["inference.requests.count=64"]),
    **{f"microbench:{operation}": (str(MICRO / "gh200-cpu-reads-hbm.yaml"),
                                   [f"microbenchmark.operation={operation}"])
       for operation in ("cpu_write_device", "gpu_write_host")},
    **{f"microbench:{path.stem}": (str(path), [])
       for path in sorted(MICRO.glob("*.yaml"))},
}
"""name: (scenario, overrides): between them, every mechanism the simulator has."""

SKIP = ("schema_version",)

QUAD = ["system=gh200-quad", "model.layers=8", "training.seq_len=2048", "training.micro_batch=1",
        "offload.strategy=none"]
KNOB_SUITE: dict[str, tuple[str, list[str]]] = {
    name: SUITE[name] for name in ("compute", "optimizer", "params", "activations", "fp8",
                                   "moe")} | {
    "tp_pp_sp": ("llama3-8b-gh200", [*QUAD, "num_gpus=32", "training.global_batch=64",
                                     "parallelism.tp=4", "parallelism.pp=2",
                                     "parallelism.sequence_parallel=true",
                                     "parallelism.zero_stage=1",
                                     "parallelism.recompute=selective"]),
    "interleaved": ("llama3-8b-gh200", [*QUAD, "num_gpus=16", "training.global_batch=32",
                                        "parallelism.tp=2", "parallelism.pp=4",
                                        "parallelism.vp=2", "parallelism.recompute=none"]),
    "context": ("llama3-8b-gh200", [*QUAD, "num_gpus=8", "training.seq_len=8192",
                                    "training.global_batch=8", "parallelism.cp=2",
                                    "parallelism.tp=2"]),
    "offline": ("llama3.1-70b-fp8-gh200-serving", ["inference.requests.count=256"]),
    "server": ("llama3.1-70b-fp8-gh200-serving", ["inference.requests.count=400",
                                                  "inference.requests.arrival=poisson",
                                                  "inference.requests.rate_per_s=4.0"]),
    "kv_in_place": ("llama3.1-70b-fp8-gh200-long-context", ["inference.requests.count=40"]),
}
"""Scenarios for the scenario knobs: one GPU with each offload strategy and FP8, tensor,
pipeline (interleaved), context and data parallelism over quad GH200 nodes, and MoE; a served
model offline, under Poisson arrivals, and with 100k-token prompts whose KV cache GPUs read in
place from LPDDR5X."""
SLOWER: list[tuple[str, str | None, str]] = [
    *((key, None, "x2") for key in ("training.global_batch", "training.seq_len", "model.layers",
                                    "model.hidden", "model.ffn_hidden", "model.vocab",
                                    "model.kv_heads")),
    ("parallelism.recompute", "none", "selective"), ("parallelism.recompute", "selective", "full"),
    ("parallelism.overlap_grad_reduce", "true", "false"),
    ("parallelism.overlap_param_gather", "true", "false"),
    ("parallelism.tp_comm_overlap", "true", "false"),
    ("parallelism.moe_a2a_overlap", "true", "false"), ("parallelism.zero_stage", "1", "3"),
    ("training.cuda_graphs", "true", "false"), ("training.cross_entropy_fusion", "true", "false"),
    ("training.grad_nan_check", "false", "true"), ("training.main_grads", "bf16", "fp32"),
    ("training.optimizer", "adam", "ademamix"), ("training.attention", "flash", "standard"),
    *(("training.eager_ops", "[]", f"[{op}]") for op in ("norm", "rope", "activation",
                                                          "residual", "bias")),
    ("model.qk_norm", "false", "true"), ("model.bias", "false", "true"),
    ("model.mtp_layers", "0", "1"), ("offload.prefetch_layers", "2", "1"),
    ("offload.fraction", "0.5", "1.0"),
    ("inference.requests.input_tokens", None, "x2"),
    ("inference.scheduler.kv_memory_fraction", "0.9", "0.5"),
]
"""Scenario knobs whose direction is known: the step with the second value ("x2": twice the
scenario's) never runs faster than with the first (None: the scenario's own); a served model
never returns more output tokens a second. (Longer outputs may: each request's prompt is then
a smaller share of its work.)"""
KNOB_TOLERANCE = 1e-3
"""Megatron's gradient buckets cost a little host time at dp 1 too (a 1e-4 effect)."""

EXPLAINED: dict[str, str] = {
    "cpu.cpu.compute.cores": "the host's cores bound its arithmetic; a GPU's share of them is "
    "more than the optimizer_one_core case's one core, and optimizer steps on more cores are "
    "bound by memory",
    "cpu.cpu.compute.kernel_launch_us": "a further launch inside one op (Transformer Engine's "
    "per-expert GEMMs) costs host time only where the host paces the step, as in no case here",
    "cpu.cpu.compute.flops_per_cycle_per_core.fp64": "no host work runs in FP64",
    "cpu.cpu.compute.clock_ghz": "every host op (Adam and its kin: 14 FLOP for 26-38 B) is "
    "bound by memory on any number of cores: one Grace core streams 27 GB/s of it and "
    "computes 99 GFLOP/s (tests/test_offload.py shows the arithmetic where the streams are "
    "unbounded)",
    "cpu.cpu.compute.flops_per_cycle_per_core.fp32": "as clock_ghz: host ops are bound by "
    "memory",
    "gpu.gpu.compute.flops_per_clock_per_sm.fp32": "a dtype no training precision runs on "
    "tensor cores (fp32 training runs TF32 GEMMs)",
    "gpu.gpu.compute.flops_per_clock_per_sm.fp64": "no training precision runs FP64",
    "gpu.gpu.compute.flops_per_clock_per_sm.fp64_tensor": "no training precision runs FP64",
    "gpu.gpu.compute.flops_per_clock_per_sm.int8": "no training precision runs INT8",
    "gpu.gpu.compute.flops_per_clock_per_sm.tf32": "fp32 training, the one TF32 user, needs "
    "a tf32 GEMM efficiency the shipped parts do not give",
    "gpu.gpu.compute.gemm_reference_k": "the reference K of a dtype without a reference shape: "
    "every dtype run here has one",
    "gpu.gpu.compute.attention_head_dim_efficiency.128": "the head dimension the attention "
    "efficiency was measured at: 1 by definition (halving it is refused)",
    "gpu.gpu.unified_memory.access_counter_threshold": "saturated: one pass counts 16,384 "
    "accesses of 128 B on a 2 MiB page, past the 256 of the threshold whether halved or not",
    "gpu.gpu.unified_memory.access_counter_bytes_per_access": "saturated, as the threshold",
    "fabric.nodes_per_unit": "which leaf a rail's NICs share: at full bisection no route "
    "changes its rate",
    "cpu_link.bandwidth_gb_s": "traffic between a node's sockets: every placement here keeps "
    "a GPU's host traffic on its own socket",
}
"""Keys (after ``system.node.`` or ``system.``) that move no case here for a stated reason."""


CAPACITIES = ("_gb_s", "_efficiency", "clock_ghz", ".sms", ".links", "line_rate_gbit_s",
              "capacity_gib", "flops_per_clock_per_sm.bf16", "flops_per_clock_per_sm.fp16",
              "flops_per_clock_per_sm.fp8", "flops_per_cycle_per_core.fp32", ".cores",
              "switch_radix", "power_limit_w")
"""Key endings of capacities: half of one never speeds a case up."""
COSTS = ("_us", "latency_ns", "slowdown", "speed_spread", "fixed_power_w", "module_power_w",
         "oversubscription")
"""Key endings of costs: half of one never slows a case down."""


def metric(reference: str, overrides: list[str]) -> tuple[str, float]:
    """What a key may move, and the case's speed: a step's time, memory (peaks, capacities,
    fits) and host use, and one over the step time; or a served model's whole result but its
    echo of the inputs and its warnings (which name an informational override), and its output
    tokens a second."""
    scenario = load_any_scenario(reference, overrides)
    if isinstance(scenario, ServingScenario):
        data = dict(simulate_serving(scenario).data)
        data.pop("inputs", None)
        data.pop("warnings", None)
        return json.dumps(data, sort_keys=True, default=str), data["output_tokens_per_s"] or 0.0
    result = simulate(scenario)
    return (json.dumps([result.step_time_s, result.memory, result.host], sort_keys=True,
                       default=str), 1.0 / result.step_time_s)


def leaves(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every value below the mappings of a dumped spec (a list is one value), with its path."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, (*path, str(key)))
    else:
        yield path, value


def system_keys(reference: str, overrides: list[str]) -> dict[str, float]:
    """Every numeric key of the scenario's resolved system (lists left out: tables)."""
    spec = load_any_scenario(reference, overrides).spec
    return {".".join(path): float(value)
            for path, value in leaves(spec.system.model_dump(), ("system",))
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            and not any(part in SKIP for part in path)}


def scaled(value: float, factor: float) -> str:
    """``value`` times ``factor``, kept an integer where it is one (and at least 1)."""
    if value.is_integer() and abs(value) >= 1:
        return str(max(1, int(value * factor)))
    return repr(value * factor)


def _case(args: tuple[str, str, list[str], str, float]
          ) -> tuple[str, str, tuple[str, float] | None]:
    """Halve the key; where the scenario refuses half (a count that must divide the GPUs, a
    cap below what the CPU draws), take 10 % off instead."""
    name, reference, overrides, key, value = args
    for factor in (0.5, 0.9):
        setting = f"{key}={scaled(value, factor)}"
        if setting == f"{key}={scaled(value, 1.0)}":
            continue
        try:
            return name, key, metric(reference, [*overrides, setting])
        except InputError:
            continue
    return name, key, None


def _knob_case(args: tuple[str, str, list[str], str, str | None, str]
               ) -> tuple[str, str, str | None, str, float, float] | None:
    """The speeds of a scenario with a knob at its two values; None where either is refused
    (a layout the knob's value does not fit, a knob the scenario has no use for)."""
    name, reference, overrides, key, low, high = args
    try:
        if high == "x2":
            value: Any = load_any_scenario(reference, overrides).spec
            for part in key.split("."):
                value = getattr(value, part, None)  # None: not a key of this kind of run
            if not isinstance(value, int):
                return None
            high = str(2 * value)
        first = metric(reference, [*overrides, *([f"{key}={low}"] if low else [])])[1]
        second = metric(reference, [*overrides, f"{key}={high}"])[1]
    except InputError:
        return None
    return name, key, low, high, first, second


def knob_directions(jobs: int) -> int:
    """Check the scenario knobs of :data:`SLOWER`; print what runs the wrong way and return
    how many did."""
    cases = [(name, ref, sets, key, low, high) for name, (ref, sets) in KNOB_SUITE.items()
             for key, low, high in SLOWER]
    wrong, compared = [], 0
    with ProcessPoolExecutor(jobs) as pool:
        for outcome in pool.map(_knob_case, cases, chunksize=4):
            if outcome is None:
                continue
            compared += 1
            name, key, low, high, first, second = outcome
            if second > first * (1 + KNOB_TOLERANCE):
                wrong.append(f"{key} {low or 'as given'} -> {high} on {name}: "
                             f"{second / first:.4f}x as fast")
    print(f"{len(wrong)} of {compared} scenario knobs turned toward more work ran faster")
    for line in wrong:
        print(f"  {line}")
    return len(wrong)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args()
    knobs_wrong = knob_directions(args.jobs)
    base = {name: metric(ref, sets) for name, (ref, sets) in SUITE.items()}
    cases, keys_of = [], {}
    for name, (ref, sets) in SUITE.items():
        keys_of[name] = system_keys(ref, sets)
        for path, value in keys_of[name].items():
            if value != 0:
                cases.append((name, ref, sets, path, value))
    moved: dict[str, set[str]] = {}
    refused: dict[str, set[str]] = {}
    wrong: list[str] = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for name, key, outcome in pool.map(_case, cases, chunksize=8):
            moved.setdefault(key, set())
            if outcome is None:
                refused.setdefault(key, set()).add(name)
                continue
            if outcome[0] != base[name][0]:
                moved[key].add(name)
            speed, was = outcome[1], base[name][1]
            if key.endswith(CAPACITIES) and speed > was * (1 + 1e-9):
                wrong.append(f"{key} on {name}: half of it runs {speed / was:.4f}x as fast")
            if key.endswith(COSTS) and speed < was * (1 - 1e-9):
                wrong.append(f"{key} on {name}: half of it runs {speed / was:.4f}x as fast")
    dead = sorted(key for key, names in moved.items() if not names)
    marked = [key for key in dead
              if informational_key(ScenarioSpec, parse_key_path(key, "dead_knobs"))]
    explained = {key: EXPLAINED[_short(key)] for key in dead if _short(key) in EXPLAINED}
    suspects = [key for key in dead if key not in marked and key not in explained]
    print(f"{len(moved)} keys halved on {len(SUITE)} scenarios ({len(cases)} runs); "
          f"{len(dead)} moved none:")
    print(f"  {len(marked)} marked informational in the schema (--set on one warns)")
    print(f"  {len(explained)} for a stated reason:")
    for key, why in explained.items():
        print(f"    {_short(key)}: {why}")
    print(f"  {len(suspects)} read by no mechanism, or by none this suite reaches:")
    for key in suspects:
        note = f" (refused on {', '.join(sorted(refused[key]))})" if key in refused else ""
        print(f"    {key}{note}")
    checked = sum(case[3].endswith(CAPACITIES + COSTS) for case in cases)
    print(f"{len(wrong)} of {checked} halved capacities and costs moved a case the wrong way")
    for line in wrong:
        print(f"  {line}")
    return 1 if suspects or wrong or knobs_wrong else 0


def _short(key: str) -> str:
    return key.removeprefix("system.").removeprefix("node.")



if __name__ == "__main__":
    sys.exit(main())
