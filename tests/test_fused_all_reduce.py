"""A deployment's fused all-reduce (`hardware.fused_all_reduce_mb`): up to the threshold a step's
all-reduces take TensorRT-LLM's measured times (vLLM's FlashInfer fusion runs its ported kernel),
beyond it the calibration's own; InferenceMAX's B200 vLLM runs name it, and their decode steps at
16 in flight lose the B200 vLLM table's non-monotone 16-32-token all-reduce."""

import json

import numpy as np
import pytest

from simulator.calibration.all_reduce_curve import AllReduceCurve
from simulator.calibration.fused_all_reduce import (
    absorbed_norms_s,
    fused_all_reduce_calibration,
    with_fused_below,
)
from simulator.calibration.shipped import calibration_for
from simulator.scenario import Scenario
from simulator.validation.published_replay import replay_run
from simulator.validation.published_sets import load_published


def _rng():
    return np.random.default_rng(int(np.random.SeedSequence().entropy % 2**32))


def _curve(rng, tokens) -> AllReduceCurve:
    seconds = np.cumsum(rng.uniform(1e-6, 1e-4, size=len(tokens)))
    return AllReduceCurve(tokens=list(tokens), seconds=seconds.tolist())


def test_the_fused_times_hold_up_to_the_limit_and_the_own_beyond():
    rng = _rng()
    for _ in range(20):
        own = _curve(rng, np.cumprod(rng.uniform(1.5, 3.0, size=int(rng.integers(4, 10)))))
        fused = _curve(rng, np.cumprod(rng.uniform(1.5, 3.0, size=int(rng.integers(4, 10)))))
        limit = float(rng.uniform(1.0, max(own.tokens)))
        absorbed = float(rng.uniform(0.0, 0.9)) * min(fused.seconds)
        merged = with_fused_below(own, fused, limit, absorbed)
        assert sorted(set(own.tokens) | set(fused.tokens)) == merged.tokens
        for tokens, seconds in zip(merged.tokens, merged.seconds):
            expected = (
                fused.seconds_at(tokens) - absorbed if tokens <= limit else own.seconds_at(tokens)
            )
            assert seconds == pytest.approx(expected)
    with pytest.raises(ValueError, match="expected > 0"):
        with_fused_below(own, fused, 0.0)
    with pytest.raises(ValueError, match="slower than the norms it absorbs"):
        with_fused_below(own, fused, max(own.tokens), min(fused.seconds))


def test_a_b200_tp8_vllm_calibration_reads_tensorrt_llms_table_up_to_8_mib():
    vllm = calibration_for("llama-3-70b", "B200-180GB", 8, backend="vllm", weight_dtype="fp8")
    trt = calibration_for("llama-3-70b", "B200-180GB", 8, backend="trtllm", weight_dtype="fp8")
    assert (vllm.provenance.backend, trt.provenance.backend) == ("vllm", "trtllm")
    fused = fused_all_reduce_calibration(vllm, {8: 8}).cost_model.all_reduce_curve
    own, theirs = vllm.cost_model.all_reduce_curve, trt.cost_model.all_reduce_curve
    # the two add + RMSNorm launches a layer of the derived elementwise term: 80 x 2 x 3 us
    absorbed = absorbed_norms_s(vllm.cost_model)
    assert absorbed == pytest.approx(80 * 2 * 3e-6)
    apart = [term for term in vllm.cost_model.terms if not term.name.startswith("elementwise")]
    assert absorbed_norms_s(vllm.cost_model.model_copy(update={"terms": apart})) == 0.0
    # 8 MiB of bf16 activations of hidden 8,192: 512 tokens
    for tokens in (1, 4, 16, 32, 512):
        assert fused.seconds_at(tokens) == pytest.approx(theirs.seconds_at(tokens) - absorbed)
    for tokens in (1024, 8192):
        assert fused.seconds_at(tokens) == pytest.approx(own.seconds_at(tokens))
    # the vLLM table's 16-token step is slower than its 64-token one; the fused curve is not
    assert own.seconds_at(16) > own.seconds_at(64)
    assert fused.seconds_at(16) < fused.seconds_at(64)
    assert fused_all_reduce_calibration(vllm, {}) is vllm
    assert fused_all_reduce_calibration(vllm, {4: 32}) is vllm  # no threshold at its degree
    one_gpu = calibration_for("llama-3-70b", "B200-180GB", 1, backend="vllm", weight_dtype="fp8")
    assert fused_all_reduce_calibration(one_gpu, {1: 8}) is one_gpu  # no all-reduce to fuse


def test_a_degree_without_a_tensorrt_llm_table_is_refused_by_name():
    h100_tp8 = calibration_for("llama-3-70b", "H100-80GB", 8, backend="vllm", weight_dtype="fp8")
    with pytest.raises(
        ValueError, match="fused_all_reduce_mb is 8 MiB at tensor_parallel=8.*H100-80GB"
    ):
        fused_all_reduce_calibration(h100_tp8, {8: 8})
    roofline = calibration_for("llama-2-7b", "A100-80GB", 2)  # its all-reduce a fitted term
    assert roofline.cost_model.all_reduce_curve is None
    with pytest.raises(ValueError, match="fitted term, not a measured curve"):
        fused_all_reduce_calibration(roofline, {2: 8})
    with pytest.raises(ValueError, match="fused_all_reduce_mb unset for a disaggregated fleet"):
        Scenario.model_validate(
            {
                "hardware": {"fused_all_reduce_mb": {2: 8}},
                "cluster": {"disaggregation": {}},
            }
        )


def test_infermax_b200_decode_at_16_in_flight_is_faster_with_the_fused_all_reduce():
    data = load_published("aic-silicon-vllm-v1-b200")
    run = next(r for r in data["runs"] if r["id"] == "b200-llama-3-70b-tp8-1024x1024-c16")
    assert run["fused_all_reduce_mb"] == {"2": 32, "4": 32, "8": 8}  # InferenceMAX's map
    unfused = {key: value for key, value in run.items() if key != "fused_all_reduce_mb"}
    fused_tpot = replay_run(data, run)["tpot_mean_s"]
    unfused_tpot = replay_run(data, unfused)["tpot_mean_s"]
    measured = run["measured"]["tpot_mean_s"]
    # 80 layers x 2 all-reduces at 16 tokens: 4.1 ms a step (vLLM's table) against 1.3 ms
    assert fused_tpot < 0.85 * unfused_tpot
    assert abs(fused_tpot / measured - 1) < abs(unfused_tpot / measured - 1)


def test_the_planner_keeps_the_thresholds_on_the_scenarios_own_gpu_only():
    from simulator.planner.fleet import Batch, fleet_scenario

    thresholds = {2: 32.0, 4: 32.0, 8: 8.0}  # InferenceMAX's B200 map
    base = Scenario.model_validate(
        {
            "model": {"name": "llama-3-70b", "dtype": "bfloat16", "weight_dtype": "fp8"},
            "hardware": {
                "gpu": "B200-180GB",
                "tensor_parallel": 8,
                "fused_all_reduce_mb": thresholds,
            },
        }
    )
    batch = Batch(64, 8192)
    for tp in (2, 4, 8):  # every degree of its own GPU reads its own threshold
        assert fleet_scenario(base, "B200-180GB", tp, 2, batch).hardware.fused_all_reduce_mb == (
            thresholds
        )
    assert fleet_scenario(base, "H200-141GB", 8, 2, batch).hardware.fused_all_reduce_mb == {}


def test_simulate_says_the_all_reduces_it_fused(tmp_path):
    from typer.testing import CliRunner

    from surgeplan_cli import app

    scenario = Scenario.model_validate(
        {
            "name": "b200-fused",
            "model": {"name": "llama-3-70b", "dtype": "bfloat16", "weight_dtype": "fp8"},
            "hardware": {
                "gpu": "B200-180GB",
                "tensor_parallel": 8,
                "fused_all_reduce_mb": {4: 32, 8: 8},
            },
            "traffic": {"duration_s": 10, "too_long": "clip"},
        }
    )
    path = scenario.save(tmp_path / "b200.yaml")
    out = CliRunner().invoke(app, ["simulate", str(path)])
    assert out.exit_code == 0, out.output
    assert "x8, all-reduces up to 8 MiB as TensorRT-LLM's fused kernel" in out.output
    printed = CliRunner().invoke(app, ["simulate", str(path), "--json"])
    assert json.loads(printed.output)["facts"]["fused_all_reduce_mb"] == 8
