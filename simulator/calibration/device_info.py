"""What a calibration ran on: the device (its catalog name, memory and tensor-parallel degree) and
the software (Python, platform, torch, Triton, CUDA, surgeplan). Apart from `schema` (the
calibration file, which holds both) because this is the one part read from the running machine."""

import platform
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from simulator.hardware.spec import HardwareSpec


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DeviceInfo(_Strict):
    name: str
    kind: Literal["cpu", "cuda", "gpu"]
    memory_bytes: float = Field(ge=0)
    hardware: str | None = Field(
        default=None, description="catalog name, when it is a catalog device"
    )
    tensor_parallel: int = Field(default=1, ge=1)

    @classmethod
    def of_catalog(cls, hardware: "HardwareSpec", tensor_parallel: int) -> "DeviceInfo":
        """A catalog device (`simulator.hardware`) at `tensor_parallel` GPUs a replica."""
        return cls(
            name=hardware.name,
            kind="cpu" if hardware.kind == "cpu" else "gpu",
            memory_bytes=hardware.memory_bytes,
            hardware=hardware.name,
            tensor_parallel=tensor_parallel,
        )


class SoftwareInfo(_Strict):
    python: str
    platform: str
    torch: str | None = None
    triton: str | None = None
    cuda: str | None = None
    surgeplan: str | None = None

    @classmethod
    def current(cls) -> "SoftwareInfo":
        return cls(
            python=platform.python_version(),
            platform=platform.platform(),
            torch=_version("torch"),
            triton=_version("triton"),
            cuda=_cuda_version(),
            surgeplan=_version("surgeplan"),
        )


def _version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _cuda_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.version.cuda


__all__ = ["DeviceInfo", "SoftwareInfo"]
