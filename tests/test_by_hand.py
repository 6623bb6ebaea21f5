"""Tiny scenarios whose step time, bytes and memory are worked out here, by hand.

Nothing below calls ghsim's cost functions: the kernels of one layer, their FLOPs and bytes, the
roofline, the copy rates and the bytes per parameter are written out from first principles and
from the constants of the shipped hardware files (copied here, and checked against those files
by the first test, so a changed constant fails there with its name rather than as a wrong time).
ghsim only loads and simulates the scenario; these tests then say whether it got it right.

The tiny model is one (or a few) GPT layers with MHA and a plain (non-gated) MLP: hidden
h = 4096, 32 heads, ffn f = 16384, vocab V = 32768, no biases, RMSNorm, untied embeddings, BF16
with Adam and FP32 main gradients (Megatron-LM's default with BF16), causal flash attention, no
dropout, no recomputation, on one GPU (no communication at all).
"""

from __future__ import annotations

import json
import math

import pytest
import yaml

from ghsim.cli import main
from ghsim.config import load_scenario
from ghsim.engine.result import Result
from ghsim.engine.simulate import simulate
from tests.conftest import ROOT

# -- the constants, from configs/hardware/*.yaml ----------------------------------------------

GH200: dict[str, float] = {  # configs/hardware/gh200-96gb.yaml
    "sms": 132, "clock_ghz": 1.83, "bf16_per_clock": 4096, "gemm_eff": 0.8375,
    "attention_eff": 0.519, "attention_half_rate": 220, "causal_diagonal": 208,
    "tile": 128, "k_half": 285, "ref_m": 2048, "ref_n": 2048,
    "reference_k": 13312, "launch_us": 3, "ridge_p": 3.5,
    "hbm_gb_s": 4000, "stream_eff": 0.85, "elementwise_eff": 0.482,
    "host_link_gb_s": 450, "h2d_eff": 0.8333, "d2h_eff": 0.66, "strided_gelem": 321.6,
}
H100: dict[str, float] = {  # configs/hardware/h100-sxm5-80gb.yaml
    "sms": 132, "clock_ghz": 1.83, "bf16_per_clock": 4096, "gemm_eff": 0.803,
    "attention_eff": 0.486, "attention_half_rate": 220, "causal_diagonal": 208,
    "tile": 128, "k_half": 285, "ref_m": 2048, "ref_n": 2048,
    "reference_k": 13312, "launch_us": 3, "ridge_p": 3.5,
    "hbm_gb_s": 3350, "stream_eff": 0.8501, "elementwise_eff": 0.4818,
    "host_link_gb_s": 64, "h2d_eff": 0.8652, "d2h_eff": 0.8625, "overlap_slowdown": 0.189,
    "pointwise_eff": 0.8546, "strided_gelem": 321.6,
}
GRACE: dict[str, float] = {  # configs/hardware/grace.yaml
    "lpddr_gb_s": 512, "lpddr_stream_eff": 0.5996,
}
YAML_KEYS = {  # our name -> the key path in the hardware file
    "sms": "gpu.compute.sms", "clock_ghz": "gpu.compute.clock_ghz",
    "bf16_per_clock": "gpu.compute.flops_per_clock_per_sm.bf16",
    "gemm_eff": "gpu.compute.gemm_efficiency.bf16",
    "attention_eff": "gpu.compute.attention_efficiency.bf16",
    "attention_half_rate": "gpu.compute.attention_half_rate_tokens",
    "causal_diagonal": "gpu.compute.causal_attention_diagonal_tokens",
    "k_half": "gpu.compute.gemm_k_half.bf16", "reference_k": "gpu.compute.gemm_reference_k",
    "ref_m": "gpu.compute.gemm_reference_shape.bf16.0",
    "ref_n": "gpu.compute.gemm_reference_shape.bf16.1",
    "launch_us": "gpu.compute.kernel_launch_us", "hbm_gb_s": "gpu.memory.peak_bandwidth_gb_s",
    "ridge_p": "gpu.compute.gemm_ridge_exponent",
    "stream_eff": "gpu.memory.stream_efficiency",
    "elementwise_eff": "gpu.memory.elementwise_efficiency",
    "host_link_gb_s": "gpu.host_link.bandwidth_gb_s",
    "h2d_eff": "gpu.host_link.h2d_copy_efficiency",
    "d2h_eff": "gpu.host_link.d2h_copy_efficiency",
    "overlap_slowdown": "gpu.compute.comm_overlap_slowdown",
    "pointwise_eff": "gpu.memory.pointwise_efficiency",
    "strided_gelem": "gpu.compute.strided_elementwise_gelem_s",
    "lpddr_gb_s": "cpu.memory.peak_bandwidth_gb_s",
    "lpddr_stream_eff": "cpu.memory.stream_efficiency",
}
PARTS = {"gh200-96gb": GH200, "h100-sxm5-80gb": H100, "grace": GRACE}
SYSTEM_GPU = {"gh200-single": GH200, "dgx-h100": H100}
GB = 1e9

# -- the tiny model -----------------------------------------------------------------------------

H, HEADS, F, V = 4096, 32, 16384, 32768
PER_LAYER = 4 * H * H + 2 * H * F + 2 * H  # QKV + projection, up + down, two RMSNorm weights
EMBEDDING = OUTPUT = V * H
FINAL_NORM = H


def tiny(system: str = "gh200-single", layers: int = 1, seq_len: int = 2048,
         micro_batches: int = 1, *extra: str) -> list[str]:
    return [f"system={system}", "num_gpus=1", f"model.layers={layers}", f"model.hidden={H}",
            f"model.heads={HEADS}", f"model.kv_heads={HEADS}", f"model.ffn_hidden={F}",
            f"model.vocab={V}", "model.gated_mlp=false", "model.norm=rmsnorm",
            "model.tied_embeddings=false", "model.dropout=0", f"training.seq_len={seq_len}",
            "training.micro_batch=1", f"training.global_batch={micro_batches}",
            "training.precision=bf16", "training.attention=flash",
            "parallelism.recompute=none", "offload.strategy=none",
            "system.node.cpu.cpu.compute.kernel_issue_us=0",  # the GPU side alone, by hand
            "training.grad_nan_check=false",  # its own test below
            *extra]


def run(overrides: list[str]) -> Result:
    return simulate(load_scenario("llama3-8b-gh200", overrides))


def params(layers: int) -> int:
    return layers * PER_LAYER + EMBEDDING + OUTPUT + FINAL_NORM


# -- the roofline, by hand ----------------------------------------------------------------------

class Gpu:
    """Kernel times from a part's constants: GEMMs at peak x efficiency x wave x K efficiency
    against their HBM traffic at STREAM on the rounded roofline (c^p + m^p)^(1/p), flash
    attention at peak x its efficiency, element-wise kernels at
    the element-wise fraction of HBM; each kernel pays the launch gap."""

    def __init__(self, c: dict[str, float]) -> None:
        self.c = c
        self.peak = c["bf16_per_clock"] * c["sms"] * c["clock_ghz"] * GB
        self.stream = c["hbm_gb_s"] * GB * c["stream_eff"]
        self.elementwise = c["hbm_gb_s"] * GB * c["elementwise_eff"]
        self.launch = c["launch_us"] * 1e-6

    def wave(self, m: int, n: int) -> float:
        tile, sms = self.c["tile"], self.c["sms"]
        tiles = math.ceil(m / tile) * math.ceil(n / tile)
        waves = math.ceil(tiles / sms)
        return m * n / (waves * sms * tile * tile)

    def k_factor(self, k: float) -> float:
        return k / (k + self.c["k_half"])

    def shape_eff(self, m: int, n: int, k: int) -> float:
        """Wave and K factors relative to the measured best shape's, at most 1."""
        ref = self.wave(int(self.c["ref_m"]), int(self.c["ref_n"])) * self.k_factor(
            self.c["reference_k"])
        return min(1.0, self.wave(m, n) * self.k_factor(k) / ref)

    def gemm(self, m: int, n: int, k: int, nbytes: float | None = None) -> float:
        """(m x k) @ (k x n) in BF16: reads both operands, writes the output."""
        flops = 2 * m * n * k
        if nbytes is None:
            nbytes = 2 * (m * k + k * n + m * n)
        rate = self.peak * self.c["gemm_eff"] * self.shape_eff(m, n, k)
        p = self.c["ridge_p"]
        compute, memory = flops / rate, nbytes / self.stream
        return (compute ** p + memory ** p) ** (1 / p) + self.launch

    def wgrad(self, k: int, n: int, m: int) -> float:
        """The weight gradient (k x m) @ (m x n) of an (m x k) @ (k x n) GEMM: reads the
        input and the output gradient in BF16, reads and writes the FP32 main gradient it
        accumulates into (Megatron's gradient_accumulation_fusion)."""
        return self.gemm(k, n, m, nbytes=2 * (m * k + m * n) + 2 * 4 * k * n)

    def gemm_fwd_bwd(self, m: int, n: int, k: int) -> float:
        """Forward, data gradient (m x n) @ (n x k) and weight gradient (k x m) @ (m x n)."""
        return self.gemm(m, n, k) + self.gemm(m, k, n) + self.wgrad(k, n, m)

    def flash(self, flops: float, nbytes: float, keys: int) -> float:
        """A causal flash kernel over ``keys`` keys: of the full square's ``flops`` it runs the
        tiles on and below the diagonal, 1/2 + 208 / s of them, at peak x efficiency x
        s / (s + 220) (head dim 128, the measured one)."""
        executed = flops * min(1.0, 0.5 + self.c["causal_diagonal"] / keys)
        rate = self.peak * self.c["attention_eff"] * keys / (keys + self.c["attention_half_rate"])
        return max(executed / rate, nbytes / self.stream) + self.launch

    def memory_bound(self, nbytes: float) -> float:
        return nbytes / self.elementwise + self.launch

    def streamed(self, nbytes: float) -> float:
        """A plain streaming pass (the loss's) at the STREAM rate."""
        return nbytes / self.stream + self.launch

    def strided(self, elements: float, nbytes: float, kernels: int) -> float:
        """PyTorch's non-vectorized kernels (a broadcast over the vocabulary): their elements at
        the measured element rate, or their bytes at STREAM where that takes longer."""
        return (max(elements / (self.c["strided_gelem"] * GB), nbytes / self.stream)
                + kernels * self.launch)

    def pointwise(self, nbytes: float) -> float:
        """A vectorized point-wise pass over a contiguous tensor (an in-place scaling)."""
        return nbytes / (self.c["hbm_gb_s"] * GB * self.c["pointwise_eff"]) + self.launch


E = 2  # BF16 bytes of an activation element


def layer_gemms(t: int) -> list[tuple[int, int, int]]:
    """(m, n, k) of a layer's GEMMs: QKV (t x 3h x h), projection (t x h x h), MLP up
    (t x f x h) and down (t x h x f)."""
    return [(t, 3 * H, H), (t, H, H), (t, F, H), (t, H, F)]


def flash_work(t: int) -> tuple[float, float]:
    """Flash attention's forward FLOPs, 4 t s (heads x head_dim) for the scores and the
    weighted sum (s = t here), and its bytes: it reads Q, K and V and writes the output."""
    return 4.0 * t * t * H, (3 * t * H + t * H) * E


def layer_elementwise(t: int) -> list[int]:
    """Forward bytes (read + write) of a layer's element-wise kernels: two norms, RoPE on Q and
    K, two residual adds (two reads each), the MLP activation."""
    return [2 * t * H * E, 2 * t * H * E, 2 * t * 2 * H * E, 3 * t * H * E, 3 * t * H * E,
            2 * t * F * E]


def layer_forward_s(gpu: Gpu, t: int) -> dict[str, float]:
    flops, nbytes = flash_work(t)
    return {"gemm": sum(gpu.gemm(*g) for g in layer_gemms(t)),
            "attention": gpu.flash(flops, nbytes, t),
            "elementwise": sum(gpu.memory_bound(b) for b in layer_elementwise(t))}


def layer_backward_s(gpu: Gpu, t: int) -> dict[str, float]:
    """Each GEMM's data and weight gradients; flash attention's backward at twice its forward
    work and traffic; each element-wise kernel's backward at 1.5 times its bytes."""
    flops, nbytes = flash_work(t)
    return {"gemm": sum(gpu.gemm(m, k, n) + gpu.wgrad(k, n, m) for m, n, k in layer_gemms(t)),
            "attention": gpu.flash(2 * flops, 2 * nbytes, t),
            "elementwise": sum(gpu.memory_bound(1.5 * b) for b in layer_elementwise(t))}


def micro_batch_s(gpu: Gpu, t: int, layers: int, recompute: str = "none"
                  ) -> dict[str, float]:
    """Seconds of one micro-batch's forward and backward pass of the tiny model, by kind."""
    forward, backward = layer_forward_s(gpu, t), layer_backward_s(gpu, t)
    parts = {kind: layers * (forward[kind] + backward[kind]) for kind in forward}
    parts["gemm"] += gpu.gemm_fwd_bwd(t, V, H)  # the logits (t x V x h)
    # Embedding (lookup, then a backward reading two) and final norm (the same).
    for nbytes in (2 * t * H * E, 3 * t * H * E, 2 * t * H * E, 3 * t * H * E):
        parts["elementwise"] += gpu.memory_bound(nbytes)
    # Megatron's unfused cross-entropy, pass by pass: forward logits.float() (read BF16,
    # write FP32), max (read), exp in place (read and write), sum (read) at the streaming
    # rate, and x - max and the division in place, which broadcast a value a token over the
    # vocabulary, as two non-vectorized kernels of an element a logit (FP32, 8 bytes); backward
    # the cast back to BF16 (read FP32, write BF16) streamed and the in-place scaling, again a
    # broadcast.
    logits = t * V
    parts["elementwise"] += (gpu.streamed(logits * ((E + 4) + 4 + 8 + 4))
                             + gpu.strided(2 * logits, 2 * 8 * logits, 2)
                             + gpu.streamed(logits * (4 + E)) + gpu.strided(logits, 8 * logits, 1))
    # full recomputation: the layer's whole forward again before its backward
    parts["recompute"] = layers * sum(forward.values()) if recompute == "full" else 0.0
    return parts


def adam_s(gpu: Gpu, n_params: int) -> float:
    """Adam on the GPU: reads the FP32 gradient and the FP32 master weight, momentum and
    variance, writes those three and the BF16 weight: 4 + 12 + 12 + 2 = 30 bytes a parameter."""
    return gpu.memory_bound(30 * n_params)


# -- the tests ------------------------------------------------------------------------------------

@pytest.mark.parametrize("part", sorted(PARTS))
def test_the_constants_here_are_the_shipped_ones(part: str) -> None:
    document = yaml.safe_load((ROOT / "configs" / "hardware" / f"{part}.yaml").read_text())
    for name, expected in PARTS[part].items():
        if name == "tile":
            assert document["gpu"]["compute"]["gemm_tile"] == [expected, expected]
            continue
        value = document
        for key in YAML_KEYS[name].split("."):
            value = value[int(key)] if key.isdigit() else value[key]
        assert value == expected, f"{part}: {YAML_KEYS[name]}"


def test_the_wave_and_k_efficiencies_of_three_gemms_by_hand() -> None:
    """The formulas of the class above on numbers worked out on paper (128 x 128 tiles, 132
    SMs): so that ``Gpu`` itself is checked, not only ghsim against it."""
    gpu = Gpu(GH200)
    # QKV at t = 2048: 16 x 96 = 1536 tiles in ceil(1536 / 132) = 12 waves of 132
    assert gpu.wave(2048, 3 * H) == pytest.approx(1536 / 1584)
    # 128 tokens: one row of 96 tiles in one wave of 132
    assert gpu.wave(128, 3 * H) == pytest.approx(96 / 132)
    # the reference 2048 x 2048 x 13312: 16 x 16 = 256 tiles in 2 waves of 132, K factor
    # 13312 / 13597; a GEMM is priced relative to it and never above it
    reference = (256 / 264) * (13312 / 13597)
    assert gpu.shape_eff(2048, 2048, 13312) == pytest.approx(1.0)
    assert gpu.shape_eff(2048, 3 * H, 2048) == pytest.approx(
        (1536 / 1584) * (2048 / 2333) / reference)
    assert gpu.shape_eff(11264, 19712, 65536) == 1.0  # better waves and K: capped at the best
    assert gpu.peak == pytest.approx(989.4e12, rel=1e-4)


@pytest.mark.parametrize(("system", "seq_len", "micro_batches"), [
    ("gh200-single", 2048, 4),   # compute-bound GEMMs; weight-gradient GEMMs at K = 2048 < 2816
    ("gh200-single", 128, 2),    # 128 tokens: most GEMMs are bound by HBM (weights dominate)
    ("dgx-h100", 2048, 2),
])
def test_one_layer_step_on_one_gpu_by_hand(system: str, seq_len: int, micro_batches: int) -> None:
    """No communication: the step is the kernels of every micro-batch back to back, then Adam."""
    gpu = Gpu(SYSTEM_GPU[system])
    result = run(tiny(system, 1, seq_len, micro_batches))
    mb = micro_batch_s(gpu, seq_len, 1)
    compute = result.compute_breakdown_s
    for kind in ("gemm", "attention", "elementwise"):
        assert compute[kind] == pytest.approx(micro_batches * mb[kind], rel=1e-6), kind
    assert compute["optimizer"] == pytest.approx(adam_s(gpu, params(1)), rel=1e-6)
    expected = micro_batches * sum(mb.values()) + adam_s(gpu, params(1))
    assert result.step_time_s == pytest.approx(expected, rel=1e-6)
    assert result.breakdown_s["compute"] == pytest.approx(expected, rel=1e-6)


def test_a_memory_bound_gemm_is_timed_by_its_bytes() -> None:
    """At 128 tokens the QKV GEMM moves 104.9 MB (the 4096 x 12288 BF16 weight, its input and
    output): 30.8 us at 3.4 TB/s, longer than its 12.9 GFLOP at 989.4 x 0.8375 x 0.716 (wave
    and K factors) TFLOP/s, 21.7 us; the two are close, so the rounded roofline (p = 3.5) adds
    (1 + (21.7 / 30.8)^3.5)^(1 / 3.5) - 1 = 7.6 % to the memory time."""
    gpu = Gpu(GH200)
    weight_s = 2 * (128 * H + H * 3 * H + 128 * 3 * H) / (4000e9 * 0.85)
    compute_s = 2 * 128 * 3 * H * H / (gpu.peak * 0.8375 * gpu.shape_eff(128, 3 * H, H))
    assert weight_s > compute_s > 0.7 * weight_s
    rounded = weight_s * (1 + (compute_s / weight_s) ** 3.5) ** (1 / 3.5)
    assert rounded / weight_s == pytest.approx(1.076, abs=0.002)
    assert gpu.gemm(128, 3 * H, H) == pytest.approx(rounded + 3e-6)


def test_full_recompute_redoes_the_forward_pass_by_hand() -> None:
    gpu = Gpu(GH200)
    layers, m = 2, 2
    result = run(tiny("gh200-single", layers, 2048, m, "parallelism.recompute=full"))
    mb = micro_batch_s(gpu, 2048, layers, "full")
    assert result.compute_breakdown_s["recompute"] == pytest.approx(m * mb["recompute"],
                                                                    rel=1e-6)
    expected = m * sum(mb.values()) + adam_s(gpu, params(layers))
    assert result.step_time_s == pytest.approx(expected, rel=1e-6)


def test_optimizer_offload_copies_and_host_adam_by_hand() -> None:
    """ZeRO-Offload on one GH200: the FP32 gradients (4 B a parameter) go down over C2C at
    450 x 0.66 = 297 GB/s, Grace runs Adam streaming 30 B a parameter at its STREAM rate
    (512 x 0.5996 = 307 GB/s), and the BF16 weights (2 B a parameter) come up at
    450 x 0.8333 = 375 GB/s; all after the backward pass, one after the other."""
    n = params(1)
    assert n == 469_774_336
    result = run(tiny("gh200-single", 1, 2048, 2, "offload.strategy=optimizer"))
    assert result.timeline is not None
    (cls,) = result.timeline.classes
    spans = {cls.rank_class.ops[s.op].name: s.end - s.start for s in cls.spans}
    down = 4 * n / (GH200["host_link_gb_s"] * GB * GH200["d2h_eff"])
    host = 30 * n / (GRACE["lpddr_gb_s"] * GB * GRACE["lpddr_stream_eff"])
    up = 2 * n / (GH200["host_link_gb_s"] * GB * GH200["h2d_eff"])
    assert spans["offload.grads_d2h"] == pytest.approx(down, rel=1e-6)
    assert spans["offload.adam"] == pytest.approx(host, rel=1e-6)
    assert spans["offload.weights_h2d"] == pytest.approx(up, rel=1e-6)
    assert result.host["h2d_bytes"] == pytest.approx(2 * n)
    assert result.host["d2h_bytes"] == pytest.approx(4 * n)
    mb = micro_batch_s(Gpu(GH200), 2048, 1)
    assert "optimizer.adam" not in spans  # nothing of the optimizer is left on the GPU
    assert result.step_time_s == pytest.approx(2 * sum(mb.values()) + down + host + up,
                                               rel=1e-6)
    assert result.breakdown_s["offload"] == pytest.approx(down + up, rel=1e-6)
    assert result.breakdown_s["cpu"] == pytest.approx(host, rel=1e-6)


@pytest.mark.parametrize(("operation", "link", "kind"), [
    ("h2d_copy", "n0.cpu0>n0.gpu0", "c2c_h2d"),
    ("d2h_copy", "n0.gpu0>n0.cpu0", "c2c_d2h"),
])
def test_a_copy_crosses_the_host_link_in_its_own_direction(operation: str, link: str,
                                                           kind: str) -> None:
    """16 GiB copied one way crosses only that direction of NVLink-C2C, at its measured rate."""
    scenario = load_scenario("configs/scenarios/microbench/gh200-h2d-copy.yaml",
                             [f"microbenchmark.operation={operation}"])
    result = simulate(scenario)
    assert result.timeline is not None and result.timeline.network is not None
    usage = result.timeline.network.usage
    carried = {name: u.bytes for name, u in usage.items() if u.bytes > 0}
    assert carried[link] == pytest.approx(16 * 2**30)
    assert usage[link].kind == kind
    other = ">".join(reversed(link.split(">")))
    assert carried.get(other, 0.0) == 0.0
    eff = GH200["h2d_eff"] if operation == "h2d_copy" else GH200["d2h_eff"]
    assert result.step_time_s == pytest.approx(16 * 2**30 / (450 * GB * eff), rel=1e-6)


@pytest.mark.parametrize(("operation", "link", "measured_gb_s"), [
    # FACTS.md T2#3 "Hopper -> local LPDDR5X (over C2C) read / write | 420.2 / 380.1"
    ("gpu_read_host", "n0.cpu0>n0.gpu0", 420.2),
    ("gpu_write_host", "n0.gpu0>n0.cpu0", 380.1),
    # FACTS.md T2#5 "Grace -> local HBM (over C2C) read / write | 238.4 / 287.2"
    ("cpu_read_device", "n0.gpu0>n0.cpu0", 238.4),
    ("cpu_write_device", "n0.cpu0>n0.gpu0", 287.2),
])
def test_in_place_access_crosses_the_host_link_the_data_way(operation: str, link: str,
                                                            measured_gb_s: float) -> None:
    """16 GiB read or written in place: the bytes cross the one direction of NVLink-C2C the
    data flows (a GPU reading host memory and a CPU writing GPU memory both move data toward
    the GPU), and LPDDR5X once, at the measured rate."""
    scenario = load_scenario("configs/scenarios/microbench/gh200-h2d-copy.yaml",
                             [f"microbenchmark.operation={operation}"])
    result = simulate(scenario)
    assert result.timeline is not None and result.timeline.network is not None
    carried = {name: u.bytes for name, u in result.timeline.network.usage.items() if u.bytes}
    assert carried == {link: 16 * 2**30, "n0.lpddr0": 16 * 2**30}
    assert result.workload["bandwidth_gb_s"] == pytest.approx(measured_gb_s, rel=1e-3)


def test_a_few_grace_cores_stream_a_triad_at_their_single_thread_rates() -> None:
    """STREAM's triad reads two arrays for each it writes. Four Grace cores, each reading 20.6
    and writing 43.0 GB/s (docs/hardware-facts.md T4#29), move 4 / (2/3 / 20.6 + 1/3 / 43.0)
    = 99.7 GB/s, a quarter of what LPDDR5X gives all 72."""
    scenario = load_scenario("configs/scenarios/microbench/gh200-stream-lpddr.yaml",
                             ["system.node.cpu.cpu.compute.cores=4"])
    expected = 4 / ((2 / 3) / 20.6 + (1 / 3) / 43.0)
    assert simulate(scenario).workload["bandwidth_gb_s"] == pytest.approx(expected, rel=1e-9)


def _layer_activations(t: int, recompute: str = "none") -> int:
    """Bytes one layer keeps for its backward pass (Korthikanti et al. 2022, flash attention,
    no dropout): the norm input, the QKV input, Q, K and V, the attention output and one FP32
    log-sum-exp per head and query; the MLP's norm input, up input, activation input and down
    input. With full recomputation only the layer's input."""
    e = E
    if recompute == "full":
        return t * H * e
    attention = t * H * e + t * H * e + 3 * t * H * e + t * H * e + HEADS * t * 4
    mlp = t * H * e + t * H * e + t * F * e + t * F * e
    return attention + mlp


def _head_activations(t: int) -> int:
    return t * H * 2 + t * V * 4  # final norm input, FP32 logits


@pytest.mark.parametrize(("layers", "recompute"), [(1, "none"), (3, "none"), (3, "full")])
def test_hbm_peak_of_a_tiny_model_by_hand(layers: int, recompute: str) -> None:
    """Weights 2 + FP32 gradients 4 + Adam 12 (FP32 master, momentum, variance) = 18 B a
    parameter, plus one micro-batch's activations (no pipeline: each micro-batch's backward
    frees them before the next forward)."""
    result = run(tiny("gh200-single", layers, 2048, 2, f"parallelism.recompute={recompute}"))
    states = 18 * params(layers)
    activations = layers * _layer_activations(2048, recompute) + _head_activations(2048)
    assert result.memory["hbm"]["peak_bytes"] == pytest.approx(states + activations, rel=1e-9)
    assert result.memory["fits"]


def test_optimizer_offload_moves_adam_states_out_of_hbm_by_hand() -> None:
    """ZeRO-Offload (Ren et al. 2021): HBM holds the BF16 weights (2 B) and one bucket of BF16
    gradients in flight, here the whole one-layer model (2 B); the FP32 gradients (4 B) and
    Adam's 12 B live in LPDDR5X."""
    result = run(tiny("gh200-single", 1, 2048, 1, "offload.strategy=optimizer"))
    n = params(1)
    hand = 4 * n + _layer_activations(2048) + _head_activations(2048)
    assert result.memory["hbm"]["peak_bytes"] == pytest.approx(hand, rel=1e-9)
    assert result.memory["lpddr"]["peak_bytes"] == pytest.approx(16 * n, rel=1e-9)


PIPELINE = ["system=gh200-nvl2", "num_gpus=2", "parallelism.pp=2", "model.vocab=128",
            # communication made negligible: NVLink 1000x faster, no latency
            "system.node.gpu.gpu.nvlink.link_bandwidth_gb_s=25000",
            "system.node.gpu.gpu.nvlink.collective_latency_us=0.001"]


def _pipeline(layers: int, m: int, *extra: str) -> Result:
    return run([*tiny("gh200-nvl2", layers, 2048, m), *PIPELINE,
                "system.node.cpu.cpu.compute.kernel_issue_us=0", *extra])


def test_first_stage_of_two_holds_two_micro_batches_by_hand() -> None:
    """1F1B on 2 stages: stage 0 runs one warm-up forward, so it holds the activations of two
    micro-batches at its peak; stage 1 alternates and holds one (and the head's)."""
    layers, m, t, vocab = 4, 4, 2048, 128
    result = _pipeline(layers, m)
    stage0 = 18 * (2 * PER_LAYER + vocab * H) + 2 * 2 * _layer_activations(t)
    stage1 = 18 * (2 * PER_LAYER + vocab * H + FINAL_NORM) + 2 * _layer_activations(t) \
        + t * H * 2 + t * vocab * 4
    assert stage0 > stage1
    assert result.memory["hbm"]["peak_bytes"] == pytest.approx(stage0, rel=1e-9)


def _stage_times(result: Result, m: int) -> list[tuple[float, float]]:
    """Forward and backward seconds of one micro-batch on each stage, read off the timeline."""
    assert result.timeline is not None
    times = []
    for cls in result.timeline.classes:
        ops = cls.rank_class.ops
        passes = {"F": 0.0, "B": 0.0}
        for span in cls.spans:
            phase = ops[span.op].attrs.get("phase")
            if span.stream == "compute" and phase in passes:
                passes[phase] += span.end - span.start
        times.append((passes["F"] / m, passes["B"] / m))
    return times


@pytest.mark.parametrize("m", [2, 4])
def test_two_stage_1f1b_bubble_is_p_minus_1_over_m_plus_p_minus_1(m: int) -> None:
    """With negligible communication and balanced stages the 1F1B pipeline of p stages takes
    (m + p - 1) (f + b), of which (p - 1) (f + b) is the bubble (Narayanan et al. 2021)."""
    p = 2
    result = _pipeline(16, m)
    pipeline = result.step_time_s - result.compute_breakdown_s["optimizer"]
    bubble = result.breakdown_s["pipeline_bubble"]
    assert bubble / pipeline == pytest.approx((p - 1) / (m + p - 1), rel=0.01)
    assert result.breakdown_s["pp"] < 1e-4 * result.step_time_s


@pytest.mark.parametrize("m", [1, 3, 8])
def test_two_stage_1f1b_step_from_the_stage_times(m: int) -> None:
    """Exactly, for unequal stages (stage 1 carries the head, so T1 = f1 + b1 > T0): stage 1
    never starves after the first forward of stage 0, so the step is f0 + m T1 + b0, and the
    first stage, which finishes last, idles T0 + m (T1 - T0) of it."""
    result = _pipeline(4, m)
    (f0, b0), (f1, b1) = _stage_times(result, m)
    assert f1 + b1 > f0 + b0
    optimizer = result.compute_breakdown_s["optimizer"]
    assert result.step_time_s - optimizer == pytest.approx(f0 + m * (f1 + b1) + b0, rel=1e-4)
    assert result.breakdown_s["pipeline_bubble"] == pytest.approx(
        f0 + b0 + m * (f1 + b1 - f0 - b0), rel=1e-3)


def _scaled(gpu: Gpu, params: float) -> float:
    """Megatron's scaling of a bucket's FP32 gradients by 1 / (data-parallel size) before a
    sum all-reduce: one in-place point-wise pass (read and write)."""
    return gpu.pointwise(2 * 4 * params)


def test_each_bucket_is_checked_and_scaled_before_its_reduction_by_hand() -> None:
    """Two data-parallel H100s, three layers, one bucket a layer (the head's gradients with the
    first, the embedding's with the last): at the end of each bucket's last backward pass
    Megatron-Core scales its FP32 gradients in place by 1/2 (one point-wise read and write)
    and, checking for NaN, first takes their norm (one streaming read) and waits on the host
    for its test (free here: the host issues in no time). With one GPU nothing is reduced or
    scaled and the norm is left. Kernels beside communication run at full speed here."""
    gpu = Gpu(H100)
    two = [*tiny("dgx-h100", 3, 2048, 2), "num_gpus=2",
           "system.node.gpu.gpu.compute.speed_spread=0",
           "system.node.gpu.gpu.compute.comm_overlap_slowdown=0"]
    layer = sum(layer_backward_s(gpu, 2048).values())

    def spans(result: Result) -> dict[str, float]:
        assert result.timeline is not None
        (cls,) = result.timeline.classes
        return {cls.rank_class.ops[s.op].name: s.end - s.start for s in cls.spans}

    plain = spans(run(two))
    assert plain["B.mb0.c0.b1"] == pytest.approx(layer + _scaled(gpu, PER_LAYER), rel=1e-6)
    checked = spans(run([*two, "training.grad_nan_check=true"]))
    bucket = {"b0": PER_LAYER + OUTPUT + FINAL_NORM, "b1": PER_LAYER, "b2": PER_LAYER + EMBEDDING}
    for index, count in bucket.items():
        name = f"B.mb0.c0.{index}"
        assert checked[name] - plain[name] == pytest.approx(gpu.streamed(4 * count),
                                                            rel=1e-6), name
    one = run([*tiny("dgx-h100", 1, 2048, 1), "training.grad_nan_check=true"])
    unchecked = run(tiny("dgx-h100", 1, 2048, 1))
    assert one.step_time_s - unchecked.step_time_s == pytest.approx(
        gpu.streamed(4 * params(1)), rel=1e-6)


def test_kernels_beside_a_gradient_all_reduce_slow_down_by_hand() -> None:
    """Two data-parallel H100s, three layers: the last micro-batch's backward runs in three
    gradient buckets of one layer each (a layer's 201 M parameters exceed Megatron's 40 M bucket)
    and each bucket's all-reduce starts when its backward is done. On an NVLink slowed to
    18 GB/s the first all-reduce (1,342 MB of FP32 gradients) starts with the second bucket
    and still runs through the whole third, so every kernel of both (the second layer's
    backward, then the first layer's and the embedding's) runs 1 + 0.189 times slower
    (comm_overlap_slowdown); the first bucket (the head's and the third layer's backward),
    before any all-reduce, runs at full speed."""
    gpu = Gpu(H100)
    result = run([*tiny("dgx-h100", 3, 2048, 2), "num_gpus=2",
                  "system.node.gpu.gpu.nvlink.link_bandwidth_gb_s=1",
                  "system.node.gpu.gpu.compute.speed_spread=0"])  # two identical GPUs
    assert result.timeline is not None
    (cls,) = result.timeline.classes
    spans = {cls.rank_class.ops[s.op].name: s.end - s.start for s in cls.spans}
    backward = sum(layer_backward_s(gpu, 2048).values())
    second = backward + _scaled(gpu, PER_LAYER)
    third = backward + gpu.memory_bound(3 * 2048 * H * E) + _scaled(gpu, PER_LAYER + EMBEDDING)
    slowdown = H100["overlap_slowdown"]
    assert spans["B.mb0.c0.b1"] == pytest.approx(second * (1 + slowdown), rel=1e-6)
    assert spans["B.mb0.c0.b2"] == pytest.approx(third * (1 + slowdown), rel=1e-6)
    overlap = {cls.rank_class.ops[i].name: parts.get("overlap", 0.0)
               for i, parts in cls.compute_parts.items()}
    assert overlap["B.mb0.c0.b0"] == 0.0
    assert overlap["B.mb0.c0.b1"] + overlap["B.mb0.c0.b2"] == pytest.approx(
        (second + third) * slowdown, rel=1e-6)


def test_kernels_slow_down_only_for_the_time_a_collective_runs_beside_them() -> None:
    """The same two H100s at the full NVLink rate: each bucket's all-reduce starts with the
    next bucket's backward and ends before it does. A kernel beside them does 1 / 1.189 of
    its work per second, so each of those buckets takes its kernels' time plus 0.189 / 1.189
    of the seconds its collective covered it (the collective's span, as the network ran it),
    and no more."""
    gpu = Gpu(H100)
    result = run([*tiny("dgx-h100", 3, 2048, 2), "num_gpus=2",
                  "system.node.gpu.gpu.compute.speed_spread=0"])
    assert result.timeline is not None
    (cls,) = result.timeline.classes
    spans = {cls.rank_class.ops[s.op].name: (s.start, s.end) for s in cls.spans}
    lost = H100["overlap_slowdown"] / (1 + H100["overlap_slowdown"])
    layer = sum(layer_backward_s(gpu, 2048).values())
    kernels = {"b1": layer + _scaled(gpu, PER_LAYER),  # the second layer's; the first layer's
               "b2": layer + gpu.memory_bound(3 * 2048 * H * E)  # and the embedding's
               + _scaled(gpu, PER_LAYER + EMBEDDING)}
    for bucket, before in (("b1", "b0"), ("b2", "b1")):
        start, end = spans[f"B.mb0.c0.{bucket}"]
        begun, ended = spans[f"dp.grad_all_reduce.c0.{before}"]
        assert begun == start and ended < end, bucket
        assert end - start == pytest.approx(kernels[bucket] + (ended - begun) * lost,
                                            rel=1e-6), bucket


def test_data_parallel_ring_between_two_gh200_nodes_by_hand(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Two single-GH200 nodes, data-parallel: without GPUDirect RDMA the ring's flow leaves the
    GPU by the copy engine over C2C (D2H, 297 of 450 GB/s), is staged in Grace's LPDDR5X
    (written, then read by the NIC: two crossings of its 512 GB/s), crosses the NDR400 NICs
    and the leaf at NCCL's 47 of 50 GB/s times the staging penalty 0.829 (FACTS.md T2#18,
    T2#19), and enters the peer GPU over C2C (H2D, 375 of 450 GB/s): alone it runs at
    50 x 0.94 x 0.829 = 38.96 GB/s."""
    args = ["inspect", "llama3-8b-gh200", "--routes", "--json", "--set", "num_gpus=2",
            "--set", "training.global_batch=2"]
    assert main(args) == 0
    dp = json.loads(capsys.readouterr().out)["routes"]["classes"][0]["groups"]["dp"]
    assert dp["size"] == 2 and len(dp["shares"]) == 1
    (share,) = dp["shares"]
    assert share["fraction"] == 1.0
    links = {link["link"]: link for link in share["links"]}
    nic = 0.94 * 0.829
    expected = {  # link: (kind, copies, capacity GB/s, efficiency)
        "n0.gpu0>n0.cpu0": ("c2c_d2h", 1, 450, GH200["d2h_eff"]),
        "n0.lpddr0": ("host_memory", 2, GRACE["lpddr_gb_s"], 1.0),
        "n0.cpu0>n0.nic0": ("nic", 1, 50, nic),
        "n0.nic0>leaf0": ("nic", 1, 50, nic),
        "leaf0>n1.nic0": ("nic", 1, 50, nic),
        "n1.nic0>n1.cpu0": ("nic", 1, 50, nic),
        "n1.cpu0>n1.gpu0": ("c2c_h2d", 1, 450, GH200["h2d_eff"]),
    }
    assert set(links) == set(expected)
    for name, (kind, copies, capacity, efficiency) in expected.items():
        link = links[name]
        assert (link["kind"], link["copies"]) == (kind, copies), name
        assert link["capacity_gb_s"] == pytest.approx(capacity), name
        assert link["efficiency"] == pytest.approx(efficiency, rel=1e-6), name
    assert share["alone_gb_s"] == pytest.approx(50 * nic, rel=1e-6)
