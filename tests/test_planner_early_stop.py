"""The planner's early stop (`simulator.planner.evaluate._Watch`) gives exactly the verdict of the full
run: on a fleet that meets and on one that misses, and its counts never run ahead of what the full run
finds (a late first token is counted once, when it comes, and its request ends late)."""

import math

import pytest
from test_planner_helpers import spike_scenario

from simulator.planner.evaluate import _Watch, evaluate_job, make_job
from simulator.planner.fleet import Batch, fleet_scenario
from simulator.resolve import resolve_calibration_for
from simulator.simulation import build_cluster, load_traffic


def _fleet(replicas: int):
    base = spike_scenario(rate_per_s=4.0, multiplier=6.0, duration_s=90)
    return fleet_scenario(base, "A100-80GB", 1, replicas, Batch(256, 2048))


@pytest.mark.parametrize(("replicas", "meets"), [(1, False), (4, True)])
def test_early_stopped_verdict_is_the_full_runs(replicas, meets):
    scenario = _fleet(replicas)
    quick = evaluate_job(make_job(scenario))
    full = evaluate_job(make_job(scenario, early_stop=False))
    assert full.meets is meets  # the case is the one named: a pass, or a fail
    assert quick.meets == full.meets
    assert set(quick.reasons) <= set(full.reasons)
    if meets:  # nothing cut short: the same figures
        assert quick.early_stop_s is None and quick.summary == full.summary
    else:
        assert quick.early_stop_s is not None and quick.early_stop_s < full.summary.simulated_s


@pytest.mark.parametrize("replicas", [1, 2])
def test_watch_counts_each_late_request_once_and_only_late_ones(replicas):
    """Run to the end with a watch that never stops it: its counts, taken as the run goes (late first
    tokens among them), end equal to the records' own, so at no point did they exceed them."""
    scenario = _fleet(replicas)
    trace = load_traffic(scenario)
    cluster, _facts = build_cluster(scenario, trace, resolve_calibration_for(scenario))
    watch = _Watch(cluster, scenario.slo, goodput_share=0.5)
    assert watch._first_tokens  # the plain cluster: late first tokens are counted as they come
    watch.limits = dict.fromkeys(watch.limits, math.inf)
    seen: list[int] = []
    early: list[int] = []  # requests counted late before they ended, per window

    def watched(fraction: float) -> None:
        watch(fraction)
        seen.append(watch.counts["slo_ttft"])
        early.append(len(watch._late_first))

    cluster.run(scenario.horizon_s, watched)
    watch(1.0)  # the requests that ended after the last window
    slo, records = scenario.slo, cluster.records
    late = [slo.late(r.ttft_s, r.tpot_s) if r.status == "ok" else None for r in records]
    assert watch.counts["slo_ttft"] == sum(1 for x in late if x and x[0])
    assert watch.counts["slo_tpot"] == sum(1 for x in late if x and x[1])
    assert watch.counts["timeouts"] == sum(r.status in ("timeout", "rejected") for r in records)
    assert watch.counts["goodput"] == sum(1 for x in late if x is None or any(x))
    assert seen == sorted(seen) and seen[-1] <= watch.counts["slo_ttft"]
    assert not watch._late_first  # every request counted at its first token has ended
    if replicas == 1:  # overloaded: some requests were counted late at their first token
        assert max(early) > 0
