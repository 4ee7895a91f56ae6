"""The host-memory KV tier: blocks the GPU prefix cache evicts are kept in host memory and loaded back on a
later hit. In the live engine (real tensor copies) greedy outputs stay those of an engine with a pool
large enough never to evict; in the block manager the tier answers hits the GPU cache lost, and stores
nothing when loading would cost more than recomputing."""

import random

from engine import LLM, SamplingParams
from engine.core.block_manager import BlockManager
from engine.core.host_tier import HostKVTier
from engine.core.request import Request
from engine.metrics import ServingMetrics
from tests.live_server import metric_value

PARAMS = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)


def _prompts(seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    prefix = [rng.randrange(3, 300) for _ in range(48)]
    others = [[rng.randrange(3, 300) for _ in range(40)] for _ in range(4)]
    # the shared prefix, then unrelated prompts that push it out of a small GPU pool, then the prefix again
    return [prefix + [5, 6, 7]] + others + [prefix + [8, 9], prefix + [10]]


def test_live_engine_loads_evicted_prefix_back_with_identical_tokens(tiny_llama_dir):
    settings = dict(dtype="float32", block_size=8, max_model_len=128, max_num_seqs=1)
    prompts = _prompts(3)
    roomy = LLM(str(tiny_llama_dir), num_kv_blocks=256, **settings)
    expected = [o.output_token_ids for o in roomy.generate(prompts, PARAMS)]
    tiered = LLM(str(tiny_llama_dir), num_kv_blocks=10, num_cpu_kv_blocks=64, **settings)
    outs = tiered.generate(prompts, PARAMS)
    assert [o.output_token_ids for o in outs] == expected
    tier = tiered.engine.host_tier
    assert tier.num_stores > 0 and tier.num_hits >= 6  # the prefix came back from host memory
    assert outs[-2].num_cached_tokens >= 48
    metrics = ServingMetrics(
        "tiny"
    )  # what /metrics shows: each tier's share of the looked-up tokens
    metrics.observe_engine(tiered.engine)
    text = metrics.render().decode()
    assert metric_value(text, "surgeplan:kv_tier_hit_rate", tier="cpu") > 0
    assert metric_value(text, "surgeplan:kv_tier_hit_rate", tier="gpu") > 0
    untiered = LLM(str(tiny_llama_dir), num_kv_blocks=10, **settings)
    assert (
        untiered.generate(prompts, PARAMS)[-2].num_cached_tokens == 0
    )  # without it the prefix was lost


def _request(rid: str, tokens: list[int]) -> Request:
    return Request(rid, tokens, SamplingParams(max_tokens=1), 0.0)


def test_block_manager_answers_lost_hits_from_the_host_tier_only_when_cheaper():
    for load_s, recompute_s, expect_hits in ((1e-4, 1e-3, 2), (1e-3, 1e-4, 0)):
        bm = BlockManager(4, 4)
        bm.host_tier = HostKVTier(8, 4, load_s, recompute_s)
        first = _request("a", list(range(10, 19)))  # 9 tokens: 2 full blocks + 1
        bm.allocate(first, 9)
        first.num_computed_tokens = 9
        bm.cache_full_blocks(first)
        bm.free(first)
        filler = _request("b", list(range(50, 66)))  # takes all 4 blocks: evicts both
        bm.allocate(filler, 16)
        bm.free(filler)
        assert not bm.hash_to_block or expect_hits == 0 or len(bm.host_tier) == 2
        again = _request("c", list(range(10, 19)))
        hits = bm.get_computed_blocks(again)
        assert len(hits) == expect_hits and bm.host_tier.take_loaded() == expect_hits
        if hits:
            bm.allocate(again, 9, hits)
            assert bm.num_prefix_hits == 8 and bm.host_tier.hit_tokens == 8


def test_simulated_replicas_swap_preempted_blocks_through_the_host_tier():
    from simulator import Scenario, simulate

    scenario = Scenario.load("examples/scenarios/spike-llama-2-7b-a100.yaml")
    autoscaler = scenario.cluster.autoscaler.model_copy(update={"enabled": False})
    scenario = scenario.model_copy(
        update={
            "traffic": scenario.traffic.model_copy(update={"duration_s": 330.0}),
            "cluster": scenario.cluster.model_copy(update={"autoscaler": autoscaler}),
            "scheduler": scenario.scheduler.model_copy(update={"num_kv_blocks": 800}),
            "clients": scenario.clients.model_copy(
                update={"ttft_timeout_s": None, "max_retries": 0}
            ),
        }
    )
    plain = simulate(scenario).summary
    tiered = simulate(
        scenario.model_copy(
            update={
                "scheduler": scenario.scheduler.model_copy(
                    update={"num_kv_blocks": 800, "cpu_kv_gb": 64}
                )
            }
        )
    ).summary
    assert plain["prefix_hit_rate_cpu"] == 0 and plain["cpu_kv_loaded_blocks"] == 0
    assert tiered["cpu_kv_loaded_blocks"] > 0 and tiered["prefix_hit_rate_cpu"] > 0
    assert tiered["completed"] == plain["completed"] == plain["requests"]
    assert (
        tiered["e2e_p99_s"] < plain["e2e_p99_s"]
    )  # preempted requests come back without recomputing
