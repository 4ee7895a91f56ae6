"""A fitted fp8 small-batch scale carried to another GPU of the same kernel build target
(`EngineProfile.fp8_linear_scale`, `fp8_small_batch.with_carried_fp8`): which GPUs it reaches, and
that it reads the carried GPU's fp8 weights at the share of its HBM peak the fitted GPU's served
steps read at, not the fitted GPU's ratio of times (fresh random scales and steps each run)."""

import json

import numpy as np
import pytest
from sim_helpers import fp8_linear_s

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel
from simulator.calibration.engine_profile import load_profile
from simulator.calibration.fp8_small_batch import CARRY_SHAPE, fp8_read_s, with_carried_fp8
from simulator.calibration.kernel_era import FP8_LINEAR_PREFIX
from simulator.calibration.profiled_cost_model import ProfiledCostModel
from simulator.calibration.schema import load_shipped
from simulator.calibration.weight_dtype import weight_dtype_calibration
from simulator.hardware.catalog import get_hardware


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
    profile = load_profile("trtllm").model_copy(update={"fp8_linear_scales": {"H200-141GB": scale}})
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
