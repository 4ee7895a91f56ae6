"""Write new tokens' K/V into their paged-cache slots (slot = block_id * block_size + offset; -1 =
skip),
quantising into an fp8 cache (per-tensor scale) or an int8 cache (scale per block and KV head), as
`kernels.kv_quant` describes; the scales themselves are updated by its torch steps before the
kernel."""

import torch
import triton
import triton.language as tl

from kernels.kv_quant import (
    INT8_MAX,
    K_SCALE_CONSTANT,
    V_SCALE_CONSTANT,
    calibrate_fp8_scale_,
    int8_scale_update_,
    quant_mode,
)
from kernels.triton_common import check_cache_pair, padded_head_dim, require_runnable

# fp8 storage grids: (mantissa bits, smallest normal exponent)
FP8_GRID = {torch.float8_e4m3fn: (3, -6), torch.float8_e5m2: (2, -14)}


@triton.jit
def _quantise(
    x,
    scale,
    QUANT: tl.constexpr,
    LIMIT: tl.constexpr,
    MANT_BITS: tl.constexpr,
    MIN_EXP: tl.constexpr,
):
    """x [H, D] float32 / scale (a scalar, or [H, 1]), clipped to ±LIMIT and rounded onto the
    storage grid:
    int8 half up; fp8 to the nearest value with MANT_BITS mantissa bits (normal exponents ≥
    MIN_EXP), so the
    cast after it is exact (the interpreter's fp32 -> fp8 cast does not carry a rounding into the
    exponent)."""
    y = tl.minimum(tl.maximum(x / scale, -LIMIT), LIMIT)
    if QUANT == 2:
        y = tl.floor(y + 0.5)
    else:
        exponent = tl.maximum(tl.floor(tl.log2(tl.abs(y))), MIN_EXP)
        step = tl.exp2(exponent - MANT_BITS)
        y = tl.floor(y / step + 0.5) * step
    return y


@triton.jit
def _store_one(
    x_ptr,
    cache_ptr,
    scale_ptr,
    old_ptr,
    new_ptr,
    token,
    block,
    offset,
    rows_to_requant,
    stride_x_token,
    stride_x_head,
    stride_c_block,
    stride_c_slot,
    stride_c_head,
    heads,
    dims,
    mask,
    NUM_KV_HEADS: tl.constexpr,
    QUANT: tl.constexpr,
    LIMIT: tl.constexpr,
    MANT_BITS: tl.constexpr,
    MIN_EXP: tl.constexpr,
):
    x = tl.load(
        x_ptr + token * stride_x_token + heads[:, None] * stride_x_head + dims[None, :], mask=mask
    )
    head_offsets = block * stride_c_block + heads[:, None] * stride_c_head + dims[None, :]
    dest = head_offsets + offset * stride_c_slot
    if QUANT == 0:
        tl.store(cache_ptr + dest, x, mask=mask)
    elif QUANT == 1:
        scale = tl.load(scale_ptr)
        y = _quantise(x.to(tl.float32), scale, QUANT, LIMIT, MANT_BITS, MIN_EXP)
        tl.store(cache_ptr + dest, y.to(cache_ptr.dtype.element_ty), mask=mask)
    else:
        head_mask = heads < NUM_KV_HEADS
        new = tl.load(new_ptr + token * NUM_KV_HEADS + heads, mask=head_mask, other=1.0)  # [H]
        old = tl.load(old_ptr + token * NUM_KV_HEADS + heads, mask=head_mask, other=1.0)
        ratio = (old / new)[:, None]
        for row in range(0, rows_to_requant):  # earlier rows of the block move to its raised scale
            stored = tl.load(cache_ptr + head_offsets + row * stride_c_slot, mask=mask, other=0).to(
                tl.float32
            )
            requant = _quantise(stored * ratio, 1.0, QUANT, LIMIT, MANT_BITS, MIN_EXP)
            tl.store(cache_ptr + head_offsets + row * stride_c_slot, requant.to(tl.int8), mask=mask)
        y = _quantise(x.to(tl.float32), new[:, None], QUANT, LIMIT, MANT_BITS, MIN_EXP)
        tl.store(cache_ptr + dest, y.to(tl.int8), mask=mask)


@triton.jit
def _store_kv_kernel(
    k_ptr,
    v_ptr,
    k_cache_ptr,
    v_cache_ptr,
    slot_mapping_ptr,
    k_scale_ptr,
    v_scale_ptr,
    k_old_ptr,
    k_new_ptr,
    v_old_ptr,
    v_new_ptr,
    requant_rows_ptr,
    stride_k_token,
    stride_k_head,
    stride_v_token,
    stride_v_head,
    stride_kc_block,
    stride_kc_slot,
    stride_kc_head,
    stride_vc_block,
    stride_vc_slot,
    stride_vc_head,
    NUM_KV_HEADS: tl.constexpr,
    BLOCK_HKV: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    KV_BLOCK_SIZE: tl.constexpr,
    QUANT: tl.constexpr,
    LIMIT: tl.constexpr,
    MANT_BITS: tl.constexpr,
    MIN_EXP: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_mapping_ptr + token).to(tl.int64)
    heads = tl.arange(0, BLOCK_HKV)
    dims = tl.arange(0, BLOCK_D)
    slot_2d = (
        tl.zeros([BLOCK_HKV, BLOCK_D], tl.int64) + slot
    )  # a tensor mask: the interpreter rejects scalar ones
    mask = (heads[:, None] < NUM_KV_HEADS) & (dims[None, :] < HEAD_DIM) & (slot_2d >= 0)
    block = slot // KV_BLOCK_SIZE
    offset = slot % KV_BLOCK_SIZE
    rows_to_requant = 0
    if QUANT == 2:
        rows_to_requant = tl.load(requant_rows_ptr + token)
    _store_one(
        k_ptr,
        k_cache_ptr,
        k_scale_ptr,
        k_old_ptr,
        k_new_ptr,
        token,
        block,
        offset,
        rows_to_requant,
        stride_k_token,
        stride_k_head,
        stride_kc_block,
        stride_kc_slot,
        stride_kc_head,
        heads,
        dims,
        mask,
        NUM_KV_HEADS,
        QUANT,
        LIMIT,
        MANT_BITS,
        MIN_EXP,
    )
    _store_one(
        v_ptr,
        v_cache_ptr,
        v_scale_ptr,
        v_old_ptr,
        v_new_ptr,
        token,
        block,
        offset,
        rows_to_requant,
        stride_v_token,
        stride_v_head,
        stride_vc_block,
        stride_vc_slot,
        stride_vc_head,
        heads,
        dims,
        mask,
        NUM_KV_HEADS,
        QUANT,
        LIMIT,
        MANT_BITS,
        MIN_EXP,
    )


def _check_store_inputs(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    require_runnable(k, "k")
    check_cache_pair(k_cache, v_cache)
    if k.dim() != 3 or k.shape != v.shape or k.shape[1:] != k_cache.shape[2:]:
        raise ValueError(
            f"k {tuple(k.shape)} / v {tuple(v.shape)} do not fit cache {tuple(k_cache.shape)}: "
            "expected [num_tokens, num_kv_heads, head_dim]"
        )
    if slot_mapping.shape != (k.shape[0],) or slot_mapping.dtype not in (torch.int32, torch.int64):
        raise ValueError(
            f"slot_mapping is {slot_mapping.dtype} {tuple(slot_mapping.shape)}; "
            f"expected int64 [{k.shape[0]}]"
        )
    for name, tensor in (("k", k), ("v", v), ("k_cache", k_cache), ("v_cache", v_cache)):
        if tensor.stride(-1) != 1:
            raise ValueError(
                f"{name} has stride {tensor.stride(-1)} in head_dim; expected 1 (call .contiguous())"
            )
    if slot_mapping.numel() and not slot_mapping.is_contiguous():
        raise ValueError("slot_mapping must be contiguous")


def store_kv_cache(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> None:
    """Triton twin of `reference.store_kv_cache`: one program per token writes all its KV heads."""
    # k, v: [num_tokens, num_kv_heads, head_dim]; k_cache, v_cache: [num_blocks, block_size,
    # num_kv_heads, head_dim]
    _check_store_inputs(k, v, k_cache, v_cache, slot_mapping)
    mode = quant_mode(k_cache, k_scale, "k_scale")
    if quant_mode(v_cache, v_scale, "v_scale") != mode:
        raise ValueError(
            f"k_cache is {k_cache.dtype} but v_cache is {v_cache.dtype}; expected one dtype"
        )
    num_tokens, num_kv_heads, head_dim = k.shape
    if num_tokens == 0:
        return
    unused = slot_mapping  # a placeholder pointer for arguments a mode does not read
    k_old = k_new = v_old = v_new = requant_rows = unused
    if mode == 0:
        # A plain copy in the kernel; converting here rounds to nearest like torch (the
        # interpreter's in-kernel
        # fp32 -> bf16 cast truncates instead).
        k, v = k.to(k_cache.dtype), v.to(v_cache.dtype)
        k_scale = v_scale = unused
        limit, mant_bits, min_exp = 0.0, 0, 0
    elif mode == 1:
        calibrate_fp8_scale_(k_scale, k, slot_mapping, K_SCALE_CONSTANT)
        calibrate_fp8_scale_(v_scale, v, slot_mapping, V_SCALE_CONSTANT)
        limit = torch.finfo(k_cache.dtype).max
        mant_bits, min_exp = FP8_GRID[k_cache.dtype]
    else:
        k_update = int8_scale_update_(k_scale, k, slot_mapping, k_cache.shape[1])
        v_update = int8_scale_update_(v_scale, v, slot_mapping, v_cache.shape[1])
        k_old, k_new = k_update.old_scale.contiguous(), k_update.new_scale.contiguous()  # [T, Hkv]
        v_old, v_new = v_update.old_scale.contiguous(), v_update.new_scale.contiguous()
        requant_rows = k_update.requant_rows  # [T]: the same for K and V
        limit, mant_bits, min_exp = INT8_MAX, 0, 0
    _store_kv_kernel[(num_tokens,)](
        k,
        v,
        k_cache,
        v_cache,
        slot_mapping,
        k_scale,
        v_scale,
        k_old,
        k_new,
        v_old,
        v_new,
        requant_rows,
        k.stride(0),
        k.stride(1),
        v.stride(0),
        v.stride(1),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        v_cache.stride(0),
        v_cache.stride(1),
        v_cache.stride(2),
        NUM_KV_HEADS=num_kv_heads,
        BLOCK_HKV=triton.next_power_of_2(num_kv_heads),
        HEAD_DIM=head_dim,
        BLOCK_D=padded_head_dim(head_dim),
        KV_BLOCK_SIZE=k_cache.shape[1],
        QUANT=mode,
        LIMIT=limit,
        MANT_BITS=mant_bits,
        MIN_EXP=min_exp,
    )
