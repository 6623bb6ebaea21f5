"""Unified memory as GH200 behaves (issue 11, item 8): fault-driven migration of managed memory
at the measured ~9 GB/s (FACTS.md T3#9-10), ATS in-place access at the measured C2C rates,
access-counter migration past its threshold (on by default, off on Alps: T1#35, T3#12), and
system-allocated memory in HBM at its measured fraction of cudaMalloc bandwidth (T3#7).

The page-table tests are exact by hand; the scenario tests run ``simulate`` on a two-layer
Llama 3 8B (Llama 3 8B's layer: 218,112,000 parameters, so 436 MB of BF16 weights = 209 pages of
2 MiB) and check the ops it emitted and how long each took.
"""

from __future__ import annotations

import math

import pytest

from ghsim.config import load_hardware, load_scenario
from ghsim.engine.simulate import simulate
from ghsim.engine.simulator import ClassTimeline
from ghsim.errors import InputError
from ghsim.workload.ir import Op
from ghsim.workload.modelsize import parameter_count
from ghsim.workload.pages import PageTable

MIB2 = 2 * 2**20
UM = "system.node.gpu.gpu.unified_memory"
TINY = ["system=gh200-single", "model.layers=2", "training.seq_len=512",
        "training.global_batch=2", "training.micro_batch=1", "parallelism.recompute=none",
        "offload.strategy=unified_memory"]
SYSTEM = [*TINY, f"{UM}.allocator=system"]
FAULT_RATE = 9e9  # FACTS.md T3#10, the shipped migration_bandwidth_gb_s


def _in_place_read() -> float:
    """The measured in-place read rate (FACTS.md T2#3, 420.2 GB/s), as the part file gives it."""
    gpu = load_hardware("gh200-96gb").gpu
    assert gpu is not None
    rate = gpu.host_link.rate_bytes_per_s("gpu_read_host")
    assert rate is not None and rate == pytest.approx(420.2e9, rel=1e-4)
    return rate


def _run(*overrides: str) -> tuple[ClassTimeline, dict[int, tuple[float, float]]]:
    result = simulate(load_scenario("llama3-8b-gh200", list(overrides)))
    assert result.timeline is not None
    (timeline,) = result.timeline.classes
    return timeline, {s.op: (s.start, s.end) for s in timeline.spans}


def _ops(timeline: ClassTimeline, kind: str, prefix: str = "") -> list[Op]:
    return [op for op in timeline.rank_class.ops if op.kind == kind
            and op.name.startswith(prefix)]


def _weight_pages() -> int:
    spec = load_scenario("llama3-8b-gh200", TINY).spec
    return math.ceil(2 * parameter_count(spec.model).per_layer / MIB2)


# -- the page table ----------------------------------------------------------------------------

def test_system_memory_is_read_in_place_until_its_counters_pass_the_threshold() -> None:
    table = PageTable(MIB2, capacity=10)
    table.add("w", 4 * MIB2)  # first touched by the CPU: host memory
    for _ in range(2):        # 100, then 200 accesses per page: below 256
        access = table.access(["w"], [], 100, 256)
        assert (access.host_read, access.hbm_read, access.migrated) == (4, 0, {})
    third = table.access(["w"], [], 100, 256)   # 300: this pass still reads in place...
    assert (third.host_read, third.migrated) == (4, {"w": 4})
    fourth = table.access(["w"], [], 100, 256)  # ...the next one reads HBM
    assert (fourth.host_read, fourth.hbm_read, fourth.migrated) == (0, 4, {})
    assert int(table.counts.sum()) == 0  # counts restart when a region migrates


def test_access_counters_migrate_by_default_only_over_a_coherent_link() -> None:
    """The driver turns access-counter migration on for ATS systems (FACTS.md T1#35): left
    unset, a GH200's coherent NVLink-C2C migrates hot pages, and the same link made
    non-coherent (as a PCIe link is) does not."""
    def migrates(*overrides: str) -> bool:
        unset = [*TINY, f"{UM}.access_counter_migration=null", *overrides]
        gpu = load_scenario("llama3-8b-gh200", unset).spec.system.node.gpu.gpu
        assert gpu is not None and gpu.unified_memory is not None
        assert gpu.unified_memory.access_counter_migration is None
        return gpu.migration_by_access_counters()

    assert migrates()
    assert not migrates("system.node.gpu.gpu.host_link.coherent=false")


def test_without_access_counters_nothing_ever_moves() -> None:
    table = PageTable(MIB2, capacity=10)
    table.add("w", 3 * MIB2)
    for _ in range(1000):
        access = table.access(["w"], ["w"], 1e6, None)
    assert (access.host_read, access.host_written, access.migrated) == (3, 3, {})
    assert table.resident_pages == 0


def test_counter_migration_never_evicts_and_waits_for_room() -> None:
    table = PageTable(MIB2, capacity=4)
    table.add_on_gpu("g", 3 * MIB2, evict=False)   # GPU first touch: HBM
    table.add("w", 2 * MIB2)
    first = table.access(["w"], [], 300, 256)
    assert first.migrated == {"w": 1} and table.held == {"g": 3, "w": 1}  # one page of room
    table.release("g")
    second = table.access(["w"], [], 300, 256)
    assert (second.host_read, second.hbm_read, second.migrated) == (1, 1, {"w": 1})


def test_gpu_first_touch_places_in_hbm_spills_to_host_and_reuses_the_pool() -> None:
    table = PageTable(MIB2, capacity=4)
    assert table.add_on_gpu("a", 3 * MIB2, evict=False).faulted == 0
    table.add_on_gpu("b", 3 * MIB2, evict=False)   # one page of room: two go to host memory
    assert table.held == {"a": 3, "b": 1}
    assert table.release("a", keep=True) == 3      # kept by the caching allocator
    assert (table.resident_pages, table.pool, table.room) == (4, 3, 0)
    table.add("w", MIB2)
    assert table.access(["w"], [], 1000, 1).migrated == {}  # the pool is not free for it
    table.add_on_gpu("c", 2 * MIB2, evict=False)   # takes two of the pool's three pages
    assert (table.held["c"], table.pool, table.resident_pages) == (2, 1, 4)


def test_managed_gpu_first_touch_evicts_lru_and_faults_nothing_in() -> None:
    table = PageTable(MIB2, capacity=4)
    table.add("w", 3 * MIB2)
    table.touch(["w"])
    touch = table.add_on_gpu("a", 2 * MIB2)
    assert (touch.faulted, touch.evicted) == (0, 1)
    assert table.held == {"w": 2, "a": 2}


# -- managed memory: fault-driven migration at the measured rate ------------------------------

def test_managed_migration_takes_its_bytes_over_9_gb_s() -> None:
    """HBM of 2 GiB holds no layer's states, so the step thrashes; each migration, eviction
    then fault-in, takes exactly its bytes at 9 GB/s (fault service included), and the first
    one faults exactly layer 0's weights."""
    timeline, spans = _run(*TINY, "system.node.gpu.gpu.memory.capacity_gib=2")
    migrations = _ops(timeline, "migrate")
    assert len(migrations) > 4
    for op in migrations:
        start, end = spans[op.id]
        moved = op.attrs["in_bytes"] + op.attrs["out_bytes"]
        assert end - start == pytest.approx(moved / FAULT_RATE, rel=1e-9), op.name
    first = migrations[0]
    assert first.name == "migrate.F.mb0.l0"
    assert (first.attrs["in_bytes"], first.attrs["out_bytes"]) == (_weight_pages() * MIB2, 0)
    start, end = spans[first.id]
    assert end - start == pytest.approx(209 * MIB2 / 9e9, rel=1e-9)  # 0.0487 s for 418 MiB


def test_a_fault_batch_cost_adds_per_batch_on_top_of_the_rate() -> None:
    timeline, spans = _run(*TINY, "system.node.gpu.gpu.memory.capacity_gib=2",
                           f"{UM}.fault_batch_us=1000", f"{UM}.fault_batch_pages=64")
    first = _ops(timeline, "migrate")[0]
    start, end = spans[first.id]
    batches = math.ceil(_weight_pages() / 64)  # 209 pages: 4 batches
    assert end - start == pytest.approx(batches * 1e-3 + 209 * MIB2 / 9e9, rel=1e-9)


def test_managed_memory_that_fits_never_migrates() -> None:
    """Weights, gradients and optimizer states of two layers fit in 96 GB: the previous
    step's optimizer left them in HBM, and activations are created there (a caching allocator
    hands out populated memory), so nothing faults."""
    timeline, _ = _run(*TINY)
    assert _ops(timeline, "migrate") == []


def test_a_slower_fault_driven_rate_never_speeds_up_a_thrashing_step() -> None:
    small = [*TINY, "system.node.gpu.gpu.memory.capacity_gib=2"]
    steps = [simulate(load_scenario("llama3-8b-gh200", [
        *small, f"{UM}.migration_bandwidth_gb_s={rate}"])).step_time_s
        for rate in (4.5, 9, 18, 375)]
    assert steps == sorted(steps, reverse=True) and steps[0] > 1.5 * steps[-1]


# -- system memory (ATS): in place, access counters, HBM efficiency ----------------------------

def test_without_access_counters_every_pass_reads_the_weights_in_place() -> None:
    """Alps: weights stay in LPDDR5X, so each of the 2 micro-batches x 2 layers x (forward,
    backward) passes reads its layer's 209 pages over C2C, at the measured 420.2 GB/s."""
    timeline, spans = _run(*SYSTEM, f"{UM}.access_counter_migration=false")
    reads = [op for op in _ops(timeline, "copy", "in_place.") if "optimizer" not in op.name]
    assert len(reads) == 2 * 2 * 2
    rate = _in_place_read()
    for op in reads:
        assert op.attrs["access"] == "gpu_read_host" and op.bytes == _weight_pages() * MIB2
        start, end = spans[op.id]
        assert end - start == pytest.approx(209 * MIB2 / rate, rel=1e-9)
    assert _ops(timeline, "migrate") == []


def test_in_place_traffic_runs_beside_its_pass_and_the_next_pass_waits_for_both() -> None:
    """A kernel reading host memory in place overlaps its own work: the pass lasts as long as
    the longer of the two (here the C2C read: 1.04 ms against 0.3-0.5 ms of kernels)."""
    timeline, spans = _run(*SYSTEM, f"{UM}.access_counter_migration=false")
    computes = sorted((spans[op.id], op) for op in _ops(timeline, "compute"))
    for op in _ops(timeline, "copy", "in_place."):
        start, end = spans[op.id]
        same = [c for (s, _), c in computes if s == start]
        assert same, f"{op.name} starts with no pass"
        later = [s for (s, _), _ in computes if s > start]
        if later and "optimizer" not in op.name:
            assert min(later) == pytest.approx(max(end, spans[same[0].id][1]), rel=1e-12)


def test_a_migration_takes_only_its_own_share_of_the_link() -> None:
    """An access-counter migration is capped at 9 GB/s on the copy engines' path (375 of
    450 GB/s), so the in-place read beside it keeps the rest of the link: (450 - 9 / 0.8333) x
    0.9338 = 410.1 GB/s. Were it charged as 9 GB/s of *link* efficiency, it would take the
    whole link."""
    timeline, spans = _run(*SYSTEM, f"{UM}.access_counter_bytes_per_access={MIB2}",
                           f"{UM}.access_counter_threshold=6")
    gpu = load_hardware("gh200-96gb").gpu
    assert gpu is not None
    link = gpu.host_link
    copy = link.rate_bytes_per_s("h2d_copy")
    assert copy is not None and gpu.host_link.gpu_read_host_efficiency is not None
    beside = (link.bandwidth_bytes_per_s - FAULT_RATE * link.bandwidth_bytes_per_s / copy) \
        * gpu.host_link.gpu_read_host_efficiency
    reads = _ops(timeline, "copy", "in_place.F.mb0")  # each runs beside its layer's migration
    assert len(reads) == 2
    for op in reads:
        start, end = spans[op.id]
        assert end - start == pytest.approx(op.bytes / beside, rel=1e-9)
        assert beside == pytest.approx(410.1e9, rel=1e-3)


def test_with_access_counters_hot_weights_are_in_hbm_and_nothing_moves_in_the_step() -> None:
    """The shipped threshold (256 accesses of 128 B) is reached in a region's first pass, so
    in the steady state every state that fits is in HBM: no in-place traffic, no migration."""
    result = simulate(load_scenario("llama3-8b-gh200", SYSTEM))
    assert result.host["h2d_bytes"] == 0 and result.host["d2h_bytes"] == 0


@pytest.mark.parametrize(("threshold", "in_place_passes", "migrations"),
                         [(5, 0, 0), (6, 1, 2), (7, 2, 2), (100, 4, 0)])
def test_a_region_migrates_once_its_accesses_reach_the_threshold(
        threshold: int, in_place_passes: int, migrations: int) -> None:
    """One access per pass per 2 MiB region (access_counter_bytes_per_access = 2 MiB). A
    layer's weights are read by 2 forward and 2 backward passes and written by the optimizer:
    5 accesses in the replayed step, the 6th and 7th in the simulated step's first forward and
    backward pass. Optimizer states get 2 per step and never reach these thresholds."""
    timeline, spans = _run(*SYSTEM, f"{UM}.access_counter_bytes_per_access={MIB2}",
                           f"{UM}.access_counter_threshold={threshold}")
    reads = [op for op in _ops(timeline, "copy", "in_place.") if "optimizer" not in op.name]
    assert len(reads) == 2 * in_place_passes
    moved = _ops(timeline, "migrate")
    assert len(moved) == migrations
    for op in moved:  # a layer's weights, at the migration rate; its next pass waits for them
        assert op.attrs["in_bytes"] == 209 * MIB2 and op.attrs["out_bytes"] == 0
        start, end = spans[op.id]
        assert end - start == pytest.approx(209 * MIB2 / FAULT_RATE, rel=1e-9)
        assert any(op.id in later.deps for later in _ops(timeline, "compute"))


def test_system_memory_too_big_for_hbm_stays_in_host_memory_without_eviction() -> None:
    timeline, _ = _run(*SYSTEM, "system.node.gpu.gpu.memory.capacity_gib=4")
    assert all(op.attrs["out_bytes"] == 0 for op in _ops(timeline, "migrate"))
    assert _ops(timeline, "copy", "in_place.optimizer")  # what did not fit is used in place


def test_system_allocated_hbm_streams_at_its_measured_fraction_of_cudamalloc() -> None:
    """Everything fits in HBM: managed memory streams at the cudaMalloc rate, system memory at
    0.5579 of it (FACTS.md T3#7), so memory-bound kernels take 1 / 0.5579 as long (launch gaps
    made negligible to compare the kernels alone; the fused loss, whose passes all stream: the
    unfused one's broadcasts are bound by the SMs, not the memory). The unfused loss's
    broadcasts slow less: the SMs bound them, and the slower memory only in part."""
    fast = ["system.node.gpu.gpu.compute.kernel_launch_us=1e-6",
            "training.cross_entropy_fusion=true"]
    managed = simulate(load_scenario("llama3-8b-gh200", [*TINY, *fast]))
    system = simulate(load_scenario("llama3-8b-gh200", [*SYSTEM, *fast]))
    for kind in ("elementwise", "optimizer"):
        assert system.compute_breakdown_s[kind] == pytest.approx(
            managed.compute_breakdown_s[kind] / 0.5579, rel=1e-6), kind
    assert managed.compute_breakdown_s["gemm"] <= system.compute_breakdown_s["gemm"] <= \
        managed.compute_breakdown_s["gemm"] / 0.5579
    unfused = [fast[0], "training.cross_entropy_fusion=false"]
    managed = simulate(load_scenario("llama3-8b-gh200", [*TINY, *unfused]))
    system = simulate(load_scenario("llama3-8b-gh200", [*SYSTEM, *unfused]))
    slower = system.compute_breakdown_s["elementwise"] / managed.compute_breakdown_s["elementwise"]
    assert 1.0 < slower < 1 / 0.5579


def test_access_counters_help_a_step_that_rereads_its_weights() -> None:
    """32 micro-batches of 512 tokens re-read every layer's weights 64 times: from HBM (even
    at the system-memory rate) that beats 420 GB/s over C2C. (At 16 micro-batches the two
    come within 0.5 %: the in-place reads overlap a whole pass's kernels, which the GEMMs that
    read the migrated weights near the ridge point do not.)"""
    many = [*SYSTEM, "training.global_batch=32"]
    on = simulate(load_scenario("llama3-8b-gh200", many)).step_time_s
    off = simulate(load_scenario("llama3-8b-gh200", [
        *many, f"{UM}.access_counter_migration=false"])).step_time_s
    assert on < off


@pytest.mark.parametrize(("overrides", "key"), [
    (["system=dgx-h100", "num_gpus=1"], "gpu.unified_memory.allocator"),
    ([f"{UM}.system_allocated_hbm_efficiency=null"],
     "gpu.unified_memory.system_allocated_hbm_efficiency"),
])
def test_system_allocator_needs_ats_and_its_hbm_rate(overrides: list[str], key: str) -> None:
    with pytest.raises(InputError, match=key.replace(".", r"\.")):
        simulate(load_scenario("llama3-8b-gh200", [*TINY, *overrides, f"{UM}.allocator=system"]))
