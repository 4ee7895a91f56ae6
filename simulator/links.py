"""The link catalog: how fast KV moves from a prefill replica to a decode replica.

Figures are nominal per-direction bandwidths from the specifications named on each entry, and
one-transfer latencies (set-up plus first byte: RDMA/NCCL-style transfer libraries, not raw wire
latency); both are `nominal`, so a measured transfer would replace them. A transfer of B bytes between
replicas of TP degrees p and d runs over min(p, d) links in parallel (each GPU of the smaller side
has its own NVLink port, PCIe slot or NIC, as on DGX-class nodes):

    transfer_s = latency_s + B / (bandwidth_bytes_per_s × min(p, d))

and each decode replica receives one transfer at a time (its links are one FIFO resource).
"""

from pydantic import BaseModel, ConfigDict, Field

GB = 1e9


class LinkSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    kind: str = Field(description="nvlink, pcie, infiniband or ethernet")
    bandwidth_bytes_per_s: float = Field(
        gt=0, description="per direction, per link (one GPU's share)"
    )
    latency_s: float = Field(ge=0, description="per transfer: set-up and first byte")
    source: str
    label: str = "nominal"

    def transfer_s(
        self, num_bytes: float, prefill_tensor_parallel: int = 1, decode_tensor_parallel: int = 1
    ) -> float:
        links = min(prefill_tensor_parallel, decode_tensor_parallel)
        return self.latency_s + num_bytes / (self.bandwidth_bytes_per_s * links)


_LINKS = (
    LinkSpec(
        name="nvlink-4",
        kind="nvlink",
        bandwidth_bytes_per_s=450 * GB,
        latency_s=5e-6,
        source="NVIDIA H100 datasheet: NVLink 4 900 GB/s both directions (450 GB/s each way)",
    ),
    LinkSpec(
        name="nvlink-3",
        kind="nvlink",
        bandwidth_bytes_per_s=300 * GB,
        latency_s=5e-6,
        source="NVIDIA A100 datasheet: NVLink 3 600 GB/s both directions (300 GB/s each way)",
    ),
    LinkSpec(
        name="pcie-gen5-x16",
        kind="pcie",
        bandwidth_bytes_per_s=64 * GB,
        latency_s=10e-6,
        source="PCI-SIG PCIe 5.0: 32 GT/s x 16 lanes, about 64 GB/s each way",
    ),
    LinkSpec(
        name="pcie-gen4-x16",
        kind="pcie",
        bandwidth_bytes_per_s=32 * GB,
        latency_s=10e-6,
        source="PCI-SIG PCIe 4.0: 16 GT/s x 16 lanes, about 32 GB/s each way",
    ),
    LinkSpec(
        name="infiniband-ndr",
        kind="infiniband",
        bandwidth_bytes_per_s=50 * GB,
        latency_s=20e-6,
        source="NVIDIA ConnectX-7 / Quantum-2: NDR 400 Gb/s per port (50 GB/s), one NIC per GPU",
    ),
    LinkSpec(
        name="infiniband-hdr",
        kind="infiniband",
        bandwidth_bytes_per_s=25 * GB,
        latency_s=20e-6,
        source="NVIDIA ConnectX-6 / Quantum: HDR 200 Gb/s per port (25 GB/s), one NIC per GPU",
    ),
    LinkSpec(
        name="ethernet-400g",
        kind="ethernet",
        bandwidth_bytes_per_s=50 * GB,
        latency_s=30e-6,
        source="IEEE 802.3bs 400GbE with RoCE v2 (50 GB/s), one NIC per GPU",
    ),
    LinkSpec(
        name="ethernet-100g",
        kind="ethernet",
        bandwidth_bytes_per_s=12.5 * GB,
        latency_s=50e-6,
        source="IEEE 802.3ba/bj 100GbE (12.5 GB/s), one NIC per GPU",
    ),
)
LINKS: dict[str, LinkSpec] = {link.name: link for link in _LINKS}


def get_link(name: str) -> LinkSpec:
    if name not in LINKS:
        raise ValueError(f"link {name!r} is unknown; expected one of {sorted(LINKS)}")
    return LINKS[name]
