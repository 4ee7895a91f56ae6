"""Sampling: seeds reproduce, top-k 1 and tiny top-p equal greedy, temperature spreads choices, min_tokens holds EOS."""

import random

import pytest
import torch

from engine import LLM, SamplingParams
from engine.core.request import Request
from engine.worker.sampler import Sampler


@pytest.fixture(scope="module")
def llm():
    return LLM("tiny", load_format="dummy", max_model_len=128, num_kv_blocks=64, block_size=8)


def _prompts(seed, n=4):
    rng = random.Random(seed)
    return [[rng.randrange(3, 512) for _ in range(rng.randint(2, 20))] for _ in range(n)]


def test_same_seed_same_tokens_different_seed_differs(llm):
    prompts = _prompts(1)
    a = llm.generate(
        prompts, SamplingParams(temperature=1.5, seed=11, max_tokens=12, ignore_eos=True)
    )
    b = llm.generate(
        prompts, SamplingParams(temperature=1.5, seed=11, max_tokens=12, ignore_eos=True)
    )
    c = llm.generate(
        prompts, SamplingParams(temperature=1.5, seed=12, max_tokens=12, ignore_eos=True)
    )
    assert [o.output_token_ids for o in a] == [o.output_token_ids for o in b]
    assert [o.output_token_ids for o in a] != [o.output_token_ids for o in c]


def test_top_k_1_and_tiny_top_p_are_greedy(llm):
    prompts = _prompts(2)
    greedy = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=8, ignore_eos=True))
    top_k = llm.generate(
        prompts, SamplingParams(temperature=2.0, top_k=1, max_tokens=8, ignore_eos=True)
    )
    top_p = llm.generate(
        prompts, SamplingParams(temperature=2.0, top_p=1e-6, max_tokens=8, ignore_eos=True)
    )
    expected = [o.output_token_ids for o in greedy]
    assert [o.output_token_ids for o in top_k] == expected == [o.output_token_ids for o in top_p]


def _request(params: SamplingParams, outputs: int = 0) -> Request:
    req = Request("r", [3, 4], params, 0.0)
    req.output_token_ids = [5] * outputs
    return req


def test_sampled_frequencies_follow_the_distribution():
    torch.manual_seed(0)
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2, 0.0 + 1e-9]]))
    sampler = Sampler(frozenset(), seed=3)
    req = _request(SamplingParams(temperature=1.0, max_tokens=5))
    draws = [sampler(logits, [req])[0] for _ in range(3000)]
    freq = [draws.count(t) / len(draws) for t in range(3)]
    assert all(abs(f - p) < 0.04 for f, p in zip(freq, [0.5, 0.3, 0.2]))
    top_k2 = [
        sampler(logits, [_request(SamplingParams(temperature=1.0, top_k=2))])[0] for _ in range(500)
    ]
    assert set(top_k2) == {0, 1}
    top_p = [
        sampler(logits, [_request(SamplingParams(temperature=1.0, top_p=0.75))])[0]
        for _ in range(500)
    ]
    assert set(top_p) == {0, 1}


def test_min_tokens_masks_eos_and_stop_tokens():
    logits = torch.tensor(
        [[0.0, 0.0, 10.0, 9.0, 1.0]] * 2
    )  # EOS (2) then stop token 3 are the favourites
    sampler = Sampler(frozenset({2}))
    early = _request(
        SamplingParams(temperature=0, max_tokens=8, min_tokens=3, stop_token_ids=[3]), outputs=1
    )
    late = _request(
        SamplingParams(temperature=0, max_tokens=8, min_tokens=3, stop_token_ids=[3]), outputs=3
    )
    assert sampler(logits, [early, late]) == [4, 2]
