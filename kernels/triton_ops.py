"""The Triton kernels under the names `kernels.dispatch` looks up (twins of `kernels.reference`)."""

from kernels.triton_cache import store_kv_cache
from kernels.triton_decode import paged_decode_attention
from kernels.triton_prefill import paged_prefill_attention

__all__ = ["paged_decode_attention", "paged_prefill_attention", "store_kv_cache"]
