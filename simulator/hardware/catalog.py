"""The catalog as used: the built-in accelerators plus the local CPU, edited by a JSON file of
overrides (prices differ by contract), looked up by name or alias, and matched to a detected GPU."""

import json
import os
from pathlib import Path

from pydantic import ValidationError

from simulator.hardware.builtin import ALIASES, BUILTIN
from simulator.hardware.spec import GIB, HardwareSpec

# Per-core figures for the host CPU: AVX2/AVX-512 FMA at ~2.5 GHz, and the share of a server
# socket's DRAM bandwidth one core's worth of threads can pull. Rough, so every figure derived from
# them is labelled `derived` and a measured calibration should replace it.
_CPU_FLOPS_PER_CORE = 40e9
_CPU_BANDWIDTH_PER_CORE_BYTES_PER_S = 8e9


def local_cpu() -> HardwareSpec:
    """The machine we are running on, sized from its core count and physical memory."""
    cores = os.cpu_count() or 1
    return HardwareSpec(
        name="local-cpu",
        kind="cpu",
        memory_bytes=_physical_memory_bytes(),
        memory_source="/proc/meminfo (physical pages x page size)",
        max_devices_per_node=1,
        memory_bandwidth_bytes_per_s=cores * _CPU_BANDWIDTH_PER_CORE_BYTES_PER_S,
        bf16_dense_flops=cores * _CPU_FLOPS_PER_CORE,
        interconnect="none",
        interconnect_bandwidth_bytes_per_s=1e9,
        price_usd_per_hour=0.0,
        price_source="local machine: no rental price",
        price_date="n/a",
        spec_source=f"os.cpu_count()={cores} and /proc/meminfo; bandwidth and FLOP/s estimated per core",
    )


def _physical_memory_bytes() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8 * GIB  # platforms without sysconf: a conservative laptop-sized default


def load_catalog(overrides_path: str | Path | None = None) -> dict[str, HardwareSpec]:
    """The built-in catalog plus the local CPU; `overrides_path` (JSON: {name: {field: value}}) edits
    fields such as `price_usd_per_hour` or adds whole new entries."""
    catalog = {spec.name: spec for spec in BUILTIN}
    catalog["local-cpu"] = local_cpu()
    if overrides_path is None:
        overrides_path = os.environ.get("SURGEPLAN_HARDWARE_OVERRIDES")
    if overrides_path:
        _apply_overrides(catalog, Path(overrides_path))
    return catalog


def _apply_overrides(catalog: dict[str, HardwareSpec], path: Path) -> None:
    try:
        overrides = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(
            f"{path}: cannot read hardware overrides ({error}); expected a JSON object "
            "{{name: {{field: value}}}}"
        ) from error
    if not isinstance(overrides, dict):
        raise ValueError(
            f"{path}: top level is {type(overrides).__name__}; expected a JSON object keyed by hardware name"
        )
    for name, fields in overrides.items():
        base = catalog[name].model_dump() if name in catalog else {"name": name}
        try:
            catalog[name] = HardwareSpec(**{**base, **fields})
        except (ValidationError, TypeError) as error:
            raise ValueError(f"{path}: entry {name!r} is invalid: {error}") from error


def get_hardware(name: str, catalog: dict[str, HardwareSpec] | None = None) -> HardwareSpec:
    """Look a device up by catalog name or a common alias (case-insensitive)."""
    catalog = catalog or load_catalog()
    by_lower = {key.lower(): key for key in catalog}
    key = ALIASES.get(name.lower(), name).lower()
    if key not in by_lower:
        raise ValueError(
            f"hardware {name!r} is unknown; expected one of {sorted(catalog)} "
            f"or an alias among {sorted(ALIASES)}"
        )
    return catalog[by_lower[key]]


def match_device(
    device_name: str, memory_bytes: float, catalog: dict[str, HardwareSpec] | None = None
) -> str | None:
    """The catalog entry for a detected GPU (e.g. 'NVIDIA H200' with 139 GiB -> 'H200-141GB'):
    same family in the name, nearest memory size; None when no family matches."""
    catalog = catalog or load_catalog()
    family = [
        spec
        for spec in catalog.values()
        if spec.kind == "gpu" and spec.name.split("-")[0].lower() in device_name.lower()
    ]
    if not family:
        return None
    return min(family, key=lambda spec: abs(spec.memory_bytes - memory_bytes)).name
