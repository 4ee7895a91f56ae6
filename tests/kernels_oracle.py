"""Test inputs for the paged kernels and an independent float64 oracle (dense softmax on gathered K/V).

The oracle shares nothing with kernels/reference.py: it walks the block table token by token in Python and
computes attention in float64 with an explicit mask.
"""

import torch

# ‖out − ref‖ / ‖ref‖ allowed per output dtype (the bounds).
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}


def random_cache(
    num_blocks: int,
    block_size: int,
    num_kv_heads: int,
    head_dim: int,
    dtype: torch.dtype,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random K/V everywhere, so a kernel reading a slot it should not changes its output."""
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = torch.randn(shape, generator=generator).to(dtype)
    v_cache = torch.randn(shape, generator=generator).to(dtype)
    return k_cache, v_cache


def scrambled_block_tables(
    context_lens: list[int], block_size: int, num_blocks: int, generator: torch.Generator
) -> torch.Tensor:
    """int32 [batch, max_blocks]: distinct physical blocks in random order; unused entries are -1."""
    blocks_needed = [-(-length // block_size) for length in context_lens]
    assert sum(blocks_needed) <= num_blocks, (
        f"{sum(blocks_needed)} blocks needed, cache has {num_blocks}"
    )
    physical = torch.randperm(num_blocks, generator=generator).tolist()
    table = torch.full((len(context_lens), max(blocks_needed)), -1, dtype=torch.int32)
    for row, count in enumerate(blocks_needed):
        table[row, :count] = torch.tensor(physical[:count], dtype=torch.int32)
        physical = physical[count:]
    return table


def gather_float64(cache: torch.Tensor, table_row: torch.Tensor, length: int) -> torch.Tensor:
    """[length, num_kv_heads, head_dim] float64: token t lives in block table_row[t // bs] at offset t % bs."""
    block_size = cache.shape[1]
    rows = [cache[int(table_row[t // block_size]), t % block_size] for t in range(length)]
    return torch.stack(rows).double()


def dense_attention_float64(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, query_positions: list[int], scale: float
) -> torch.Tensor:
    """q: [n, Hq, D]; k, v: [L, Hkv, D]; query i sees keys 0..query_positions[i] -> [n, Hq, D] float64."""
    num_heads, num_kv_heads = q.shape[1], k.shape[1]
    kv_head_of = torch.arange(num_heads) // (num_heads // num_kv_heads)
    k_per_head = k.double()[:, kv_head_of]  # [L, Hq, D]
    v_per_head = v.double()[:, kv_head_of]
    scores = torch.einsum("nhd,lhd->hnl", q.double(), k_per_head) * scale  # [Hq, n, L]
    key_positions = torch.arange(k.shape[0])
    hidden = key_positions[None, :] > torch.tensor(query_positions)[:, None]  # [n, L]
    probs = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
    return torch.einsum("hnl,lhd->nhd", probs, v_per_head)


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref.double()).norm() / ref.double().norm())


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    assert not torch.isnan(out).any(), (
        f"{what}: output holds NaN (a row was never written or overflowed)"
    )
    error = relative_error(out, ref)
    assert error < TOLERANCE[dtype], (
        f"{what}: relative error {error:.2e} ≥ {TOLERANCE[dtype]:.0e} for {dtype}"
    )


def nan_like(tensor: torch.Tensor) -> torch.Tensor:
    return torch.full_like(tensor, float("nan"))
