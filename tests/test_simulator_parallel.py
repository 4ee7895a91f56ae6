"""Parallel replicas (`simulator.cluster.parallel`): with a router staleness above 0 a fixed fleet runs in
intervals of it, the same answer in one process, in worker processes and on Ray; staleness 0 keeps the
exact sequential cluster; the stale router's answer stays near the exact one; retries and timeouts
still end every request once."""

import json

import pytest

from simulator import Scenario
from simulator.cluster.cluster import Cluster
from simulator.cluster.parallel import ParallelCluster, StaleRouter
from simulator.cluster.shards import ShardSpec
from simulator.simulation import build_cluster, load_traffic, simulate


def fleet(staleness_s=0.05, replicas=4, rate=60.0, duration_s=4.0, **cluster) -> Scenario:
    router = {} if staleness_s is None else {"staleness_s": staleness_s}
    return Scenario(
        name="parallel",
        traffic=dict(
            arrivals=dict(kind="poisson", rate_per_s=rate), duration_s=duration_s, too_long="clip"
        ),
        cluster=dict(replicas=replicas, router=router, **cluster),
    )


def answer(result) -> str:
    """Everything a run answers (summary, time series, per-request records) as one JSON text."""
    return json.dumps(
        {
            "summary": result.summary.as_dict(),
            "rows": result.timeseries,
            "records": [
                (r.status, r.ttft_s, r.e2e_s, r.replica, r.retries) for r in result.records
            ],
        },
        sort_keys=True,
        default=str,
    )


def test_staleness_reads_its_bounds_from_the_engine_metrics_interval():
    from engine.core.config import MetricsConfig, bounds
    from simulator.fleet_spec import RouterSpec

    assert MetricsConfig().metrics_interval_s == 0.05  # llm-d's endpoint picker
    assert RouterSpec().staleness_s == 0.0  # default: the exact sequential simulation
    assert bounds(RouterSpec, "staleness_s") == bounds(MetricsConfig, "metrics_interval_s")


def test_staleness_zero_keeps_the_sequential_cluster_and_autoscaled_fleets_stay_sequential():
    scenario = fleet(0.0)
    assert type(build_cluster(scenario, load_traffic(scenario))[0]) is Cluster
    assert Scenario(name="default").cluster.router.staleness_s == 0.0
    scenario = fleet()
    assert type(build_cluster(scenario, load_traffic(scenario))[0]) is ParallelCluster
    scaled = fleet(autoscaler=dict(enabled=True, min_replicas=2, max_replicas=4))
    assert type(build_cluster(scaled, load_traffic(scaled))[0]) is Cluster


@pytest.mark.timeout(120)
def test_same_answer_in_one_process_and_in_worker_processes():
    scenario = fleet(replicas=5)
    one = simulate(scenario, shards=ShardSpec(1))
    two = simulate(scenario, shards=ShardSpec(2))
    assert answer(one) == answer(two)
    assert one.summary.completed == one.summary.requests > 100
    assert [r["replica"] for r in one.replicas] == list(range(5))


def test_stale_router_stays_near_the_exact_one():
    exact = simulate(fleet(0.0, rate=80.0)).summary
    stale = simulate(fleet(rate=80.0)).summary
    assert stale.requests == exact.requests and stale.completed == exact.completed
    assert stale.ttft_p50_s == pytest.approx(exact.ttft_p50_s, rel=0.25)
    assert stale.tpot_p99_s == pytest.approx(exact.tpot_p99_s, rel=0.25)
    assert stale.simulated_s == pytest.approx(exact.simulated_s, rel=0.05)


@pytest.mark.timeout(120)
def test_timeouts_and_retries_end_every_request_once_whatever_the_sharding():
    overloaded = fleet(
        replicas=3, rate=400.0, duration_s=3.0, max_waiting_per_replica=40
    ).model_copy(
        update={
            "clients": fleet().clients.model_copy(
                update={"ttft_timeout_s": 1.0, "max_retries": 1, "retry_backoff_s": 0.5}
            )
        }
    )
    one = simulate(overloaded, shards=ShardSpec(1))
    s = one.summary
    assert s.timed_out + s.rejected > 0 and s.retries > 0
    assert s.completed + s.timed_out + s.rejected + s.in_flight + s.failed == s.requests
    assert answer(one) == answer(simulate(overloaded, shards=ShardSpec(3)))


def test_stale_router_counts_its_own_sends_between_scrapes():
    router = StaleRouter("least_outstanding", 3, seed=0)
    router.scrape([(2, 0.1), (0, 0.0), (1, 0.0)])
    assert [router.choose() for _ in range(4)] == [1, 1, 2, 0]
    kv = StaleRouter("least_kv", 2, seed=0)
    kv.scrape([(0, 0.5), (5, 0.1)])
    assert [kv.choose() for _ in range(2)] == [1, 1]  # KV usage is only known as of the scrape


@pytest.mark.timeout(240)
def test_ray_actors_give_the_same_answer():
    ray = pytest.importorskip("ray")
    scenario = fleet(replicas=4, duration_s=2.0)
    local = simulate(scenario, shards=ShardSpec(1))
    on_ray = simulate(scenario, shards=ShardSpec(2, "ray"))
    assert answer(on_ray) == answer(local)
    assert not ray.is_initialized()


@pytest.mark.timeout(300)
def test_simulate_command_takes_workers_and_the_staleness(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    path = fleet(replicas=3, duration_s=2.0).save(tmp_path / "fleet.yaml")

    def run(*options: str) -> dict:
        done = subprocess.run(
            [sys.executable, "-m", "surgeplan_cli", "simulate", str(path), "--json", *options],
            cwd=Path(__file__).resolve().parents[1],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    two, exact = run("--workers", "2"), run("--router-staleness-s", "0")
    assert two["summary"] == run()["summary"]  # the answer does not depend on the workers
    assert exact["scenario"]["cluster"]["router"]["staleness_s"] == 0
    assert exact["summary"]["requests"] == two["summary"]["requests"]


def test_the_driver_and_the_build_run_with_the_collector_paused(monkeypatch):
    """`build_cluster` and the parallel driver's loop (`ParallelCluster.run`) run with the cyclic
    collector off, as `Cluster.run` does (simulator.cluster.collector), and leave it on after."""
    import gc
    import random

    import simulator.simulation as simulation

    scenario = fleet(replicas=3, rate=30.0, duration_s=2.0).model_copy(
        update={"seed": random.randrange(1 << 30)}
    )
    built = []

    class Watched(ParallelCluster):
        def __init__(self, *args, **kwargs):
            built.append(gc.isenabled())
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(simulation, "ParallelCluster", Watched)
    cluster, _ = build_cluster(scenario, load_traffic(scenario))
    assert built == [False] and gc.isenabled()
    during = []  # the collector's state as the driver reports progress
    cluster.run(progress=lambda _done: during.append(gc.isenabled()))
    assert during and not any(during)
    assert gc.isenabled()
