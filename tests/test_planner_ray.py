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
