"""The engine profile's `eager_layer` host term: each model layer of a step the stack runs without a
CUDA graph costs the host that long (launching its kernels one by one). Which steps are eager is the
profile's: a step with a prompt in it where only decode steps are graphed (`graph_steps`), and a
step of more tokens than the largest captured graph (`graph_max_tokens`; SGLang 0.4: 160; vLLM: up
to min(2 x max_num_seqs, 512), `graph_tokens_per_max_seq`). It is a floor under the GPU's time,
not an addition, whatever the profile's overlap (the GPU runs each kernel as it is launched); the
SGLang profile fits it on its fit runs and the saturated ones then replay within a few percent, and
vLLM V1's, fitted on its Hopper fit half, brings a held-out B200 first token closer."""

import math
import random

import pytest
from sim_helpers import cost_model, host_profile

from engine.core.step_shape import StepShape
from simulator.calibration.engine_profile import EngineProfile, load_profile
from simulator.calibration.host_terms import eager_units, units_of
from simulator.calibration.profiled_cost_model import ProfiledCostModel
from simulator.validation.published_replay import replay_run, source_profile
from simulator.validation.published_sets import load_published


def decode(n: int, context: int = 300) -> StepShape:
    return StepShape((), (context,) * n)


def eager_profile(per_layer_s: float, overlap: float = 1.0, largest: int | None = 160):
    profile = host_profile(overlap, step_s=0.0, sequence_s=0.0).model_copy(
        update={"graph_steps": "decode_only", "graph_max_tokens": largest}
    )
    return profile.with_terms({"eager_layer": per_layer_s}, "derived", "test")


def test_a_step_is_eager_with_a_prompt_in_it_or_above_the_largest_graph():
    rng = random.Random()
    layers, largest = rng.randint(1, 120), rng.randint(1, 300)
    units = eager_units("decode_only", largest, layers)
    assert units(decode(largest)) == 0.0
    assert units(decode(rng.randint(1, largest))) == 0.0
    assert units(decode(largest + rng.randint(1, 50))) == layers
    prompt = StepShape(((rng.randint(1, 4096), 0),), ())
    assert units(prompt) == layers
    assert units(StepShape(((16, 0),), (300,) * rng.randint(1, largest))) == layers
    # a stack that graphs every step, with no batch limit, runs none eagerly
    graphed = eager_units("every", None, layers)
    assert graphed(prompt) == 0.0 and graphed(decode(10_000)) == 0.0
    # graphs of every step up to a limit in tokens (vLLM's piecewise graphs): only larger steps are
    # eager, a step with a prompt counted by its tokens (the prompt's and one per decode)
    limited = eager_units("every", largest, layers)
    assert limited(decode(largest + 1)) == layers
    fits = rng.randint(1, largest)
    assert limited(StepShape(((fits, 0),), ())) == 0.0
    assert limited(StepShape(((fits, 0),), (300,) * (largest - fits))) == 0.0
    assert limited(StepShape(((fits, 0),), (300,) * (largest - fits + 1))) == layers


def test_a_server_sizes_its_graphs_by_its_max_num_seqs_and_may_graph_decode_steps_only():
    rng = random.Random()
    profile = load_profile("vllm-v1")
    # vLLM's capture list: up to min(2 x max_num_seqs, 512) scheduled tokens
    assert (profile.graph_tokens_per_max_seq, profile.graph_max_tokens) == (2, 512)
    seqs = rng.randint(1, 255)
    assert profile.graphed(seqs).graph_max_tokens == 2 * seqs
    assert profile.graphed(rng.randint(256, 4096)).graph_max_tokens == 512
    assert profile.graphed(seqs).graph_steps == "every"
    # a server launched with FULL_DECODE_ONLY graphs: every step with a prompt in it is eager
    decode_only = profile.graphed(seqs, "decode_only")
    assert decode_only.graph_steps == "decode_only" and decode_only.graph_max_tokens == 2 * seqs
    # a profile with a fixed limit and no override is itself
    sglang = load_profile("sglang")
    assert sglang.graphed(rng.randint(1, 4096)) is sglang


def test_an_eager_step_is_at_least_its_layers_host_time_and_a_graphed_one_untouched():
    rng = random.Random()
    layers, per_layer_s = rng.randint(16, 96), rng.uniform(2e-4, 1.5e-3)
    gpu = cost_model(0.004, 2e-5, 3e-7)
    plain = ProfiledCostModel(gpu, host_profile(1.0, step_s=0.0, sequence_s=0.0), num_layers=layers)
    eager = ProfiledCostModel(gpu, eager_profile(per_layer_s), num_layers=layers)
    floor = layers * per_layer_s
    for shape in (decode(161), StepShape(((rng.randint(1, 2000), 0),), ())):
        # overlapped: the step takes the longer of the GPU's time and the host's launches
        assert eager.step_time(shape) == pytest.approx(max(plain.step_time(shape), floor))
    graphed = decode(rng.randint(1, 160))
    assert eager.step_time(graphed) == pytest.approx(plain.step_time(graphed))
    # a decode stretch of an eager batch pays the floor every step
    assert eager.decode_stretch_times(decode(200), 5) == pytest.approx(
        [max(t, floor) for t in plain.decode_stretch_times(decode(200), 5)]
    )
    # not overlapped (V0-like), the host's other work follows the GPU, and the launches are still
    # a floor under the GPU's time: the GPU runs each kernel as it is launched
    serial = ProfiledCostModel(gpu, eager_profile(per_layer_s, overlap=0.0), num_layers=layers)
    plain_serial = ProfiledCostModel(gpu, host_profile(0.0, step_s=0.0, sequence_s=0.0))
    for shape in (decode(161), decode(rng.randint(1, 160))):
        gpu_s, host_s = gpu.step_time(shape), plain_serial.profile.host_s(shape)
        eager_s = floor if shape.num_seqs > 160 else 0.0
        assert serial.step_time(shape) == pytest.approx(max(gpu_s, eager_s) + host_s)
        assert plain_serial.step_time(shape) == pytest.approx(gpu_s + host_s)


def test_the_term_needs_the_models_layers_and_a_step_it_applies_to():
    with pytest.raises(ValueError, match="num_layers"):
        ProfiledCostModel(cost_model(0.004), eager_profile(8e-4))
    with pytest.raises(ValueError, match="eager_layer"):
        units_of("eager_layer")
    # every step graphed, no batch limit: the term would never apply
    bare = host_profile(1.0).with_terms({"eager_layer": 8e-4}, "derived", "test")
    with pytest.raises(ValueError, match="graph_max_tokens"):
        EngineProfile.model_validate(bare.model_dump())
    # a zero term is no term: nothing to time, so no layer count needed
    ProfiledCostModel(cost_model(0.004), eager_profile(0.0))


def test_sglangs_eager_steps_are_fitted_and_replay_its_saturated_runs():
    profile = load_profile("sglang")
    (term,) = [t for t in profile.terms if t.feature == "eager_layer"]
    assert term.label == "fitted" and "datacrunch-sglang-online-h200" in term.source
    # about what aiconfigurator's vLLM backend adds per layer to a prefill (0.8 ms), not fitted on
    assert 0.4e-3 < term.seconds_per_unit < 1.6e-3
    assert profile.graph_steps == "decode_only" and profile.graph_max_tokens == 160
    data = load_published("datacrunch-sglang-online-h200")
    assert "eager_layer" in data["fit_terms"]
    fitted = source_profile(data)
    unfitted = fitted.with_terms({"eager_layer": 0.0}, "derived", "test")
    run = next(r for r in data["runs"] if r["id"].endswith("rate16-n3200"))
    measured = run["measured"]["e2e_mean_s"]
    with_term = replay_run(data, run, fitted)["e2e_mean_s"]
    without = replay_run(data, run, unfitted)["e2e_mean_s"]
    # without it the saturated server is simulated with capacity to spare; with it, as measured
    assert abs(math.log(with_term / measured)) < abs(math.log(without / measured))
    assert with_term / measured == pytest.approx(1.0, abs=0.10)
    assert without / measured < 0.9


def test_vllm_v1s_eager_prompt_steps_are_fitted_on_hopper_and_carried_to_the_b200():
    from simulator.resolve import graphed_profile
    from simulator.validation.published_replay import replay_inputs

    profile = load_profile("vllm-v1")
    (term,) = [t for t in profile.terms if t.feature == "eager_layer"]
    assert term.label == "fitted" and "aic-silicon-vllm-v1-hopper" in term.source
    assert 0.2e-3 < term.seconds_per_unit < 1.6e-3
    assert "eager_layer" in load_published("aic-silicon-vllm-v1-hopper")["fit_terms"]
    data = load_published("aic-silicon-vllm-v1-b200")
    run = next(r for r in data["runs"] if r["id"] == "b200-llama-3-70b-tp8-1024x1024-c4")
    # InferenceMAX's B200 servers graph decode-only steps (FULL_DECODE_ONLY), and the replay says so
    scenario, _, _, _, _ = replay_inputs(data, run)
    assert scenario.hardware.graph_steps == "decode_only"
    assert graphed_profile(scenario, profile).graph_steps == "decode_only"
    # held out, never fitted on: its first tokens come closer to the measured with the term
    fitted = source_profile(data)
    measured = run["measured"]["ttft_mean_s"]
    with_term = replay_run(data, run, fitted)["ttft_mean_s"]
    without = replay_run(data, run, fitted.with_terms({"eager_layer": 0.0}, "derived", "t"))
    assert abs(math.log(with_term / measured)) < abs(math.log(without["ttft_mean_s"] / measured))
