"""Splitwise's mixed pool (`simulator.cluster.mixed_pool`): with the prefill pool saturated, decode
replicas serve new requests whole and the prefill queue's tail shrinks; with the decode pool full,
prefill replicas decode what they prefilled; every request ends once, its tokens counted once; off,
nothing changes."""

import numpy as np
import pytest

from simulator import Scenario, simulate
from simulator.cluster.disaggregated import DisaggregatedCluster, PoolConfig
from simulator.links import get_link
from tests.sim_helpers import cluster_config, cost_model, pool_config

EXAMPLE = "examples/scenarios/disaggregated-llama-3-70b-h100.yaml"


def _pool(name: str, model, replicas: int, num_blocks: int = 2048) -> PoolConfig:
    return pool_config(
        name,
        model,
        replicas=replicas,
        num_blocks=num_blocks,
        max_num_batched_tokens=2048,
        router_policy="least_outstanding",
    )


def _cluster(
    mixed: int | None, n: int, gap_s: float, decode_blocks: int = 2048, max_stretch_steps: int = 256
) -> DisaggregatedCluster:
    """One prefill replica, two decode replicas, `n` requests of 1,000-1,900 prompt tokens every
    `gap_s` seconds: at 0.05 s, more prompt work than one prefill replica does."""
    model = cost_model(0.01, 4e-5, 1e-7)
    rng = np.random.default_rng(0)
    return DisaggregatedCluster(
        cluster_config(model, replicas=0, max_stretch_steps=max_stretch_steps),
        _pool("prefill", model, 1),
        _pool("decode", model, 2, num_blocks=decode_blocks),
        get_link("infiniband-ndr"),
        100_000,
        [gap_s * i for i in range(n)],
        [int(x) for x in rng.integers(1000, 1900, n)],
        [int(x) for x in rng.integers(10, 60, n)],
        ["default"] * n,
        mixed_pool_max_pending_tokens=mixed,
    )


def _counting(cluster: DisaggregatedCluster) -> dict:
    """Counts what the cluster's monitor is told: first tokens, finishes, output tokens."""
    counts = {"first_tokens": 0, "finishes": 0, "tokens": 0}
    monitor = cluster.monitor
    first, finish = monitor.on_first_token, monitor.on_finish

    def on_first_token(ttft_s: float) -> None:
        counts["first_tokens"] += 1
        first(ttft_s)

    def on_finish(output_tokens: int) -> None:
        counts["finishes"] += 1
        counts["tokens"] += output_tokens
        finish(output_tokens)

    monitor.on_first_token, monitor.on_finish = on_first_token, on_finish
    return counts


def _run(cluster: DisaggregatedCluster) -> DisaggregatedCluster:
    counts = _counting(cluster)
    cluster.run()
    n = len(cluster.records)
    assert counts == {"first_tokens": n, "finishes": n, "tokens": sum(cluster.output_tokens)}
    assert [r.status for r in cluster.records] == ["ok"] * n
    assert [r.output_tokens for r in cluster.records] == cluster.output_tokens
    assert not cluster._attempts and not cluster._handed  # nothing left in flight
    for replica in cluster.replicas:
        assert replica.scheduler.block_manager.num_used_blocks == 0
        assert not replica.scheduler.has_unfinished_requests()
    return cluster


def _ttft_p99(cluster: DisaggregatedCluster) -> float:
    return float(np.percentile([r.ttft_s for r in cluster.records], 99))


def test_saturated_prefill_pool_sends_requests_whole_to_decode_replicas():
    off, on = _run(_cluster(None, 200, 0.05)), _run(_cluster(8192, 200, 0.05))
    assert on.mixed_pool.whole_requests > 0 and on.mixed_pool.moves >= 1
    assert off.mixed_pool is None
    # the prefill queue's tail: Splitwise's TTFT P99, what binds on its splits
    assert _ttft_p99(on) < 0.5 * _ttft_p99(off)
    # a request served whole moves no KV: fewer transfers than requests
    assert len(on.transfer_bytes) == 200 - on.mixed_pool.whole_requests
    assert len(off.transfer_bytes) == 200
    # they went back to their pool once empty
    assert not on.mixed_pool.lent_decode and not on.mixed_pool.lent_prefill


def test_light_load_never_moves_a_machine():
    off, on = _run(_cluster(None, 40, 1.0)), _run(_cluster(8192, 40, 1.0))
    assert on.mixed_pool.summary() == {
        "mixed_pool_whole_requests": 0,
        "mixed_pool_kept_requests": 0,
        "mixed_pool_moves": 0,
    }
    assert [r.e2e_s for r in on.records] == [r.e2e_s for r in off.records]


def test_full_decode_pool_lets_the_prefill_replica_decode():
    # decode replicas of 200 blocks (3,200 tokens): two requests at their full length fill one
    on = _run(_cluster(8192, 60, 0.2, decode_blocks=200))
    assert on.mixed_pool.kept_requests > 0
    assert len(on.transfer_bytes) == 60 - on.mixed_pool.kept_requests - on.mixed_pool.whole_requests


def test_decode_stretches_on_both_pools_match_step_by_step():
    # requests served whole on decode replicas and decoded on their prefill replica, stretched or not
    for blocks in (2048, 200):
        step = _run(_cluster(8192, 60, 0.05, decode_blocks=blocks, max_stretch_steps=1))
        stretched = _run(_cluster(8192, 60, 0.05, decode_blocks=blocks))
        assert stretched.mixed_pool.summary() == step.mixed_pool.summary()
        for times in (lambda r: r.ttft_s, lambda r: r.e2e_s):
            assert [times(r) for r in stretched.records] == pytest.approx(
                [times(r) for r in step.records]
            )


def test_setting_is_off_by_default_and_reaches_the_summary():
    scenario = Scenario.load(EXAMPLE)
    assert scenario.cluster.disaggregation.mixed_pool is False
    base = simulate(scenario)
    assert base.summary["mixed_pool_moves"] == 0
    spec = scenario.cluster.disaggregation.model_copy(
        update={"mixed_pool": True, "mixed_pool_max_pending_tokens": 1}
    )
    on = simulate(
        scenario.model_copy(
            update={"cluster": scenario.cluster.model_copy(update={"disaggregation": spec})}
        )
    )
    assert on.facts["disaggregation"]["mixed_pool"] is True
    assert on.summary["mixed_pool_whole_requests"] > 0
    assert on.summary["completed"] == base.summary["completed"] == on.summary["requests"]


def test_setting_is_bounded():
    scenario = Scenario.load(EXAMPLE)
    data = scenario.model_dump()
    data["cluster"]["disaggregation"]["mixed_pool_max_pending_tokens"] = 0
    with pytest.raises(ValueError, match="mixed_pool_max_pending_tokens"):
        Scenario.model_validate(data)
