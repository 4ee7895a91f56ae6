"""The Ray backend: a local Ray instance gives the answer and ledger of the serial path, by the same code
path (`evaluate_job` on each job). Ray is in the dev extra, so `make test` (and CI) runs this with a local
instance of 2 CPUs, bounded in time; skipped only where Ray is not installed (users: `surgeplan[ray]`)."""

from dataclasses import replace

import pytest
from test_planner_helpers import quick_settings, spike_scenario

from simulator.planner.recommend import plan

ray = pytest.importorskip("ray")


@pytest.mark.timeout(240)
def test_ray_gives_the_serial_answer():
    scenario, settings = spike_scenario(duration_s=60), quick_settings(max_replicas=4)
    serial = plan(scenario, settings, workers=1, progress=False)
    on_ray = plan(scenario, settings, backend="ray", workers=2, progress=False)
    assert on_ray.report.simulations.backend == "local Ray instance"
    strip = {"elapsed_s": None, "simulations": None}
    assert replace(on_ray.report, **strip) == replace(serial.report, **strip)
    volatile = ("cpu_s", "cached")
    assert [{k: v for k, v in row.items() if k not in volatile} for row in on_ray.ledger.rows] == [
        {k: v for k, v in row.items() if k not in volatile} for row in serial.ledger.rows
    ]
    assert not ray.is_initialized()  # the planner shut down the instance it started


@pytest.mark.timeout(240)
def test_a_whole_fleet_in_parts_on_ray_is_the_serial_merge():
    """A job in parts (`simulator.planner.parts`) on Ray: its parts run as Ray tasks and merge into the
    outcome the serial path merges."""
    from simulator.planner.backends import RayBackend, Runner
    from simulator.planner.evaluate import make_job
    from simulator.planner.parts import evaluate_in_parts

    scenario = spike_scenario(
        duration_s=60, cluster={"replicas": 5, "router": {"policy": "round_robin"}}
    )
    job = make_job(scenario, early_stop=False, parts=2)
    runner = Runner(RayBackend(workers=2), progress=False)
    try:
        key, started = runner.submit(job)
        runner.wait([key])
        merged = runner.outcome(key)
    finally:
        runner.close()
    serial = evaluate_in_parts(job)
    assert started and merged.summary.requests > 0
    assert (merged.status, merged.ratios, merged.summary) == (
        serial.status,
        serial.ratios,
        serial.summary,
    )
    assert not ray.is_initialized()
