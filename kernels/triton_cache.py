"""Write new tokens' K/V into their paged-cache slots (slot = block_id * block_size + offset; -1 = skip)."""
import torch
import triton
import triton.language as tl

from kernels.triton_common import check_cache_pair, padded_head_dim, require_runnable


@triton.jit
def _store_kv_kernel(
    k_ptr, v_ptr, k_cache_ptr, v_cache_ptr, slot_mapping_ptr,
    stride_k_token, stride_k_head, stride_v_token, stride_v_head,
    stride_kc_block, stride_kc_slot, stride_kc_head,
    stride_vc_block, stride_vc_slot, stride_vc_head,
    NUM_KV_HEADS: tl.constexpr, BLOCK_HKV: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
    KV_BLOCK_SIZE: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_mapping_ptr + token).to(tl.int64)
    heads = tl.arange(0, BLOCK_HKV)
    dims = tl.arange(0, BLOCK_D)
    slot_2d = tl.zeros([BLOCK_HKV, BLOCK_D], tl.int64) + slot  # a tensor mask: the interpreter rejects scalar ones
    mask = (heads[:, None] < NUM_KV_HEADS) & (dims[None, :] < HEAD_DIM) & (slot_2d >= 0)
    block = slot // KV_BLOCK_SIZE
    offset = slot % KV_BLOCK_SIZE
    k = tl.load(k_ptr + token * stride_k_token + heads[:, None] * stride_k_head + dims[None, :], mask=mask)
    v = tl.load(v_ptr + token * stride_v_token + heads[:, None] * stride_v_head + dims[None, :], mask=mask)
    k_dest = block * stride_kc_block + offset * stride_kc_slot + heads[:, None] * stride_kc_head + dims[None, :]
    v_dest = block * stride_vc_block + offset * stride_vc_slot + heads[:, None] * stride_vc_head + dims[None, :]
    tl.store(k_cache_ptr + k_dest, k, mask=mask)
    tl.store(v_cache_ptr + v_dest, v, mask=mask)


def _check_store_inputs(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                        slot_mapping: torch.Tensor) -> None:
    require_runnable(k, "k")
    check_cache_pair(k_cache, v_cache)
    if k.dim() != 3 or k.shape != v.shape or k.shape[1:] != k_cache.shape[2:]:
        raise ValueError(f"k {tuple(k.shape)} / v {tuple(v.shape)} do not fit cache {tuple(k_cache.shape)}: "
                         "expected [num_tokens, num_kv_heads, head_dim]")
    if slot_mapping.shape != (k.shape[0],) or slot_mapping.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"slot_mapping is {slot_mapping.dtype} {tuple(slot_mapping.shape)}; "
                         f"expected int64 [{k.shape[0]}]")
    for name, tensor in (("k", k), ("v", v), ("k_cache", k_cache), ("v_cache", v_cache)):
        if tensor.stride(-1) != 1:
            raise ValueError(f"{name} has stride {tensor.stride(-1)} in head_dim; expected 1 (call .contiguous())")
    if slot_mapping.numel() and not slot_mapping.is_contiguous():
        raise ValueError("slot_mapping must be contiguous")


def store_kv_cache(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                   slot_mapping: torch.Tensor) -> None:
    """Triton twin of `reference.store_kv_cache`: one program per token writes all its KV heads."""
    # k, v: [num_tokens, num_kv_heads, head_dim]; k_cache, v_cache: [num_blocks, block_size, num_kv_heads, head_dim]
    _check_store_inputs(k, v, k_cache, v_cache, slot_mapping)
    num_tokens, num_kv_heads, head_dim = k.shape
    if num_tokens == 0:
        return
    # A plain copy in the kernel; converting here rounds to nearest like torch (the interpreter's in-kernel
    # fp32 -> bf16 cast truncates instead).
    k, v = k.to(k_cache.dtype), v.to(v_cache.dtype)
    _store_kv_kernel[(num_tokens,)](
        k, v, k_cache, v_cache, slot_mapping,
        k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        NUM_KV_HEADS=num_kv_heads, BLOCK_HKV=triton.next_power_of_2(num_kv_heads), HEAD_DIM=head_dim,
        BLOCK_D=padded_head_dim(head_dim), KV_BLOCK_SIZE=k_cache.shape[1],
    )
