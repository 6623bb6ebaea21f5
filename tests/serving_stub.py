"""A stand-in for the serving engine's iteration cost model, for tests that trace the
scheduler by hand."""

from __future__ import annotations

from ghsim.serving.costs import Batch, IterationCost


class OneMillisecond:
    """Every iteration takes 1 ms; the batches are kept, in order."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []

    def iteration(self, batch: Batch, running: int) -> IterationCost:
        self.batches.append(batch)
        cost = IterationCost()
        cost.add("gemm", 1e-3)
        return cost
