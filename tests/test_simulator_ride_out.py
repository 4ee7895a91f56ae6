"""A decode stretch that goes on past arrivals its steps would not examine (`Replica._ride_out`) gives
the very run of cutting it there: every request's times to the last bit, the replicas' step counts,
busy time, KV-utilisation integral and the monitor's rows, on workloads where the KV pool fills (a
blocked request at the head of the queue) with and without prefix caching, tenant quotas, client
timeouts (aborts of waiting requests) and a KV-reading router."""

import numpy as np
import pytest
from compiled_build import pure_python_only
from sim_helpers import cluster_config

from simulator.cluster.cluster import Cluster
from simulator.cluster.replica import Replica


def _run(config, arrival, prompts, outputs, tenants, prompt_ids, ride_out: bool, monkeypatch):
    rides = []
    original = Replica._ride_out

    def counted(self, out, num_steps, done):
        ridden = original(self, out, num_steps, done)
        rides.append(ridden)
        return ridden

    monkeypatch.setattr(Replica, "rides_out_arrivals", ride_out)
    monkeypatch.setattr(Replica, "_ride_out", counted)
    cluster = Cluster(config, arrival, prompts, outputs, tenants, prompt_ids=prompt_ids)
    for replica in cluster.replicas:
        replica.step_shapes = []
    end = cluster.run()
    records = [
        (r.status, r.output_tokens, r.num_preemptions, r.replica, r.ttft_s, r.e2e_s)
        for r in cluster.records
    ]
    replicas = [
        (r.num_steps, r.busy_s, r.kv_utilization_busy_s, r.step_shapes, r.snapshot)
        for r in cluster.replicas
    ]
    return (records, replicas, cluster.monitor.rows, end), sum(rides)


@pure_python_only  # (it patches the Replica class)
@pytest.mark.parametrize(
    "case", ["plain", "prefix_caching", "tenant_quota", "timeouts", "least_kv", "max_seqs"]
)
def test_riding_out_arrivals_gives_the_run_of_cutting(case, monkeypatch):
    rng = np.random.default_rng(7)
    n = 300
    arrival = np.sort(rng.uniform(0, 20, n)).tolist()
    prompts = rng.integers(20, 200, n).tolist()
    outputs = rng.integers(50, 300, n).tolist()
    tenants = ["default"] * n
    settings = dict(
        num_blocks=160, max_num_seqs=24, max_num_batched_tokens=256, replicas=2, window_s=5.0
    )
    prompt_ids = None
    if case == "prefix_caching":
        settings["prefix_caching"] = True

        def prompt_ids(i):  # 4 shared 48-token prefixes, then the request's own tokens
            return [1 + i % 4] * 48 + [100 + i] * (prompts[i] - 48)

        prompts = [max(p, 60) for p in prompts]
    elif case == "tenant_quota":
        from engine.core.config import CacheConfig

        tenants = ["a" if i % 3 else "b" for i in range(n)]
        settings["cache_config"] = CacheConfig(
            block_size=16, num_kv_blocks=100, tenant_block_quota={"b": 30}
        )
    elif case == "timeouts":
        settings.update(ttft_timeout_s=4.0, max_retries=1, retry_backoff_s=0.5)
    elif case == "least_kv":
        settings["router_policy"] = "least_kv"
    elif case == "max_seqs":
        settings.update(num_blocks=2000, max_num_seqs=6)
    config = cluster_config(**settings)
    cut, _ = _run(config, arrival, prompts, outputs, tenants, prompt_ids, False, monkeypatch)
    ridden, num_rides = _run(
        config, arrival, prompts, outputs, tenants, prompt_ids, True, monkeypatch
    )
    assert num_rides >= 5, f"too few stretches rode out arrivals ({num_rides}) to test anything"
    assert ridden == cut
