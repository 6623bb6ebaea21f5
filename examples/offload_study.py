"""Which offload strategy trains Qwen3 14B fastest on one GH200? Run the shipped study through
the Python API and print its ranked table.

Run: ``python examples/offload_study.py`` (its output is in ``offload_study.out``).
"""

from __future__ import annotations

import ghsim


def main() -> None:
    sweep = ghsim.load_sweep("offload-14b-gh200")
    outcome = ghsim.run_sweep(sweep, workers=1)
    print(f"{'rank':>4}  {'system':<13} {'strategy':<18} {'step s':>7} {'HBM GiB':>8}  fits")
    for rank, record in enumerate(outcome.ranked(), 1):
        overrides = record["overrides"]
        print(f"{rank:>4}  {overrides['system']:<13} {overrides['offload.strategy']:<18} "
              f"{record['step_time_s']:>7.2f} {record['hbm_peak_bytes'] / 2**30:>8.1f}  "
              f"{'yes' if record['fits'] else 'no'}")
    best = outcome.best()
    assert best is not None
    print(f"best: {best['label']}")


if __name__ == "__main__":
    main()
