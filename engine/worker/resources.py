"""Resolving the engine's device, dtype and KV pool size from its settings (the pool on a GPU from the
one memory formula, `engine.core.memory`, which the simulator shares)."""

import torch

from engine.config import EngineConfig
from engine.core.memory import activation_bytes, kv_block_bytes, kv_pool_blocks
from engine.model.config import ModelConfig

_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "float": torch.float32,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
}
CPU_KV_CACHE_BYTES = 1 << 30  # default KV pool on the CPU: 1 GiB


def resolve_device(device: str | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but no CUDA device is available; expected 'cpu'")
    return torch.device(device)


def resolve_dtype(dtype: str, model: ModelConfig, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        if device.type == "cpu":
            return torch.float32  # CPU half-precision matmuls are slow and less exact
        return (
            _DTYPES.get(model.dtype, torch.bfloat16) if model.dtype != "float32" else torch.bfloat16
        )
    if dtype not in _DTYPES:
        raise ValueError(f"dtype is {dtype!r}; expected auto or one of {sorted(_DTYPES)}")
    return _DTYPES[dtype]


def kv_bytes_per_block(
    model: ModelConfig, dtype: torch.dtype, block_size: int, kv_cache_dtype: str = "auto"
) -> int:
    """One block of the pool in `kv_cache_dtype` (auto = `dtype`), scales included (engine.core.memory)."""
    return kv_block_bytes(
        model.num_layers,
        model.num_kv_heads,
        model.head_dim,
        block_size,
        kv_cache_dtype,
        _element_bytes(dtype),
    )


def gpu_kv_pool_blocks(
    config: EngineConfig, model: ModelConfig, dtype: torch.dtype, memory_bytes: int
) -> int:
    """The pool on one GPU of `memory_bytes`: the one memory formula (`engine.core.memory`) that the simulator's
    `kv_blocks_available` also calls, with activations estimated at this engine's token budget and batch."""
    element_bytes = _element_bytes(dtype)
    activations = activation_bytes(
        model.hidden_size,
        model.intermediate_size,
        model.num_heads,
        model.num_kv_heads,
        model.head_dim,
        model.vocab_size,
        element_bytes,
        config.max_num_batched_tokens,
        config.max_num_seqs,
    )
    return kv_pool_blocks(
        memory_bytes,
        config.gpu_memory_utilization,
        model.num_parameters * element_bytes,
        activations,
        kv_bytes_per_block(model, dtype, config.block_size, config.kv_cache_dtype),
    )


def resolve_num_kv_blocks(
    config: EngineConfig,
    model: ModelConfig,
    dtype: torch.dtype,
    device: torch.device,
    max_model_len: int,
) -> int:
    if config.num_kv_blocks is not None:
        return config.num_kv_blocks
    block_bytes = kv_bytes_per_block(model, dtype, config.block_size, config.kv_cache_dtype)
    if config.kv_cache_memory_bytes is not None:
        num_blocks = config.kv_cache_memory_bytes // block_bytes
        budget = config.kv_cache_memory_bytes
    elif device.type == "cuda":
        budget = torch.cuda.get_device_properties(device).total_memory
        num_blocks = gpu_kv_pool_blocks(config, model, dtype, budget)
    else:
        # the CPU pool holds what max_num_seqs sequences of max_model_len need, up to 1 GiB
        wanted = config.max_num_seqs * max_model_len * block_bytes // config.block_size
        budget = min(CPU_KV_CACHE_BYTES, wanted)
        num_blocks = budget // block_bytes
    if num_blocks < 1:
        raise ValueError(
            f"KV cache budget of {budget} bytes holds no block of {block_bytes} bytes; "
            "give more memory (kv_cache_memory_bytes / gpu_memory_utilization) or set num_kv_blocks"
        )
    return num_blocks


def _element_bytes(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()
