"""vLLM V1's published set (llm-k8s, vLLM 0.8.3 on 8x A100-40GB): an independent check of the
`vllm-v1` profile, never fitted on; its burst was measured with the prompts already in the prefix
cache, which the replay reproduces with a warm-up (and the loader refuses without prefix caching)."""

import json

import pytest

from simulator.validation.published_replay import replay_records, replay_run, source_profile
from simulator.validation.published_sets import load_published

NAME = "llmk8s-vllm-v1-a100"


def test_the_set_is_a_vllm_v1_check_never_fitted_on():
    data = load_published(NAME)
    assert data["engine_profile"] == "vllm-v1" and data["held_out_only"]
    assert {run["split"] for run in data["runs"]} == {"held_out"} and len(data["runs"]) == 4
    for run in data["runs"]:  # the same 200 prompts at 1, 4, 16 requests a second, then at once
        assert run["gpu"] == "A100-40GB" and run["tensor_parallel"] == 8
        assert sum(run["prompt_tokens"]) == 42659
    # the first run met a cold cache; the later ones found the same prompts cached
    assert [bool(run.get("prefix_cached")) for run in data["runs"]] == [False, True, True, True]


def test_a_prefix_cached_run_is_replayed_warm_and_measured_after_the_warm_up():
    data = load_published(NAME)
    profile = source_profile(data)
    burst = data["runs"][-1]
    warm = replay_run(data, burst, profile)
    cold = replay_run(data, burst | {"prefix_cached": False}, profile)
    assert warm["ttft_mean_s"] < cold["ttft_mean_s"] / 3  # the prompts' blocks were found cached
    assert warm["makespan_s"] < cold["makespan_s"]  # the warm-up itself is not measured
    assert warm["e2e_mean_s"] > 0.5 * cold["e2e_mean_s"]  # decoding is still all there


def test_rate_runs_arrive_at_their_times_and_bad_arrivals_are_refused(tmp_path):
    data = load_published(NAME)
    first = data["runs"][0]
    assert len(first["arrival_s"]) == 200 and first["arrival_s"][0] == 0.0
    result = replay_run(data, first, source_profile(data))
    # at one request a second the run lasts as long as its arrivals, not as a burst would
    assert result["makespan_s"] > first["arrival_s"][-1]
    bad = json.loads(json.dumps(data))
    bad["runs"][0]["arrival_s"] = list(reversed(first["arrival_s"]))
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="arrival_s"):
        load_published(path)


def test_a_prefix_cached_run_needs_prefix_caching(tmp_path):
    data = json.loads(json.dumps(load_published(NAME)))
    data["engine_settings"]["enable_prefix_caching"] = False
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="enable_prefix_caching"):
        load_published(path)


def test_per_request_ttfts_match_the_recorded_means_and_replay_in_run_order(tmp_path):
    data = load_published(NAME)
    for run in data["runs"]:  # each request's recorded TTFT, as benchmark_serving saved it
        assert abs(sum(run["ttft_s"]) / 200 - run["measured"]["ttft_mean_s"]) < 1e-6
    burst = data["runs"][-1]  # replayed after its warm-up: only the measured requests, in order
    records, start_s = replay_records(data, burst, source_profile(data))
    assert start_s > 0 and [r.prompt_tokens for r in records] == burst["prompt_tokens"]
    bad = json.loads(json.dumps(data))
    bad["runs"][0]["ttft_s"] = bad["runs"][0]["ttft_s"][:-1]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="ttft_s"):
        load_published(path)
