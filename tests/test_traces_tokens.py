"""Prompt token ids: exact lengths, shared blocks for equal hash ids, determinism."""

import numpy as np
import pytest

from traces import Trace
from traces.tokens import PromptTokenSynthesizer, prompt_token_ids


def trace_with_prefixes(seed: int) -> Trace:
    rng = np.random.default_rng(seed)
    shared_prefix = rng.integers(0, 1000, 3).tolist()
    hash_ids, prompts = [], []
    for i in range(60):
        blocks = int(rng.integers(1, 6))
        own = (10_000 + 10 * i + np.arange(blocks)).tolist()
        ids = shared_prefix[: int(rng.integers(0, 4))] + own
        hash_ids.append(ids)
        prompts.append(len(ids) * 32 - int(rng.integers(0, 32)))  # last block partial
    return Trace(np.arange(60.0), prompts, np.ones(60), hash_ids=hash_ids, hash_block_size=32)


def test_exact_lengths_and_range():
    trace = trace_with_prefixes(71)
    synth = PromptTokenSynthesizer(vocab_size=500, seed=3, min_token_id=4)
    for i in range(len(trace)):
        tokens = synth.prompt_token_ids(trace, i)
        assert len(tokens) == trace.prompt_tokens[i]
        assert tokens.min() >= 4 and tokens.max() < 500


def test_equal_hash_ids_give_identical_blocks():
    trace = trace_with_prefixes(72)
    synth = PromptTokenSynthesizer(vocab_size=32_000, seed=5)
    prompts = list(synth.iter_prompts(trace))
    for i in range(len(trace)):
        for j in range(i + 1, len(trace)):
            common = 0
            while (
                common < min(len(trace.hash_ids[i]), len(trace.hash_ids[j]))
                and trace.hash_ids[i][common] == trace.hash_ids[j][common]
            ):
                common += 1
            shared = min(common * 32, len(prompts[i]), len(prompts[j]))
            assert np.array_equal(prompts[i][:shared], prompts[j][:shared])
            if shared < min(len(prompts[i]), len(prompts[j])):
                # The next block differs in its trace ids, so its tokens differ too.
                assert not np.array_equal(
                    prompts[i][shared : shared + 32], prompts[j][shared : shared + 32]
                )


def test_deterministic_and_seed_dependent():
    trace = trace_with_prefixes(73)
    a = PromptTokenSynthesizer(32_000, seed=1).prompt_token_ids(trace, 7)
    b = PromptTokenSynthesizer(32_000, seed=1).prompt_token_ids(trace, 7)
    c = PromptTokenSynthesizer(32_000, seed=2).prompt_token_ids(trace, 7)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert prompt_token_ids(trace, 7, 32_000, seed=1) == a.tolist()


def test_without_hash_ids_requests_share_nothing():
    rng = np.random.default_rng(74)
    trace = Trace(np.arange(200.0), rng.integers(16, 200, 200), np.ones(200))
    synth = PromptTokenSynthesizer(32_000, seed=0)
    first_blocks = {tuple(synth.prompt_token_ids(trace, i)[:16]) for i in range(200)}
    assert len(first_blocks) == 200
    tokens = np.concatenate(list(synth.iter_prompts(trace)))
    counts = np.bincount(tokens % 8, minlength=8) / len(tokens)
    assert counts == pytest.approx(np.full(8, 1 / 8), abs=0.01)  # no visible bias


def test_hash_ids_longer_than_the_prompt_are_cut_and_short_ones_padded():
    trace = Trace([0.0, 1.0], [40, 100], [1, 1], hash_ids=[[1, 2, 3, 4], [1]], hash_block_size=32)
    synth = PromptTokenSynthesizer(1000, seed=9)
    first, second = synth.prompt_token_ids(trace, 0), synth.prompt_token_ids(trace, 1)
    assert len(first) == 40 and len(second) == 100
    assert np.array_equal(first[:32], second[:32])
    assert np.array_equal(first[32:40], synth.block_tokens(2, 8))
    with pytest.raises(ValueError):
        PromptTokenSynthesizer(10, min_token_id=10)


def test_short_streams_on_python_ints_equal_the_numpy_mixer(monkeypatch):
    """Streams up to `_SHORT_SPAN` tokens are mixed on Python ints (a speed path); they give exactly
    the numpy mixer's tokens, on fresh random domains, keys, offsets and lengths each run."""
    import traces.tokens as tokens

    rng = np.random.default_rng()
    synth = PromptTokenSynthesizer(
        int(rng.integers(10, 200_000)), seed=int(rng.integers(0, 1 << 32))
    )
    cases = [
        (
            int(rng.choice([tokens._BLOCK_DOMAIN, tokens._REQUEST_DOMAIN])),
            int(rng.integers(0, 1 << 62)) * int(rng.integers(1, 8)),  # keys past 2**64 too
            int(rng.integers(0, 1_000_000)),
            int(rng.integers(0, tokens._SHORT_SPAN + 1)),
        )
        for _ in range(300)
    ]
    fast = [synth._stream(*case) for case in cases]
    monkeypatch.setattr(tokens, "_SHORT_SPAN", -1)  # every stream through numpy
    for case, got in zip(cases, fast):
        want = synth._stream(*case)
        assert got.dtype == want.dtype == np.int64 and got.tolist() == want.tolist(), case
