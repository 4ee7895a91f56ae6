"""Varlen prefill/extend attention over the paged KV cache (chunked prefill and prefix-cache hits).

Sequence b's new tokens are the last (cu_seqlens_q[b+1] - cu_seqlens_q[b]) of its context_lens[b] tokens and
their K/V are already in the cache: each attends to the whole cached prefix and causally to the new tokens.
A program takes a tile of new tokens of one sequence times all query heads of one KV head (rows are
token-major, head-minor), so each K/V tile it reads serves the whole GQA group.
"""

import torch
import triton
import triton.language as tl

from kernels.triton_common import (
    attend_paged_tile,
    check_paged_inputs,
    dot_operands,
    padded_head_dim,
    scale_arguments,
)

LOG2_E = 1.4426950408889634
BLOCK_M = 64  # rows (new token × query head of the group) per program
BLOCK_N = 64  # context tokens per tile


@triton.jit
def _prefill_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    cu_seqlens_q_ptr,
    context_lens_ptr,
    block_tables_ptr,
    out_ptr,
    k_scale_ptr,
    v_scale_ptr,
    num_kv_heads,
    scale_log2,
    stride_q_token,
    stride_q_head,
    stride_k_block,
    stride_k_slot,
    stride_k_head,
    stride_v_block,
    stride_v_slot,
    stride_v_head,
    stride_table_batch,
    stride_out_token,
    stride_out_head,
    GROUP: tl.constexpr,
    TOKENS_PER_TILE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    KV_BLOCK_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    QUANT: tl.constexpr,
):
    tile = tl.program_id(0)
    batch = tl.program_id(1)
    kv_head = tl.program_id(2)
    q_start = tl.load(cu_seqlens_q_ptr + batch)
    q_len = tl.load(cu_seqlens_q_ptr + batch + 1) - q_start
    context_len = tl.load(context_lens_ptr + batch)
    prefix_len = context_len - q_len
    tile_first_token = tile * TOKENS_PER_TILE

    rows = tl.arange(0, BLOCK_M)
    row_token = tile_first_token + rows // GROUP  # index among this sequence's new tokens
    row_head = kv_head * GROUP + rows % GROUP
    row_mask = (rows < TOKENS_PER_TILE * GROUP) & (row_token < q_len)
    query_pos = prefix_len + row_token  # position in the sequence, for the causal mask
    dims = tl.arange(0, BLOCK_D)
    dim_mask = dims < HEAD_DIM
    io_mask = row_mask[:, None] & dim_mask[None, :]
    q_offsets = (q_start + row_token)[:, None].to(tl.int64) * stride_q_token + row_head[
        :, None
    ] * stride_q_head
    q = tl.load(q_ptr + q_offsets + dims[None, :], mask=io_mask, other=0.0)
    q = q.to(tl.float32).to(DOT_DTYPE)  # [BLOCK_M, BLOCK_D]

    running_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    running_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    # Keys up to this tile's last query position; tiles past the sequence's new tokens do no work.
    key_end = tl.minimum(context_len, prefix_len + tile_first_token + TOKENS_PER_TILE)
    key_end = tl.where(tile_first_token < q_len, key_end, 0)
    table_row = block_tables_ptr + batch.to(tl.int64) * stride_table_batch
    for tile_start in range(0, key_end, BLOCK_N):
        keys = tile_start + tl.arange(0, BLOCK_N)
        key_mask = keys < key_end
        # Key 0 is visible to every row, so after the first tile each running max is finite.
        visible = key_mask[None, :] & (keys[None, :] <= query_pos[:, None])  # [BLOCK_M, BLOCK_N]
        acc, running_max, running_sum = attend_paged_tile(
            q,
            keys,
            key_mask,
            visible,
            table_row,
            k_cache_ptr,
            v_cache_ptr,
            kv_head,
            dims,
            dim_mask,
            stride_k_block,
            stride_k_slot,
            stride_k_head,
            stride_v_block,
            stride_v_slot,
            stride_v_head,
            scale_log2,
            acc,
            running_max,
            running_sum,
            KV_BLOCK_SIZE,
            DOT_DTYPE,
            DOT_PRECISION,
            k_scale_ptr,
            v_scale_ptr,
            num_kv_heads,
            QUANT,
        )

    result = acc / tl.where(running_sum > 0, running_sum, 1.0)[:, None]
    out_offsets = (q_start + row_token)[:, None].to(tl.int64) * stride_out_token + row_head[
        :, None
    ] * stride_out_head
    tl.store(
        out_ptr + out_offsets + dims[None, :], result.to(out_ptr.dtype.element_ty), mask=io_mask
    )


def _check_varlen(
    q: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    context_lens: torch.Tensor,
    block_tables: torch.Tensor,
) -> None:
    batch = context_lens.shape[0]
    if cu_seqlens_q.shape != (batch + 1,) or cu_seqlens_q.dtype not in (torch.int32, torch.int64):
        raise ValueError(
            f"cu_seqlens_q is {cu_seqlens_q.dtype} {tuple(cu_seqlens_q.shape)}; "
            f"expected int32 [{batch + 1}]"
        )
    if block_tables.shape[0] != batch:
        raise ValueError(
            f"block_tables has {block_tables.shape[0]} rows; expected one per sequence ({batch})"
        )


def paged_prefill_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    context_lens: torch.Tensor,
    block_tables: torch.Tensor,
    scale: float,
    *,
    max_seqlen_q: int | None = None,
    out: torch.Tensor | None = None,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """Triton twin of `reference.paged_prefill_attention`.

    `max_seqlen_q` (longest new-token run) sizes the grid; when omitted it is read from cu_seqlens_q (a device sync)."""
    # q: [T, Hq, D], cu_seqlens_q: [B+1], context_lens: [B] (prefix + new) -> out [T, Hq, D]
    check_paged_inputs(q, k_cache, v_cache, block_tables, context_lens)
    k_scale, v_scale, quant = scale_arguments(k_cache, v_cache, k_scale, v_scale)
    _check_varlen(q, cu_seqlens_q, context_lens, block_tables)
    num_tokens, num_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    out = torch.empty_like(q) if out is None else out
    if out.shape != q.shape or out.stride(-1) != 1:
        raise ValueError(
            f"out {tuple(out.shape)} must match q {tuple(q.shape)} with unit stride in head_dim"
        )
    batch = context_lens.shape[0]
    if num_tokens == 0 or batch == 0:
        return out
    if max_seqlen_q is None:
        max_seqlen_q = int((cu_seqlens_q[1:] - cu_seqlens_q[:-1]).max())
    group = num_heads // num_kv_heads
    block_m = max(BLOCK_M, triton.next_power_of_2(group))
    tokens_per_tile = block_m // group
    dot_dtype, dot_precision = dot_operands(q.dtype)
    grid = (triton.cdiv(max_seqlen_q, tokens_per_tile), batch, num_kv_heads)
    _prefill_kernel[grid](
        q,
        k_cache,
        v_cache,
        cu_seqlens_q,
        context_lens,
        block_tables,
        out,
        k_scale,
        v_scale,
        num_kv_heads,
        scale * LOG2_E,
        q.stride(0),
        q.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        v_cache.stride(0),
        v_cache.stride(1),
        v_cache.stride(2),
        block_tables.stride(0),
        out.stride(0),
        out.stride(1),
        GROUP=group,
        TOKENS_PER_TILE=tokens_per_tile,
        HEAD_DIM=head_dim,
        BLOCK_D=padded_head_dim(head_dim),
        KV_BLOCK_SIZE=block_size,
        BLOCK_M=block_m,
        BLOCK_N=BLOCK_N,
        DOT_DTYPE=dot_dtype,
        DOT_PRECISION=dot_precision,
        QUANT=quant,
    )
    return out
