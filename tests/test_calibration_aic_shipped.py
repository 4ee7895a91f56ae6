"""The shipped aiconfigurator calibrations: the same figures as a fresh fit of the installed database
(optional extra `[aic]`), ten measured GPUs with backend, version and error, the best-supported
source the default and the other still selectable, the step features they count and the model
shapes they were fitted on."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from engine.core.step_shape import StepShape
from simulator.calibration.aic_fit import layer_gemms
from simulator.calibration.aic_import import SYSTEMS, aic_calibration, model_spec
from simulator.calibration.cli import app
from simulator.calibration.compare import disagreement
from simulator.calibration.cost_model import CostModel, feature_value
from simulator.calibration.schema import CostModelFit, load_shipped
from simulator.calibration.shipped import (
    AIC_FITTED,
    calibration_for,
    load_all_shipped,
    measured_support,
)


def test_shipped_figures_equal_a_fresh_fit_of_the_installed_database():
    pytest.importorskip("aiconfigurator_core", reason="optional extra [aic] not installed")
    fresh = aic_calibration("llama-3-70b", "H200-141GB", 4, "vllm")
    shipped = load_shipped("llama-3-70b@H200-141GB-tp4-aic-vllm")
    assert [t.name for t in fresh.cost_model.terms] == [t.name for t in shipped.cost_model.terms]
    assert [t.seconds_per_unit for t in fresh.cost_model.terms] == pytest.approx(
        [t.seconds_per_unit for t in shipped.cost_model.terms], rel=1e-9, abs=1e-15
    )
    # and the all-reduce as measured (a step's at each table size)
    fresh_curve, shipped_curve = (c.cost_model.all_reduce_curve for c in (fresh, shipped))
    assert fresh_curve.tokens == pytest.approx(shipped_curve.tokens, rel=1e-12)
    assert fresh_curve.seconds == pytest.approx(shipped_curve.seconds, rel=1e-9)
    # and the fp8-weight linear terms fitted on the same sweep's fp8 rows
    fresh_fp8, shipped_fp8 = (c.cost_model.weight_dtype_terms["fp8"] for c in (fresh, shipped))
    assert fresh_fp8.model_dump(exclude={"terms"}) == shipped_fp8.model_dump(exclude={"terms"})
    assert [t.seconds_per_unit for t in fresh_fp8.terms] == pytest.approx(
        [t.seconds_per_unit for t in shipped_fp8.terms], rel=1e-9, abs=1e-15
    )
    # and the fp8-KV decode terms fitted on the attention sweep's fp8-cache rows
    fresh_kv, shipped_kv = (c.cost_model.kv_cache_dtype_terms["fp8"] for c in (fresh, shipped))
    assert fresh_kv.replaces == shipped_kv.replaces
    assert [t.seconds_per_unit for t in fresh_kv.terms] == pytest.approx(
        [t.seconds_per_unit for t in shipped_kv.terms], rel=1e-9, abs=1e-15
    )


def test_ten_gpu_types_are_fitted_from_measurements_with_backend_and_error():
    aic = [c for c in load_all_shipped() if c.provenance.method == "aiconfigurator kernel tables"]
    gpus = {c.device.hardware for c in aic}
    assert len(gpus) >= 10 and gpus == set(SYSTEMS)
    for gpu in ("B200-180GB", "H200-141GB"):
        for model in ("llama-2-7b", "llama-3-8b", "llama-3-70b"):
            assert any(c.device.hardware == gpu and c.model.name == model for c in aic), (
                gpu,
                model,
            )
    assert len(aic) == len(AIC_FITTED)
    for calibration in aic:
        assert calibration.label == "fitted" and calibration.provenance.backend in (
            "vllm",
            "sglang",
            "trtllm",
        )
        assert (
            calibration.provenance.backend_version
            and calibration.provenance.database_mode == "SILICON"
        )
        step, gemm = calibration.cost_model.fit_errors[:2]
        assert step.target.startswith("step kernel time") and step.mape_cross_validated <= 0.10
        assert gemm.target.startswith("per-layer GEMM") and gemm.mape_cross_validated <= 0.10
        assert all(
            error.mape_cross_validated is not None for error in calibration.cost_model.fit_errors
        )


def test_best_supported_source_is_the_default_and_the_other_stays_selectable():
    default = calibration_for("llama-2-7b", "A100-80GB", 1)
    vidur = load_shipped("llama-2-7b@A100-80GB-tp1")
    assert default.name == "llama-2-7b@A100-80GB-tp1-aic-vllm"
    assert measured_support(default) > measured_support(vidur)
    assert (
        calibration_for("llama-3-8b", "H200-141GB", 1, backend="trtllm").provenance.backend
        == "trtllm"
    )
    assert calibration_for("llama-3-8b", "B200-180GB", 1).provenance.backend == "vllm"
    rows = disagreement(vidur, default)
    totals = [row for row in rows if row.kind == "step total"]
    assert len(totals) == 6 and all(row.first_s > 0 and row.second_s > 0 for row in totals)
    decode = StepShape(decode_context_lens=(512,))
    assert totals[0].second_s == pytest.approx(
        CostModel.from_calibration(default).step_time(decode)
    )


def test_list_json_gives_source_backend_and_error_of_each():
    result = CliRunner().invoke(app, ["list", "--json"])
    assert result.exit_code == 0, result.output
    entries = json.loads(result.output)
    by_name = {entry["name"]: entry for entry in entries}
    entry = by_name["llama-3-8b@B200-180GB-tp1-aic-vllm"]
    assert (
        entry["label"] == "fitted"
        and entry["backend"] == "vllm"
        and "aiconfigurator" in entry["source"]
    )
    assert entry["tensor_parallel"] == 1 and entry["device"] == "B200-180GB"
    assert 0 < entry["fit_error"]["mape_cross_validated"] < 0.1
    assert by_name["llama-2-7b@A100-80GB-tp1"]["backend"] is None


def test_new_step_features_count_what_they_say():
    fit = CostModelFit(knee_tokens=1, knee_label="fitted", terms=[])
    mixed = StepShape(prefill_chunks=((100, 0),), decode_context_lens=(10, 20, 30))
    decode = StepShape(decode_context_lens=(10,))
    assert [
        feature_value(f, mixed, fit) for f in ("decode_step", "decode_sequence", "prefill_step")
    ] == [1, 3, 1]
    assert [
        feature_value(f, decode, fit) for f in ("decode_step", "decode_sequence", "prefill_step")
    ] == [1, 1, 0]
    assert np.isclose(feature_value("decode_step", StepShape(prefill_chunks=((5, 0),)), fit), 0.0)


def test_model_spec_is_bf16_and_gemm_shapes_follow_tensor_parallel():
    spec = model_spec("llama-3-70b")
    assert spec.dtype == "bfloat16"
    assert layer_gemms(spec, 4) == [
        ("qkv", 2560, 8192),
        ("o", 8192, 2048),
        ("gate_up", 14336, 8192),
        ("down", 8192, 7168),
    ]
