"""The SLO-aware batch controller in the shared scheduler: it keeps the time per output token near its
target where a fixed batch would not, stays within its floors and caps, leaves `fixed` untouched, is
exact under the simulator's decode stretches, and is a scenario setting like the engine's others."""

import random

import pytest
from test_planner_helpers import spike_scenario

from engine.core.config import CacheConfig, SchedulerConfig
from engine.core.request import Request
from engine.core.sampling_params import SamplingParams
from engine.core.scheduler import Scheduler
from simulator.result import summarize
from simulator.simulation import build_cluster, load_traffic


def _drive(controller: str, num_requests: int = 300, target_tpot_s: float = 0.05, seed: int = 0):
    """A scheduler fed all at once, each step costing 2 ms per running sequence + 10 µs per token: a
    batch of more than ~25 decodes makes tokens come slower than the 50 ms target."""
    rng = random.Random(seed)
    config = SchedulerConfig(
        max_num_seqs=256,
        max_num_batched_tokens=4096,
        max_model_len=1024,
        batch_controller=controller,
        batch_target_tpot_s=target_tpot_s,
    )
    scheduler = Scheduler(
        config, CacheConfig(block_size=16, num_kv_blocks=20000, enable_prefix_caching=False)
    )
    for i in range(num_requests):
        scheduler.add_request(
            Request(
                str(i),
                [1] * rng.randint(16, 200),
                SamplingParams(max_tokens=rng.randint(20, 200), ignore_eos=True),
                0.0,
            )
        )
    now, per_token = 0.0, []
    limits = []
    while scheduler.has_unfinished_requests():
        out = scheduler.schedule(now)
        limits.append((scheduler.config.max_num_seqs, scheduler.config.max_num_batched_tokens))
        step_s = 0.002 * len(out.scheduled) + 1e-5 * sum(n for _, n in out.scheduled)
        now += step_s
        scheduler.update(out, [0] * len(out.scheduled), now)
        per_token.append(step_s)
    return scheduler, per_token, limits, now


def test_controller_holds_tpot_where_a_fixed_batch_does_not():
    fixed, fixed_steps, _, _ = _drive("fixed")
    slo, slo_steps, limits, _ = _drive("slo")
    settled = slo_steps[
        len(slo_steps) // 4 : -len(slo_steps) // 4
    ]  # after the first cut, before the tail
    assert sum(fixed_steps) / len(fixed_steps) > 0.2  # 256 at once: ~0.5 s per token
    assert sum(settled) / len(settled) < 0.05 * 1.3
    controller = slo.controller
    assert controller is not None and fixed.controller is None and controller.history
    assert all(
        controller.min_seqs <= seqs <= 256 and controller.min_tokens <= tokens <= 4096
        for seqs, tokens in limits
    )


def test_fixed_leaves_the_limits_alone():
    scheduler, _, limits, _ = _drive("fixed", num_requests=40)
    assert set(limits) == {(256, 4096)} and scheduler.config.batch_controller == "fixed"


@pytest.mark.parametrize("seed", range(3))
def test_controller_stays_within_floors_and_caps(seed):
    rng = random.Random(seed)
    target = rng.choice([0.005, 0.02, 0.2])
    _, _, limits, _ = _drive(
        "slo", num_requests=rng.randint(20, 200), target_tpot_s=target, seed=seed
    )
    assert all(8 <= seqs <= 256 and 256 <= tokens <= 4096 for seqs, tokens in limits)


def _records(scenario, stretch: int):
    trace = load_traffic(scenario)
    cluster, facts = build_cluster(scenario, trace)
    for replica in cluster.replicas:
        replica.max_stretch_steps = stretch
    end = cluster.run()
    controllers = [replica.scheduler.controller for replica in cluster.replicas]
    result = summarize(scenario, cluster, end, facts)
    return [
        (r.status, r.ttft_s, r.e2e_s, r.output_tokens, r.num_preemptions) for r in result.records
    ], controllers


def test_decode_stretches_stay_exact_with_the_controller():
    """The simulator's many-steps-at-once path gives every request the same fate and timings as stepping
    one step at a time, with the controller changing limits along the way."""
    scenario = spike_scenario(
        rate_per_s=3.0,
        duration_s=60,
        hardware={"gpu": "L40S"},
        cluster={"replicas": 2},
        scheduler={
            "batch_controller": "slo",
            "batch_target_tpot_s": 0.05,
            "max_num_batched_tokens": 8192,
        },
    )
    stretched, controllers = _records(scenario, 256)
    stepped, _ = _records(scenario, 1)
    assert all(controller is not None and controller.history for controller in controllers)
    assert len(stretched) == len(stepped)
    for a, b in zip(stretched, stepped):
        assert a[0] == b[0] and a[3:] == b[3:]
        assert (a[1] is None) == (b[1] is None) and (a[2] is None) == (b[2] is None)
        if a[1] is not None:  # step times summed in another order: rounding only
            assert a[1] == pytest.approx(b[1], rel=1e-9) and a[2] == pytest.approx(b[2], rel=1e-9)


def test_scenario_setting_reaches_the_scheduler():
    scenario = spike_scenario(
        duration_s=20, scheduler={"batch_controller": "slo", "batch_target_tpot_s": 0.07}
    )
    cluster, _ = build_cluster(scenario, load_traffic(scenario))
    controller = cluster.replicas[0].scheduler.controller
    assert controller is not None and controller.target_tpot_s == 0.07
    with pytest.raises(ValueError, match="batch_controller"):
        spike_scenario(scheduler={"batch_controller": "pid"})


def test_the_live_engine_and_serve_take_the_controller_setting():
    from engine import LLM
    from engine.core.batch_controller import make_controller
    from engine.openai.cli import serve

    llm = LLM(
        "tiny",
        load_format="dummy",
        num_kv_blocks=16,
        max_model_len=64,
        batch_controller="slo",
        batch_target_tpot_s=0.05,
    )
    config = llm.engine.scheduler_config
    assert config.batch_controller == "slo" and config.batch_target_tpot_s == 0.05
    assert llm.engine.scheduler.controller is not None and make_controller(config) is not None
    assert (
        LLM(
            "tiny", load_format="dummy", num_kv_blocks=16, max_model_len=64
        ).engine.scheduler.controller
        is None
    )
    import inspect

    assert {"batch_controller", "batch_target_tpot"} <= set(inspect.signature(serve).parameters)
