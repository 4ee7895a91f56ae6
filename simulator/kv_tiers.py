"""Sizing and timing the host-memory KV tier of a simulated replica (`scheduler.cpu_kv_gb`).

Blocks: the tier's bytes over one block's KV for the whole model (all layers and heads: a replica's
GPUs each hold their share, and each has its own PCIe link to host memory). A block comes back over
PCIe (`simulator.links`: Gen5 x16 for H100/H200, Gen4 x16 otherwise) in block bytes / (bandwidth × TP);
recomputing it costs its tokens' share of a full prefill step of `max_num_batched_tokens` on the
replica's cost model. The tier is used only while loading is the cheaper of the two
(`engine.core.host_tier`).
"""

from __future__ import annotations

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel
from simulator.hardware.spec import HardwareSpec
from simulator.links import LinkSpec, get_link
from simulator.model_spec import ModelSpec


def host_link_for(gpu: HardwareSpec) -> LinkSpec:
    return get_link(
        "pcie-gen5-x16" if gpu.name.split("-")[0] in ("H100", "H200") else "pcie-gen4-x16"
    )


def kv_bytes_per_token(model: ModelSpec, kv_cache_dtype: str = "auto") -> int:
    """One token's K and V over all layers and KV heads, in the cache's dtype (fp8 / int8: half of
    bf16's; scales aside): what a host tier stores and what a disaggregated hand-over moves."""
    return model.kv_bytes_per_token_per_gpu(1, kv_cache_dtype)


def host_tier_blocks(
    cpu_kv_gb: float, model: ModelSpec, block_size: int, kv_cache_dtype: str = "auto"
) -> int:
    return int(cpu_kv_gb * 1e9 // (block_size * kv_bytes_per_token(model, kv_cache_dtype)))


def host_tier_costs(
    model: ModelSpec,
    gpu: HardwareSpec,
    tensor_parallel: int,
    cost_model: CostModel,
    block_size: int,
    max_num_batched_tokens: int,
    kv_cache_dtype: str = "auto",
) -> tuple[float, float]:
    """(load, recompute) seconds per block."""
    link = host_link_for(gpu)
    block_bytes = block_size * kv_bytes_per_token(model, kv_cache_dtype)
    load_s = block_bytes / (link.bandwidth_bytes_per_s * tensor_parallel)
    full_step_s = cost_model.step_time(StepShape(((max_num_batched_tokens, 0),), ()))
    return load_s, full_step_s / max_num_batched_tokens * block_size
