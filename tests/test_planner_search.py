"""The capacity search: the answer meets the SLO and one replica less misses it (re-checked with plain
`simulate` on the scenarios the plan writes out), bisection finds the least meeting size of any monotone
predicate, worker processes give the serial path's answer, and results are cached by scenario hash."""

import json
import random
from dataclasses import replace

import pytest
from test_planner_helpers import quick_settings, spike_scenario

from simulator.planner.backends import LocalBackend, Runner
from simulator.planner.bracket import crossing
from simulator.planner.cache import OutcomeCache
from simulator.planner.evaluate import evaluate_job, job_key, make_job
from simulator.planner.fleet import Answer, Batch, Fleet
from simulator.planner.outcome import Outcome
from simulator.planner.recommend import plan
from simulator.planner.search import bisect, confirm_answer, drive
from simulator.scenario import Scenario
from simulator.simulation import simulate


@pytest.fixture(scope="module")
def small_plan():
    return plan(spike_scenario(), quick_settings(), workers=1, progress=False)


def test_answer_is_minimal_by_plain_simulation(small_plan):
    report = small_plan.report
    recommended = Scenario.model_validate(report.recommended_scenario)
    fewer = Scenario.model_validate(report.one_fewer_scenario)
    assert recommended.cluster.replicas == report.recommendation.replicas >= 2
    assert fewer.cluster.replicas == recommended.cluster.replicas - 1
    assert simulate(recommended).summary.meets_slo is True
    missed = simulate(fewer).summary
    assert missed["meets_slo"] is False
    # the binding constraint is a term that one replica less really misses
    binding = report.recommendation.binding_constraint
    assert binding in ("slo_ttft", "slo_tpot", "timeouts")
    limits = {
        "slo_ttft": ("ttft_p99_s", recommended.slo.ttft_p99_s),
        "slo_tpot": ("tpot_p99_s", recommended.slo.tpot_p99_s),
    }
    if binding in limits:
        key, limit = limits[binding]
        assert missed[key] is None or missed[key] > limit
    else:
        assert missed["abandon_rate"] > recommended.slo.max_abandon_rate


def test_answer_figures_are_consistent(small_plan):
    rec = small_plan.report.recommendation
    price = small_plan.report.per_gpu_type[0].price_usd_per_gpu_hour
    assert rec.gpus == rec.replicas * rec.tensor_parallel
    assert rec.cost_per_hour_usd == pytest.approx(rec.gpus * price)
    assert 0 < rec.cost_per_request_usd < rec.cost_per_hour_usd
    assert 0 <= rec.headroom < 1 and rec.one_fewer_misses is True
    assert rec.calibration["label"] in ("measured", "fitted", "derived")


class _FakeRunner:
    """Outcomes from a predicate, no simulation: for the search logic alone."""

    def __init__(self, meets):
        self.meets, self.calls = meets, []

    def submit(self, job):
        self.calls.append(job)
        return len(self.calls) - 1, True

    def ahead(self, jobs):
        self.named_ahead = getattr(self, "named_ahead", []) + list(jobs)  # nothing runs ahead

    def ready(self, key):
        return True

    def wait(self, keys):
        raise AssertionError("never waits: every fake outcome is ready")

    def outcome(self, key):
        meets = self.meets(self.calls[key])
        return Outcome(
            key=str(key),
            share=None,
            share_replicas=1,
            step_scale=1.0,
            status="meets" if meets else "misses",
            meets=meets,
            reasons=[],
            binding=None,
        )


@pytest.mark.parametrize("trial", range(5))
def test_bisect_finds_least_meeting_size(trial):
    rng = random.Random(trial)
    low, high = rng.randint(1, 5), rng.randint(6, 200)
    answer = rng.randint(low, high + 3)  # beyond `high`: none meets
    runner = _FakeRunner(lambda n: n >= answer)
    found = drive(runner, {"s": bisect(lambda n: (n, {}), low, high)})["s"]
    expected = answer if answer <= high else None
    assert found[0] == expected
    assert len(runner.calls) <= high.bit_length() + 2  # logarithmic


@pytest.mark.parametrize("trial", range(6))
def test_crossing_gallops_from_the_estimate_and_bisects_the_bracket(trial):
    """Monotone: the least meeting size, from above or below `start`, in about 2 log2(distance)
    probes; noisy (each size's verdict drawn at random near the boundary): a size that meets while
    one less misses."""
    rng = random.Random(trial)
    low, high = 1, rng.randint(50, 400)
    answer = rng.randint(low, high)
    start = min(high, max(low, answer + rng.randint(-30, 30)))
    runner = _FakeRunner(lambda n: n >= answer)
    found, seen = drive(runner, {"s": crossing(lambda n: (n, {}), start, low, high)})["s"]
    assert found == answer and seen[answer].meets
    assert answer == low or not seen[answer - 1].meets
    distance = abs(start - answer) + 1
    assert len(runner.calls) <= 2 * distance.bit_length() + 2
    verdicts = {
        n: n > answer + 5 or (n >= answer - 5 and rng.random() < 0.5) for n in range(1, 500)
    }
    for two_at_once in (False, True):
        noisy = _FakeRunner(lambda n: verdicts[n])
        search = crossing(lambda n: (n, {}), start, low, high, two_at_once=two_at_once)
        found, seen = drive(noisy, {"s": search})["s"]
        if found is not None:
            assert seen[found].meets and (found == low or not seen[found - 1].meets)
        else:
            assert not verdicts[high]
    up_only = _FakeRunner(lambda n: n >= answer)
    found, _ = drive(up_only, {"s": crossing(lambda n: (n, {}), start, low, high, downward=False)})[
        "s"
    ]
    assert found == max(start, answer)
    upward = _FakeRunner(lambda n: n >= answer)
    found, _ = drive(upward, {"s": crossing(lambda n: (n, {}), start, low, high, expect_up=True)})[
        "s"
    ]
    assert found == answer and upward.named_ahead[0] == min(high, start + 1)
    assert len(upward.named_ahead) == 1  # the first size up only: further ones with two_at_once
    thirds = _FakeRunner(lambda n: n >= answer)
    found, seen = drive(
        thirds, {"s": crossing(lambda n: (n, {}), start, low, high, two_at_once=True)}
    )["s"]
    assert found == answer and (answer == low or not seen[answer - 1].meets)
    if start < answer - 1:  # galloping up: each probe names the next gallop size ahead
        assert min(high, start + 3) in thirds.named_ahead
    coarse = _FakeRunner(lambda n: n >= answer)
    found, _ = drive(coarse, {"s": crossing(lambda n: (n, {}), start, low, high, tolerance=4)})["s"]
    assert answer <= found < answer + 4 and len(coarse.calls) <= len(runner.calls)


def test_a_sampled_confirmation_starts_from_a_small_sample():
    """A fleet above `sample_replicas`: the small sample (`estimate_replicas`) is searched from the share
    pass's answer first, then the full sample from the small one's answer; the answer is the full
    sample's crossing."""
    fleet = Fleet(Scenario(), "A100-80GB", 1, 1, 400, sample_replicas=8, estimate_replicas=2)
    least = {2: 230, 8: 236}  # the least meeting size on each sample

    def meets(job):
        assert job["share"] is not None and job["share_replicas"] in least
        return job["share"] >= least[job["share_replicas"]]

    runner = _FakeRunner(meets)
    share_answer = Answer(200, Batch(256, 2048), None, confirmed=False)
    answer = drive(runner, {"s": confirm_answer(fleet, share_answer)})["s"]
    assert answer.replicas == 236 and answer.below_is_full and not answer.below.meets
    samples = [job["share_replicas"] for job in runner.calls]
    first_full = samples.index(8)
    assert set(samples[:first_full]) == {2} and set(samples[first_full:]) == {8}
    assert len(samples) - first_full <= 6  # the full sample starts 6 sizes from its answer


def test_processes_give_the_serial_answer(small_plan):
    parallel = plan(spike_scenario(), quick_settings(), workers=2, progress=False)
    strip = {"elapsed_s": None, "simulations": None}
    assert replace(parallel.report, **strip) == replace(small_plan.report, **strip)
    volatile = ("cpu_s", "cached")
    assert [
        {k: v for k, v in row.items() if k not in volatile} for row in parallel.ledger.rows
    ] == [{k: v for k, v in row.items() if k not in volatile} for row in small_plan.ledger.rows]


def test_comparisons_started_ahead_give_the_serial_answer():
    """One candidate: its comparisons start beside the confirmation (`likely_next`), the one-fewer run
    and the warm pool's next size ahead; the report and the ledger stay those of the serial plan."""
    scenario = spike_scenario(rate_per_s=4.0, duration_s=90)
    settings = quick_settings(uncertainty=True, static_baseline=True, autoscaled=True)
    serial, parallel = (plan(scenario, settings, workers=n, progress=False) for n in (1, 2))
    strip = {"elapsed_s": None, "simulations": None}
    assert replace(parallel.report, **strip) == replace(serial.report, **strip)
    assert parallel.report.simulations.simulated == serial.report.simulations.simulated
    volatile = ("cpu_s", "cached")
    assert [
        {k: v for k, v in row.items() if k not in volatile} for row in parallel.ledger.rows
    ] == [{k: v for k, v in row.items() if k not in volatile} for row in serial.ledger.rows]


def test_outcomes_are_cached_by_scenario_hash(tmp_path):
    scenario, settings = spike_scenario(duration_s=60), quick_settings(max_replicas=4)
    first = plan(scenario, settings, workers=1, cache_dir=tmp_path, progress=False)
    assert first.report.simulations.simulated > 0 and len(list(tmp_path.glob("*.json"))) > 0
    again = plan(
        scenario, settings, workers=1, cache_dir=tmp_path, progress=False
    )  # a fresh cache object
    assert again.report.simulations.simulated == 0
    assert again.report.recommendation == first.report.recommendation
    # another seed is another scenario: a different key
    assert (
        make_job(scenario)["scenario"]
        != make_job(spike_scenario(duration_s=60, seed=1))["scenario"]
    )


def test_a_changed_catalog_or_calibration_file_is_a_new_key(tmp_path, monkeypatch):
    """What a scenario resolves to outside its JSON is in the key: a GPU's memory fixed in the
    catalog (here through the user's overrides) or a calibration file edited in place is never
    answered from a disk cache written before."""
    from simulator.planner import cache

    job = make_job(spike_scenario(duration_s=30), share=4)
    before = job_key(job)
    overrides = tmp_path / "hardware.json"
    overrides.write_text(json.dumps({"A100-80GB": {"memory_bytes": 80e9}}))
    monkeypatch.setenv("SURGEPLAN_HARDWARE_OVERRIDES", str(overrides))
    cache._shipped_fingerprint.cache_clear()
    try:
        assert job_key(job) != before
    finally:
        monkeypatch.delenv("SURGEPLAN_HARDWARE_OVERRIDES")
        cache._shipped_fingerprint.cache_clear()
    assert job_key(job) == before
    calibration = tmp_path / "mine.json"
    calibration.write_text(json.dumps({"version": 1}))
    scenario = spike_scenario(duration_s=30).model_dump(mode="json")
    scenario["hardware"]["calibration"] = str(calibration)
    named = {**job, "scenario": scenario}
    first = job_key(named)
    calibration.write_text(json.dumps({"version": 2}))
    assert job_key(named) != first


def test_runner_simulates_a_repeated_job_once():
    runner = Runner(LocalBackend(1), OutcomeCache(), progress=False)
    job = make_job(spike_scenario(duration_s=30), share=4)
    keys = [runner.submit(job) for _ in range(3)]
    assert [started for _, started in keys] == [True, False, False] and runner.simulated == 1
    assert len({runner.outcome(key).key for key, _ in keys}) == 1


def test_jobs_started_ahead_are_joined_when_asked_and_never_run_serially():
    jobs = [make_job(spike_scenario(duration_s=30, seed=seed), share=4) for seed in range(3)]
    runner = Runner(LocalBackend(2), OutcomeCache(), progress=False)
    try:
        runner.ahead(jobs[:2])  # both start on the two free workers at the next wait
        key, started = runner.submit(jobs[2])
        runner.wait([key])
        asked, asked_started = runner.submit(jobs[0])  # joins the run started ahead
        assert started and asked_started and runner.simulated == 2 and runner.ahead_unused == 1
        runner.wait([asked])
        outcome = runner.outcome(asked)
        assert outcome == replace(evaluate_job(jobs[0]), cpu_s=outcome.cpu_s)
    finally:
        runner.close()
    serial = Runner(LocalBackend(1), OutcomeCache(), progress=False)
    serial.ahead(jobs)  # one worker: nothing runs ahead of being asked
    assert serial.ahead_unused == 0 and serial.simulated == 0 and not serial.cache.memory
