"""The offline API: text and token prompts, per-prompt params, ordered outputs, timings, KV accounting."""

import random

import pytest

from engine import LLM, SamplingParams


@pytest.fixture(scope="module")
def llm():
    return LLM(
        "tiny",
        load_format="dummy",
        max_model_len=128,
        num_kv_blocks=64,
        block_size=8,
        max_num_seqs=4,
        max_num_batched_tokens=32,
    )


def test_outputs_come_back_in_prompt_order_with_their_own_params(llm):
    rng = random.Random(5)
    prompts = [[rng.randrange(3, 512) for _ in range(rng.randint(1, 40))] for _ in range(9)]
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in range(1, 10)]
    outs = llm.generate(prompts, params)
    assert [len(o.output_token_ids) for o in outs] == list(range(1, 10))
    assert [o.prompt_token_ids for o in outs] == prompts
    for o in outs:
        m = o.metrics
        assert m.arrival_time <= m.first_scheduled_time <= m.first_token_time <= m.finish_time
        assert m.ttft >= m.queue_time >= 0 and m.e2e_latency >= m.ttft


def test_text_prompts_are_tokenized_and_outputs_decoded(llm):
    outs = llm.generate(
        ["hello world", "surge"], SamplingParams(temperature=0, max_tokens=5, ignore_eos=True)
    )
    assert outs[0].prompt_token_ids[1:] == [b + 3 for b in b"hello world"]
    assert all(isinstance(o.text, str) and len(o.output_token_ids) == 5 for o in outs)


def test_mismatched_params_list_is_refused(llm):
    with pytest.raises(ValueError, match="2 sampling params for 3 prompts"):
        llm.generate([[5], [6], [7]], [SamplingParams(), SamplingParams()])


def test_kv_accounting_is_readable_at_every_step(llm):
    engine = llm.engine
    for i in range(4):
        engine.add_request(
            f"kv{i}",
            [7 + i] * (10 + 9 * i),
            SamplingParams(temperature=0, max_tokens=6, ignore_eos=True),
        )
    seen = []
    while engine.has_unfinished_requests():
        engine.step()
        stats = engine.kv_stats()
        assert stats.num_used_blocks + stats.num_free_blocks == stats.num_blocks == 64
        expected_tokens = sum(r.num_computed_tokens for r in engine.scheduler.running)
        assert stats.tokens_stored == expected_tokens  # no shared prefixes here
        seen.append(stats.utilization)
    assert min(seen) > 0.5 and engine.kv_stats().num_used_blocks == 0
    assert engine.last_step.shape.is_empty or engine.last_step.total_s > 0
