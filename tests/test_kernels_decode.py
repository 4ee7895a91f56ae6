"""Triton paged decode attention under the interpreter vs its torch twin and a float64 dense oracle."""

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

from kernels import (  # noqa: E402
    dispatch,
    reference,
    triton_decode,  # noqa: E402
)

NUM_KV_HEADS = 2

# (dtype, query heads per KV head, block size, head_dim, splits): every dtype meets every GQA ratio once;
# splits None is the automatic choice, 8 forces 64-token splits so long contexts span several.
CASES = [
    (torch.float32, 1, 16, 32, 8),
    (torch.float32, 4, 32, 64, None),
    (torch.float32, 8, 16, 48, 8),
    (torch.float16, 1, 32, 32, None),
    (torch.float16, 4, 16, 64, 8),
    (torch.float16, 8, 32, 32, 8),
    (torch.bfloat16, 1, 16, 64, 8),
    (torch.bfloat16, 4, 32, 32, 8),
    (torch.bfloat16, 8, 16, 32, None),
]


def _case_id(case) -> str:
    dtype, group, block_size, head_dim, splits = case
    return (
        f"{str(dtype).removeprefix('torch.')}-gqa{group}-bs{block_size}-d{head_dim}-splits{splits}"
    )


def _ragged_contexts(block_size: int, generator: torch.Generator) -> list[int]:
    """Length 1, exact block boundaries, a random length and one longer than several 64-token splits."""
    random_len = int(torch.randint(2, 4 * block_size, (1,), generator=generator))
    return [1, block_size, 2 * block_size, random_len, 8 * block_size + 3]


def _oracle(q, k_cache, v_cache, block_tables, context_lens, scale) -> torch.Tensor:
    rows = []
    for b, length in enumerate(context_lens.tolist()):
        k = gather_float64(k_cache, block_tables[b], length)
        v = gather_float64(v_cache, block_tables[b], length)
        rows.append(dense_attention_float64(q[b : b + 1], k, v, [length - 1], scale))
    return torch.cat(rows)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_decode_matches_twin_and_float64_oracle(case):
    dtype, group, block_size, head_dim, splits = case
    generator = torch.Generator().manual_seed(zlib.crc32(_case_id(case).encode()))
    contexts = _ragged_contexts(block_size, generator)
    num_blocks = sum(-(-n // block_size) for n in contexts) + 3
    k_cache, v_cache = random_cache(
        num_blocks, block_size, NUM_KV_HEADS, head_dim, dtype, generator
    )
    block_tables = scrambled_block_tables(contexts, block_size, num_blocks, generator)
    context_lens = torch.tensor(contexts, dtype=torch.int32)
    q = torch.randn(len(contexts), NUM_KV_HEADS * group, head_dim, generator=generator).to(dtype)
    scale = head_dim**-0.5

    out = triton_decode.paged_decode_attention(
        q, k_cache, v_cache, block_tables, context_lens, scale, num_splits=splits, out=nan_like(q)
    )

    twin = reference.paged_decode_attention(q, k_cache, v_cache, block_tables, context_lens, scale)
    assert out.dtype == dtype and out.shape == q.shape
    assert_close(out, twin, dtype, "decode vs torch twin")
    assert_close(
        out,
        _oracle(q, k_cache, v_cache, block_tables, context_lens, scale),
        dtype,
        "decode vs float64",
    )


def test_split_count_does_not_change_the_result():
    generator = torch.Generator().manual_seed(7)
    contexts, block_size = [300, 65, 1], 16
    k_cache, v_cache = random_cache(40, block_size, NUM_KV_HEADS, 32, torch.float32, generator)
    block_tables = scrambled_block_tables(contexts, block_size, 40, generator)
    context_lens = torch.tensor(contexts, dtype=torch.int32)
    q = torch.randn(3, 4 * NUM_KV_HEADS, 32, generator=generator)
    outputs = [
        triton_decode.paged_decode_attention(
            q, k_cache, v_cache, block_tables, context_lens, 0.3, num_splits=splits, out=nan_like(q)
        )
        for splits in (1, 2, 5)
    ]
    for splits, out in zip((2, 5), outputs[1:]):
        assert_close(out, outputs[0], torch.float32, f"{splits} splits vs 1")


def test_split_choice_fills_the_gpu_only_when_the_batch_does_not():
    sms = 132
    few_long = triton_decode.choose_num_splits(
        batch=1, num_kv_heads=8, max_context_tokens=8192, num_sms=sms
    )
    many = triton_decode.choose_num_splits(
        batch=256, num_kv_heads=8, max_context_tokens=8192, num_sms=sms
    )
    short = triton_decode.choose_num_splits(
        batch=1, num_kv_heads=8, max_context_tokens=300, num_sms=sms
    )
    assert 1 * 8 * few_long >= sms
    assert many == 1
    assert short == 2  # 300 tokens allow two splits of at least MIN_TOKENS_PER_SPLIT


def test_split_layout_covers_the_context_in_whole_tiles():
    for context_tokens in (1, 63, 64, 65, 1000, 32768):
        for wanted in (1, 3, 64):
            per_split, splits = triton_decode.split_layout(context_tokens, wanted)
            assert per_split % triton_decode.BLOCK_N == 0
            assert (
                splits <= wanted and (splits - 1) * per_split < context_tokens <= splits * per_split
            )


def test_dispatch_forced_to_triton_runs_the_kernel_on_cpu(monkeypatch):
    monkeypatch.setenv("SURGEPLAN_KERNELS", "triton")
    generator = torch.Generator().manual_seed(11)
    k_cache, v_cache = random_cache(6, 16, 1, 16, torch.float32, generator)
    block_tables = scrambled_block_tables([20, 33], 16, 6, generator)
    q = torch.randn(2, 2, 16, generator=generator)
    context_lens = torch.tensor([20, 33], dtype=torch.int32)
    assert dispatch.kernel_backend(q) == "triton"
    out = dispatch.paged_decode_attention(q, k_cache, v_cache, block_tables, context_lens, 0.25)
    twin = reference.paged_decode_attention(q, k_cache, v_cache, block_tables, context_lens, 0.25)
    assert_close(out, twin, torch.float32, "dispatch(triton) vs twin")


def test_mismatched_head_dim_is_rejected_with_the_shapes():
    k_cache = torch.randn(4, 16, 2, 32)
    q = torch.randn(1, 4, 64)
    with pytest.raises(ValueError, match="head_dim 32"):
        triton_decode.paged_decode_attention(
            q,
            k_cache,
            k_cache,
            torch.zeros(1, 1, dtype=torch.int32),
            torch.ones(1, dtype=torch.int32),
            1.0,
        )
