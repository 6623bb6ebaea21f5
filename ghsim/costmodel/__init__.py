"""Cost models: pure functions from work (FLOPs, bytes, collectives) to seconds.

No notion of simulated time here; the engine asks these how long things take in isolation and
lets contention come out of the simulation.
"""
