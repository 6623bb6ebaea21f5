"""Every rate is a physical capacity times a measured efficiency: absolute rates convert once at
load, both forms of one rate are an error, and overriding a capacity moves the rates on it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from ghsim import units
from ghsim.config import load_file, load_hardware
from ghsim.config.schema import HardwareSpec, SystemSpec
from ghsim.errors import InputError
from ghsim.hardware import build_graph

# The measured absolute rates (GB/s) and dense peaks (TFLOP/s) the shipped parts gave before
# they were stored as efficiencies and FLOP per clock per SM; each must still come out within
# 0.1 % (the efficiencies are rounded to 4 significant digits).
HOPPER_TFLOPS = {"fp64": 34, "fp64_tensor": 67, "fp32": 67, "tf32": 494.7, "bf16": 989.4,
                 "fp16": 989.4, "fp8": 1978.9, "int8": 1978.9}
OLD: dict[str, dict[str, object]] = {
    "a100-sxm4-80gb": {
        "memory.stream": 1733, "memory.elementwise": 983, "memory.softmax": 630,
        "host_link.h2d_copy": 25.13, "host_link.d2h_copy": 25.13,
        "nvlink.nccl": 231.6,  # since re-measured: the 8 GiB row of T4#27, the ramp's table
        "migration": 25.13,
        "peak_tflops": {"fp64": 9.7, "fp64_tensor": 19.5, "fp32": 19.5, "tf32": 156,
                        "bf16": 312, "fp16": 312, "int8": 624},
    },
    "gh200-96gb": {
        "memory.read": 3796, "memory.write": 3712, "memory.stream": 3400,
        "memory.elementwise": 1928, "memory.softmax": 1236,
        "host_link.h2d_copy": 375, "host_link.d2h_copy": 297, "host_link.gpu_read_host": 420.2,
        "host_link.gpu_write_host": 380.1, "host_link.cpu_read_device": 238.4,
        "host_link.cpu_write_device": 287.2, "nvlink.nccl": 370, "nvlink.nvls": 480,
        "migration": 9, "peak_tflops": HOPPER_TFLOPS,
    },
    "gh200-144gb": {
        "memory.stream": 4165, "memory.elementwise": 2361, "memory.softmax": 1514,
        "host_link.h2d_copy": 375, "host_link.d2h_copy": 297, "host_link.gpu_read_host": 420.2,
        "host_link.gpu_write_host": 380.1, "host_link.cpu_read_device": 238.4,
        "host_link.cpu_write_device": 287.2, "nvlink.nccl": 370, "nvlink.nvls": 480,
        "migration": 9, "peak_tflops": HOPPER_TFLOPS,
    },
    "h100-sxm5-80gb": {
        "memory.stream": 2848, "memory.elementwise": 1614, "memory.softmax": 1035,
        "host_link.h2d_copy": 55.37, "host_link.d2h_copy": 55.2, "nvlink.nccl": 370,
        "nvlink.nvls": 476, "migration": 55.37, "peak_tflops": HOPPER_TFLOPS,
    },
    "h200-sxm-141gb": {
        # stream: the measured H200 copy (docs/hardware-facts.md T4#15), no longer GH200's 4080
        "memory.stream": 4264, "memory.elementwise": 2313, "memory.softmax": 1483,
        "host_link.h2d_copy": 55.37, "host_link.d2h_copy": 55.2, "nvlink.nccl": 370,
        "nvlink.nvls": 475, "migration": 55.37, "peak_tflops": HOPPER_TFLOPS,
    },
    "grace": {"memory.stream": 307},
    "grace-120gb": {"memory.read": 403.6, "memory.write": 463.8, "memory.stream": 400},
    "xeon-8480c": {"memory.stream": 245.8},
    "epyc-7742": {"memory.stream": 163.8},
    "cx7-ndr400": {"nic.nccl": 47},
    "cx7-ndr200": {"nic.nccl": 24},
    "cx6-hdr200": {"nic.nccl": 24},
}


def rate_of(part: HardwareSpec, key: str) -> float | None:
    """The rate ``key`` of OLD names, in B/s, through the spec's methods."""
    section, _, use = key.partition(".")
    if part.nic is not None:
        return part.nic.nccl_busbw_bytes_per_s()
    if part.cpu is not None:
        return part.cpu.memory.rate_bytes_per_s(use)  # type: ignore[arg-type]
    gpu = part.gpu
    assert gpu is not None
    rates: dict[str, Callable[[], float | None]] = {
        "memory": lambda: gpu.memory.rate_bytes_per_s(use),  # type: ignore[arg-type]
        "host_link": lambda: gpu.host_link.rate_bytes_per_s(use),  # type: ignore[arg-type]
        "nvlink.nccl": lambda: gpu.nvlink.nccl_busbw_bytes_per_s() if gpu.nvlink else None,
        "nvlink.nvls": lambda: gpu.nvlink.nvls_busbw_bytes_per_s() if gpu.nvlink else None,
        "migration": gpu.migration_bytes_per_s,
    }
    return rates[section if section in ("memory", "host_link") else key]()


@pytest.mark.parametrize("name", sorted(OLD))
def test_every_shipped_rate_equals_the_old_absolute_value(name: str) -> None:
    part = load_hardware(name)
    for key, old in OLD[name].items():
        if key == "peak_tflops":
            assert part.gpu is not None
            peaks = part.gpu.compute.peak_flops_per_s()
            assert isinstance(old, dict) and set(peaks) == set(old)
            for dtype, tflops in old.items():
                assert peaks[dtype] == pytest.approx(tflops * units.TFLOPS, rel=1e-3), dtype
            continue
        assert isinstance(old, int | float)
        assert rate_of(part, key) == pytest.approx(old * units.GB_S, rel=1e-3), key


@pytest.mark.parametrize("name", ["gh200-96gb", "gh200-144gb", "h100-sxm5-80gb",
                                  "h200-sxm-141gb"])
def test_shipped_hopper_parts_derive_989_tflops_bf16(name: str) -> None:
    gpu = load_hardware(name).gpu
    assert gpu is not None and gpu.compute.peak_tflops is None  # shipped as FLOP per clock
    assert gpu.compute.flops_per_clock_per_sm["bf16"] == 4096
    assert gpu.compute.peak_flops_per_s()["bf16"] == pytest.approx(989.4e12, rel=1e-3)


def test_shipped_parts_give_efficiencies_not_absolute_rates() -> None:
    gpu = load_hardware("gh200-96gb").gpu
    assert gpu is not None and gpu.memory.stream_bandwidth_gb_s is None
    assert gpu.memory.stream_efficiency == 0.85
    assert gpu.nvlink is not None and gpu.nvlink.nvls_allreduce_efficiency == 1.067  # SHARP


# -- inline parts --------------------------------------------------------------------------------

PART = """\
schema_version: 1
kind: hardware
name: mine
type: gpu
gpu:
  compute: {{architecture: hopper, sms: 132, clock_ghz: 1.83, {compute}}}
  memory: {{type: hbm3, capacity_gib: 96, peak_bandwidth_gb_s: 4000, {memory}}}
  nvlink: {{generation: 4, links: 18, link_bandwidth_gb_s: 25, {nvlink}}}
  host_link: {{type: c2c, bandwidth_gb_s: 450, {host_link}}}
  unified_memory: {{gpu_page_mib: 2, system_page_kib: 64, fault_batch_us: 50,
                   fault_batch_pages: 256, {unified_memory}}}
"""
NIC = """\
schema_version: 1
kind: hardware
name: mine
type: nic
nic: {{model: x, protocol: infiniband, line_rate_gbit_s: 400, {nic}}}
"""
DEFAULTS = {"compute": "peak_tflops: {fp32: 67, bf16: 989.4}", "memory": "", "nvlink": "",
            "host_link": "", "unified_memory": "migration_efficiency: 0.8"}


def part_file(tmp_path: Path, **sections: str) -> Path:
    path = tmp_path / "mine.yaml"
    if "nic" in sections:
        path.write_text(NIC.format(**sections))
    else:
        path.write_text(PART.format(**{**DEFAULTS, **sections}))
    return path


def load_part(tmp_path: Path, overrides: tuple[str, ...] = (), **sections: str) -> HardwareSpec:
    spec = load_file(part_file(tmp_path, **sections), overrides)
    assert isinstance(spec, HardwareSpec)
    return spec


def test_an_absolute_rate_converts_to_its_efficiency(tmp_path: Path) -> None:
    part = load_part(
        tmp_path, memory="stream_bandwidth_gb_s: 3400", nvlink="nccl_busbw_gb_s: 370",
        host_link="h2d_copy_gb_s: 375", unified_memory="migration_bandwidth_gb_s: 225",
        compute="peak_tflops: {fp32: 67, bf16: 989.4}",
    )
    gpu = part.gpu
    assert gpu is not None and gpu.nvlink is not None and gpu.unified_memory is not None
    assert gpu.memory.stream_efficiency == pytest.approx(3400 / 4000)
    assert gpu.memory.stream_bandwidth_gb_s == 3400  # kept as the user gave it
    assert gpu.memory.rate_bytes_per_s("stream") == pytest.approx(3400e9)
    assert gpu.memory.rate_bytes_per_s("read") is None  # neither key given
    assert gpu.nvlink.nccl_efficiency == pytest.approx(370 / 450)
    assert gpu.nvlink.nvls_busbw_bytes_per_s() is None
    assert gpu.host_link.h2d_copy_efficiency == pytest.approx(375 / 450)
    assert gpu.unified_memory.migration_efficiency == pytest.approx(0.5)
    assert gpu.migration_bytes_per_s() == pytest.approx(225e9)
    per_clock = gpu.compute.flops_per_clock_per_sm
    assert per_clock["bf16"] == pytest.approx(989.4e12 / (132 * 1.83e9))
    assert gpu.compute.peak_flops_per_s()["bf16"] == pytest.approx(989.4e12)
    nic = load_part(tmp_path, nic="nccl_busbw_gb_s: 47").nic
    assert nic is not None and nic.nccl_efficiency == pytest.approx(47 / 50)
    assert nic.nccl_busbw_bytes_per_s() == pytest.approx(47e9)


def test_an_absolute_rate_is_pinned_and_an_efficiency_follows(tmp_path: Path) -> None:
    halve = ("gpu.memory.peak_bandwidth_gb_s=2000",)
    pinned = load_part(tmp_path, halve, memory="stream_bandwidth_gb_s: 1700").gpu
    follows = load_part(tmp_path, halve, memory="stream_efficiency: 0.85").gpu
    assert pinned is not None and follows is not None
    assert pinned.memory.rate_bytes_per_s("stream") == pytest.approx(1700e9)
    assert pinned.memory.stream_efficiency == pytest.approx(0.85)  # of the overridden peak
    assert follows.memory.rate_bytes_per_s("stream") == pytest.approx(1700e9)


def test_nvls_efficiency_may_exceed_one_but_not_two(tmp_path: Path) -> None:
    part = load_part(tmp_path, nvlink="nvls_allreduce_busbw_gb_s: 480")
    assert part.gpu is not None and part.gpu.nvlink is not None
    assert part.gpu.nvlink.nvls_allreduce_efficiency == pytest.approx(480 / 450)
    with pytest.raises(InputError, match="expected a number <= 2"):
        load_part(tmp_path, nvlink="nvls_allreduce_efficiency: 2.5")


BOTH = [
    ({"memory": "stream_bandwidth_gb_s: 3400, stream_efficiency: 0.85"},
     "gpu.memory.stream_efficiency", "stream_bandwidth_gb_s or stream_efficiency"),
    ({"host_link": "h2d_copy_gb_s: 375, h2d_copy_efficiency: 0.8"},
     "gpu.host_link.h2d_copy_efficiency", "h2d_copy_gb_s or h2d_copy_efficiency"),
    ({"nvlink": "nccl_busbw_gb_s: 370, nccl_efficiency: 0.8"},
     "gpu.nvlink.nccl_efficiency", "nccl_busbw_gb_s or nccl_efficiency"),
    ({"unified_memory": "migration_bandwidth_gb_s: 375, migration_efficiency: 0.8"},
     "gpu.unified_memory.migration_efficiency",
     "migration_bandwidth_gb_s or migration_efficiency"),
    ({"compute": "peak_tflops: {fp32: 67, bf16: 989.4}, flops_per_clock_per_sm: {bf16: 4096}"},
     "gpu.compute.flops_per_clock_per_sm", "peak_tflops.bf16 or flops_per_clock_per_sm.bf16"),
    ({"nic": "nccl_busbw_gb_s: 47, nccl_efficiency: 0.94"},
     "nic.nccl_efficiency", "nccl_busbw_gb_s or nccl_efficiency"),
]


@pytest.mark.parametrize(("sections", "key", "pair"), BOTH, ids=[b[1] for b in BOTH])
def test_giving_both_forms_of_a_rate_is_an_error(
    tmp_path: Path, sections: dict[str, str], key: str, pair: str
) -> None:
    with pytest.raises(InputError) as error:
        load_part(tmp_path, **sections)
    line = error.value.line()
    assert len(line.splitlines()) == 1
    assert f"mine.yaml: {key}: give one of {pair}, not both" in line


def test_giving_neither_form_is_an_error_where_the_rate_is_required(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=re.escape(
            "gpu.unified_memory: give one of migration_bandwidth_gb_s or migration_efficiency")):
        load_part(tmp_path, unified_memory="")
    with pytest.raises(InputError, match=re.escape(
            "gpu.compute: give one of peak_tflops or flops_per_clock_per_sm")):
        load_part(tmp_path, compute="gemm_tile: [128, 128]")
    with pytest.raises(InputError, match="must list at least fp32"):
        load_part(tmp_path, compute="flops_per_clock_per_sm: {bf16: 4096}")


def test_an_absolute_rate_above_its_capacity_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=re.escape(
            "gpu.memory: stream_bandwidth_gb_s = 5000 GB/s is more than peak_bandwidth_gb_s = "
            "4000 GB/s")):
        load_part(tmp_path, memory="stream_bandwidth_gb_s: 5000")


# -- overrides of shipped parts -----------------------------------------------------------------

GPU = "node.gpu.gpu"


def system(*overrides: str) -> SystemSpec:
    path = Path(__file__).parents[1] / "configs/systems/gh200-single.yaml"
    spec = load_file(path, overrides)
    assert isinstance(spec, SystemSpec) and spec.node.gpu.gpu is not None
    return spec


def test_overriding_peak_bandwidth_halves_the_elementwise_rate() -> None:
    base, half = system(), system(f"{GPU}.memory.peak_bandwidth_gb_s=2000")
    assert base.node.gpu.gpu is not None and half.node.gpu.gpu is not None
    before = base.node.gpu.gpu.memory.rate_bytes_per_s("elementwise")
    after = half.node.gpu.gpu.memory.rate_bytes_per_s("elementwise")
    assert before is not None and after == pytest.approx(before / 2)
    # The graph's measured rates follow too.
    edges = [build_graph(s, 1).template.get_edge_data("hbm0", "gpu0")["memory"]
             for s in (base, half)]
    assert edges[1]["measured_bytes_per_s"]["stream"] == pytest.approx(
        edges[0]["measured_bytes_per_s"]["stream"] / 2)


def test_halving_the_clock_halves_the_bf16_peak() -> None:
    base, slow = system(), system(f"{GPU}.compute.clock_ghz=0.915")
    assert base.node.gpu.gpu is not None and slow.node.gpu.gpu is not None
    before = base.node.gpu.gpu.compute.peak_flops_per_s()["bf16"]
    assert slow.node.gpu.gpu.compute.peak_flops_per_s()["bf16"] == pytest.approx(before / 2)
    graph = build_graph(slow, 1)
    assert graph.component("gpu0")["peak_flops"]["bf16"] == pytest.approx(before / 2)


def test_overriding_an_absolute_rate_replaces_the_shipped_efficiency() -> None:
    spec = system(f"{GPU}.host_link.h2d_copy_gb_s=187.5", f"{GPU}.host_link.bandwidth_gb_s=900",
                  f"{GPU}.compute.peak_tflops.bf16=500")
    gpu = spec.node.gpu.gpu
    assert gpu is not None
    assert gpu.host_link.rate_bytes_per_s("h2d_copy") == pytest.approx(187.5e9)  # pinned
    assert gpu.host_link.rate_bytes_per_s("d2h_copy") == pytest.approx(594e9, rel=1e-3)
    peaks = gpu.compute.peak_flops_per_s()
    assert peaks["bf16"] == pytest.approx(500e12)
    assert peaks["fp8"] == pytest.approx(1978.9e12, rel=1e-3)  # the other dtypes stay


def test_both_forms_given_by_overrides_is_an_error() -> None:
    with pytest.raises(InputError, match="give one of h2d_copy_gb_s or h2d_copy_efficiency"):
        system(f"{GPU}.host_link.h2d_copy_gb_s=100", f"{GPU}.host_link.h2d_copy_efficiency=0.5")


def test_what_the_user_wrote_validates_again(tmp_path: Path) -> None:
    """A sweep re-validates its base scenario from ``model_dump(exclude_unset=True)``: the
    efficiencies derived from absolute rates are left out, so the rates are not given twice."""
    part = load_part(tmp_path, memory="stream_bandwidth_gb_s: 3400",
                     unified_memory="migration_bandwidth_gb_s: 225")
    again = HardwareSpec.model_validate(part.model_dump(exclude_unset=True))
    assert again == part
