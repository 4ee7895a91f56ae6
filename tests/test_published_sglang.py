"""SGLang's published sets (DataCrunch, 4x H200). The bursts are an independent check of the `sglang`
profile: every run held out, the set never fitted on; the online runs of the same server are the
profile's fit part, and the bursts take the kernel era chosen on them. The per-request lengths (and
the online runs' arrivals), rebuilt from the benchmark's seed, add up to the token totals the
benchmark recorded; and a run replays through the simulator with the profile on the H200
calibration."""

import math

import numpy as np
import pytest

from simulator.calibration.engine_profile import load_profile
from simulator.validation.profile_fit import fit_profile, fitted_together
from simulator.validation.published_report import replay
from simulator.validation.published_sets import load_published, published_names

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


ONLINE = "datacrunch-sglang-online-h200"


def test_the_online_runs_are_the_profiles_fit_part_and_lend_the_bursts_their_era():
    """DataCrunch's online runs (same server) are the sglang profile's fit runs; the bursts stay an
    independent check and take the kernel era chosen on those fit runs by declaration."""
    online, bursts = load_published(ONLINE), load_published(NAME)
    assert ONLINE in published_names() and not online.get("held_out_only")
    assert online["engine_profile"] == "sglang" and {r["split"] for r in online["runs"]} == {"fit"}
    assert [each["name"] for each in fitted_together(online)] == [ONLINE]
    assert bursts["kernel_era_like"] == ONLINE
    profile = load_profile("sglang")
    assert (
        profile.for_source(NAME, bursts["kernel_era_like"]).kernel_era_scales
        == profile.for_source(ONLINE).kernel_era_scales
    )
    assert load_profile("sglang").kernel_era_scales == {}  # the planner keeps the tables' era


def test_online_lengths_and_arrivals_rebuild_the_recorded_runs():
    """Lengths drawn from bench_serving's seed add up to the recorded totals; the arrivals drawn
    after them are Poisson at the run's rate and all fall before the run's recorded end."""
    for run in load_published(ONLINE)["runs"]:
        recorded = run["recorded_tokens"]
        assert sum(run["prompt_tokens"]) == recorded["input"]
        zeros = recorded["outputs_of_zero_replayed_as_one"]
        assert sum(run["output_tokens"]) - zeros == recorded["output"]
        assert min(run["output_tokens"]) >= 1 and max(run["prompt_tokens"]) <= 1024
        arrivals = run["arrival_s"]
        rate = float(run["id"].split("-rate")[1].split("-")[0])  # requests a second
        mean_gap_s = arrivals[-1] / (len(arrivals) - 1)
        assert 0.9 / rate < mean_gap_s < 1.1 / rate
        assert arrivals[-1] < run["measured"]["makespan_s"]
        # bench_serving 0.4's numpy draws after seeding with 1: input lengths, output lengths, then
        # one exponential gap after each request sent
        draws = np.random.RandomState(1)  # numpy's global generator as np.random.seed(1) sets it
        assert list(draws.randint(1, 1025, size=len(arrivals))) == run["prompt_tokens"]
        outputs = np.maximum(draws.randint(0, 1025, size=len(arrivals)), 1)
        assert list(outputs) == run["output_tokens"]
        gaps_s = draws.exponential(1.0 / rate, size=len(arrivals))
        assert np.allclose(np.r_[0.0, np.cumsum(gaps_s[:-1])], arrivals, atol=1e-6)
