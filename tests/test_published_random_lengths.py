"""Per-request lengths as benchmark_serving's random dataset draws them (`random_lengths`), the way
InferenceMAX's closed loops (aiconfigurator's Llama-3.1-70B silicon rows) were sent: the draw matches
the client's own call sequence on fresh seeds, stays in [ratio x length, length], and a set declaring
it loads each closed-loop run with its own lengths; a burst start replays the loop's first N."""

import json

import numpy as np
import pytest

from simulator.validation.published_replay import closed_loop_parts
from simulator.validation.published_sets import PUBLISHED_DIR, load_published, random_lengths

SETS = (
    "aic-silicon-vllm-v1-hopper",
    "aic-silicon-vllm-v1-b200",
    "aic-silicon-trtllm-70b",
    "aic-silicon-vllm-v1-70b-more-tp",
    "aic-silicon-trtllm-70b-more-tp",
)


def _client_draw(input_len, output_len, count, seed, ratio):
    """benchmark_serving's own sequence: seed numpy's global generator, draw the (empty) prefix, then
    the input lengths, then the output lengths (`sample_random_requests`)."""
    np.random.seed(seed)
    np.random.randint(0, 128256, size=0)
    inputs = np.random.randint(int(input_len * ratio), input_len + 1, size=count)
    outputs = np.random.randint(int(output_len * ratio), output_len + 1, size=count)
    return inputs.tolist(), outputs.tolist()


def test_the_draw_is_the_clients_on_fresh_seeds_and_lengths():
    rng = np.random.default_rng(int(np.random.SeedSequence().entropy % 2**32))
    state = np.random.get_state()
    try:
        for _ in range(5):
            seed = int(rng.integers(0, 2**31))
            isl, osl = int(rng.integers(2, 9000)), int(rng.integers(2, 9000))
            count, ratio = int(rng.integers(1, 700)), float(rng.uniform(0.05, 1.0))
            prompts, outputs = random_lengths(isl, osl, count, seed, ratio)
            assert (prompts, outputs) == _client_draw(isl, osl, count, seed, ratio)
            assert len(prompts) == len(outputs) == count
            assert all(int(isl * ratio) <= n <= isl for n in prompts)
            assert all(int(osl * ratio) <= n <= osl for n in outputs)
    finally:
        np.random.set_state(state)
    # ratio 1: the nominal lengths exactly
    assert random_lengths(1024, 512, 3, 0, 1.0) == ([1024] * 3, [512] * 3)


@pytest.mark.parametrize(("seed", "ratio"), [(-1, 0.8), (0, 0.0), (0, 1.5), (1.0, 0.8)])
def test_bad_draw_parameters_are_refused(seed, ratio):
    with pytest.raises(ValueError, match="random_lengths"):
        random_lengths(1024, 1024, 4, seed, ratio)


@pytest.mark.parametrize(
    "bad",
    [
        {"seed": 0},
        {"seed": 0, "range_ratio": 0.8, "x": 1},
        [0, 0.8],
        {"seed": -1, "range_ratio": 0.8},
        {"seed": 0, "range_ratio": 1.2},
    ],
)
def test_a_set_with_a_malformed_declaration_is_refused_naming_its_file(tmp_path, bad):
    raw = json.loads((PUBLISHED_DIR / f"{SETS[0]}.json").read_text())
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw | {"random_lengths": bad}))
    with pytest.raises(ValueError, match=r"bad\.json: random_lengths"):
        load_published(path)


def test_the_inferencemax_sets_load_each_request_with_its_drawn_lengths():
    for name in SETS:
        data = load_published(name)
        drawn = data["random_lengths"]
        assert drawn == {"seed": 0, "range_ratio": 0.8} and data["burst_start_turns"] == 10
        for run in data["runs"]:
            isl, osl = run["nominal_lengths"]
            count = run["num_requests"]
            assert count == 10 * run["max_concurrency"]
            assert (run["prompt_tokens"], run["output_tokens"]) == random_lengths(
                isl, osl, count, **drawn
            )
            assert run["engine_settings"]["max_model_len"] >= isl + osl
            settings = data["engine_settings"] | run["engine_settings"]
            # every InferenceMAX server asked for an fp8 cache; its H100 vLLM servers held what a
            # bf16 one holds (benchmarks/vllm_h100_kv_cache.py), and are replayed so
            h100_vllm = run["gpu"] == "H100-80GB" and data["engine_profile"] == "vllm-v1"
            assert settings["kv_cache_dtype"] == ("auto" if h100_vllm else "fp8"), run["id"]


def test_the_burst_replays_the_loops_first_requests_as_drawn(monkeypatch):
    import simulator.validation.published_replay as replay_module

    data = load_published(SETS[0])
    run = next(r for r in data["runs"] if r["max_concurrency"] == 4)
    seen = []
    monkeypatch.setattr(
        replay_module,
        "_replay_means",
        lambda data, run, profile=None: seen.append(run) or {"ttft_mean_s": 0.0},
    )
    closed_loop_parts(data, run)
    burst, steady = seen
    assert burst["prompt_tokens"] == run["prompt_tokens"][:4] and not burst["staggered_warmup"]
    assert burst["output_tokens"] == run["output_tokens"][:4] and burst["num_requests"] == 4
    assert steady is run
