"""Property tests: random add / step / abort / finish sequences keep the block pool consistent, and
every request ends finished or aborted with every block free."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from scheduler_driver import check_invariants, make_request, make_scheduler, run_step

OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "step", "step", "step", "abort"]), st.integers(0, 2**31 - 1)
    ),
    min_size=1,
    max_size=60,
)


def _exercise(ops, policy: str, prefix_caching: bool, quota: dict | None = None) -> None:
    scheduler = make_scheduler(
        num_blocks=24, block_size=4, policy=policy, prefix_caching=prefix_caching, quota=quota
    )
    requests, now = [], 0.0
    for op, seed in ops:
        rng = random.Random(seed)
        now += 0.01
        if op == "add":
            shared = [5, 6, 7, 1, 3, 4, 4, 2][
                : rng.randint(0, 8)
            ]  # common prefixes exercise the cache
            prompt = shared + [rng.randrange(8) for _ in range(rng.randint(1, 20))]
            req = make_request(
                f"r{len(requests)}",
                prompt,
                rng.randint(1, 20),
                now,
                tenant=rng.choice(["a", "b"]),
                stop=(rng.randrange(8),) if rng.random() < 0.3 else (),
            )
            if scheduler.max_blocks_needed(req) <= 24:
                scheduler.add_request(req)
                requests.append(req)
        elif op == "abort" and requests:
            scheduler.abort_request(rng.choice(requests), now)
        else:
            run_step(scheduler, rng, now)
        check_invariants(scheduler)
    rng = random.Random(0)
    for _ in range(2000):  # drain: bounded, and must finish
        if not scheduler.has_unfinished_requests():
            break
        run_step(scheduler, rng, now)
        check_invariants(scheduler)
    assert not scheduler.has_unfinished_requests()
    assert all(r.is_finished for r in requests)
    assert scheduler.block_manager.num_free_blocks == 24
    assert all(r.finish_time is not None and not r.block_table for r in requests)


@settings(max_examples=120, deadline=None)
@given(OPS, st.booleans())
def test_continuous_policy_keeps_pool_consistent(ops, prefix_caching):
    _exercise(ops, "continuous", prefix_caching)


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_static_policy_keeps_pool_consistent(ops):
    _exercise(ops, "static", prefix_caching=False)


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_tenant_quotas_keep_pool_consistent(ops):
    _exercise(ops, "continuous", prefix_caching=True, quota={"a": 12, "b": 16})
