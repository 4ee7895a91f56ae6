"""Resolving the engine's device, dtype and KV pool size from its settings."""
import torch

from engine.config import EngineConfig
from engine.model.config import ModelConfig

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
           "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
           "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}
CPU_KV_CACHE_BYTES = 1 << 30           # default KV pool on the CPU: 1 GiB
GPU_ACTIVATION_RESERVE_BYTES = 2 << 30  # kept free on a GPU for activations and logits


def resolve_device(device: str | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but no CUDA device is available; expected 'cpu'")
    return torch.device(device)


def resolve_dtype(dtype: str, model: ModelConfig, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        if device.type == "cpu":
            return torch.float32            # CPU half-precision matmuls are slow and less exact
        return _DTYPES.get(model.dtype, torch.bfloat16) if model.dtype != "float32" else torch.bfloat16
    if dtype not in _DTYPES:
        raise ValueError(f"dtype is {dtype!r}; expected auto or one of {sorted(_DTYPES)}")
    return _DTYPES[dtype]


def kv_bytes_per_block(model: ModelConfig, dtype: torch.dtype, block_size: int) -> int:
    element_bytes = torch.empty((), dtype=dtype).element_size()
    return 2 * model.num_layers * model.num_kv_heads * model.head_dim * element_bytes * block_size


def resolve_num_kv_blocks(config: EngineConfig, model: ModelConfig, dtype: torch.dtype, device: torch.device,
                          max_model_len: int) -> int:
    if config.num_kv_blocks is not None:
        return config.num_kv_blocks
    block_bytes = kv_bytes_per_block(model, dtype, config.block_size)
    if config.kv_cache_memory_bytes is not None:
        budget = config.kv_cache_memory_bytes
    elif device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        weight_bytes = model.num_parameters * torch.empty((), dtype=dtype).element_size()
        budget = int(total * config.gpu_memory_utilization) - weight_bytes - GPU_ACTIVATION_RESERVE_BYTES
    else:
        wanted = config.max_num_seqs * max_model_len * block_bytes // config.block_size
        budget = min(CPU_KV_CACHE_BYTES, wanted)
    num_blocks = budget // block_bytes
    if num_blocks < 1:
        raise ValueError(f"KV cache budget of {budget} bytes holds no block of {block_bytes} bytes; "
                         "give more memory (kv_cache_memory_bytes / gpu_memory_utilization) or set num_kv_blocks")
    return num_blocks
