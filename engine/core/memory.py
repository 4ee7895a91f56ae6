"""The one memory formula: how many KV blocks a GPU (or a tensor-parallel shard) holds after
weights and
activations, with the weights' and the KV cache's storage dtypes. Pure Python: the live engine
(`engine.worker.resources`)
and the simulator (`simulator.model_spec`) both call it, so they size the same pool.

  blocks = floor((memory × gpu_memory_utilization − weight bytes − activation bytes) / block bytes)
  weight bytes = linear-layer parameters × bytes per weight (weight_dtype) + embeddings, LM head and
                 norms × the model's bytes per value (fp8 checkpoints leave those unquantised)
  block bytes = 2 (K, V) × layers × KV heads × block_size × head_dim × bytes per value
                + (int8) 2 × layers × KV heads × 4 bytes of scales per block
The fp8 caches' per-tensor scales (8 bytes a layer) and fp8 weights' (two float32 per linear layer)
are not worth a block and are left out.
"""

import math

# bytes a stored K/V value takes, by kv_cache_dtype; auto = the model's dtype
KV_CACHE_DTYPE_BYTES = {"fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1}
SCALE_BYTES = 4  # float32
# bytes a linear-layer weight takes, by weight_dtype; auto = the model's dtype
WEIGHT_DTYPE_BYTES = {"fp8": 1}


def kv_value_bytes(kv_cache_dtype: str, model_dtype_bytes: int) -> int:
    if kv_cache_dtype == "auto":
        return model_dtype_bytes
    if kv_cache_dtype not in KV_CACHE_DTYPE_BYTES:
        raise ValueError(
            f"kv_cache_dtype is {kv_cache_dtype!r}; expected auto or one of "
            f"{sorted(KV_CACHE_DTYPE_BYTES)}"
        )
    return KV_CACHE_DTYPE_BYTES[kv_cache_dtype]


def weight_value_bytes(weight_dtype: str, model_dtype_bytes: int) -> int:
    if weight_dtype == "auto":
        return model_dtype_bytes
    if weight_dtype not in WEIGHT_DTYPE_BYTES:
        raise ValueError(
            f"weight_dtype is {weight_dtype!r}; expected auto or one of {sorted(WEIGHT_DTYPE_BYTES)}"
        )
    return WEIGHT_DTYPE_BYTES[weight_dtype]


def weight_bytes(
    linear_params: int, other_params: int, weight_dtype: str, model_dtype_bytes: int
) -> int:
    """Bytes of the weights (on one GPU: pass the parameters that GPU holds): the linear layers' in
    `weight_dtype`, the rest (embeddings, LM head, norms) in the model's dtype."""
    return (
        linear_params * weight_value_bytes(weight_dtype, model_dtype_bytes)
        + other_params * model_dtype_bytes
    )


def kv_block_bytes(
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    block_size: int,
    kv_cache_dtype: str,
    model_dtype_bytes: int,
) -> int:
    """Bytes of one KV block (on one GPU: pass the KV heads that GPU holds), scales included."""
    values = (
        2
        * num_layers
        * num_kv_heads
        * head_dim
        * block_size
        * kv_value_bytes(kv_cache_dtype, model_dtype_bytes)
    )
    scales = 2 * num_layers * num_kv_heads * SCALE_BYTES if kv_cache_dtype == "int8" else 0
    return values + scales


def activation_bytes(
    hidden_size: int,
    intermediate_size: int,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    vocab_size: int,
    dtype_bytes: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    tensor_parallel: int = 1,
) -> int:
    """Peak transient memory of one forward pass, as vLLM's profiling run would find it: the widest
    per-token intermediates (gate+up output, QKV, residual) over a full token budget, and fp32
    logits
    for every sequence."""
    widest_per_token = (
        2 * intermediate_size + num_heads * head_dim + 2 * num_kv_heads * head_dim
    ) // tensor_parallel + 2 * hidden_size
    logits = max_num_seqs * vocab_size * 4
    return max_num_batched_tokens * widest_per_token * dtype_bytes + logits


def kv_pool_blocks(
    memory_bytes: float,
    gpu_memory_utilization: float,
    weight_bytes: float,
    activation_bytes: float,
    block_bytes: int,
) -> int:
    """KV blocks that fit in `gpu_memory_utilization` of `memory_bytes` after weights and
    activations."""
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(
            f"gpu_memory_utilization={gpu_memory_utilization}; expected a fraction in (0, 1]"
        )
    if block_bytes < 1:
        raise ValueError(f"block_bytes={block_bytes}; expected ≥ 1")
    free_bytes = memory_bytes * gpu_memory_utilization - weight_bytes - activation_bytes
    return max(0, math.floor(free_bytes / block_bytes))


def llama_parameters(
    hidden_size: int,
    intermediate_size: int,
    num_layers: int,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    vocab_size: int,
    tie_word_embeddings: bool,
    qkv_bias: bool,
) -> int:
    """Parameters of a Llama-family model: attention (with Qwen2's QKV bias), gated MLP, norms,
    embeddings."""
    q_out, kv_out = num_heads * head_dim, 2 * num_kv_heads * head_dim
    attention = (
        hidden_size * (q_out + kv_out) + q_out * hidden_size + ((q_out + kv_out) if qkv_bias else 0)
    )
    mlp = 3 * hidden_size * intermediate_size
    embeddings = vocab_size * hidden_size * (1 if tie_word_embeddings else 2)
    norms = (2 * num_layers + 1) * hidden_size
    return num_layers * (attention + mlp) + embeddings + norms
