"""The load-routing policies' index (least_outstanding, least_kv) against the scan it replaced: on a random
sequence of replicas joining, leaving and changing load, and inside a real cluster with cold starts,
drains, timeouts and retries, every choice is the one `min` over the serving list makes (ties to the
earliest in the list)."""

import random

import numpy as np
import pytest
from sim_helpers import cluster_config

from simulator.cluster.cluster import Cluster
from simulator.cluster.router import Router

SCANS = {
    "least_outstanding": lambda replica: replica.num_outstanding,
    "least_kv": lambda replica: (replica.kv_usage, replica.num_outstanding),
}


class Load:
    """A replica as these routers see it: its outstanding requests and its KV usage."""

    def __init__(self, name: int):
        self.name, self.num_outstanding, self.kv_usage = name, 0, 0.0


@pytest.mark.parametrize("policy", sorted(SCANS))
def test_choices_match_a_scan_on_a_random_sequence(policy):
    rng, router, scan = random.Random(7), Router(policy), SCANS[policy]
    serving: list[Load] = []
    everyone = [Load(i) for i in range(4)]
    for replica in everyone:
        serving.append(replica)
        router.enlist(replica)
    chosen = set()
    for _ in range(20000):
        action = rng.random()
        if action < 0.05 or len(serving) < 2:  # a new replica starts serving
            replica = Load(len(everyone))
            replica.num_outstanding = rng.randrange(4)  # its load before it joined
            everyone.append(replica)
            serving.append(replica)
            router.enlist(replica)
        elif action < 0.09:  # one is drained
            replica = rng.choice(serving)
            serving.remove(replica)
            router.retire(replica)
        elif action < 0.6:  # a load changes (draining ones too)
            replica = rng.choice(everyone)
            replica.num_outstanding = max(0, replica.num_outstanding + rng.choice((-1, 1)))
            replica.kv_usage = rng.choice((0.0, 0.25, 0.5, 0.75))
            router.observe(replica)
        else:
            expected = min(serving, key=scan)
            assert router.choose(serving, None) is expected
            chosen.add(expected.name)
    assert len(chosen) > 10  # the sequence did exercise the choice


@pytest.mark.parametrize("policy", sorted(SCANS))
def test_choices_match_a_scan_inside_a_cluster(policy):
    """Real replicas: loads change by arrivals, steps, finishes, aborts (timeouts) and retries; the serving
    list by cold starts and drains."""
    rng = np.random.default_rng(3)
    n = 500
    arrival = np.cumsum(rng.exponential(1 / 60.0, n))  # overload: timeouts and retries
    prompts, outputs = rng.integers(20, 300, n), rng.integers(5, 120, n)
    config = cluster_config(
        num_blocks=100, replicas=3, router_policy=policy, ttft_timeout_s=1.0, max_retries=1
    )
    cluster = Cluster(config, arrival.tolist(), prompts.tolist(), outputs.tolist(), ["default"] * n)
    route, scan = cluster.router.choose, SCANS[policy]
    choices, mismatches = [], []

    def checked(replicas, request):
        chosen = route(replicas, request)
        expected = min(replicas, key=scan)
        if chosen is not expected:
            mismatches.append((cluster.env.now, chosen.replica_id, expected.replica_id))
        choices.append(chosen.replica_id)
        return chosen

    def scale():
        yield cluster.env.timeout(2.0)
        cluster.add_replica(cold_start_s=1.5)
        cluster.add_replica(cold_start_s=0.0)
        yield cluster.env.timeout(2.0)
        cluster.drain_replica(cluster.serving[1])
        yield cluster.env.timeout(2.0)
        cluster.drain_replica(cluster.serving[-1])
        cluster.add_replica(cold_start_s=0.5)

    cluster.router.choose = checked
    cluster.env.process(scale())
    cluster.run()
    assert not mismatches, mismatches[:5]
    assert len(choices) >= n and len(set(choices)) == 6
    assert any(record.retries for record in cluster.records)  # timeouts and retries did happen
