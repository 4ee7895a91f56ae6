"""Quantised KV cache (fp8_e4m3, fp8_e5m2, int8): the Triton store and attention kernels under the
interpreter and their torch twins, against a float64 oracle of the dequantised cache (≤ 1e-2
relative),
the quantisation error itself, int8 re-quantisation when a block's scale grows, and the scale
asserts."""

import os

os.environ.setdefault(
    "TRITON_INTERPRET", "1"
)  # before triton is imported, so kernels are interpreted

import pytest  # noqa: E402
import torch  # noqa: E402
from kernels_oracle import dense_attention_float64, relative_error  # noqa: E402

from kernels import reference, triton_cache, triton_decode, triton_prefill  # noqa: E402
from kernels.kv_quant import STORAGE_DTYPES, allocate_layer, dequantize, kv_quantisation_error  # noqa: E402

NUM_KV_HEADS, GROUP, HEAD_DIM, BLOCK_SIZE = 2, 2, 32, 16
KV_DTYPES = ["fp8_e4m3", "fp8_e5m2", "int8"]
# |dequantised − stored| / |stored| over a sequence's K/V: e4m3 keeps 3 mantissa bits, e5m2 2, int8
# 7 per block
QUANTISATION_ERROR_BOUND = {"fp8_e4m3": 0.05, "fp8_e5m2": 0.1, "int8": 0.02}


def _sequences(generator: torch.Generator) -> tuple[list[int], torch.Tensor]:
    """Two sequences' block tables (scrambled physical blocks) for contexts 37 and 21 tokens."""
    contexts = [37, 21]
    physical = torch.randperm(8, generator=generator).tolist()
    table = torch.full((2, 3), -1, dtype=torch.int32)
    table[0, :3] = torch.tensor(physical[:3])
    table[1, :2] = torch.tensor(physical[3:5])
    return contexts, table


def _slots(table_row: torch.Tensor, start: int, end: int) -> torch.Tensor:
    return torch.tensor(
        [int(table_row[t // BLOCK_SIZE]) * BLOCK_SIZE + t % BLOCK_SIZE for t in range(start, end)]
    )


def _fill(store, kv_cache_dtype: str, generator: torch.Generator):
    """Stores two sequences as the engine does: a prefill chunk, then decode tokens one per step,
    whose
    values grow so that int8 block scales must rise (re-quantising earlier rows). Returns the
    cache, the
    tables, the context lengths and every token's original K/V with its slot."""
    cache = allocate_layer(
        8, BLOCK_SIZE, NUM_KV_HEADS, HEAD_DIM, kv_cache_dtype, torch.float32, torch.device("cpu")
    )
    contexts, table = _sequences(generator)
    originals = []
    prefill = [20, 9]
    steps = [(b, 0, prefill[b]) for b in range(2)]
    for position in range(max(prefill), max(contexts)):
        steps += [
            (b, position, position + 1) for b in range(2) if prefill[b] <= position < contexts[b]
        ]
    for b, start, end in steps:
        growth = 1.0 + 0.05 * start  # later tokens are larger than the ones before them
        k = torch.randn(end - start, NUM_KV_HEADS, HEAD_DIM, generator=generator) * growth
        v = torch.randn(end - start, NUM_KV_HEADS, HEAD_DIM, generator=generator) * growth
        slots = _slots(table[b], start, end)
        store(k, v, cache.k, cache.v, slots, k_scale=cache.k_scale, v_scale=cache.v_scale)
        originals.append((k, v, slots))
    return cache, table, torch.tensor(contexts, dtype=torch.int32), originals


def _dequantised(cache, which: str) -> torch.Tensor:
    data, scale = (cache.k, cache.k_scale) if which == "k" else (cache.v, cache.v_scale)
    return dequantize(data, torch.arange(data.shape[0]), scale).double()  # [N, block_size, Hkv, D]


def _gather(values: torch.Tensor, table_row: torch.Tensor, length: int) -> torch.Tensor:
    return torch.stack(
        [values[int(table_row[t // BLOCK_SIZE]), t % BLOCK_SIZE] for t in range(length)]
    )


@pytest.mark.parametrize("kv_cache_dtype", KV_DTYPES)
def test_store_kernel_matches_twin_and_reports_quantisation_error(kv_cache_dtype):
    twin, twin_table, _, originals = _fill(
        reference.store_kv_cache, kv_cache_dtype, torch.Generator().manual_seed(1)
    )
    triton, table, _, _ = _fill(
        triton_cache.store_kv_cache, kv_cache_dtype, torch.Generator().manual_seed(1)
    )
    assert torch.equal(table, twin_table)
    assert twin.k.dtype == STORAGE_DTYPES[kv_cache_dtype] and triton.k.dtype == twin.k.dtype
    assert torch.equal(triton.k_scale, twin.k_scale) and torch.equal(triton.v_scale, twin.v_scale)
    for which in ("k", "v"):
        a, b = _dequantised(triton, which), _dequantised(twin, which)
        if kv_cache_dtype == "int8":
            assert torch.equal(a, b), f"int8 {which}: Triton store differs from its twin"
        else:  # the interpreter casts fp32 -> fp8 unlike torch: one step of the format at most
            info = torch.finfo(STORAGE_DTYPES[kv_cache_dtype])
            scale = float(twin.k_scale if which == "k" else twin.v_scale)
            limit = info.eps * a.abs().maximum(b.abs()) + scale * info.smallest_normal * info.eps
            assert bool(((a - b).abs() <= limit * 1.01).all()), (
                f"{kv_cache_dtype} {which}: more than a step apart"
            )
    k_all = torch.cat([k for k, _, _ in originals])
    v_all = torch.cat([v for _, v, _ in originals])
    slots = torch.cat([s for _, _, s in originals])
    for cache in (twin, triton):
        k_error = kv_quantisation_error(k_all, cache, slots, "k")
        v_error = kv_quantisation_error(v_all, cache, slots, "v")
        print(f"{kv_cache_dtype}: quantisation error K {k_error:.4f}, V {v_error:.4f} (relative)")
        assert 0 < k_error < QUANTISATION_ERROR_BOUND[kv_cache_dtype]
        assert 0 < v_error < QUANTISATION_ERROR_BOUND[kv_cache_dtype]


@pytest.mark.parametrize("kv_cache_dtype", KV_DTYPES)
def test_attention_kernels_match_float64_oracle_of_the_dequantised_cache(kv_cache_dtype):
    generator = torch.Generator().manual_seed(2)
    cache, table, context_lens, _ = _fill(reference.store_kv_cache, kv_cache_dtype, generator)
    k64, v64 = _dequantised(cache, "k"), _dequantised(cache, "v")
    scale = HEAD_DIM**-0.5
    q = torch.randn(2, NUM_KV_HEADS * GROUP, HEAD_DIM, generator=generator)
    oracle = torch.cat(
        [
            dense_attention_float64(
                q[b : b + 1], _gather(k64, table[b], n), _gather(v64, table[b], n), [n - 1], scale
            )
            for b, n in enumerate(context_lens.tolist())
        ]
    )
    args = (q, cache.k, cache.v, table, context_lens, scale)
    for name, out in (
        (
            "triton",
            triton_decode.paged_decode_attention(
                *args, num_splits=2, k_scale=cache.k_scale, v_scale=cache.v_scale
            ),
        ),
        (
            "twin",
            reference.paged_decode_attention(*args, k_scale=cache.k_scale, v_scale=cache.v_scale),
        ),
    ):
        error = relative_error(out, oracle)
        assert error < 1e-2, (
            f"{kv_cache_dtype} decode ({name}): {error:.2e} from the float64 oracle"
        )

    # prefill/extend: the last 5 and 3 tokens of each sequence are new, over their cached prefixes
    new = [5, 3]
    cu_seqlens = torch.tensor([0, 5, 8], dtype=torch.int32)
    qp = torch.randn(8, NUM_KV_HEADS * GROUP, HEAD_DIM, generator=generator)
    oracle = torch.cat(
        [
            dense_attention_float64(
                qp[int(cu_seqlens[b]) : int(cu_seqlens[b + 1])],
                _gather(k64, table[b], n),
                _gather(v64, table[b], n),
                list(range(n - new[b], n)),
                scale,
            )
            for b, n in enumerate(context_lens.tolist())
        ]
    )
    args = (qp, cache.k, cache.v, cu_seqlens, context_lens, table, scale)
    for name, out in (
        (
            "triton",
            triton_prefill.paged_prefill_attention(
                *args, k_scale=cache.k_scale, v_scale=cache.v_scale
            ),
        ),
        (
            "twin",
            reference.paged_prefill_attention(*args, k_scale=cache.k_scale, v_scale=cache.v_scale),
        ),
    ):
        error = relative_error(out, oracle)
        assert error < 1e-2, (
            f"{kv_cache_dtype} prefill ({name}): {error:.2e} from the float64 oracle"
        )


def test_int8_block_scale_rises_and_earlier_rows_are_requantised():
    cache = allocate_layer(2, BLOCK_SIZE, 1, HEAD_DIM, "int8", torch.float32, torch.device("cpu"))
    small = torch.full((4, 1, HEAD_DIM), 0.5)
    large = torch.full((1, 1, HEAD_DIM), 10.0)
    for store in (reference.store_kv_cache, triton_cache.store_kv_cache):
        cache.k.zero_(), cache.v.zero_(), cache.k_scale.zero_(), cache.v_scale.zero_()
        store(
            small,
            small,
            cache.k,
            cache.v,
            torch.arange(4),
            k_scale=cache.k_scale,
            v_scale=cache.v_scale,
        )
        assert float(cache.k_scale[0, 0]) == pytest.approx(0.5 / 127)
        store(
            large,
            large,
            cache.k,
            cache.v,
            torch.tensor([4]),
            k_scale=cache.k_scale,
            v_scale=cache.v_scale,
        )
        assert float(cache.k_scale[0, 0]) == pytest.approx(10.0 / 127)
        values = _dequantised(cache, "k")[0, :5, 0, 0]
        assert values[:4].tolist() == pytest.approx([0.5] * 4, rel=0.1) and float(
            values[4]
        ) == pytest.approx(10.0)
        # a store that begins the block again (offset 0: the block was freed and reused) resets its
        # scale
        store(
            small[:1],
            small[:1],
            cache.k,
            cache.v,
            torch.tensor([0]),
            k_scale=cache.k_scale,
            v_scale=cache.v_scale,
        )
        assert float(cache.k_scale[0, 0]) == pytest.approx(0.5 / 127)


@pytest.mark.parametrize("kernel", [reference.store_kv_cache, triton_cache.store_kv_cache])
def test_scales_that_do_not_fit_the_cache_are_rejected(kernel):
    cache = allocate_layer(
        2, BLOCK_SIZE, NUM_KV_HEADS, HEAD_DIM, "int8", torch.float32, torch.device("cpu")
    )
    k = torch.randn(1, NUM_KV_HEADS, HEAD_DIM)
    with pytest.raises(AssertionError, match=r"scale \[num_blocks, num_kv_heads\]"):
        kernel(
            k, k, cache.k, cache.v, torch.tensor([0]), k_scale=torch.ones(1), v_scale=torch.ones(1)
        )
    fp8 = allocate_layer(
        2, BLOCK_SIZE, NUM_KV_HEADS, HEAD_DIM, "fp8", torch.float32, torch.device("cpu")
    )
    with pytest.raises(AssertionError, match=r"scale of shape \[1\]"):
        kernel(k, k, fp8.k, fp8.v, torch.tensor([0]))
    plain = allocate_layer(
        2, BLOCK_SIZE, NUM_KV_HEADS, HEAD_DIM, "auto", torch.float32, torch.device("cpu")
    )
    with pytest.raises(AssertionError, match="takes no scale"):
        kernel(
            k, k, plain.k, plain.v, torch.tensor([0]), k_scale=torch.ones(1), v_scale=torch.ones(1)
        )
