"""The request-level discrete-event simulation of one serving replica, on simpy.

Requests arrive (all at once, as a Poisson process, or from a fixed number of clients that each
send the next request when the last one ends), wait in a FIFO queue, and join the running batch
when the scheduler admits them: TensorRT-LLM's in-flight batching with the GUARANTEED_NO_EVICT
capacity scheduler admits a request when the batch has room (``max_batch_size``) and KV blocks
for its whole prompt and output are free (in HBM first, then, with KV offload, in host memory);
with MAX_UTILIZATION, when blocks for its prompt and first token are free, and a decoding
request takes a block each time its context outgrows its blocks, the latest arrivals paused
(their blocks freed, their prompt and output so far prefilled again later) when none is free;
each iteration then schedules every decoding sequence's token and as many prompt tokens as the
token budget (``max_num_tokens``) leaves, a prompt whole or, with chunked prefill, in chunks.
Static batching forms a batch only when the last one has ended and decodes it until its
longest request is done. Each iteration lasts what :class:`IterationModel` costs it; a request's
first token comes at the end of the iteration that finishes its prompt, its others one per
iteration after.

The decoding sequences are kept as sums (their count, their context, the share of it in host
memory) and a heap of finishing iterations, so an iteration costs O(log n), not O(batch).
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from ghsim.limits import MAX_SERVING_ITERATIONS
from ghsim.serving.costs import PARTS, Batch, IterationModel
from ghsim.serving.memory import Window, blocks_for
from ghsim.serving.requests import Request

LIMITS = ("max_batch_size", "kv_capacity", "max_num_tokens")


class TooManyIterations(Exception):
    """The run needs more engine iterations than its budget (:data:`MAX_SERVING_ITERATIONS`)."""


@dataclass(frozen=True)
class EngineConfig:
    """The replica's scheduler settings, resolved."""

    policy: str
    max_batch_size: int
    max_num_tokens: int
    chunked_prefill: bool
    block_tokens: int
    hbm_blocks: int
    host_blocks: int
    beam_width: int
    arrival: str
    rate_per_s: float | None
    concurrency: int | None
    window: Window | None = None
    capacity: str = "guaranteed_no_evict"


def _floats() -> array[float]:
    return array("d")


def _ints() -> array[int]:
    return array("q")


@dataclass
class Iterations:
    """What each iteration ran, one packed column per field (an entry per iteration): 8 bytes
    an entry instead of a list slot and a Python object, so that a run of millions of
    iterations stays within a few hundred MiB."""

    start_s: array[float] = field(default_factory=_floats)
    duration_s: array[float] = field(default_factory=_floats)
    running: array[int] = field(default_factory=_ints)
    decode_seqs: array[int] = field(default_factory=_ints)
    prefill_tokens: array[int] = field(default_factory=_ints)
    waiting: array[int] = field(default_factory=_ints)
    hbm_blocks_used: array[int] = field(default_factory=_ints)
    host_blocks_used: array[int] = field(default_factory=_ints)
    tokens_out: array[int] = field(default_factory=_ints)
    """Tokens the iteration returns: one per decoding request, one per prompt it finishes."""


@dataclass
class EngineRun:
    """The outcome of one replica's simulation."""

    requests: list[Request]
    iterations: Iterations
    parts_s: dict[str, float]
    """Time of every iteration by part (:data:`ghsim.serving.costs.PARTS`)."""
    limited_s: dict[str, float]
    """Time during which requests waited while the named limit kept them out."""
    end_s: float
    peak_hbm_blocks: int
    peak_host_blocks: int
    paused: int = 0
    """Times a request was paused (max_utilization) and prefilled again later."""


def request_blocks(request: Request, block_tokens: int, beams: int,
                   window: Window | None = None) -> int:
    """KV blocks reserved for a request to completion: the prompt's full blocks once (the beams
    share them), the rest (the prompt's last partial block and the output limit) per beam, as
    TensorRT-LLM's KV cache manager counts them (getRemainingBlocksToCompletion: context blocks
    plus generation blocks times the beam width, each capped by the attention window: here
    the windowed layers' share of a block holds at most the window's tokens)."""
    tokens = max(request.reserve_tokens, request.input_tokens + request.output_tokens)
    if window is not None:
        tokens = math.ceil(window.cached(tokens))
    shared = min(request.input_tokens, tokens) // block_tokens if beams > 1 else 0
    return shared + beams * (blocks_for(tokens, block_tokens) - shared)


class ReplicaEngine:
    """One replica's scheduler loop and arrival process(es)."""

    def __init__(self, model: IterationModel, config: EngineConfig,
                 requests: list[Request], gaps: np.ndarray | None,
                 max_iterations: int = MAX_SERVING_ITERATIONS) -> None:
        self.model = model
        self.max_iterations = max_iterations
        self.config = config
        self.requests = requests
        self.gaps = gaps
        self.env = simpy.Environment()
        self.waiting: deque[Request] = deque()
        self.prefilling: list[Request] = []
        self.finishing: list[tuple[int, int, int, Request]] = []
        """(iteration of its last token, index, epoch, request) of the decoding requests."""
        self.growing: list[tuple[int, int, int, Request]] = []
        """max_utilization: (iteration it needs its next KV block, index, epoch, request)."""
        self.started: list[tuple[int, int, Request]] = []
        """max_utilization: (-index, epoch, request) of the decoding requests, a heap whose
        top is the latest to arrive, which the scheduler pauses first (TensorRT-LLM walks its
        arrival-ordered request list from the end); stale entries are dropped lazily."""
        self.paused = 0
        self.iteration = 0
        self.decode_requests = 0
        self.decode_seqs = 0
        self.ctx_sum = 0.0
        """Sum over decoding sequences of their cached tokens."""
        self.host_rate = 0.0
        """Sum over decoding sequences of their host share (d host ctx per iteration)."""
        self.host_ctx_sum = 0.0
        self.window_sum = 0.0
        """Sum over decoding sequences of min(context, window) (sliding-window models)."""
        self.window_growing = 0
        """Decoding sequences whose context is still shorter than the window."""
        self.window_full: list[tuple[int, int, Request]] = []
        """(iteration its context reaches the window, index, request) of the growing ones."""
        self.free_hbm = config.hbm_blocks
        self.free_host = config.host_blocks
        self.done = 0
        self.issued = 0
        self.wake: simpy.Event = self.env.event()
        self.events: dict[int, simpy.Event] = {}
        self.log = Iterations()
        self.parts = dict.fromkeys(PARTS, 0.0)
        self.limited = dict.fromkeys(LIMITS, 0.0)
        self.static_batch: list[Request] = []

    # -- arrivals ------------------------------------------------------------------------------

    def _arrive(self, request: Request) -> None:
        request.arrival_s = self.env.now
        self.waiting.append(request)
        self.issued += 1
        if not self.wake.triggered:
            self.wake.succeed()

    def _poisson(self) -> Generator[simpy.Event, Any, None]:
        assert self.gaps is not None and self.config.rate_per_s is not None
        for request, gap in zip(self.requests, self.gaps, strict=True):
            yield self.env.timeout(float(gap) / self.config.rate_per_s)
            self._arrive(request)

    def _client(self, queue: deque[Request]) -> Generator[simpy.Event, Any, None]:
        while queue:
            request = queue.popleft()
            event = self.env.event()
            self.events[request.index] = event
            self._arrive(request)
            yield event

    # -- KV blocks -----------------------------------------------------------------------------

    def _blocks(self, request: Request) -> int:
        return request_blocks(request, self.config.block_tokens, self.config.beam_width,
                              self.config.window)

    def _reserve(self, request: Request) -> bool:
        if self.config.capacity == "max_utilization":
            need = blocks_for(request.prompt_tokens + 1, self.config.block_tokens)
            if need > self.free_hbm:
                return False
            request.blocks, request.host_blocks = need, 0
            self.free_hbm -= need
            return True
        need = self._blocks(request)
        if need > self.free_hbm + self.free_host:
            return False
        hbm = min(need, self.free_hbm)
        request.blocks, request.host_blocks = need, need - hbm
        self.free_hbm -= hbm
        self.free_host -= need - hbm
        return True

    def _release(self, request: Request) -> None:
        self.free_hbm += request.blocks - request.host_blocks
        self.free_host += request.host_blocks

    def _grow(self) -> None:
        """max_utilization: a block for every decoding request whose context outgrows its
        blocks in this iteration, earliest arrival first; when none is free, the latest
        arrival still decoding is paused (MaxUtilizationScheduler), which may be the one
        asking."""
        block = self.config.block_tokens
        while self.growing and self.growing[0][0] <= self.iteration:
            _, _, epoch, request = heapq.heappop(self.growing)
            if epoch != request.epoch or not request.decoding:
                continue
            while self.free_hbm < 1 and request.decoding:
                self._pause(self._latest_started())
            if request.decoding:
                self.free_hbm -= 1
                request.blocks += 1
                heapq.heappush(self.growing, (self.iteration + block, request.index, epoch,
                                              request))

    def _track(self, request: Request) -> None:
        """max_utilization: a request that starts decoding, among those the scheduler may
        pause, and due a block in the first iteration its context outgrows its blocks."""
        if len(self.started) > 2 * self.decode_requests + 64:  # mostly finished ones: drop
            self.started = [e for e in self.started if e[2].decoding and e[1] == e[2].epoch]
            heapq.heapify(self.started)
        heapq.heappush(self.started, (-request.index, request.epoch, request))
        due = self.iteration + request.blocks * self.config.block_tokens - request.join_context + 1
        heapq.heappush(self.growing, (due, request.index, request.epoch, request))

    def _latest_started(self) -> Request:
        while True:
            _, epoch, request = self.started[0]
            if request.decoding and epoch == request.epoch:
                return request
            heapq.heappop(self.started)

    def _pause(self, request: Request) -> None:
        """Free a decoding request's blocks and queue it first, to prefill its prompt and the
        tokens it has produced again (TensorRT-LLM's LlmRequest::pause). It needs at least the
        blocks it freed, one of which went to the request that asked (or one more, if it asked
        itself), so it does not join again in the iteration that paused it, and nothing behind
        it in the queue does either, as in TensorRT-LLM."""
        produced = self.iteration - request.join_iteration + 1
        self._leave(request)
        self._release(request)
        request.blocks = request.host_blocks = 0
        request.generated += produced
        request.prefilled = 0
        request.epoch += 1
        self.waiting.appendleft(request)
        self.paused += 1

    # -- scheduling ----------------------------------------------------------------------------

    def _running(self) -> int:
        return self.decode_requests + len(self.prefilling)

    def _admit(self) -> str | None:
        """Move waiting requests into the batch; the limit that stopped it, if any did."""
        config = self.config
        if config.policy == "static" and (self.decode_requests or self.prefilling
                                          or self.static_batch):
            return None
        while self.waiting:
            if self._running() >= config.max_batch_size:
                return "max_batch_size"
            request = self.waiting[0]
            if not self._reserve(request):
                return "kv_capacity"
            self.waiting.popleft()
            self.prefilling.append(request)
            if config.policy == "static":
                self.static_batch.append(request)
        return None

    def _plan_prefill(self) -> tuple[list[tuple[Request, int]], str | None]:
        """Prompt chunks of this iteration within the token budget."""
        budget = self.config.max_num_tokens - self.decode_seqs
        chunks: list[tuple[Request, int]] = []
        for request in self.prefilling:
            left = request.prompt_tokens - request.prefilled
            if budget <= 0:
                return chunks, "max_num_tokens"
            if left <= budget:
                take = left
            elif self.config.chunked_prefill:
                take = budget
            else:
                return chunks, "max_num_tokens"
            chunks.append((request, take))
            budget -= take
        return chunks, None

    def _batch(self, chunks: list[tuple[Request, int]]) -> Batch:
        tokens = pairs = past = 0.0
        finishing = 0
        for request, take in chunks:
            p = request.prefilled
            tokens += take
            pairs += take * (p + (take + 1) / 2)
            past += p
            if p + take == request.prompt_tokens:
                finishing += self.config.beam_width
        host = self.host_ctx_sum
        window_pairs = 0.0
        if self.config.window is not None:
            w = self.config.window.tokens
            window_pairs = sum(take * min(r.prefilled + (take + 1) / 2, w) for r, take in chunks)
        return Batch(prefill_tokens=int(tokens), prefill_pairs=pairs,
                     prefill_past_tokens=int(past),
                     prefill_chunks=tuple((take, request.prefilled) for request, take in chunks),
                     logits_rows=self.decode_seqs + finishing, decode_seqs=self.decode_seqs,
                     decode_ctx_hbm=self.ctx_sum - host, decode_ctx_host=host,
                     prefill_window_pairs=window_pairs, decode_ctx_window=self.window_sum)

    # -- the loop ------------------------------------------------------------------------------

    def _loop(self) -> Generator[simpy.Event, Any, None]:
        total = len(self.requests)
        while self.done < total:
            if self.growing:
                self._grow()
            limit = self._admit()
            chunks, token_limit = self._plan_prefill()
            if not chunks and not self.decode_seqs:
                if self.prefilling:  # a prompt longer than the whole budget
                    raise RuntimeError("a prompt does not fit max_num_tokens")  # checked before
                self.wake = self.env.event()
                yield self.wake
                continue
            batch = self._batch(chunks)
            cost = self.model.iteration(batch, self._running())
            seconds = cost.total_s
            finished = sum(1 for r, take in chunks if r.prefilled + take == r.prompt_tokens)
            self._record(batch, seconds, self.decode_requests + finished)
            for key, value in cost.parts.items():
                self.parts[key] += value
            if self.waiting:
                self.limited[limit or token_limit or "max_batch_size"] += seconds
            yield self.env.timeout(seconds)
            self.iteration += 1
            if self.iteration > self.max_iterations:
                raise TooManyIterations(self.iteration)
            self._advance(chunks)

    def _record(self, batch: Batch, seconds: float, tokens: int) -> None:
        log = self.log
        log.tokens_out.append(tokens)
        log.start_s.append(self.env.now)
        log.duration_s.append(seconds)
        log.running.append(self._running())
        log.decode_seqs.append(batch.decode_seqs)
        log.prefill_tokens.append(batch.prefill_tokens)
        log.waiting.append(len(self.waiting))
        log.hbm_blocks_used.append(self.config.hbm_blocks - self.free_hbm)
        log.host_blocks_used.append(self.config.host_blocks - self.free_host)

    def _advance(self, chunks: list[tuple[Request, int]]) -> None:
        now, beams = self.env.now, self.config.beam_width
        # every decoding sequence appended one token
        self.ctx_sum += self.decode_seqs
        self.host_ctx_sum += self.host_rate
        self.window_sum += self.window_growing
        while self.window_full and self.window_full[0][0] <= self.iteration:
            _, _, full = heapq.heappop(self.window_full)
            if full.window_growing:
                full.window_growing = False
                self.window_growing -= beams
        for request, take in chunks:
            request.prefilled += take
            if request.prefilled < request.prompt_tokens:
                continue
            self.prefilling.remove(request)
            if math.isnan(request.first_token_s):
                request.first_token_s = now
            if request.remaining_output <= 1:
                self._finish(request, now)
                continue
            request.join_iteration = self.iteration
            request.join_context = request.prompt_tokens + 1
            request.decoding = True
            self.decode_requests += 1
            self.decode_seqs += beams
            self.ctx_sum += beams * request.join_context
            self.host_rate += beams * request.host_fraction
            self.host_ctx_sum += beams * request.host_fraction * request.join_context
            self._join_window(request)
            heapq.heappush(self.finishing, (self.iteration + request.remaining_output - 1,
                                            request.index, request.epoch, request))
            if self.config.capacity == "max_utilization":
                self._track(request)
        while self.finishing and self.finishing[0][0] <= self.iteration:
            _, _, epoch, request = heapq.heappop(self.finishing)
            if epoch != request.epoch:
                continue  # paused since: it finishes on a later entry
            request.finish_s = now
            if self.config.policy == "static":
                self.done += 1
                self._notify(request)
                continue
            self._leave(request)
            self._finish(request, now)
        if self.config.policy == "static" and self.static_batch and not self.prefilling and all(
                not math.isnan(r.finish_s) for r in self.static_batch):
            for request in self.static_batch:
                if request.output_tokens > 1:
                    self._leave(request)
                self._release(request)
            self.static_batch = []

    def _join_window(self, request: Request) -> None:
        """Add a sequence that starts decoding to the window sums."""
        window = self.config.window
        if window is None:
            return
        beams = self.config.beam_width
        self.window_sum += beams * min(request.join_context, window.tokens)
        if request.join_context < window.tokens:
            self.window_growing += beams
            request.window_growing = True
            heapq.heappush(self.window_full, (
                self.iteration + window.tokens - request.join_context, request.index, request))

    def _leave(self, request: Request) -> None:
        """Take a decoding request's sequences out of the sums."""
        request.decoding = False
        beams = self.config.beam_width
        context = request.join_context + (self.iteration - request.join_iteration)
        self.decode_requests -= 1
        self.decode_seqs -= beams
        self.ctx_sum -= beams * context
        self.host_rate -= beams * request.host_fraction
        self.host_ctx_sum -= beams * request.host_fraction * context
        if self.config.window is not None:
            self.window_sum -= beams * min(context, self.config.window.tokens)
            if request.window_growing:
                request.window_growing = False
                self.window_growing -= beams
        if not self.decode_seqs:  # clear rounding drift
            self.ctx_sum = self.host_ctx_sum = self.host_rate = self.window_sum = 0.0

    def _finish(self, request: Request, now: float) -> None:
        request.finish_s = now
        if self.config.policy != "static":
            self._release(request)
            self.done += 1
            self._notify(request)
        elif request.output_tokens <= 1:
            self.done += 1
            self._notify(request)

    def _notify(self, request: Request) -> None:
        event = self.events.pop(request.index, None)
        if event is not None:
            event.succeed()

    # -- run -----------------------------------------------------------------------------------

    def run(self) -> EngineRun:
        config = self.config
        if config.arrival == "offline":
            for request in self.requests:
                self._arrive(request)
        elif config.arrival == "poisson":
            self.env.process(self._poisson())
        else:
            assert config.concurrency is not None
            queues: list[deque[Request]] = [deque() for _ in range(config.concurrency)]
            for request in self.requests:
                queues[request.index % config.concurrency].append(request)
            for queue in queues:
                self.env.process(self._client(queue))
        loop = self.env.process(self._loop())
        self.env.run(until=loop)
        log = self.log
        return EngineRun(
            requests=self.requests, iterations=log, parts_s=self.parts,
            limited_s=self.limited, end_s=self.env.now,
            peak_hbm_blocks=max(log.hbm_blocks_used, default=0),
            peak_host_blocks=max(log.host_blocks_used, default=0), paused=self.paused,
        )
