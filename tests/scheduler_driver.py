"""Drives the pure-Python scheduler without a model: tokens come from a seeded RNG."""

import random

from engine.core.config import CacheConfig, SchedulerConfig
from engine.core.request import Request
from engine.core.sampling_params import SamplingParams
from engine.core.scheduler import Scheduler


def make_scheduler(
    num_blocks=32,
    block_size=4,
    max_num_seqs=4,
    max_num_batched_tokens=16,
    max_model_len=64,
    policy="continuous",
    prefix_caching=True,
    quota=None,
    static_reserve="request",
    mixed_steps=True,
) -> Scheduler:
    return Scheduler(
        SchedulerConfig(
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            max_model_len=max_model_len,
            policy=policy,
            static_reserve=static_reserve,
            mixed_steps=mixed_steps,
        ),
        CacheConfig(
            block_size=block_size,
            num_kv_blocks=num_blocks,
            enable_prefix_caching=prefix_caching,
            tenant_block_quota=quota or {},
        ),
        eos_token_ids=frozenset({2}),
    )


def make_request(
    rid: str,
    prompt: list[int],
    max_tokens: int,
    now: float = 0.0,
    tenant: str = "default",
    stop: tuple[int, ...] = (),
) -> Request:
    return Request(
        rid,
        prompt,
        SamplingParams(
            temperature=0, max_tokens=max_tokens, ignore_eos=True, stop_token_ids=list(stop)
        ),
        now,
        tenant,
    )


def run_step(scheduler: Scheduler, rng: random.Random, now: float, vocab: int = 8):
    out = scheduler.schedule(now)
    tokens = [
        rng.randrange(vocab) if req.num_computed_tokens + n == req.num_tokens else None
        for req, n in out.scheduled
    ]
    scheduler.update(out, tokens, now)
    return out


def check_invariants(scheduler: Scheduler) -> None:
    bm = scheduler.block_manager
    holders = [0] * bm.num_blocks
    for req in scheduler.running:
        assert len(set(req.block_table)) == len(req.block_table), f"{req} holds a block twice"
        for block in req.block_table:
            holders[block] += 1
    for req in scheduler.waiting:
        assert not req.block_table, f"waiting {req} holds blocks"
    assert holders == bm.ref_counts, "reference counts disagree with the block tables"
    free = set(bm.free_blocks)
    assert all((bm.ref_counts[b] == 0) == (b in free) for b in range(bm.num_blocks))
    assert bm.num_free_blocks + bm.num_used_blocks == bm.num_blocks
    for h, block in bm.hash_to_block.items():
        assert bm.block_hash[block] == h
    assert bm.num_cached_free_blocks == sum(
        1 for b in bm.free_blocks if bm.block_hash[b] is not None
    )
    tenants = {}
    for req in scheduler.running:
        tenants[req.tenant] = tenants.get(req.tenant, 0) + len(req.block_table)
        assert req.num_tokens == len(req.prompt_token_ids) + len(req.output_token_ids), (
            f"{req} miscounts its tokens"
        )
        assert req.num_computed_tokens <= len(req.block_table) * bm.block_size, (
            f"{req} computed past its blocks"
        )
        if bm.enable_prefix_caching:
            assert req.num_hashed_blocks == req.num_computed_tokens // bm.block_size, (
                f"{req} registration lags"
            )
    assert {t: n for t, n in bm.tenant_blocks.items() if n} == {
        t: n for t, n in tenants.items() if n
    }
    for tenant, quota in bm.tenant_block_quota.items():
        assert bm.tenant_blocks[tenant] <= quota, f"tenant {tenant} holds more than its quota"
    stats = scheduler.kv_stats()
    assert 0 <= stats.tokens_stored <= stats.slots_reserved
    assert stats.tokens_stored == _tokens_stored(scheduler), (
        "kv_stats disagrees with a per-block count"
    )
    configured = scheduler.config if scheduler.controller is None else scheduler.controller.base
    assert (
        len(scheduler.running) <= configured.max_num_seqs
    )  # a batch controller may cut below running


def _tokens_stored(scheduler: Scheduler) -> int:
    """kv_stats' stored tokens counted the slow way: the fullest holder of each block."""
    size, filled = scheduler.block_size, {}
    for req in scheduler.running:
        for i, block in enumerate(req.block_table):
            n = min(size, req.num_computed_tokens - i * size)
            if n <= 0:
                break
            filled[block] = max(filled.get(block, 0), n)
    return sum(filled.values())
