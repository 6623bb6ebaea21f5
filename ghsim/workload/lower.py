"""Lowering a scenario into per-rank-class operation DAGs (one rank class per pipeline stage).

Every pipeline stage is a rank class: its tp x cp x dp ranks do identical work, so the number of
classes is ``pp`` whatever the data- or tensor-parallel size. Ops are emitted in the order each
stream runs them, and every op depends on the op before it on its stream, so the DAG alone
encodes the schedule; pipeline sends and receives pair up across classes by their ``tag``.

Data parallelism follows Megatron-Core's distributed data parallel: gradients are reduced in
buckets of ``max(40e6, 1e6 * dp)`` parameters (its default ``bucket_size``, or
``parallelism.ddp_bucket_size``; the first stage's first model chunk only, every other chunk
is one bucket) as soon as the last micro-batch's backward pass of those layers is done
(``overlap_grad_reduce``), by all-reduce
(ZeRO 0) or reduce-scatter (ZeRO >= 1, the distributed optimizer), in the gradients' dtype
(``training.main_grads``: FP32 by default with bf16, as Megatron-LM's grad_reduce_in_fp32); the
updated parameters are all-gathered at the start of the next step, overlapped with its forward
pass (``overlap_param_gather``). ZeRO 3 gathers each chunk's parameters before every pass.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ghsim.config import Scenario
from ghsim.config.api import blame
from ghsim.config.layout import LayoutProblem, layers_per_virtual_stage, stage_layer_counts
from ghsim.errors import LimitError
from ghsim.limits import MAX_SIMULATED_KERNELS, MAX_SIMULATED_OPS
from ghsim.workload import kernels as K
from ghsim.workload.activations import head_activation_bytes, layer_activation_bytes
from ghsim.workload.ir import Kernel, RankClass, Step, Workload, check_dag
from ghsim.workload.modelsize import (
    ParamCount,
    attention_window,
    is_moe_layer,
    model_flops_per_token,
    parameter_count,
)
from ghsim.workload.offload import offload_policy, policy_class
from ghsim.workload.placement import place_groups
from ghsim.workload.schedule import Pass, pipeline_order
from ghsim.workload.shapes import LayerShapes, layer_shapes, window_work
from ghsim.workload.stage import Chunk, OpBuilder
from ghsim.workload.states import bytes_per_param, optimizer_step_bytes

FP8_WEIGHT_CACHE_BYTES = 2.0
"""Under FP8 each Transformer Engine GEMM keeps an FP8 copy of its weight and of the weight's
transpose (Hopper's FP8 GEMMs need both layouts) for the whole step, cast on the first
micro-batch: Megatron-Core's TE layers pass ``is_first_microbatch`` unless
``disable_parameter_transpose_cache`` (core_r0.8.0 custom_layers/transformer_engine.py,
TELinear.forward), and TE caches the cast in ``_fp8_workspaces`` (release_v1.8 module/base.py
get_fp8_workspace, module/linear.py ``cache_name="weight"``). One byte each. ZeRO-3 gathers
weights anew every pass and keeps no such cache."""


def _layer_params(scenario: Scenario, count: ParamCount, index: int) -> tuple[float, float]:
    """Parameters of layer ``index`` on one rank (``count``: the model's): those split by tp,
    and the routed experts' (split by ep x etp) of a MoE layer."""
    model, layout = scenario.spec.model, scenario.layout
    if model.moe is None or not is_moe_layer(model, index):
        return count.per_layer / layout.tp, 0.0
    dense = count.attention_per_layer + count.norms_per_layer + count.router_per_moe_layer \
        + count.shared_per_moe_layer
    return dense / layout.tp, count.experts * count.expert / (layout.ep * layout.etp)


def _stage_layers(scenario: Scenario) -> list[int]:
    """Main-model layers of each virtual pipeline stage. Multi-token-prediction modules sit on
    the last stage and count as one layer each in the even split, as the recipes that train
    with them lay the pipeline out (Megatron-Bridge's DeepSeek-V3 layout ``Et|(tt|)*30mL``: the
    last virtual stage holds only the MTP module and the loss); with the first or last stage's
    layers given (``parallelism.first_stage_layers`` / ``last_stage_layers``) they come on
    top of the last stage's."""
    layout, model = scenario.layout, scenario.spec.model
    par = scenario.spec.parallelism
    if par.first_stage_layers is not None or par.last_stage_layers is not None:
        # Megatron's uneven split: each stage's layers evenly over its chunks, the MTP
        # modules on top of the last (virtual stage v = chunk x pp + stage)
        counts = stage_layer_counts(model.layers, layout.pp, par.first_stage_layers,
                                    par.last_stage_layers)
        return [counts[v % layout.pp] // layout.vp for v in range(layout.pp * layout.vp)]
    mtp = model.mtp_layers
    per_stage = layers_per_virtual_stage(model.layers + mtp, layout.pp * layout.vp)
    for stage in range(len(per_stage) - 1, -1, -1):  # take the MTP modules off the end
        taken = min(mtp, per_stage[stage])
        per_stage[stage] -= taken
        mtp -= taken
    return per_stage


def _layer_indices(scenario: Scenario, chunk: Chunk) -> range:
    """The model's layer indices the chunk holds."""
    per_stage = _stage_layers(scenario)
    start = sum(per_stage[:chunk.virtual_stage])
    return range(start, start + chunk.layers)


def _chunks(scenario: Scenario, stage: int) -> list[Chunk]:
    spec, layout = scenario.spec, scenario.layout
    count = parameter_count(spec.model)
    total_virtual = layout.pp * layout.vp
    per_stage = _stage_layers(scenario)
    moe = spec.model.moe is not None
    chunks = []
    for c in range(layout.vp):
        v = c * layout.pp + stage
        first, last = v == 0, v == total_virtual - 1
        per_chunk = per_stage[v]
        outside = count.embedding if first else 0
        if last:
            output = count.output or (count.embedding if layout.pp > 1 else 0)
            outside += output + count.final_norm
        indices = range(sum(per_stage[:v]), sum(per_stage[:v]) + per_chunk)
        windows = tuple(attention_window(spec.model, i) for i in indices)
        windows = windows if any(w is not None for w in windows) else ()
        if not moe:  # a dense model's MTP modules are dense: on the last chunk, split by tp
            mtp_dense = (False,) * count.mtp_layers if last else ()
            chunks.append(Chunk(c, v, per_chunk, first, last,
                                (per_chunk * count.per_layer + outside
                                 + (count.mtp if last else 0)) / layout.tp,
                                windows=windows, mtp=mtp_dense))
            continue
        split = [_layer_params(scenario, count, i) for i in indices]
        experts = sum(e for _, e in split)
        params = sum(d for d, _ in split) + experts + outside / layout.tp
        kinds = tuple(is_moe_layer(spec.model, i) for i in indices)
        mtp: tuple[bool, ...] = ()
        if last and count.mtp_layers:
            mtp = (count.mtp_moe_layers > 0,) * count.mtp_layers
            mtp_experts = count.mtp_moe_layers * count.experts * count.expert
            experts += mtp_experts / (layout.ep * layout.etp)
            params += (count.mtp - mtp_experts) / layout.tp + mtp_experts / (
                layout.ep * layout.etp)
        chunks.append(Chunk(c, v, per_chunk, first, last, params, kinds, windows, mtp, experts))
    return chunks


def _layers(chunk: Chunk, s: LayerShapes, backward: bool, count: int, skip: int) -> list[Step]:
    """The kernels of ``count`` layers of the chunk, ``skip`` layers in (from its last layer
    when ``backward``), in the order the pass runs them."""
    kinds = list(zip(chunk.moe_layers or (False,) * chunk.layers,
                     chunk.windows or (None,) * chunk.layers, strict=True))
    order = list(reversed(kinds)) if backward else kinds
    build = K.layer_backward if backward else K.layer_forward
    steps: list[Step] = []
    cache: dict[tuple[bool, int | None], list[Step]] = {}
    for kind in order[skip:skip + count]:
        if kind not in cache:
            moe, window = kind
            shapes = s if window is None else replace(
                s, attention_work=s.attention_work * window_work(s.seq_len, window))
            cache[kind] = build(shapes, moe)
        steps += cache[kind]
    return steps


def _forward_body(chunk: Chunk, s: LayerShapes) -> tuple[Step, ...]:
    """The chunk's whole forward pass as one body."""
    return _forward_bodies(chunk, s, [chunk.layers])[0]


def _forward_bodies(chunk: Chunk, s: LayerShapes, buckets: list[int]) -> list[tuple[Step, ...]]:
    """The chunk's forward pass, split into one body per parameter bucket (first layers first)."""
    bodies, done = [], 0
    for index, layers in enumerate(buckets):
        body = K.embedding_forward(s) if chunk.first and index == 0 else []
        body += _layers(chunk, s, False, layers, done)
        done += layers
        if chunk.last and index == len(buckets) - 1:
            body += K.head_forward(s)
            for moe in chunk.mtp:
                body += K.mtp_forward(s, moe)
        bodies.append(tuple(body))
    return bodies


def _backward_bodies(chunk: Chunk, s: LayerShapes, buckets: list[int]) -> list[tuple[Step, ...]]:
    """The chunk's backward pass, split into one body per gradient bucket (last layers first)."""
    bodies, done = [], 0
    for index, layers in enumerate(buckets):
        body = []
        if chunk.last and index == 0:
            for moe in reversed(chunk.mtp):
                body += K.mtp_backward(s, moe)
            body += K.head_backward(s)
        body += _layers(chunk, s, True, layers, done)
        done += layers
        body += K.embedding_backward(s) if chunk.first and index == len(buckets) - 1 else []
        bodies.append(tuple(body))
    return bodies


def _buckets(chunk: Chunk, per_layer_params: float, bucket_params: float | None) -> list[int]:
    """Layers per gradient bucket, in backward order (None: the chunk is one bucket)."""
    if chunk.layers == 0:
        return [0]
    if bucket_params is None:
        return [chunk.layers]
    per_bucket = max(1, int(bucket_params // max(per_layer_params, 1.0)) + 1)
    sizes = [per_bucket] * (chunk.layers // per_bucket)
    if chunk.layers % per_bucket:
        sizes.append(chunk.layers % per_bucket)
    return sizes


class _StageLowering:
    """Lowers one pipeline stage (the :class:`~ghsim.workload.stage.StageLowering` that offload
    policies see)."""

    def __init__(self, scenario: Scenario, stage: int) -> None:
        self.scenario = scenario
        self.layout = scenario.layout
        self.par = scenario.spec.parallelism
        self.stage = stage
        self.shapes = layer_shapes(scenario.spec, scenario.layout)
        self.chunks = _chunks(scenario, stage)
        self.b = OpBuilder()
        training = scenario.spec.training
        w, g, o = bytes_per_param(training)
        self.state_bytes: tuple[float, float, float] = (w, g, o)
        """Bytes a parameter holds in weights, gradients (``main_grads``: also the bytes of the
        data-parallel gradient collectives) and optimizer states (by ``training.optimizer``)."""
        self.optimizer_name = training.optimizer
        self.step_bytes = optimizer_step_bytes(training)
        """The optimizer step's memory traffic a parameter (states.optimizer_step_bytes)."""
        self.count = parameter_count(scenario.spec.model)
        """The model's parameters (every rank's share derives from it)."""
        self.per_layer_params = self.count.per_layer / self.layout.tp
        kinds = [moe for c in self.chunks for moe in c.moe_layers]
        if kinds:  # MoE and dense layers differ: buckets and per-layer policies use the mean
            sizes = [sum(_layer_params(scenario, self.count, i)) for c in self.chunks
                     for i in _layer_indices(scenario, c)]
            self.per_layer_params = sum(sizes) / len(sizes)
        params = sum(c.params for c in self.chunks)
        self.expert_share = sum(c.expert_params for c in self.chunks) / params if params else 0.0
        """Of this rank's parameters, the routed experts' (synchronized over edp, not dp)."""
        self.bucket_size = float(self.par.ddp_bucket_size or max(40e6, 1e6 * self.layout.dp_cp))
        self._resident: dict[int, float] = {}
        """Per chunk: :meth:`resident_share`, computed once."""
        self.grad_ops: list[int] = []
        self.pass_ends: list[int] = []
        """The last compute op of each forward and backward pass lowered so far."""
        self.param_gather: dict[int, list[int]] = {}
        """Per chunk: the prefetched weight all-gathers, one per bucket in forward order."""
        # Bodies and activation sizes are the same for every micro-batch: build them once.
        self.forward_bodies = {c.index: _forward_body(c, self.shapes) for c in self.chunks}
        self.backward_bodies: dict[tuple[int, tuple[int, ...], bool], list[tuple[Step, ...]]] = {}
        per_layer = (sum(layer_activation_bytes(self.shapes, moe) for moe in kinds) / len(kinds)
                     if kinds else layer_activation_bytes(self.shapes))
        head = head_activation_bytes(self.shapes)
        mtp = self.chunks[-1].mtp if self.chunks[-1].last else ()
        head += sum(layer_activation_bytes(self.shapes, moe) + head_activation_bytes(self.shapes)
                    for moe in mtp)  # each MTP module keeps a layer's and a head's tensors
        self.layer_activations = per_layer
        self.head_activations = head
        self.saved: dict[tuple[int, int], list[tuple[str, float]]] = {}
        """Activation buffers each (micro-batch, chunk) keeps for its backward pass."""
        self.policy = offload_policy(scenario)
        self.policy.prepare(self)
        self.b.managed = self.policy.managed
        self.compute_history: list[int] = []
        """Compute ops emitted so far (streaming offload policies prefetch relative to them)."""

    @property
    def previous_stage(self) -> int:
        """The stage activations come from (the last stage, for stage 0's later chunks)."""
        return (self.stage - 1) % self.layout.pp

    @property
    def next_stage(self) -> int:
        return (self.stage + 1) % self.layout.pp

    @property
    def zero(self) -> int:
        return self.par.zero_stage

    def _boundary_bytes(self) -> float:
        s = self.shapes
        return float(s.sp_tokens * s.hidden * s.act_bytes)

    def states(self) -> None:
        """Weights, gradients and optimizer states, in the tiers the offload policy puts them."""
        w, g, o = self.state_bytes
        params = sum(c.params for c in self.chunks)
        sizes = {"weights": self.sharded(params, 3) * w,
                 "gradients": self.sharded(params, 2) * g,
                 "optimizer": self.sharded(params, 1) * o}
        for category, nbytes in sizes.items():
            host = self.policy.host_fraction(category)
            self.b.alloc(-1, category, category, nbytes * (1 - host))
            self.b.alloc(-1, f"{category}.host", category, nbytes * host, self.policy.host_tier)
        self.b.alloc(-1, "weights.fp8_cache", "weights", FP8_WEIGHT_CACHE_BYTES * sum(
            self.gemm_params(c) for c in self.chunks) if self.shapes.fp8 and self.zero < 3
            else 0.0)

    def gemm_params(self, chunk: Chunk) -> float:
        """Of a chunk's parameters on this rank, the Transformer Engine GEMMs' (attention,
        MLP and expert projections): all but the embedding, the output layer (not a TE
        module), the norms and the routers."""
        count = self.count
        outside = (count.embedding if chunk.first else 0.0) + (
            count.output + count.final_norm if chunk.last else 0.0)
        moe_layers = sum(chunk.moe_layers)
        small = chunk.layers * count.norms_per_layer + moe_layers * count.router_per_moe_layer
        return max(0.0, chunk.params - (outside + small) / self.layout.tp)

    def sharded(self, params: float, stage: int) -> float:
        """Of ``params`` on this rank, what ZeRO ``stage`` or above leaves it: the dense part
        sharded over dp, the experts' over edp."""
        if self.zero < stage:
            return params
        experts = params * self.expert_share
        return (params - experts) / self.layout.dp_cp + experts / self.layout.edp

    def _groups(self, chunk: Chunk, params: float) -> list[tuple[str, int, float]]:
        """The data-parallel groups that synchronize ``params`` of ``chunk`` (the routed
        experts' share of them as the chunk's): (group, size, parameters), skipping groups of
        one."""
        share = chunk.expert_params / chunk.params if chunk.params else 0.0
        experts = params * share
        groups = [("dp", self.layout.dp_cp, params - experts), ("edp", self.layout.edp, experts)]
        return [(g, n, p) for g, n, p in groups if n > 1 and p > 0]

    def gather_params(self, chunk: Chunk, tag: str, params: float | None = None,
                      after: tuple[int, ...] = ()) -> int:
        """A data-parallel all-gather of the chunk's (or a bucket's) updated weights (the
        experts' over the expert data-parallel group). Under ZeRO-3 every pass gathers the
        chunk's weights (one collective of the chunk's bytes) into a workspace its end frees;
        FSDP and DeepSpeed gather a block at a time and free it after use, so a pass holds
        :meth:`resident_share` of them, its largest gradient bucket's (about a layer), and
        the next pass's prefetch as much again. ``after``: ops that must end first (the
        optimizer steps whose updated shards a gather after the step collects)."""
        if self.zero == 0:
            return -1
        total = chunk.params if params is None else params
        # ZeRO-3 gathers a pass's weights while the pass before it computes (FSDP's and
        # DeepSpeed's one-ahead prefetch), not every pass's at the start of the step: after
        # the pass before that one ends.
        ahead = (self.pass_ends[-2],) if self.zero >= 3 and len(self.pass_ends) > 1 else after
        op = -1
        for group, size, part in self._groups(chunk, total):
            nbytes = part * self.state_bytes[0]
            op = self.b.add("collective", f"{group}.param_all_gather.c{chunk.index}.{tag}",
                            "dp", ahead, nbytes=nbytes, collective="all_gather", group=group,
                            group_size=size, chunk=chunk.index)
            if self.zero >= 3:
                self.b.alloc(op, f"gathered.c{chunk.index}", "workspace",
                             nbytes * self.resident_share(chunk))
        return op

    def resident_share(self, chunk: Chunk) -> float:
        """Of a chunk's gathered weights, the share a ZeRO-3 pass holds at once: its largest
        gradient bucket's (FSDP's block, DeepSpeed's prefetch bucket; the whole chunk when
        it is one bucket)."""
        if chunk.index not in self._resident:
            self._resident[chunk.index] = (min(1.0, self.largest_bucket_params(chunk)
                                               / chunk.params) if chunk.params else 1.0)
        return self._resident[chunk.index]

    def release_params(self, chunk: Chunk, after: int) -> None:
        """Under ZeRO-3, free the chunk's gathered weights once the pass ``after`` has used
        them (every forward and backward pass gathers them anew)."""
        if self.zero >= 3:
            freed = sum(p for _, _, p in self._groups(chunk, chunk.params))
            self.b.alloc(after, f"gathered.c{chunk.index}", "workspace",
                         -freed * self.state_bytes[0] * self.resident_share(chunk))

    def forward(self, p: Pass, chunk: Chunk) -> None:
        deps = []
        if not chunk.first:
            deps.append(self.b.add("recv", f"recv_act.mb{p.microbatch}.c{chunk.index}", "pp_recv",
                                   nbytes=self._boundary_bytes(), peer_stage=self.previous_stage,
                                   tag=("act", p.microbatch, chunk.virtual_stage)))
        if self.zero >= 3:
            deps.append(self.gather_params(chunk, f"F{p.microbatch}"))
        gathers = self.param_gather.get(chunk.index, []) if p.microbatch == 0 else []
        if self.policy.per_layer:
            # layer by layer, each bucket's first layer waiting for that bucket's weights
            buckets, waits = [1] * chunk.layers or [0], []
            for count, gather in zip(reversed(self.buckets(chunk)), gathers, strict=False):
                waits += [[gather]] + [[] for _ in range(count - 1)]
        elif gathers:
            # The first forward pass runs bucket by bucket as the prefetched weights arrive.
            buckets, waits = list(reversed(self.buckets(chunk))), [[g] for g in gathers]
        else:
            buckets, waits = [chunk.layers], [[]]
        bodies = (_forward_bodies(chunk, self.shapes, buckets) if len(buckets) > 1
                  else [self.forward_bodies[chunk.index]])
        saved = self.saved.setdefault((p.microbatch, chunk.index), [])
        op = -1
        for index, body in enumerate(bodies):
            last = index == len(bodies) - 1
            extra = self.policy.before_pass(self, "F", p.microbatch, chunk, index, buckets)
            op = self.b.add("compute", f"F.mb{p.microbatch}.c{chunk.index}.b{index}", "compute",
                            (*deps, *extra, *(waits[index] if index < len(waits) else [])),
                            body, phase="F", microbatch=p.microbatch, chunk=chunk.index,
                            layers=buckets[index])
            name = f"act.mb{p.microbatch}.c{chunk.index}.b{index}"
            size = buckets[index] * self.layer_activations
            size += self.head_activations if chunk.last and last else 0.0
            self.b.alloc(op, name, "activations", size)
            saved.append((name, size))
            self.policy.after_pass(self, "F", p.microbatch, chunk, index, buckets, op)
        self.release_params(chunk, op)
        self.pass_ends.append(op)
        if not chunk.last:
            self.b.add("send", f"send_act.mb{p.microbatch}.c{chunk.index}", "pp_send", (op,),
                       nbytes=self._boundary_bytes(), peer_stage=self.next_stage,
                       tag=("act", p.microbatch, chunk.virtual_stage + 1))

    def backward(self, p: Pass, chunk: Chunk, final: bool) -> None:
        deps = []
        if not chunk.last:
            deps.append(self.b.add("recv", f"recv_grad.mb{p.microbatch}.c{chunk.index}",
                                   "pp_recv", nbytes=self._boundary_bytes(),
                                   peer_stage=self.next_stage,
                                   tag=("grad", p.microbatch, chunk.virtual_stage)))
        if self.zero >= 3:
            deps.append(self.gather_params(chunk, f"B{p.microbatch}"))
        if self.policy.per_layer:
            buckets = [1] * chunk.layers or [0]
        else:
            buckets = self.buckets(chunk) if final else [chunk.layers]
        key = (chunk.index, tuple(buckets), final)
        if key not in self.backward_bodies:
            bodies = _backward_bodies(chunk, self.shapes, buckets)
            if final:  # each bucket's gradients are made ready for their collective
                bodies = [(*body, *self._prepare_bucket(chunk, layers, index, len(buckets)))
                          for index, (layers, body) in enumerate(zip(buckets, bodies,
                                                                     strict=True))]
            self.backward_bodies[key] = bodies
        bodies = self.backward_bodies[key]
        saved = self.saved.pop((p.microbatch, chunk.index))
        op = -1
        for index, (layers, body) in enumerate(zip(buckets, bodies, strict=True)):
            extra = self.policy.before_pass(self, "B", p.microbatch, chunk, index, buckets)
            op = self.b.add("compute", f"B.mb{p.microbatch}.c{chunk.index}.b{index}", "compute",
                            (*deps, *extra), body, phase="B", microbatch=p.microbatch,
                            chunk=chunk.index, layers=layers)
            if self.policy.per_layer:
                name, size = saved.pop()
                self.b.alloc(op, name, "activations", -size)
            self.policy.after_pass(self, "B", p.microbatch, chunk, index, buckets, op)
            if final:
                reduced = self.reduce_gradients(chunk, layers, index, len(buckets), op)
                self.grad_ops.append(reduced)
                self.policy.after_reduce(self, chunk, layers, index, len(buckets), reduced)
        for name, size in saved:
            self.b.alloc(op, name, "activations", -size)
        self.release_params(chunk, op)
        self.pass_ends.append(op)
        if not chunk.first:
            self.b.add("send", f"send_grad.mb{p.microbatch}.c{chunk.index}", "pp_send", (op,),
                       nbytes=self._boundary_bytes(), peer_stage=self.previous_stage,
                       tag=("grad", p.microbatch, chunk.virtual_stage - 1))

    def buckets(self, chunk: Chunk) -> list[int]:
        """Layers per gradient (and weight) bucket of a chunk, in backward order. Megatron-Core
        buckets the first stage's first model chunk only; the others are one bucket each
        (NVIDIA/Megatron-LM megatron/core/distributed/distributed_data_parallel.py: no
        bucket_size where pp_rank > 0 or disable_bucketing, which get_model sets for model
        chunks after the first; NeMo's MegatronParallel does the same), and so is every chunk
        whose gradients are not reduced during the backward pass."""
        first = self.stage == 0 and chunk.index == 0 and self.par.overlap_grad_reduce
        bucketed = first or self.zero >= 3  # FSDP goes block by block on every stage
        return _buckets(chunk, self.per_layer_params, self.bucket_size if bucketed else None)

    def largest_bucket_params(self, chunk: Chunk) -> float:
        """Parameters of the chunk's largest gradient bucket."""
        sizes = self.buckets(chunk)
        return max(self.bucket_params(chunk, layers, index, len(sizes))
                   for index, layers in enumerate(sizes))

    def bucket_params(self, chunk: Chunk, layers: int, index: int, buckets: int) -> float:
        """Parameters whose gradients bucket ``index`` holds (the head's go with the first
        bucket, the embedding's with the last, as the backward pass produces them)."""
        count = self.count
        tp = self.layout.tp
        params = layers * self.per_layer_params
        if chunk.last and index == 0:
            params += chunk.params - chunk.layers * self.per_layer_params
            params -= count.embedding / tp if chunk.first else 0.0
        if chunk.first and index == buckets - 1:
            params += count.embedding / tp
        return params

    def reduce_gradients(self, chunk: Chunk, layers: int, index: int, buckets: int,
                         after: int) -> int:
        """Reduce one bucket's gradients over the data-parallel group (the experts' over the
        expert data-parallel group)."""
        params = self.bucket_params(chunk, layers, index, buckets)
        collective = "reduce_scatter" if self.zero >= 1 else "all_reduce"
        deps = (after,) if self.par.overlap_grad_reduce else (self.b.tails["compute"],)
        op = after
        for group, size, part in self._groups(chunk, params):
            op = self.b.add("collective", f"{group}.grad_{collective}.c{chunk.index}.b{index}",
                            "dp", deps, nbytes=part * self.state_bytes[1],
                            collective=collective, group=group, group_size=size,
                            chunk=chunk.index)
        return op

    def _prepare_bucket(self, chunk: Chunk, layers: int, index: int, buckets: int
                        ) -> tuple[Step, ...]:
        """What Megatron-Core's start_grad_sync does to a bucket's gradients before its
        collective, on the compute stream at the end of the bucket's last backward pass: the
        NaN check's norm, whose result the host waits for (``training.grad_nan_check``), then,
        where the bucket is reduced, its scaling by 1 / (data-parallel size) of a sum
        reduction (DistributedDataParallel's gradient_scaling_factor, where
        average_in_collective is off, its default), one in-place pass."""
        params = self.bucket_params(chunk, layers, index, buckets)
        reduced = bool(self._groups(chunk, params))
        training = self.scenario.spec.training
        check, dtype = training.grad_nan_check_resolved, training.main_grads_resolved
        nbytes, count = params * self.state_bytes[1], (int(params),)
        steps: list[Step] = []
        if check and params:
            steps.append(Kernel("grad_norm", 0.0, nbytes, dtype, count, "stream"))
        if reduced and params:
            steps.append(Kernel("grad_scale", 0.0, 2 * nbytes, dtype, count, "pointwise",
                                host_syncs=1 if check else 0))
        return tuple(steps)

    def optimizer(self) -> None:
        deps = [*self.grad_ops, *self.policy.before_optimizer(self)]
        tied = self.scenario.spec.model.tied_embeddings and self.layout.pp > 1
        if tied and (self.chunks[0].first or self.chunks[-1].last):
            count = self.count
            deps.append(self.b.add(
                "collective", "embedding.grad_all_reduce", "pp_embedding",
                (self.b.tails["compute"],), nbytes=count.embedding / self.layout.tp
                * self.state_bytes[1], collective="all_reduce", group="embedding",
                group_size=2))
        params = self.sharded(sum(c.params for c in self.chunks), 1)
        on_gpu = params * (1 - self.policy.host_fraction("optimizer"))
        if on_gpu:
            name = self.optimizer_name
            step = Kernel(name, 0.0, on_gpu * self.step_bytes, "fp32", (int(on_gpu),),
                          "optimizer")
            self.b.add("compute", f"optimizer.{name}", "compute", tuple(deps), (step,),
                       phase="optimizer")
        self.policy.optimizer(self, params, tuple(deps))

    def lower(self) -> RankClass:
        self.states()
        if self.par.overlap_param_gather and self.zero in (1, 2) and (
                self.layout.dp_cp > 1 or self.layout.edp > 1):
            for chunk in self.chunks:
                backward = self.buckets(chunk)
                count = len(backward)
                self.param_gather[chunk.index] = [
                    self.gather_params(chunk, f"prefetch.b{j}", self.bucket_params(
                        chunk, backward[count - 1 - j], count - 1 - j, count))
                    for j in range(count)
                ]
        order = pipeline_order(self.stage, self.layout.pp, self.layout.vp,
                               self.layout.micro_batches)
        last_backward = {p.chunk: i for i, p in enumerate(order) if p.phase == "B"}
        for i, p in enumerate(order):
            chunk = self.chunks[p.chunk]
            if p.phase == "F":
                self.forward(p, chunk)
            else:
                self.backward(p, chunk, final=last_backward[p.chunk] == i)
        first = len(self.b.ops)
        self.optimizer()
        if not self.par.overlap_param_gather and self.zero in (1, 2):
            # the shards the optimizer (on the GPU, and any the policy runs on the host)
            # updated, gathered once it is done (Megatron's start_param_sync after step())
            updated = tuple(range(first, len(self.b.ops)))
            for chunk in self.chunks:
                self.gather_params(chunk, "after_step", after=updated)
        replicas = self.layout.tp * self.layout.cp * self.layout.dp
        first_rank = self.stage * replicas
        return RankClass(f"stage{self.stage}", self.stage, replicas, self.b.ops,
                         self.b.memory, place_groups(self.layout, first_rank), first_rank)


@dataclass(frozen=True)
class WorkEstimate:
    """How much a lowered step holds, estimated from the layout before anything is built."""

    ops: int
    """Operations over all rank classes (an upper estimate: within a few times the count)."""
    kernels: int
    """Kernels in the bodies of all compute operations."""
    layers_per_chunk: int
    per_layer: bool
    """The offload strategy emits one compute op per layer."""


def estimate_work(scenario: Scenario) -> WorkEstimate:
    """Ops and kernels :func:`lower` would build for ``scenario``, in microseconds: per stage,
    each micro-batch's forward and backward pass of each model chunk is a compute op (one per
    layer with a streaming offload strategy, each with its copies or page migrations) with its
    pipeline receive and send, and each chunk's last backward pass adds one gradient bucket
    (and weight gather) per layer at most."""
    layout, spec = scenario.layout, scenario.spec
    # the MTP modules join the layers split over the virtual stages, then all run on the last
    # chunk (_stage_layers): the busiest chunk holds the larger of the two
    mtp = spec.model.mtp_layers
    layers = max(-(-(spec.model.layers + mtp) // (layout.pp * layout.vp)), mtp)
    per_layer = policy_class(spec.offload.strategy, scenario.source).per_layer
    passes = 2 * layout.micro_batches * layout.vp
    units = 3 * layers if per_layer else 1
    ops = layout.pp * (passes * (units + 3) + 4 * layout.vp * (layers + 1) + 16)
    shapes = layer_shapes(spec, layout)
    per_layer_kernels = len(K.layer_forward(shapes)) + len(K.layer_backward(shapes))
    kernels = layout.pp * layout.micro_batches * layout.vp * layers * per_layer_kernels
    return WorkEstimate(ops, kernels, layers, per_layer)


def check_work(scenario: Scenario) -> WorkEstimate:
    """Raise :class:`LimitError` when lowering ``scenario`` would build more ops or kernels than
    :data:`~ghsim.limits.MAX_SIMULATED_OPS` or :data:`~ghsim.limits.MAX_SIMULATED_KERNELS`."""
    work = estimate_work(scenario)
    layout = scenario.layout
    if work.ops <= MAX_SIMULATED_OPS and work.kernels <= MAX_SIMULATED_KERNELS:
        return work
    if work.ops > MAX_SIMULATED_OPS:
        amount = f"about {work.ops:,} operations"
        limit = f"{MAX_SIMULATED_OPS:,} (ghsim.limits.MAX_SIMULATED_OPS)"
    else:
        amount = f"about {work.kernels:,} kernels"
        limit = f"{MAX_SIMULATED_KERNELS:,} (ghsim.limits.MAX_SIMULATED_KERNELS)"
    factors = (f"{layout.pp} pipeline stage(s) x {layout.micro_batches:,} micro-batches x "
               f"{layout.vp} chunk(s) x {work.layers_per_chunk:,} layers per chunk")
    related: tuple[tuple[str | int, ...], ...] = (
        ("training", "global_batch"), ("training", "micro_batch"), ("num_gpus",),
        ("parallelism", "pp"), ("parallelism", "vp"), ("parallelism", "tp"),
        ("parallelism", "cp"), ("parallelism", "dp"), ("model", "layers"), ("model",),
        ("offload", "strategy"))
    if layout.micro_batches >= work.layers_per_chunk:
        path: tuple[str | int, ...] = ("training", "global_batch")
        hint = "fewer micro-batches per step (a smaller global_batch, a larger micro_batch or dp)"
    elif scenario.spec.model.mtp_layers > scenario.spec.model.layers:
        path = ("model", "mtp_layers")
        hint = "fewer MTP modules (they all run on the last pipeline stage)"
    else:
        path = ("model", "layers")
        hint = "fewer layers per pipeline stage (fewer layers, a larger pp)"
    message = (f"the step would simulate {amount} ({factors}), over ghsim's limit of {limit}; "
               f"expected {hint}")
    problem = LayoutProblem(path, message, tuple(r for r in related if r != path))
    raise blame(problem, scenario.source, scenario.overrides, LimitError)


def lower(scenario: Scenario) -> Workload:
    """Lower ``scenario`` into its workload: one rank class per pipeline stage (refused with a
    :class:`LimitError`, before anything is built, when it would be too large to simulate)."""
    check_work(scenario)
    classes = [_StageLowering(scenario, stage).lower() for stage in range(scenario.layout.pp)]
    for rank_class in classes:
        check_dag(rank_class, scenario.source)
    per_token = model_flops_per_token(scenario.spec.model, scenario.spec.training.seq_len)
    tokens = scenario.layout.tokens_per_step
    return Workload(classes, scenario.layout.num_gpus, per_token * tokens, tokens,
                    attrs={"scenario": scenario.name})
