"""Lowering: FLOPs, collective bytes and activation memory against closed forms; DAG properties."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ghsim.config import Scenario, load_scenario, scenario_from_spec
from ghsim.config.schema import ScenarioSpec
from ghsim.engine.simulate import simulate
from ghsim.errors import InputError
from ghsim.workload.ir import Op, Workload, check_dag, class_flops
from ghsim.workload.lower import lower
from ghsim.workload.modelsize import model_flops_per_token, parameter_count
from ghsim.workload.summary import collective_bytes, memory_profile

GPT = {"name": "gpt-test", "layers": 8, "hidden": 1024, "heads": 16, "kv_heads": 16,
       "ffn_hidden": 4096, "vocab": 32000, "gated_mlp": False, "dropout": 0.1}
LLAMA = {"name": "llama-test", "layers": 8, "hidden": 1024, "heads": 16, "kv_heads": 4,
         "ffn_hidden": 2816, "vocab": 32000, "gated_mlp": True, "norm": "rmsnorm"}


def scenario(num_gpus: int = 8, model: dict[str, object] | None = None, **par: object) -> Scenario:
    training = {"seq_len": 2048, "micro_batch": 1, "global_batch": 64, "precision": "bf16",
                "attention": "flash"}
    for key in ("seq_len", "micro_batch", "global_batch", "precision", "attention"):
        if key in par:
            training[key] = par.pop(key)  # type: ignore[assignment]
    spec = ScenarioSpec.model_validate({
        "name": "test", "system": _system(), "num_gpus": num_gpus, "model": model or LLAMA,
        "training": training, "parallelism": par,
    })
    return scenario_from_spec(spec, "test")


def _system() -> object:
    from ghsim.config import load_system

    return load_system("dgx-h100")


def run_to_completion(workload: Workload) -> None:
    """Execute every class's DAG in zero time, a recv waiting for its matching send.

    Fails if the DAG deadlocks (some op can never run) or a send has no receiver.
    """
    sends: dict[tuple[object, ...], tuple[int, Op]] = {}
    recvs: dict[tuple[object, ...], tuple[int, Op]] = {}
    for c in workload.classes:
        for op in c.ops:
            if op.kind in ("send", "recv"):
                book = sends if op.kind == "send" else recvs
                key = (op.attrs["tag"], c.stage if op.kind == "send" else op.attrs["peer_stage"])
                assert key not in book, f"duplicate {op.kind} {key}"
                book[key] = (c.stage, op)
    assert set(sends) == set(recvs), "every send has exactly one matching receive"
    for key, (_, send) in sends.items():
        assert recvs[key][1].bytes == send.bytes
    done = [[False] * len(c.ops) for c in workload.classes]
    sent: set[tuple[object, ...]] = set()
    waiting = [0] * len(workload.classes)
    dependents = [{i: [] for i in range(len(c.ops))} for c in workload.classes]
    for s, c in enumerate(workload.classes):
        for op in c.ops:
            waiting_for = len(op.deps)
            for d in op.deps:
                dependents[s][d].append(op.id)
            op.attrs["_left"] = waiting_for
    ready = deque((s, op.id) for s, c in enumerate(workload.classes) for op in c.ops
                  if not op.deps)
    blocked: dict[tuple[object, ...], tuple[int, int]] = {}
    finished = 0
    while ready:
        s, i = ready.popleft()
        op = workload.classes[s].ops[i]
        if op.kind == "recv":
            key = (op.attrs["tag"], op.attrs["peer_stage"])
            if key not in sent:
                blocked[key] = (s, i)
                continue
        done[s][i] = True
        finished += 1
        if op.kind == "send":
            key = (op.attrs["tag"], workload.classes[s].stage)
            sent.add(key)
            if key in blocked:
                ready.append(blocked.pop(key))
        for j in dependents[s][i]:
            nxt = workload.classes[s].ops[j]
            nxt.attrs["_left"] -= 1
            if nxt.attrs["_left"] == 0:
                ready.append((s, j))
    del waiting
    total = sum(len(c.ops) for c in workload.classes)
    assert finished == total, f"deadlock: {total - finished} ops never ran"


def _lowers_every_model_flop_once(sc: Scenario) -> Workload:
    """Lower ``sc`` and check that its classes' FLOPs (recomputation aside) are the model's FLOPs
    of the step, within 0.5 %."""
    workload = lower(sc)
    lowered = sum(c.multiplicity * class_flops(c, recompute=False) for c in workload.classes)
    per_token = model_flops_per_token(sc.spec.model, sc.spec.training.seq_len)
    assert lowered == pytest.approx(per_token * sc.layout.tokens_per_step, rel=0.005)
    return workload


def test_model_flops_match_the_megatron_formula() -> None:
    sc = load_scenario("gpt3-175b-mlperf-h100-10752")
    workload = _lowers_every_model_flop_once(sc)
    assert len(workload.classes) == sc.layout.pp == 8  # one class per stage, whatever dp is


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_hardware_flops_add_exactly_the_recomputed_work(recompute: str) -> None:
    sc = scenario(8, GPT, tp=2, pp=2, recompute=recompute, sequence_parallel=True,
                  attention="standard")
    workload = lower(sc)
    extra = workload.hardware_flops_per_step - workload.model_flops_per_step
    m = GPT
    h, s, layers = m["hidden"], 2048, m["layers"]
    tokens = sc.layout.tokens_per_step
    layer_forward = 2 * h * 3 * h + 2 * h * h + 4 * h * m["ffn_hidden"] + 4 * s * h  # type: ignore[operator]
    expected = {"none": 0.0, "selective": 4 * s * h * layers * tokens,
                "full": layer_forward * layers * tokens}[recompute]
    assert extra == pytest.approx(expected, rel=1e-6, abs=1.0)


def test_context_parallel_ranks_reduce_gradients_and_shard_states_together() -> None:
    """The cp ranks hold the same weights: gradients are reduced, and ZeRO-1's optimizer
    states sharded, over dp x cp (Megatron's data-parallel group with context parallelism)."""
    sc = scenario(8, LLAMA, cp=2, zero_stage=1, global_batch=8)
    assert (sc.layout.dp, sc.layout.cp, sc.layout.dp_cp) == (4, 2, 8)
    (c,) = lower(sc).classes
    grads = [op for op in c.ops if op.name.startswith("dp.grad_reduce_scatter")]
    assert grads and {op.attrs["group_size"] for op in grads} == {8}
    assert c.groups["dp"].size == 8
    params = parameter_count(sc.spec.model).total
    optimizer = sum(e.bytes for e in c.memory if e.category == "optimizer")
    assert optimizer == pytest.approx(12 * params / 8)


def test_dp_gradient_reduce_scatter_moves_dp_minus_one_over_dp() -> None:
    sc = scenario(32, LLAMA, tp=2, pp=2, zero_stage=1, global_batch=64)
    dp = sc.layout.dp
    for c in lower(sc).classes:
        grads = [op for op in c.ops if op.name.startswith("dp.grad_reduce_scatter")]
        # FP32 gradients (Megatron's default main grads with bf16), BF16 weights gathered
        params_local = sum(op.bytes for op in grads) / 4
        expected_params = sum(
            op.bytes for op in c.ops if op.name.startswith("dp.param_all_gather")) / 2
        assert params_local == pytest.approx(expected_params)
        wire = sum((dp - 1) / dp * op.bytes for op in grads)
        gathers = sum((dp - 1) / dp * op.bytes for op in c.ops
                      if op.name.startswith("dp.param_all_gather"))
        assert collective_bytes(c)["dp"] == pytest.approx(wire + gathers)
    count = parameter_count(sc.spec.model)
    total = sum(op.bytes for c in lower(sc).classes for op in c.ops
                if op.name.startswith("dp.grad_")) * sc.layout.tp / 4
    assert total == pytest.approx(count.total, rel=0.01)


def test_tp_all_reduce_bytes_without_sequence_parallelism() -> None:
    sc = scenario(8, LLAMA, tp=4, global_batch=16)
    (c,) = lower(sc).classes
    t, mb = 4, sc.layout.micro_batches
    message = 2048 * 1024 * 2  # tokens x hidden x bf16
    per_mb = (4 * LLAMA["layers"] + 1) * 2 * (t - 1) / t * message  # type: ignore[operator]
    assert collective_bytes(c)["tp"] == pytest.approx(per_mb * mb)


@pytest.mark.parametrize(("sp", "recompute"), [(False, "none"), (True, "none"),
                                               (True, "selective"), (False, "full"),
                                               (True, "full")])
def test_activation_memory_matches_korthikanti(sp: bool, recompute: str) -> None:
    # GPT with dropout and standard attention, 1F1B: stage 0 holds pp micro-batches of L/pp
    # layers, i.e. L layers' worth (Korthikanti et al. 2022, section 4.2.3).
    t, pp = 4, 2
    sc = scenario(8, GPT, tp=t, pp=pp, sequence_parallel=sp, recompute=recompute,
                  attention="standard", global_batch=16)
    s, h, a, layers = 2048, 1024, 16, 8
    sbh = s * h
    per_layer = {
        (False, "none"): sbh * (10 + 24 / t + 5 * a * s / (h * t)),
        (True, "none"): sbh * (34 / t + 5 * a * s / (h * t)),
        (True, "selective"): sbh * 34 / t,
        (False, "full"): 2 * sbh,
        (True, "full"): 2 * sbh / t,
    }[(sp, recompute)]
    stage0 = lower(sc).classes[0]
    assert memory_profile(stage0).activations == pytest.approx(layers * per_layer, rel=0.05)


def test_gqa_and_flash_store_less() -> None:
    standard = memory_profile(lower(scenario(8, LLAMA, tp=8, attention="standard")).classes[0])
    flash = memory_profile(lower(scenario(8, LLAMA, tp=8)).classes[0])
    assert flash.activations < standard.activations


def test_lowering_is_deadlock_free_for_the_shipped_scenarios() -> None:
    for name in ("gpt3-175b-mlperf-h100-10752", "llama3-70b-gh200-nvl32",
                 "gpt3-175b-dgx-gh200", "llama3-8b-gh200"):
        workload = lower(load_scenario(name))
        for c in workload.classes:
            check_dag(c)
        run_to_completion(workload)


LAYOUTS = st.fixed_dictionaries({
    "tp": st.sampled_from([1, 2, 4]),
    "pp": st.sampled_from([1, 2, 4]),
    "cp": st.sampled_from([1, 2]),
    "vp": st.sampled_from([None, 2]),
    "sequence_parallel": st.booleans(),
    "zero_stage": st.sampled_from([0, 1, 2, 3]),
    "recompute": st.sampled_from(["none", "selective", "full"]),
    "micro_batch": st.sampled_from([1, 2, 3]),
    "overlap_grad_reduce": st.booleans(),
    "overlap_param_gather": st.booleans(),
})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LAYOUTS, st.sampled_from([8, 16, 32]), st.sampled_from([24, 32, 48]))
def test_random_layouts_conserve_flops_and_never_deadlock(layout: dict[str, object],
                                                          num_gpus: int,
                                                          global_batch: int) -> None:
    try:
        sc = scenario(num_gpus, LLAMA, global_batch=global_batch, **layout)
    except InputError:  # an impossible layout is rejected, with its reason, before lowering
        return
    workload = lower(sc)
    lowered = sum(c.multiplicity * class_flops(c, recompute=False) for c in workload.classes)
    per_token = model_flops_per_token(sc.spec.model, 2048)
    assert lowered == pytest.approx(per_token * 2048 * global_batch, rel=0.005)
    assert workload.hardware_flops_per_step >= lowered
    assert len(workload.classes) == sc.layout.pp
    for c in workload.classes:
        check_dag(c)
        assert all(d < op.id for op in c.ops for d in op.deps)
        profile = memory_profile(c)
        assert profile.peak >= profile.weights + profile.gradients + profile.optimizer
    run_to_completion(workload)


def test_uneven_pipeline_split_as_for_llama3_405b() -> None:
    from ghsim.config.layout import layers_per_virtual_stage

    # Llama 3 405B: 126 layers on 16 stages, one fewer on the first and last (Llama 3 paper).
    assert layers_per_virtual_stage(126, 16) == [7, *[8] * 14, 7]
    sc = scenario(8, {**LLAMA, "layers": 10}, pp=4, global_batch=16)
    run_to_completion(_lowers_every_model_flop_once(sc))


def test_the_first_and_last_stages_may_hold_only_the_embedding_and_the_loss() -> None:
    """Megatron's --account-for-embedding/loss-in-pipeline-split count the embedding and the
    loss as a layer each: 2 layers on pp 4 leave the first stage the embedding alone and the
    last the output layer and loss (as Qwen3-235B's 94 layers run on pp 32 x vp 3); every
    FLOP is still lowered once and the step runs."""
    from ghsim.config.layout import layers_per_virtual_stage

    assert layers_per_virtual_stage(94, 96) == [0, *[1] * 94, 0]
    sc = scenario(4, {**LLAMA, "layers": 2}, pp=4, global_batch=8)
    run_to_completion(_lowers_every_model_flop_once(sc))
    with pytest.raises(InputError, match=r"at most the model's 2 layers \+ 2"):
        scenario(8, {**LLAMA, "layers": 2}, pp=8, global_batch=16)


def test_the_first_and_last_stages_layers_can_be_given_as_megatron_does() -> None:
    """--decoder-first/last-pipeline-num-layers: 12 layers on pp 4 with 2 on the first and 2
    on the last stage leave 4 for each middle stage; with vp 2 each stage's layers split over
    its two chunks (virtual stage v = chunk x pp + stage); every FLOP is still lowered once.
    Splits Megatron asserts against are refused: 2 and 1 leave 9 layers for 2 stages, 3 on a
    stage of 2 chunks, a first stage without pipeline parallelism, more layers than the
    model's."""
    from ghsim.workload.lower import _chunks

    sc = scenario(8, {**LLAMA, "layers": 12}, pp=4, global_batch=16,
                  first_stage_layers=2, last_stage_layers=2)
    assert [sum(c.layers for c in _chunks(sc, stage)) for stage in range(4)] == [2, 4, 4, 2]
    run_to_completion(_lowers_every_model_flop_once(sc))
    sc = scenario(8, {**LLAMA, "layers": 12}, pp=2, vp=2, global_batch=16,
                  last_stage_layers=4)
    assert [[c.layers for c in _chunks(sc, stage)] for stage in range(2)] == [[4, 4], [2, 2]]
    run_to_completion(_lowers_every_model_flop_once(sc))
    for par, message in (
            ({"pp": 4, "first_stage_layers": 2, "last_stage_layers": 1},
             r"other 12 - 3 layers to split evenly over the other 2 pipeline stages"),
            ({"pp": 2, "vp": 2, "last_stage_layers": 3}, r"divide by vp 2"),
            ({"pp": 1, "first_stage_layers": 3}, r"only with pp > 1"),
            ({"pp": 2, "first_stage_layers": 13}, r"split evenly")):
        with pytest.raises(InputError, match=message):
            scenario(8, {**LLAMA, "layers": 12}, global_batch=16, **par)


def test_fewer_layers_on_a_last_stage_holding_a_large_head_balance_the_pipeline() -> None:
    """An untied 256k-vocabulary head on the last of 2 stages: moving layers off it to the
    first lowers the last stage's load and the step, until the first stage is the busier."""
    def run(last: int) -> tuple[float, list[float]]:
        result = simulate(load_scenario("llama3-8b-gh200", [
            "system=dgx-h100", "num_gpus=8", "model=llama2-13b", "model.layers=8",
            "model.vocab=256000", "model.tied_embeddings=false", "training.seq_len=2048",
            "training.global_batch=32", "training.precision=bf16", "parallelism.tp=4",
            "parallelism.pp=2", f"parallelism.last_stage_layers={last}"]))
        return result.step_time_s, [row["busy_share"] for row in result.stages]

    even, (first, last) = run(4)
    lighter, (first_2, last_2) = run(2)
    assert last > first and lighter < even and last_2 < last and first_2 > first


def _grad_buckets(sc: Scenario) -> list[list[int]]:
    """Per stage, per model chunk: the gradient buckets it reduces."""
    return [[sum(1 for op in c.ops if op.name.startswith("dp.grad_") and op.name.split(".")[2]
                 == f"c{chunk}") for chunk in range(sc.layout.vp or 1)]
            for c in lower(sc).classes]


def test_megatron_buckets_only_the_first_stages_first_model_chunk() -> None:
    """24 layers of 11 M parameters on 2 stages of 2 model chunks (6 layers each): 40 M
    buckets hold 4 layers, so stage 0's first chunk reduces in 2 buckets and every other chunk
    in one, after its last backward pass, as Megatron-Core does (no bucket_size where pp_rank >
    0, disable_bucketing for model chunks after the first). --ddp-bucket-size moves the first
    chunk's buckets; without overlap_grad_reduce every chunk is one bucket."""
    layout = {"tp": 1, "pp": 2, "vp": 2, "dp": 4, "zero_stage": 1}
    model = {**LLAMA, "layers": 24}
    assert _grad_buckets(scenario(8, model, **layout)) == [[2, 1], [1, 1]]
    assert _grad_buckets(scenario(8, model, ddp_bucket_size=10_000_000, **layout)) == [
        [6, 1], [1, 1]]
    assert _grad_buckets(scenario(8, model, ddp_bucket_size=10**10, **layout)) == [
        [1, 1], [1, 1]]
    assert _grad_buckets(scenario(8, model, overlap_grad_reduce=False, **layout)) == [
        [1, 1], [1, 1]]


@pytest.mark.parametrize("layers", [2, 8, 24])
def test_zero3_holds_a_bucket_of_gathered_weights_not_the_chunk(layers: int) -> None:
    """FSDP gathers one block at a time: a pass holds its largest gradient bucket's weights
    (40 M-parameter buckets round up to 4 layers of this model; the first in backward order
    carries the output layer, the last the embedding), the whole chunk when it is one bucket,
    and the next pass's prefetch as much again, however deep the chunk."""
    sc = scenario(8, {**LLAMA, "layers": layers}, zero_stage=3, global_batch=16)
    count = parameter_count(sc.spec.model)
    per_bucket = int(40e6 // count.per_layer) + 1
    assert per_bucket == 4
    if layers <= per_bucket:
        largest = float(count.total)
    else:
        tail = layers % per_bucket or per_bucket
        largest = max(per_bucket * count.per_layer + count.output + count.final_norm,
                      tail * count.per_layer + count.embedding)
    c = lower(sc).classes[0]
    gathered = sorted((e for e in c.memory if e.buffer.startswith("gathered.")),
                      key=lambda e: e.op)
    assert max(e.bytes for e in gathered) == pytest.approx(2 * largest)  # BF16 weights
    live = most = 0.0
    for e in gathered:
        live += e.bytes
        most = max(most, live)
    assert most <= 2 * 2 * largest * (1 + 1e-9)


def test_zero3_frees_each_pass_gathered_weights_and_gathers_one_pass_ahead() -> None:
    """Under ZeRO-3 every forward and backward pass gathers its chunk's weights and frees them
    when it ends, so the HBM peak does not grow with the number of micro-batches, and the
    gather for a pass waits for the pass two before it (FSDP's one-ahead prefetch): at most
    two passes' gathered weights are live."""
    peaks = []
    for global_batch in (8, 32):
        sc = scenario(8, LLAMA, zero_stage=3, global_batch=global_batch)
        c = lower(sc).classes[0]
        gathered = [e for e in c.memory if e.buffer.startswith("gathered.")]
        assert sum(e.bytes for e in gathered) == pytest.approx(0.0, abs=1.0)
        chunk = max(e.bytes for e in gathered)
        peaks.append(memory_profile(c).peak)
        live = most = 0.0
        for e in sorted(gathered, key=lambda e: e.op):
            live += e.bytes
            most = max(most, live)
        assert most <= 2 * chunk * (1 + 1e-9)
        ops = {op.id: op for op in c.ops}
        passes = [op.id for op in c.ops if op.kind == "compute" and op.name[0] in "FB"]
        gathers = [op for op in c.ops if "param_all_gather" in op.name]
        for n, gather in enumerate(gathers[2:], start=2):
            assert passes[n - 2] in gather.deps, ops[gather.id].name
    assert peaks[1] == pytest.approx(peaks[0], rel=1e-9)


def _op_named(ops: list[Op], start: str) -> list[Op]:
    return [op for op in ops if op.name.startswith(start)]


def test_the_weights_gathered_after_the_step_are_the_updated_ones() -> None:
    """Without overlap_param_gather, Megatron gathers the distributed optimizer's updated
    shards once step() is done: the after-step all-gathers wait for every optimizer op, the
    host Adam of offloaded experts included (they had waited only for the last gradient
    reduction, and so ran beside the optimizer)."""
    scenario_ = load_scenario("qwen3-235b-gh200-nvl32", [
        "model.layers=4", "model.moe.dense_layers=0", "training.global_batch=64",
        "parallelism.overlap_param_gather=false"])
    (stage,) = lower(scenario_).classes
    optimizers = {op.id for op in stage.ops if op.attrs.get("phase") == "optimizer"
                  or op.name == "offload.experts_adam"}
    assert len(optimizers) == 2
    gathers = [op for op in stage.ops if "param_all_gather" in op.name]
    assert [op.name.split(".")[0] for op in gathers] == ["dp", "edp"]
    for gather in gathers:
        assert optimizers <= set(gather.deps) | _ancestors(stage.ops, gather)
    # and overlapping the gathers with the next forward never loses to gathering after it
    overlapped = simulate(load_scenario("qwen3-235b-gh200-nvl32", [
        "model.layers=4", "model.moe.dense_layers=0", "training.global_batch=64"]))
    assert overlapped.step_time_s < simulate(scenario_).step_time_s


def _ancestors(ops: list[Op], op: Op) -> set[int]:
    seen: set[int] = set()
    todo = deque(op.deps)
    while todo:
        dep = todo.popleft()
        if dep not in seen:
            seen.add(dep)
            todo.extend(ops[dep].deps)
    return seen


def test_layer_by_layer_offload_waits_for_each_bucket_of_prefetched_weights() -> None:
    """With overlap_param_gather and a policy that runs the forward layer by layer (experts
    streamed from host memory), each bucket's first layer waits for that bucket's all-gathers
    only, so the later buckets' gathers run beside the first layers (every layer had waited
    for all of them)."""
    (stage,) = lower(load_scenario("qwen3-235b-gh200-nvl32", [
        "model.layers=4", "model.moe.dense_layers=0", "training.global_batch=64"])).classes
    prefetch = {op.id: op.name for op in stage.ops if "prefetch" in op.name}
    first_forward = [op for op in stage.ops if op.name.startswith("F.mb0.c0.b")]
    assert len(first_forward) == 4
    waited = [sorted(prefetch[d].split(".")[0] + "." + prefetch[d].split(".")[-1]
                     for d in op.deps if d in prefetch) for op in first_forward]
    # a bucket's expert gather follows its dense one on the data-parallel stream
    assert waited == [["edp.b0"], ["edp.b1"], ["edp.b2"], ["edp.b3"]]
