"""Triton store_kv_cache under the interpreter vs its torch twin and a slot-by-slot check."""

import os

os.environ.setdefault(
    "TRITON_INTERPRET", "1"
)  # before triton is imported, so kernels are interpreted

import pytest  # noqa: E402
import torch  # noqa: E402
from kernels_oracle import random_cache  # noqa: E402

from kernels import reference, triton_cache  # noqa: E402

# (token dtype, cache dtype, KV heads, head_dim, block size): non-power-of-two heads and head_dim exercise
# the masks; fp32 tokens into a bf16 cache exercise the conversion.
CASES = [
    (torch.float32, torch.float32, 2, 32, 16),
    (torch.float16, torch.float16, 3, 48, 32),
    (torch.bfloat16, torch.bfloat16, 1, 64, 16),
    (torch.float32, torch.bfloat16, 8, 32, 32),
]


def _slot_mapping(num_tokens: int, num_slots: int, generator: torch.Generator) -> torch.Tensor:
    """Distinct random slots, about a quarter of the tokens skipped with -1."""
    slots = torch.randperm(num_slots, generator=generator)[:num_tokens]
    skipped = torch.rand(num_tokens, generator=generator) < 0.25
    skipped[0] = True  # at least one skip whatever the draw
    return torch.where(skipped, -1, slots)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-to-{c[1]}-h{c[2]}-d{c[3]}-bs{c[4]}")
def test_store_writes_exactly_the_mapped_slots(case):
    token_dtype, cache_dtype, num_kv_heads, head_dim, block_size = case
    generator = torch.Generator().manual_seed(num_kv_heads * 1000 + head_dim)
    k_cache, v_cache = random_cache(5, block_size, num_kv_heads, head_dim, cache_dtype, generator)
    num_tokens = 2 * block_size + 3
    k = torch.randn(num_tokens, num_kv_heads, head_dim, generator=generator).to(token_dtype)
    v = torch.randn(num_tokens, num_kv_heads, head_dim, generator=generator).to(token_dtype)
    slot_mapping = _slot_mapping(num_tokens, 5 * block_size, generator)
    twin_k, twin_v = k_cache.clone(), v_cache.clone()
    before_k, before_v = k_cache.clone(), v_cache.clone()

    triton_cache.store_kv_cache(k, v, k_cache, v_cache, slot_mapping)

    reference.store_kv_cache(k, v, twin_k, twin_v, slot_mapping)
    assert torch.equal(k_cache, twin_k) and torch.equal(v_cache, twin_v)
    flat_k, flat_v = (
        k_cache.view(-1, num_kv_heads, head_dim),
        v_cache.view(-1, num_kv_heads, head_dim),
    )
    written = set()
    for token, slot in enumerate(slot_mapping.tolist()):
        if slot >= 0:
            assert torch.equal(flat_k[slot], k[token].to(cache_dtype)), (
                f"token {token} K not in slot {slot}"
            )
            assert torch.equal(flat_v[slot], v[token].to(cache_dtype)), (
                f"token {token} V not in slot {slot}"
            )
            written.add(slot)
    untouched = [s for s in range(flat_k.shape[0]) if s not in written]
    assert torch.equal(flat_k[untouched], before_k.view_as(flat_k)[untouched])
    assert torch.equal(flat_v[untouched], before_v.view_as(flat_v)[untouched])


def test_store_accepts_strided_token_views_and_int32_slots():
    """K/V sliced out of a fused projection (token stride larger than heads × dim) with int32 slots."""
    generator = torch.Generator().manual_seed(3)
    k_cache, v_cache = random_cache(3, 16, 2, 32, torch.float32, generator)
    kv = torch.randn(10, 4, 32, generator=generator)
    k, v = kv[:, :2], kv[:, 2:]
    slot_mapping = _slot_mapping(10, 48, generator).to(torch.int32)
    twin_k, twin_v = k_cache.clone(), v_cache.clone()
    triton_cache.store_kv_cache(k, v, k_cache, v_cache, slot_mapping)
    reference.store_kv_cache(k, v, twin_k, twin_v, slot_mapping)
    assert torch.equal(k_cache, twin_k) and torch.equal(v_cache, twin_v)


def test_store_rejects_tokens_that_do_not_fit_the_cache():
    k_cache = torch.randn(2, 16, 2, 32)
    k = torch.randn(4, 3, 32)
    with pytest.raises(ValueError, match="do not fit cache"):
        triton_cache.store_kv_cache(k, k, k_cache, k_cache, torch.zeros(4, dtype=torch.int64))
