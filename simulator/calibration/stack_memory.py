"""A serving stack's own KV-cache memory rule, where it is not vLLM's.

vLLM (and our engine) give the KV cache `gpu_memory_utilization` of the whole GPU less the weights and
activations (`engine.core.memory.kv_pool_blocks`). TensorRT-LLM gives it a fraction
(`kv_cache_free_gpu_mem_fraction`, default 0.9) of the memory still *free* once the engine is loaded:
after the weights, TensorRT's activation memory (fixed at build time for the engine's
`max_num_tokens`), NCCL's buffers and the CUDA context and library workspaces. An engine profile that
names a `StackMemory` sizes the pool by that rule; its figures are derived from a public memory model
(NVIDIA aiconfigurator's TRT-LLM accounting), never fitted on a published measurement.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

GIB = 1 << 30


class StackMemory(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule: Literal["fraction_of_free"] = Field(
        description="the KV cache takes `gpu_memory_utilization` of the memory free after the "
        "weights and the reserves below (TensorRT-LLM's kv_cache_free_gpu_mem_fraction)"
    )
    max_num_tokens: int = Field(
        gt=0, description="tokens the engine's activation memory is built for (build default)"
    )
    activation_bytes_per_token_hidden: dict[int, float] = Field(
        description="per tensor-parallel size: activation bytes per token per hidden unit "
        "(activations = max_num_tokens x hidden_size x this); sizes above the largest use it"
    )
    nccl_bytes: dict[int, float] = Field(description="per tensor-parallel size: NCCL's buffers")
    other_bytes: float = Field(ge=0, description="CUDA context, cuBLAS and runtime workspaces")
    reserved_fraction: float = Field(
        0.0, ge=0, lt=1, description="share of the KV budget the block allocator keeps back"
    )
    replicated_embedding: bool = Field(
        False,
        description="the embedding table is whole on every GPU of the TP group (not sharded)",
    )
    source: str

    def _per_tp(self, table: dict[int, float], tensor_parallel: int) -> float:
        sizes = sorted(table)
        chosen = [size for size in sizes if size <= tensor_parallel]
        return table[chosen[-1] if chosen else sizes[0]]

    def reserve_bytes(self, hidden_size: int, tensor_parallel: int) -> float:
        """Memory a GPU of the TP group holds besides weights and KV: activations, NCCL, context."""
        per_token = self._per_tp(self.activation_bytes_per_token_hidden, tensor_parallel)
        return (
            self.max_num_tokens * hidden_size * per_token
            + self._per_tp(self.nccl_bytes, tensor_parallel)
            + self.other_bytes
        )

    def kv_blocks(
        self,
        memory_bytes: float,
        fraction: float,
        weight_bytes: float,
        embedding_bytes: float,
        hidden_size: int,
        tensor_parallel: int,
        block_bytes: int,
    ) -> int:
        """KV blocks per GPU: `fraction` of what is free after weights and reserves
        (`weight_bytes`: one GPU's share with the embedding sharded; `embedding_bytes`: the whole
        table, added back on every GPU when it is replicated)."""
        if not 0 < fraction <= 1:
            raise ValueError(
                f"gpu_memory_utilization={fraction}; expected a fraction in (0, 1] (with this "
                "stack: the share of free memory given to the KV cache)"
            )
        if self.replicated_embedding:
            weight_bytes += embedding_bytes * (1 - 1 / tensor_parallel)
        free = memory_bytes - weight_bytes - self.reserve_bytes(hidden_size, tensor_parallel)
        budget = fraction * free * (1 - self.reserved_fraction)
        return max(0, math.floor(budget / block_bytes))


__all__ = ["GIB", "StackMemory"]
