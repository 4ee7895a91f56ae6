"""The scheduler's rules on hand-built cases: chunked prefill, mixed steps, preemption order, static
batching, prefix sharing, tenant quotas and KV accounting."""

import random

from scheduler_driver import make_request, make_scheduler, run_step

from engine.core.request import RequestStatus


def test_long_prompt_is_chunked_and_mixed_with_decodes():
    s = make_scheduler(num_blocks=64, block_size=4, max_num_batched_tokens=8, max_model_len=64)
    s.add_request(make_request("a", [3] * 5, max_tokens=10))
    run_step(s, random.Random(0), 0.0)  # a: whole prompt, first token
    s.add_request(make_request("b", list(range(20)), max_tokens=5))
    out = s.schedule(1.0)
    shape = out.shape
    assert shape.decode_context_lens == (6,)  # a decodes its 6th token
    assert shape.prefill_chunks == ((7, 0),)  # b gets the rest of the 8-token budget
    s.update(out, [1, None], 1.0)
    assert s.schedule(2.0).shape.prefill_chunks == ((7, 7),)


def test_preemption_takes_the_newest_running_request():
    s = make_scheduler(
        num_blocks=6, block_size=4, max_num_batched_tokens=64, max_num_seqs=4, prefix_caching=False
    )
    for i in range(3):
        s.add_request(make_request(f"r{i}", [i + 3] * 7, max_tokens=20, now=float(i)))
    rng = random.Random(1)
    run_step(s, rng, 0.0)  # each holds 2 blocks: the pool is full
    preempted = []
    for t in range(1, 6):
        preempted += [r.request_id for r in run_step(s, rng, float(t)).preempted]
    assert preempted and preempted[0] == "r2"
    victim = next(r for r in s.waiting if r.request_id == "r2")
    assert (
        victim.num_computed_tokens == 0 and not victim.block_table and victim.num_preemptions == 1
    )
    assert s.waiting[0] is victim  # it goes back to the head of the queue


def test_static_batch_reserves_contiguously_and_admits_only_when_drained():
    s = make_scheduler(
        num_blocks=64,
        block_size=4,
        max_num_seqs=2,
        max_model_len=32,
        policy="static",
        prefix_caching=False,
        static_reserve="max_model_len",
    )
    lengths = [2, 9, 3]
    for i, n in enumerate(lengths):
        s.add_request(make_request(f"r{i}", [5] * 4, max_tokens=n))
    rng = random.Random(2)
    run_step(s, rng, 0.0)
    batch = list(s.running)
    assert [r.request_id for r in batch] == ["r0", "r1"]
    for r in batch:
        assert r.block_table == list(
            range(r.block_table[0], r.block_table[0] + 8)
        )  # 32 tokens, contiguous
    seen_r2_running_with_r1 = False
    for t in range(1, 20):
        run_step(s, rng, float(t))
        ids = {r.request_id for r in s.running}
        seen_r2_running_with_r1 |= {"r1", "r2"} <= ids
    assert not seen_r2_running_with_r1 and not s.has_unfinished_requests()
    stats_free = s.block_manager.num_free_blocks
    assert stats_free == 64


def test_static_reservation_shows_as_fragmentation():
    s = make_scheduler(
        num_blocks=64,
        block_size=4,
        max_num_seqs=2,
        max_model_len=32,
        policy="static",
        prefix_caching=False,
        static_reserve="max_model_len",
    )
    s.add_request(make_request("r0", [5] * 6, max_tokens=3))
    run_step(s, random.Random(3), 0.0)
    stats = s.kv_stats()
    assert stats.slots_reserved == 32 and stats.tokens_stored == 6
    assert abs(stats.utilization - 6 / 32) < 1e-9


def test_shared_prefix_blocks_are_reused_by_refcount():
    s = make_scheduler(num_blocks=32, block_size=4, max_num_batched_tokens=64)
    prefix = [4, 5, 6, 7, 1, 3, 3, 3]
    s.add_request(make_request("a", prefix + [0, 1], max_tokens=5))
    run_step(s, random.Random(4), 0.0)
    s.add_request(make_request("b", prefix + [7], max_tokens=5))
    run_step(s, random.Random(5), 1.0)
    a, b = s.running
    assert b.num_cached_tokens == 8 and b.block_table[:2] == a.block_table[:2]
    assert all(s.block_manager.ref_counts[x] == 2 for x in a.block_table[:2])


def test_tenant_at_quota_does_not_block_other_tenants():
    s = make_scheduler(
        num_blocks=40, block_size=4, max_num_seqs=8, max_num_batched_tokens=64, quota={"greedy": 6}
    )
    s.add_request(
        make_request("g0", [3] * 20, max_tokens=4, tenant="greedy")
    )  # 6 blocks at its end
    s.add_request(make_request("g1", [4] * 20, max_tokens=4, tenant="greedy"))
    s.add_request(make_request("n0", [5] * 8, max_tokens=4, tenant="nice"))
    run_step(s, random.Random(6), 0.0)
    running = {r.request_id for r in s.running}
    assert running == {"g0", "n0"}  # g1 waits for its tenant, n0 passes it
    assert s.block_manager.tenant_blocks["greedy"] <= 6


def test_finished_requests_free_blocks_and_report_length():
    s = make_scheduler(num_blocks=16, block_size=4)
    req = make_request("a", [3, 4, 5], max_tokens=3)
    s.add_request(req)
    rng = random.Random(7)
    for t in range(5):
        run_step(s, rng, float(t))
    assert req.status is RequestStatus.FINISHED_LENGTH and req.num_output_tokens == 3
    assert s.block_manager.num_free_blocks == 16 and req.first_token_time == 0.0


def test_free_blocks_go_out_uncached_first_then_least_recently_used():
    from engine.core.block_manager import BlockManager

    bm = BlockManager(num_blocks=8, block_size=2)
    a = make_request("a", [1, 2, 3, 4, 5], max_tokens=1)
    bm.allocate(a, 5)
    a.num_computed_tokens = 5
    bm.cache_full_blocks(a)  # blocks 0 and 1 are full: cached; 2 is not
    assert a.block_table == [0, 1, 2] and bm.num_cached_free_blocks == 0
    bm.free(a)  # tail first: 2 to the front, then 1, 0 cached
    assert bm.free_blocks == [2, 3, 4, 5, 6, 7, 1, 0] and bm.num_cached_free_blocks == 2
    b = make_request("b", [6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6], max_tokens=1)
    bm.allocate(b, 13)  # 7 blocks: the uncached ones, then 1 (evicted)
    assert b.block_table == [2, 3, 4, 5, 6, 7, 1] and bm.free_blocks == [0]
    assert bm.num_cached_free_blocks == 1 and len(bm.hash_to_block) == 1


def test_without_mixed_steps_waiting_prompts_go_first_whole_and_decodes_wait():
    # vLLM v0's schedule (the co-located baseline of DistServe and Splitwise): prefill-only steps of
    # whole prompts while any wait and fit, then decode-only steps
    s = make_scheduler(
        num_blocks=64,
        block_size=4,
        max_num_batched_tokens=32,
        max_model_len=64,
        mixed_steps=False,
        prefix_caching=False,
    )
    s.add_request(make_request("a", [3] * 5, max_tokens=10))
    run_step(s, random.Random(0), 0.0)  # a: whole prompt, first token
    for name, length in (("b", 20), ("c", 9), ("d", 10)):
        s.add_request(make_request(name, list(range(3, 3 + length)), max_tokens=5))
    out = s.schedule(1.0)  # b and c fit the 32-token budget whole; d would be cut: it waits
    assert out.shape.prefill_chunks == ((20, 0), (9, 0)) and out.shape.decode_context_lens == ()
    s.update(out, [1, 1], 1.0)
    out = s.schedule(2.0)  # a still waits: d goes first
    assert out.shape.prefill_chunks == ((10, 0),) and out.shape.decode_context_lens == ()
    s.update(out, [1], 2.0)
    out = s.schedule(3.0)  # nothing waits: a decode-only step of all four
    assert out.shape.prefill_chunks == () and out.shape.decode_context_lens == (6, 21, 10, 11)
    assert s.decode_stretch(out, 8) > 1  # and, with nothing waiting, a stretch like any other


def test_a_request_copies_its_prompt_unless_handed_the_list():
    """By default a request keeps a copy of the prompt it is given (a caller may reuse its list);
    `copy_prompt=False` (the simulator's per-request prompts) keeps that very list, with the same counts."""
    from engine.core.request import Request
    from engine.core.sampling_params import SamplingParams

    prompt = [random.randrange(1000) for _ in range(random.randrange(1, 300))]
    params = SamplingParams(max_tokens=4)
    copied = Request("a", prompt, params, 0.0)
    kept = Request("b", prompt, params, 0.0, copy_prompt=False)
    assert copied.prompt_token_ids == prompt and copied.prompt_token_ids is not prompt
    assert kept.prompt_token_ids is prompt
    for req in (copied, kept):
        assert req.num_prompt_tokens == req.num_tokens == len(prompt)
        assert req.token_ids(0, len(prompt)) == prompt
