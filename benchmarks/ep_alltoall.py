"""One expert-parallel dispatch and combine on DGX H100 as ghsim times them, against the latencies
NVIDIA measured (Megatron-Core MoE technical report, arXiv:2603.07685v2, section 4.2.2, Table 7).

The table times one dispatch and one combine of DeepSeek-V3's MoE layer (hidden 7168, sequence
4096, 256 experts; "communication latency only") on H100 nodes at expert-parallel sizes 8 to 64,
with NCCL's all-to-all (Megatron's alltoall dispatcher, every token copy sent) and with HybridEP
(NVIDIA's token-based dispatcher: like DeepEP, a token travels once to each node and each rank it
is routed to). ghsim's ``alltoall`` and ``deepep`` dispatchers are timed here on an otherwise idle
system: the lowered layer's own ``moe.dispatch`` and ``moe.combine`` collectives, planned on the
system graph and run through the flow model, as a step runs them. The model is the shipped
DeepSeek-V3 (top-8 of 256, a token's experts limited to 4 of 8 groups); ``--ungrouped`` times the
same layer without the group limit, for comparison.

The EP 8 all-to-all row is where the H100's ``gpu.nvlink.alltoall_efficiency`` comes from
(NCCL's all-to-all on NVLink4, 326.6 GB/s: the mean of its dispatch and combine), so ghsim
matches it by construction; every other row is a check. Run:
``python benchmarks/ep_alltoall.py`` (a few seconds).
"""

from __future__ import annotations

import sys
import tempfile
from functools import cache
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ghsim.config import load_scenario  # noqa: E402
from ghsim.engine.private import inline_plan  # noqa: E402
from ghsim.engine.simulate import scenario_workload  # noqa: E402
from ghsim.fabric.traffic import traffic_planner  # noqa: E402
from ghsim.workload.ir import Comm  # noqa: E402

SOURCE = ("NVIDIA, 'Scalable Training of Mixture-of-Experts Models with Megatron Core', "
          "arXiv:2603.07685v2 (2026-03-10), section 4.2.2, Table 7 (H100 columns)")

MEASURED_US: dict[str, dict[int, tuple[float, float]]] = {
    # dispatcher: {EP size: (dispatch, combine) in microseconds}
    "deepep": {8: (661, 624), 16: (1485, 1688), 32: (3064, 3088), 64: (4626, 4398)},
    "alltoall": {8: (1265, 1277), 16: (5774, 5628), 32: (8059, 7815), 64: (9164, 8727)},
}
"""Table 7's H100 latencies: ``deepep`` holds its HybridEP column, the token-based dispatcher
ghsim's deepep stands for; ``alltoall`` its all-to-all column."""


def scenario_file(directory: Path, ep: int, dispatcher: str, grouped: bool = True) -> Path:
    """A one-step scenario of the shipped DeepSeek-V3 on ``ep`` H100s, expert-parallel over
    all of them, micro-batch 1 of 4096 tokens."""
    model: str | dict[str, object] = "deepseek-v3"
    if not grouped:
        model = yaml.safe_load((ROOT / "models" / "deepseek-v3.yaml").read_text())
        assert isinstance(model, dict)
        model["moe"] = {k: v for k, v in model["moe"].items()
                        if k not in ("router_groups", "router_topk_groups")}
        for key in ("schema_version", "kind", "sources"):
            model.pop(key, None)
    spec = {"schema_version": 1, "kind": "scenario", "system": "dgx-h100", "num_gpus": ep,
            "model": model,
            "training": {"seq_len": 4096, "micro_batch": 1, "global_batch": ep,
                         "precision": "bf16", "attention": "flash"},
            "parallelism": {"tp": 1, "pp": 1, "dp": ep, "ep": ep, "recompute": "none",
                            "moe_dispatcher": dispatcher}}
    path = directory / f"dsv3_ep{ep}_{dispatcher}_{'grouped' if grouped else 'ungrouped'}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def alone_s(path: Path) -> dict[str, float]:
    """Seconds of the first MoE layer's forward ``moe.dispatch`` and ``moe.combine`` on an
    idle system: the collective's latency, then its flows sharing the links
    (``TrafficPlanner.alone_s``, as serving costs its collectives)."""
    scenario = load_scenario(path)
    rank_class = scenario_workload(scenario).classes[0]
    planner = traffic_planner(scenario.spec.system, scenario.layout)
    times: dict[str, float] = {}
    for op in rank_class.ops:
        for step in op.body if op.kind == "compute" else ():
            if isinstance(step, Comm) and step.name in ("moe.dispatch", "moe.combine"):
                wire, plan = inline_plan(planner, rank_class, step)
                times.setdefault(step.name, planner.alone_s(plan, wire))
        if len(times) == 2:
            return times
    raise LookupError(f"{path.name}: no MoE dispatch and combine in the lowered step")


@cache
def rows(grouped: bool = True) -> tuple[tuple[str, int, str, float, float], ...]:
    """(dispatcher, EP, collective, ghsim us, measured us) for every cell of the table
    (computed once per process)."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for dispatcher, table in MEASURED_US.items():
            for ep, measured in table.items():
                times = alone_s(scenario_file(Path(tmp), ep, dispatcher, grouped))
                for name, value in zip(("dispatch", "combine"), measured, strict=True):
                    out.append((dispatcher, ep, name, 1e6 * times[f"moe.{name}"], value))
    return tuple(out)


def main() -> None:
    grouped = "--ungrouped" not in sys.argv[1:]
    print(f"DeepSeek-V3 MoE layer on DGX H100 ({'4 of 8 groups' if grouped else 'no group limit'}"
          f"), one dispatch / combine on an idle system\nmeasured: {SOURCE}")
    print(f"{'dispatcher':10s} {'EP':>3s} {'':8s} {'ghsim':>8s} {'measured':>9s} {'error':>7s}")
    for dispatcher, ep, name, predicted, measured in rows(grouped):
        print(f"{dispatcher:10s} {ep:3d} {name:8s} {predicted:6.0f}us {measured:7.0f}us "
              f"{predicted / measured - 1:+7.1%}")


if __name__ == "__main__":
    main()
