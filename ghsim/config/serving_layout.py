"""The layout of a serving scenario: replicas of tp GPUs, and the checks TensorRT-LLM makes.

:func:`derive_serving_layout` checks that the replicas can be laid on the scenario's GPUs and
model, and returns the training :class:`Layout` of the same GPUs (tp x 1 x 1 x replicas), so
that the fabric lays a replica's collectives exactly as it lays a training job's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ghsim.config.layout import Layout, LayoutProblem, check_heads_split, nodes_for
from ghsim.config.schema import ServingScenarioSpec
from ghsim.limits import MAX_GPUS


@dataclass(frozen=True)
class ServingScenario:
    """A validated serving scenario with its layout derived."""

    spec: ServingScenarioSpec
    layout: Layout
    """The GPUs as a training layout: tp, pp 1, cp 1, dp = replicas; ep inside tp."""
    source: str
    overrides: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.spec.name or Path(self.source).stem

    @property
    def replicas(self) -> int:
        return self.layout.dp

    def digest(self) -> str:
        """SHA-256 of the resolved scenario (:meth:`Spec.digest`)."""
        return self.spec.digest()


def derive_serving_layout(spec: ServingScenarioSpec) -> Layout:
    """Check the replicas and their split; raises :class:`LayoutProblem`."""
    par, model = spec.parallelism, spec.model
    if spec.num_gpus > MAX_GPUS:
        raise LayoutProblem(("num_gpus",), f"expected at most {MAX_GPUS:,} GPUs "
                            f"(ghsim.limits.MAX_GPUS), got {spec.num_gpus:,}")
    nodes, per_node = nodes_for(spec.system, spec.num_gpus)
    tp = par.tp
    check_heads_split(model, tp)
    if spec.num_gpus % tp:
        raise LayoutProblem(("num_gpus",), f"expected a multiple of tp ({tp}), got "
                            f"{spec.num_gpus}", related=(("parallelism", "tp"),))
    replicas = spec.num_gpus // tp
    if par.replicas is not None and par.replicas != replicas:
        raise LayoutProblem(("parallelism", "replicas"), f"expected num_gpus / tp = "
                            f"{spec.num_gpus} / {tp} = {replicas}, got {par.replicas}")
    domain = min(spec.system.gpus_per_domain, spec.num_gpus)
    if tp > domain:
        raise LayoutProblem(("parallelism", "tp"), f"expected a replica inside one NVLink "
                            f"domain of {spec.system.gpus_per_domain} GPUs (tensor-parallel "
                            f"serving across the network is not modelled), got tp {tp}")
    moe = model.moe
    ep = par.ep
    if moe is None and ep > 1:
        raise LayoutProblem(("parallelism", "ep"), f"expected ep only for a model with "
                            f"experts (model.moe), got {ep}")
    if moe is not None:
        if tp % ep:
            raise LayoutProblem(("parallelism", "ep"), f"expected a divisor of tp ({tp}): "
                                f"TensorRT-LLM splits a replica's tp GPUs as moe_ep x moe_tp, "
                                f"got {ep}")
        if moe.experts % ep:
            raise LayoutProblem(("parallelism", "ep"), f"expected a divisor of the model's "
                                f"{moe.experts} experts, got {ep}")
        if moe.expert_ffn_hidden % (tp // ep):
            raise LayoutProblem(("parallelism", "tp"), f"expected tp / ep ({tp // ep}) to "
                                f"divide expert_ffn_hidden {moe.expert_ffn_hidden}")
    elif model.ffn_hidden % tp:
        raise LayoutProblem(("parallelism", "tp"), f"expected a divisor of ffn_hidden "
                            f"{model.ffn_hidden}, got {tp}")
    return Layout(
        tp=tp, pp=1, cp=1, dp=replicas, vp=1, num_gpus=spec.num_gpus, gpus_per_node=per_node,
        num_nodes=nodes, gpus_per_domain=domain, num_domains=-(-spec.num_gpus // domain),
        micro_batches=1, tokens_per_step=1, ep=ep if moe is not None else 1,
        etp=tp // ep if moe is not None else 1, edp=1,
    )

