"""Shared builders of the planner tests (imported by the other test_planner_* files): small scenarios, a few
hundred requests of a 5x spike, so a whole plan runs in seconds."""

from simulator.planner.spec import PlanSettings
from simulator.scenario import Scenario

QUICK = dict(
    max_replicas=8,
    uncertainty=False,
    static_baseline=False,
    autoscaled=False,
    dynamic_batch=False,
    batch={"max_num_seqs": [256], "max_num_batched_tokens": [2048, 8192]},
)


def spike_scenario(
    rate_per_s: float = 2.0,
    multiplier: float = 5.0,
    duration_s: float = 120.0,
    seed: int = 0,
    **changes,
) -> Scenario:
    data = dict(
        name="test-spike",
        seed=seed,
        traffic=dict(
            arrivals=dict(
                kind="spike",
                base=dict(kind="poisson", rate_per_s=rate_per_s),
                multiplier=multiplier,
                start_s=30,
                ramp_up_s=10,
                hold_s=30,
                ramp_down_s=10,
            ),
            duration_s=duration_s,
            too_long="clip",
        ),
        clients=dict(ttft_timeout_s=10, max_retries=1, retry_backoff_s=2),
        slo=dict(ttft_p99_s=2.0, tpot_p99_s=0.15, max_abandon_rate=0.01),
    )
    for key, value in changes.items():
        data[key] = data[key] | value if isinstance(value, dict) and key in data else value
    return Scenario.model_validate(data)


def quick_settings(**changes) -> PlanSettings:
    return PlanSettings.model_validate(QUICK | changes)


def test_spike_scenario_is_small():
    """The builders above stay small enough for a whole plan in seconds (a few hundred requests)."""
    from simulator.simulation import load_traffic

    assert 300 < len(load_traffic(spike_scenario())) < 800
    assert quick_settings().replica_range(spike_scenario()) == (1, 8)
