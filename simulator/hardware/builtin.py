"""The built-in catalog: each accelerator people plan for, from the vendors' published dense
(non-sparse) peaks, with a default price and its source and date, and the common aliases.

Memory is what the CUDA runtime reports as the device's total (`torch.cuda.mem_get_info`), the figure
vLLM, SGLang and TensorRT-LLM size their KV pools from, not the nameplate read as decimal GB: NVIDIA
names its HBM parts by GiB of HBM less what ECC and the driver keep back (~1%), so an "80GB" H100
reports 79.11 GiB = 84.9e9 bytes, 6% more than 80e9. Each entry says where its figure was seen."""

from simulator.hardware.spec import GB, GIB, TB_PER_S, TFLOPS, HardwareSpec

# Reported GiB per nameplate "GB" on the HBM parts whose report is known (A100-40GB 39.39 / 40 = 0.985,
# A100-80GB 79.15 / 80 = 0.989, H100 79.11 / 80 = 0.989, H200 139.8 / 141 = 0.991): the median, for the
# HBM parts not yet seen (B200, GB200), labelled derived. Not every nameplate is in GiB: the B300's
# "288 GB" reports 268.6 GiB in nvidia-smi, so it is derived from that instead.
_HBM_REPORTED_PER_NAMEPLATE = 0.989
_DERIVED_HBM = (
    "derived: nameplate x 0.989 GiB, the median ratio of the reported HBM parts (A100, H100, H200); "
    "on a B200 a public cudaGetDeviceProperties query reads 182,631 MiB = 178.35 GiB, 0.2% more; "
    "replace with the device's own report (`surgeplan profile` records it)"
)
# A public GPU probe's nvidia-smi totals (driver 580.95.05; read through the code search, file 71609078484,
# whose repository the search does not name), MiB: what NVML reports; CUDA keeps a few hundred MiB more
# back (B200: 183,359 NVML vs 182,631 MiB in a public cudaGetDeviceProperties query; L4: 23,034 vs
# 22.03 GiB in PyTorch's message on it).
_PROBE = "a public GPU probe's nvidia-smi total (driver 580.95.05)"
_NVML_GAP_MIB = {
    "Ampere GDDR": 23028 - 22.06 * 1024,
    "Ada": 23034 - 22.03 * 1024,
    "Blackwell": 183359 - 182631,
}


def _from_nvml(nvml_mib: float, sibling: str) -> float:
    """GiB CUDA reports, from NVML's total less what CUDA keeps back on a sibling part."""
    return (nvml_mib - _NVML_GAP_MIB[sibling]) / 1024


_NAMEPLATE_GDDR = "nameplate in decimal GB: not checked against this device's own report"


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
    compute_capability=None,
    reported_gib=None,
    memory_source=_NAMEPLATE_GDDR,
    hbm=False,
) -> HardwareSpec:
    if reported_gib is None and hbm:
        reported_gib, memory_source = memory_gb * _HBM_REPORTED_PER_NAMEPLATE, _DERIVED_HBM
    return HardwareSpec(
        name=name,
        kind="gpu",
        memory_bytes=reported_gib * GIB if reported_gib is not None else memory_gb * GB,
        memory_source=memory_source,
        memory_bandwidth_bytes_per_s=bandwidth_tb_s * TB_PER_S,
        bf16_dense_flops=bf16_tflops * TFLOPS,
        fp8_dense_flops=fp8_tflops * TFLOPS if fp8_tflops else None,
        interconnect=interconnect,
        interconnect_bandwidth_bytes_per_s=link_gb_s * GB,
        max_devices_per_node=max_devices_per_node,
        compute_capability=compute_capability,
        price_usd_per_hour=price,
        price_source=price_source,
        price_date=price_date,
        spec_source=spec_source,
    )


_LAMBDA = "Lambda Cloud on-demand list price per GPU-hour (8-GPU SXM instance)"
_AWS = "AWS EC2 on-demand us-east-1 list price of the 1-GPU instance"
# NVLink figures are per direction (the datasheets quote both directions: 600 / 900 GB/s).
BUILTIN: tuple[HardwareSpec, ...] = (
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
        compute_capability="sm_80",
        reported_gib=39.39,
        memory_source="PyTorch's out-of-memory message on A100-SXM4-40GB ('39.39 GiB total capacity')",
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
        compute_capability="sm_80",
        reported_gib=79.15,
        memory_source="PyTorch's out-of-memory message on A100-SXM4-80GB ('total capacity of 79.15 GiB', "
        "beside nvidia-smi's 81,920 MiB); vLLM's logged pools need >= 77.8 GiB (vllm-project/vllm#2031: "
        "Llama-2-7B TP1 7,449 blocks, Llama-2-70B TP4 31,615 before that PR)",
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
        compute_capability="sm_90",
        reported_gib=79.11,
        memory_source="PyTorch's out-of-memory message on H100 / H800 SXM ('total capacity of 79.11 GiB')",
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
        compute_capability="sm_90",
        reported_gib=139.8,
        memory_source="measured: torch.cuda.get_device_properties on our H200 lease, 2026-12-04 "
        "(benchmarks/results/gpu_h200_engine.json)",
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
        compute_capability="sm_89",
        reported_gib=_from_nvml(46068, "Ada"),
        memory_source=f"derived: {_PROBE}, 46,068 MiB, less the 475 MiB CUDA keeps back on an L4",
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
        compute_capability="sm_89",
        reported_gib=22.03,
        memory_source="PyTorch's out-of-memory message on an L4 ('total capacity of 22.03 GiB'; "
        f"{_PROBE}: 23,034 MiB)",
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
        compute_capability="sm_86",
        reported_gib=22.06,
        memory_source="PyTorch's out-of-memory message on an A10 / A10G ('total capacity of 22.06 "
        f"GiB'; {_PROBE}: 23,028 MiB)",
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
        compute_capability="sm_86",
        reported_gib=_from_nvml(46068, "Ampere GDDR"),
        memory_source="derived: nvidia-smi's 46,068 MiB on A40s (thamada/nvidia-smi, nvsim/A40x10_smi.py) "
        "less the 439 MiB CUDA keeps back on an A10",
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
        compute_capability="sm_100",
        hbm=True,
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
        compute_capability="sm_103",
        reported_gib=_from_nvml(275040, "Blackwell"),
        memory_source=f"derived: {_PROBE}, 275,040 MiB ('NVIDIA B300 SXM6 AC': the 288 GB "
        "nameplate is decimal here, 268.6 GiB), less the 728 MiB CUDA keeps back on a B200",
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
        compute_capability="sm_100",
        hbm=True,
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
        compute_capability="sm_103",
        reported_gib=_from_nvml(275040, "Blackwell"),
        memory_source="derived: the B300's figure (the same 288 GB of HBM3e a GPU)",
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
        compute_capability="sm_120",
        reported_gib=_from_nvml(97887, "Blackwell"),
        memory_source=f"derived: {_PROBE}, 97,887 MiB, less the 728 MiB CUDA keeps back on a B200",
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
        compute_capability="xe2",
    ),
)

ALIASES = {
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
