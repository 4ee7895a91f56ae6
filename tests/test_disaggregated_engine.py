"""Prefill/decode disaggregation in the live engine: a prefill-only and a decode-only `LLMEngine` in one
process, KV blocks copied between their caches, give the same greedy tokens as one co-located engine,
preemption included (on both sides), and free every block at the end."""

import random

import pytest

from engine import LLM, EngineConfig, SamplingParams, SchedulerConfig
from engine.disaggregated import DisaggregatedEngines

MAX_TOKENS = 8


def prompts(seed: int, count: int = 8) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, 300) for _ in range(rng.randint(5, 60))] for _ in range(count)]


def settings(model_dir, **changes) -> dict:
    return dict(model=str(model_dir), dtype="float32", block_size=8, max_model_len=128, **changes)


@pytest.mark.parametrize("regime", ["roomy", "preemption"])
def test_prefill_decode_pair_matches_colocated_greedy(regime, tiny_llama_dir):
    batch = prompts(seed=5)
    params = SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True)
    small = regime == "preemption"
    colocated = LLM(**settings(tiny_llama_dir, num_kv_blocks=256))
    expected = [o.output_token_ids for o in colocated.generate(batch, params)]
    pair = DisaggregatedEngines(
        EngineConfig(
            **settings(
                tiny_llama_dir,
                role="prefill",
                num_kv_blocks=14 if small else 256,
                max_num_batched_tokens=64,
                enable_prefix_caching=not small,
            )
        ),
        EngineConfig(**settings(tiny_llama_dir, role="decode", num_kv_blocks=16 if small else 256)),
    )
    outs = pair.generate(batch, params)
    assert [o.output_token_ids for o in outs] == expected
    assert all(o.finish_reason == "length" and len(o.output_token_ids) == MAX_TOKENS for o in outs)
    assert pair.stats.num_transfers >= len(batch)
    # every request moved all of its prompt's KV: 2 (K, V) x layers x tokens x kv heads x head dim x 4 bytes
    config = pair.prefill.model_config
    per_token = 2 * config.num_layers * config.num_kv_heads * config.head_dim * 4
    assert pair.stats.bytes >= sum(-(-len(p) // 8) * 8 for p in batch) * per_token
    if small:
        preempted = pair.decode.scheduler.num_preemptions + pair.prefill.scheduler.num_preemptions
        assert pair.decode.scheduler.num_preemptions > 0 and preempted == sum(
            o.num_preemptions for o in outs
        )
    for engine in (pair.prefill, pair.decode):
        bm = engine.scheduler.block_manager
        assert bm.num_used_blocks == 0 and not engine.scheduler.has_unfinished_requests()


def test_roles_refuse_static_policy_and_mismatched_pair(tiny_llama_dir):
    with pytest.raises(ValueError, match="needs policy='continuous'"):
        SchedulerConfig(role="prefill", policy="static")
    with pytest.raises(ValueError, match="expected 'prefill' then 'decode'"):
        DisaggregatedEngines(
            EngineConfig(**settings(tiny_llama_dir, role="decode", num_kv_blocks=32)),
            EngineConfig(**settings(tiny_llama_dir, role="decode", num_kv_blocks=32)),
        )


def test_colocated_engine_without_mixed_steps_gives_the_same_greedy_tokens(tiny_llama_dir):
    # vLLM v0's schedule (the papers' co-located baseline): prefill-only steps while prompts wait,
    # earlier requests' decodes waiting for them; a 64-token budget spreads the prompts over steps
    batch = prompts(seed=7)
    params = SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True)
    runs = {}
    for mixed in (True, False):
        llm = LLM(
            **settings(
                tiny_llama_dir, num_kv_blocks=256, max_num_batched_tokens=64, mixed_steps=mixed
            )
        )
        runs[mixed] = [o.output_token_ids for o in llm.generate(batch, params)]
        assert not llm.engine.scheduler.has_unfinished_requests()
    assert runs[False] == runs[True]
