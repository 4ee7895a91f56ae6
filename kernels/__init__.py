"""Paged-attention kernels: Triton on CUDA, torch reference twins elsewhere, chosen in `dispatch`."""

from kernels.dispatch import (
    kernel_backend,
    paged_decode_attention,
    paged_prefill_attention,
    store_kv_cache,
)

__all__ = ["kernel_backend", "paged_decode_attention", "paged_prefill_attention", "store_kv_cache"]
