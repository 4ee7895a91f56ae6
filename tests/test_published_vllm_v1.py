"""vLLM V1's published set (llm-k8s, vLLM 0.8.3 on 8x A100-40GB): an independent check of the
`vllm-v1` profile, never fitted on; its burst was measured with the prompts already in the prefix
cache, which the replay reproduces with a warm-up (and the loader refuses without prefix caching)."""

import json

import pytest

from simulator.validation.published import load_published, replay_run, source_profile

NAME = "llmk8s-vllm-v1-a100"


def test_the_set_is_a_vllm_v1_check_never_fitted_on():
    data = load_published(NAME)
    assert data["engine_profile"] == "vllm-v1" and data["held_out_only"]
    assert [run["split"] for run in data["runs"]] == ["held_out"]
    run = data["runs"][0]
    assert run["gpu"] == "A100-40GB" and run["tensor_parallel"] == 8
    assert sum(run["prompt_tokens"]) == 42659 and sum(run["output_tokens"]) == 42398


def test_a_prefix_cached_run_is_replayed_warm_and_measured_after_the_warm_up():
    data = load_published(NAME)
    profile = source_profile(data)
    warm = replay_run(data, data["runs"][0], profile)
    cold = replay_run(data, data["runs"][0] | {"prefix_cached": False}, profile)
    assert warm["ttft_mean_s"] < cold["ttft_mean_s"] / 3  # the prompts' blocks were found cached
    assert warm["makespan_s"] < cold["makespan_s"]  # the warm-up itself is not measured
    assert warm["e2e_mean_s"] > 0.5 * cold["e2e_mean_s"]  # decoding is still all there


def test_a_prefix_cached_run_needs_prefix_caching(tmp_path):
    data = json.loads(json.dumps(load_published(NAME)))
    data["engine_settings"]["enable_prefix_caching"] = False
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="enable_prefix_caching"):
        load_published(path)
