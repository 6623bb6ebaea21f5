"""Serving simulation: a model served on a system, request by request (``inference:`` scenarios).

``memory`` sizes weights, buffers and the paged KV cache per GPU; ``costs`` prices one engine
iteration from the batch it runs; ``requests`` draws the request stream; ``engine`` is the simpy
simulation of a replica's scheduler; ``simulate`` runs it (and the MLPerf server rate search);
``result`` turns the run into plain data.
"""

from ghsim.serving.result import ServingResult
from ghsim.serving.simulate import simulate_serving

__all__ = ["ServingResult", "simulate_serving"]
