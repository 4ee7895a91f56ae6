"""A model's shape and the memory arithmetic built on it: weight bytes, KV bytes per token, how many
KV blocks fit on N GPUs with tensor parallelism, and the largest batch at given lengths. The pool comes
from the one memory formula the live engine also calls (`engine.core.memory`), with the KV cache dtype."""

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine.core.memory import (
    activation_bytes,
    kv_block_bytes,
    kv_pool_blocks,
    kv_value_bytes,
    llama_parameters,
    weight_value_bytes,
)
from engine.core.memory import (
    weight_bytes as stored_weight_bytes,
)
from simulator.hardware.spec import HardwareSpec

DTYPE_BYTES = {
    "float32": 4,
    "fp32": 4,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "bfloat16": 2,
    "bf16": 2,
    "float8": 1,
    "fp8": 1,
    "float8_e4m3fn": 1,
    "int8": 1,
}


def dtype_bytes(dtype: str) -> int:
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype {dtype!r} is unknown; expected one of {sorted(DTYPE_BYTES)}")
    return DTYPE_BYTES[dtype]


class ModelSpec(BaseModel):
    """A decoder-only transformer of the Llama family, as far as cost and memory are concerned."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    num_layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    dtype: str = "float16"
    # the linear layers' weights (engine.core.config.WeightConfig): auto = `dtype`, or fp8
    weight_dtype: str = "auto"
    max_position_embeddings: int = Field(default=4096, gt=0)

    @model_validator(mode="after")
    def _known_weight_dtype(self) -> "ModelSpec":
        weight_value_bytes(self.weight_dtype, 1)  # a clear error for an unknown name
        return self

    @classmethod
    def from_hf_config(
        cls,
        config: dict,
        name: str | None = None,
        dtype: str | None = None,
        weight_dtype: str = "auto",
    ) -> "ModelSpec":
        """Read a Hugging Face `config.json` dict (through the engine's own parser); `dtype` overrides the
        config's; `weight_dtype` stores the linear layers' weights in another dtype (fp8)."""
        from engine.model.config import ModelConfig  # pure Python: no torch

        c = ModelConfig.from_hf_config(config, source=f"config of {name or 'model'!r}")
        return cls(
            name=name or config.get("_name_or_path") or c.model_type,
            num_layers=c.num_layers,
            hidden_size=c.hidden_size,
            intermediate_size=c.intermediate_size,
            num_attention_heads=c.num_heads,
            num_kv_heads=c.num_kv_heads,
            head_dim=c.head_dim,
            vocab_size=c.vocab_size,
            tie_word_embeddings=c.tie_word_embeddings,
            qkv_bias=c.qkv_bias,
            dtype=dtype or config.get("dtype") or config.get("torch_dtype") or "float16",
            weight_dtype=weight_dtype,
            max_position_embeddings=c.max_position_embeddings,
        )

    @classmethod
    def from_preset(
        cls, name: str, dtype: str | None = None, weight_dtype: str = "auto"
    ) -> "ModelSpec":
        from engine.model.presets import preset_config

        return cls.from_hf_config(
            preset_config(name), name=name, dtype=dtype, weight_dtype=weight_dtype
        )

    @property
    def dtype_bytes(self) -> int:
        return dtype_bytes(self.dtype)

    # ---- parameter counts -------------------------------------------------------------------
    @property
    def attention_params_per_layer(self) -> int:
        q_out = self.num_attention_heads * self.head_dim
        kv_out = 2 * self.num_kv_heads * self.head_dim
        bias = (q_out + kv_out) if self.qkv_bias else 0
        return self.hidden_size * (q_out + kv_out) + q_out * self.hidden_size + bias

    @property
    def mlp_params_per_layer(self) -> int:
        return 3 * self.hidden_size * self.intermediate_size  # gate, up and down projections

    @property
    def linear_params_per_layer(self) -> int:
        return self.attention_params_per_layer + self.mlp_params_per_layer

    def linear_weight_bytes_per_gpu(self, tensor_parallel: int, bytes_per_weight: float) -> float:
        """Bytes of one GPU's share of the linear layers' weights (what a decode step reads)."""
        return self.num_layers * self.linear_params_per_layer * bytes_per_weight / tensor_parallel

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    @property
    def num_params(self) -> int:
        return llama_parameters(
            self.hidden_size,
            self.intermediate_size,
            self.num_layers,
            self.num_attention_heads,
            self.num_kv_heads,
            self.head_dim,
            self.vocab_size,
            self.tie_word_embeddings,
            self.qkv_bias,
        )

    @property
    def weight_bytes(self) -> int:
        linear = self.num_layers * self.linear_params_per_layer
        return stored_weight_bytes(
            linear, self.num_params - linear, self.weight_dtype, self.dtype_bytes
        )

    # ---- per-token work ---------------------------------------------------------------------
    @property
    def kv_bytes_per_token(self) -> int:
        """Keys and values of one token across all layers: 2 × layers × KV heads × head_dim × bytes."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.dtype_bytes

    @property
    def linear_flops_per_token(self) -> int:
        """Matmul FLOPs of the transformer layers for one token (2 per multiply-add)."""
        return 2 * self.num_layers * self.linear_params_per_layer

    @property
    def lm_head_flops_per_sequence(self) -> int:
        """Only the last position of each scheduled sequence goes through the LM head."""
        return 2 * self.vocab_size * self.hidden_size

    @property
    def attention_flops_per_pair(self) -> int:
        """QKᵀ and PV for one (query, key) pair across all heads and layers."""
        return 4 * self.num_layers * self.num_attention_heads * self.head_dim

    # ---- tensor-parallel sharding -----------------------------------------------------------
    def kv_heads_per_gpu(self, tensor_parallel: int) -> int:
        """KV heads are split across GPUs, and replicated once there are more GPUs than heads."""
        _check_tensor_parallel(self, tensor_parallel)
        return math.ceil(self.num_kv_heads / tensor_parallel)

    def kv_bytes_per_token_per_gpu(self, tensor_parallel: int, kv_cache_dtype: str = "auto") -> int:
        """K and V values of one token on one GPU, in `kv_cache_dtype` (auto: the model's dtype; scales aside)."""
        return (
            2
            * self.num_layers
            * self.kv_heads_per_gpu(tensor_parallel)
            * self.head_dim
            * kv_value_bytes(kv_cache_dtype, self.dtype_bytes)
        )

    def kv_block_bytes_per_gpu(
        self, tensor_parallel: int, block_size: int, kv_cache_dtype: str = "auto"
    ) -> int:
        return kv_block_bytes(
            self.num_layers,
            self.kv_heads_per_gpu(tensor_parallel),
            self.head_dim,
            block_size,
            kv_cache_dtype,
            self.dtype_bytes,
        )

    def weight_bytes_per_gpu(self, tensor_parallel: int) -> int:
        """Linear layers, embedding and LM head shard across GPUs; KV projections replicate when
        there are more GPUs than KV heads; norms replicate. The linear layers' weights in
        `weight_dtype`, the rest in `dtype` (`engine.core.memory.weight_bytes`)."""
        _check_tensor_parallel(self, tensor_parallel)
        replicated_kv = self.kv_heads_per_gpu(tensor_parallel) * tensor_parallel - self.num_kv_heads
        extra_kv_params = self.num_layers * 2 * replicated_kv * self.head_dim * self.hidden_size
        norms = (2 * self.num_layers + 1) * self.hidden_size
        sharded = self.num_params - norms + extra_kv_params
        linear = math.ceil(
            (self.num_layers * self.linear_params_per_layer + extra_kv_params) / tensor_parallel
        )
        per_gpu = math.ceil(sharded / tensor_parallel) + norms
        return stored_weight_bytes(linear, per_gpu - linear, self.weight_dtype, self.dtype_bytes)

    def activation_bytes_per_gpu(
        self, max_num_batched_tokens: int, max_num_seqs: int, tensor_parallel: int = 1
    ) -> int:
        """Peak transient memory of one forward pass (`engine.core.memory.activation_bytes`)."""
        return activation_bytes(
            self.hidden_size,
            self.intermediate_size,
            self.num_attention_heads,
            self.num_kv_heads,
            self.head_dim,
            self.vocab_size,
            self.dtype_bytes,
            max_num_batched_tokens,
            max_num_seqs,
            tensor_parallel,
        )


def _check_tensor_parallel(model: ModelSpec, tensor_parallel: int) -> None:
    if tensor_parallel < 1 or model.num_attention_heads % tensor_parallel:
        raise ValueError(
            f"tensor_parallel={tensor_parallel} for {model.name}: expected a divisor of its "
            f"{model.num_attention_heads} attention heads"
        )


def kv_blocks_available(
    model: ModelSpec,
    hardware: HardwareSpec,
    tensor_parallel: int = 1,
    gpu_memory_utilization: float = 0.9,
    block_size: int = 16,
    reserved_bytes_per_gpu: float | None = None,
    kv_cache_dtype: str = "auto",
    max_num_batched_tokens: int = 8192,
    max_num_seqs: int = 256,
) -> int:
    """KV-cache blocks (each `block_size` tokens of every layer, spread over the TP group, stored in
    `kv_cache_dtype`) that fit after weights and activations, within `gpu_memory_utilization` of each GPU's
    memory: `engine.core.memory.kv_pool_blocks`, the formula the live engine sizes its pool with.
    `reserved_bytes_per_gpu` defaults to the activation estimate at `max_num_batched_tokens` tokens and
    `max_num_seqs` sequences (the engine's own settings give the engine's own estimate)."""
    if block_size < 1:
        raise ValueError(f"block_size={block_size}; expected ≥ 1 token")
    if reserved_bytes_per_gpu is None:
        reserved_bytes_per_gpu = model.activation_bytes_per_gpu(
            max_num_batched_tokens, max_num_seqs, tensor_parallel
        )
    return kv_pool_blocks(
        hardware.memory_bytes,
        gpu_memory_utilization,
        model.weight_bytes_per_gpu(tensor_parallel),
        reserved_bytes_per_gpu,
        model.kv_block_bytes_per_gpu(tensor_parallel, block_size, kv_cache_dtype),
    )


def blocks_per_sequence(num_tokens: int, block_size: int) -> int:
    return math.ceil(num_tokens / block_size)


def max_batch_size(
    model: ModelSpec,
    hardware: HardwareSpec,
    prompt_tokens: int,
    output_tokens: int,
    tensor_parallel: int = 1,
    gpu_memory_utilization: float = 0.9,
    block_size: int = 16,
    reserved_bytes_per_gpu: float | None = None,
) -> int:
    """The most sequences of `prompt_tokens` + `output_tokens` whose whole KV fits at once."""
    if prompt_tokens < 1 or output_tokens < 0:
        raise ValueError(
            f"prompt_tokens={prompt_tokens}, output_tokens={output_tokens}; expected ≥ 1 and ≥ 0"
        )
    blocks = kv_blocks_available(
        model, hardware, tensor_parallel, gpu_memory_utilization, block_size, reserved_bytes_per_gpu
    )
    return blocks // blocks_per_sequence(prompt_tokens + output_tokens, block_size)
