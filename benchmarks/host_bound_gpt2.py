"""ghsim's host model against a host-bound step measured on the lent H200 (2026-12-04).

``benchmarks/device/hopper_probe.py`` timed plain-PyTorch micro-batches of GPT-2 small (124M,
sequence 1024, BF16, SDPA attention) on one H200 SXM driven by a virtualised 16-core Xeon, at
micro-batches 1, 2, 4 and 8 (``hopper_probe.json`` ``steps``): 14.2, 13.7, 13.3 and 24.5 ms, flat
while the host issues kernels slower than the GPU runs them, then growing with the work. The
same file measured that host's CPU time per ``nn.Linear`` forward call, 34.46 us
(``host.linear_forward_cpu_us``), the quantity ``cpu.compute.kernel_issue_us`` stands for. This
script simulates the same model on ``dgx-h200`` (one GPU) with that host cost and prints
ghsim's micro-batch (its step less the measured optimizer time) against the measured one.

It also reads the profiled micro-batch-1 trace (``gpt2-small_mbs1_trace.json.gz``): the
kernels the forward thread and the autograd thread launched, and how long each took to issue
them (under the profiler, which slows both). ghsim lowers about as many forward steps as the
forward thread launched kernels; its backward steps cost ``backward_issue_ratio`` (2.32, from
Transformer Engine's modules, whose backward runs in Python) times a forward one, where plain
PyTorch's C++ autograd engine issues its backward kernels at about half a forward kernel's
cost: the measured level is not the target of that constant, and the comparison shows how far
a Megatron-calibrated host model is from a plain-PyTorch one. Nothing here is fitted.

Run: ``python benchmarks/host_bound_gpt2.py`` (a few seconds).
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ghsim.config import load_scenario  # noqa: E402
from ghsim.engine.result import Result  # noqa: E402
from ghsim.engine.simulate import simulate  # noqa: E402

DATA = ROOT / "benchmarks" / "device" / "data" / "h200-2026-12-04"
GPT2_SMALL = {
    "schema_version": 1, "kind": "scenario", "system": "dgx-h200", "num_gpus": 1,
    "model": {"name": "GPT-2 small", "layers": 12, "hidden": 768, "heads": 12, "kv_heads": 12,
              "ffn_hidden": 3072, "vocab": 50304, "gated_mlp": False,
              "position_embedding": "learned", "max_position_embeddings": 1024,
              "tied_embeddings": True},
    "training": {"seq_len": 1024, "micro_batch": 1, "global_batch": 1, "precision": "bf16",
                 "attention": "flash", "grad_nan_check": False},
    "parallelism": {"tp": 1, "pp": 1, "dp": 1},
}
"""hopper_probe.py's GPT-2 small: learned positions, tied embeddings, GELU MLP, one GPU."""


def measured() -> tuple[float, dict[int, tuple[float, float]]]:
    """The host's CPU time per nn.Linear forward (s), and per micro-batch size the measured
    micro-batch and optimizer seconds."""
    probe = json.loads((DATA / "hopper_probe.json").read_text())
    rows = {row["micro_batch"]: (row["micro_batch_s"], row["optimizer_s"])
            for row in probe["steps"] if row["model"] == "gpt2-small"}
    return probe["host"]["linear_forward_cpu_us"] * 1e-6, rows


def simulated(path: Path, issue_s: float, micro: int) -> Result:
    """ghsim's step of the model in ``path`` at micro-batch ``micro`` (one micro-batch a step)
    on a host that spends ``issue_s`` a framework call."""
    return simulate(load_scenario(path, [
        f"training.micro_batch={micro}", f"training.global_batch={micro}",
        f"system.node.cpu.cpu.compute.kernel_issue_us={issue_s * 1e6}"]))


def traced_threads() -> list[tuple[int, float]]:
    """Kernel launches and the CPU span of the two threads that issued them in the profiled
    micro-batch: the forward (Python) thread first, then the autograd engine's."""
    with gzip.open(DATA / "gpt2-small_mbs1_trace.json.gz", "rt") as handle:
        events = json.load(handle)["traceEvents"]
    spans: dict[int, tuple[float, float]] = {}
    launches: dict[int, int] = {}
    for event in events:
        if event.get("ph") != "X":
            continue
        tid = event.get("tid")
        if event.get("cat") == "cpu_op":
            start, end = spans.get(tid, (event["ts"], event["ts"]))
            spans[tid] = (min(start, event["ts"]), max(end, event["ts"] + event["dur"]))
        elif event.get("cat") in ("cuda_runtime", "cuda_driver") and "Launch" in event["name"]:
            # cudaLaunchKernel, cudaLaunchKernelExC (cuBLAS), cuLaunchKernel (cuDNN, Triton)
            launches[tid] = launches.get(tid, 0) + 1
    threads = sorted(spans, key=lambda tid: spans[tid][0])
    return [(launches.get(tid, 0), (spans[tid][1] - spans[tid][0]) * 1e-6) for tid in threads]


def main() -> None:
    issue_s, rows = measured()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gpt2.yaml"
        path.write_text(yaml.safe_dump(GPT2_SMALL, sort_keys=False))
        print(f"host: {issue_s * 1e6:.2f} us per nn.Linear forward (measured on that host)")
        print(f"{'micro-batch':>11s} {'measured':>9s} {'ghsim':>8s} {'error':>7s} "
              f"{'host wait':>9s}")
        for micro, (micro_s, optimizer_s) in sorted(rows.items()):
            result = simulated(path, issue_s, micro)
            predicted = result.step_time_s - optimizer_s
            print(f"{micro:11d} {micro_s * 1e3:7.1f}ms {predicted * 1e3:6.1f}ms "
                  f"{100 * (predicted / micro_s - 1):+6.1f}% "
                  f"{result.breakdown_s.get('cpu', 0.0) * 1e3:7.1f}ms")
    (forward, forward_s), (backward, backward_s) = traced_threads()[:2]
    each_forward, each_backward = forward_s / forward, backward_s / backward
    print(f"traced micro-batch 1 (profiler on): forward thread {forward} launches in "
          f"{forward_s * 1e3:.1f} ms ({each_forward * 1e6:.0f} us each), autograd thread "
          f"{backward} in {backward_s * 1e3:.1f} ms ({each_backward * 1e6:.0f} us each): a "
          f"backward kernel issued at {each_backward / each_forward:.2f} of a forward one")


if __name__ == "__main__":
    main()
