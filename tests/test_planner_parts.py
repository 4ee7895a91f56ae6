"""A whole fleet simulated in parts (`simulator.planner.parts`): the merged outcome is one whole run's,
field for field, on fresh random fleets and part sizes; the parted backend runs the parts side by side
and gives the serial merge; the parts refuse fleets whose replicas are not independent; the planner
confirms a sampled answer on the whole fleet in parts."""

import random

import pytest

from simulator.planner.backends import LocalBackend, Runner
from simulator.planner.evaluate import evaluate_job, make_job
from simulator.planner.parts import PartedBackend, evaluate_in_parts, part_jobs, parts_refusal
from simulator.scenario import Scenario


def _fleet(replicas: int, seed: int, rate_per_s: float, **changes) -> Scenario:
    data = {
        "seed": seed,
        "traffic": {
            "arrivals": {"kind": "poisson", "rate_per_s": rate_per_s},
            "duration_s": 30,
            "too_long": "clip",
        },
        "cluster": {"replicas": replicas, "router": {"policy": "round_robin"}},
        "scheduler": {"max_num_seqs": 16, "max_num_batched_tokens": 2048},
    }
    for key, value in changes.items():
        data[key] = data.get(key, {}) | value
    return Scenario.model_validate(data)


def _same(merged, whole) -> None:
    assert merged.summary.as_dict() == whole.summary.as_dict()
    assert (merged.status, merged.reasons, merged.ratios, merged.binding) == (
        whole.status,
        whole.reasons,
        whole.ratios,
        whole.binding,
    )
    assert merged.tenants == whole.tenants and merged.facts == whole.facts
    assert merged.share is None and merged.share_replicas == 1


def test_parts_merge_to_the_whole_runs_outcome_on_fresh_random_fleets():
    rng = random.Random()
    for _ in range(2):
        replicas, size = rng.randint(3, 7), rng.randint(1, 3)
        # loaded enough that replicas queue, preempt and differ (a KV usage peak to merge)
        scenario = _fleet(replicas, rng.randrange(10**6), rate_per_s=replicas * rng.uniform(2, 5))
        whole = evaluate_job(make_job(scenario, early_stop=False))
        job = make_job(scenario, early_stop=False, parts=size)
        assert len(part_jobs(job)) == -(-replicas // size)
        merged = evaluate_in_parts(job)
        _same(merged, whole)
        assert whole.summary.kv_usage_peak > 0 and whole.summary.requests > 50


def test_parts_merge_tenants_and_a_missed_slo():
    scenario = _fleet(
        4,
        random.randrange(10**6),
        rate_per_s=40.0,
        traffic={"tenants": {"a": 0.7, "b": 0.3}},
        slo={"ttft_p99_s": 0.05},
    )
    whole = evaluate_job(make_job(scenario, early_stop=False))
    merged = evaluate_in_parts(make_job(scenario, early_stop=False, parts=3))
    assert whole.status == "misses" and set(whole.tenants) == {"a", "b"}
    _same(merged, whole)


def test_the_parted_backend_runs_parts_side_by_side_and_merges_as_the_serial_path():
    scenario = _fleet(5, random.randrange(10**6), rate_per_s=15.0)
    job = make_job(scenario, early_stop=False, parts=2)
    runner = Runner(LocalBackend(2), progress=False)
    try:
        assert isinstance(runner.backend, PartedBackend)
        key, started = runner.submit(job)
        assert started
        runner.wait([key])
        merged = runner.outcome(key)
    finally:
        runner.close()
    _same(merged, evaluate_in_parts(job))
    _same(merged, evaluate_job(job))  # run whole: the same outcome
    assert merged.part is None and "part" not in merged.to_json()


def test_parts_refuse_fleets_whose_replicas_are_not_independent():
    assert parts_refusal(_fleet(4, 0, 4.0)) is None
    assert "round_robin" in parts_refusal(
        _fleet(4, 0, 4.0, cluster={"router": {"policy": "least_outstanding"}})
    )
    assert "staleness" in parts_refusal(
        _fleet(4, 0, 4.0, cluster={"router": {"policy": "round_robin", "staleness_s": 0.05}})
    )
    with pytest.raises(ValueError, match="parts=2: router 'least_outstanding'"):
        part_jobs(
            make_job(
                _fleet(4, 0, 4.0, cluster={"router": {"policy": "least_outstanding"}}), parts=2
            )
        )
    with pytest.raises(ValueError, match="share_offset=3"):
        make_job(Scenario(), share=4, share_replicas=2, share_offset=3)
    with pytest.raises(ValueError, match="parts=0"):
        make_job(Scenario(), parts=0)


class _Verdicts:
    """A runner whose outcomes are verdicts by fleet size: `least[k]` the least size whose sample of k
    replicas meets, `least["whole"]` the whole fleet's."""

    def __init__(self, least: dict):
        self.least, self.calls = least, []

    def submit(self, job):
        self.calls.append(job)
        return len(self.calls) - 1, True

    def ahead(self, jobs):
        pass

    def ready(self, key):
        return True

    def outcome(self, key):
        from simulator.planner.outcome import Outcome

        job = self.calls[key]
        whole = job.get("parts") is not None
        size = Scenario.model_validate(job["scenario"]).cluster.replicas if whole else job["share"]
        meets = size >= self.least["whole" if whole else job["share_replicas"]]
        return Outcome(
            key=str(key),
            share=None if whole else job["share"],
            share_replicas=1 if whole else job["share_replicas"],
            step_scale=1.0,
            status="meets" if meets else "misses",
            meets=meets,
            reasons=[] if meets else ["slo_ttft"],
            binding="slo_ttft",
        )


@pytest.mark.parametrize("whole_least", [200, 236, 241])
def test_a_sampled_answer_is_confirmed_on_the_whole_fleet_and_steps_up_while_it_misses(whole_least):
    from simulator.planner.fleet import Answer, Batch, Fleet
    from simulator.planner.search import confirm_answer, drive

    base = _fleet(4, 0, 4.0)
    fleet = Fleet(base, "A100-80GB", 1, 1, 400, sample_replicas=8, estimate_replicas=2)
    runner = _Verdicts({2: 230, 8: 236, "whole": whole_least})
    share_answer = Answer(200, Batch(256, 2048), None, confirmed=False)
    answer = drive(runner, {"s": confirm_answer(fleet, share_answer)})["s"]
    wholes = [job for job in runner.calls if job.get("parts") is not None]
    assert wholes and all(job["parts"] == 8 and job["share"] is None for job in wholes)
    assert answer.outcome.meets and answer.outcome.share is None  # checked on the whole fleet
    if whole_least <= 236:  # the sample's answer stands, with its one-fewer miss
        assert answer.replicas == 236 and len(wholes) == 1 and not answer.below.meets
    else:  # up by 1% (2 replicas) while the whole fleet misses
        assert answer.replicas == 242 and len(wholes) == 4 and answer.below is None
    # off, or where the replicas are not independent: the sample's answer, as before
    for off in (
        Fleet(
            base, "A100-80GB", 1, 1, 400, sample_replicas=8, estimate_replicas=2, whole_fleet=False
        ),
        Fleet(
            _fleet(4, 0, 4.0, cluster={"router": {"policy": "least_outstanding"}}),
            "A100-80GB",
            1,
            1,
            400,
            sample_replicas=8,
            estimate_replicas=2,
        ),
    ):
        runner = _Verdicts({2: 230, 8: 236, "whole": whole_least})
        answer = drive(runner, {"s": confirm_answer(off, share_answer)})["s"]
        assert answer.replicas == 236 and all(job.get("parts") is None for job in runner.calls)


def test_the_planner_confirms_a_sampled_answer_on_the_whole_fleet(monkeypatch):
    """A real plan of a round-robin fleet above its sample size (2 replicas here): the answer's outcome
    is the whole fleet's, as one whole run gives it, and the ledger has the whole-fleet row."""
    from functools import partial

    from test_planner_helpers import quick_settings, spike_scenario

    from simulator.planner import candidates, recommend
    from simulator.planner.cli import format_plan
    from simulator.planner.fleet import Batch, Fleet, fleet_scenario

    monkeypatch.setattr(
        candidates, "Fleet", partial(Fleet, sample_replicas=2, estimate_replicas=None)
    )
    scenario = spike_scenario(rate_per_s=6.0, cluster={"router": {"policy": "round_robin"}})
    result = recommend.plan(scenario, quick_settings(max_replicas=16), workers=1, progress=False)
    rec = result.report.recommendation
    rows = [row for row in result.ledger.rows if row["phase"] == "whole fleet"]
    assert rec.replicas > 2 and rows and rows[-1]["replicas"] == rec.replicas
    assert rec.checked_by == "full fleet"
    text = "\n".join(format_plan(scenario.name, result.report))
    assert "simulated on: full fleet; one replica less on: full fleet, sampled: 2 of the" in text
    batch = Batch(rec.max_num_seqs, rec.max_num_batched_tokens)
    whole = evaluate_job(
        make_job(fleet_scenario(scenario, rec.gpu, 1, rec.replicas, batch), early_stop=False)
    )
    assert whole.meets and rec.ttft_p99_s == whole.summary.ttft_p99_s
