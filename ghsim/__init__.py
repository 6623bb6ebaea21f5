"""ghsim: performance simulator for large-model training on NVIDIA Grace Hopper systems.

The library face: load validated inputs, build the hardware graph, lower the step, simulate it.

>>> import ghsim
>>> scenario = ghsim.load_scenario("llama3-70b-gh200-nvl32", ["parallelism.tp=8"])
>>> result = ghsim.simulate(scenario)
>>> result.step_time_s > 0
True
"""

from ghsim.config import (
    Layout,
    Scenario,
    load_file,
    load_hardware,
    load_model,
    load_scenario,
    load_system,
    load_validation_points,
)
from ghsim.engine.result import Result
from ghsim.engine.simulate import simulate
from ghsim.errors import ConfigError, GhsimError, InputError, LayoutError, OverrideError
from ghsim.hardware import Endpoint, Route, SystemGraph, build_graph, system_totals
from ghsim.version import __version__
from ghsim.workload import model_flops_per_token, parameter_count
from ghsim.workload.lower import lower

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
    "SystemGraph",
    "__version__",
    "build_graph",
    "load_file",
    "load_hardware",
    "load_model",
    "load_scenario",
    "load_system",
    "load_validation_points",
    "lower",
    "model_flops_per_token",
    "parameter_count",
    "simulate",
    "system_totals",
]
