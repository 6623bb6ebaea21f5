"""ghsim: performance simulator for large-model training on NVIDIA Grace Hopper systems.

The library face: load validated inputs, build the hardware graph, count a model.

>>> import ghsim
>>> scenario = ghsim.load_scenario("llama3-70b-gh200-nvl32")
>>> graph = ghsim.build_graph(scenario.spec.system, scenario.spec.num_gpus)
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
from ghsim.errors import ConfigError, GhsimError, InputError, LayoutError, OverrideError
from ghsim.hardware import Endpoint, Route, SystemGraph, build_graph, system_totals
from ghsim.version import __version__
from ghsim.workload import model_flops_per_token, parameter_count

__all__ = [
    "ConfigError",
    "Endpoint",
    "GhsimError",
    "InputError",
    "Layout",
    "LayoutError",
    "OverrideError",
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
    "model_flops_per_token",
    "parameter_count",
    "system_totals",
]
