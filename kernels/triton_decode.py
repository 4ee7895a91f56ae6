"""Flash-decoding over the paged KV cache: split-KV partial outputs, then a log-sum-exp merge.

One program of the first kernel reads one KV head's slice of one sequence's context once and serves all the
query heads of that KV head (GQA), so KV bytes are read exactly once. Splitting the context across programs
keeps the GPU full when the batch is small and the context long.
"""

import math

import torch
import triton
import triton.language as tl

from kernels.triton_common import (
    attend_paged_tile,
    check_paged_inputs,
    dot_operands,
    num_multiprocessors,
    padded_head_dim,
    scale_arguments,
)

LOG2_E = 1.4426950408889634  # scores are kept in base 2 so the kernel can use exp2
BLOCK_N = 64  # context tokens per tile
MIN_TOKENS_PER_SPLIT = 256  # below this a split's fixed costs outweigh the parallelism it adds
MAX_SPLITS = 64
WAVES = 2  # programs per multiprocessor to aim for


@triton.jit
def _decode_split_kernel(
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    context_lens_ptr,
    partial_out_ptr,
    partial_lse_ptr,
    k_scale_ptr,
    v_scale_ptr,
    num_kv_heads,
    scale_log2,
    tokens_per_split,
    stride_q_batch,
    stride_q_head,
    stride_k_block,
    stride_k_slot,
    stride_k_head,
    stride_v_block,
    stride_v_slot,
    stride_v_head,
    stride_table_batch,
    stride_po_batch,
    stride_po_head,
    stride_po_split,
    stride_lse_batch,
    stride_lse_head,
    GROUP: tl.constexpr,
    BLOCK_H: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    KV_BLOCK_SIZE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    QUANT: tl.constexpr,
):
    batch = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    context_len = tl.load(context_lens_ptr + batch)
    split_start = split * tokens_per_split
    split_end = tl.minimum(split_start + tokens_per_split, context_len)

    heads = tl.arange(0, BLOCK_H)  # query heads of this KV head, padded to tl.dot's minimum
    dims = tl.arange(0, BLOCK_D)
    head_mask = heads < GROUP
    dim_mask = dims < HEAD_DIM
    q_heads = kv_head * GROUP + heads
    q_offsets = batch * stride_q_batch + q_heads[:, None] * stride_q_head + dims[None, :]
    q = tl.load(q_ptr + q_offsets, mask=head_mask[:, None] & dim_mask[None, :], other=0.0)
    q = q.to(tl.float32).to(DOT_DTYPE)  # [BLOCK_H, BLOCK_D]

    running_max = tl.full([BLOCK_H], float("-inf"), tl.float32)
    running_sum = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_D], tl.float32)
    table_row = block_tables_ptr + batch.to(tl.int64) * stride_table_batch
    for tile_start in range(split_start, split_end, BLOCK_N):
        tokens = tile_start + tl.arange(0, BLOCK_N)
        token_mask = tokens < split_end
        acc, running_max, running_sum = attend_paged_tile(
            q,
            tokens,
            token_mask,
            token_mask[None, :],
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

    # A split past this sequence's context stores lse = -inf, which gives it weight 0 in the merge.
    has_tokens = running_sum > 0
    partial = acc / tl.where(has_tokens, running_sum, 1.0)[:, None]
    lse = tl.where(
        has_tokens, running_max + tl.log2(tl.where(has_tokens, running_sum, 1.0)), float("-inf")
    )
    po_offsets = (
        batch * stride_po_batch
        + q_heads[:, None] * stride_po_head
        + split * stride_po_split
        + dims[None, :]
    )
    tl.store(partial_out_ptr + po_offsets, partial, mask=head_mask[:, None] & dim_mask[None, :])
    lse_offsets = batch * stride_lse_batch + q_heads * stride_lse_head + split
    tl.store(partial_lse_ptr + lse_offsets, lse, mask=head_mask)


@triton.jit
def _decode_merge_kernel(
    partial_out_ptr,
    partial_lse_ptr,
    out_ptr,
    num_splits,
    stride_po_batch,
    stride_po_head,
    stride_po_split,
    stride_lse_batch,
    stride_lse_head,
    stride_out_batch,
    stride_out_head,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    batch = tl.program_id(0)
    head = tl.program_id(1)
    splits = tl.arange(0, BLOCK_S)
    dims = tl.arange(0, BLOCK_D)
    split_mask = splits < num_splits
    dim_mask = dims < HEAD_DIM
    lse = tl.load(
        partial_lse_ptr + batch * stride_lse_batch + head * stride_lse_head + splits,
        mask=split_mask,
        other=float("-inf"),
    )  # [BLOCK_S], log2 domain
    weights = tl.exp2(lse - tl.max(lse, 0))  # split 0 always holds ≥ 1 token, so the max is finite
    po_offsets = (
        batch * stride_po_batch
        + head * stride_po_head
        + splits[:, None] * stride_po_split
        + dims[None, :]
    )
    partial = tl.load(
        partial_out_ptr + po_offsets, mask=split_mask[:, None] & dim_mask[None, :], other=0.0
    )
    merged = tl.sum(weights[:, None] * partial, 0) / tl.sum(weights, 0)  # [BLOCK_D]
    tl.store(
        out_ptr + batch * stride_out_batch + head * stride_out_head + dims,
        merged.to(out_ptr.dtype.element_ty),
        mask=dim_mask,
    )


def choose_num_splits(batch: int, num_kv_heads: int, max_context_tokens: int, num_sms: int) -> int:
    """Enough splits that batch × KV heads × splits fills the GPU, but no split shorter than MIN_TOKENS_PER_SPLIT."""
    wanted = math.ceil(WAVES * num_sms / max(1, batch * num_kv_heads))
    allowed = math.ceil(max_context_tokens / MIN_TOKENS_PER_SPLIT)
    return max(1, min(wanted, allowed, MAX_SPLITS))


def split_layout(max_context_tokens: int, num_splits: int) -> tuple[int, int]:
    """(tokens per split rounded up to whole tiles, splits actually needed to cover the context)."""
    tokens_per_split = triton.cdiv(triton.cdiv(max_context_tokens, num_splits), BLOCK_N) * BLOCK_N
    return tokens_per_split, triton.cdiv(max_context_tokens, tokens_per_split)


def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
    scale: float,
    *,
    num_splits: int | None = None,
    out: torch.Tensor | None = None,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """Triton twin of `reference.paged_decode_attention`; context_lens[b] ≥ 1 for every sequence.

    The longest context is bounded by block_tables' width (no device sync), so callers should pass tables
    trimmed to the batch's longest sequence. `num_splits` overrides the automatic choice (tests, benchmarks)."""
    # q: [B, Hq, D], k_cache/v_cache: [N, block_size, Hkv, D] -> out [B, Hq, D]
    check_paged_inputs(q, k_cache, v_cache, block_tables, context_lens)
    k_scale, v_scale, quant = scale_arguments(k_cache, v_cache, k_scale, v_scale)
    batch, num_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    if block_tables.shape[0] != batch or context_lens.shape != (batch,):
        raise ValueError(
            f"block_tables {tuple(block_tables.shape)} / context_lens {tuple(context_lens.shape)} "
            f"do not match batch {batch}"
        )
    out = torch.empty_like(q) if out is None else out
    if out.shape != q.shape or out.stride(-1) != 1:
        raise ValueError(
            f"out {tuple(out.shape)} must match q {tuple(q.shape)} with unit stride in head_dim"
        )
    if batch == 0:
        return out
    max_context_tokens = block_tables.shape[1] * block_size
    if max_context_tokens == 0:
        raise ValueError(
            f"block_tables {tuple(block_tables.shape)} has no columns; every sequence needs ≥ 1 block"
        )
    if num_splits is None:
        num_splits = choose_num_splits(
            batch, num_kv_heads, max_context_tokens, num_multiprocessors(q.device)
        )
    tokens_per_split, num_splits = split_layout(max_context_tokens, num_splits)

    partial_out = torch.empty(
        batch, num_heads, num_splits, head_dim, dtype=torch.float32, device=q.device
    )
    partial_lse = torch.empty(batch, num_heads, num_splits, dtype=torch.float32, device=q.device)
    group = num_heads // num_kv_heads
    block_d = padded_head_dim(head_dim)
    dot_dtype, dot_precision = dot_operands(q.dtype)
    _decode_split_kernel[(batch, num_kv_heads, num_splits)](
        q,
        k_cache,
        v_cache,
        block_tables,
        context_lens,
        partial_out,
        partial_lse,
        k_scale,
        v_scale,
        num_kv_heads,
        scale * LOG2_E,
        tokens_per_split,
        q.stride(0),
        q.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        v_cache.stride(0),
        v_cache.stride(1),
        v_cache.stride(2),
        block_tables.stride(0),
        partial_out.stride(0),
        partial_out.stride(1),
        partial_out.stride(2),
        partial_lse.stride(0),
        partial_lse.stride(1),
        GROUP=group,
        BLOCK_H=max(16, triton.next_power_of_2(group)),
        HEAD_DIM=head_dim,
        BLOCK_D=block_d,
        KV_BLOCK_SIZE=block_size,
        BLOCK_N=BLOCK_N,
        DOT_DTYPE=dot_dtype,
        DOT_PRECISION=dot_precision,
        QUANT=quant,
    )
    _decode_merge_kernel[(batch, num_heads)](
        partial_out,
        partial_lse,
        out,
        num_splits,
        partial_out.stride(0),
        partial_out.stride(1),
        partial_out.stride(2),
        partial_lse.stride(0),
        partial_lse.stride(1),
        out.stride(0),
        out.stride(1),
        HEAD_DIM=head_dim,
        BLOCK_D=block_d,
        BLOCK_S=max(2, triton.next_power_of_2(num_splits)),
    )
    return out
