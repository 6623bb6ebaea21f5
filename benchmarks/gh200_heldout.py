"""Published GH200 training runs that no validation file holds, measured against ghsim.

``benchmarks/data/gh200_heldout.yaml`` lists runs on GH200 systems found after the validation sets
were fixed, each with its source, the sentence or log line its number comes from, how that number
becomes a step time and which of its settings are assumed: two regression runs of CSCS's Megatron
test on Alps (Llama-3 8B on 64 GPUs and 70B on 128, July 2025, mock data, the 660 W module cap),
Bielik 7B on 256 GH200 of Helios (a lower bound on throughput), and two Apertus production rates
read off the tech report's figures. Nothing in ghsim was fitted to them; this script only prints
how far ghsim is from each, by confidence, so that a change to the model can be judged on runs it
was not tuned on. The data file's ``leads`` say what was looked at and left out (regression
thresholds, runs whose configuration is not published, encoder models ghsim cannot express).

Run: ``python benchmarks/gh200_heldout.py`` (about a minute).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ghsim.config import load_scenario  # noqa: E402
from ghsim.engine.simulate import simulate  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "gh200_heldout.yaml"


def runs() -> list[dict[str, Any]]:
    """The held-out runs as the data file gives them."""
    document = yaml.safe_load(DATA.read_text())
    return list(document["runs"])


def predicted_s(run: dict[str, Any]) -> float:
    """ghsim's step time for one run's scenario, loaded as ``ghsim run`` loads a file."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{run['id']}.yaml"
        path.write_text(yaml.safe_dump(
            {"schema_version": 1, "kind": "scenario", "name": run["id"], **run["scenario"]},
            sort_keys=False))
        return simulate(load_scenario(path)).step_time_s


def rows() -> list[tuple[str, str, float, float, bool]]:
    """(id, confidence, measured, ghsim, bound) for every held-out run: step seconds, and
    whether the measured step is only an upper bound (a throughput published as 'over X')."""
    return [(run["id"], run["confidence"], float(run["measured"]["step_time_s"]),
             predicted_s(run), run["measured"].get("bound") == "upper") for run in runs()]


def main() -> int:
    table = rows()
    print(f"{'run':62s} {'conf':6s} {'measured':>9s} {'ghsim':>8s} {'error':>7s}")
    for name, confidence, measured, ghsim, bound in table:
        verdict = ("  within the bound" if ghsim <= measured else "  above the bound") \
            if bound else ""
        print(f"{name:62s} {confidence:6s} {'<=' if bound else '  '}{measured:6.3f}s "
              f"{ghsim:7.3f}s {ghsim / measured - 1:+7.1%}{verdict}")
    for label, keep in (("medium or high confidence", {"high", "medium"}),
                        ("all", {"high", "medium", "low"})):
        errors = [abs(g / m - 1) for _, c, m, g, bound in table if c in keep and not bound]
        print(f"MAPE {sum(errors) / len(errors):.1%} over {len(errors)} runs ({label}, "
              f"bounds aside), worst {max(errors):.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
