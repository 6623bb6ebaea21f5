"""The neutral form of published Mixture-of-Experts training runs (``kind:
validation_points_moe``, as ``../shared/validation/moe.yaml`` writes them) read as ghsim's own
``validation_points``; serving measurements in their neutral form are read by
:mod:`ghsim.config.neutral_serving`.

The neutral form predates ghsim's MoE keys and writes some of them as the sources give them, in
words: the router (``"sigmoid, aux-loss-free bias, group-limited (8 groups, top-4 groups"``), which
layers are MoE, the precision with its FP8 recipe, the recompute granularity and the framework.
:func:`from_neutral` rewrites what it recognizes into the scenario schema and records each reading
in the point's notes; what it does not recognize it leaves where it was, so that the point fails
validation with the schema's own message naming the key (``ghsim validate`` reports it and runs
the other points). It assumes nothing the form does not say, except what the schema needs and
the form leaves out, which it lists in the notes: an RMSNorm (every MoE model of the form uses
one).

The framework a run used sets defaults of its own, applied here where its cited launcher or
recipe sets them for every run (the repo's converted ``validation/moe.yaml`` cites the same
files): Megatron-Bridge's performance recipes fuse the cross-entropy on Transformer Engine's
kernels (NVIDIA-NeMo/Megatron-Bridge@v0.3.0 scripts/performance/utils/overrides.py
``cross_entropy_fusion_impl "te"``; src/megatron/bridge/models/gpt_provider.py
``cross_entropy_loss_fusion`` True), fuse the router (scripts/performance/configs/*_llm_pretrain.py
``moe_router_fusion``) and reduce gradients in BF16 (``grad_reduce_in_fp32 = False``); NeMo
Automodel's benchmarks route with its fake balanced gate, which deals each token a block of
``top_k`` experts in a row and has no balancing loss, and build DeepEP's routing map in one fused
kernel (``routing: dealt``, ``load_balancing: none``, ``deepep_fused_multihot``).
"""

from __future__ import annotations

import re
from typing import Any

from ghsim.config.neutral_serving import inference_point, is_neutral_inference, with_readings

NEUTRAL_KINDS = {"validation_points_moe": "validation_points"}
"""Neutral-form kinds ghsim reads, and the kind each becomes."""

_RECOMPUTE_MODULES = {"norm": "layernorm", "layernorm": "layernorm", "act": "moe_act",
                      "moe_act": "moe_act", "mlp": "mlp", "mla_up_proj": "mla_up_proj",
                      "core_attn": "core_attn", "moe": "moe", "shared_experts": "shared_experts"}
"""Recompute module names of the form, as Megatron's --recompute-modules spells them."""

_FP8_RECIPES = ("tensorwise", "blockwise", "delayed")

_MAX_LAYERS = 100_000
"""The longest layer list the reader spells out (a bound on the memory a file can ask for)."""

_CLAMP = 7.0
"""The one clamped SwiGLU of the form is GPT-OSS's, clamped at 7 (Megatron-Bridge@v0.2.0
``GPTOSSProvider.activation_func_clamp_value``)."""


def from_neutral(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (a neutral-form file) as the ghsim kind it stands for; a file of any other
    kind is returned as it is."""
    kind = document.get("kind")
    if not isinstance(kind, str):
        return document
    if is_neutral_inference(document):
        return {**document, "points": [inference_point(p) if isinstance(p, dict) else p
                                       for p in document["points"]]}
    if kind not in NEUTRAL_KINDS:
        return document
    points = document.get("points")
    converted = {key: value for key, value in document.items()
                 if key in ("schema_version", "metric")}
    converted["kind"] = NEUTRAL_KINDS[kind]
    converted["points"] = ([_point(p) if isinstance(p, dict) else p for p in points]
                           if isinstance(points, list) else points)
    return converted


def _point(point: dict[str, Any]) -> dict[str, Any]:
    out = {key: value for key, value in point.items() if key != "measured"}
    measured = point.get("measured")
    if isinstance(measured, dict):
        rest = [f"{key} {value}" for key, value in measured.items()
                if key not in ("step_time_s", "how")]
        how = str(measured.get("how", ""))
        out["measured"] = {**{k: v for k, v in measured.items() if k == "step_time_s"},
                           "how": f"{how} ({', '.join(rest)})" if rest else how}
    else:
        out["measured"] = measured
    scenario = point.get("scenario")
    if isinstance(scenario, dict):
        readings: list[str] = []
        out["scenario"] = _scenario(scenario, readings)
        out["notes"] = with_readings(str(point.get("notes", "")), readings)
    return out


def _scenario(scenario: dict[str, Any], readings: list[str]) -> dict[str, Any]:
    """A neutral scenario's sections rewritten where they are mappings (a model named by its
    file, or a broken section, is left for the loader and the schema)."""
    out = {key: value for key, value in scenario.items() if key != "framework"}
    model, training, parallelism = ({**section} if isinstance(section, dict) else None
                                    for section in (out.get("model"), out.get("training"),
                                                    out.get("parallelism")))
    if model is not None:
        _model(model, readings)
        out["model"] = model
    if training is not None:
        _precision(training, readings)
        training.pop("grad_accum", None)  # micro-batches follow from the global batch
        out["training"] = training
    if parallelism is not None:
        _parallelism(parallelism, readings)
        out["parallelism"] = parallelism
    framework = scenario.get("framework")
    if isinstance(framework, dict):
        _framework(framework, model or {}, training if training is not None else {},
                   parallelism if parallelism is not None else {}, readings)
    out.setdefault("offload", {"strategy": "none"})
    return out


def _model(model: dict[str, Any], readings: list[str]) -> None:
    if "norm" not in model:
        model["norm"] = "rmsnorm"
        readings.append("norm rmsnorm (assumed: not given)")
    moe = model.get("moe")
    if isinstance(moe, dict):
        moe = dict(moe)
        model["moe"] = moe
        dense = moe.pop("dense_ffn_hidden", None)
        if "ffn_hidden" not in model:
            model["ffn_hidden"] = dense or moe.get("expert_ffn_hidden")
        if not moe.get("shared_experts"):
            moe.pop("shared_expert_ffn_hidden", None)
        _layer_freq(moe, readings)
        _router(moe, model, readings)
    attention = model.get("attention")
    if isinstance(attention, dict):
        attention = dict(attention)
        model["attention"] = attention
        pattern = attention.get("window_pattern")
        if isinstance(pattern, str):
            every = re.search(r"every (\d+)\w* layer full", pattern)
            if every:
                attention.pop("window_pattern")
                attention["full_attention_every"] = int(every.group(1))
                readings.append(f"full_attention_every {every.group(1)} from {pattern!r}")
        if "attention_sinks" in attention:
            attention["sinks"] = bool(attention.pop("attention_sinks"))


def _layer_freq(moe: dict[str, Any], readings: list[str]) -> None:
    """Which layers are MoE: Megatron's list form (``[0]*3+[1]*58``, ``[0,1]*24``) where the
    text has one, else "first N layers dense" or "every layer"; as ``dense_layers`` and
    ``layer_freq`` (a list they cannot reproduce is left for the schema to name)."""
    text = moe.get("moe_layer_freq")
    if not isinstance(text, str):
        return
    pattern = _layer_pattern(text)
    dense = re.search(r"first (\d+) layers? dense", text)
    if pattern is not None:
        first = pattern.index(1) if 1 in pattern else len(pattern)
        ones = [i - first for i, flag in enumerate(pattern) if flag]
        freq = ones[1] if len(ones) > 1 else 1
        if pattern != [int(i >= first and (i - first) % freq == 0)
                       for i in range(len(pattern))]:
            return
        moe["dense_layers"], moe["layer_freq"] = first, freq
    elif dense:
        moe["dense_layers"] = int(dense.group(1))
    elif not re.match(r"every layer", text):
        return  # left for the schema to name
    moe.pop("moe_layer_freq")
    readings.append(f"dense_layers {moe.get('dense_layers', 0)}, layer_freq "
                    f"{moe.get('layer_freq', 1)} from {text!r}")


def _layer_pattern(text: str) -> list[int] | None:
    """The 0/1 list a Megatron ``--moe-layer-freq`` expression in ``text`` spells out
    (``[0]*3+[1]*58``), or None."""
    found = re.search(r"\[[01](?:\s*,\s*[01])*\]\s*\*\s*\d+"
                      r"(?:\s*\+\s*\[[01](?:\s*,\s*[01])*\]\s*\*\s*\d+)*", text)
    if found is None:
        return None
    terms = [([int(x) for x in items.split(",")], int(times)) for items, times
             in re.findall(r"\[([01\s,]+)\]\s*\*\s*(\d+)", found.group(0))]
    if sum(len(items) * times for items, times in terms) > _MAX_LAYERS:
        return None  # no model has so many layers: left for the schema to name
    return [flag for items, times in terms for flag in items * times]


def _router(moe: dict[str, Any], model: dict[str, Any], readings: list[str]) -> None:
    text = moe.get("router")
    if not isinstance(text, str):
        return
    kind = re.match(r"\s*(softmax|sigmoid)\b", text)
    if kind is None:
        return  # left for the schema to name
    moe["router"] = kind.group(1)
    read = [f"router {kind.group(1)}"]
    if "aux-loss-free" in text:
        moe["expert_bias"] = True
        moe["load_balancing"] = "none"
        read.append("expert_bias, load_balancing none")
    elif "aux loss" not in text:
        moe["load_balancing"] = "none"
        read.append("load_balancing none (no loss named)")
    groups = re.search(r"(\d+) groups, top-(\d+) groups", text)
    if groups:
        moe["router_groups"], moe["router_topk_groups"] = map(int, groups.groups())
        read.append(f"router_groups {groups.group(1)}, router_topk_groups {groups.group(2)}")
    if "clamped swiglu" in text.lower() and "activation_clamp" not in model:
        model["activation_clamp"] = _CLAMP
        read.append(f"activation_clamp {_CLAMP:g} (GPT-OSS's)")
    readings.append(f"{', '.join(read)} from {text!r}")


def _precision(training: dict[str, Any], readings: list[str]) -> None:
    text = training.get("precision")
    if not isinstance(text, str):
        return
    word = text.split("(")[0].strip()
    recipe = next((r for r in _FP8_RECIPES if word == f"fp8_{r}"), None)
    if recipe is not None:
        training["precision"], training["fp8_recipe"] = "fp8", recipe
    elif word in ("bf16", "fp16", "fp8"):
        training["precision"] = word
    else:
        return
    if word != text:
        readings.append(f"precision {word} from {text!r}")


def _parallelism(parallelism: dict[str, Any], readings: list[str]) -> None:
    for derived in ("edp", "fsdp"):  # from the layout (fsdp: zero_stage 3 says it)
        parallelism.pop(derived, None)
    if parallelism.get("vp") is None:
        parallelism.pop("vp", None)
    text = parallelism.get("recompute")
    if not isinstance(text, str):
        return
    granularity, _, modules = re.sub(r"\(.*?\)", "", text).partition(":")
    word = granularity.strip()
    if word not in ("none", "selective", "full"):
        return  # left for the schema to name
    parallelism["recompute"] = word
    names = [m.strip() for m in modules.split(",") if m.strip()]
    if names:
        if not all(name in _RECOMPUTE_MODULES for name in names):
            parallelism["recompute_modules"] = names  # the schema names the unknown one
            return
        parallelism["recompute_modules"] = [_RECOMPUTE_MODULES[name] for name in names]
    if text != word:
        modules_read = (f" {parallelism['recompute_modules']}"
                        if "recompute_modules" in parallelism else "")
        readings.append(f"recompute {word}{modules_read} from {text!r}")


def _framework(framework: dict[str, Any], model: dict[str, Any], training: dict[str, Any],
               parallelism: dict[str, Any], readings: list[str]) -> None:
    name = str(framework.get("name", ""))
    dispatcher = str(framework.get("dispatcher", "")).lower()
    if dispatcher:
        # Megatron's flex dispatcher runs DeepEP or HybridEP, each sending a token once to
        # each rank (and remote NVLink domain) its experts are on: ghsim's deepep
        once = "deepep" in dispatcher or "hybridep" in dispatcher
        parallelism["moe_dispatcher"] = "deepep" if once else dispatcher
        readings.append(f"moe_dispatcher {parallelism['moe_dispatcher']} for {dispatcher!r}")
    if "Megatron-Bridge" in name:
        training.setdefault("cross_entropy_fusion", True)
        training.setdefault("cross_entropy_fusion_impl", "te")
        training.setdefault("main_grads", "bf16")
        if isinstance(model.get("moe"), dict):
            training.setdefault("moe_router_fusion", True)
        readings.append("Megatron-Bridge's recipes: cross-entropy fused on Transformer "
                        "Engine, router fusion, BF16 gradients")
    if "Automodel" in name and isinstance(model.get("moe"), dict):
        model["moe"].setdefault("routing", "dealt")
        model["moe"]["load_balancing"] = "none"
        training.setdefault("deepep_fused_multihot", True)
        readings.append("NeMo Automodel's fake balanced gate (routing dealt, no balancing "
                        "loss) and fused DeepEP routing map")
