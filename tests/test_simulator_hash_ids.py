"""Prefix caching from a trace's hash ids: the simulator names a prompt's hash-covered blocks from the
hash ids (`traces.tokens.prompt_block_hashes`) instead of hashing synthesised tokens, and must run
exactly as when every prompt token is synthesised and hashed (same hits, same per-request timings)."""

import numpy as np

from simulator import Scenario
from simulator.cluster.cluster import Cluster
from simulator.simulation import build_cluster, load_traffic
from traces.tokens import PromptTokenSynthesizer, num_hash_named_blocks, prompt_block_hashes


def _scenario(router: str) -> Scenario:
    return Scenario(
        name="shared",
        seed=3,
        traffic=dict(
            arrivals=dict(kind="poisson", rate_per_s=40.0),
            duration_s=4.0,
            prompt=dict(kind="uniform", low=20, high=400),
            output=dict(kind="uniform", low=1, high=60),
            shared_prefix_groups=3,
            shared_prefix_tokens=200,
        ),
        cluster=dict(replicas=2, router=dict(policy=router)),
        scheduler=dict(num_kv_blocks=120, max_num_batched_tokens=512),
    )


def _outcome(cluster: Cluster) -> list:
    cluster.run()
    hits = [r.scheduler.block_manager.num_prefix_hits for r in cluster.replicas]
    return [
        (r.status, r.ttft_s, r.e2e_s, r.num_preemptions, r.replica) for r in cluster.records
    ] + [hits]


def test_hash_named_blocks_run_exactly_as_synthesised_tokens():
    for router in ("round_robin", "prefix_affinity"):
        scenario = _scenario(router)
        trace = load_traffic(scenario)
        by_hash_ids, _ = build_cluster(scenario, trace)
        assert by_hash_ids.prompt_hashes is not None
        by_tokens, _ = build_cluster(scenario, trace)
        synthesizer = PromptTokenSynthesizer(32000, seed=scenario.seed, min_token_id=3)
        by_tokens.prompt_ids = lambda index: synthesizer.prompt_token_ids(trace, index).tolist()
        by_tokens.prompt_hashes = None
        a, b = _outcome(by_hash_ids), _outcome(by_tokens)
        assert a == b and sum(a[-1]) > 0  # the same run, and the cache did hit


def test_prompt_suffix_tokens_and_hash_named_blocks():
    scenario = _scenario("round_robin")
    trace = load_traffic(scenario)
    synthesizer = PromptTokenSynthesizer(1000, seed=1)
    for index in range(5):
        full = synthesizer.prompt_token_ids(trace, index)
        for start in (0, 5, 16, 203, len(full)):
            assert np.array_equal(synthesizer.prompt_token_ids(trace, index, start), full[start:])
        hashes = prompt_block_hashes(trace, index, 16)
        assert len(hashes) == num_hash_named_blocks(trace, index, 16) == (len(full) - 1) // 16
    # equal hash ids up to a block <=> equal block hashes: requests of one prefix group share theirs
    groups: dict[tuple, list[int]] = {}
    for index in range(len(trace)):
        groups.setdefault(tuple(trace.hash_ids[index][:12]), []).append(index)
    group = max(groups.values(), key=len)
    shared = [prompt_block_hashes(trace, i, 16)[:12] for i in group]
    assert len(shared) > 1 and all(h == shared[0] for h in shared)
    # past the 12 shared blocks (200 tokens), each request's own blocks: no two alike
    own = [
        prompt_block_hashes(trace, i, 16)[12]
        for i in group
        if num_hash_named_blocks(trace, i, 16) > 12
    ]
    assert len(own) > 1 and len(set(own)) == len(own)


def test_block_hash_memo_gives_the_hashes_made_without_it():
    """`prompt_block_hashes` with a memo reuses an earlier request's hashes as far as their hash ids
    agree: on traces whose requests share prefixes of random lengths (and repeat), in any order and for
    hash blocks that hold whole KV blocks or not, every request gets exactly the memo-less hashes."""
    rng = np.random.default_rng(7)
    trace = load_traffic(_scenario("round_robin"))
    for hash_block, block_size in ((16, 16), (32, 16), (512, 16), (10, 16), (24, 16), (1, 4)):
        stems = [rng.integers(0, 50, size=int(rng.integers(1, 30))).tolist() for _ in range(4)]
        hash_ids = []
        for index in range(len(trace)):
            stem = stems[int(rng.integers(0, len(stems)))]
            keep = int(rng.integers(0, len(stem) + 1))
            own = rng.integers(1000, 2000, size=int(rng.integers(0, 20))).tolist()
            hash_ids.append(stem[:keep] + own or [int(rng.integers(0, 50))])
        lengths = np.array(
            [max(1, len(ids) * hash_block - int(rng.integers(0, hash_block))) for ids in hash_ids]
        )
        shaped = trace.replace(
            "test", prompt_tokens=lengths, hash_ids=hash_ids, hash_block_size=hash_block
        )
        memo: dict = {}
        order = rng.integers(0, len(trace), size=3 * len(trace)).tolist()
        reused = 0
        for index in order:
            expected = prompt_block_hashes(shaped, index, block_size)
            got = prompt_block_hashes(shaped, index, block_size, memo)
            assert got == expected, (hash_block, block_size, index)
            reused += memo.get(hash_ids[index][0]) is not None
        assert reused > len(order) // 2  # the memo was used
