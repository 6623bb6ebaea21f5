"""The request stream of one replica: lengths drawn with the scenario's seed, arrival gaps."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ghsim.config.schema.serving import LengthSpec, RequestsSpec


@dataclass
class Request:
    """One request and what happened to it (times in seconds of simulated time)."""

    index: int
    input_tokens: int
    output_tokens: int
    arrival_s: float = 0.0
    first_token_s: float = math.nan
    finish_s: float = math.nan
    reserve_tokens: int = 0
    """Tokens the KV cache is reserved for at admission: the prompt and the output limit."""
    blocks: int = 0
    """KV blocks reserved (every beam, prompt and output)."""
    host_blocks: int = 0
    """Of which in host memory."""
    prefilled: int = 0
    """Prompt tokens already prefilled."""
    join_iteration: int = 0
    join_context: int = 0
    window_growing: bool = False
    """Sliding-window models: its context is still shorter than the window."""
    generated: int = 0
    """Output tokens produced before it was last paused (max_utilization), which its next
    prefill processes again with the prompt."""
    epoch: int = 0
    """Times it was paused: entries of the engine's heaps from an earlier epoch are stale."""
    decoding: bool = False
    """In the decoding batch now (neither waiting, prefilling, paused nor finished)."""

    @property
    def host_fraction(self) -> float:
        return self.host_blocks / self.blocks if self.blocks else 0.0

    @property
    def prompt_tokens(self) -> int:
        """Tokens its (next) prefill processes: the prompt and what it had produced."""
        return self.input_tokens + self.generated

    @property
    def remaining_output(self) -> int:
        """Output tokens still to come, the one its next prefill produces included."""
        return self.output_tokens - self.generated


def draw_lengths(length: int | LengthSpec, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` token counts from ``length`` (whole numbers, at least its minimum)."""
    if isinstance(length, int):
        return np.full(count, length, dtype=np.int64)
    low = length.min
    high = length.max if length.max is not None else np.iinfo(np.int64).max // 4
    if length.distribution == "fixed":
        values = np.full(count, round(length.mean), dtype=np.float64)
    elif length.distribution == "uniform":
        values = rng.integers(low, high, endpoint=True, size=count).astype(np.float64)
    elif length.distribution == "normal":
        values = np.rint(rng.normal(length.mean, length.std, size=count))
    else:  # lognormal with this mean and standard deviation
        sigma2 = math.log1p((length.std / length.mean) ** 2)
        mu = math.log(length.mean) - sigma2 / 2
        values = np.rint(rng.lognormal(mu, math.sqrt(sigma2), size=count))
    return np.clip(values, low, high).astype(np.int64)


def requests_per_replica(spec: RequestsSpec, replicas: int,
                         rate_per_s: float | None = None) -> int:
    """How many requests one replica serves: ``count / replicas`` rounded up (at a Poisson
    ``rate_per_s``, at least ``min_duration_s`` worth)."""
    total = spec.count
    if rate_per_s is not None and spec.min_duration_s is not None:
        total = max(total, math.ceil(rate_per_s * spec.min_duration_s))
    return math.ceil(total / replicas)


def replica_requests(spec: RequestsSpec, replicas: int, seed: int,
                     rate_per_s: float | None = None) -> list[Request]:
    """The requests one replica serves (:func:`requests_per_replica` of them), with lengths
    drawn from the scenario's seed; arrivals are set by the arrival process."""
    count = requests_per_replica(spec, replicas, rate_per_s)
    rng = np.random.default_rng(seed)
    inputs = draw_lengths(spec.input_tokens, count, rng)
    outputs = draw_lengths(spec.output_tokens, count, rng)
    limit = spec.max_output_tokens
    if limit is not None:
        outputs = np.minimum(outputs, limit)
    return [Request(i, int(a), int(b), reserve_tokens=int(a) + int(limit if limit else b))
            for i, (a, b) in enumerate(zip(inputs, outputs, strict=True))]


def unit_gaps(count: int, seed: int) -> np.ndarray:
    """Exponential inter-arrival gaps of mean 1 (divided by a rate they become a Poisson
    process; the same gaps at every rate make a rate search's runs comparable)."""
    return np.random.default_rng([seed, 1]).exponential(1.0, size=count)
