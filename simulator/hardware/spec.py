"""What one accelerator (or the host CPU) can hold, move and compute, and what an hour of it costs:
`HardwareSpec`, with the units its figures are given in."""

from pydantic import BaseModel, ConfigDict, Field

GB = 1e9
GIB = 2**30
TB_PER_S = 1e12
TFLOPS = 1e12


class HardwareSpec(BaseModel):
    """One accelerator (or the host CPU): capacities per device, prices per device-hour."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: str = Field(description="'gpu' or 'cpu'")
    memory_bytes: float = Field(
        gt=0,
        description="what the CUDA runtime reports as the device's total (torch.cuda.mem_get_info), "
        "the figure serving engines size their KV pools from; not the nameplate read as decimal GB",
    )
    memory_source: str = Field(
        default="as given (not checked against a device's report)",
        description="where memory_bytes was seen: a device report, a published log, or a rule",
    )
    memory_bandwidth_bytes_per_s: float = Field(gt=0)
    bf16_dense_flops: float = Field(gt=0, description="dense bf16/fp16 tensor peak, FLOP/s")
    fp8_dense_flops: float | None = Field(
        default=None, gt=0, description="None: no fp8 tensor cores"
    )
    interconnect: str
    interconnect_bandwidth_bytes_per_s: float = Field(gt=0, description="per direction, per device")
    max_devices_per_node: int = Field(default=8, ge=1)
    compute_capability: str | None = Field(
        default=None,
        description="the kernel build target (NVIDIA 'sm_90' for H100 and H200): GPUs of one "
        "target run the same compiled kernels, so a figure of a kernel library fitted on one "
        "carries to the others; None: unknown, nothing carries",
    )
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
