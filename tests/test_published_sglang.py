"""SGLang's published set (DataCrunch, 4x H200): an independent check of the `sglang` profile. Every
run is held out and the set is never fitted on; the per-request lengths, rebuilt from the benchmark's
seed, add up to the token totals the benchmark recorded; and a run replays through the simulator
with the profile on the H200 calibration."""

import math

import pytest

from simulator.validation.profile_fit import fit_profile, fitted_together
from simulator.validation.published import load_published, published_names, replay

NAME = "datacrunch-sglang-h200"


def test_the_set_is_an_sglang_check_never_fitted_on():
    data = load_published(NAME)
    assert NAME in published_names()
    assert data["engine_profile"] == "sglang" and data["held_out_only"]
    assert {run["split"] for run in data["runs"]} == {"held_out"}
    assert {run["gpu"] for run in data["runs"]} == {"H200-141GB"}
    for other in published_names():
        assert NAME not in [each["name"] for each in fitted_together(load_published(other))][1:]
    with pytest.raises(ValueError):
        fit_profile(NAME)


def test_rebuilt_lengths_add_up_to_the_recorded_token_totals():
    """bench_serving records only totals; the lengths drawn from its seed must reproduce them
    (requests that asked for no output token are replayed with one)."""
    for run in load_published(NAME)["runs"]:
        recorded = run["recorded_tokens"]
        assert sum(run["prompt_tokens"]) == recorded["input"]
        zeros = recorded["outputs_of_zero_replayed_as_one"]
        assert sum(run["output_tokens"]) - zeros == recorded["output"]
        assert min(run["output_tokens"]) >= 1 and max(run["prompt_tokens"]) <= 4096


def test_a_run_replays_with_the_sglang_profile():
    data = load_published(NAME)
    data["runs"] = [run for run in data["runs"] if run["id"].endswith("4096-2048-n800")]
    rows = replay(data)
    assert {(row.metric, row.profile, row.split) for row in rows} == {
        ("makespan_s", "sglang", "held_out"),
        ("e2e_mean_s", "sglang", "held_out"),
    }
    for row in rows:
        assert math.isfinite(row.simulated) and 0.2 < row.ratio < 5
