"""What-if studies: run every point of a sweep, locally or on a Dask cluster, and rank them."""

from ghsim.sweep.runner import SweepOutcome, run_sweep

__all__ = ["SweepOutcome", "run_sweep"]
