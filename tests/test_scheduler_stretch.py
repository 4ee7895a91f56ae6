"""Decode stretches against the step-by-step path: `decode_stretch` + `advance_decodes` must leave the
scheduler, the block pool and every request exactly as the same number of `schedule()`/`update()`
rounds would, and the steps a stretch covers must really be pure decodes of the same requests with no
admission, preemption or early finish.

Two copies of one random workload (block sizes, pools small enough to preempt, tenants with quotas,
prefix caching with shared prefixes and prompts that run into the simulated token, stop tokens and
EOS, the SLO batch controller on or off, continuous and static policies, arrivals and aborts between
steps) run in lockstep: one step by step, one by stretches of random length; their whole state is
compared after every stretch.
"""

import copy
import random

import pytest
from compiled_build import pure_python_only
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scheduler_driver import check_invariants, make_request, make_scheduler, run_step

from engine.core.config import CacheConfig, SchedulerConfig
from engine.core.request import Request
from engine.core.sampling_params import SamplingParams
from engine.core.scheduler import Scheduler

EOS = 2
SHARED_PREFIX = (5, 6, 7, 1, 3, 4, 4, 1, 6, 5, 3, 7)


def end_time(step: int) -> float:
    """The fake end time of global step `step` (irregular, increasing)."""
    return 0.5 * (step + 1) + 0.125 * (step % 3)


@st.composite
def workloads(draw, policy=None, caching=None, quota=None, crowded=False, controlled=False):
    """quota: None (drawn), "relative" (each tenant a share of the pool), or the dict itself. crowded:
    tiny blocks, small pools and budgets, short requests, so requests wait and preempt while others decode.
    controlled: the SLO batch controller, with limits above its floors so that it acts."""
    block_size = draw(st.sampled_from([1, 2] if crowded else [1, 2, 4, 8]))
    num_blocks = draw(st.integers(16, 48) if crowded else st.integers(8, 64))
    if controlled:
        num_blocks *= 4
    if quota is None:
        quota = draw(st.sampled_from([None, None, "relative"]))
    if quota == "relative":
        tenants = draw(st.sampled_from([("a",), ("a", "b"), ("b", "c")]))
        quota = {t: draw(st.integers(num_blocks // 2, num_blocks)) for t in tenants}
    config = dict(
        block_size=block_size,
        num_blocks=num_blocks,
        max_num_seqs=draw(st.integers(2, 8) if crowded else st.integers(1, 8)),
        max_num_batched_tokens=draw(st.integers(4, 16) if crowded else st.integers(2, 64)),
        max_model_len=draw(st.integers(48, 160)),
        policy=draw(st.sampled_from(["continuous", "continuous", "static"]))
        if policy is None
        else policy,
        static_reserve=draw(st.sampled_from(["request", "max_model_len"])),
        caching=draw(st.booleans()) if caching is None else caching,
        quota=quota,
        token_id=draw(st.sampled_from([0, EOS, 3])),
        controller=draw(st.sampled_from(["fixed", "fixed", "slo"])),
        target_tpot_s=draw(st.sampled_from([0.3, 0.6, 2.0])),
    )
    if controlled:
        config.update(
            controller="slo",
            max_num_seqs=draw(st.integers(9, 24)),
            max_num_batched_tokens=draw(st.integers(257, 400)),
        )
    token = config["token_id"]
    requests = []
    for _ in range(draw(st.integers(1, 40 if controlled else 20))):
        # few distinct prefixes, and runs of the decoded token: decoding requests register blocks that
        # waiting ones look up
        prefix = SHARED_PREFIX[: draw(st.sampled_from([0, 3, 4, 8, 12]))]
        run = (token,) * draw(
            st.sampled_from([0, 0, 1, 3, block_size, 2 * block_size, 3 * block_size])
        )
        tail = tuple(draw(st.lists(st.integers(0, 7), max_size=10))) if draw(st.booleans()) else ()
        prompt = (prefix + run + tail) or (token,)
        stop = draw(st.sampled_from([(), (), (), (token,), (7,)]))
        max_tokens = draw(st.integers(1, 40 if crowded else 80))
        requests.append(
            dict(
                arrival=draw(st.integers(0, 10 if crowded else 30)),
                prompt=prompt,
                max_tokens=max_tokens,
                min_tokens=draw(st.integers(0, max_tokens)) if stop or token == EOS else 0,
                ignore_eos=draw(st.booleans()),
                stop=stop,
                tenant=draw(st.sampled_from(["a", "b", "c"])),
            )
        )
    aborts = draw(
        st.lists(st.tuples(st.integers(0, 80), st.integers(0, len(requests) - 1)), max_size=3)
    )
    return config, requests, aborts


def build(config: dict, specs: list[dict]) -> tuple[Scheduler, list[Request | None]]:
    scheduler = Scheduler(
        SchedulerConfig(
            max_num_seqs=config["max_num_seqs"],
            max_num_batched_tokens=config["max_num_batched_tokens"],
            max_model_len=config["max_model_len"],
            policy=config["policy"],
            static_reserve=config["static_reserve"],
            batch_controller=config.get("controller", "fixed"),
            batch_target_tpot_s=config.get("target_tpot_s", 0.1),
            mixed_steps=config.get("mixed_steps", True),
        ),
        CacheConfig(
            block_size=config["block_size"],
            num_kv_blocks=config["num_blocks"],
            enable_prefix_caching=config["caching"],
            tenant_block_quota=config["quota"] or {},
        ),
        eos_token_ids=frozenset({EOS}),
    )
    requests = []
    for i, spec in enumerate(specs):
        req = Request(
            f"r{i}",
            list(spec["prompt"]),
            SamplingParams(
                temperature=0,
                max_tokens=spec["max_tokens"],
                min_tokens=spec["min_tokens"],
                ignore_eos=spec["ignore_eos"],
                stop_token_ids=list(spec["stop"]),
            ),
            end_time(spec["arrival"] - 1),
            spec["tenant"],
        )
        quota = scheduler.block_manager.tenant_block_quota.get(req.tenant)
        need = scheduler.max_blocks_needed(req)
        fits = (
            len(req.prompt_token_ids) + spec["max_tokens"] <= config["max_model_len"]
            and need <= config["num_blocks"]
            and (quota is None or need <= quota)
        )
        requests.append(req if fits else None)  # what the engine would refuse up front
    return scheduler, requests


def snapshot(scheduler: Scheduler, requests: list[Request | None]) -> dict:
    bm = scheduler.block_manager
    return {
        "requests": [
            None
            if r is None
            else (
                r.status.value,
                r.num_computed_tokens,
                r.num_tokens,
                tuple(r.output_token_ids),
                tuple(r.block_table),
                r.num_hashed_blocks,
                r.num_cached_tokens,
                r.first_scheduled_time,
                r.first_token_time,
                r.finish_time,
                r.num_preemptions,
            )
            for r in requests
        ],
        "waiting": [r.request_id for r in scheduler.waiting],
        "running": [r.request_id for r in scheduler.running],
        "num_preemptions": scheduler.num_preemptions,
        "free_blocks": list(bm.free_blocks),  # in LRU order: the next block ids handed out
        "ref_counts": list(bm.ref_counts),
        "block_hash": list(bm.block_hash),
        "hash_to_block": dict(bm.hash_to_block),
        "tenant_blocks": {t: n for t, n in bm.tenant_blocks.items() if n},
        "counters": (
            bm.num_allocations,
            bm.num_prefix_queries,
            bm.num_prefix_hits,
            bm.num_cached_free_blocks,
        ),
        "kv_stats": scheduler.kv_stats(),
        "limits": (scheduler.config.max_num_seqs, scheduler.config.max_num_batched_tokens),
        "controller": None
        if scheduler.controller is None
        else (
            scheduler.controller.num_decisions,
            scheduler.controller.tpot_s,
            list(scheduler.controller.history),
        ),
    }


def entries(out) -> list[tuple[str, int]]:
    return [(req.request_id, n) for req, n in out.scheduled]


def news_to_client(requests: list[Request], now: float) -> list[str]:
    """What a simulated replica tells its client after a step ending at `now`: first tokens and
    finishes, in order (`Scheduler.news` must hold every one of them)."""
    return [
        r.request_id for r in requests if r.first_token_time == now or r.finish_time is not None
    ]


def run_lockstep(
    config: dict,
    specs: list[dict],
    aborts: list[tuple[int, int]],
    seed: int,
    max_total_steps: int = 1500,
) -> int:
    """Steps one copy one step at a time and the other by stretches; returns the steps gained."""
    token = config["token_id"]
    (stepper, a_reqs), (stretcher, b_reqs) = build(config, specs), build(config, specs)
    rng = random.Random(seed)
    events = sorted(
        {s["arrival"] for s, r in zip(specs, a_reqs) if r is not None}
        | {step for step, _ in aborts}
    )
    added, step, gained = set(), 0, 0
    while step < max_total_steps:
        for i, spec in enumerate(specs):  # arrivals and aborts happen between steps
            if i not in added and spec["arrival"] <= step and a_reqs[i] is not None:
                stepper.add_request(a_reqs[i])
                stretcher.add_request(b_reqs[i])
                added.add(i)
        for when, i in aborts:
            if when == step and a_reqs[i] is not None and i in added:
                stepper.abort_request(a_reqs[i], end_time(step - 1))
                stretcher.abort_request(b_reqs[i], end_time(step - 1))
        pending = any(e > step for e in events)
        if not stretcher.has_unfinished_requests():
            assert not stepper.has_unfinished_requests()
            if not pending:
                break
            step += 1
            continue
        now = end_time(step - 1)
        out_a, out_b = stepper.schedule(now), stretcher.schedule(now)
        assert entries(out_a) == entries(out_b)
        next_event = min((e for e in events if e > step), default=step + 10**6)
        max_steps = max(1, min(rng.choice([1, 2, 3, 5, 8, 13, 64, 10**6]), next_event - step))
        n = stretcher.decode_stretch(out_b, max_steps)
        assert 1 <= n <= max_steps
        num_steps = rng.choice([n, n, rng.randint(1, n)])
        first_entries = entries(out_b)
        progressed_b = stretcher.advance_decodes(
            out_b, num_steps, [end_time(step + j) for j in range(num_steps)], token
        )
        for j in range(num_steps):
            if j:
                out_a = stepper.schedule(end_time(step + j - 1))
            if n > 1:  # what decode_stretch promised about each step of the stretch
                assert not out_a.preempted and out_a.num_admitted == 0, (
                    f"step {j} of {n} preempts or admits"
                )
                assert entries(out_a) == first_entries, f"step {j} of {n} changes the batch"
                assert all(req.num_computed_tokens > 0 for req, _ in out_a.scheduled)
                assert all(n_new == 1 for _, n_new in out_a.scheduled)
            progressed_a = stepper.update(out_a, [token] * len(out_a.scheduled), end_time(step + j))
            assert news_to_client(stepper.news, end_time(step + j)) == news_to_client(
                progressed_a, end_time(step + j)
            )
            if j < n - 1:
                assert all(not req.is_finished for req in progressed_a), (
                    f"a request finished at step {j} of {n}"
                )
        assert [r.request_id for r in progressed_a] == [r.request_id for r in progressed_b]
        last_end = end_time(
            step + num_steps - 1
        )  # the simulator reads `news`, not every progressed
        assert news_to_client(stretcher.news, last_end) == news_to_client(progressed_b, last_end)
        step += num_steps
        gained += num_steps - 1
        assert snapshot(stretcher, b_reqs) == snapshot(stepper, a_reqs), f"diverged at step {step}"
        check_invariants(stretcher)
        check_invariants(stepper)
    return gained


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.integers(0, 2**31 - 1))
def test_stretches_match_step_by_step(workload, seed):
    config, specs, aborts = workload
    run_lockstep(config, specs, aborts, seed)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(policy="continuous", caching=True), st.integers(0, 2**31 - 1))
def test_stretches_match_with_prefix_caching(workload, seed):
    config, specs, aborts = workload
    run_lockstep(config, specs, aborts, seed)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(policy="continuous", quota="relative", crowded=True), st.integers(0, 2**31 - 1))
def test_stretches_match_under_tenant_quotas(workload, seed):
    config, specs, aborts = workload
    run_lockstep(config, specs, aborts, seed)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(policy="continuous", controlled=True), st.integers(0, 2**31 - 1))
def test_stretches_match_with_the_slo_batch_controller(workload, seed):
    config, specs, aborts = workload
    run_lockstep(config, specs, aborts, seed)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(policy="continuous"), st.integers(0, 2**31 - 1))
def test_stretches_match_without_mixed_steps(workload, seed):
    config, specs, aborts = workload  # vLLM v0's schedule: prefill-only steps while prompts wait
    run_lockstep({**config, "mixed_steps": False}, specs, aborts, seed)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(policy="static"), st.integers(0, 2**31 - 1))
def test_stretches_match_static_batches(workload, seed):
    config, specs, aborts = workload
    run_lockstep(config, specs, aborts, seed)


# ---- what a stretch gains, and its refusals ------------------------------------------------------------
def _decoding(scheduler, requests, steps=1):
    for r in requests:
        scheduler.add_request(r)
    rng = random.Random(0)
    for t in range(steps):
        run_step(scheduler, rng, float(t))


def test_a_pure_decode_step_stretches_to_the_first_finish():
    s = make_scheduler(
        num_blocks=64, block_size=4, max_num_seqs=4, max_num_batched_tokens=16, max_model_len=64
    )
    a, b = (
        make_request("a", [1, 2, 3], max_tokens=30),
        make_request("b", [4, 5, 6, 7, 1], max_tokens=9),
    )
    _decoding(s, [a, b])  # both prefilled: 1 output token each
    out = s.schedule(1.0)
    assert s.decode_stretch(out, 100) == 8  # b's 9th token is the last of the stretch
    assert s.decode_stretch(out, 5) == 5
    progressed = s.advance_decodes(out, 5, [2.0, 3.0, 4.0, 5.0, 6.0], 0)
    assert progressed == [a, b] and a.num_output_tokens == b.num_output_tokens == 6
    assert a.output_token_ids[1:] == [0] * 5 and a.num_computed_tokens == a.num_tokens - 1
    assert (
        len(a.block_table) == 2 and len(b.block_table) == 3
    )  # 8 and 10 computed: crossings allocated
    out = s.schedule(6.0)
    assert s.decode_stretch(out, 100) == 3
    s.advance_decodes(out, 3, [7.0, 8.0, 9.0], 0)
    assert b.is_finished and b.finish_time == 9.0 and s.running == [a]


def test_no_stretch_over_a_prefill_an_admission_or_a_full_pool():
    s = make_scheduler(num_blocks=64, block_size=4, max_num_batched_tokens=16)
    s.add_request(make_request("a", [1, 2, 3], max_tokens=30))
    out = s.schedule(0.0)
    assert s.decode_stretch(out, 50) == 1  # a prefill
    s.update(out, [0], 0.0)
    tight = make_scheduler(
        num_blocks=2, block_size=4, max_num_batched_tokens=16, max_model_len=8, prefix_caching=False
    )
    a = make_request("a", [1, 2, 3], max_tokens=5)
    _decoding(tight, [a])  # 4 tokens: its block is full
    tight.add_request(make_request("b", [4, 5, 6, 7, 1], max_tokens=3))  # needs both blocks: waits
    out = tight.schedule(1.0)
    assert [r.request_id for r, _ in out.scheduled] == ["a"] and out.blocked is not None
    assert tight.decode_stretch(out, 50) == 4  # a finishes at its 5th token; b stays refused


def test_stretch_stops_before_a_stop_token_could_count():
    s = make_scheduler(num_blocks=64, block_size=4)
    req = make_request("a", [1, 2, 3], max_tokens=30, stop=(0,))
    req.params.min_tokens = 6
    _decoding(s, [req])
    out = s.schedule(1.0)
    assert s.decode_stretch(out, 100) == 5  # its 6th token may stop it
    s.advance_decodes(out, 5, [2.0, 3.0, 4.0, 5.0, 6.0], 0)
    assert req.finish_reason == "stop" and req.num_output_tokens == 6


def test_bad_arguments_are_refused():
    s = make_scheduler(num_blocks=64, block_size=4)
    _decoding(s, [make_request("a", [1, 2, 3], max_tokens=30)])
    out = s.schedule(1.0)
    with pytest.raises(ValueError, match="max_steps"):
        s.decode_stretch(out, 0)
    assert s.decode_stretch(out, 4) == 4
    with pytest.raises(ValueError, match="num_steps"):
        s.advance_decodes(out, 5, [2.0] * 5, 0)
    with pytest.raises(ValueError, match="step_end_times"):
        s.advance_decodes(out, 4, [2.0] * 3, 0)


def test_stretches_gain_steps_on_a_long_workload():
    config = dict(
        block_size=4,
        num_blocks=40,
        max_num_seqs=6,
        max_num_batched_tokens=32,
        max_model_len=96,
        policy="continuous",
        static_reserve="request",
        caching=True,
        quota={"a": 20},
        token_id=0,
    )
    rng = random.Random(5)
    specs = [
        dict(
            arrival=rng.randrange(60),
            prompt=SHARED_PREFIX[: rng.randrange(12)] + (rng.randrange(8),) * 3,
            max_tokens=rng.randint(10, 60),
            min_tokens=0,
            ignore_eos=True,
            stop=(),
            tenant=rng.choice("ab"),
        )
        for _ in range(30)
    ]
    gained = run_lockstep(config, specs, [], seed=1)
    assert gained > 40  # of ~200 steps


# ---- refused requests: the stretch ends exactly where their admission could change ---------------------
def true_stretch(scheduler: Scheduler, out, token: int, max_steps: int) -> int:
    """The longest stretch, found by stepping a deep copy until the batch changes or a request finishes."""
    scheduler, out = copy.deepcopy((scheduler, out))
    first = entries(out)
    for j in range(max_steps):
        if j:
            out = scheduler.schedule(100.0 + j)
            if out.preempted or out.num_admitted or entries(out) != first:
                return j
        if any(
            r.is_finished for r in scheduler.update(out, [token] * len(out.scheduled), 100.5 + j)
        ):
            return j + 1
    return max_steps


def _step(scheduler: Scheduler, now: float) -> None:
    out = scheduler.schedule(now)
    scheduler.update(out, [0] * len(out.scheduled), now + 0.5)


@pure_python_only  # (`true_stretch` deep-copies the scheduler)
def test_blocked_request_is_re_examined_when_its_tenant_loses_room():
    """Q waits for blocks; when P (its tenant) crosses a block, Q goes over the tenant's quota, is passed
    over, and R, behind it, fits: the stretch ends before that step."""
    s = make_scheduler(
        num_blocks=20,
        block_size=4,
        max_num_seqs=8,
        max_num_batched_tokens=64,
        max_model_len=128,
        prefix_caching=False,
        quota={"a": 11},
    )
    s.add_request(make_request("P", [1] * 21, 50, tenant="a"))
    s.add_request(make_request("X", [2] * 38, 50, tenant="b"))
    _step(s, 0.0)
    s.add_request(make_request("Q", [3] * 17, 5, tenant="a"))
    s.add_request(make_request("R", [4] * 3, 5, tenant="b"))
    out = s.schedule(1.0)
    assert out.blocked.request_id == "Q"
    assert s.decode_stretch(out, 50) == true_stretch(s, out, 0, 50) == 3


@pure_python_only  # (`true_stretch` deep-copies the scheduler)
def test_evicting_a_passed_over_requests_hits_keeps_the_stretch_until_a_quota_preemption():
    """Q (over its tenant's quota) would hit A's freed prefix blocks; crossings evict them, which leaves
    Q over quota, and the stretch runs until P's crossing finds its tenant's quota full."""
    s = make_scheduler(
        num_blocks=16,
        block_size=4,
        max_num_seqs=8,
        max_num_batched_tokens=64,
        max_model_len=128,
        prefix_caching=True,
        quota={"a": 6},
    )
    s.add_request(make_request("A", list(SHARED_PREFIX), 1, tenant="a"))
    _step(s, 0.0)  # A finishes; its 3 blocks stay cached
    s.add_request(make_request("P", [1] * 19, 50, tenant="a"))
    s.add_request(make_request("X", [2] * 30, 50, tenant="b"))
    _step(s, 1.0)
    assert s.block_manager.num_cached_free_blocks == s.block_manager.num_free_blocks == 3
    s.add_request(make_request("Q", list(SHARED_PREFIX) + [0] * 5, 5, tenant="a"))
    out = s.schedule(2.0)
    assert out.num_skipped == 1 and out.blocked is None
    assert s.decode_stretch(out, 50) == true_stretch(s, out, 0, 50) == 5


@pure_python_only  # (`true_stretch` deep-copies the scheduler)
def test_evicting_a_passed_over_requests_hits_can_let_it_in():
    """Q is over its tenant's quota only because its cache hits make its budget-limited first chunk
    longer; crossings of other tenants evict those hits (oldest first), and two evictions later Q's
    chunk fits its quota and the pool: the stretch ends before that step."""
    s = make_scheduler(
        num_blocks=24,
        block_size=4,
        max_num_seqs=8,
        max_num_batched_tokens=40,
        max_model_len=256,
        prefix_caching=True,
        quota={"a": 14},
    )
    prefix = [(i * 7) % 11 + 1 for i in range(24)]
    s.add_request(make_request("A", prefix, 1, tenant="c"))
    _step(s, 0.0)  # A's 6 blocks: cached, free, evicted first
    s.add_request(make_request("B", [9] * 40, 1, tenant="c"))
    _step(s, 1.0)  # B's 10 blocks: cached behind them
    s.add_request(make_request("X", [3] * 13, 50, tenant="b"))
    s.add_request(make_request("Y", [4] * 14, 50, tenant="b"))
    _step(s, 2.0)
    assert s.block_manager.num_cached_free_blocks == s.block_manager.num_free_blocks == 16
    s.add_request(make_request("Q", prefix + [8] * 50, 5, tenant="a"))
    out = s.schedule(3.0)
    assert out.num_skipped == 1
    assert s.decode_stretch(out, 50) == true_stretch(s, out, 0, 50) == 3


@pure_python_only  # (`true_stretch` deep-copies the scheduler)
@pytest.mark.parametrize("caching", [True, False])
def test_stretch_stops_where_a_decode_could_register_a_blocked_requests_next_block(caching):
    """P's next block, once its decoded tokens fill it, is the block Q misses next: with the prefix cache
    on, the stretch ends after that update (a conservative bound: here Q still would not fit)."""
    s = make_scheduler(
        num_blocks=12,
        block_size=4,
        max_num_seqs=8,
        max_num_batched_tokens=64,
        max_model_len=128,
        prefix_caching=caching,
    )
    s.add_request(make_request("P", [5, 6, 7, 1, 3], 50))
    s.add_request(make_request("X", [2] * 26, 50))
    _step(s, 0.0)
    s.add_request(make_request("Q", [5, 6, 7, 1, 3, 0, 0, 0] + [7] * 9, 5))
    out = s.schedule(1.0)
    assert out.blocked.request_id == "Q"
    if caching:
        assert s.decode_stretch(out, 50) == 3 < true_stretch(s, out, 0, 50)
    else:
        assert s.decode_stretch(out, 50) == true_stretch(s, out, 0, 50) == 7


def test_a_last_one_token_prefill_chunk_starts_a_stretch():
    """A prompt one token longer than the budget: its second chunk looks like a decode, and the stretch
    gives it its first token at the end of the stretch's first step."""
    config = dict(
        block_size=4,
        num_blocks=16,
        max_num_seqs=2,
        max_num_batched_tokens=8,
        max_model_len=64,
        policy="continuous",
        static_reserve="request",
        caching=True,
        quota=None,
        token_id=0,
    )
    spec = dict(
        arrival=0,
        prompt=tuple(range(1, 10)),
        max_tokens=20,
        min_tokens=0,
        ignore_eos=True,
        stop=(),
        tenant="a",
    )
    assert run_lockstep(config, [spec], [], seed=3) > 0


def test_a_one_token_prompt_left_over_from_a_static_batch_is_no_decode():
    """Static admission outran the budget: the one-token prompt's prefill comes next, alone. It looks
    like a decode (one token, the last) but computes from nothing: a prefill, so no stretch."""
    s = make_scheduler(
        num_blocks=42,
        block_size=1,
        max_num_seqs=3,
        max_num_batched_tokens=6,
        policy="static",
        prefix_caching=False,
    )
    s.add_request(make_request("long", [4] * 6, max_tokens=1))
    s.add_request(make_request("one", [4], max_tokens=8))
    run_step(s, random.Random(0), 0.0)  # admits both; only "long" fits the budget
    out = s.schedule(1.0)
    assert [(r.request_id, n) for r, n in out.scheduled] == [
        ("one", 1)
    ] and out.shape.prefill_chunks == ((1, 0),)
    assert s.decode_stretch(out, 10) == 1
