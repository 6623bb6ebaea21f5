"""Find scenario keys that move no prediction: model, training, parallelism, offload and
inference keys turned to each other value they may take, on scenarios that use them.

Every leaf of each scenario's resolved spec (the system aside: ``tools/dead_knobs.py`` covers
it) is set to its other values: a boolean flipped, a choice to each other choice (a list of
choices to each one alone), a number doubled and halved, an absent number to 1, 2 and 512. A
key that changes no scenario's result (a step's time, memory and host use; a served model's
whole result) is either unread or unchecked (the first run, on rotary models only, listed
max_position_embeddings, and looking at why showed that GPT-3's learned position embedding
accepted any sequence length). Keys that are derived, that only shape outputs, or
whose other values need a partner key the suite does not give are in ``EXPLAINED``; any other
makes the script exit 1.

Run: ``python tools/scenario_knobs.py [-j N]`` (about 90 s on two cores).
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dead_knobs import KNOB_SUITE, ONE, leaves, metric
from dead_knobs import SUITE as HARDWARE_SUITE

from ghsim.config import load_any_scenario
from ghsim.config.cursor import Slot, slot_at
from ghsim.errors import InputError

MOE = ["model.layers=4", "model.moe.dense_layers=0", "training.global_batch=64"]
SUITE: dict[str, tuple[str, list[str]]] = {
    **{name: HARDWARE_SUITE[name] for name in ("compute", "optimizer", "params", "activations",
                                               "fp8", "fp16")},
    "documents": ("llama3-8b-gh200", [*ONE, "offload.strategy=none",
                                      "training.attention_mask=document",
                                      "training.mean_document_tokens=512"]),
    "fused_loss": ("llama3-8b-gh200", [*ONE, "offload.strategy=none",
                                       "training.cross_entropy_fusion=true",
                                       "training.cross_entropy_fusion_impl=te"]),
    "loader": ("llama3-8b-gh200", [*ONE, "offload.strategy=none",
                                   "training.data_loading.sample_read_ms=500",
                                   "training.data_loading.source=a benchmark"]),
    "gpt3": ("llama3-8b-gh200", ["model=gpt3-175b", "model.layers=2", "system=gh200-single",
                                 "num_gpus=1", "training.seq_len=2048",
                                 "training.global_batch=1"]),
    **{name: KNOB_SUITE[name] for name in ("tp_pp_sp", "interleaved", "context")},
    "moe": HARDWARE_SUITE["moe"],
    "moe_measured": ("qwen3-235b-gh200-nvl32", [*MOE, "model.moe.routing=measured",
                                                "model.moe.imbalance=1.5",
                                                "model.moe.imbalance_source=a profile"]),
    "moe_groups": ("qwen3-235b-gh200-nvl32", [*MOE, "model.moe.router_groups=8",
                                              "model.moe.router_topk_groups=4"]),
    "moe_shared": ("qwen3-235b-gh200-nvl32", [*MOE, "model.moe.shared_experts=1",
                                              "model.moe.shared_expert_ffn_hidden=1536"]),
    "deepep": ("qwen3-235b-gh200-nvl32", [*MOE, "parallelism.moe_dispatcher=deepep"]),
    "serving": ("llama3.1-70b-fp8-gh200-serving", ["inference.requests.count=64"]),
    "serving_moe": ("llama3.1-70b-fp8-gh200-serving", ["inference.requests.count=64",
                                                       "model=mixtral-8x7b"]),
    "server": ("llama3.1-70b-fp8-gh200-serving", ["inference.requests.count=200",
                                                  "inference.requests.arrival=poisson",
                                                  "inference.requests.rate_per_s=2.0"]),
    "kv_in_place": ("llama3.1-70b-fp8-gh200-long-context", ["inference.requests.count=16"]),
    "kv_reload": ("llama3.1-70b-fp8-gh200-long-context", ["inference.requests.count=16",
                                                          "inference.kv_offload.policy=reload"]),
}
"""name: (scenario, overrides): each key's mechanism used by at least one of them."""

SKIP = {"schema_version", "kind", "description", "name", "sources", "published_params",
        "published_active_params", "published_active_excludes_embedding", "workload",
        "microbenchmark", "replay", "system"}
"""Labels, sources, published figures, other kinds of run, and the system (dead_knobs.py)."""

EXPLAINED: dict[str, str] = {
    "parallelism.dp": "derived from num_gpus and the model-parallel sizes: any other value is "
    "refused",
    "parallelism.replicas": "derived, as dp",
    "parallelism.ddp_bucket_size": "the values tried hold at most one layer, as the default "
    "40M-parameter bucket does here (tests/test_workload.py moves it)",
    "training.attention_mask": "document needs mean_document_tokens, which the documents case "
    "gives, and causal refuses it there",
    "model.activation_clamp": "clamps a MoE's gated experts only (GPT-OSS), which no case runs",
    "inference.find_max_rate": "needs Poisson arrivals with latency targets",
    "inference.requests.arrival": "each arrival needs its own partner keys (a rate, a "
    "concurrency)",
    "inference.requests.min_duration_s": "Poisson arrivals only; the server case's 200 "
    "requests already span more than the values tried",
    "inference.timeline_iterations": "how many iterations the trace shows: no figure",
}
"""Keys that move no case here, and why."""


def other_values(root: type, path: tuple[str, ...], value: Any) -> list[str]:
    """The values to try at ``path``, as --set text."""
    slot = slot_at(root, path)
    kind = slot.bare if slot is not None else None
    if isinstance(value, bool):
        return [str(not value).lower()]
    if get_origin(kind) is Literal:
        return [json.dumps(v) if not isinstance(v, str) else v
                for v in get_args(kind) if v != value]
    if isinstance(value, int):
        return [str(2 * value), str(max(1, value // 2))] if value else ["1"]
    if isinstance(value, float):
        return [repr(2 * value), repr(value / 2)] if value else ["0.1"]
    if value is None:
        absent: dict[Any, list[str]] = {bool: ["true", "false"], int: ["1", "2", "512"],
                                        float: ["0.5", "10.0"]}
        return absent.get(kind, [])
    if isinstance(value, list) and get_origin(kind) is list:
        inner = Slot(get_args(kind)[0]).bare
        if get_origin(inner) is Literal:
            return [f"[{choice}]" for choice in get_args(inner)]
    return []


def _case(args: tuple[str, str, list[str], str, list[str]]
          ) -> tuple[str, str, list[str | None]]:
    name, reference, overrides, key, values = args
    outcomes: list[str | None] = []
    for value in values:
        try:
            outcomes.append(metric(reference, [*overrides, f"{key}={value}"])[0])
        except InputError:
            outcomes.append(None)
    return name, key, outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args()
    base = {name: metric(ref, sets)[0] for name, (ref, sets) in SUITE.items()}
    cases = []
    for name, (ref, sets) in SUITE.items():
        spec = load_any_scenario(ref, sets).spec
        for path, value in leaves(spec.model_dump()):
            if any(part in SKIP for part in path):
                continue
            values = other_values(type(spec), path, value)
            if values:
                cases.append((name, ref, sets, ".".join(path), values))
    moved: dict[str, bool] = {}
    with ProcessPoolExecutor(args.jobs) as pool:
        for name, key, outcomes in pool.map(_case, cases, chunksize=4):
            changed = any(o is not None and o != base[name] for o in outcomes)
            moved[key] = moved.get(key, False) or changed
    dead = sorted(key for key, did in moved.items() if not did)
    suspects = [key for key in dead if key not in EXPLAINED]
    print(f"{len(moved)} scenario keys turned on {len(SUITE)} scenarios ({len(cases)} "
          f"key-scenario pairs); {len(dead)} moved none:")
    for key in dead:
        if key in EXPLAINED:
            print(f"  {key}: {EXPLAINED[key]}")
    print(f"{len(suspects)} read or checked by no mechanism, or by none this suite reaches:")
    for key in suspects:
        print(f"  {key}")
    return 1 if suspects else 0


if __name__ == "__main__":
    sys.exit(main())
