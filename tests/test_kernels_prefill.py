"""Triton varlen prefill/extend attention under the interpreter vs its torch twin and a float64 dense oracle."""

import os
import zlib

os.environ.setdefault(
    "TRITON_INTERPRET", "1"
)  # before triton is imported, so kernels are interpreted

import pytest  # noqa: E402
import torch  # noqa: E402
from kernels_oracle import (  # noqa: E402
    assert_close,
    dense_attention_float64,
    gather_float64,
    nan_like,
    random_cache,
    scrambled_block_tables,
)

from kernels import reference, triton_prefill  # noqa: E402

NUM_KV_HEADS = 2

# (dtype, query heads per KV head, block size, head_dim): every dtype meets every GQA ratio once.
CASES = [
    (torch.float32, 1, 16, 32),
    (torch.float32, 4, 32, 48),
    (torch.float32, 8, 16, 32),
    (torch.float16, 1, 32, 64),
    (torch.float16, 4, 16, 32),
    (torch.float16, 8, 32, 32),
    (torch.bfloat16, 1, 16, 32),
    (torch.bfloat16, 4, 32, 32),
    (torch.bfloat16, 8, 16, 64),
]


def _case_id(case) -> str:
    dtype, group, block_size, head_dim = case
    return f"{str(dtype).removeprefix('torch.')}-gqa{group}-bs{block_size}-d{head_dim}"


def _chunks(block_size: int, generator: torch.Generator) -> list[tuple[int, int]]:
    """(new tokens, cached prefix) per sequence: a one-token prompt, a fresh prompt spanning several query
    tiles, an extend ending on a block boundary, a one-token extend after a long prefix (more than one key
    tile), a random chunk after a random prefix, and a sequence with no new tokens this step."""
    new_random, prefix_random = (
        int(x) for x in torch.randint(1, 3 * block_size, (2,), generator=generator)
    )
    return [
        (1, 0),
        (70, 0),
        (block_size, block_size),
        (1, 130),
        (new_random, prefix_random),
        (0, 9),
    ]


def _varlen_inputs(chunks, num_heads, head_dim, dtype, generator):
    new_counts = [new for new, _ in chunks]
    cu_seqlens_q = torch.tensor(
        [0] + torch.tensor(new_counts).cumsum(0).tolist(), dtype=torch.int32
    )
    context_lens = torch.tensor([new + prefix for new, prefix in chunks], dtype=torch.int32)
    # q is a strided view, as when it is sliced out of a fused QKV projection.
    qkv = torch.randn(sum(new_counts), num_heads + 4, head_dim, generator=generator).to(dtype)
    return qkv[:, :num_heads], cu_seqlens_q, context_lens


def _oracle(q, k_cache, v_cache, cu_seqlens_q, context_lens, block_tables, scale) -> torch.Tensor:
    rows = []
    for b, total in enumerate(context_lens.tolist()):
        start, end = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])
        if start == end:
            continue
        k = gather_float64(k_cache, block_tables[b], total)
        v = gather_float64(v_cache, block_tables[b], total)
        positions = list(range(total - (end - start), total))
        rows.append(dense_attention_float64(q[start:end], k, v, positions, scale))
    return torch.cat(rows)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_prefill_matches_twin_and_float64_oracle(case):
    dtype, group, block_size, head_dim = case
    generator = torch.Generator().manual_seed(zlib.crc32(_case_id(case).encode()))
    chunks = _chunks(block_size, generator)
    totals = [new + prefix for new, prefix in chunks]
    num_blocks = sum(-(-n // block_size) for n in totals) + 2
    k_cache, v_cache = random_cache(
        num_blocks, block_size, NUM_KV_HEADS, head_dim, dtype, generator
    )
    block_tables = scrambled_block_tables(totals, block_size, num_blocks, generator)
    q, cu_seqlens_q, context_lens = _varlen_inputs(
        chunks, NUM_KV_HEADS * group, head_dim, dtype, generator
    )
    scale = head_dim**-0.5

    out = triton_prefill.paged_prefill_attention(
        q,
        k_cache,
        v_cache,
        cu_seqlens_q,
        context_lens,
        block_tables,
        scale,
        out=nan_like(q.contiguous()),
    )

    twin = reference.paged_prefill_attention(
        q, k_cache, v_cache, cu_seqlens_q, context_lens, block_tables, scale
    )
    assert out.dtype == dtype and out.shape == q.shape
    assert_close(out, twin, dtype, "prefill vs torch twin")
    oracle = _oracle(q, k_cache, v_cache, cu_seqlens_q, context_lens, block_tables, scale)
    assert_close(out, oracle, dtype, "prefill vs float64")


def test_chunked_prefill_equals_one_shot_prefill():
    """Prefilling a prompt in two chunks (the second sees the first as cached prefix) gives the same rows."""
    generator = torch.Generator().manual_seed(5)
    block_size, prompt_len, first_chunk = 16, 45, 19
    k_cache, v_cache = random_cache(4, block_size, NUM_KV_HEADS, 32, torch.float32, generator)
    block_tables = scrambled_block_tables([prompt_len], block_size, 4, generator)
    q = torch.randn(prompt_len, 4 * NUM_KV_HEADS, 32, generator=generator)

    def run(q_rows, new_tokens, context_len):
        cu = torch.tensor([0, new_tokens], dtype=torch.int32)
        lens = torch.tensor([context_len], dtype=torch.int32)
        return triton_prefill.paged_prefill_attention(
            q_rows, k_cache, v_cache, cu, lens, block_tables, 0.2
        )

    whole = run(q, prompt_len, prompt_len)
    first = run(q[:first_chunk], first_chunk, first_chunk)
    second = run(q[first_chunk:], prompt_len - first_chunk, prompt_len)
    assert_close(torch.cat([first, second]), whole, torch.float32, "two chunks vs one shot")


def test_cu_seqlens_not_matching_the_batch_is_rejected():
    q = torch.randn(3, 2, 16)
    k_cache = torch.randn(2, 16, 1, 16)
    with pytest.raises(ValueError, match="cu_seqlens_q"):
        triton_prefill.paged_prefill_attention(
            q,
            k_cache,
            k_cache,
            torch.tensor([0, 3]),
            torch.tensor([3, 1]),
            torch.zeros(2, 1, dtype=torch.int32),
            1.0,
        )
