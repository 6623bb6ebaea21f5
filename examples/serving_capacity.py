"""How much does HBM capacity buy when serving Llama 3.1 70B in FP8? The shipped serving
scenario (TensorRT-LLM's 128/2048 benchmark on one GH200 96 GB) on four GPUs through the Python
API: the KV cache the weights leave, the batch it admits, and the tokens per second that follow.

Run: ``python examples/serving_capacity.py`` (its output is in ``serving_capacity.out``).
"""

from __future__ import annotations

import ghsim


def main() -> None:
    print(f"{'system':<13} {'KV cache GiB':>12} {'batch':>6} {'TPOT ms':>8} {'tokens/s':>9}"
          "  bound by")
    for system in ("dgx-h100", "gh200-single", "gh200-nvl2", "dgx-h200"):
        scenario = ghsim.load_any_scenario("llama3.1-70b-fp8-gh200-serving",
                                           [f"system={system}"])
        result = ghsim.simulate_serving(scenario).to_dict()
        print(f"{system:<13} {result['memory']['kv_pool_bytes'] / 2**30:>12.1f} "
              f"{result['batch']['mean_running']:>6.0f} {result['tpot_s']['mean'] * 1e3:>8.1f} "
              f"{result['output_tokens_per_s']:>9,.0f}  {result['bottleneck']['resource']}")
    offload = ghsim.load_any_scenario("llama3.1-70b-fp8-gh200-serving",
                                      ["inference.kv_offload.policy=in_place"])
    result = ghsim.simulate_serving(offload).to_dict()
    print(f"gh200-single with the KV cache spilling to LPDDR5X over NVLink-C2C: "
          f"{result['output_tokens_per_s']:,.0f} tokens/s, batch "
          f"{result['batch']['mean_running']:.0f}, bound by {result['bottleneck']['resource']}")


if __name__ == "__main__":
    main()
