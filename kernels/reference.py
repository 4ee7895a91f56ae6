"""Plain-torch reference twins of the paged-attention kernels.

They define the cache layout and the signatures the Triton kernels share:
  k_cache, v_cache: [num_blocks, block_size, num_kv_heads, head_dim]
  block_tables:     [batch, max_blocks_per_seq] int32 (entries past a sequence's blocks are ignored)
  slot_mapping:     [num_tokens] int64, slot = block_id * block_size + offset, -1 = skip
  k_scale, v_scale: None (cache in the model dtype), [1] float32 (fp8 cache) or [num_blocks, num_kv_heads]
                    float32 (int8 cache); see kernels.kv_quant
They run on any device and are the path used on the CPU.
"""

import torch
import torch.nn.functional as F

from kernels.kv_quant import (
    K_SCALE_CONSTANT,
    V_SCALE_CONSTANT,
    calibrate_fp8_scale_,
    dequantize,
    int8_scale_update_,
    quant_mode,
    quantize,
    select_blocks,
)


def _check_cache(k_cache: torch.Tensor, v_cache: torch.Tensor) -> None:
    assert k_cache.dim() == 4, (
        f"k_cache must be [num_blocks, block_size, num_kv_heads, head_dim], got {tuple(k_cache.shape)}"
    )
    assert k_cache.shape == v_cache.shape, (
        f"k_cache {tuple(k_cache.shape)} and v_cache {tuple(v_cache.shape)} differ"
    )


def store_kv_cache(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> None:
    """Write each token's K/V into its cache slot (quantised where the cache is fp8/int8); tokens with
    slot -1 are skipped."""
    # k, v: [num_tokens, num_kv_heads, head_dim]
    _check_cache(k_cache, v_cache)
    assert k.shape == v.shape and k.shape[1:] == k_cache.shape[2:], (
        f"k {tuple(k.shape)} does not fit cache {tuple(k_cache.shape)}"
    )
    assert slot_mapping.shape == (k.shape[0],), (
        f"slot_mapping {tuple(slot_mapping.shape)} must be [{k.shape[0]}]"
    )
    mode = quant_mode(k_cache, k_scale, "k_scale")
    assert quant_mode(v_cache, v_scale, "v_scale") == mode
    for x, cache, scale, constant in (
        (k, k_cache, k_scale, K_SCALE_CONSTANT),
        (v, v_cache, v_scale, V_SCALE_CONSTANT),
    ):
        if mode == 1:
            calibrate_fp8_scale_(scale, x, slot_mapping, constant)
        elif mode == 2:
            _requantise_int8(
                cache, int8_scale_update_(scale, x, slot_mapping, cache.shape[1]), slot_mapping
            )
        _store_one(x, cache, scale, slot_mapping, mode)


def _store_one(
    x: torch.Tensor,
    cache: torch.Tensor,
    scale: torch.Tensor | None,
    slot_mapping: torch.Tensor,
    mode: int,
) -> None:
    slots = slot_mapping.long()
    keep = slots >= 0
    if not bool(keep.all()):
        slots, x = slots[keep], x[keep]
    flat = cache.view(-1, *cache.shape[2:])  # [num_blocks * block_size, num_kv_heads, head_dim]
    if mode == 0:
        flat.index_copy_(0, slots, x.to(cache.dtype))
    elif mode == 1:  # as bytes: torch has no fp8 index_copy on the CPU
        flat.view(torch.uint8).index_copy_(
            0, slots, quantize(x, scale, cache.dtype).view(torch.uint8)
        )
    else:  # the (block, head) scale of each token: [T, Hkv, 1]
        block_scale = scale[slots // cache.shape[1]][:, :, None]
        flat.index_copy_(0, slots, quantize(x, block_scale, cache.dtype))


def _requantise_int8(cache: torch.Tensor, update, slot_mapping: torch.Tensor) -> None:
    """Rows a store's first token of a block finds already written move to the block's raised scale."""
    block_size = cache.shape[1]
    grew = (update.requant_rows > 0) & (update.new_scale != update.old_scale).any(
        -1
    )  # others are unchanged
    for token in torch.nonzero(grew).flatten().tolist():
        rows = int(update.requant_rows[token])
        block = int(slot_mapping[token]) // block_size
        ratio = (update.old_scale[token] / update.new_scale[token])[None, :, None]  # [1, Hkv, 1]
        cache[block, :rows] = quantize(
            cache[block, :rows].float() * ratio, torch.ones(()), torch.int8
        )


def _gather_kv(
    cache: torch.Tensor, block_table: torch.Tensor, length: int, scale: torch.Tensor | None
) -> torch.Tensor:
    # -> [length, num_kv_heads, head_dim] float32, dequantised
    block_size = cache.shape[1]
    num_blocks = (length + block_size - 1) // block_size
    ids = block_table[:num_blocks].long()
    blocks = dequantize(select_blocks(cache, ids), ids, scale)  # [num_blocks, block_size, Hkv, D]
    return blocks.reshape(-1, *cache.shape[2:])[:length]


def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """One query token per sequence attending to its whole cached context (context_lens[b] ≥ 1)."""
    # q: [B, Hq, D] -> out [B, Hq, D]
    _check_cache(k_cache, v_cache)
    quant_mode(k_cache, k_scale, "k_scale"), quant_mode(v_cache, v_scale, "v_scale")
    batch, num_heads, head_dim = q.shape
    num_kv_heads, block_size = k_cache.shape[2], k_cache.shape[1]
    assert num_heads % num_kv_heads == 0, (
        f"{num_heads} query heads is not a multiple of {num_kv_heads} KV heads"
    )
    assert block_tables.shape[0] == batch and context_lens.shape == (batch,)
    if batch == 0:
        return torch.empty_like(q)
    group = num_heads // num_kv_heads
    max_len = int(context_lens.max())
    max_blocks = (max_len + block_size - 1) // block_size
    table = block_tables[:, :max_blocks].long().clamp(min=0)
    length = max_blocks * block_size
    flat = table.flatten()
    k = dequantize(
        select_blocks(k_cache, flat), flat, k_scale
    )  # [B * max_blocks, block_size, Hkv, D] float32
    v = dequantize(select_blocks(v_cache, flat), flat, v_scale)
    k = k.view(batch, length, num_kv_heads, head_dim).transpose(1, 2)  # [B, Hkv, L, D]
    v = v.view(batch, length, num_kv_heads, head_dim).transpose(1, 2)
    qg = q.float().view(
        batch, num_kv_heads, group, head_dim
    )  # [B, Hkv, G, D]: a KV head's query heads together
    valid = (
        torch.arange(length, device=q.device)[None, :] < context_lens.to(q.device).long()[:, None]
    )  # [B, L]
    out = F.scaled_dot_product_attention(
        qg, k, v, attn_mask=valid[:, None, None, :], scale=scale
    )  # [B, Hkv, G, D]
    return out.reshape(batch, num_heads, head_dim).to(q.dtype)


def paged_prefill_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    context_lens: torch.Tensor,
    block_tables: torch.Tensor,
    scale: float,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """Varlen prefill/extend: sequence b's new tokens are the last (cu[b+1]-cu[b]) of its context_lens[b]
    tokens, already stored in the cache; causal over the new tokens, full over the cached prefix."""
    # q: [T, Hq, D], cu_seqlens_q: [B+1] int32, context_lens: [B] int32 (prefix + new) -> out [T, Hq, D]
    _check_cache(k_cache, v_cache)
    quant_mode(k_cache, k_scale, "k_scale"), quant_mode(v_cache, v_scale, "v_scale")
    num_tokens, num_heads, head_dim = q.shape
    num_kv_heads = k_cache.shape[2]
    group = num_heads // num_kv_heads
    assert (
        cu_seqlens_q.shape[0] == context_lens.shape[0] + 1 and int(cu_seqlens_q[-1]) == num_tokens
    )
    out = torch.empty_like(q)
    starts, lens = cu_seqlens_q.tolist(), context_lens.tolist()
    for b, total in enumerate(lens):
        q_start, q_end = starts[b], starts[b + 1]
        q_len = q_end - q_start
        if q_len == 0:
            continue
        assert total >= q_len, f"sequence {b}: context {total} shorter than its {q_len} new tokens"
        k = _gather_kv(k_cache, block_tables[b], total, k_scale)  # [total, Hkv, D]
        v = _gather_kv(v_cache, block_tables[b], total, v_scale)
        qb = (
            q[q_start:q_end].float().view(q_len, num_kv_heads, group, head_dim).permute(1, 2, 0, 3)
        )  # [Hkv, G, q_len, D]
        query_pos = torch.arange(total - q_len, total, device=q.device)
        causal = (
            torch.arange(total, device=q.device)[None, :] <= query_pos[:, None]
        )  # [q_len, total]
        ob = F.scaled_dot_product_attention(
            qb,
            k.transpose(0, 1)[:, None],
            v.transpose(0, 1)[:, None],
            attn_mask=causal,
            scale=scale,
        )  # [Hkv, G, q_len, D]
        ob = ob.permute(2, 0, 1, 3)  # [q_len, Hkv, G, D]
        out[q_start:q_end] = ob.reshape(q_len, num_heads, head_dim).to(q.dtype)
    return out
