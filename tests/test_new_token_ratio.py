"""SGLang 0.4's admission (`admission: new_token_ratio`, engine.core.new_token_ratio): a request waits
while its prompt and output do not fit beside the running requests' reserve, the reserve ratio decays
per decode step to its floor, a decode step short of blocks retracts the least advanced requests and
raises the ratio, and decode stretches leave the scheduler exactly as the same steps one by one."""

import random
from functools import partial
from unittest import mock

import test_scheduler_stretch as lockstep
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scheduler_driver import check_invariants, make_request, run_step

from engine.core.config import CacheConfig, SchedulerConfig
from engine.core.scheduler import Scheduler


def scheduler(num_blocks: int, admission: str = "new_token_ratio", **limits) -> Scheduler:
    config = dict(max_num_seqs=8, max_num_batched_tokens=64, max_model_len=512) | limits
    return Scheduler(
        SchedulerConfig(admission=admission, mixed_steps=False, **config),
        CacheConfig(block_size=4, num_kv_blocks=num_blocks, enable_prefix_caching=False),
    )


def test_admission_waits_when_the_reserve_would_not_fit():
    """A running request with 119 tokens still to come reserves 0.7 x 119 = 83.3 tokens; on a 40-block
    pool (160 tokens) less its 4 blocks that leaves 60.7, which a waiting 8 + 53 token request does
    not fit (SGLang's `>=`), so it waits; vLLM's rule admits it on the same pool, and one block more
    (64.7 tokens of room) lets it in."""
    for num_blocks, admission, admitted in (
        (40, "new_token_ratio", False),
        (40, "optimistic", True),
        (41, "new_token_ratio", True),
    ):
        s = scheduler(num_blocks, admission)
        s.add_request(make_request("long", [1] * 16, max_tokens=120))
        assert run_step(s, random.Random(0), 0.0).num_admitted == 1  # 136 tokens of room: in
        s.add_request(make_request("short", [1] * 8, max_tokens=53))
        out = s.schedule(1.0)
        assert (out.num_admitted == 1) is admitted, (num_blocks, admission)
        if not admitted:
            assert [r.request_id for r in s.waiting] == ["short"]
            assert [r.request_id for r, _ in out.scheduled] == ["long"]  # it decodes instead


def test_requests_admitted_together_reserve_their_whole_output():
    """Two 8-token prompts asking 100 tokens each need 108 tokens of room apiece: a 60-block
    (240-token) empty pool takes the first and refuses the second (240 - 108 = 132 ≥ 108 passes;
    the second sees 132 - 108 = 24 < 108)."""
    s = scheduler(60)
    for i in range(3):
        s.add_request(make_request(f"r{i}", [1] * 8, max_tokens=100))
    out = s.schedule(0.0)
    assert out.num_admitted == 2 and out.blocked is s.waiting[0]
    s = scheduler(60)
    s.add_request(make_request("a", [1] * 8, max_tokens=100))
    s.add_request(make_request("b", [1] * 8, max_tokens=125))
    assert s.schedule(0.0).num_admitted == 1  # 132 - 133 < 0


def test_the_ratio_decays_per_decode_step_to_its_floor_and_resets_when_idle():
    s = scheduler(400, max_model_len=1024)
    ratio = s.new_token_ratio
    assert ratio.value == 0.7 and abs(ratio.floor - 0.098) < 1e-12
    assert abs(ratio.decay - (0.7 - 0.098) / 600) < 1e-15
    s.add_request(make_request("a", [1] * 4, max_tokens=900))
    rng = random.Random(0)
    run_step(s, rng, 0.0)  # the prefill-only step: no decay
    assert ratio.value == 0.7
    for t in range(10):
        run_step(s, rng, 1.0 + t)
    assert abs(ratio.value - (0.7 - 10 * ratio.decay)) < 1e-12
    for t in range(700):
        run_step(s, rng, 20.0 + t)
    assert ratio.value == ratio.floor
    s.abort_request(s.running[0], 800.0)
    s.add_request(make_request("b", [1] * 4, max_tokens=4))
    s.schedule(801.0)  # nothing running: SGLang's idle branch resets it
    assert ratio.value == 0.7


def test_a_decode_short_of_blocks_retracts_the_least_advanced_and_raises_the_ratio():
    """Three requests decode on a 24-block pool until the step where their next blocks no longer fit:
    the one with the fewest output tokens is retracted, then more until the rest have room for 20
    decode steps each or one is left, and the ratio becomes (tokens decoded + 20 x running) /
    Σ max_tokens of the requests left."""
    s = scheduler(24, max_num_batched_tokens=512)
    rng = random.Random(0)
    s.add_request(make_request("a", [1] * 4, max_tokens=40))
    s.add_request(make_request("b", [1] * 5, max_tokens=40))
    s.add_request(make_request("c", [1] * 3, max_tokens=40))
    out = run_step(s, rng, 0.0)  # 44 + 45 tokens of the 96 fit; c's 43 not in the 7 left
    assert out.num_admitted == 2 and out.blocked.request_id == "c"
    run_step(s, rng, 1.0)  # a decode: the ratio decays once
    s.new_token_ratio.set(0.0)  # (lets c in: the free 84 tokens less no reserve)
    assert run_step(s, rng, 2.0).num_admitted == 1
    t = 3.0
    while not (out := run_step(s, rng, t)).preempted:
        t += 1
        assert t < 100
    # c has the fewest output tokens; then a and b tie, and b's prompt is the longer; a is left
    # alone though its 20 steps do not fit (SGLang keeps the last one)
    assert [r.request_id for r in out.preempted] == ["c", "b"]
    assert [r.request_id for r in s.waiting] == ["c", "b"]  # queued last, in that order
    assert [r.request_id for r in s.running] == ["a"]
    rest = s.running
    decoded = sum(r.num_tokens - r.num_prompt_tokens for r in rest) - len(rest)  # before the step
    assert s.new_token_ratio.value == min(1.0, (decoded + 20 * len(rest)) / 40)
    assert s.new_token_ratio.value > s.new_token_ratio.floor
    check_invariants(s)


def _ratio_snapshot(original):
    def snapshot(scheduler, requests):
        ratio = scheduler.new_token_ratio
        return original(scheduler, requests) | {"ratio": (ratio.base, ratio.steps, ratio.value)}

    return snapshot


def _lockstep_new_token_ratio(config, specs, aborts, seed):
    with (
        mock.patch.object(
            lockstep, "SchedulerConfig", partial(SchedulerConfig, admission="new_token_ratio")
        ),
        mock.patch.object(lockstep, "snapshot", _ratio_snapshot(lockstep.snapshot)),
    ):
        return lockstep.run_lockstep(config, specs, aborts, seed)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lockstep.workloads(policy="continuous"),
    st.booleans(),
    st.booleans(),
    st.integers(0, 2**31 - 1),
)
def test_stretches_match_step_by_step_under_new_token_ratio(workload, mixed, crowded, seed):
    config, specs, aborts = workload
    if crowded:  # a pool so small that decodes run out of blocks and retract
        config = {**config, "num_blocks": max(4, config["num_blocks"] // 4)}
    _lockstep_new_token_ratio({**config, "mixed_steps": mixed}, specs, aborts, seed)


def test_stretches_gain_steps_under_new_token_ratio():
    """Once the queue is empty the reserve ratio decides nothing, so decodes stretch as under vLLM's
    rule: six requests admitted at once, then ~55 decode steps, most of them covered by stretches."""
    config = dict(
        block_size=4,
        num_blocks=200,
        max_num_seqs=6,
        max_num_batched_tokens=64,
        max_model_len=96,
        policy="continuous",
        static_reserve="request",
        caching=False,
        quota=None,
        token_id=0,
    )
    rng = random.Random(5)
    specs = [
        dict(
            arrival=0,
            prompt=(rng.randrange(8),) * 5,
            max_tokens=rng.randint(30, 60),
            min_tokens=0,
            ignore_eos=True,
            stop=(),
            tenant="a",
        )
        for _ in range(6)
    ]
    assert _lockstep_new_token_ratio(config, specs, [], seed=1) > 30
