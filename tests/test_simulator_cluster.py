"""The simulated cluster against what must hold: conservation, queueing theory, the policies' known
ordering, preemption, prefix caching, cold starts, timeouts and retries, determinism."""

import json

import numpy as np
import pytest
from sim_helpers import cluster_config, cost_model, run_cluster

from simulator import Scenario, simulate


def _workload(seed=0, n=400, rate=8.0, prompt=(20, 300), output=(5, 120)):
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1 / rate, n))
    return arrival, rng.integers(*prompt, n), rng.integers(*output, n)


def test_conservation_of_requests_blocks_and_gpu_hours():
    arrival, prompts, outputs = _workload()
    config = cluster_config(
        num_blocks=200, replicas=3, ttft_timeout_s=2.0, max_retries=1, max_waiting_per_replica=20
    )
    cluster, end = run_cluster(config, arrival, prompts, outputs)
    statuses = [r.status for r in cluster.records]
    assert len(statuses) == len(arrival)
    assert set(statuses) <= {"ok", "timeout", "rejected"}
    for replica in cluster.replicas:
        served = [r for r in cluster.records if r.replica == replica.replica_id]
        assert all(r.status in ("ok", "timeout", "rejected") for r in served)
        assert replica.scheduler.block_manager.num_used_blocks == 0  # no block left allocated
        assert not replica.scheduler.has_unfinished_requests()
    assert cluster.gpu_hours(end) == pytest.approx(3 * end / 3600)  # three replicas held throughout


def test_one_replica_batch_one_matches_md1_mean_wait():
    """Poisson arrivals, deterministic service D (one 1-token request per step): Wq = ρD / (2(1 − ρ))."""
    service_s, rho, n = 0.1, 0.7, 20000
    rng = np.random.default_rng(3)
    arrival = np.cumsum(rng.exponential(service_s / rho, n))
    config = cluster_config(cost_model(service_s), max_num_seqs=1, num_blocks=64)
    cluster, _ = run_cluster(config, arrival, np.full(n, 32), np.ones(n, dtype=int))
    wait = np.mean([r.queue_s for r in cluster.records])
    assert wait == pytest.approx(rho * service_s / (2 * (1 - rho)), rel=0.05)


def test_throughput_and_latency_are_monotone_in_load():
    latencies, throughputs = [], []
    for rate in (1.0, 2.0, 4.0, 8.0, 16.0):
        arrival, prompts, outputs = _workload(seed=1, n=300, rate=rate)
        cluster, end = run_cluster(
            cluster_config(cost_model(0.01, 2e-5, 1e-6), max_num_seqs=8), arrival, prompts, outputs
        )
        latencies.append(np.mean([r.e2e_s for r in cluster.records]))
        throughputs.append(len(cluster.records) / end)
    assert latencies == sorted(latencies)
    assert throughputs == sorted(throughputs)


def test_continuous_beats_static_on_throughput_and_mean_latency():
    arrival, prompts, outputs = _workload(seed=2, n=300, rate=6.0)
    results = {}
    for policy in ("continuous", "static"):
        cluster, end = run_cluster(
            cluster_config(
                cost_model(0.01, 2e-5, 1e-6),
                policy=policy,
                num_blocks=1024,
                max_model_len=512,
                max_num_seqs=16,
            ),
            arrival,
            prompts,
            outputs,
        )
        results[policy] = (len(cluster.records) / end, np.mean([r.e2e_s for r in cluster.records]))
    assert results["continuous"][0] > results["static"][0]
    assert results["continuous"][1] < results["static"][1]


def test_preemptions_when_kv_is_scarce_and_none_when_ample():
    arrival, prompts, outputs = _workload(seed=4, n=200, rate=20.0)
    scarce, _ = run_cluster(cluster_config(num_blocks=60), arrival, prompts, outputs)
    ample, _ = run_cluster(cluster_config(num_blocks=4000), arrival, prompts, outputs)
    assert sum(r.num_preemptions for r in scarce.records) > 0
    assert sum(r.num_preemptions for r in ample.records) == 0
    assert all(r.status == "ok" for r in scarce.records)


def _scenario(**changes) -> Scenario:
    base = dict(
        traffic=dict(
            arrivals=dict(kind="poisson", rate_per_s=6.0),
            duration_s=60,
            too_long="clip",
            prompt=dict(kind="lognormal", median_tokens=300, sigma=0.5, max_tokens=2000),
            output=dict(kind="lognormal", median_tokens=80, sigma=0.5, max_tokens=500),
        ),
        cluster=dict(replicas=2),
    )
    for key, value in changes.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    return Scenario.model_validate(base)


def test_prefix_caching_raises_the_hit_rate_on_a_shared_prefix_trace():
    shared = simulate(
        _scenario(
            traffic=dict(shared_prefix_groups=4, shared_prefix_tokens=512),
            cluster=dict(router=dict(policy="prefix_affinity")),
        )
    )
    plain = simulate(_scenario())
    assert shared.facts["prefix_caching"] and not plain.facts["prefix_caching"]
    assert shared.summary.prefix_hit_rate > 0.3
    assert plain.summary.prefix_hit_rate == 0.0


def test_an_autoscaled_replica_serves_only_after_its_cold_start():
    spike = dict(
        kind="spike",
        base=dict(kind="poisson", rate_per_s=4.0),
        multiplier=10,
        start_s=60,
        hold_s=120,
    )
    result = simulate(
        _scenario(
            traffic=dict(arrivals=spike, duration_s=300),
            cluster=dict(
                replicas=1,
                autoscaler=dict(
                    enabled=True,
                    min_replicas=1,
                    max_replicas=6,
                    scrape_interval_s=10,
                    cooldown_s=20,
                ),
            ),
        )
    )
    added = [r for r in result.replicas if r["ready_at_s"] > r["requested_at_s"]]
    assert added and result.decisions[0]["action"] == "scale_out"
    cold = result.facts["cold_start_s"]
    for replica in added:
        assert replica["ready_at_s"] - replica["requested_at_s"] == pytest.approx(cold)
        served = [r for r in result.records if r.replica == replica["replica"]]
        assert all(r.sent_s >= replica["ready_at_s"] for r in served)
    assert result.summary.replicas_peak > 1


def test_timeouts_and_retries_are_counted():
    result = simulate(
        _scenario(
            traffic=dict(arrivals=dict(kind="poisson", rate_per_s=60.0)),
            cluster=dict(replicas=1),
            clients=dict(ttft_timeout_s=2.0, max_retries=1),
        )
    )
    summary = result.summary
    assert summary.timed_out > 0 and summary.retries > 0
    assert (
        summary.completed + summary.timed_out + summary.rejected + summary.in_flight
        == summary.requests
    )
    assert not summary.meets_slo


def test_same_seed_same_result_and_another_seed_differs():
    a, b, c = simulate(_scenario()), simulate(_scenario()), simulate(_scenario(seed=1))
    key = lambda result: [(r.status, r.ttft_s, r.e2e_s) for r in result.records]  # noqa: E731
    assert key(a) == key(b)

    # summary and facts are a pure function of scenario + seed: byte-identical JSON; timings live in `run`
    def parts(result):
        tenants = {name: row.as_dict() for name, row in result.tenants.items()}
        return [
            json.dumps(part, sort_keys=True)
            for part in (result.summary.as_dict(), result.facts, tenants)
        ]

    assert parts(a) == parts(b)
    assert (
        set(a.run) == {"cpu_s", "wall_s"}
        and "cpu_s" not in a.summary.as_dict()
        and "cpu_s" not in a.facts
    )
    assert key(a) != key(c)


@pytest.mark.parametrize(
    "policy", ["round_robin", "least_outstanding", "least_kv", "power_of_two", "prefix_affinity"]
)
def test_every_router_serves_everything(policy):
    result = simulate(_scenario(cluster=dict(replicas=3, router=dict(policy=policy))))
    assert result.summary.completed == result.summary.requests
    assert len({r.replica for r in result.records}) == 3


def test_costs_add_up():
    result = simulate(_scenario(prices=dict(gpu_usd_per_hour=2.0)))
    summary = result.summary
    assert summary.cost_usd == pytest.approx(summary.gpu_hours * 2.0)
    assert summary.cost_per_request_usd == pytest.approx(summary.cost_usd / summary.completed)
    assert result.timeseries[-1]["gpu_hours"] == pytest.approx(summary.gpu_hours)


def test_the_collector_is_paused_for_a_run_and_restored_after():
    """`Cluster.run` runs with the cyclic collector off (simulator.cluster.collector) and leaves it as it
    found it (on; a caller's own pause stays in place)."""
    import gc

    from simulator.cluster.cluster import Cluster
    from simulator.cluster.collector import collector_paused

    arrival, prompts, outputs = _workload(n=40)
    config = cluster_config(num_blocks=200, replicas=1)
    during = []  # the collector's state as the run reports progress
    cluster = Cluster(
        config,
        [float(a) for a in arrival],
        [int(p) for p in prompts],
        [int(o) for o in outputs],
        ["default"] * 40,
    )
    cluster.run(progress=lambda _done: during.append(gc.isenabled()))
    assert during and not any(during)
    assert gc.isenabled()
    nested = []
    with collector_paused():
        run_cluster(config, arrival, prompts, outputs)
        nested.append(gc.isenabled())  # the run's own pause left the outer one in place
    assert nested == [False] and gc.isenabled()


def test_placeholder_prompts_are_shared_per_length_and_change_nothing():
    """Without prompt tokens to read, requests of one length share one read-only placeholder prompt
    (`Cluster.placeholder_prompt`); the run equals one whose every request has a list of its own, with
    prefix caching on (the placeholders are hashed) and off, on fresh random workloads."""
    from simulator.cluster.cluster import Cluster
    from simulator.cluster.replica import SIM_TOKEN_ID

    seed = int(np.random.default_rng().integers(1 << 31))
    arrival, prompts, outputs = _workload(seed=seed, n=150, rate=12.0, prompt=(1, 60))
    for caching in (False, True):
        config = cluster_config(num_blocks=120, replicas=2, prefix_caching=caching)
        runs = []
        for own_lists in (False, True):
            lengths = [int(p) for p in prompts]
            cluster = Cluster(
                config,
                [float(a) for a in arrival],
                lengths,
                [int(o) for o in outputs],
                ["default"] * len(arrival),
                prompt_ids=(lambda i: [SIM_TOKEN_ID] * lengths[i]) if own_lists else None,
            )
            if not own_lists:
                same = [i for i in range(len(lengths)) if lengths[i] == lengths[0]]
                assert all(cluster.prompt_ids(i) is cluster.prompt_ids(0) for i in same)
                assert all(len(cluster.prompt_ids(i)) == lengths[i] for i in range(len(lengths)))
            end = cluster.run()
            runs.append(
                [end]
                + [(r.status, r.ttft_s, r.e2e_s, r.num_preemptions) for r in cluster.records]
                + [r.scheduler.block_manager.num_prefix_hits for r in cluster.replicas]
            )
        assert runs[0] == runs[1], f"seed {seed}, prefix caching {caching}"
        hits = sum(runs[0][-config.initial_replicas :])
        assert (hits > 0) == caching  # (all-placeholder prompts hit whenever the cache is on)
