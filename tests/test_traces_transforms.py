"""Transforms: window, rate scaling, length caps, sampling, concat/merge, tenants."""

import numpy as np
import pytest

from traces import Trace, TraceFormatError
from traces.transforms import (
    assign_tenants,
    cap_lengths,
    concat,
    merge,
    sample,
    scale_rate,
    set_priority,
    window,
)


def hashed_trace(seed: int, n: int = 400, block: int = 16) -> Trace:
    rng = np.random.default_rng(seed)
    prompt = rng.integers(1, 300, n)
    return Trace(
        np.sort(rng.uniform(0, 1000, n)),
        prompt,
        rng.integers(0, 200, n),
        hash_ids=[rng.integers(0, 99, -(-int(p) // block)).tolist() for p in prompt],
        hash_block_size=block,
        source_line=np.arange(n) + 1,
        name=f"h{seed}",
    )


def test_window_keeps_half_open_interval_and_rebases():
    trace = hashed_trace(61)
    cut = window(trace, 250.0, 500.0)
    inside = (trace.arrival_s >= 250) & (trace.arrival_s < 500)
    assert len(cut) == inside.sum()
    assert np.allclose(cut.arrival_s, trace.arrival_s[inside] - 250.0)
    assert cut.hash_ids == [trace.hash_ids[i] for i in np.flatnonzero(inside)]
    assert "window" in cut.provenance[-1]
    assert np.array_equal(
        window(trace, 250.0, 500.0, rebase=False).arrival_s, trace.arrival_s[inside]
    )
    with pytest.raises(ValueError):
        window(trace, 5.0, 5.0)


def test_scale_rate_multiplies_rate():
    trace = hashed_trace(62)
    faster = scale_rate(trace, 4.0)
    assert faster.duration_s == pytest.approx(trace.duration_s / 4)
    assert np.array_equal(faster.prompt_tokens, trace.prompt_tokens)
    with pytest.raises(ValueError):
        scale_rate(trace, 0.0)


def test_cap_lengths_clip_and_drop_are_counted():
    trace = hashed_trace(63)
    limit = 256
    too_long = int((trace.prompt_tokens + trace.output_tokens > limit).sum())
    clipped, count = cap_lengths(trace, limit, "clip")
    assert count == too_long > 0 and len(clipped) == len(trace)
    assert np.all(clipped.prompt_tokens + clipped.output_tokens <= limit)
    assert np.all(clipped.output_tokens >= np.minimum(trace.output_tokens, 1))
    untouched = trace.prompt_tokens + trace.output_tokens <= limit
    assert np.array_equal(clipped.prompt_tokens[untouched], trace.prompt_tokens[untouched])
    for ids, prompt in zip(clipped.hash_ids, clipped.prompt_tokens):
        assert len(ids) <= -(-int(prompt) // 16)
    dropped, count = cap_lengths(trace, limit, "drop")
    assert count == too_long and len(dropped) == len(trace) - too_long
    assert f"{too_long} requests" in dropped.provenance[-1]


def test_sample_by_fraction_and_count():
    trace = hashed_trace(64)
    half = sample(trace, fraction=0.5, seed=1)
    assert len(half) == 200 and np.all(np.diff(half.arrival_s) >= 0)
    assert set(half.source_line.tolist()) <= set(trace.source_line.tolist())
    assert sample(trace, count=37, seed=2) == sample(trace, count=37, seed=2)
    assert sample(trace, count=37, seed=2) != sample(trace, count=37, seed=3)
    with pytest.raises(ValueError):
        sample(trace, fraction=0.5, count=3)
    with pytest.raises(ValueError):
        sample(trace, count=401)


def test_concat_places_traces_end_to_end():
    first, second = hashed_trace(65), hashed_trace(66)
    joined = concat([first, second], gap_s=10.0)
    assert len(joined) == 800
    assert joined.duration_s == pytest.approx(first.duration_s + 10.0 + second.duration_s)
    assert joined.hash_ids[400:] == second.hash_ids and joined.hash_ids[:400] == first.hash_ids
    plain = Trace([0.0, 1.0], [5, 6], [1, 1])
    mixed = concat([plain, first])
    assert mixed.hash_ids[:2] == [[], []] and mixed.hash_block_size == 16
    with pytest.raises(TraceFormatError, match="block sizes"):
        concat([first, hashed_trace(67, block=32)])


def test_merge_superposes_on_one_clock_and_tenants():
    a = assign_tenants(hashed_trace(68), {"alpha": 1.0})
    b = assign_tenants(hashed_trace(69), {"beta": 1.0})
    merged = merge([a, b])
    assert len(merged) == 800 and np.all(np.diff(merged.arrival_s) >= 0)
    alpha = merged.tenant == "alpha"
    assert np.array_equal(merged.arrival_s[alpha], a.arrival_s)
    assert [merged.hash_ids[i] for i in np.flatnonzero(alpha)] == a.hash_ids
    prioritised = set_priority(merged, {"beta": 5})
    assert np.array_equal(prioritised.priority == 5, ~alpha)


def test_assign_tenants_follows_shares():
    trace = Trace(np.arange(50_000, dtype=float), np.ones(50_000), np.ones(50_000))
    shared = assign_tenants(trace, {"a": 3.0, "b": 1.0}, seed=4)
    assert (shared.tenant == "a").mean() == pytest.approx(0.75, abs=0.01)
    with pytest.raises(ValueError):
        assign_tenants(trace, {"a": 0.0})
