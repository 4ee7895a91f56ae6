"""A fitted fp8 small-batch scale carried to another GPU of the same kernel build target
(`EngineProfile.fp8_linear_scale`, `fp8_small_batch.with_carried_fp8`): which GPUs it reaches, and
that it reads the carried GPU's fp8 weights at the share of its HBM peak the fitted GPU's served
steps read at, not the fitted GPU's ratio of times; and carried from the model and TP degree it was
fitted at to another (`carried_fp8_shape`): the same seconds off per layer, never a served read
above the HBM peak, and on the published held-out rows closer than the ratio (fresh random scales
and steps each run)."""

import json
import math

import numpy as np
import pytest
from sim_helpers import fp8_linear_s

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel
from simulator.calibration.engine_profile import EngineProfile, load_profile
from simulator.calibration.fp8_small_batch import (
    CARRY_SHAPE,
    Fp8Reference,
    fp8_read_s,
    with_carried_fp8,
)
from simulator.calibration.kernel_era import FP8_LINEAR_PREFIX
from simulator.calibration.profiled_cost_model import ProfiledCostModel
from simulator.calibration.schema import load_shipped
from simulator.calibration.weight_dtype import weight_dtype_calibration
from simulator.hardware.catalog import get_hardware
from simulator.validation.published_report import replay
from simulator.validation.published_sets import load_published


def _fp8(name: str):
    return weight_dtype_calibration(load_shipped(name), "fp8")


def _served_share(calibration, profile) -> float:
    """Share of its GPU's HBM peak at which a replica's steps read the fp8 weights at CARRY_SHAPE."""
    model, tp = calibration.model, calibration.device.tensor_parallel
    parts = ProfiledCostModel.of_calibration(calibration, profile).gpu.explain(CARRY_SHAPE)
    # the tables' fp8 linear terms, less what the scale takes off below the knee
    served_s = sum(
        s for name, s in parts.items() if name.startswith((FP8_LINEAR_PREFIX, "fp8 linear layers"))
    )
    weight_bytes = model.num_layers * model.linear_params_per_layer / tp  # one byte a weight
    peak = get_hardware(calibration.device.hardware).memory_bandwidth_bytes_per_s
    return weight_bytes / peak / served_s


def test_an_fp8_scale_carries_to_gpus_of_the_same_kernel_build_target_only(tmp_path, monkeypatch):
    """H100 and H200 run the same sm_90 fp8 GEMMs: a scale fitted on one applies to the other's
    tables; not across targets (B200 is sm_100), not over a GPU's own entry, and not where two
    fitted GPUs of one target would have to be chosen between."""
    rng = np.random.default_rng(int(np.random.SeedSequence().entropy % 2**32))
    scale, own = (float(v) for v in rng.uniform(0.3, 0.95, size=2))
    trtllm = load_profile("trtllm")
    carried = trtllm.model_copy(update={"fp8_linear_scales": {"H200-141GB": scale}})
    assert get_hardware("H100-80GB").compute_capability == "sm_90"
    assert carried.fp8_linear_scale("H100-80GB") == (scale, "H200-141GB")
    assert carried.fp8_linear_scale("B200-180GB") == (1.0, None)
    assert carried.fp8_linear_scale("A100-80GB") == (1.0, None)
    both = trtllm.model_copy(update={"fp8_linear_scales": {"H200-141GB": scale, "H100-80GB": own}})
    assert both.fp8_linear_scale("H100-80GB") == (own, "H100-80GB")
    # a third sm_90 GPU (a catalog override) with its own fit: the H100 has two to choose from
    overrides = tmp_path / "hardware.json"
    overrides.write_text(
        json.dumps({"H20-96GB": get_hardware("H100-80GB").model_dump() | {"name": "H20-96GB"}})
    )
    monkeypatch.setenv("SURGEPLAN_HARDWARE_OVERRIDES", str(overrides))
    two = trtllm.model_copy(update={"fp8_linear_scales": {"H200-141GB": scale, "H20-96GB": own}})
    assert two.fp8_linear_scale("H100-80GB") == (1.0, None)
    monkeypatch.delenv("SURGEPLAN_HARDWARE_OVERRIDES")


@pytest.mark.parametrize("model", ["llama-3-70b", "llama-3-8b"])
def test_a_carried_scale_reads_at_the_fitted_gpus_share_of_the_hbm_peak(model):
    rng = np.random.default_rng()
    scale = float(rng.uniform(0.4, 0.95))
    tp = 4 if model == "llama-3-70b" else 1
    # fitted at this very shape: only the GPU carry (the shape carry is the next test's)
    profile = load_profile("trtllm").model_copy(
        update={"fp8_linear_scales": {"H200-141GB": scale}, "fp8_linear_reference": {}}
    )
    h200 = _fp8(f"{model}@H200-141GB-tp{tp}-aic-trtllm")
    h100 = _fp8(f"{model}@H100-80GB-tp{tp}-aic-trtllm")
    fitted = _served_share(h200, profile)
    assert _served_share(h100, profile) == pytest.approx(fitted, rel=1e-3)
    # the tables' own shares differ (so a ratio of times would not keep it): H100 above H200
    plain = profile.model_copy(update={"fp8_linear_scales": {}})
    assert _served_share(h100, plain) > 1.1 * _served_share(h200, plain)
    # what the replica takes off a random step below the knee is (1 - carried) of the tables' time
    carried = with_carried_fp8(profile, h100).fp8_linear_scales["H100-80GB"]
    peak = {
        gpu: get_hardware(gpu).memory_bandwidth_bytes_per_s for gpu in ("H100-80GB", "H200-141GB")
    }
    expected = (
        scale * fp8_read_s(h200) * peak["H200-141GB"] / (fp8_read_s(h100) * peak["H100-80GB"])
    )
    assert carried == pytest.approx(expected, rel=1e-3)
    gpu = CostModel.from_calibration(h100)
    batch = int(rng.integers(1, int(h100.cost_model.knee_tokens) + 1))
    shape = StepShape(decode_context_lens=tuple(int(c) for c in rng.integers(16, 4096, batch)))
    with_scale, without = (ProfiledCostModel.of_calibration(h100, p) for p in (profile, plain))
    assert with_scale.step_time(shape) == pytest.approx(
        without.step_time(shape) - (1 - carried) * fp8_linear_s(gpu, shape), rel=1e-3
    )
    # nothing carried: bf16 weights, or the GPU the scale was fitted on
    assert (
        with_carried_fp8(profile, load_shipped(f"{model}@H100-80GB-tp{tp}-aic-trtllm")) is profile
    )
    assert with_carried_fp8(profile, h200) is profile


@pytest.mark.parametrize("gpu", ["B200-180GB", "H200-141GB"])
def test_a_scale_fitted_at_one_degree_takes_off_the_same_seconds_per_layer_at_another(gpu):
    rng = np.random.default_rng()
    scale = float(rng.uniform(0.55, 0.95))  # above the floor (the next test's) at every degree
    at_tp4 = {gpu: Fp8Reference(model="llama-3-70b", tensor_parallel=4)}
    profile = load_profile("trtllm").model_copy(
        update={"fp8_linear_scales": {gpu: scale}, "fp8_linear_reference": at_tp4}
    )
    reference = _fp8(f"llama-3-70b@{gpu}-tp4-aic-trtllm")
    per_layer_s = (1 - scale) * fp8_read_s(reference) / reference.model.num_layers
    assert with_carried_fp8(profile, reference) is profile  # the fitted shape: as fitted
    shares = {}
    for name in (
        "llama-3-70b@{}-tp1",
        "llama-3-70b@{}-tp2",
        "llama-3-70b@{}-tp8",
        "llama-3-8b@{}-tp1",
    ):
        target = _fp8(name.format(gpu) + "-aic-trtllm")
        carried = with_carried_fp8(profile, target).fp8_linear_scales[gpu]
        layers = target.model.num_layers
        # the same seconds off per layer (the profile keeps four decimals)
        assert carried == pytest.approx(1 - per_layer_s * layers / fp8_read_s(target), abs=1e-4)
        # what a replica takes off a random step below the knee is (1 - carried) of the tables'
        plain = profile.model_copy(update={"fp8_linear_scales": {}})
        batch = int(rng.integers(1, int(target.cost_model.knee_tokens) + 1))
        shape = StepShape(decode_context_lens=tuple(int(c) for c in rng.integers(16, 4096, batch)))
        with_scale, without = (
            ProfiledCostModel.of_calibration(target, p) for p in (profile, plain)
        )
        assert with_scale.step_time(shape) == pytest.approx(
            without.step_time(shape)
            - (1 - carried) * fp8_linear_s(CostModel.from_calibration(target), shape),
            rel=1e-3,
        )
        shares[name] = _served_share(target, profile)
    # the tables' fixed cost per GEMM weighs more as the GEMMs shrink: a lower served share at TP8
    assert (
        shares["llama-3-70b@{}-tp1"] > shares["llama-3-70b@{}-tp2"] > shares["llama-3-70b@{}-tp8"]
    )
    # without a reference the ratio holds at every shape, as before the shape carry
    ratio = profile.model_copy(update={"fp8_linear_reference": {}})
    assert with_carried_fp8(ratio, _fp8(f"llama-3-70b@{gpu}-tp1-aic-trtllm")) is ratio


def test_a_carried_scale_never_reads_the_weights_faster_than_the_hbm_peak():
    """A scale taking off more than the small GEMMs' whole time per layer stops at the peak."""
    profile = load_profile("trtllm").model_copy(
        update={
            "fp8_linear_scales": {"B200-180GB": 0.05},
            "fp8_linear_reference": {
                "B200-180GB": Fp8Reference(model="llama-3-70b", tensor_parallel=4)
            },
        }
    )
    tp8 = _fp8("llama-3-70b@B200-180GB-tp8-aic-trtllm")
    assert _served_share(tp8, profile) == pytest.approx(1.0, rel=1e-3)
    assert _served_share(_fp8("llama-3-70b@B200-180GB-tp1-aic-trtllm"), profile) < 1.0


def test_carried_by_seconds_per_layer_the_held_out_single_gpu_rows_are_closer_than_by_ratio():
    """InferenceMAX's TensorRT-LLM Llama-3.1-70B fp8 TPOT rows at TP1 on the B200 (held out; the scale
    is fitted at TP4): the TP4 ratio put them 28-30% fast at 4-16 in flight."""
    data = load_published("aic-silicon-trtllm-70b-more-tp")
    data["runs"] = [
        run
        for run in data["runs"]
        if run["id"] in ("b200-llama-3-70b-tp1-1024x1024-c4", "b200-llama-3-70b-tp1-1024x1024-c16")
    ]
    assert len(data["runs"]) == 2
    profile = load_profile("trtllm")
    assert "B200-180GB" in profile.fp8_linear_reference
    ratio = profile.model_copy(update={"fp8_linear_reference": {}})
    by_layer, by_ratio = (
        [row for row in replay(data, p) if row.metric == "tpot_mean_s"] for p in (profile, ratio)
    )
    assert len(by_layer) == 2
    for carried, plain in zip(by_layer, by_ratio, strict=True):
        assert plain.ratio < 0.8  # the ratio's: 28-30% fast
        assert abs(math.log(carried.ratio)) < 0.5 * abs(math.log(plain.ratio))


def test_a_reference_shape_needs_a_scale_of_its_gpu():
    stored = load_profile("trtllm").model_dump()
    orphan = stored | {"fp8_linear_scales": {"H200-141GB": 0.6}}  # B200's reference kept
    with pytest.raises(ValueError, match=r"fp8_linear_reference for \['B200-180GB'\]"):
        EngineProfile.model_validate(orphan)
    # a model surgeplan does not know would never find its tables: refused by name
    typo = stored | {
        "fp8_linear_reference": {"B200-180GB": {"model": "llama-3-70B", "tensor_parallel": 4}}
    }
    with pytest.raises(ValueError, match="model 'llama-3-70B' is unknown; expected one of"):
        EngineProfile.model_validate(typo)


def test_show_names_the_reference_and_the_scale_a_calibration_takes():
    """`calibrations show` on TensorRT-LLM's B200 TP1 tables: the fitted shape, and the scale the TP4
    one becomes at TP1 (what the replay applies), not the one fitted at TP4."""
    from typer.testing import CliRunner

    from simulator.calibration.cli import app

    name = "llama-3-70b@B200-180GB-tp1-aic-trtllm"
    result = CliRunner().invoke(
        app, ["show", name, "--engine-profile", "trtllm"], env={"COLUMNS": "400"}
    )
    assert result.exit_code == 0, result.output
    profile = load_profile("trtllm")
    carried = with_carried_fp8(profile, _fp8(name)).fp8_linear_scales["B200-180GB"]
    assert carried > profile.fp8_linear_scales["B200-180GB"] + 0.1
    fitted = profile.fp8_linear_scales["B200-180GB"]
    assert f"B200-180GB x{fitted:.2f} at llama-3-70b TP4" in result.output
    assert f"llama-3-70b TP1 on B200-180GB with fp8 weights: x{carried:.2f}" in result.output
