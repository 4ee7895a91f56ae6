"""The one dispatch point: Triton kernels on CUDA tensors, the torch twins everywhere else.

Set SURGEPLAN_KERNELS=reference to force the twins (debugging), or =triton to force Triton
(on the CPU this needs TRITON_INTERPRET=1).
"""

import os

import torch

from kernels import reference


def kernel_backend(tensor: torch.Tensor) -> str:
    forced = os.environ.get("SURGEPLAN_KERNELS", "auto")
    if forced not in ("auto", "reference", "triton"):
        raise ValueError(f"SURGEPLAN_KERNELS={forced!r}; expected auto, reference or triton")
    if forced != "auto":
        return forced
    return "triton" if tensor.is_cuda and _triton_available() else "reference"


def _triton_available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def _impl(name: str, tensor: torch.Tensor):
    if kernel_backend(tensor) == "triton":
        from kernels import triton_ops  # imported lazily: only where Triton runs

        return getattr(triton_ops, name)
    return getattr(reference, name)


def store_kv_cache(k, v, k_cache, v_cache, slot_mapping, k_scale=None, v_scale=None) -> None:
    """k_scale / v_scale: None for a cache in the model dtype, else its scales (kernels.kv_quant)."""
    _impl("store_kv_cache", k)(
        k, v, k_cache, v_cache, slot_mapping, k_scale=k_scale, v_scale=v_scale
    )


def paged_decode_attention(
    q, k_cache, v_cache, block_tables, context_lens, scale, k_scale=None, v_scale=None
):
    return _impl("paged_decode_attention", q)(
        q, k_cache, v_cache, block_tables, context_lens, scale, k_scale=k_scale, v_scale=v_scale
    )


def paged_prefill_attention(
    q, k_cache, v_cache, cu_seqlens_q, context_lens, block_tables, scale, k_scale=None, v_scale=None
):
    return _impl("paged_prefill_attention", q)(
        q,
        k_cache,
        v_cache,
        cu_seqlens_q,
        context_lens,
        block_tables,
        scale,
        k_scale=k_scale,
        v_scale=v_scale,
    )
