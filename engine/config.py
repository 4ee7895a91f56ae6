"""Settings of the cache and the scheduler, validated on creation (pure Python: shared with the simulator)."""
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class CacheConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    block_size: int = Field(16, ge=1, description="tokens per KV block")
    num_kv_blocks: int = Field(..., ge=1, description="KV blocks in the pool")
    enable_prefix_caching: bool = True
    tenant_block_quota: dict[str, int] = Field(default_factory=dict, description="KV blocks each tenant may hold")

    @property
    def num_token_slots(self) -> int:
        return self.num_kv_blocks * self.block_size


class SchedulerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_num_seqs: int = Field(256, ge=1)
    max_num_batched_tokens: int = Field(2048, ge=1)
    max_model_len: int = Field(2048, ge=2)
    policy: Literal["continuous", "static"] = "continuous"
    # static batching reserves KV for the longest sequence a request could reach:
    # max_model_len (the traditional server) or its own prompt + max_tokens
    static_reserve: Literal["max_model_len", "request"] = "max_model_len"


class EngineConfig(BaseModel):
    """Everything `LLM(...)` and `surgeplan serve` accept; cache and scheduler settings are derived."""
    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    model: str
    load_format: Literal["auto", "safetensors", "dummy"] = "auto"
    dtype: str = "auto"
    device: str | None = None                          # None: cuda when available, else cpu
    seed: int = 0
    block_size: int = Field(16, ge=1)
    num_kv_blocks: int | None = Field(None, ge=1)      # None: from kv_cache_memory_bytes or device memory
    kv_cache_memory_bytes: int | None = Field(None, ge=1)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    enable_prefix_caching: bool = True
    tenant_block_quota: dict[str, int] = Field(default_factory=dict)
    max_num_seqs: int = Field(256, ge=1)
    max_num_batched_tokens: int = Field(2048, ge=1)
    max_model_len: int | None = Field(None, ge=2)      # None: the model's max_position_embeddings
    policy: Literal["continuous", "static"] = "continuous"
    static_reserve: Literal["max_model_len", "request"] = "max_model_len"
