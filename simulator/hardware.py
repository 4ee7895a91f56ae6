"""The hardware catalog: what each accelerator people plan for can hold, move and compute, and what
an hour of it costs.

Figures are the vendors' published dense (non-sparse) peaks; prices are editable defaults with
their source and date, because contracts differ: pass a JSON file of overrides to `load_catalog`.
"""

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

GB = 1e9
GIB = 2**30
TB_PER_S = 1e12
TFLOPS = 1e12


class HardwareSpec(BaseModel):
    """One accelerator (or the host CPU): capacities per device, prices per device-hour."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: str = Field(description="'gpu' or 'cpu'")
    memory_bytes: float = Field(gt=0)
    memory_bandwidth_bytes_per_s: float = Field(gt=0)
    bf16_dense_flops: float = Field(gt=0, description="dense bf16/fp16 tensor peak, FLOP/s")
    fp8_dense_flops: float | None = Field(
        default=None, gt=0, description="None: no fp8 tensor cores"
    )
    interconnect: str
    interconnect_bandwidth_bytes_per_s: float = Field(gt=0, description="per direction, per device")
    max_devices_per_node: int = Field(default=8, ge=1)
    price_usd_per_hour: float = Field(ge=0, description="per device-hour")
    price_source: str
    price_date: str
    spec_source: str

    def peak_flops(self, dtype: str) -> float:
        """The dense tensor peak that a matmul in `dtype` can reach on this device."""
        if dtype in ("float8", "fp8", "float8_e4m3fn") and self.fp8_dense_flops is not None:
            return self.fp8_dense_flops
        if dtype in ("float32", "fp32") and self.kind == "gpu":
            return self.bf16_dense_flops / 2  # TF32 tensor cores: half the bf16 rate
        return self.bf16_dense_flops

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GIB


def _gpu(
    name,
    memory_gb,
    bandwidth_tb_s,
    bf16_tflops,
    fp8_tflops,
    interconnect,
    link_gb_s,
    price,
    price_source,
    price_date,
    spec_source,
    max_devices_per_node=8,
) -> HardwareSpec:
    return HardwareSpec(
        name=name,
        kind="gpu",
        memory_bytes=memory_gb * GB,
        memory_bandwidth_bytes_per_s=bandwidth_tb_s * TB_PER_S,
        bf16_dense_flops=bf16_tflops * TFLOPS,
        fp8_dense_flops=fp8_tflops * TFLOPS if fp8_tflops else None,
        interconnect=interconnect,
        interconnect_bandwidth_bytes_per_s=link_gb_s * GB,
        max_devices_per_node=max_devices_per_node,
        price_usd_per_hour=price,
        price_source=price_source,
        price_date=price_date,
        spec_source=spec_source,
    )


_LAMBDA = "Lambda Cloud on-demand list price per GPU-hour (8-GPU SXM instance)"
_AWS = "AWS EC2 on-demand us-east-1 list price of the 1-GPU instance"
# NVLink figures are per direction (the datasheets quote both directions: 600 / 900 GB/s).
_BUILTIN: tuple[HardwareSpec, ...] = (
    _gpu(
        "A100-40GB",
        40,
        1.555,
        312,
        None,
        "NVLink 3",
        300,
        1.29,
        _LAMBDA,
        "2024-10",
        "NVIDIA A100 Tensor Core GPU datasheet (SXM4 40GB)",
    ),
    _gpu(
        "A100-80GB",
        80,
        2.039,
        312,
        None,
        "NVLink 3",
        300,
        1.79,
        _LAMBDA,
        "2024-10",
        "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB)",
    ),
    _gpu(
        "H100-80GB",
        80,
        3.35,
        989,
        1979,
        "NVLink 4",
        450,
        2.99,
        _LAMBDA,
        "2024-10",
        "NVIDIA H100 Tensor Core GPU datasheet (SXM5)",
    ),
    _gpu(
        "H200-141GB",
        141,
        4.8,
        989,
        1979,
        "NVLink 4",
        450,
        3.50,
        "Nebius AI Cloud on-demand list price per GPU-hour",
        "2025-01",
        "NVIDIA H200 Tensor Core GPU datasheet (SXM)",
    ),
    _gpu(
        "L40S",
        48,
        0.864,
        362,
        733,
        "PCIe Gen4 x16",
        32,
        1.861,
        _AWS + " (g6e.xlarge)",
        "2024-10",
        "NVIDIA L40S datasheet",
        max_devices_per_node=8,
    ),
    _gpu(
        "L4",
        24,
        0.300,
        121,
        242.5,
        "PCIe Gen4 x16",
        32,
        0.8048,
        _AWS + " (g6.xlarge)",
        "2024-10",
        "NVIDIA L4 Tensor Core GPU datasheet",
        max_devices_per_node=8,
    ),
    _gpu(
        "A10G",
        24,
        0.600,
        70,
        None,
        "PCIe Gen4 x16",
        32,
        1.006,
        _AWS + " (g5.xlarge)",
        "2024-10",
        "AWS G5 instance page (NVIDIA publishes no A10G datasheet; 70 TFLOPS is the commonly quoted "
        "dense fp16 tensor figure)",
        max_devices_per_node=8,
    ),
    _gpu(
        "A40",
        48,
        0.696,
        149.7,
        None,
        "NVLink bridge (2-way)",
        56.25,
        0.44,
        "RunPod secure-cloud on-demand list price per GPU-hour",
        "2024-10",
        "NVIDIA A40 datasheet",
        max_devices_per_node=8,
    ),
    # GPUs whose step models come from aiconfigurator's measured kernel tables (issue 21). Datasheet
    # figures cross-checked against aiconfigurator's systems/*.yaml; dense (non-sparse) peaks.
    _gpu(
        "B200-180GB",
        180,
        7.7,
        2250,
        4500,
        "NVLink 5",
        900,
        6.03,
        "Spheron on-demand price per GPU-hour (blog 'H200 vs B200 vs GB200', prices as of 2026-03-17)",
        "2026-03",
        "NVIDIA HGX B200 datasheet (8 GPUs: 1.44 TB HBM3e, 62 TB/s, 18 PFLOPS dense FP8)",
    ),
    _gpu(
        "B300-288GB",
        288,
        7.75,
        2250,
        4500,
        "NVLink 5",
        900,
        6.13,
        "Ornn GPU rental benchmark, neocloud on-demand range $5.00-7.25 per GPU-hour (midpoint)",
        "2026-03",
        "NVIDIA HGX B300 datasheet (8 GPUs: 2.3 TB HBM3e, 62 TB/s total)",
    ),
    _gpu(
        "GB200-186GB",
        186,
        8.0,
        2500,
        5000,
        "NVLink 5 (NVL72)",
        900,
        4.54,
        "Spheron on-demand $9.08 per GB200 Superchip (2 GPUs) per hour, as of 2026-03-17",
        "2026-03",
        "NVIDIA GB200 NVL72 datasheet (per GPU: 186 GB HBM3e, 8 TB/s, 2.5 PFLOPS dense FP16)",
        max_devices_per_node=4,
    ),
    _gpu(
        "GB300-288GB",
        288,
        8.0,
        2500,
        5000,
        "NVLink 5 (NVL72)",
        900,
        5.72,
        "estimate: the GB200 price × 1.26, the ratio of reported GB300 / GB200 NVL72 rack prices "
        "(Ornn, 2026: $3.7-5.0M vs $3.0-3.9M); no on-demand list price found",
        "2026-03",
        "NVIDIA GB300 NVL72 datasheet (per GPU: 288 GB HBM3e, 8 TB/s)",
        max_devices_per_node=4,
    ),
    _gpu(
        "RTX-PRO-6000-96GB",
        96,
        1.597,
        503.8,
        1007.6,
        "PCIe Gen5 x16",
        64,
        1.79,
        "estimate: between the L40S (AWS g6e) and A100-80GB list prices; no on-demand list price found",
        "2026-03",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet (96 GB GDDR7, 1597 GB/s)",
    ),
    _gpu(
        "Arc-Pro-B60-24GB",
        24,
        0.456,
        98.3,
        None,
        "PCIe Gen5 x8",
        28.4,
        0.12,
        "estimate: Intel's ~$500 launch price amortised over 3 years at 50% utilisation, plus host; "
        "no cloud offers it",
        "2025-06",
        "Intel Arc Pro B60 specifications (24 GB GDDR6, 456 GB/s, 197 INT8 TOPS = 98.3 bf16 TFLOPS XMX)",
    ),
)

_ALIASES = {
    "a100": "A100-80GB",
    "a100-80gb-sxm": "A100-80GB",
    "a100-40gb-sxm": "A100-40GB",
    "h100": "H100-80GB",
    "h100-80gb-sxm": "H100-80GB",
    "h200": "H200-141GB",
    "h200-141gb-sxm": "H200-141GB",
    "b200": "B200-180GB",
    "b300": "B300-288GB",
    "gb200": "GB200-186GB",
    "gb300": "GB300-288GB",
    "rtx-pro-6000": "RTX-PRO-6000-96GB",
    "b60": "Arc-Pro-B60-24GB",
    "cpu": "local-cpu",
}

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
    catalog = {spec.name: spec for spec in _BUILTIN}
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
    key = _ALIASES.get(name.lower(), name).lower()
    if key not in by_lower:
        raise ValueError(
            f"hardware {name!r} is unknown; expected one of {sorted(catalog)} "
            f"or an alias among {sorted(_ALIASES)}"
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
