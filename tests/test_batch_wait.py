"""TensorRT-LLM's batch waiting (`batch_wait_steps`, `batch_wait_max_tokens_ratio`, engine.core.batch_wait):
while requests decode, a new prompt waits up to the set number of steps in a row unless enough tokens
gather; an idle server never waits; decode stretches leave the scheduler as the same steps one by one;
and InferenceMAX's TensorRT-LLM runs that set it replay their first tokens with it."""

from functools import partial
from unittest import mock

import pytest
import test_scheduler_stretch as lockstep
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from scheduler_driver import check_invariants, make_request

from engine.core.config import CacheConfig, SchedulerConfig
from engine.core.scheduler import Scheduler


def scheduler(steps: int = 3, ratio: float = 0.5, budget: int = 64) -> Scheduler:
    return Scheduler(
        SchedulerConfig(
            max_num_seqs=8,
            max_num_batched_tokens=budget,
            max_model_len=256,
            batch_wait_steps=steps,
            batch_wait_max_tokens_ratio=ratio,
        ),
        CacheConfig(block_size=4, num_kv_blocks=256, enable_prefix_caching=False),
    )


def step(s: Scheduler, now: float):
    out = s.schedule(now)
    s.update(out, [7] * len(out.scheduled), now)
    check_invariants(s)
    return out


def test_an_idle_server_takes_a_prompt_at_once():
    s = scheduler()
    s.add_request(make_request("a", [1] * 8, 50))
    assert step(s, 0.0).num_admitted == 1 and s.batch_wait.held == 0


def test_a_prompt_waits_the_set_steps_while_others_decode_then_enters():
    """TensorRT-LLM's count: a step that holds counts one; once the count reaches the set steps the
    next step lets the prompts in and starts over."""
    s = scheduler(steps=3)
    s.add_request(make_request("a", [1] * 8, 50))
    step(s, 0.0)
    s.add_request(make_request("b", [1] * 8, 50))
    held = [step(s, float(t)).num_admitted for t in range(1, 5)]
    assert held == [0, 0, 0, 1]
    assert s.batch_wait.held == 0 and len(s.running) == 2
    s.add_request(make_request("c", [1] * 8, 50))  # the count starts again
    assert [step(s, float(t)).num_admitted for t in range(5, 9)] == [0, 0, 0, 1]


def test_enough_waiting_tokens_end_the_wait():
    """0.5 x 64 = 32 tokens: one decode and three 8-token prompts (25) hold; a fourth prompt (33) lets
    all four in at once, every one of them FCFS."""
    s = scheduler(steps=20, ratio=0.5)
    s.add_request(make_request("a", [1] * 8, 50))
    step(s, 0.0)
    for name in "bcd":
        s.add_request(make_request(name, [1] * 8, 50))
    assert step(s, 1.0).num_admitted == 0 and s.batch_wait.held == 1
    s.add_request(make_request("e", [1] * 8, 50))
    out = step(s, 2.0)
    assert [req.request_id for req, _ in out.scheduled] == ["a", "b", "c", "d", "e"]
    assert out.num_admitted == 4 and s.batch_wait.held == 0


def test_the_release_follows_the_steps_own_token_budget():
    """The ratio is of the budget in force at the step: an SLO batch controller moves
    `max_num_batched_tokens` (`Scheduler.config` per step), and the threshold moves with it."""
    import random

    rng = random.Random()  # fresh sizes each run
    prompt = rng.randint(4, 12)
    s = scheduler(steps=20, ratio=0.5, budget=64)
    s.add_request(make_request("a", [1] * 8, 50))
    step(s, 0.0)
    s.add_request(make_request("b", [1] * prompt, 50))
    assert step(s, 1.0).num_admitted == 0  # 1 + prompt tokens < 32
    # the controller shrinks the budget: now 1 + prompt reaches half of it
    s.config = s.config.model_copy(update={"max_num_batched_tokens": 2 * (1 + prompt)})
    assert step(s, 2.0).num_admitted == 1 and s.batch_wait.held == 0


def test_no_seat_or_no_budget_is_no_hold():
    """A step that could admit nothing (every seat taken) neither holds nor counts."""
    s = Scheduler(
        SchedulerConfig(
            max_num_seqs=1,
            max_num_batched_tokens=64,
            batch_wait_steps=3,
            batch_wait_max_tokens_ratio=0.5,
        ),  # fmt: skip
        CacheConfig(block_size=4, num_kv_blocks=64, enable_prefix_caching=False),
    )
    s.add_request(make_request("a", [1] * 8, 5))
    step(s, 0.0)
    s.add_request(make_request("b", [1] * 8, 5))
    for t in range(1, 5):
        assert step(s, float(t)).num_admitted == 0 and s.batch_wait.held == 0
    assert step(s, 5.0).num_admitted == 1  # a's seat is free: nothing decodes, so no wait


@pytest.mark.parametrize("steps, ratio", [(20, 0.0), (0, 0.9)])
def test_one_of_the_two_settings_alone_is_refused(steps, ratio):
    with pytest.raises(ValidationError, match="holds nothing"):
        SchedulerConfig(batch_wait_steps=steps, batch_wait_max_tokens_ratio=ratio)


@pytest.mark.parametrize("other", [{"policy": "static"}, {"mixed_steps": False}])
def test_a_wait_without_mixed_continuous_steps_is_refused(other):
    with pytest.raises(ValidationError, match="needs policy='continuous' and mixed_steps=True"):
        SchedulerConfig(batch_wait_steps=20, batch_wait_max_tokens_ratio=0.9, **other)


def _held_snapshot(original):
    def snapshot(scheduler, requests):
        return original(scheduler, requests) | {"held": scheduler.batch_wait.held}

    return snapshot


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lockstep.workloads(policy="continuous"),
    st.integers(1, 6),
    st.sampled_from([0.2, 0.5, 0.9]),
    st.integers(0, 2**31 - 1),
)
def test_stretches_match_step_by_step_under_a_batch_wait(workload, steps, ratio, seed):
    config, specs, aborts = workload
    waiting = partial(SchedulerConfig, batch_wait_steps=steps, batch_wait_max_tokens_ratio=ratio)
    with (
        mock.patch.object(lockstep, "SchedulerConfig", waiting),
        mock.patch.object(lockstep, "snapshot", _held_snapshot(lockstep.snapshot)),
    ):
        lockstep.run_lockstep(config, specs, aborts, seed)


def test_the_live_engine_holds_a_prompt_while_another_decodes():
    """The same rule in the served engine (`serve --batch-wait-steps`): a prompt arriving while
    another request decodes gets its first token only after the held steps."""
    from live_server import tiny_config

    from engine.core.sampling_params import SamplingParams
    from engine.llm_engine import LLMEngine

    def first_token_step(**wait) -> int:
        engine = LLMEngine(tiny_config(**wait))
        params = SamplingParams(temperature=0.0, max_tokens=20, ignore_eos=True)
        engine.add_request("a", [5, 9, 13, 17], params)
        engine.step()
        engine.add_request("b", [7, 3, 99, 4], params)
        for count in range(1, 12):
            if any(out.request_id == "b" and out.output_token_ids for out in engine.step()):
                return count
        raise AssertionError("b got no token in 11 steps")

    assert first_token_step() == 1
    assert first_token_step(batch_wait_steps=4, batch_wait_max_tokens_ratio=0.9) == 5


def test_infermax_held_runs_replay_their_first_tokens_with_the_wait():
    """A run InferenceMAX served with the wait (TP4, 1k / 1k, 4 in flight on H200): its mean TTFT,
    230 ms measured, is simulated at about a third without the wait and within 15% with it."""
    from simulator.validation.published_replay import replay_run
    from simulator.validation.published_sets import load_published

    data = load_published("aic-silicon-trtllm-70b")
    (run,) = [run for run in data["runs"] if run["id"] == "h200-llama-3-70b-tp4-1024x1024-c4"]
    assert run["engine_settings"]["batch_wait_steps"] == 20
    measured = run["measured"]["ttft_mean_s"]
    unheld = {
        **run,
        "engine_settings": {
            key: value
            for key, value in run["engine_settings"].items()
            if not key.startswith("batch_wait")
        },
    }
    with_wait = replay_run(data, run)["ttft_mean_s"] / measured
    without = replay_run(data, unheld)["ttft_mean_s"] / measured
    assert without < 0.4 and 0.85 < with_wait < 1.15, (without, with_wait)
