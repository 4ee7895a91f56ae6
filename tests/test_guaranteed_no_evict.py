"""TensorRT-LLM's GUARANTEED_NO_EVICT admission (`admission: guaranteed_no_evict`,
`engine.core.admission`), checked against its definition at every step: a waiting request starts only
when its blocks at full length (prompt + max_tokens, capped at max_model_len) plus the blocks every
running request still lacks to reach its own are free. The scheduler sums the running requests'
lack once a pass and adds each request it starts; these tests recount it from the block tables."""

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scheduler_driver import check_invariants, make_request

from engine.core.block_manager import blocks_for
from engine.core.config import CacheConfig, SchedulerConfig
from engine.core.scheduler import Scheduler

BLOCK = 4


def scheduler(num_blocks: int, max_num_seqs: int = 8, budget: int = 64) -> Scheduler:
    return Scheduler(
        SchedulerConfig(
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=budget,
            max_model_len=64,
            admission="guaranteed_no_evict",
        ),
        CacheConfig(block_size=BLOCK, num_kv_blocks=num_blocks, enable_prefix_caching=False),
    )


def full_blocks(s: Scheduler, req) -> int:
    return blocks_for(min(req.max_num_tokens, s.config.max_model_len), BLOCK)


def lacking(s: Scheduler) -> int:
    """The running requests' blocks still missing at full length, recounted from their tables."""
    return sum(max(full_blocks(s, r) - len(r.block_table), 0) for r in s.running)


def test_requests_started_in_one_pass_count_against_the_next():
    """Three 8-token prompts asking 32 tokens (10 blocks each at full length) on a 24-block pool:
    the first needs 10 of 24 free, the second 10 + the first's 8 missing of 22, the third 10 + 16 of
    20: two start in the same pass, the third waits until one finishes, and none is preempted."""
    s = scheduler(24)
    for i in range(3):
        s.add_request(make_request(f"r{i}", [1] * 8, max_tokens=32))
    out = s.schedule(0.0)
    assert [r.request_id for r, _ in out.scheduled] == ["r0", "r1"]
    assert out.blocked is s.waiting[0] and s.waiting[0].request_id == "r2"
    assert lacking(s) == 16 and s.block_manager.num_free_blocks == 20


@given(
    seed=st.integers(0, 2**31 - 1),
    num_blocks=st.integers(16, 80),
    max_num_seqs=st.integers(1, 8),
    budget=st.sampled_from([8, 16, 64]),
)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_pass_starts_exactly_the_requests_the_rule_allows(
    seed, num_blocks, max_num_seqs, budget
):
    """Random arrivals and lengths, step by step: after each pass the running requests and the pool
    hold the guarantee (their missing blocks are free, so no step ever preempts), and a request left
    at the head of the queue with a seat and budget to spare is one the rule refuses."""
    rng = random.Random(seed)
    s = scheduler(num_blocks, max_num_seqs, budget)
    arrivals = sorted(rng.uniform(0, 20) for _ in range(24))
    pending = [
        make_request(f"r{i}", [rng.randrange(3, 8)] * rng.randint(1, 30), rng.randint(1, 34), t)
        for i, t in enumerate(arrivals)
    ]
    now = 0.0
    for _ in range(600):
        while pending and pending[0].arrival_time <= now:
            s.add_request(pending.pop(0))
        if not pending and not s.waiting and not s.running:
            break
        out = s.schedule(now)
        check_invariants(s)
        assert not out.preempted
        free = s.block_manager.num_free_blocks
        assert lacking(s) <= free, "a started request's full length does not fit the pool"
        used = sum(n for _, n in out.scheduled)
        head = s.waiting[0] if s.waiting else None
        if head is not None and len(s.running) < max_num_seqs and used < budget:
            assert out.blocked is head
            assert full_blocks(s, head) + lacking(s) > free, "the rule would have started it"
        tokens = [
            7 if req.num_computed_tokens + n == req.num_tokens else None for req, n in out.scheduled
        ]
        s.update(out, tokens, now)
        now += 1.0
    assert not pending and not s.waiting and not s.running
