"""The parallel layout of a scenario: how tp x pp x cp x dp GPUs and the batch are laid out.

:func:`derive_layout` checks that the layout can be laid on the scenario's GPUs and model, the
way Megatron-LM checks it at start-up, and derives the numbers every later stage needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ghsim.config.cursor import KeyPath
from ghsim.config.schema import ModelSpec, ScenarioSpec, SystemSpec
from ghsim.limits import MAX_GPUS


class LayoutProblem(Exception):
    """A layout that cannot work, at a key path of the scenario."""

    def __init__(self, path: KeyPath, message: str, related: tuple[KeyPath, ...] = ()) -> None:
        self.path = path
        self.message = message
        self.related = related
        """Other keys whose values the problem depends on (an override of one is to blame)."""
        super().__init__(message)


def layers_per_virtual_stage(layers: int, stages: int) -> list[int]:
    """Layers of each virtual pipeline stage: even when they divide, otherwise one layer fewer
    on the first and last stages first (they also hold the embedding and the loss), as Meta did
    for Llama 3 405B (126 layers on 16 stages: 7, 8 x 14, 7)."""
    base = -(-layers // stages)
    counts = [base] * stages
    deficit = base * stages - layers
    ends = [i for pair in zip(range(stages), range(stages - 1, -1, -1), strict=True)
            for i in pair]
    for index in ends[:deficit]:
        counts[index] -= 1
    return counts


@dataclass(frozen=True)
class Layout:
    """Derived sizes of one scenario's parallel layout."""

    tp: int
    pp: int
    cp: int
    dp: int
    vp: int
    num_gpus: int
    gpus_per_node: int
    num_nodes: int
    gpus_per_domain: int
    num_domains: int
    micro_batches: int
    """Micro-batches per replica per optimizer step."""
    tokens_per_step: int
    ep: int = 1
    """Expert-parallel size (1 for dense models)."""
    etp: int = 1
    """Expert tensor-parallel size."""
    edp: int = 1
    """Expert data-parallel size: the ranks of a stage, tp x cp x dp, over ep x etp."""

    @property
    def dp_cp(self) -> int:
        """The data-parallel group that reduces the dense gradients and shards ZeRO's states:
        dp x cp, since the context-parallel ranks hold the same weights (Megatron's DDP and
        distributed optimizer use get_data_parallel_group(with_context_parallel=True))."""
        return self.dp * self.cp

    def layer_passes(self, layers: int) -> float:
        """Micro-batches times a stage's share of ``layers``: how many times one rank runs a
        layer forward and backward in a step (the size of a step's simulation)."""
        return self.micro_batches * layers / self.pp

    @property
    def model_parallel(self) -> int:
        """GPUs holding one replica: tp x pp x cp."""
        return self.tp * self.pp * self.cp


def nodes_for(system: SystemSpec, num_gpus: int) -> tuple[int, int]:
    """Nodes used and GPUs used per node, checking that ``num_gpus`` fills whole nodes.

    Fewer GPUs than one node holds are allowed when they divide it (4 GPUs of a DGX).
    """
    per_node = system.node.gpus
    n = num_gpus
    if n < per_node:
        if per_node % n:
            raise LayoutProblem(
                ("num_gpus",), f"expected a divisor or a multiple of {per_node} (GPUs per "
                f"{system.name} node), got {n}"
            )
        return 1, n
    if n % per_node:
        raise LayoutProblem(
            ("num_gpus",),
            f"expected whole nodes: a multiple of {per_node} GPUs per {system.name} node, "
            f"got {n}",
        )
    nodes = n // per_node
    domain_gpus = system.gpus_per_domain
    if system.fabric is None and n > domain_gpus:
        raise LayoutProblem(
            ("num_gpus",),
            f"system {system.name} has no scale-out fabric: at most {domain_gpus} GPUs, got {n}",
        )
    if system.max_nodes is not None and nodes > system.max_nodes:
        raise LayoutProblem(
            ("num_gpus",),
            f"system {system.name} has at most {system.max_nodes} nodes "
            f"({system.max_nodes * per_node} GPUs), got {n}",
        )
    return nodes, per_node


def check_heads_split(model: ModelSpec, tp: int) -> None:
    """Tensor parallelism splits the attention heads, and divides or replicates the KV heads;
    raises :class:`LayoutProblem` at ``parallelism.tp``."""
    if model.heads % tp:
        raise LayoutProblem(
            ("parallelism", "tp"), f"expected a divisor of the model's {model.heads} attention "
            f"heads, got {tp}"
        )
    if model.kv_heads % tp and tp % model.kv_heads:
        raise LayoutProblem(
            ("parallelism", "tp"), f"expected tp to divide, or be a multiple of, the model's "
            f"{model.kv_heads} kv_heads, got {tp}"
        )


def _check_model_split(spec: ScenarioSpec, vp: int) -> None:
    model, par = spec.model, spec.parallelism
    tp, pp = par.tp, par.pp
    check_heads_split(model, tp)
    if model.ffn_hidden % tp:
        raise LayoutProblem(
            ("parallelism", "tp"), f"expected a divisor of ffn_hidden {model.ffn_hidden}, got {tp}"
        )
    # The first and last virtual stages may hold only the embedding and the loss: Megatron's
    # --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split count
    # each as a layer (Qwen3-235B's 94 layers on pp 32 x vp 3, Megatron-MoE-ModelZoo).
    slots = model.layers + 2
    if pp > slots:
        raise LayoutProblem(
            ("parallelism", "pp"),
            f"expected at most the model's {model.layers} layers + 2 (the embedding's and the "
            f"loss's stages), got {pp}",
        )
    if vp > 1 and pp == 1:
        raise LayoutProblem(("parallelism", "vp"), "expected vp only with pp > 1")
    if pp * vp > slots:
        raise LayoutProblem(
            ("parallelism", "vp"),
            f"expected pp x vp ({pp} x {vp}) to be at most the model's {model.layers} layers "
            "+ 2 (the embedding's and the loss's stages)",
        )
    _check_stage_layers(spec, vp)
    cp = par.cp
    if cp > 1 and spec.training.seq_len % (2 * cp):
        raise LayoutProblem(
            ("parallelism", "cp"),
            f"expected seq_len ({spec.training.seq_len}) divisible by 2 x cp, got cp {cp}",
        )
    # Sequence parallelism scatters each context-parallel rank's sequence over the tensor-
    # parallel ranks, and Megatron asserts an even split (megatron/core/tensor_parallel/
    # mappings.py _split_along_first_dim: 'First dimension of the tensor should be divisible
    # by tensor parallel size').
    if par.sequence_parallel and tp > 1 and (spec.training.seq_len // cp) % tp:
        raise LayoutProblem(
            ("parallelism", "sequence_parallel"),
            f"expected each context-parallel rank's {spec.training.seq_len // cp} tokens "
            f"(seq_len / cp) divisible by tp {tp}, as sequence parallelism splits them",
            related=(("training", "seq_len"), ("parallelism", "tp")))


def stage_layer_counts(layers: int, pp: int, first: int | None, last: int | None) -> list[int]:
    """Transformer layers on each pipeline stage with the first and/or last stage's given
    (Megatron's --decoder-first/last-pipeline-num-layers): the other stages share the rest
    evenly. The caller has checked that it divides (:func:`_check_stage_layers`)."""
    ends = {0: first, pp - 1: last}
    fixed = {stage: n for stage, n in ends.items() if n is not None}
    middle = pp - len(fixed)
    share = (layers - sum(fixed.values())) // middle if middle else 0
    return [fixed.get(stage, share) for stage in range(pp)]


def _check_stage_layers(spec: ScenarioSpec, vp: int) -> None:
    par, layers = spec.parallelism, spec.model.layers
    given = [(key, n) for key, n in (("first_stage_layers", par.first_stage_layers),
                                     ("last_stage_layers", par.last_stage_layers))
             if n is not None]
    if not given:
        return
    key = given[0][0]
    if par.pp < 2:
        raise LayoutProblem(("parallelism", key), "expected only with pp > 1",
                            related=(("parallelism", "pp"),))
    fixed = sum(n for _, n in given)
    rest, middle = layers - fixed, par.pp - len(given)
    if rest < 0 or (middle == 0 and rest) or (middle and rest % middle):
        raise LayoutProblem(
            ("parallelism", key),
            f"expected the model's other {layers} - {fixed} layers to "
            f"split evenly over the other {middle} pipeline stages (Megatron asserts it)",
            related=(("model", "layers"), ("parallelism", "pp")))
    counts = stage_layer_counts(layers, par.pp, par.first_stage_layers, par.last_stage_layers)
    uneven = next((c for c in counts if c % vp), None)
    if uneven is not None:
        raise LayoutProblem(
            ("parallelism", key),
            f"expected every stage's layers to divide by vp {vp} (its interleaved chunks), "
            f"got a stage of {uneven} layers", related=(("parallelism", "vp"),))


def _expert_layout(spec: ScenarioSpec, stage_ranks: int) -> tuple[int, int, int]:
    """ep, etp and edp under Megatron-Core's parallel folding: the ranks of a pipeline stage
    refold as etp x ep x edp (megatron/core/parallel_state.py, the expert RankGenerator)."""
    par, moe = spec.parallelism, spec.model.moe
    etp = par.etp if par.etp is not None else par.tp
    if moe is None:
        if par.ep > 1 or (par.etp is not None and par.etp != par.tp):
            key = "ep" if par.ep > 1 else "etp"
            raise LayoutProblem(("parallelism", key), f"expected {key} only for a model with "
                                f"experts (model.moe), got {getattr(par, key)}")
        return 1, etp, stage_ranks // etp
    if par.tp > 1 and not par.sequence_parallel:
        raise LayoutProblem(
            ("parallelism", "sequence_parallel"), "expected true for a MoE model with tp > 1: "
            "Megatron-Core refuses MoE with tensor parallelism but no sequence parallelism "
            "(megatron/core/transformer/moe/moe_layer.py, MoELayer.forward)",
            related=(("parallelism", "tp"),))
    if moe.experts % par.ep:
        raise LayoutProblem(("parallelism", "ep"), f"expected a divisor of the model's "
                            f"{moe.experts} experts, got {par.ep}", related=(("model",),))
    if moe.expert_ffn_hidden % etp:
        raise LayoutProblem(("parallelism", "etp"), f"expected a divisor of expert_ffn_hidden "
                            f"{moe.expert_ffn_hidden}, got {etp}")
    if stage_ranks % (par.ep * etp):
        raise LayoutProblem(
            ("parallelism", "ep"),
            f"expected ep x etp ({par.ep} x {etp}) to divide the {stage_ranks} GPUs of a "
            f"pipeline stage (num_gpus / pp)", related=(("parallelism", "etp"), ("num_gpus",),
                                                       ("parallelism", "pp")))
    return par.ep, etp, stage_ranks // (par.ep * etp)


def _check_positions(spec: ScenarioSpec) -> None:
    """A learned position embedding has one row per position: a sequence cannot be longer
    (Megatron-LM's validate_args asserts max_position_embeddings >= seq_length). Rotary
    positions extend past the trained context, so there the model's limit is not checked."""
    model, seq_len = spec.model, spec.training.seq_len
    limit = model.max_position_embeddings
    if model.position_embedding == "learned" and limit is not None and seq_len > limit:
        raise LayoutProblem(
            ("training", "seq_len"),
            f"expected at most model.max_position_embeddings = {limit:,}, the rows of the "
            f"model's learned position embedding, got {seq_len:,}",
            related=(("model", "max_position_embeddings"), ("model", "position_embedding")))


def derive_layout(spec: ScenarioSpec) -> Layout:
    """Check the scenario's layout and derive its sizes; raises :class:`LayoutProblem`."""
    par, training = spec.parallelism, spec.training
    if spec.num_gpus > MAX_GPUS:
        raise LayoutProblem(("num_gpus",), f"expected at most {MAX_GPUS:,} GPUs "
                            f"(ghsim.limits.MAX_GPUS), got {spec.num_gpus:,}")
    _check_positions(spec)
    nodes, per_node = nodes_for(spec.system, spec.num_gpus)
    vp = par.vp or 1
    _check_model_split(spec, vp)
    model_parallel = par.tp * par.pp * par.cp
    if spec.num_gpus % model_parallel:
        raise LayoutProblem(
            ("num_gpus",),
            f"expected a multiple of tp x pp x cp = {par.tp} x {par.pp} x {par.cp} = "
            f"{model_parallel}, got {spec.num_gpus}",
            related=(("parallelism", "tp"), ("parallelism", "pp"), ("parallelism", "cp")),
        )
    dp = spec.num_gpus // model_parallel
    if par.dp is not None and par.dp != dp:
        raise LayoutProblem(
            ("parallelism", "dp"),
            f"expected num_gpus / (tp x pp x cp) = {spec.num_gpus} / {model_parallel} = {dp}, "
            f"got {par.dp}",
        )
    per_step = training.micro_batch * dp
    if training.global_batch % per_step:
        raise LayoutProblem(
            ("training", "global_batch"),
            f"expected a multiple of micro_batch x dp = {training.micro_batch} x {dp} = "
            f"{per_step}, got {training.global_batch}",
            related=(("training", "micro_batch"), ("parallelism", "dp"), ("num_gpus",)),
        )
    micro_batches = training.global_batch // per_step
    ep, etp, edp = _expert_layout(spec, spec.num_gpus // par.pp)
    domain = min(spec.system.gpus_per_domain, spec.num_gpus)
    return Layout(
        tp=par.tp, pp=par.pp, cp=par.cp, dp=dp, vp=vp,
        num_gpus=spec.num_gpus, gpus_per_node=per_node, num_nodes=nodes,
        gpus_per_domain=domain, num_domains=-(-spec.num_gpus // domain),
        micro_batches=micro_batches,
        tokens_per_step=training.global_batch * training.seq_len,
        ep=ep, etp=etp, edp=edp,
    )
