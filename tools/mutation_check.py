#!/usr/bin/env python3
"""Mutation check: would the test suite notice a wrong model?

Each sabotage below is a one-line change to the cost model, the lowering or the engine (a GEMM
twice as slow, an off-by-one in the pipeline warm-up, a dropped dependency, a copy laid on the
wrong direction of a link, ...). For each, the script copies the repository (the working-tree
version of every tracked or untracked, non-ignored file, snapshotted once at the start) to a
temporary directory, applies the sabotage there (it stops if the original text is not found
exactly once), and runs the fast suite in that copy with ``PYTHONPATH`` pointing at it:
``python -m pytest -q -x -n 0 -p no:cacheprovider`` with the default markers, serially, the test
files that target the sabotage first (then the hand-computed ones, then the rest). The checkout
itself is never modified.

The unmodified copy runs first (the baseline, without ``-x``): a test that already fails there
(someone's work in progress in a shared checkout) is deselected from the sabotage runs, with a
warning; ``--strict-baseline`` stops instead. ``--head`` copies the last commit rather than the
working tree, plus the ``--overlay`` paths from the working tree (a clean base while others edit
the checkout). Slow test files run last.

A sabotage is *caught* when the suite fails (a failing test, an error or a timeout). The script
prints a table (sabotage, caught, first failing test, seconds) and exits non-zero if any
sabotage survives, or if the baseline cannot run.

    python tools/mutation_check.py              # baseline, then every sabotage, 2 at a time
    python tools/mutation_check.py --list       # the sabotages
    python tools/mutation_check.py -k wave -k ring --no-baseline
    python tools/mutation_check.py -k totals --no-baseline --first-only   # a quick screen
    python tools/mutation_check.py --head --overlay tests/test_by_hand.py
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BY_HAND = "tests/test_by_hand.py"
SLOW_LAST = ("tests/test_import.py", "tests/test_sweep.py", "tests/test_calibration.py",
             "tests/test_dead_knobs.py")
"""Test files that take longest; they run after the others."""
NOT_A_MODEL_TEST = "tests/test_mutation_list.py"
"""Checks that each sabotage's original text is in the code, so it fails under every sabotage
whatever the model does: never run in a sabotaged copy."""


@dataclass(frozen=True)
class Sabotage:
    """Replace ``original`` (which must occur exactly once in ``file``) by ``replacement``."""

    name: str
    file: str
    original: str
    replacement: str
    description: str
    first: tuple[str, ...] = ()
    """Test files to run before the rest (the most likely to catch it)."""
    moved_to: tuple[str, ...] = ()
    """Files the code may have moved to: the sabotage applies to the one file of ``file`` and
    these that holds ``original``, which must hold it once."""

    def target(self, repo: Path) -> Path:
        """The file to sabotage in ``repo``; stops if the original is not there exactly once."""
        counts = {}
        for name in (self.file, *self.moved_to):
            path = repo / name
            counts[name] = path.read_text().count(self.original) if path.is_file() else 0
        holding = [name for name, count in counts.items() if count]
        if len(holding) != 1 or counts[holding[0]] != 1:
            found = ", ".join(f"{n}: {c}" for n, c in counts.items())
            raise SystemExit(f"sabotage {self.name}: the original text must be found exactly "
                             f"once ({found}): {self.original!r}")
        return repo / holding[0]


SABOTAGES: tuple[Sabotage, ...] = (
    # -- the GPU cost model ---------------------------------------------------------------------
    Sabotage("gemm-time-x2", "ghsim/costmodel/gpu.py",
             "compute = kernel.flops / (peak * efficiency)",
             "compute = 2 * kernel.flops / (peak * efficiency)",
             "a GEMM takes twice its compute time"),
    Sabotage("gemm-flops-x2", "ghsim/workload/kernels.py",
             "return Kernel(name, 2.0 * m * n * k, data",
             "return Kernel(name, 4.0 * m * n * k, data",
             "a GEMM counts 4 m n k FLOPs instead of 2 m n k", ("tests/test_workload.py",)),
    Sabotage("no-wave-quantization", "ghsim/costmodel/gpu.py",
             "waves = math.ceil(tiles / self.sms)", "waves = tiles / self.sms",
             "fractional waves: no tail-wave quantization"),
    Sabotage("no-k-efficiency", "ghsim/costmodel/gpu.py",
             "return k / (k + self._k_half(dtype))", "return 1.0",
             "short reduction dimensions run at full efficiency"),
    Sabotage("gemm-above-best-shape", "ghsim/costmodel/gpu.py",
             "return min(1.0, this / (", "return (1.0 + this / (",
             "a GEMM may run faster than the best shape of the measured sweep"),
    Sabotage("plain-roofline", "ghsim/costmodel/gpu.py",
             "return float(longer * (1.0 + (shorter / longer) ** p) ** (1.0 / p))",
             "return longer",
             "GEMMs near the ridge point cost max(compute, memory), ignoring the fitted "
             "gemm_ridge_exponent", ("tests/test_off_roofline.py", "tests/test_by_hand.py")),
    Sabotage("power-limit-ignored", "ghsim/costmodel/gpu.py",
             "share = min(1.0, (limit - fixed) / (board - fixed))", "share = 1.0",
             "a board power limit no longer slows compute", ("tests/test_off_roofline.py",)),
    Sabotage("power-limit-linear", "ghsim/costmodel/gpu.py",
             "* share ** (1.0 / 3.0))", "* share)",
             "the SM clock falls with the dynamic power, not its cube root",
             ("tests/test_off_roofline.py",)),
    Sabotage("master-remainders-ignored", "ghsim/workload/states.py",
             "        return REMAINDER_BYTES\n",
             "        return MASTER_BYTES[training.precision]\n",
             "master-weight remainders are costed as whole FP32 masters",
             ("tests/test_model_features.py",)),
    Sabotage("module-cap-gives-gpu-everything", "ghsim/costmodel/gpu.py",
             "limits.append(node.power_limit_w - cpu_side)",
             "limits.append(node.power_limit_w)",
             "a GH200 module cap goes to the GPU whole: Grace is not served first",
             ("tests/test_off_roofline.py",)),
    Sabotage("slowest-gpu-ignored", "ghsim/costmodel/gpu.py",
             "return typical / (1.0 + spread * expected_largest_normal(gpus))",
             "return typical",
             "a synchronous step moves at a typical GPU's pace, not its slowest GPU's",
             ("tests/test_off_roofline.py",)),
    Sabotage("loss-one-pass", "ghsim/workload/kernels.py",
             "        per_logit = upcast + 4 + 8 + 8 + 4 + 8  "
             "# upcast, max, shift, exp, sum, divide",
             "        per_logit = upcast",
             "the unfused cross-entropy moves its logits once, not in Megatron's passes",
             ("tests/test_loss.py", "tests/test_by_hand.py")),
    Sabotage("loss-fusion-ignored", "ghsim/workload/kernels.py",
             "    elif s.cross_entropy_fusion:",
             "    elif False:",
             "training.cross_entropy_fusion changes nothing",
             ("tests/test_loss.py",)),
    Sabotage("moe-dispatch-never-syncs", "ghsim/workload/kernels.py",
             "                 host_sync=True)",
             "                 host_sync=False)",
             "the host runs ahead past a dropless MoE dispatch",
             ("tests/test_moe.py",)),
    Sabotage("moe-backward-dispatch-syncs", "ghsim/workload/kernels.py",
             "                              host_sync=False,",
             "                              host_sync=step.host_sync,",
             "the backward all-to-alls wait for the host as the forward dispatch does",
             ("tests/test_moe.py",)),
    Sabotage("wgrad-ignores-main-gradient", "ghsim/workload/kernels.py",
             "(inputs + 2 * k * n * s.grad_bytes))",
             "(inputs + k * n * s.weight_bytes))",
             "a weight-gradient GEMM writes a 16-bit gradient, not accumulating into the main one",
             ("tests/test_moe.py", "tests/test_by_hand.py")),
    Sabotage("deepep-nvlink-sends-every-copy", "ghsim/fabric/traffic.py",
             "            inside *= _deduplicated(dedup, n)",
             "            inside *= 1.0",
             "DeepEP sends a token's every expert copy over NVLink, not once per rank",
             ("tests/test_moe.py",)),
    Sabotage("group-limit-as-a-share-of-domains", "ghsim/fabric/traffic.py",
             "    if groups > domains and groups % domains == 0:",
             "    if False:",
             "A group limit finer than the domains is taken as that share of the domains "
             "(EP 16 over two nodes: a DeepSeek-V3 token would reach one node, not both)",
             ("tests/test_moe.py",)),
    Sabotage("alone-beside-other-traffic", "ghsim/engine/private.py",
             "               and all(users[link] == {pair} for link in links)}",
             "               and all(pair in users[link] for link in links)}",
             "collectives are booked alone on links other traffic also crosses",
             ("tests/test_private.py",)),
    Sabotage("alone-at-the-line-rate", "ghsim/engine/fluid.py",
             "        rate = route.rate\n        return rate, [",
             "        rate = min(hop[4] for hop in route.hops)\n        return rate, [",
             "a collective booked alone runs at the line rate, ignoring copies and efficiency",
             ("tests/test_private.py",)),
    Sabotage("flow-alone-one-copy", "ghsim/engine/fluid.py",
             "used_on.get(link, 0.0) + rate * copies",
             "used_on.get(link, 0.0) + rate",
             "a flow that starts alone on idle links loads each link as one copy, however many "
             "cross it", ("tests/test_fluid.py",)),
    Sabotage("learned-positions-rotate", "ghsim/workload/kernels.py",
             "    if s.rotary:  # learned or no position embeddings rotate nothing",
             "    if True:  # learned or no position embeddings rotate nothing",
             "a model with learned position embeddings runs RoPE kernels too",
             ("tests/test_model_features.py",)),
    Sabotage("overlap-slows-the-whole-gemm", "ghsim/engine/body.py",
             "    return (max(gemm_s + slowdown * min(gemm_s, comm_s), comm_s)",
             "    return (max(gemm_s * (1 + slowdown), comm_s)",
             "an overlapped exchange slows the whole GEMM, however short it is",
             ("tests/test_tp_overlap.py",)),
    Sabotage("h200-gemms-at-a-burst-rate", "configs/hardware/h200-sxm-141gb.yaml",
             "    gemm_efficiency:\n      bf16: 0.803\n      fp16: 0.803\n      fp8: 0.734",
             "    gemm_efficiency:\n      bf16: 0.883\n      fp16: 0.883\n      fp8: 0.807",
             "H200 GEMMs 10 % faster than the GEMMs of a measured training step",
             ("tests/test_h200_measured.py",)),
    Sabotage("zero3-backward-keeps-gathered-weights", "ghsim/workload/lower.py",
             "        self.release_params(chunk, op)\n        self.pass_ends.append(op)\n"
             "        if not chunk.first:",
             "        self.pass_ends.append(op)\n        if not chunk.first:",
             "ZeRO-3's backward passes never free the weights they gathered",
             ("tests/test_workload.py",)),
    Sabotage("zero3-holds-whole-chunk", "ghsim/workload/lower.py",
             "(min(1.0, self.largest_bucket_params(chunk)",
             "(max(1.0, self.largest_bucket_params(chunk)",
             "ZeRO-3 holds a chunk's gathered weights whole instead of a block at a time",
             ("tests/test_workload.py",)),
    Sabotage("zero-offload-gradients-in-hbm", "ghsim/workload/offload.py",
             'return self.spec.fraction if category in ("optimizer", "gradients") else 0.0',
             'return self.spec.fraction if category == "optimizer" else 0.0',
             "ZeRO-Offload keeps the whole model's FP32 gradients in HBM",
             ("tests/test_offload.py",)),
    Sabotage("gradients-ignore-cp", "ghsim/workload/placement.py",
             '"dp": (layout.dp_cp, layout.tp),', '"dp": (layout.dp, layout.tp * layout.cp),',
             "context-parallel ranks do not reduce their gradients together",
             ("tests/test_workload.py",)),
    Sabotage("fp8-saves-bf16-inputs", "ghsim/workload/shapes.py",
             '        return 1.0 + (4.0 / 128 if self.fp8_recipe == "blockwise" else 0.0)',
             "        return float(self.act_bytes)",
             "FP8 training keeps the linear layers' inputs in BF16 for the backward pass",
             ("tests/test_model_features.py",)),
    Sabotage("no-fp8-weight-cache", "ghsim/workload/lower.py",
             "FP8_WEIGHT_CACHE_BYTES = 2.0", "FP8_WEIGHT_CACHE_BYTES = 0.0",
             "FP8 training keeps no FP8 copies of the GEMM weights",
             ("tests/test_model_features.py",)),
    Sabotage("recompute-modules-ignored", "ghsim/workload/shapes.py",
             "        return module in self.recompute_modules",
             '        return module == "core_attn" and self.recompute == "selective"',
             "selective recompute always redoes the attention core, whatever modules are named",
             ("tests/test_moe.py",)),
    Sabotage("overrides-in-given-order", "ghsim/config/overrides.py",
             "return sorted(overrides, key=lambda override: len(override.path))",
             "return list(overrides)",
             "a later override of a key discards the overrides given inside it",
             ("tests/test_off_roofline.py", "tests/test_sweep.py")),
    Sabotage("moe-routes-one-copy", "ghsim/workload/kernels.py",
             "slots = t * m.top_k", "slots = t",
             "a MoE token is sent to one expert instead of top_k", ("tests/test_moe.py",)),
    Sabotage("experts-not-split-by-ep", "ghsim/workload/shapes.py",
             "local = moe.experts // layout.ep", "local = moe.experts",
             "every expert-parallel rank runs all the experts", ("tests/test_moe.py",)),
    Sabotage("router-fusion-ignored", "ghsim/workload/shapes.py",
             "spec.training.moe_router_fusion)", "False)",
             "--moe-router-fusion leaves the router's chain of small kernels as it was",
             ("tests/test_moe.py",)),
    Sabotage("routing-backward-as-forward", "ghsim/workload/kernels.py",
             "kernels=kernel.backward_kernels, backward_kernels=0",
             "kernels=kernel.kernels, backward_kernels=0",
             "the router's backward launches as many kernels as its forward",
             ("tests/test_moe.py",)),
    Sabotage("eager-clamps-free", "ghsim/workload/kernels.py",
             'if "clamp" in s.eager:  # PyTorch ops', "if False:  # PyTorch ops",
             "clamps run as PyTorch ops cost nothing", ("tests/test_moe.py",)),
    Sabotage("kernel-waits-ignored", "ghsim/engine/simulator.py",
             "    return step.host_syncs", "    return 0",
             "a kernel whose ops need a size from the GPU never holds the host",
             ("tests/test_moe.py",)),
    Sabotage("further-waits-free", "ghsim/engine/simulator.py",
             "+ (syncs - 1) * self.issue.kernel_s)", "+ 0.0)",
             "waits in a row cost no more than one", ("tests/test_moe.py",)),
    Sabotage("alltoall-at-ring-rate", "ghsim/fabric/links.py",
             "                return self.nvlink_alltoall",
             "                return self.nvlink_nccl",
             "NCCL's all-to-all on NVLink runs at the ring's rate", ("tests/test_fabric.py",)),
    Sabotage("deepep-at-alltoall-rate", "ghsim/fabric/traffic.py",
             'if collective == "all_to_all" and dedup == NO_DEDUP else',
             'if collective == "all_to_all" else',
             "DeepEP's NVLink kernels take NCCL's all-to-all rate", ("tests/test_fabric.py",)),
    Sabotage("random-routing-even", "ghsim/workload/imbalance.py",
             "    return 1.0 + sigma * math.sqrt(ep / (ep - 1))",
             "    return 1.0 + 0.0 * sigma * math.sqrt(ep / (ep - 1))",
             "random routing loads every expert rank the same",
             ("tests/test_routing_imbalance.py",)),
    Sabotage("expert-tiles-at-mean", "ghsim/costmodel/gpu.py",
             "        tiles = groups * expected_tiles(m, spread_m, tm) * math.ceil(n / tn)",
             "        tiles = groups * expected_tiles(m, 0.0, tm) * math.ceil(n / tn)",
             "experts of random loads pay the partial tiles of their mean",
             ("tests/test_routing_imbalance.py",)),
    Sabotage("every-chunk-bucketed", "ghsim/workload/lower.py",
             "first = self.stage == 0 and chunk.index == 0 and self.par.overlap_grad_reduce",
             "first = self.par.overlap_grad_reduce",
             "every model chunk of every stage reduces its gradients in buckets",
             ("tests/test_workload.py",)),
    Sabotage("dealt-blocks-as-random", "ghsim/fabric/traffic.py",
             "    if whole:\n        return min(1.0, _domains_of_groups(",
             "    if False:\n        return min(1.0, _domains_of_groups(",
             "a dealt block of experts reaches ranks as random experts would",
             ("tests/test_routing_imbalance.py",)),
    Sabotage("data-loader-ignored", "ghsim/engine/simulate.py",
             "    return samples * loading.sample_read_ms * 1e-3 / loading.workers",
             "    return 0.0 * samples * loading.sample_read_ms * 1e-3 / loading.workers",
             "a slow data loader never holds the step back", ("tests/test_data_loading.py",)),
    Sabotage("eager-gelu-fused", "ghsim/workload/shapes.py",
             "        if spec.model.activation_resolved == \"gelu\" and bias:",
             "        if False:",
             "legacy Megatron's jit-scripted bias-GELU is costed as one fused kernel",
             ("tests/test_model_features.py",)),
    Sabotage("legacy-residual-fused", "ghsim/workload/eltwise.py",
             "    op = next((o for o in RESIDUAL_OPS if o in s.eager), None)",
             "    op = None",
             "legacy Megatron's jit-scripted bias-dropout-add is costed as one fused kernel",
             ("tests/test_model_features.py",)),
    Sabotage("fused-dropout-maskless", "ghsim/workload/eltwise.py",
             "    return replace(kernel, bytes=kernel.bytes + (elements if s.dropout else 0))",
             "    return kernel",
             "a fused bias-dropout-add writes no dropout mask", ("tests/test_model_features.py",)),
    Sabotage("neutral-dense-layers-ignored", "ghsim/config/neutral.py",
             "        moe[\"dense_layers\"] = int(dense.group(1))",
             "        pass",
             "the neutral form's 'first 3 layers dense' is read as every layer MoE",
             ("tests/test_neutral_form.py",)),
    Sabotage("neutral-split-unchosen", "ghsim/serving/memory.py",
             "        if weight_bytes_per_gpu(sized) <= share * capacity:",
             "        if True:",
             "a neutral serving point whose split is not given runs at TP 1 whatever its size",
             ("tests/test_neutral_form.py",)),
    Sabotage("pointwise-at-elementwise-rate", "ghsim/costmodel/gpu.py",
             "            busy = kernel.bytes / self.pointwise_bytes_per_s",
             "            busy = kernel.bytes / self.elementwise_bytes_per_s",
             "PyTorch's vectorized point-wise kernels run at the element-wise rate",
             ("tests/test_model_features.py",)),
    Sabotage("host-never-waits", "ghsim/engine/simulator.py",
             "return max(0.0, issued + c - now, issued + total + g - now - gpu_s)",
             "return 0.0", "the GPU never waits for its host to issue kernels",
             ("tests/test_off_roofline.py",)),
    Sabotage("serving-kv-read-free", "ghsim/serving/costs.py",
             "one = max(per_cached * ctx / rate, hbm / bandwidth)",
             "one = per_cached * ctx / rate",
             "decode attention no longer reads the KV cache from HBM", ("tests/test_serving.py",)),
    Sabotage("serving-weights-at-stream-rate", "ghsim/serving/costs.py",
             "memory = nbytes / self.weight_stream_bytes_per_s",
             "memory = nbytes / self.gpu.hbm_bytes_per_s",
             "decode's weight-streaming GEMMs run at STREAM bandwidth, not the measured skinny-"
             "GEMM rate", ("tests/test_serving.py",)),
    Sabotage("serving-kv-reserved-for-prompt-only", "ghsim/serving/engine.py",
             "tokens = max(request.reserve_tokens, request.input_tokens + request.output_tokens)",
             "tokens = request.input_tokens",
             "the KV cache is reserved for the prompt only, so more requests are admitted",
             ("tests/test_serving.py",)),
    Sabotage("serving-kv-replicated-over-tp", "ghsim/serving/memory.py",
             "return 2 * max(1, model.kv_heads // tp) * model.head_dim_resolved",
             "return 2 * model.kv_heads * model.head_dim_resolved",
             "every tensor-parallel GPU holds all the KV heads", ("tests/test_serving.py",)),
    Sabotage("serving-decode-ctx-frozen", "ghsim/serving/engine.py",
             "        self.ctx_sum += self.decode_seqs\n", "",
             "decoding sequences' contexts stop growing", ("tests/test_serving.py",)),
    Sabotage("serving-offload-free", "ghsim/serving/costs.py",
             "cost.add(\"kv_host\", full * max(0.0, host - one))", "pass",
             "KV cache read in place over the host link costs nothing", ("tests/test_serving.py",)),
    Sabotage("gemm-never-memory-bound", "ghsim/costmodel/gpu.py",
             "return self.roofline_s(compute, kernel.bytes / self.hbm_bytes_per_s)",
             "return compute",
             "a GEMM's HBM traffic no longer bounds it"),
    Sabotage("no-launch-overhead", "ghsim/costmodel/gpu.py",
             "return (busy + self.launch_s * kernel.kernels", "return (busy",
             "kernels pay no launch gap"),
    Sabotage("elementwise-at-stream-rate", "ghsim/costmodel/gpu.py",
             "busy = kernel.bytes / self.elementwise_bytes_per_s",
             "busy = kernel.bytes / self.hbm_bytes_per_s",
             "element-wise kernels reach STREAM bandwidth"),
    Sabotage("peak-at-double-clock", "ghsim/config/schema/hardware.py",
             "return {dtype: per_clock * clocks", "return {dtype: 2 * per_clock * clocks",
             "peak FLOP/s of every GPU doubled", ("tests/test_rates.py",)),
    # -- the kernels of a layer -----------------------------------------------------------------
    Sabotage("backward-elementwise-bytes", "ghsim/workload/kernels.py",
             'bytes=1.5 * kernel.bytes)]', 'bytes=kernel.bytes)]',
             "element-wise backward kernels move as much as their forward"),
    Sabotage("attention-backward-flops", "ghsim/workload/kernels.py",
             "flops=2 * kernel.flops,", "flops=kernel.flops,",
             "flash attention's backward does the forward's work, not twice it"),
    Sabotage("gemm-bytes-without-weight", "ghsim/workload/kernels.py",
             "data = (m * k + m * n) * s.act_bytes + k * n * s.weight_bytes",
             "data = (m * k + m * n) * s.act_bytes",
             "a GEMM does not read its weight"),
    Sabotage("full-recompute-half", "ghsim/workload/kernels.py",
             "        return redone\n", "        return redone[: len(redone) // 2]\n",
             "full recomputation redoes only half the forward pass",
             ("tests/test_workload.py",)),
    Sabotage("selective-recompute-dropped", "ghsim/workload/kernels.py",
             "steps += [_as_recompute(k) for k in core if isinstance(k, Kernel)]",
             "steps += []", "selective recomputation no longer redoes the attention core",
             ("tests/test_workload.py",)),
    # -- the schedule and the lowering ----------------------------------------------------------
    Sabotage("1f1b-warmup-off-by-one", "ghsim/workload/schedule.py",
             "warmup = min(pp - stage - 1, microbatches)", "warmup = min(pp - stage, microbatches)",
             "1F1B runs one warm-up forward too many"),
    Sabotage("interleaved-warmup-off-by-one", "ghsim/workload/schedule.py",
             "warmup = min((pp - stage - 1) * 2 + (vp - 1) * pp, total)",
             "warmup = min((pp - stage - 1) * 2 + (vp - 1) * pp - 1, total)",
             "the interleaved schedule runs one warm-up forward too few",
             ("tests/test_workload.py", "tests/test_engine.py")),
    Sabotage("lowering-drops-cross-stream-deps", "ghsim/workload/lower.py",
             "all_deps = tuple(sorted({*chain, *(d for d in deps if d >= 0)}))",
             "all_deps = tuple(sorted({*chain}))",
             "ops wait only for the op before them on their own stream",
             moved_to=("ghsim/workload/stage.py",)),
    Sabotage("engine-waits-for-one-dep", "ghsim/engine/simulator.py",
             "yield self.env.all_of(pending)", "yield pending[0]",
             "an op with several pending dependencies waits for the first only"),
    Sabotage("adam-traffic-16", "ghsim/workload/states.py",
             "return g + reads_weight + updated, updated + (w if master else 0)",
             "return g + reads_weight + updated, (w if master else 0)",
             "the Adam step reads its states but never writes them back"),
    Sabotage("bubble-counted-as-transfer", "ghsim/engine/attribution.py",
             "exposed = min(waited, cls.transfer_s.get(op_id, 0.0))", "exposed = waited",
             "all time waiting for a pipeline receive is called communication, none bubble",
             ("tests/test_engine.py",)),
    # -- memory ---------------------------------------------------------------------------------
    Sabotage("adam-states-8-bytes", "ghsim/workload/states.py",
             'MOMENT_BYTES = {"adam": 8,', 'MOMENT_BYTES = {"adam": 4,',
             "Adam keeps one FP32 moment instead of two",
             ("tests/test_offload.py",)),
    Sabotage("activations-forget-v", "ghsim/workload/activations.py",
             "qkv: float = t * (s.q_width + 2 * s.kv_width) * e  # Q, K, V",
             "qkv: float = t * (s.q_width + s.kv_width) * e  # Q, K, V",
             "saved activations leave out V", ("tests/test_workload.py",)),
    Sabotage("flash-lse-fp16", "ghsim/workload/activations.py",
             "return float(s.heads * s.tokens * 4)", "return float(s.heads * s.tokens * 2)",
             "flash attention's log-sum-exp saved in 2 B instead of FP32"),
    # -- offload and the host -------------------------------------------------------------------
    Sabotage("grads-go-up", "ghsim/workload/offload.py",
             'down = self.copy(lw, f"{name}.grads_d2h", "d2h", grad_bytes, deps)',
             'down = self.copy(lw, f"{name}.grads_d2h", "h2d", grad_bytes, deps)',
             "offloaded gradients are copied host-to-device", ("tests/test_offload.py",)),
    Sabotage("host-adam-traffic-14", "ghsim/workload/offload.py",
             "self.step_bytes = float(optimizer_step_bytes(scenario.spec.training))",
             "self.step_bytes = float(optimizer_step_bytes(scenario.spec.training)) / 2",
             "the host Adam step streams half its bytes", ("tests/test_offload.py",)),
    Sabotage("host-adam-flops-dropped", "ghsim/workload/stage.py",
             "flops, attrs=attrs))", "0.0, attrs=attrs))",
             "a CPU op's arithmetic never reaches the engine: cores and clock move nothing",
             ("tests/test_offload.py",)),
    Sabotage("host-cores-stream-unbounded", "ghsim/engine/simulator.py",
             'cap = min(op.bytes / seconds if seconds > 0 else float("inf"),',
             'cap = max(op.bytes / seconds if seconds > 0 else float("inf"),',
             "a host op on few cores streams as fast as the whole memory",
             ("tests/test_offload.py",)),
    Sabotage("informational-override-silent", "ghsim/config/api.py",
             "        if informational_key(type(scenario.spec), path):",
             "        if False and informational_key(type(scenario.spec), path):",
             "a --set on a key no mechanism reads says nothing", ("tests/test_informational.py",)),
    Sabotage("copy-routed-backwards", "ghsim/engine/simulator.py",
             'toward = "device" if direction == "h2d" else "host"',
             'toward = "host" if direction == "h2d" else "device"',
             "a copy is laid on the other direction of the host link",
             ("tests/test_offload.py",)),
    # -- links and the fabric -------------------------------------------------------------------
    Sabotage("link-kind-h2d-d2h-swapped", "ghsim/fabric/links.py",
             "return f\"{hop.kind}_{'h2d' if a == 'cpu' else 'd2h'}\"",
             "return f\"{hop.kind}_{'d2h' if a == 'cpu' else 'h2d'}\"",
             "CPU->GPU links are called d2h and GPU->CPU h2d",
             ("tests/test_fabric.py", "tests/test_offload.py")),
    Sabotage("network-on-host-link-other-efficiency", "ghsim/fabric/links.py",
             'use = "h2d_copy" if kind.endswith("_h2d") else "d2h_copy"',
             'use = "d2h_copy" if kind.endswith("_h2d") else "h2d_copy"',
             "network traffic staged through Grace gets the other direction's copy rate",
             ("tests/test_fabric.py",)),
    Sabotage("staging-through-grace-free", "ghsim/fabric/links.py",
             "return self.nic_nccl * (1.0 if self.gpudirect_rdma else self.staged_network)",
             "return self.nic_nccl",
             "no penalty for network traffic staged through host memory (no GPUDirect RDMA)",
             ("tests/test_fabric.py", "tests/test_knobs.py")),
    Sabotage("host-link-latency-swapped", "ghsim/hardware/node.py",
             "_link(graph, cpu, gpu, link.type, bandwidth, max(0.0, to_gpu_ns) * units.NS,",
             "_link(graph, cpu, gpu, link.type, bandwidth, max(0.0, to_cpu_ns) * units.NS,",
             "the CPU->GPU direction of the host link gets the GPU->CPU latency",
             ("tests/test_graph.py",)),
    Sabotage("nics-all-on-first-owner", "ghsim/hardware/node.py",
             'owner = f"{attach}{k * owners // node.nics}"', 'owner = f"{attach}0"',
             "every NIC of a node hangs off its first GPU (or CPU)",
             ("tests/test_graph.py", "tests/test_fabric.py")),
    Sabotage("ring-network-share-w", "ghsim/fabric/traffic.py",
             "outside = 1.0 / per_domain if domains > 1 else 0.0",
             "outside = 1.0 if domains > 1 else 0.0",
             "a ring sends all W wire bytes across the network, not W / m",
             ("tests/test_fabric.py",)),
    Sabotage("copies-ignored", "ghsim/fabric/traffic.py",
             "return make_path([(name, max(1, copies[name]), self.eff.of(hop, use))",
             "return make_path([(name, 1, self.eff.of(hop, use))",
             "a link carries one copy of a class's flow however many members cross it",
             ("tests/test_fabric.py",)),
    Sabotage("coefficient-without-copies", "ghsim/fabric/sharing.py",
             "tuple(merged[k][0] / merged[k][1] for k in links)",
             "tuple(1 / merged[k][1] for k in links)",
             "a flow's copies take no capacity", ("tests/test_fabric.py",)),
    Sabotage("no-max-min-refill", "ghsim/fabric/sharing.py",
             "active -= frozen", "active.clear()",
             "flows stop at the first saturated link's fair share (no progressive filling)",
             ("tests/test_fabric.py",)),
    Sabotage("all-reduce-wire-bytes-halved", "ghsim/workload/summary.py",
             "return 2 * (n - 1) / n * message_bytes", "return (n - 1) / n * message_bytes",
             "a ring all-reduce sends (n-1)/n of the message, not 2 (n-1)/n",
             ("tests/test_fabric.py", "tests/test_workload.py")),
    Sabotage("no-overlap-slowdown", "ghsim/engine/simulator.py",
             "lost = self.gpu.overlap_slowdown / (1.0 + self.gpu.overlap_slowdown)",
             "lost = 0.0 * self.gpu.overlap_slowdown",
             "kernels do not slow down beside communication",
             ("tests/test_engine.py", "tests/test_by_hand.py")),
    Sabotage("no-bucket-nan-check", "ghsim/workload/lower.py",
             "        if check and params:",
             "        if check and params and False:",
             "Megatron's NaN check does not read a bucket's gradients before its reduction",
             ("tests/test_by_hand.py",)),
    Sabotage("overlap-only-at-start", "ghsim/engine/overlap.py",
             "total += max(0.0, min(end, span_end) - max(start, span_start))",
             "total += max(0.0, min(end, span_end) - max(start, span_start, span_end))",
             "communication that ended during a compute op does not slow it",
             ("tests/test_by_hand.py", "tests/test_engine.py")),
    Sabotage("eager-norm-as-fused", "ghsim/workload/eltwise.py",
             '"norm": (36.0, 5, 88.0, 10),', '"norm": (4.0, 1, 6.0, 1),',
             "an eager RMSNorm moves what the fused kernel moves",
             ("tests/test_model_features.py",)),
    Sabotage("eager-backward-generic", "ghsim/workload/kernels.py",
             "bytes=kernel.bytes * backward / forward,", "bytes=1.5 * kernel.bytes,",
             "an eager op's autograd kernels move 1.5x its forward bytes",
             ("tests/test_model_features.py",)),
    Sabotage("backward-issue-as-forward", "ghsim/engine/simulator.py",
             "steps = recomputed + (len(body) - recomputed) * self.backward_ratio",
             "steps = float(len(body))",
             "the host issues a backward kernel as fast as a forward one",
             ("tests/test_off_roofline.py",)),
    Sabotage("backward-issue-recompute-dear", "ghsim/engine/simulator.py",
             "steps = recomputed + (len(body) - recomputed) * self.backward_ratio",
             "steps = len(body) * self.backward_ratio",
             "a recomputed forward kernel costs its host a backward kernel's time",
             ("tests/test_off_roofline.py",)),
    Sabotage("grouped-gap-per-group", "ghsim/costmodel/gpu.py",
             "+ self.grouped_gap_s * (kernel.groups - 1))",
             "+ self.grouped_gap_s * (kernel.groups > 1))",
             "a grouped GEMM pays the per-GEMM gap once, not for each further expert",
             ("tests/test_moe.py",)),
    Sabotage("fp8-one-kernel-per-tensor", "ghsim/workload/kernels.py",
             'tensors * _FP8_KERNELS_PER_TENSOR[recipe])', 'tensors)',
             "current scaling quantizes with one kernel, not amax, scale and cast",
             ("tests/test_moe.py",)),
    Sabotage("expert-bias-ignored", "ghsim/workload/kernels.py",
             "    if m.bias:\n        steps += [_expert_bias(",
             "    if False:\n        steps += [_expert_bias(",
             "the experts' output biases cost nothing", ("tests/test_moe.py",)),
    Sabotage("grouped-gap-of-the-part", "ghsim/engine/simulate.py",
             "grouped_gap_us=spec.training.grouped_gemm_gap_us,", "grouped_gap_us=None,",
             "a run's older software (training.grouped_gemm_gap_us) is ignored",
             ("tests/test_moe.py",)),
    Sabotage("flash2-as-fused", "ghsim/costmodel/gpu.py",
             'if attention == "flash2":  # FlashAttention-2',
             'if attention == "flash":  # FlashAttention-2',
             "FlashAttention-2 runs at the fused kernels' rate (and flash at FA2's)",
             ("tests/test_off_roofline.py", "tests/test_h200_measured.py")),
    Sabotage("causal-as-full-square", "ghsim/costmodel/gpu.py",
             "return min(1.0, 0.5 + self.causal_diagonal_tokens / keys)",
             "return 1.0",
             "a causal attention kernel is costed like the whole square, as before 2026-12-05",
             ("tests/test_off_roofline.py", "tests/test_h200_measured.py",
              "tests/test_by_hand.py")),
    Sabotage("cp-kernels-see-all-keys", "ghsim/workload/kernels.py",
             "return max(1, s.seq_len // s.cp)", "return s.seq_len",
             "context-parallel attention kernels are costed as if each saw the whole sequence",
             ("tests/test_off_roofline.py",)),
    Sabotage("prefill-chunks-ignored", "ghsim/serving/costs.py",
             "if not batch.prefill_chunks:", "if True:",
             "serving prefill costs its pairs at the long-sequence rate, whatever the chunks",
             ("tests/test_serving.py",)),
    Sabotage("fp8-norm-output-gathered-in-16-bit", "ghsim/workload/kernels.py",
             'steps += _norm_gather("ln1.all_gather", s, fused=s.mla is None)',
             'steps += _norm_gather("ln1.all_gather", s, fused=False)',
             "the sequence-parallel gather into QKV moves two bytes an element under FP8",
             ("tests/test_off_roofline.py",)),
    Sabotage("te-cross-entropy-costed-as-megatrons", "ghsim/workload/kernels.py",
             'if s.cross_entropy_fusion and s.cross_entropy_impl == "te":',
             'if s.cross_entropy_fusion and s.cross_entropy_impl == "none":',
             "Transformer Engine's fused cross-entropy moves what Megatron-Core's fused one does",
             ("tests/test_loss.py",)),
    Sabotage("cp-ring-exposed", "ghsim/engine/body.py",
             'if step.group == "cp":', 'if step.group == "cp" and False:',
             "the context-parallel K/V exchange blocks the attention instead of running beside it",
             ("tests/test_context_parallel.py",)),
    Sabotage("qk-norm-free", "ghsim/workload/kernels.py",
             "    if s.qk_norm:  # Qwen3 / Megatron --qk-layernorm: normalized before RoPE",
             "    if False:  # Qwen3 / Megatron --qk-layernorm: normalized before RoPE",
             "QK-norm launches no kernels and moves nothing", ("tests/test_model_features.py",)),
    Sabotage("ademamix-as-adam", "ghsim/workload/states.py",
             '"ademamix": 12,', '"ademamix": 8,',
             "AdEMAMix keeps Adam's two FP32 moments instead of its three",
             ("tests/test_model_features.py",)),
    Sabotage("nccl-size-ramp-ignored", "ghsim/fabric/traffic.py",
             "plan = _slowed(plan, nccl.size_ramp(wire_bytes, ramp))",
             "plan = _slowed(plan, 1.0)",
             "an NCCL collective inside an NVLink domain reaches its large-message bus bandwidth "
             "whatever its size", ("tests/test_nccl_ramp.py",)),
    Sabotage("system-allocated-hbm-at-full-rate", "ghsim/workload/offload.py",
             "self.slowdown = 1.0 / um.system_allocated_hbm_efficiency",
             "self.slowdown = 1.0",
             "memory that reached HBM through the system allocator streams as fast as cudaMalloc "
             "memory", ("tests/test_unified_memory.py",)),
    Sabotage("document-mask-ignored", "ghsim/workload/shapes.py",
             "attention_work=training.attention_work_fraction,",
             "attention_work=1.0,",
             "flash attention under a document mask runs every block of the causal square",
             ("tests/test_model_features.py",)),
    Sabotage("ring-latency-per-rank", "ghsim/fabric/nccl.py",
             'steps = 2 * (ranks - 1) if collective == "all_reduce" else ranks - 1',
             "steps = ranks - 1",
             "a ring all-reduce pays one step's latency a rank, not two (reduce-scatter and "
             "all-gather)", ("tests/test_nccl.py",)),
    Sabotage("tree-correction-ignored", "ghsim/fabric/nccl.py",
             "factor *= tree_correction(protocol, message)", "factor *= 1.0",
             "a tree all-reduce of a medium message reaches the bandwidth NCCL's model corrects",
             ("tests/test_nccl.py",)),
    Sabotage("ring-plateau-ignored", "ghsim/fabric/nccl.py",
             "latency *= RING_PLATEAU", "latency *= 1.0",
             "a Simple ring all-reduce across nodes skips NCCL's 1.4x latency plateau",
             ("tests/test_nccl.py",)),
    Sabotage("ll-carries-no-flags", "ghsim/fabric/nccl.py",
             "return min(0.5, cap / busbw)", "return min(1.0, cap / busbw)",
             "the LL protocol's flags take no room on the wire", ("tests/test_nccl.py",)),
    Sabotage("eviction-most-recent-first", "ghsim/workload/pages.py",
             "key=lambda n: self.last_use[n]):", "key=lambda n: -self.last_use[n]):",
             "managed memory evicts the most recently used pages, not the least",
             ("tests/test_pages.py", "tests/test_unified_memory.py")),
    Sabotage("host-cores-not-shared", "ghsim/costmodel/host.py",
             "share = self.cores_per_cpu / max(1, sharers)",
             "share = float(self.cores_per_cpu)",
             "every GPU's host work gets all its CPU's cores, however many GPUs share the CPU",
             ("tests/test_offload.py",)),
    Sabotage("fault-migration-at-link-rate", "ghsim/costmodel/host.py",
             "migration_bytes_per_s=gpu.migration_bytes_per_s() or math.inf",
             "migration_bytes_per_s=math.inf",
             "fault-driven migration runs at the link's copy rate, not the measured fault rate",
             ("tests/test_unified_memory.py", "tests/test_pages.py")),
    Sabotage("core-reads-at-write-rate", "ghsim/costmodel/host.py",
             "read_share / self.core_read_bytes_per_s",
             "read_share / self.core_write_bytes_per_s",
             "a host core reads at its (faster) single-thread write rate",
             ("tests/test_offload.py",)),
    Sabotage("untied-output-free", "ghsim/workload/modelsize.py",
             "output=0 if model.tied_embeddings else model.vocab * h,",
             "output=0,",
             "an untied output projection is not counted among the parameters",
             ("tests/test_modelsize.py", "tests/test_model_features.py")),
    Sabotage("trace-stream-waits-dropped", "ghsim/importers/kineto.py",
             "            events[consumers[0]].after.append(producers[-1])",
             "            pass",
             "an imported trace's cross-stream waits (cudaStreamWaitEvent) are dropped",
             ("tests/test_import.py",)),
    Sabotage("trace-launch-times-ignored", "ghsim/importers/replay.py",
             "(event.launch_us - t0) * 1e-6)", "(event.launch_us - t0) * 0.0)",
             "a replayed trace's kernels may start before their host launched them",
             ("tests/test_import.py",)),
    Sabotage("grad-reduce-never-overlaps", "ghsim/workload/lower.py",
             "first = self.stage == 0 and chunk.index == 0 and self.par.overlap_grad_reduce",
             "first = False",
             "gradients are reduced after the whole backward pass even with overlap_grad_reduce",
             ("tests/test_workload.py",)),
    Sabotage("param-gather-never-prefetched", "ghsim/workload/lower.py",
             "if self.par.overlap_param_gather and self.zero in (1, 2) and (",
             "if False and (",
             "overlap_param_gather gathers nothing ahead of the forward pass",
             ("tests/test_workload.py",)),
    Sabotage("oversubscription-ignored", "ghsim/hardware/graph.py",
             "1.0, tree.down / max(tree.up, 1))", "1.0, 1.0)",
             "an oversubscribed leaf's uplinks carry as much as its down-ports",
             ("tests/test_graph.py", "tests/test_fabric.py")),
    Sabotage("backwards-in-forward-chunk-order", "ghsim/workload/schedule.py",
             "order.append((mb, chunk if forward else vp - 1 - chunk))",
             "order.append((mb, chunk))",
             "the interleaved schedule's backward passes visit the model chunks first to last",
             ("tests/test_workload.py",)),
    Sabotage("beams-share-no-prompt-blocks", "ghsim/serving/engine.py",
             "shared = min(request.input_tokens, tokens) // block_tokens if beams > 1 else 0",
             "shared = 0",
             "beam search copies the prompt's full KV blocks for every beam",
             ("tests/test_capacity_scheduler.py",)),
    Sabotage("host-kv-blocks-freed-in-hbm", "ghsim/serving/engine.py",
             "self.free_hbm += request.blocks - request.host_blocks",
             "self.free_hbm += request.blocks",
             "a finished request's KV blocks in host memory are handed back to HBM",
             ("tests/test_capacity_scheduler.py", "tests/test_serving.py")),
    Sabotage("uneven-layers-off-the-first-stages", "ghsim/config/layout.py",
             "    for index in ends[:deficit]:", "    for index in range(deficit):",
             "uneven pipeline stages lose their layer from the first stages, not from both ends",
             ("tests/test_workload.py",)),
    Sabotage("given-stage-layers-ignored", "ghsim/config/layout.py",
             "return [fixed.get(stage, share) for stage in range(pp)]",
             "return [share for stage in range(pp)]",
             "first_stage_layers and last_stage_layers are spread like the other stages' layers",
             ("tests/test_workload.py",)),
    Sabotage("server-latency-at-the-median", "ghsim/serving/simulate.py",
             "return float(np.percentile(values, q)) if values.size else math.nan",
             "return float(np.percentile(values, 50.0)) if values.size else math.nan",
             "a server scenario's latency limits are checked at the median, not the stated "
             "percentile", ("tests/test_serving.py",)),
    Sabotage("mape-over-one-more-point", "ghsim/engine/validation.py",
             '"mape": sum(errors) / len(errors) if errors else None',
             '"mape": sum(errors) / (len(errors) + 1) if errors else None',
             "ghsim validate divides the summed errors by one point more than it simulated",
             ("tests/test_cli.py", "tests/test_calibration.py")),
    Sabotage("error-relative-to-the-prediction", "ghsim/engine/validation.py",
             "predicted, (predicted - measured) / measured,\n",
             "predicted, (predicted - measured) / predicted,\n",
             "a training point's error is taken relative to the prediction, not the measurement",
             ("tests/test_cli.py", "tests/test_calibration.py")),
    Sabotage("parallel-points-in-finishing-order", "ghsim/engine/validation.py",
             "slots[futures[future]] = future.result()", "slots[done - 1] = future.result()",
             "validate --workers N lists its points in the order they finished",
             ("tests/test_cli.py",)),
    Sabotage("lognormal-median-at-the-mean", "ghsim/serving/requests.py",
             "mu = math.log(length.mean) - sigma2 / 2", "mu = math.log(length.mean)",
             "lognormal request lengths have the stated mean as their median (a larger mean)",
             ("tests/test_requests.py", "tests/test_serving.py")),
    Sabotage("output-limit-not-applied", "ghsim/serving/requests.py",
             "outputs = np.minimum(outputs, limit)", "outputs = outputs",
             "drawn output lengths are not cut at max_output_tokens",
             ("tests/test_requests.py", "tests/test_serving.py")),
    Sabotage("kv-reserved-to-the-drawn-output", "ghsim/serving/requests.py",
             "reserve_tokens=int(a) + int(limit if limit else b))",
             "reserve_tokens=int(a) + int(b))",
             "a request's KV reservation covers its drawn output, not its max_output_tokens",
             ("tests/test_requests.py", "tests/test_serving.py",
              "tests/test_capacity_scheduler.py")),
    Sabotage("poisson-gaps-twice-as-long", "ghsim/serving/requests.py",
             "exponential(1.0, size=count)", "exponential(2.0, size=count)",
             "Poisson arrivals come at half the stated rate",
             ("tests/test_requests.py", "tests/test_serving.py")),
    Sabotage("tpot-over-every-output-token", "ghsim/serving/result.py",
             "tpot = np.array([(r.finish_s - r.first_token_s) / (r.output_tokens - 1)",
             "tpot = np.array([(r.finish_s - r.first_token_s) / r.output_tokens",
             "time per output token divides by every output token, the first included",
             ("tests/test_requests.py", "tests/test_serving.py")),
    Sabotage("no-warmup-skipped", "ghsim/serving/result.py",
             "skip = math.ceil(warmup / replicas)", "skip = 0",
             "the warm-up requests count in the latency and throughput statistics",
             ("tests/test_requests.py", "tests/test_serving.py")),
    Sabotage("routing-maps-not-launched", "ghsim/workload/routing.py",
             "forward += scores + topk + 8", "forward += scores + topk",
             "the MoE router's dense probabilities and routing map launch no kernels",
             ("tests/test_moe.py",)),
    Sabotage("nsys-nanoseconds-as-milliseconds", "ghsim/importers/nsys.py",
             "return nanoseconds / 1e3", "return nanoseconds / 1e6",
             "an Nsight Systems export's nanoseconds are read as a thousand times shorter",
             ("tests/test_trace_units.py", "tests/test_import.py")),
    Sabotage("bmm-batch-not-counted", "ghsim/importers/classify.py",
             "(b, m, k), (_, _, n) = dims[0], dims[1]\n            m = int(b) * int(m)",
             "(b, m, k), (_, _, n) = dims[0], dims[1]",
             "a traced aten::bmm's FLOPs count one matrix of its batch",
             ("tests/test_trace_units.py", "tests/test_import.py")),
    Sabotage("collective-type-ignored", "ghsim/importers/classify.py",
             'size = dtype_bytes(args.get("dtype")) or DEFAULT_COLLECTIVE_DTYPE_BYTES',
             "size = DEFAULT_COLLECTIVE_DTYPE_BYTES",
             "a traced collective's elements are 2 bytes whatever type its record names",
             ("tests/test_trace_units.py", "tests/test_import.py")),
    Sabotage("et-tensor-types-ignored", "ghsim/importers/pytorch_et.py",
             "size = dtype_bytes(kind) or 4", "size = 4",
             "an execution trace's tensors are counted at 4 bytes an element whatever their type",
             ("tests/test_trace_units.py", "tests/test_import.py")),
    Sabotage("unfitting-points-ranked-with-the-rest", "ghsim/sweep/runner.py",
             'done.sort(key=lambda r: (r["fits"] is False, r[key] is None,',
             "done.sort(key=lambda r: (False, r[key] is None,",
             "a sweep ranks a point that does not fit in memory among those that do",
             ("tests/test_sweep_rank.py", "tests/test_sweep.py")),
    Sabotage("rank-order-flipped", "ghsim/sweep/runner.py",
             "-(r[key] or 0) if descending else (r[key] or 0),",
             "(r[key] or 0) if descending else -(r[key] or 0),",
             "a sweep ranks the slowest point first",
             ("tests/test_sweep_rank.py", "tests/test_sweep.py")),
    Sabotage("training-rates-lowest-first", "ghsim/config/sweep.py",
             'HIGHER_IS_BETTER = frozenset({"tokens_per_s", "tokens_per_s_per_gpu", '
             '"model_tflops_per_gpu",\n                              "mfu", ',
             'HIGHER_IS_BETTER = frozenset({',
             "a training sweep ranked by tokens/s or MFU puts the lowest first",
             ("tests/test_sweep_rank.py",)),
    Sabotage("best-point-may-not-fit", "ghsim/sweep/runner.py",
             'ranked = [r for r in self.ranked() if has_result(r) and r["fits"] is not False]',
             "ranked = [r for r in self.ranked() if has_result(r)]",
             "a sweep whose points all overflow memory names one of them the best",
             ("tests/test_sweep_rank.py", "tests/test_sweep.py")),
    Sabotage("chained-comparison-against-the-first", "ghsim/config/expression.py",
             "                    return False\n                left = right\n",
             "                    return False\n",
             "a filter's chained comparison compares every term with the first",
             ("tests/test_sweep_rank.py", "tests/test_sweep.py")),
    Sabotage("filter-or-read-as-and", "ghsim/config/expression.py",
             "return all(values) if isinstance(node.op, ast.And) else any(values)",
             "return all(values)",
             "a filter's 'or' needs both sides",
             ("tests/test_sweep_rank.py", "tests/test_sweep.py")),
    Sabotage("rail-numbering-as-plain", "ghsim/hardware/fabric.py",
             "return (unit * self.nics_per_node + nic) * self.nodes_per_unit + slot",
             "return node * self.nics_per_node + nic",
             "a rail-optimized fabric plugs a node's NICs into one leaf, not NIC k into rail k",
             ("tests/test_graph.py", "tests/test_fabric.py")),
    Sabotage("fabric-bisection-not-oversubscribed", "ghsim/hardware/fabric.py",
             "return full if self.tiers == 1 else full * min(1.0, self.up / self.down)",
             "return full",
             "an oversubscribed fabric's bisection is that of a full one",
             ("tests/test_graph.py", "tests/test_fabric.py")),
    Sabotage("leaf-uplinks-not-oversubscribed", "ghsim/hardware/fabric.py",
             "up = max(1, math.ceil(down / spec.oversubscription)) if endpoints > down else 0",
             "up = down if endpoints > down else 0",
             "a leaf gets as many uplinks as down-ports whatever the oversubscription",
             ("tests/test_graph.py", "tests/test_fabric.py")),
    Sabotage("one-tier-too-few", "ghsim/hardware/fabric.py",
             "while endpoints > down * (radix // 2) ** (tiers - 2) * radix:",
             "while endpoints > down * (radix // 2) ** (tiers - 1) * radix:",
             "a fat tree is sized one tier short for the endpoints it joins",
             ("tests/test_graph.py", "tests/test_fabric.py")),
    Sabotage("top-tier-at-half-radix", "ghsim/hardware/fabric.py",
             "per_switch = radix if level == tiers else radix // 2",
             "per_switch = radix // 2",
             "the top tier's switches use half their ports (twice the switches)",
             ("tests/test_graph.py", "tests/test_fabric.py")),
    Sabotage("embedding-split-over-tp", "ghsim/serving/memory.py",
             "return (linear_bytes + output * half) / tp + embedding * half + norms * half",
             "return (linear_bytes + output * half + embedding * half) / tp + norms * half",
             "a served model's input embedding is split over the tensor-parallel GPUs",
             ("tests/test_serving.py",)),
    Sabotage("lm-head-at-serving-precision", "ghsim/serving/memory.py",
             "return (linear_bytes + output * half) / tp + embedding * half + norms * half",
             "return (linear_bytes + output * wide) / tp + embedding * half + norms * half",
             "the LM head is served at the FP8 weights' precision, not in 16 bits",
             ("tests/test_serving.py",)),
    Sabotage("kv-cache-at-weight-precision", "ghsim/serving/memory.py",
             "                 * DTYPE_BYTES[spec.inference.kv_dtype])\n\n\ndef activation_bytes",
             "                 * DTYPE_BYTES[spec.inference.precision])\n\n\ndef activation_bytes",
             "the KV cache is stored at the weights' precision, not kv_dtype",
             ("tests/test_serving.py",)),
    Sabotage("replica-weights-up-to-the-whole-gpu", "ghsim/serving/memory.py",
             "if weight_bytes_per_gpu(sized) <= share * capacity:",
             "if weight_bytes_per_gpu(sized) <= capacity:",
             "an unsplit serving point picks the smallest tp whose weights fit at all",
             ("tests/test_serving.py", "tests/test_neutral_form.py")),
    Sabotage("trace-in-milliseconds", "ghsim/report/trace.py",
             '"tid": tids[span.stream], "ts": span.start * 1e6,',
             '"tid": tids[span.stream], "ts": span.start * 1e3,',
             "trace.json places each op at its start in milliseconds, not microseconds",
             ("tests/test_engine.py", "tests/test_new_user.py")),
    Sabotage("memory-track-ignores-frees", "ghsim/report/trace.py",
             "            live += change\n", "            live += max(change, 0.0)\n",
             "trace.json's memory counters never fall when buffers are freed",
             ("tests/test_engine.py", "tests/test_new_user.py")),
    Sabotage("memory-track-at-op-start", "ghsim/report/trace.py",
             "when = cls.end_of.get(event.op, 0.0) if event.op >= 0 else 0.0",
             "when = cls.start_of.get(event.op, 0.0) if event.op >= 0 else 0.0",
             "trace.json's memory counters change when an op starts, not when it ends",
             ("tests/test_engine.py", "tests/test_new_user.py")),
    Sabotage("record-hbm-capacity-as-peak", "ghsim/sweep/record.py",
             'fits=result.memory.get("fits"), hbm_peak_bytes=hbm.get("peak_bytes"),',
             'fits=result.memory.get("fits"), hbm_peak_bytes=hbm.get("capacity_bytes"),',
             "a sweep records each point's HBM capacity as its peak",
             ("tests/test_sweep_rank.py", "tests/test_engine.py")),
    Sabotage("record-host-link-one-way", "ghsim/sweep/record.py",
             'host_link_utilization=max(host.get("h2d_utilization", 0.0),\n'
             '                                  host.get("d2h_utilization", 0.0)),',
             'host_link_utilization=host.get("h2d_utilization", 0.0),',
             "a sweep records the host link's utilization toward the GPU only",
             ("tests/test_sweep_rank.py", "tests/test_engine.py")),
    Sabotage("record-least-busy-stage", "ghsim/sweep/record.py",
             'busiest_stage_share=(max(row["busy_share"] for row in result.stages)',
             'busiest_stage_share=(min(row["busy_share"] for row in result.stages)',
             "a sweep records the least busy pipeline stage's share as the busiest's",
             ("tests/test_sweep_rank.py", "tests/test_engine.py")),
    Sabotage("recost-fallback-unscaled", "ghsim/importers/replay.py",
             'attrs["fallback_s"] = measured / scale', 'attrs["fallback_s"] = measured',
             "a recosted trace keeps the source GPU's time for kernels it cannot classify",
             ("tests/test_trace_units.py", "tests/test_import.py")),
    Sabotage("recost-gemm-bytes-fp32", "ghsim/importers/replay.py",
             "data = (m * k + k * n + m * n) * 2.0", "data = (m * k + k * n + m * n) * 4.0",
             "a recosted GEMM moves 4-byte elements, not the trace's 16-bit ones",
             ("tests/test_trace_units.py", "tests/test_import.py")),
    Sabotage("point-overrides-ignored", "ghsim/config/loader.py",
             'texts = item.get("overrides") if isinstance(item, dict) else None',
             "texts = None",
             "a validation point's overrides (the Alps module cap of February 2025) are dropped",
             ("tests/test_calibration.py", "tests/test_accuracy_sets.py")),
    # -- shared helpers, totals and the result --------------------------------------------------
    Sabotage("interpolate-linear-in-x", "ghsim/interpolate.py",
             "return y0 + math.log2(x / x0) / math.log2(x1 / x0) * (y1 - y0)",
             "return y0 + (x - x0) / (x1 - x0) * (y1 - y0)",
             "measured tables (the NCCL ramp, attention by head size) are read linearly in x, "
             "not in log2(x)"),
    Sabotage("largest-normal-hazen", "ghsim/stats.py",
             "return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))",
             "return NormalDist().inv_cdf((n - 0.5) / n)",
             "the expected largest of n normal draws uses Hazen's plotting position (1.53 for 8 "
             "instead of 1.42)"),
    Sabotage("totals-switch-bisection-whole", "ghsim/hardware/totals.py",
             "        return per_gpu, gpus // 2 * per_gpu",
             "        return per_gpu, gpus * per_gpu",
             "an NVLink switch domain's bisection counts every GPU's bandwidth, not half's",
             ("tests/test_graph.py",)),
    Sabotage("totals-direct-bisection-one-pair", "ghsim/hardware/totals.py",
             "return per_gpu, (gpus // 2) * (gpus - gpus // 2) * out[0]",
             "return per_gpu, (gpus // 2) * out[0]",
             "a directly linked domain's bisection counts one link per GPU pair across the cut",
             ("tests/test_graph.py",)),
    Sabotage("totals-gpu-memory-whole-node", "ghsim/hardware/totals.py",
             "        share = gpu_fraction if owner_is_gpu else 1.0",
             "        share = 1.0",
             "a scenario on part of a node counts every GPU's HBM of the node",
             ("tests/test_graph.py",)),
    Sabotage("totals-cores-one-node", "ghsim/hardware/totals.py",
             '        cpu_cores=sum(graph.component(c)["cores"] for c in graph.components("cpu"))\n'
             "        * graph.num_nodes,",
             '        cpu_cores=sum(graph.component(c)["cores"] for c in graph.components("cpu")),',
             "the system's CPU cores are one node's",
             ("tests/test_graph.py",)),
    Sabotage("launches-ignore-groups", "ghsim/workload/ir.py",
             "        return self.kernels + self.groups - 1",
             "        return self.kernels",
             "a grouped GEMM's experts cost the host one launch, not one each",
             ("tests/test_ir.py",)),
    Sabotage("hardware-flops-one-rank-per-class", "ghsim/workload/ir.py",
             "return sum(c.multiplicity * class_flops(c) for c in self.classes)",
             "return sum(class_flops(c) for c in self.classes)",
             "the job's hardware FLOPs count one rank of each class",
             ("tests/test_ir.py",)),
    Sabotage("class-flops-bodies-once", "ghsim/workload/ir.py",
             "        total += per_body[key]\n    return total",
             "    return sum(per_body.values())",
             "a body shared by several micro-batches counts its FLOPs once",
             ("tests/test_ir.py",)),
    Sabotage("recompute-filter-ignored", "ghsim/workload/ir.py",
             "if recompute is None or k.recompute == recompute)",
             "if recompute is None or k.recompute)",
             "model FLOPs of a class (recompute=False) count nothing",
             ("tests/test_ir.py",)),
    Sabotage("dag-cycles-accepted", "ghsim/workload/ir.py",
             "            elif state[nxt] == 1:",
             "            elif False:",
             "a workload whose dependencies form a cycle is accepted",
             ("tests/test_ir.py",)),
    Sabotage("dag-self-dependency-accepted", "ghsim/workload/ir.py",
             "if not 0 <= dep < len(ops) or dep == op.id:",
             "if not 0 <= dep < len(ops):",
             "an op that depends on itself is accepted",
             ("tests/test_ir.py",)),
    Sabotage("tier-short-at-twice", "ghsim/engine/result.py",
             'if isinstance(data, dict) and data["peak_bytes"] > data["capacity_bytes"]]',
             'if isinstance(data, dict) and data["peak_bytes"] > 2 * data["capacity_bytes"]]',
             "a tier is short of memory only past twice its capacity",
             ("tests/test_result.py",)),
    Sabotage("links-least-busy-listed", "ghsim/engine/links.py",
             'key=lambda e: (-e["utilization"], -e["bytes"], e["name"]))',
             'key=lambda e: (e["utilization"], e["bytes"], e["name"]))',
             "the result lists the least busy links of each kind",
             ("tests/test_result.py",)),
    Sabotage("cpu-busy-double-counted", "ghsim/engine/links.py",
             "            total += stop - max(start, end)",
             "            total += stop - start",
             "overlapping host-CPU work counts twice in the CPU utilization",
             ("tests/test_result.py",)),
    Sabotage("stream-host-reads-half", "ghsim/workload/microbench.py",
             'attrs={"cores": None, "read_share": 2 / 3})',
             'attrs={"cores": None, "read_share": 1 / 2})',
             "the host STREAM triad reads one array per array written, not two",
             ("tests/test_by_hand.py", "tests/test_offload.py")),
    Sabotage("cpu-write-device-is-d2h", "ghsim/workload/microbench.py",
             'direction = "h2d" if operation in ("gpu_read_host", "cpu_write_device") else "d2h"',
             'direction = "h2d" if operation in ("gpu_read_host",) else "d2h"',
             "the CPU writing GPU memory crosses the host link toward the host",
             ("tests/test_by_hand.py",)),
    # -- inputs and outputs --------------------------------------------------------------------
    Sabotage("nonfinite-inf-passes", "ghsim/outputs.py",
             "if isinstance(value, float) and not math.isfinite(value):",
             "if isinstance(value, float) and math.isnan(value):",
             "an infinite number in a result is written instead of refused",
             ("tests/test_outputs.py", "tests/test_hostile.py")),
    Sabotage("output-over-input", "ghsim/outputs.py",
             "            if _same(output, path):",
             "            if False:",
             "an output path that is one of the inputs is written over",
             ("tests/test_outputs.py",)),
    Sabotage("output-over-special-file", "ghsim/outputs.py",
             "    if not stat.S_ISREG(mode):\n        raise InputError(str(path), \"\", "
             "f\"expected a "
             "regular file to write",
             "    if stat.S_ISDIR(mode):\n        raise InputError(str(path), \"\", f\"expected a "
             "regular file to write",
             "an output renamed over a FIFO or a device destroys it",
             ("tests/test_outputs.py",)),
    Sabotage("temporary-left-behind", "ghsim/outputs.py",
             "            os.unlink(temporary)",
             "            pass",
             "a failed write leaves its temporary file beside the output",
             ("tests/test_outputs.py",)),
    Sabotage("shared-lock", "ghsim/outputs.py",
             "fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)",
             "fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)",
             "two ghsim processes may write into one output folder at once",
             ("tests/test_outputs.py", "tests/test_sweep.py")),
    Sabotage("fifo-opened", "ghsim/files.py",
             "        if not stat.S_ISREG(mode):\n"
             "            raise InputError(where, \"\", f\"expected {what}",
             "        if stat.S_ISDIR(mode):\n"
             "            raise InputError(where, \"\", f\"expected {what}",
             "an input path naming a FIFO or a device is read",
             ("tests/test_hostile.py", "tests/test_broken_inputs.py")),
    Sabotage("gzip-bomb-to-the-trace-limit", "ghsim/files.py",
             "return min(MAX_TRACE_BYTES, max(MIN_INFLATE_BYTES, "
             "MAX_INFLATE_RATIO * compressed_bytes))",
             "return MAX_TRACE_BYTES",
             "a gzip trace may inflate to 4 GiB whatever its compressed size",
             ("tests/test_hostile.py",)),
    # -- reading configs and traces, and what inspect shows --------------------------------------
    Sabotage("duplicate-key-kept", "ghsim/config/yamlio.py",
             "        if key in mapping and key not in from_merge:",
             "        if False:",
             "a YAML key given twice keeps its last value silently",
             ("tests/test_loader.py",)),
    Sabotage("yaml11-booleans", "ghsim/config/yamlio.py",
             '    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]',
             "    first: list(resolvers)",
             "YAML 1.1 booleans: no, on and off are read as false and true",
             ("tests/test_loader.py",)),
    Sabotage("several-documents-first-kept", "ghsim/config/yamlio.py",
             "    if len(documents) > 1:",
             "    if False:",
             "a file of several YAML documents is read as its first",
             ("tests/test_loader.py", "tests/test_broken_inputs.py")),
    Sabotage("non-string-keys-accepted", "ghsim/config/yamlio.py",
             "        if not isinstance(key, str):\n"
             "            raise ConfigError(source, key_path, "
             "f\"expected string keys",
             "        if False:\n            raise ConfigError(source, key_path, "
             "f\"expected string keys",
             "a config with integer keys at the top is accepted",
             ("tests/test_loader.py", "tests/test_broken_inputs.py")),
    Sabotage("no-key-suggestion", "ghsim/config/diagnose.py",
             "    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)",
             "    close: list[str] = []",
             "an unknown key gets no 'did you mean' suggestion",
             ("tests/test_loader.py", "tests/test_broken_inputs.py")),
    Sabotage("bound-operators-swapped", "ghsim/config/diagnose.py",
             'op = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<",',
             'op = {"greater_than": ">=", "greater_than_equal": ">", "less_than": "<",',
             "an exclusive lower bound is reported as inclusive (expected a number >= 0)",
             ("tests/test_loader.py", "tests/test_broken_inputs.py")),
    Sabotage("ghsim-path-ignored", "ghsim/config/search.py",
             'roots += [Path(entry) for entry in os.environ.get("GHSIM_PATH", "")'
             ".split(os.pathsep) "
             "if entry]",
             "roots += []",
             "the GHSIM_PATH folders are not searched",
             ("tests/test_loader.py",)),
    Sabotage("shipped-files-first", "ghsim/config/search.py",
             "    roots.append(builtin_root())",
             "    roots.insert(0, builtin_root())",
             "a shipped config shadows the user's own file of the same name",
             ("tests/test_loader.py",)),
    Sabotage("path-relative-to-cwd-first", "ghsim/config/search.py",
             "    for base in ([near] if near is not None else []) + [Path.cwd()]:",
             "    for base in [Path.cwd()] + ([near] if near is not None else []):",
             "a relative path in a config is looked up in the current folder before the "
             "config's own", ("tests/test_loader.py",)),
    Sabotage("join-one-call-per-kernel", "ghsim/importers/join.py",
             "        call = (event.op_name, event.op_start)",
             "        call = (event.op_name, id(event))",
             "an operator that launches several kernels counts as several calls when joined "
             "with its execution trace", ("tests/test_import.py", "tests/test_trace_units.py")),
    Sabotage("trace-duration-unbounded", "ghsim/importers/checks.py",
             "                or not 0.0 <= value <= MAX_EVENT_US:",
             "                or not 0.0 <= value:",
             "a traced event of 10^300 microseconds is replayed",
             ("tests/test_hostile.py", "tests/test_import.py")),
    Sabotage("trace-boolean-integer", "ghsim/importers/checks.py",
             "if not isinstance(value, int) or isinstance(value, bool) "
             "or not low <= value <= high:",
             "if not isinstance(value, int) or not low <= value <= high:",
             "a trace's integer field accepts true and false",
             ("tests/test_trace_units.py", "tests/test_hostile.py")),
    Sabotage("workload-file-drops-dependencies", "ghsim/importers/workload_file.py",
             "            list(columns[\"after\"][i] or [])))",
             "            []))",
             "a workload file's cross-stream dependencies are dropped when it is read",
             ("tests/test_workload_file.py", "tests/test_import.py")),
    Sabotage("workload-file-whole-microseconds", "ghsim/importers/workload_file.py",
             '        columns["dur_us"].append(round(event.dur_us, 3))',
             '        columns["dur_us"].append(round(event.dur_us))',
             "a workload file keeps kernel durations to the whole microsecond",
             ("tests/test_workload_file.py", "tests/test_import.py")),
    Sabotage("inspect-flops-per-replica", "ghsim/report/views.py",
             '        "model_flops_per_step": per_token * layout.tokens_per_step,',
             '        "model_flops_per_step": per_token * layout.tokens_per_step / layout.dp,',
             "inspect shows one data-parallel replica's model FLOPs as the step's",
             ("tests/test_inspect_views.py",)),
    Sabotage("inspect-embedding-without-head", "ghsim/report/views.py",
             '        "params_embedding": count.embedding + count.output,',
             '        "params_embedding": count.embedding,',
             "inspect leaves an untied output layer out of the embedding parameters",
             ("tests/test_inspect_views.py",)),
    Sabotage("inspect-nccl-at-line-rate", "ghsim/report/views.py",
             '"nccl_busbw": part.nic.nccl_busbw_bytes_per_s()}',
             '"nccl_busbw": part.nic.bandwidth_bytes_per_s}',
             "inspect shows a NIC's NCCL bus bandwidth as its line rate",
             ("tests/test_inspect_views.py",)),
    # -- serving: the neutral form, the layout, inspect -------------------------------------------
    Sabotage("mlperf-offline-one-query", "ghsim/config/neutral_serving.py",
             'requests: dict[str, Any] = {"count": rules["count"] * per_gpu,',
             'requests: dict[str, Any] = {"count": rules["count"],',
             "an MLPerf offline run on 8 GPUs queues one minimum query, not one per GPU",
             ("tests/test_neutral_form.py",)),
    Sabotage("mlperf-beams-ignored", "ghsim/config/neutral_serving.py",
             '        inference["beam_width"] = rules["beam"]',
             "        pass",
             "GPT-J's MLPerf runs search one beam, not four",
             ("tests/test_neutral_form.py",)),
    Sabotage("clients-warmup-counted", "ghsim/config/neutral_serving.py",
             '"warmup": clients if isinstance(clients, int) and clients < count else 0}',
             '"warmup": 0}',
             "each client's first request (genai-perf's warm-up) counts in a concurrency run",
             ("tests/test_neutral_form.py",)),
    Sabotage("nim-inter-token-latency-unread", "ghsim/config/neutral_serving.py",
             '             "inter_token_latency_ms": "tpot_ms"}',
             '             "inter_token_latency_ms": "inter_token_latency_ms"}',
             "NIM's inter-token latency is not read as the TPOT it measures",
             ("tests/test_neutral_form.py",)),
    Sabotage("trtllm-bench-sizes-shifted", "ghsim/config/neutral_serving.py",
             "    if total <= 2500:\n        return 3000",
             "    if total <= 2048:\n        return 3000",
             "trtllm-bench's dataset of 3,000 requests stops at 2,048 tokens, not 2,500",
             ("tests/test_neutral_form.py",)),
    Sabotage("serving-expert-tp-whole", "ghsim/config/serving_layout.py",
             "        etp=tp // ep if moe is not None else 1, edp=1,",
             "        etp=tp if moe is not None else 1, edp=1,",
             "a serving replica's experts are split over all its tp GPUs, ignoring moe_ep",
             ("tests/test_serving.py",)),
    Sabotage("serving-view-one-beam", "ghsim/report/serving.py",
             "    per_request = spec.inference.beam_width * -(-tokens // memory.block_tokens)",
             "    per_request = -(-tokens // memory.block_tokens)",
             "inspect's requests held in HBM reserve one beam's blocks, not every beam's",
             ("tests/test_serving.py",)),
    # -- Chakra traces ----------------------------------------------------------------------------
    Sabotage("chakra-export-unchained", "ghsim/importers/chakra.py",
             "            if index:\n                node.ctrl_deps.append(index - 1)\n",
             "            if False:\n                node.ctrl_deps.append(index - 1)\n",
             "an exported Chakra trace's nodes depend on nothing: ASTRA-sim runs them all at once",
             ("tests/test_chakra.py",)),
    Sabotage("chakra-file-order", "ghsim/importers/chakra.py",
             '    order = sorted(range(len(nodes)), key=lambda i: nodes[i]["id"])',
             "    order = list(range(len(nodes)))",
             "a Chakra trace's nodes replay in the file's order, not their ids'",
             ("tests/test_chakra.py",)),
    Sabotage("chakra-send-on-compute-stream", "ghsim/importers/chakra.py",
             'event = GpuEvent(node["name"], "kernel", 1, clock, duration, "collective",',
             'event = GpuEvent(node["name"], "kernel", 0, clock, duration, "collective",',
             "a Chakra send or receive replays on the compute stream",
             ("tests/test_chakra.py",)),
    Sabotage("chakra-reduce-scatter-as-all-reduce", "ghsim/importers/chakra.py",
             '"REDUCE_SCATTER": "reduce_scatter", "REDUCE_SCATTER_BLOCK"',
             '"REDUCE_SCATTER": "all_reduce", "REDUCE_SCATTER_BLOCK"',
             "a Chakra reduce-scatter replays as an all-reduce",
             ("tests/test_chakra.py", "tests/test_import.py")),
    Sabotage("chakra-export-reduce-scatter-block", "ghsim/importers/chakra.py",
             '"reduce_scatter": "REDUCE_SCATTER", "all_to_all": "ALL_TO_ALL",',
             '"reduce_scatter": "REDUCE_SCATTER_BLOCK", "all_to_all": "ALL_TO_ALL",',
             "an exported reduce-scatter is a REDUCE_SCATTER_BLOCK, which ASTRA-sim refuses",
             ("tests/test_chakra.py",)),
    # -- what the console and a sweep's files say ----------------------------------------------
    Sabotage("console-published-error-inverted", "ghsim/report/console.py",
             '        error = view["params"] / view["published_params"] - 1',
             '        error = view["published_params"] / view["params"] - 1',
             "inspect's error against the published parameter count is taken the wrong way",
             ("tests/test_console.py",)),
    Sabotage("console-share-of-seconds", "ghsim/report/console.py",
             '            parts.add_row(key, f"{seconds:.4g}", f"{seconds / step:.1%}")',
             '            parts.add_row(key, f"{seconds:.4g}", f"{seconds:.1%}")',
             "the console's breakdown shows seconds as the share of the step",
             ("tests/test_console.py",)),
    Sabotage("console-least-busy-paces", "ghsim/report/console.py",
             "    busiest = max(by_stage, key=lambda k: by_stage[k])",
             "    busiest = min(by_stage, key=lambda k: by_stage[k])",
             "the console names the least busy pipeline stage as the one that paces the step",
             ("tests/test_engine.py", "tests/test_cli.py")),
    Sabotage("console-worst-is-the-mape", "ghsim/report/console.py",
             "    return f\"MAPE {summary['mape']:.1%}, worst {summary['max_abs_error']:.1%}\"",
             "    return f\"MAPE {summary['mape']:.1%}, worst {summary['mape']:.1%}\"",
             "validate's summary line gives the MAPE as the worst error",
             ("tests/test_console.py",)),
    Sabotage("csv-ranks-invalid-points", "ghsim/sweep/outputs.py",
             '            row = [rank if has_result(record) else "",',
             "            row = [rank,",
             "results.csv ranks a point that failed or was filtered out",
             ("tests/test_sweep_rank.py", "tests/test_sweep.py")),
    Sabotage("sweep-summary-swaps-counts", "ghsim/sweep/outputs.py",
             'f"{outcome.cached} from the cache, {skipped} filtered out, {failed} invalid")',
             'f"{outcome.cached} from the cache, {failed} filtered out, {skipped} invalid")',
             "a sweep's summary line swaps the filtered-out and invalid counts",
             ("tests/test_sweep_rank.py", "tests/test_sweep.py")),
    Sabotage("sweep-setup-direction-swapped", "ghsim/sweep/outputs.py",
             '(" (highest first)" if sweep.descending',
             '(" (highest first)" if not sweep.descending',
             "the sweep report says lowest first where it ranks highest first",
             ("tests/test_sweep_rank.py", "tests/test_sweep.py")),
    # -- walking the schema along a key path -----------------------------------------------------
    Sabotage("informational-keys-never-flagged", "ghsim/config/cursor.py",
             "        if slot.informational:\n            return True",
             "        if False:\n            return True",
             "--set on a key no mechanism reads gives no warning",
             ("tests/test_informational.py",)),
    Sabotage("key-path-indices-dotted", "ghsim/config/cursor.py",
             '            text += f"[{key}]"',
             '            text += f".{key}"',
             "an error names points.3.scenario instead of points[3].scenario",
             ("tests/test_broken_inputs.py", "tests/test_loader.py")),
    # -- what the schema derives -----------------------------------------------------------------
    Sabotage("head-dim-from-hidden-always", "ghsim/config/schema/model.py",
             "        return self.head_dim if self.head_dim is not None "
             "else self.hidden // self.heads",
             "        return self.hidden // self.heads",
             "a model's given head_dim is ignored for hidden / heads (Qwen3-235B: 64, not 128)",
             ("tests/test_modelsize.py", "tests/test_model_features.py")),
    Sabotage("gqa-without-fewer-kv-heads", "ghsim/config/schema/model.py",
             '        if kind == "gqa" and self.kv_heads == self.heads:',
             "        if False:",
             "attention type gqa with as many kv_heads as heads is accepted",
             ("tests/test_loader.py", "tests/test_model_features.py")),
    Sabotage("gpudirect-everywhere", "ghsim/config/schema/system.py",
             '        return self.nic_attach == "gpu"',
             "        return True",
             "a NIC reached through the CPU (GH200) is taken to do GPUDirect RDMA",
             ("tests/test_fabric.py", "tests/test_nccl.py")),
    Sabotage("domain-one-node", "ghsim/config/schema/system.py",
             "        return self.node.gpus * self.nvlink_domain.nodes",
             "        return self.node.gpus",
             "an NVLink domain of several nodes (DGX GH200, NVL32) is one node's GPUs",
             ("tests/test_graph.py",)),
    # -- a scenario's training keys ----------------------------------------------------------------
    Sabotage("fp8-default-recipe-tensorwise", "ghsim/config/schema/scenario.py",
             '        return self.fp8_recipe or "delayed"',
             '        return self.fp8_recipe or "tensorwise"',
             "FP8 without a recipe is costed as tensorwise (one more read of each input), "
             "not delayed",
             ("tests/test_model_features.py", "tests/test_calibration.py")),
    Sabotage("fp16-main-grads-fp32", "ghsim/config/schema/scenario.py",
             '        return "fp16" if self.precision == "fp16" else "fp32"',
             '        return "fp32"',
             "an FP16 run reduces FP32 gradients by default (Megatron keeps them FP16)",
             ("tests/test_model_features.py", "tests/test_knobs.py")),
    Sabotage("nan-check-on-under-fp16", "ghsim/config/schema/scenario.py",
             '        return self.precision != "fp16"\n',
             "        return True\n",
             "Megatron's gradient NaN check is on by default under FP16 too",
             ("tests/test_schema_rules.py", "tests/test_model_features.py", "tests/test_knobs.py")),
    Sabotage("document-remainder-dropped", "ghsim/config/schema/scenario.py",
             "        return (full * d * d + rest * rest) / (s * s)",
             "        return full * d * d / (s * s)",
             "document masking forgets the last, shorter document of a sequence",
             ("tests/test_model_features.py",)),
    Sabotage("default-recompute-module-mlp", "ghsim/config/schema/scenario.py",
             '        return tuple(dict.fromkeys(self.recompute_modules or ["core_attn"]))',
             '        return tuple(dict.fromkeys(self.recompute_modules or ["mlp"]))',
             "selective recompute without modules redoes the MLP, not the attention core",
             ("tests/test_workload.py", "tests/test_model_features.py")),
    Sabotage("documents-longer-than-sequence", "ghsim/config/schema/scenario.py",
             "            if self.mean_document_tokens > self.seq_len:",
             "            if self.mean_document_tokens > 2 * self.seq_len:",
             "mean_document_tokens above seq_len is accepted",
             ("tests/test_model_features.py", "tests/test_broken_inputs.py")),
    Sabotage("fp16-grads-under-bf16", "ghsim/config/schema/scenario.py",
             '        if self.main_grads == "fp16" and self.precision != "fp16":',
             "        if False:",
             "main_grads fp16 is accepted for a BF16 run",
             ("tests/test_model_features.py", "tests/test_broken_inputs.py")),
    Sabotage("remainders-without-bf16", "ghsim/config/schema/scenario.py",
             '        if self.master_weights == "remainders" and self.precision not in '
             '("bf16", "fp8"):',
             "        if False:",
             "master_weights remainders is accepted for FP16 weights",
             ("tests/test_model_features.py", "tests/test_broken_inputs.py")),
    Sabotage("te-cross-entropy-without-fusion", "ghsim/config/schema/scenario.py",
             '        if self.cross_entropy_fusion_impl != "native" and '
             'not self.cross_entropy_fusion:',
             "        if False:",
             "cross_entropy_fusion_impl te is accepted without cross_entropy_fusion",
             ("tests/test_loss.py", "tests/test_broken_inputs.py")),
    Sabotage("fp8-recipe-without-fp8", "ghsim/config/schema/scenario.py",
             '        if self.fp8_recipe is not None and self.precision != "fp8":',
             "        if False:",
             "an fp8_recipe is accepted on a BF16 run",
             ("tests/test_schema_rules.py", "tests/test_model_features.py",
              "tests/test_broken_inputs.py")),
    # -- the strict base of every spec -------------------------------------------------------------
    Sabotage("specs-coerce-strings", "ghsim/config/schema/base.py",
             "        strict=True,",
             "        strict=False,",
             "a quoted number ('8') is accepted where a number is expected",
             ("tests/test_broken_inputs.py", "tests/test_loader.py")),
    Sabotage("specs-accept-nan", "ghsim/config/schema/base.py",
             "        allow_inf_nan=False,",
             "        allow_inf_nan=True,",
             "NaN and infinity are accepted as numbers",
             ("tests/test_broken_inputs.py", "tests/test_loader.py")),
    Sabotage("specs-ignore-unknown-keys", "ghsim/config/schema/base.py",
             '        extra="forbid",',
             '        extra="ignore",',
             "a misspelt key is silently ignored",
             ("tests/test_broken_inputs.py", "tests/test_loader.py")),
    Sabotage("max-int-beyond-doubles", "ghsim/config/schema/base.py",
             "MAX_INT = 2**53",
             "MAX_INT = 2**63",
             "integers beyond what a double holds exactly are accepted",
             ("tests/test_broken_inputs.py", "tests/test_loader.py")),
    Sabotage("resolved-keeps-both-alternatives", "ghsim/config/schema/base.py",
             '        return self.model_dump(mode="json", '
             'exclude=_excluded(self, _derived) or None)',
             '        return self.model_dump(mode="json")',
             "a result's inputs.scenario gives both keys of a pair, so it cannot be run again",
             ("tests/test_schema_rules.py", "tests/test_result.py", "tests/test_loader.py")),
    Sabotage("digest-key-order", "ghsim/config/schema/base.py",
             '        text = json.dumps(data, sort_keys=True, separators=(",", ":"))',
             '        text = json.dumps(data, separators=(",", ":"))',
             "the same scenario with its keys in another order has another digest (sweep "
             "cache misses)",
             ("tests/test_schema_rules.py", "tests/test_sweep.py", "tests/test_loader.py")),
    Sabotage("digest-counts-envelope", "ghsim/config/schema/base.py",
             '    return {"schema_version", "kind"} if isinstance(spec, DocumentSpec) else set()',
             "    return set()",
             "a scenario given inline and by file has two digests",
             ("tests/test_schema_rules.py", "tests/test_sweep.py", "tests/test_loader.py")),
    Sabotage("kind-mismatch-accepted", "ghsim/config/schema/base.py",
             "        if self.kind is not None and self.kind != self.KIND:",
             "        if False:",
             "a model file named where a system is expected is accepted",
             ("tests/test_broken_inputs.py", "tests/test_loader.py")),
    # -- validation files --------------------------------------------------------------------------
    Sabotage("empty-validation-file", "ghsim/config/schema/validation.py",
             "    points: list[ValidationPointSpec] = Field(min_length=1)",
             "    points: list[ValidationPointSpec] = Field()",
             "ghsim schema lets editors accept a validation file with no points",
             ("tests/test_schema_rules.py", "tests/test_broken_inputs.py",
              "tests/test_calibration.py")),
    Sabotage("validate-empty-points", "ghsim/config/loader.py",
             "    if not isinstance(items, list) or not items:",
             "    if not isinstance(items, list):",
             "ghsim validate runs a file with no points (a MAPE of nothing)",
             ("tests/test_schema_rules.py", "tests/test_calibration.py")),
    # -- units -------------------------------------------------------------------------------------
    Sabotage("gbit-is-gbyte", "ghsim/units.py",
             "GBIT_S = 1e9 / 8",
             "GBIT_S = 1e9",
             "a NIC's 400 Gb/s is read as 400 GB/s",
             ("tests/test_graph.py", "tests/test_fabric.py")),
    Sabotage("nanoseconds-unscaled", "ghsim/units.py",
             '    return f"{value_s / NS:.4g} ns"',
             '    return f"{value_s:.4g} ns"',
             "344 ns is shown as 3.44e-07 ns",
             ("tests/test_report_pages.py", "tests/test_console.py")),
    # -- the HTML report ---------------------------------------------------------------------------
    Sabotage("html-unescaped", "ghsim/report/html.py",
             "    return html.escape(printable(text))",
             "    return printable(text)",
             "a model named <script> runs in report.html",
             ("tests/test_report_pages.py", "tests/test_outputs.py")),
    Sabotage("html-keeps-namespaces", "ghsim/report/html.py",
             '    return re.sub(r\'\\s+xmlns(:\\w+)?="[^"]*"\', "", body)',
             "    return body",
             "report.html names network resources (the SVGs' namespace URIs)",
             ("tests/test_sweep.py", "tests/test_outputs.py")),
    Sabotage("html-run-always-fits", "ghsim/report/html.py",
             '    fits = "not tracked" if not tiers else _fits(not short, "+".join(short))',
             '    fits = "not tracked" if not tiers else _fits(True, "+".join(short))',
             "a run's report says it fits in memory when it does not",
             ("tests/test_report_pages.py", "tests/test_outputs.py")),
    Sabotage("html-best-does-not-fit", "ghsim/report/html.py",
             '    best = next((r for r in done if r["fits"] is not False), None)',
             "    best = next((r for r in done), None)",
             "a sweep report's best point may not fit in memory",
             ("tests/test_report_pages.py", "tests/test_sweep.py")),
    Sabotage("html-no-vp", "ghsim/report/html.py",
             '    if (par.get("vp") or 1) > 1:',
             "    if False:",
             "the report's layout leaves out interleaved virtual stages",
             ("tests/test_report_pages.py", "tests/test_outputs.py")),
    Sabotage("html-no-stage-table", "ghsim/report/html.py",
             "    if len(stages) > 1:  # each pipeline stage's load",
             "    if False:  # each pipeline stage's load",
             "a pipelined run's report has no table of its stages",
             ("tests/test_report_pages.py", "tests/test_outputs.py")),
    # -- plots -------------------------------------------------------------------------------------
    Sabotage("sensitivity-keeps-unfitting", "ghsim/report/plots.py",
             '        if record["fits"] is False:\n            continue\n        for key, value',
             "        for key, value",
             "the sensitivity plot shows step times of points that do not fit",
             ("tests/test_report_pages.py", "tests/test_sweep.py")),
    Sabotage("sensitivity-worst", "ghsim/report/plots.py",
             "min(best, step)",
             "max(best, step)",
             "the sensitivity plot shows the worst point at each value",
             ("tests/test_report_pages.py", "tests/test_sweep.py")),
    Sabotage("unfitting-markers-filled", "ghsim/report/plots.py",
             'facecolors=colour if fits else "none"',
             "facecolors=colour",
             "points that do not fit are drawn filled like the others",
             ("tests/test_report_pages.py", "tests/test_sweep.py")),
    Sabotage("plot-labels-mathtext", "ghsim/report/plots.py",
             '    return printable(str(text)).replace("$", r"\\$")',
             "    return printable(str(text))",
             "a label with $ is parsed as mathtext (and may fail)",
             ("tests/test_report_pages.py", "tests/test_sweep.py")),
    Sabotage("series-not-system", "ghsim/report/plots.py",
             '    return "system" if "system" in keys else (keys[0] if keys else None)',
             "    return keys[0] if keys else None",
             "a sweep over systems colours its points by another axis",
             ("tests/test_report_pages.py", "tests/test_sweep.py")),
    Sabotage("svg-dated", "ghsim/report/plots.py",
             'METADATA: dict[str, dict[str, str | None]] = {"svg": {"Date": None}, "png": {}}',
             'METADATA: dict[str, dict[str, str | None]] = {"svg": {}, "png": {}}',
             "SVG plots carry their creation date: two runs give different bytes",
             ("tests/test_report_pages.py", "tests/test_sweep.py")),
    # -- routes, shortened keys, the Chakra export -------------------------------------------------
    Sabotage("routes-efficiency-inverted", "ghsim/report/routes.py",
             '"efficiency": copies / coefficient}',
             '"efficiency": coefficient / copies}',
             "inspect --routes shows the inverse of each link's efficiency",
             ("tests/test_inspect_views.py", "tests/test_fabric.py")),
    Sabotage("routes-embedding-everywhere", "ghsim/report/routes.py",
             '            if kind == "embedding" and rank_class.stage not in (0, last):',
             "            if False:",
             "inspect --routes shows the embedding all-reduce on middle pipeline stages",
             ("tests/test_inspect_views.py", "tests/test_fabric.py")),
    Sabotage("short-key-too-long", "ghsim/report/keys.py",
             "        if len(part) + len(tail) + 2 > width:",
             "        if len(part) + len(tail) > width:",
             "a shortened key path is longer than its width",
             ("tests/test_report_pages.py", "tests/test_sweep_rank.py")),
    Sabotage("chakra-export-milliseconds", "ghsim/report/chakra.py",
             "            start, dur = span.start * 1e6, (span.end - span.start) * 1e6",
             "            start, dur = span.start * 1e3, (span.end - span.start) * 1e3",
             "the Chakra export writes durations in ms where Chakra expects us",
             ("tests/test_import.py", "tests/test_chakra.py")),
    Sabotage("chakra-export-all-gemm", "ghsim/report/chakra.py",
             '"gemm" if flops else "elementwise", flops=flops)',
             '"gemm", flops=flops)',
             "the Chakra export calls every compute op a GEMM",
             ("tests/test_chakra.py", "tests/test_import.py")),
    # -- the command line --------------------------------------------------------------------------
    Sabotage("max-mape-doubled", "ghsim/cli.py",
             '        elif report["mape"] > max_mape:',
             '        elif report["mape"] > 2 * max_mape:',
             "--max-mape lets a set through at up to twice the limit",
             ("tests/test_calibration.py", "tests/test_cli.py")),
    Sabotage("max-mape-ignores-failures", "ghsim/cli.py",
             '        if report["failed"]:',
             "        if False:",
             "--max-mape passes a set whose points failed",
             ("tests/test_calibration.py", "tests/test_cli.py")),
    Sabotage("max-mape-ignores-unfitting", "ghsim/cli.py",
             '        if report["not_fitting"]:',
             "        if False:",
             "--max-mape passes a set whose points do not fit",
             ("tests/test_calibration.py", "tests/test_cli.py")),
    Sabotage("percent-not-divided", "ghsim/cli.py",
             "    return value / 100",
             "    return value",
             "--max-mape 12 is read as 1200 %",
             ("tests/test_calibration.py", "tests/test_cli.py")),
    Sabotage("cli-limit-ignored", "ghsim/cli.py",
             "    if value > most:",
             "    if value > most * 1024:",
             "--gpus or --workers beyond ghsim's limit is accepted",
             ("tests/test_cli.py", "tests/test_hostile.py")),
    Sabotage("sweep-interrupt-exit-0", "ghsim/cli.py",
             "    return 130 if outcome.interrupted else 0",
             "    return 0",
             "an interrupted sweep exits 0 as if complete",
             ("tests/test_sweep_rank.py", "tests/test_cli.py")),
)


@dataclass(frozen=True)
class Outcome:
    name: str
    caught: bool
    status: str
    """``failed``, ``error``, ``timeout``, ``passed``: what the suite did."""
    first_failure: str
    seconds: float
    tail: str


def _copy_from_worktree(dest: Path, names: Sequence[str]) -> None:
    for name in sorted(set(names)):
        source = ROOT / name
        if source.is_symlink() or not source.is_file():
            continue  # deleted in the working tree, or a submodule
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def snapshot(dest: Path, head: bool = False, overlay: Sequence[str] = ()) -> None:
    """Copy the working-tree version of every tracked or untracked, non-ignored file; or, with
    ``head``, the last commit's files and then the working-tree versions of ``overlay``."""
    dest.mkdir(parents=True)
    if head:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "HEAD"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        _copy_from_worktree(dest, overlay)
    else:
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
             "--exclude-standard"], check=True, capture_output=True).stdout.decode().split("\0")
        _copy_from_worktree(dest, [n for n in listed if n])
    shared = ROOT.parent / "shared"  # what some files find beside the checkout
    if shared.exists() and not (dest.parent / "shared").exists():
        (dest.parent / "shared").symlink_to(shared)


def apply(repo: Path, sabotage: Sabotage) -> None:
    path = sabotage.target(repo)
    path.write_text(path.read_text().replace(sabotage.original, sabotage.replacement))


def own_files(repo: Path, first: Sequence[str]) -> list[str]:
    """The files of ``first`` the copy has, once each, in that order."""
    return [f for f in dict.fromkeys(first) if (repo / f).is_file()]


def test_files(repo: Path, first: Sequence[str]) -> list[str]:
    """``first``, then every other test file of the copy in name order, the slow ones last
    (without :data:`NOT_A_MODEL_TEST`)."""
    ordered = own_files(repo, first)
    found = (str(p.relative_to(repo)) for p in (repo / "tests").glob("test_*.py"))
    rest = sorted(f for f in found if f != NOT_A_MODEL_TEST)
    rest.sort(key=lambda f: SLOW_LAST.index(f) if f in SLOW_LAST else -1)
    return ordered + [f for f in rest if f not in ordered]


def _environment(repo: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(repo)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


_FAILURE = re.compile(r"^(FAILED|ERROR) (\S+)", re.MULTILINE)


def failures(output: str) -> list[str]:
    """Node ids of the failing or erroring tests in pytest's short summary."""
    return [m.group(2) for m in _FAILURE.finditer(output)]


def run_suite(repo: Path, files: Sequence[str], timeout_s: float, name: str,
              stop_first: bool = True, deselect: Sequence[str] = ()) -> Outcome:
    """Run pytest in ``repo``; kill its whole process group at the timeout."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               *(["-x", "-n", "0"] if stop_first else []),  # serially: the given order holds
               *(f"--deselect={d}" for d in deselect), *files]
    start = time.monotonic()
    with subprocess.Popen(command, cwd=repo, env=_environment(repo), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True) as proc:
        try:
            output, _ = proc.communicate(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            timed_out = True
    seconds = time.monotonic() - start
    tail = "\n".join(output.splitlines()[-30:])
    failed = failures(output)
    first = failed[0] if failed else ""
    if not stop_first:
        tail = output
    if timed_out:
        return Outcome(name, True, "timeout", first or f"(timeout after {timeout_s:.0f} s)",
                       seconds, tail)
    if proc.returncode == 0:
        return Outcome(name, False, "passed", "", seconds, tail)
    if proc.returncode == 1:
        return Outcome(name, True, "failed", first, seconds, tail)
    return Outcome(name, True, "error", first or f"(pytest exit {proc.returncode})", seconds,
                   tail)


def check_import(repo: Path) -> None:
    """The copy's ghsim, not the checkout's editable install, is the one imported."""
    found = subprocess.run(
        [sys.executable, "-c", "import ghsim; print(ghsim.__file__)"], cwd=repo,
        env=_environment(repo), check=True, capture_output=True, text=True).stdout.strip()
    if not Path(found).resolve().is_relative_to(repo.resolve()):
        raise SystemExit(f"the copy imports ghsim from {found}, not from {repo}")


def one(pristine: Path, work: Path, sabotage: Sabotage, timeout_s: float,
        deselect: Sequence[str], first_only: bool = False) -> Outcome:
    repo = work / sabotage.name / "main"
    shutil.copytree(pristine, repo, symlinks=True)
    shared = pristine.parent / "shared"
    if shared.is_symlink():
        (repo.parent / "shared").symlink_to(shared.resolve())
    apply(repo, sabotage)
    own = (*sabotage.first, BY_HAND)
    files = own_files(repo, own) if first_only else test_files(repo, own)
    outcome = run_suite(repo, files, timeout_s, sabotage.name, deselect=deselect)
    shutil.rmtree(repo.parent, ignore_errors=True)
    return outcome


def table(outcomes: Sequence[Outcome]) -> str:
    width = max(len(o.name) for o in outcomes)
    lines = [f"{'sabotage':<{width}}  caught  {'seconds':>7}  first failing test"]
    for o in outcomes:
        caught = "yes" if o.caught else "NO"
        status = "" if o.status in ("failed", "passed") else f" [{o.status}]"
        lines.append(f"{o.name:<{width}}  {caught:<6}  {o.seconds:7.1f}  "
                     f"{o.first_failure or '-'}{status}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("-k", "--only", action="append", default=[],
                        help="run only sabotages whose name contains this (repeatable)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="suites at once (default 2)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds per suite run (default 900)")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the run of the unmodified copy")
    parser.add_argument("--strict-baseline", action="store_true",
                        help="stop if a test fails in the unmodified copy (default: deselect it)")
    parser.add_argument("--head", action="store_true",
                        help="copy the last commit instead of the working tree")
    parser.add_argument("--overlay", action="append", default=[],
                        help="with --head: a path whose working-tree version is copied over "
                        "(repeatable)")
    parser.add_argument("--first-only", action="store_true",
                        help="a quick screen: run only each sabotage's own test files and "
                        "test_by_hand.py (one that survives may still be caught by the rest)")
    parser.add_argument("--list", action="store_true", help="list the sabotages and exit")
    args = parser.parse_args(argv)
    chosen = [s for s in SABOTAGES if not args.only or any(k in s.name for k in args.only)]
    if args.list:
        for s in chosen:
            print(f"{s.name}: {s.description} ({s.file})")
        return 0
    if not chosen:
        print("no sabotage matches", file=sys.stderr)
        return 2
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ghsim-mutation-") as tmp:
        work = Path(tmp)
        pristine = work / "pristine" / "main"
        snapshot(pristine, args.head, args.overlay)
        for s in chosen:  # every original must be there before anything runs
            s.target(pristine)
        check_import(pristine)
        deselect: list[str] = []
        if not args.no_baseline:
            base = run_suite(pristine, test_files(pristine, (BY_HAND,)), args.timeout,
                             "baseline", stop_first=False)
            print(f"baseline: {base.status} in {base.seconds:.0f} s", flush=True)
            if base.status == "timeout" or (base.status != "passed" and args.strict_baseline):
                print(base.tail[-6000:], file=sys.stderr)
                print("the unmodified copy does not pass: no sabotage can be judged",
                      file=sys.stderr)
                return 2
            deselect = failures(base.tail)
            if base.status != "passed" and not deselect:
                print(base.tail[-6000:], file=sys.stderr)
                print("the unmodified copy does not run: no sabotage can be judged",
                      file=sys.stderr)
                return 2
            for node in deselect:
                print(f"WARNING: {node} fails without any sabotage; deselected", flush=True)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(one, pristine, work, s, args.timeout, deselect,
                                   args.first_only)
                       for s in chosen]
            outcomes = []
            for future in futures:
                outcome = future.result()
                outcomes.append(outcome)
                print(f"  {outcome.name}: {'caught' if outcome.caught else 'SURVIVED'} "
                      f"({outcome.seconds:.0f} s)", flush=True)
    print()
    print(table(outcomes))
    survivors = [o.name for o in outcomes if not o.caught]
    minutes = (time.monotonic() - started) / 60
    print(f"\n{len(outcomes) - len(survivors)} of {len(outcomes)} caught in {minutes:.1f} min")
    if survivors:
        print(f"survived: {', '.join(survivors)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
