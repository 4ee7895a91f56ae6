"""Quantised KV cache: storage dtypes, scales, and the torch steps the store kernels and twins
share.

`kv_cache_dtype` (engine.core.config.CacheConfig) names the storage, as vLLM's `--kv-cache-dtype`:
  auto      the model's dtype, no scale;
  fp8_e4m3  (= fp8) float8_e4m3fn, one float32 scale per layer for K and one for V (vLLM's
  per-tensor
            k_scale / v_scale), set from the first stored batch as vLLM's `calculate_kv_scales` does
            (|x|max / 200 for K, / 100 for V: headroom for later, larger values; beyond it values
            saturate);
  fp8_e5m2  float8_e5m2, the same scales;
  int8      int8, one float32 scale per (block, KV head) = |x|max / 127 over the values stored in
  that
            block. A store that raises a block's scale re-quantises the block's earlier rows to it,
            so no
            value is ever clipped; a store that begins a block (offset 0) resets its scale.
A stored value is x / scale rounded into the storage dtype; attention reads value × scale.

Scale shapes: per-tensor [1] float32; per block and head [num_blocks, num_kv_heads] float32.
int8's contract: the tokens one store writes into a block sit at consecutive offsets (a sequence's
new
tokens), and the block's rows before the first of them were written earlier.
"""

from typing import NamedTuple

import torch

STORAGE_DTYPES = {
    "fp8_e4m3": torch.float8_e4m3fn,
    "fp8_e5m2": torch.float8_e5m2,
    "int8": torch.int8,
}
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
INT8_MAX = 127.0
K_SCALE_CONSTANT, V_SCALE_CONSTANT = 200.0, 100.0  # vLLM's K_SCALE_CONSTANT / V_SCALE_CONSTANT
MIN_SCALE = 1e-8  # an all-zero block or tensor still divides by something


def canonical_kv_cache_dtype(kv_cache_dtype: str) -> str:
    """fp8 is fp8_e4m3 (as in vLLM); the others are their own names."""
    if kv_cache_dtype == "fp8":
        return "fp8_e4m3"
    if kv_cache_dtype not in ("auto", *STORAGE_DTYPES):
        raise ValueError(
            f"kv_cache_dtype is {kv_cache_dtype!r}; expected auto, fp8, fp8_e4m3, fp8_e5m2 or int8"
        )
    return kv_cache_dtype


def storage_dtype(kv_cache_dtype: str, model_dtype: torch.dtype) -> torch.dtype:
    name = canonical_kv_cache_dtype(kv_cache_dtype)
    return model_dtype if name == "auto" else STORAGE_DTYPES[name]


class PagedKVCache(NamedTuple):
    """One layer's cache: k, v [num_blocks, block_size, num_kv_heads, head_dim] and their scales
    (None
    when stored unquantised)."""

    k: torch.Tensor
    v: torch.Tensor
    k_scale: torch.Tensor | None = None
    v_scale: torch.Tensor | None = None


def allocate_layer(
    num_blocks: int,
    block_size: int,
    num_kv_heads: int,
    head_dim: int,
    kv_cache_dtype: str,
    model_dtype: torch.dtype,
    device: torch.device,
) -> PagedKVCache:
    dtype = storage_dtype(kv_cache_dtype, model_dtype)
    shape = (num_blocks, block_size, num_kv_heads, head_dim)  # [N, block_size, Hkv, D]
    k, v = (
        torch.zeros(shape, dtype=dtype, device=device),
        torch.zeros(shape, dtype=dtype, device=device),
    )
    if dtype in FP8_DTYPES:  # 0 = not calibrated yet: the first store sets it
        return PagedKVCache(k, v, torch.zeros(1, device=device), torch.zeros(1, device=device))
    if dtype == torch.int8:
        return PagedKVCache(
            k,
            v,
            torch.zeros(num_blocks, num_kv_heads, device=device),
            torch.zeros(num_blocks, num_kv_heads, device=device),
        )
    return PagedKVCache(k, v)


def quant_mode(cache: torch.Tensor, scale: torch.Tensor | None, name: str) -> int:
    """0: unquantised (no scale); 1: fp8 with a per-tensor scale [1]; 2: int8 with a scale per
    (block, head).
    Asserts the scale fits the cache."""
    # cache: [num_blocks, block_size, num_kv_heads, head_dim]
    if cache.dtype in FP8_DTYPES:
        assert scale is not None and scale.shape == (1,) and scale.dtype == torch.float32, (
            f"{name}: a {cache.dtype} cache needs a float32 scale of shape [1], got "
            f"{None if scale is None else (scale.dtype, tuple(scale.shape))}"
        )
        return 1
    if cache.dtype == torch.int8:
        expected = (cache.shape[0], cache.shape[2])
        assert (
            scale is not None and tuple(scale.shape) == expected and scale.dtype == torch.float32
        ), (
            f"{name}: an int8 cache needs a float32 scale [num_blocks, num_kv_heads] = {list(expected)}, got "
            f"{None if scale is None else (scale.dtype, tuple(scale.shape))}"
        )
        assert scale.is_contiguous(), f"{name} must be contiguous"
        return 2
    assert scale is None, f"{name}: a {cache.dtype} cache takes no scale"
    return 0


def calibrate_fp8_scale_(
    scale: torch.Tensor, x: torch.Tensor, slot_mapping: torch.Tensor, constant: float
) -> None:
    """Sets an uncalibrated (0) per-tensor scale from |x|max / constant over the tokens stored; no
    host sync."""
    # x: [T, Hkv, D]
    stored = (slot_mapping >= 0)[:, None, None]
    amax = (
        torch.where(stored, x.float().abs(), 0.0).amax()
        if x.numel()
        else x.new_zeros((), dtype=torch.float32)
    )
    scale.copy_(torch.where(scale > 0, scale, (amax / constant).clamp_min(MIN_SCALE)))


class Int8Update(NamedTuple):
    old_scale: torch.Tensor  # [T, Hkv] float32: the token's block scale before this store
    new_scale: torch.Tensor  # [T, Hkv] float32: after it
    requant_rows: (
        torch.Tensor
    )  # [T] int32: earlier rows of its block this token re-quantises (0 but for
    # the first token a store writes into a block that already holds rows)


def int8_scale_update_(
    scale: torch.Tensor, x: torch.Tensor, slot_mapping: torch.Tensor, block_size: int
) -> Int8Update:
    """Raises the (block, head) scales of `scale` [num_blocks, Hkv] to cover the new tokens `x` [T,
    Hkv, D],
    resetting blocks this store begins; returns what the store kernels need. No host sync."""
    slots = slot_mapping.long()
    stored = slots >= 0
    blocks = torch.where(stored, slots // block_size, 0)  # [T]
    offsets = torch.where(stored, slots % block_size, 0)
    old = scale[blocks]  # [T, Hkv]
    token_scale = (x.float().abs().amax(-1) / INT8_MAX).clamp_min(MIN_SCALE)  # [T, Hkv]
    token_scale = torch.where(stored[:, None], token_scale, 0.0)
    begins = stored & (offsets == 0)
    scale.index_put_((blocks[begins],), torch.zeros_like(old[begins]))
    index = blocks[stored][:, None].expand(-1, scale.shape[1])
    scale.scatter_reduce_(0, index, token_scale[stored], "amax", include_self=True)
    previous = torch.cat([slots.new_full((1,), -2), slots[:-1]])
    first_in_block = stored & (previous != slots - 1)
    requant_rows = torch.where(first_in_block, offsets, 0).to(torch.int32)
    return Int8Update(old, scale[blocks], requant_rows)


def quantize(x: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x / scale into `dtype` (int8: rounded half up and clipped to ±127; fp8: saturated at its
    range)."""
    y = x.float() / scale
    if dtype == torch.int8:
        return torch.floor(y + 0.5).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
    limit = torch.finfo(dtype).max
    return y.clamp(-limit, limit).to(dtype)


def select_blocks(cache: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """cache[ids] along dim 0; fp8 through a byte view (torch has no fp8 index_select on the
    CPU)."""
    if cache.dtype in FP8_DTYPES:
        return cache.view(torch.uint8).index_select(0, ids.long()).view(cache.dtype)
    return cache.index_select(0, ids.long())


def dequantize(
    blocks: torch.Tensor, block_ids: torch.Tensor, scale: torch.Tensor | None
) -> torch.Tensor:
    """blocks [n, block_size, Hkv, D] (rows block_ids [n] of the cache) as float32 values."""
    if scale is None:
        return blocks.float()
    if scale.shape == (1,):
        return blocks.float() * scale
    return blocks.float() * scale[block_ids.long()][:, None, :, None]


def kv_quantisation_error(
    x: torch.Tensor, cache: PagedKVCache, slot_mapping: torch.Tensor, which: str = "k"
) -> float:
    """‖dequantised − x‖ / ‖x‖ for tokens `x` [T, Hkv, D] stored at `slot_mapping` (all ≥ 0)."""
    data, scale = (cache.k, cache.k_scale) if which == "k" else (cache.v, cache.v_scale)
    block_size = data.shape[1]
    slots = slot_mapping.long()
    rows = select_blocks(data.view(-1, *data.shape[2:]), slots)[:, None]  # [T, 1, Hkv, D]
    stored = dequantize(rows, slots // block_size, scale)[:, 0]  # [T, Hkv, D]
    return float((stored.double() - x.double()).norm() / x.double().norm())
