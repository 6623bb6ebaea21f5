"""ghsim: performance simulator for large-model training on NVIDIA Grace Hopper systems.

The library face: load validated inputs, build the hardware graph, lower the step, simulate it.

>>> import ghsim
>>> scenario = ghsim.load_scenario("llama3-70b-gh200-nvl32", ["parallelism.tp=8"])
>>> result = ghsim.simulate(scenario)
>>> result.step_time_s > 0
True
>>> served = ghsim.simulate_serving(ghsim.load_any_scenario("llama3.1-70b-fp8-gh200-serving"))
>>> served.output_tokens_per_s > 0
True
>>> study = ghsim.run_sweep(ghsim.load_sweep("offload-14b-gh200"), workers=1)
>>> best = study.best()
>>> best is not None and best["fits"]
True
>>> outcomes = ghsim.validate_file("gh200", only=["caraml*"])   # a shipped set, or a path
>>> ghsim.summarize(outcomes)["simulated"]
1

The names are loaded when first used (PEP 562), so that ``import ghsim`` and the command
line's start-up do not pay for numpy, networkx, simpy and pydantic before they are needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ghsim.version import __version__

if TYPE_CHECKING:
    from ghsim.config import (
        Layout,
        Scenario,
        ServingScenario,
        load_any_scenario,
        load_file,
        load_hardware,
        load_model,
        load_scenario,
        load_system,
        load_validation_points,
    )
    from ghsim.config.sweep import load_sweep
    from ghsim.engine.result import Result
    from ghsim.engine.simulate import simulate
    from ghsim.engine.validation import summarize, validate_file, validate_inference_file
    from ghsim.errors import ConfigError, GhsimError, InputError, LayoutError, OverrideError
    from ghsim.hardware import Endpoint, Route, SystemGraph, build_graph, system_totals
    from ghsim.serving import ServingResult, simulate_serving
    from ghsim.sweep import SweepOutcome, run_sweep
    from ghsim.workload import model_flops_per_token, parameter_count
    from ghsim.workload.lower import lower

_WHERE = {
    "ghsim.config": ("Layout", "Scenario", "ServingScenario", "load_any_scenario", "load_file",
                     "load_hardware", "load_model", "load_scenario", "load_system",
                     "load_validation_points"),
    "ghsim.config.sweep": ("load_sweep",),
    "ghsim.serving": ("ServingResult", "simulate_serving"),
    "ghsim.sweep": ("SweepOutcome", "run_sweep"),
    "ghsim.engine.validation": ("summarize", "validate_file", "validate_inference_file"),
    "ghsim.engine.result": ("Result",),
    "ghsim.engine.simulate": ("simulate",),
    "ghsim.errors": ("ConfigError", "GhsimError", "InputError", "LayoutError", "OverrideError"),
    "ghsim.hardware": ("Endpoint", "Route", "SystemGraph", "build_graph", "system_totals"),
    "ghsim.workload": ("model_flops_per_token", "parameter_count"),
    "ghsim.workload.lower": ("lower",),
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'ghsim' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_MODULE_OF])


__all__ = [
    "ConfigError",
    "Endpoint",
    "GhsimError",
    "InputError",
    "Layout",
    "LayoutError",
    "OverrideError",
    "Result",
    "Route",
    "Scenario",
    "ServingResult",
    "ServingScenario",
    "SweepOutcome",
    "SystemGraph",
    "__version__",
    "build_graph",
    "load_any_scenario",
    "load_file",
    "load_hardware",
    "load_model",
    "load_scenario",
    "load_sweep",
    "load_system",
    "load_validation_points",
    "lower",
    "model_flops_per_token",
    "parameter_count",
    "run_sweep",
    "simulate",
    "simulate_serving",
    "summarize",
    "system_totals",
    "validate_file",
    "validate_inference_file",
]
