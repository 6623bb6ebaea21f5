"""TensorRT-LLM's own throughput tables for dense Llama models on H100 and H200, against ghsim.

TensorRT-LLM's performance overview (NVIDIA/TensorRT-LLM@00f37686
``docs/source/performance/perf-overview.md``, v1.0 with the PyTorch backend) gives the total output
tokens/s of trtllm-bench at maximum load, FP8 weights, fixed input and output lengths, for each
model on each GPU at one tensor-parallel size. None of these rows is in ``validation/`` (its
TensorRT-LLM points are version 0.15 and 0.17), so they are a check outside the validation sets.
Each row is run as ``ghsim validate`` reads a neutral ``fixed_length`` point: the overview's
dataset size for those lengths (:func:`ghsim.config.neutral_serving.requests_for`), engine limits by
trtllm-bench's heuristic and the KV cache at 0.95 of free memory ("in many cases"). Not modelled:
the PyTorch backend's own overheads and CUDA-graph padding.

Run: ``python benchmarks/trtllm_perf_overview.py`` (about a minute).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ghsim.config import load_model, load_system
from ghsim.config.api import serving_scenario_from_spec
from ghsim.config.neutral_serving import inference_point
from ghsim.config.schema import ServingScenarioSpec
from ghsim.serving import simulate_serving

LENGTHS = ((128, 128), (128, 2048), (128, 4096), (500, 2000), (1000, 1000), (1000, 2000),
           (2048, 128), (2048, 2048), (5000, 500), (20000, 2000))
TABLES: dict[tuple[str, str, int], tuple[float | None, ...]] = {
    # (model, system, tp): output tokens/s at each of LENGTHS (None: no entry)
    ("llama3.3-70b", "dgx-h200", 1): (3803, 4336, 2872, 3666, 2909, 2994, 442, 2003, 566, 283),
    ("llama3.3-70b", "dgx-h100", 2): (6378, 6651, 4199, 5222, 4205, 4146, 762, 3082, 898, 437),
    ("llama3.1-405b", "dgx-h200", 8): (3814, 5348, 4741, 4724, 3330, 3722, 456, 2948, 650,
                                       505),
    ("llama3.1-405b", "dgx-h100", 8): (3627, 4340, 3116, 3994, 2919, 2895, 453, 2296, 610,
                                       345),
    ("llama3.1-8b", "dgx-h200", 1): (27911, 26221, 18027, 20770, 17744, 16828, 3538, 12194,
                                     3902, 1804),
    ("llama3.1-8b", "dgx-h100", 1): (28312, 22714, 14325, 17660, 15220, 13899, 3450, 9305,
                                     3459, 1351),
}


def predicted(model: str, system: str, tp: int, isl: int, osl: int) -> float:
    """ghsim's output tokens/s of one row, read as ``ghsim validate`` reads the row written
    as a neutral ``fixed_length`` point."""
    scenario = inference_point({
        "id": f"{model}-{isl}-{osl}", "system": system, "num_gpus": tp, "model": model,
        "precision": "fp8", "software": "TensorRT-LLM 1.0", "parallelism": {"tp": tp},
        "workload": {"kind": "fixed_length", "input_tokens": isl, "output_tokens": osl}},
    )["scenario"]
    spec = ServingScenarioSpec.model_validate({
        **scenario, "system": load_system(system), "model": load_model(model)})
    result = simulate_serving(serving_scenario_from_spec(spec, "perf-overview")).to_dict()
    return float(result["output_tokens_per_s"])


def rows() -> list[tuple[str, str, int, int, int, float, float]]:
    """(model, system, tp, input, output, measured, ghsim) for every entry of the tables."""
    out = []
    for (model, system, tp), values in TABLES.items():
        for (isl, osl), measured in zip(LENGTHS, values, strict=True):
            if measured is not None:
                out.append((model, system, tp, isl, osl, float(measured),
                            predicted(model, system, tp, isl, osl)))
    return out


def main() -> None:
    errors = []
    print(f"{'model':<14}{'system':<10}{'tp':>3} {'ISL/OSL':>11} {'measured':>9} "
          f"{'ghsim':>9} {'error':>7}")
    for model, system, tp, isl, osl, measured, ghsim in rows():
        error = ghsim / measured - 1
        errors.append(error)
        print(f"{model:<14}{system:<10}{tp:>3} {f'{isl}/{osl}':>11} {measured:>9,.0f} "
              f"{ghsim:>9,.0f} {error:>+7.1%}")
    mape = sum(abs(e) for e in errors) / len(errors)
    print(f"MAPE {mape:.1%} over {len(errors)} rows, worst {max(errors, key=abs):+.1%}")


if __name__ == "__main__":
    main()
