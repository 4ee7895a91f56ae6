"""What the Triton kernel files share: where they may run, how dot products are computed, shape checks."""

import functools
import os

import torch
import triton
import triton.language as tl

from kernels.kv_quant import quant_mode

_DOT_DTYPES = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}


def interpreting() -> bool:
    """True when Triton runs kernels through its numpy interpreter (CPU tests).

    Triton reads the variable when a kernel is decorated, so it must be set before `kernels.triton_*` is imported."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def require_runnable(tensor: torch.Tensor, name: str) -> None:
    if not tensor.is_cuda and not interpreting():
        raise ValueError(
            f"{name} is on {tensor.device}; the Triton kernels need a CUDA tensor, or TRITON_INTERPRET=1 "
            "set before importing kernels (or SURGEPLAN_KERNELS=reference for the torch twins)"
        )


def dot_operands(dtype: torch.dtype) -> tuple[tl.dtype, str]:
    """(operand dtype, input_precision) for tl.dot on inputs of `dtype`.

    The interpreter's bf16/fp16 arithmetic is not faithful, so there every operand is fp32. fp32 inputs use IEEE
    products because TF32 would drop them to a 10-bit mantissa. On the GPU fp16/bf16 operands stay in their dtype
    (tensor cores) with fp32 accumulation."""
    if dtype not in _DOT_DTYPES:
        raise ValueError(f"dtype {dtype} is not supported; expected one of {list(_DOT_DTYPES)}")
    if interpreting() or dtype == torch.float32:
        return tl.float32, "ieee"
    return _DOT_DTYPES[dtype], "tf32"


@functools.cache
def num_multiprocessors(device: torch.device) -> int:
    """Streaming multiprocessors to fill; the interpreter runs programs one by one, so a few suffice there."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def padded_head_dim(head_dim: int) -> int:
    if head_dim < 16:
        raise ValueError(
            f"head_dim is {head_dim}; the Triton kernels need head_dim ≥ 16 (tl.dot's minimum)"
        )
    return triton.next_power_of_2(head_dim)


def check_cache_pair(k_cache: torch.Tensor, v_cache: torch.Tensor) -> None:
    if k_cache.dim() != 4 or k_cache.shape != v_cache.shape:
        raise ValueError(
            f"k_cache {tuple(k_cache.shape)} / v_cache {tuple(v_cache.shape)}: expected equal "
            "[num_blocks, block_size, num_kv_heads, head_dim]"
        )


def check_paged_inputs(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    context_lens: torch.Tensor,
) -> None:
    """Shapes, dtypes and unit strides at the kernel boundary (the kernels index the last dim with stride 1)."""
    require_runnable(q, "q")
    check_cache_pair(k_cache, v_cache)
    if q.shape[-1] != k_cache.shape[-1] or q.shape[-2] % k_cache.shape[2] != 0:
        raise ValueError(
            f"q {tuple(q.shape)} does not fit cache {tuple(k_cache.shape)}: expected head_dim "
            f"{k_cache.shape[-1]} and a multiple of {k_cache.shape[2]} query heads"
        )
    for name, tensor in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if tensor.stride(-1) != 1:
            raise ValueError(
                f"{name} has stride {tensor.stride(-1)} in head_dim; expected 1 (call .contiguous())"
            )
    if block_tables.dtype not in (torch.int32, torch.int64) or block_tables.dim() != 2:
        raise ValueError(
            f"block_tables is {block_tables.dtype} {tuple(block_tables.shape)}; "
            "expected int32 [batch, max_blocks]"
        )
    if block_tables.stride(-1) != 1:
        raise ValueError("block_tables must be contiguous in its last dim")
    if context_lens.dim() != 1 or context_lens.dtype not in (torch.int32, torch.int64):
        raise ValueError(
            f"context_lens is {context_lens.dtype} {tuple(context_lens.shape)}; expected int32 [batch]"
        )


@triton.jit
def _dequantise(x, scale_ptr, physical_block, kv_head, num_kv_heads, key_mask, QUANT: tl.constexpr):
    """x [N, D] float32 read from the cache -> values (scale [1], or [num_blocks, num_kv_heads] row-major)."""
    if QUANT == 1:
        x = x * tl.load(scale_ptr)
    elif QUANT == 2:
        scales = tl.load(
            scale_ptr + physical_block * num_kv_heads + kv_head, mask=key_mask, other=0.0
        )  # [N]
        x = x * scales[:, None]
    return x


def scale_arguments(
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    k_scale: torch.Tensor | None,
    v_scale: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(k_scale, v_scale, QUANT) for the attention kernels, with shapes asserted; an unquantised cache passes
    its own tensors as never-read placeholders."""
    mode = quant_mode(k_cache, k_scale, "k_scale")
    if quant_mode(v_cache, v_scale, "v_scale") != mode:
        raise ValueError(
            f"k_cache is {k_cache.dtype} but v_cache is {v_cache.dtype}; expected one dtype"
        )
    if mode == 0:
        return k_cache, v_cache, 0
    return k_scale, v_scale, mode


@triton.jit
def attend_paged_tile(
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
    KV_BLOCK_SIZE: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    k_scale_ptr,
    v_scale_ptr,
    num_kv_heads,
    QUANT: tl.constexpr,
):
    """One online-softmax step over a tile of paged keys: q [M, D] against the keys at positions `keys` [N]
    (found through the block table), `visible` [M, N] masking what each query row may see.
    A quantised cache is dequantised on load (QUANT 1: × a per-tensor scale; 2: × its block and head's).
    Returns the updated (acc [M, D], running_max [M], running_sum [M]), in base-2 exponent space."""
    physical_block = tl.load(table_row + keys // KV_BLOCK_SIZE, mask=key_mask, other=0).to(tl.int64)
    slot = keys % KV_BLOCK_SIZE
    kv_mask = key_mask[:, None] & dim_mask[None, :]
    k_offsets = (
        physical_block[:, None] * stride_k_block
        + slot[:, None] * stride_k_slot
        + kv_head * stride_k_head
        + dims[None, :]
    )
    k = tl.where(
        kv_mask, tl.load(k_cache_ptr + k_offsets, mask=kv_mask).to(tl.float32), 0.0
    )  # [N, D]
    k = _dequantise(k, k_scale_ptr, physical_block, kv_head, num_kv_heads, key_mask, QUANT)
    scores = (
        tl.dot(q, tl.trans(k.to(DOT_DTYPE)), input_precision=DOT_PRECISION) * scale_log2
    )  # [M, N]
    scores = tl.where(visible, scores, float("-inf"))
    tile_max = tl.maximum(running_max, tl.max(scores, 1))
    rescale = tl.exp2(running_max - tile_max)
    probs = tl.exp2(scores - tile_max[:, None])
    running_sum = running_sum * rescale + tl.sum(probs, 1)
    v_offsets = (
        physical_block[:, None] * stride_v_block
        + slot[:, None] * stride_v_slot
        + kv_head * stride_v_head
        + dims[None, :]
    )
    v = tl.where(
        kv_mask, tl.load(v_cache_ptr + v_offsets, mask=kv_mask).to(tl.float32), 0.0
    )  # [N, D]
    v = _dequantise(v, v_scale_ptr, physical_block, kv_head, num_kv_heads, key_mask, QUANT)
    acc = acc * rescale[:, None] + tl.dot(
        probs.to(DOT_DTYPE), v.to(DOT_DTYPE), input_precision=DOT_PRECISION
    )
    return acc, tile_max, running_sum
