"""Greedy output of our engine is token-identical to Hugging Face `generate` on the same weights,
under every scheduling regime: plain, chunked prefill, forced preemption, prefix-cache hits, static."""

import random
import zlib

import pytest
import torch

from engine import LLM, SamplingParams

MAX_NEW_TOKENS = 10


def hf_greedy(model_dir, prompts: list[list[int]]) -> list[list[int]]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None  # like ignore_eos: EOS is an ordinary token here
    outputs = []
    for prompt in prompts:  # one at a time: no padding, so nothing but the model decides the tokens
        ids = torch.tensor([prompt])
        with torch.no_grad():
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=MAX_NEW_TOKENS,
                do_sample=False,
                pad_token_id=0,
            )
        outputs.append(out[0, len(prompt) :].tolist())
    return outputs


def random_prompts(seed: int, count: int = 10, shared_prefix: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    prefix = [rng.randrange(3, 300) for _ in range(shared_prefix)]
    return [
        prefix + [rng.randrange(3, 300) for _ in range(rng.randint(1, 70))] for _ in range(count)
    ]


def engine_greedy(model_dir, prompts, **settings):
    llm = LLM(str(model_dir), dtype="float32", block_size=8, max_model_len=256, **settings)
    outs = llm.generate(
        prompts, SamplingParams(temperature=0, max_tokens=MAX_NEW_TOKENS, ignore_eos=True)
    )
    return llm, outs


REGIMES = {
    "plain": dict(num_kv_blocks=256),
    "chunked_prefill": dict(num_kv_blocks=256, max_num_batched_tokens=24, max_num_seqs=4),
    "preemption": dict(num_kv_blocks=24, max_num_seqs=8, enable_prefix_caching=False),
    "static": dict(num_kv_blocks=256, policy="static", max_num_seqs=4, static_reserve="request"),
}


@pytest.mark.parametrize("model_type", ["llama", "qwen2"])
@pytest.mark.parametrize("regime", list(REGIMES))
def test_greedy_matches_hf_generate(model_type, regime, tiny_llama_dir, tiny_qwen2_dir):
    model_dir = tiny_llama_dir if model_type == "llama" else tiny_qwen2_dir
    prompts = random_prompts(seed=zlib.crc32(f"{model_type}/{regime}".encode()))
    llm, outs = engine_greedy(model_dir, prompts, **REGIMES[regime])
    expected = hf_greedy(model_dir, prompts)
    assert [o.output_token_ids for o in outs] == expected
    assert all(o.finish_reason == "length" for o in outs)
    if regime == "preemption":
        assert llm.engine.scheduler.num_preemptions > 0
        assert sum(o.num_preemptions for o in outs) == llm.engine.scheduler.num_preemptions
    if regime == "chunked_prefill":
        assert max(len(p) for p in prompts) > 24  # some prompt really was split


def test_mistral_greedy_matches_hf_generate_and_window_is_enforced(tiny_mistral_dir):
    prompts = random_prompts(seed=11)
    _, outs = engine_greedy(tiny_mistral_dir, prompts, num_kv_blocks=256, max_num_batched_tokens=32)
    assert [o.output_token_ids for o in outs] == hf_greedy(tiny_mistral_dir, prompts)
    with pytest.raises(ValueError, match="sliding_window=256"):
        LLM(str(tiny_mistral_dir), dtype="float32", max_model_len=512, num_kv_blocks=8)


def test_prefix_cache_hits_keep_greedy_output(tiny_llama_dir):
    prompts = random_prompts(seed=7, count=8, shared_prefix=40)
    llm = LLM(
        str(tiny_llama_dir),
        dtype="float32",
        block_size=8,
        max_model_len=256,
        num_kv_blocks=256,
        max_num_seqs=2,
    )
    params = SamplingParams(temperature=0, max_tokens=MAX_NEW_TOKENS, ignore_eos=True)
    outs = llm.generate(prompts, params)
    assert (
        sum(o.num_cached_tokens for o in outs) >= 40 // 8 * 8 * 6
    )  # later requests reuse the shared blocks
    assert [o.output_token_ids for o in outs] == hf_greedy(tiny_llama_dir, prompts)
    again = llm.generate(prompts[:1], params)[0]  # a whole-prompt hit still decodes right
    assert again.num_cached_tokens > 0 and again.output_token_ids == outs[0].output_token_ids


def test_eos_stops_generation_unless_ignored(tiny_llama_dir):
    llm = LLM(
        str(tiny_llama_dir), dtype="float32", block_size=8, max_model_len=256, num_kv_blocks=128
    )
    prompt = random_prompts(seed=3, count=1)[0]
    free_run = llm.generate(
        [prompt], SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    )[0].output_token_ids
    stop_at = free_run[4]
    stopped = llm.generate(
        [prompt], SamplingParams(temperature=0, max_tokens=12, stop_token_ids=[stop_at])
    )[0]
    first = free_run.index(stop_at)
    assert stopped.output_token_ids == free_run[: first + 1] and stopped.finish_reason == "stop"
    held = llm.generate(
        [prompt],
        SamplingParams(
            temperature=0, max_tokens=12, stop_token_ids=[stop_at], min_tokens=first + 2
        ),
    )[0]
    assert len(held.output_token_ids) >= first + 2
