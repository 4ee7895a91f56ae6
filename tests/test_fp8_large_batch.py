"""The fp8 linear layers' time per token beyond the knee, served stack over tables
(`EngineProfile.fp8_large_batch_scales`, `fp8_small_batch.SmallBatchFp8`'s `large`): it moves only
the tokens beyond the knee (decode steps below it keep the small-batch scale alone), applies on its
own GPU only, survives pickling (Ray ships cost models to actors), and the fit's coordinates name it
only where a set asks for it. Fresh random scales and steps each run."""

import math
import pickle

import numpy as np
import pytest
from sim_helpers import fp8_linear_s

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel
from simulator.calibration.engine_profile import load_profile
from simulator.calibration.fp8_small_batch import SmallBatchFp8
from simulator.calibration.profiled_cost_model import ProfiledCostModel
from simulator.calibration.schema import load_shipped
from simulator.calibration.weight_dtype import weight_dtype_calibration
from simulator.validation.fit_coordinates import (
    FP8_LARGE_RANGE,
    FP8_LARGE_TERM,
    FP8_TERM,
    fp8_coordinates,
    scoring_sets,
)
from simulator.validation.published_sets import load_published


def _rng() -> np.random.Generator:
    return np.random.default_rng(int(np.random.SeedSequence().entropy % 2**32))


def _fp8(name: str):
    return weight_dtype_calibration(load_shipped(name), "fp8")


def test_the_large_batch_scale_moves_only_the_tokens_beyond_the_knee():
    rng = _rng()
    small, large = float(rng.uniform(0.4, 1.0)), float(rng.uniform(0.7, 1.4))
    gpu = CostModel.from_calibration(_fp8("llama-3-70b@H200-141GB-tp4-aic-vllm"))
    knee = int(gpu.fit.knee_tokens)
    both, small_only = SmallBatchFp8(gpu, small, large), SmallBatchFp8(gpu, small)
    # a decode step below the knee: the large-batch scale never reaches it
    decode = StepShape(decode_context_lens=tuple(int(c) for c in rng.integers(16, 8192, size=8)))
    assert decode.num_batched_tokens < knee
    assert both.step_time(decode) == small_only.step_time(decode)
    assert both.decode_stretch_times(decode, 3) == small_only.decode_stretch_times(decode, 3)
    # a prefill beyond it: (large - 1) x the fp8 linear time of the tokens past the knee
    tokens = int(rng.integers(knee + 64, 8192))
    prefill = StepShape(prefill_chunks=((tokens, 0),), decode_context_lens=(512,) * 3)
    at_knee = StepShape(prefill_chunks=((knee, 0),))
    beyond_s = fp8_linear_s(gpu, prefill) - fp8_linear_s(gpu, at_knee)
    assert beyond_s > 0
    assert both.step_time(prefill) == pytest.approx(
        small_only.step_time(prefill) + (large - 1.0) * beyond_s
    )
    assert pickle.loads(pickle.dumps(both)).step_time(prefill) == both.step_time(prefill)
    with pytest.raises(ValueError, match="large-batch scale"):
        SmallBatchFp8(gpu, small, 0.0)
    # a step above the largest captured graph runs eagerly: no small-batch saving (vLLM's piecewise
    # graphs up to min(2 x max_num_seqs, 512) tokens), one at or under it keeps it
    limit = int(rng.integers(1, decode.num_batched_tokens))
    graphed = SmallBatchFp8(gpu, small, 1.0, graph_max_tokens=limit)
    assert graphed.step_time(decode) == pytest.approx(gpu.step_time(decode))
    roomy = SmallBatchFp8(gpu, small, 1.0, graph_max_tokens=decode.num_batched_tokens)
    assert roomy.step_time(decode) == small_only.step_time(decode)
    assert pickle.loads(pickle.dumps(graphed)).step_time(decode) == graphed.step_time(decode)


def test_a_gpus_large_batch_scale_applies_to_its_own_fp8_tables_only():
    """Never carried, not even to a GPU of the same kernel build target (H100 and H200 fit it on
    opposite sides of 1), and not to bf16 weights."""
    rng = _rng()
    large = float(rng.uniform(0.7, 1.4))
    v1 = load_profile("vllm-v1")
    plain = v1.model_copy(update={"fp8_large_batch_scales": {}})
    scaled = v1.model_copy(update={"fp8_large_batch_scales": {"H200-141GB": large}})
    shape = StepShape(prefill_chunks=((int(rng.integers(2048, 8192)), 0),))
    h200 = _fp8("llama-3-70b@H200-141GB-tp4-aic-vllm")
    with_it, without = (ProfiledCostModel.of_calibration(h200, p) for p in (scaled, plain))
    assert with_it.step_time(shape) != pytest.approx(without.step_time(shape))
    for other in (
        _fp8("llama-3-70b@H100-80GB-tp4-aic-vllm"),
        load_shipped("llama-3-70b@H200-141GB-tp4-aic-vllm"),  # bf16 weights
    ):
        assert ProfiledCostModel.of_calibration(other, scaled).step_time(shape) == pytest.approx(
            ProfiledCostModel.of_calibration(other, plain).step_time(shape)
        )


def test_the_large_batch_coordinates_exist_only_where_a_set_names_the_term():
    data = load_published("aic-silicon-vllm-v1-hopper")
    fit = [{**data, "runs": [run for run in data["runs"] if run["split"] == "fit"]}]
    terms = (FP8_TERM, FP8_LARGE_TERM)
    coordinates = fp8_coordinates(fit, terms)
    assert coordinates == {
        f"{term}:{gpu}": gpu for term in terms for gpu in ("H100-80GB", "H200-141GB")
    }
    for key in coordinates:
        assert scoring_sets(key, fit, {}, coordinates) == fit
    small_only = [{**fit[0], "fit_terms": [FP8_TERM]}]
    assert set(fp8_coordinates(small_only, terms)) == {
        f"{FP8_TERM}:H100-80GB",
        f"{FP8_TERM}:H200-141GB",
    }
    # TensorRT-LLM's silicon rows time decode only (mean TPOT): they never name it
    trtllm = load_published("aic-silicon-trtllm-70b")
    assert FP8_LARGE_TERM not in trtllm.get("fit_terms", ())
    stored = load_profile("vllm-v1")
    for gpu, scale in stored.fp8_large_batch_scales.items():
        assert FP8_LARGE_RANGE[0] <= scale <= FP8_LARGE_RANGE[1]
        assert gpu in stored.fp8_linear_scales
    assert not load_profile("trtllm").fp8_large_batch_scales


def test_the_fitted_large_batch_scales_keep_served_prefill_gemms_below_the_fp8_peak():
    """Physical check on the stored fit: an 8,192-token prefill's fp8 linear layers, as served with
    the fitted scales, compute at under 80% of the chip's dense fp8 peak at every shipped TP degree
    of vLLM's tables (a scale below 1 speeds them up; aiconfigurator's tables run them at 55-64%)."""
    from simulator.calibration.shipped import calibration_for
    from simulator.hardware.catalog import get_hardware

    profile = load_profile("vllm-v1")
    assert profile.fp8_large_batch_scales  # fitted on aiconfigurator's V1 silicon rows
    tokens, checked = 8192, 0
    for gpu, scale in profile.fp8_large_batch_scales.items():
        for degree in (1, 2, 4, 8):
            tables = calibration_for("llama-3-70b", gpu, degree, backend="vllm", weight_dtype="fp8")
            if tables.provenance.backend != "vllm":
                continue
            fp8 = weight_dtype_calibration(tables, "fp8")
            parts = ProfiledCostModel.of_calibration(fp8, profile).gpu.explain(
                StepShape(((tokens, 0),), ())
            )
            served_s = sum(s for name, s in parts.items() if "fp8" in name and "linear" in name)
            flops = fp8.model.linear_flops_per_token * tokens / degree
            share = flops / get_hardware(gpu).fp8_dense_flops / served_s
            assert 0.3 < share < 0.80, (gpu, degree, scale, share)
            checked += 1
    assert checked >= 6


def test_show_lists_the_large_batch_scales_with_their_source():
    from typer.testing import CliRunner

    from simulator.calibration.cli import app

    profile = load_profile("vllm-v1")
    result = CliRunner().invoke(
        app,
        ["show", "llama-3-70b@H200-141GB-tp4-aic-vllm", "--engine-profile", "vllm-v1"],
        env={"COLUMNS": "400"},
    )
    assert result.exit_code == 0, result.output
    listed = ", ".join(f"{gpu} x{v:.2f}" for gpu, v in profile.fp8_large_batch_scales.items())
    row = next(line for line in result.output.splitlines() if "beyond the knee" in line)
    assert listed in row and "fitted on the fit runs of published set" in row
    trtllm = CliRunner().invoke(
        app,
        ["show", "llama-3-70b@H200-141GB-tp4-aic-trtllm", "--engine-profile", "trtllm"],
        env={"COLUMNS": "400"},
    )
    assert trtllm.exit_code == 0 and "beyond the knee" not in trtllm.output


def test_the_h200s_held_out_first_tokens_at_other_degrees_are_closer_with_it():
    """InferenceMAX's vLLM V1 Llama-3.1-70B fp8 rows on the H200 at TP1 / TP2 (held out; the scales
    are fitted at TP4 / TP8): without the large-batch scale their first tokens are 12-15% fast.
    (Since 2026-12-08 the eager prompt steps' floor takes part of what the scale took, x1.18 →
    x1.12: the scale closes about two fifths of the 1,024-token row's gap, three fifths of the
    8,192-token one's.)"""
    from simulator.validation.published_report import replay

    data = load_published("aic-silicon-vllm-v1-70b-more-tp")
    wanted = ("h200-llama-3-70b-tp2-1024x8192-c4", "h200-llama-3-70b-tp1-8192x1024-c8")
    data["runs"] = [run for run in data["runs"] if run["id"] in wanted]
    assert len(data["runs"]) == 2 and all(run["split"] == "held_out" for run in data["runs"])
    profile = load_profile("vllm-v1")
    assert profile.fp8_large_batch_scales["H200-141GB"] > 1.0
    without = profile.model_copy(update={"fp8_large_batch_scales": {}})
    fitted, plain = (
        [row for row in replay(data, p) if row.metric == "ttft_mean_s"] for p in (profile, without)
    )
    assert len(fitted) == len(plain) == 2
    for with_it, without_it in zip(fitted, plain, strict=True):
        assert without_it.ratio < 0.9
        assert abs(math.log(with_it.ratio)) < 0.7 * abs(math.log(without_it.ratio))
