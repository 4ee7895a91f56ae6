"""The hardware catalog: required devices, sane figures, aliases, user overrides, device matching."""

import json
from pathlib import Path

import pytest

from simulator.hardware.catalog import get_hardware, load_catalog, local_cpu, match_device
from simulator.hardware.spec import HardwareSpec

REQUIRED = (
    "A100-40GB",
    "A100-80GB",
    "H100-80GB",
    "H200-141GB",
    "L40S",
    "L4",
    "A10G",
    "A40",
    "local-cpu",
)


def test_catalog_holds_every_device_people_plan_for():
    catalog = load_catalog()
    assert set(REQUIRED) <= set(catalog)
    for spec in catalog.values():
        assert (
            spec.memory_bytes > 0
            and spec.memory_bandwidth_bytes_per_s > 0
            and spec.bf16_dense_flops > 0
        )
        assert spec.price_source and spec.price_date and spec.spec_source


def test_datasheet_relations_hold():
    a100_40, a100_80, h100, h200 = (
        get_hardware(n) for n in ("A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB")
    )
    assert (
        a100_80.memory_bandwidth_bytes_per_s / a100_40.memory_bandwidth_bytes_per_s
        == pytest.approx(2.039 / 1.555)
    )
    assert h200.memory_bandwidth_bytes_per_s == pytest.approx(4.8e12)
    assert h200.bf16_dense_flops == h100.bf16_dense_flops  # same Hopper die, more and faster memory
    assert a100_80.fp8_dense_flops is None and h100.fp8_dense_flops == pytest.approx(
        2 * h100.bf16_dense_flops, rel=1e-3
    )
    assert (
        h100.peak_flops("fp8") == h100.fp8_dense_flops
        and a100_80.peak_flops("fp8") == a100_80.bf16_dense_flops
    )
    assert a100_80.peak_flops("float32") == a100_80.bf16_dense_flops / 2


def test_memory_is_what_the_device_reports_not_the_nameplate_in_decimal_gb():
    """Serving engines size their pools from the total CUDA reports: an "80GB" HBM part reports
    ~79.1 GiB (84.9e9 bytes), 6% more than 80e9. Our H200 lease read 139.8 GiB off the device."""
    measured = json.loads(
        (Path(__file__).parents[1] / "benchmarks/results/gpu_h200_engine.json").read_text()
    )["meta"]["memory_gib"]
    assert get_hardware("H200-141GB").memory_gib == pytest.approx(measured, abs=0.05)
    reported_gib = {"A100-40GB": 39.39, "A100-80GB": 79.15, "H100-80GB": 79.11}
    for name, gib in reported_gib.items():
        spec = get_hardware(name)
        assert (
            spec.memory_gib == pytest.approx(gib)
            and spec.memory_bytes > 1.04 * float(name.split("-")[1].removesuffix("GB")) * 1e9
        ), name
    for spec in load_catalog().values():
        assert spec.memory_source, spec.name
        if spec.kind == "gpu" and "nameplate x 0.989" in spec.memory_source:  # the HBM rule
            nameplate = float(spec.name.rsplit("-", 1)[-1].removesuffix("GB"))
            assert spec.memory_gib == pytest.approx(0.989 * nameplate)
    # the rule against a public CUDA query on a B200 (182,631 MiB); the B300's "288 GB" is decimal
    assert get_hardware("B200-180GB").memory_gib == pytest.approx(182631 / 1024, rel=0.003)
    assert get_hardware("B300-288GB").memory_gib == pytest.approx((275040 - 728) / 1024)
    assert get_hardware("L40S").memory_gib == pytest.approx(44.5, abs=0.05)  # matched below too


def test_aliases_and_case_are_accepted():
    assert get_hardware("h200").name == "H200-141GB"
    assert get_hardware("a100-80gb").name == "A100-80GB"
    assert get_hardware("cpu").kind == "cpu"


def test_unknown_hardware_names_the_choices():
    with pytest.raises(ValueError, match="expected one of .*A100-80GB"):
        get_hardware("TPU-v5e")


def test_overrides_edit_prices_and_add_devices(tmp_path):
    overrides = tmp_path / "prices.json"
    new_device = get_hardware("L4").model_dump() | {"name": "L4-spot", "price_usd_per_hour": 0.31}
    overrides.write_text(
        json.dumps(
            {
                "H100-80GB": {"price_usd_per_hour": 1.85, "price_date": "2030-01"},
                "L4-spot": new_device,
            }
        )
    )
    catalog = load_catalog(overrides)
    assert (
        catalog["H100-80GB"].price_usd_per_hour == 1.85
        and catalog["H100-80GB"].price_date == "2030-01"
    )
    assert (
        catalog["H100-80GB"].memory_bandwidth_bytes_per_s
        == get_hardware("H100-80GB").memory_bandwidth_bytes_per_s
    )
    assert get_hardware("l4-spot", catalog).price_usd_per_hour == 0.31


def test_bad_overrides_name_the_file_and_entry(tmp_path):
    overrides = tmp_path / "bad.json"
    overrides.write_text(json.dumps({"A40": {"price_usd_per_hour": -1}}))
    with pytest.raises(ValueError, match="bad.json.*'A40'"):
        load_catalog(overrides)
    overrides.write_text("[1, 2]")
    with pytest.raises(ValueError, match="bad.json.*JSON object"):
        load_catalog(overrides)


def test_local_cpu_reflects_this_machine():
    import os

    cpu = local_cpu()
    assert cpu.kind == "cpu" and cpu.memory_bytes > 2**28
    assert cpu.bf16_dense_flops == pytest.approx((os.cpu_count() or 1) * 40e9)


def test_specs_are_validated():
    with pytest.raises(ValueError):
        HardwareSpec(**(get_hardware("L4").model_dump() | {"memory_bytes": 0}))


@pytest.mark.parametrize(
    "name, memory_gib, expected",
    [
        ("NVIDIA H200", 139.8, "H200-141GB"),
        ("NVIDIA A100-SXM4-40GB", 39.4, "A100-40GB"),
        ("NVIDIA A100-SXM4-80GB", 79.2, "A100-80GB"),
        ("NVIDIA L40S", 44.5, "L40S"),
        ("NVIDIA L4", 22.0, "L4"),
        ("Tesla T4", 15.0, None),
    ],
)
def test_detected_gpus_match_their_catalog_entry(name, memory_gib, expected):
    assert match_device(name, memory_gib * 2**30) == expected
