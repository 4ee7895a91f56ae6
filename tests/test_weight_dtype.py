"""fp8 weights (`model.weight_dtype`): the setting defined once and validated, half the linear-layer
weight bytes in the one memory formula (so more KV blocks), the linear-layer terms taken from the
calibration's fitted fp8 GEMM terms (aiconfigurator's fp8 sweeps), and a clear refusal on a GPU or
calibration without fp8 measurements."""

from pathlib import Path

import pytest
from pydantic import ValidationError
from test_calibration_aic import fixture_db, gemm_s  # noqa: F401  (the fixture database)
from typer.testing import CliRunner

from engine.core.config import WeightConfig
from engine.core.memory import kv_pool_blocks, weight_bytes
from engine.core.step_shape import StepShape
from simulator import Scenario
from simulator.calibration.aic_fit import layer_gemms
from simulator.calibration.aic_import import aic_calibration
from simulator.calibration.cli import app
from simulator.calibration.cost_model import CostModel
from simulator.calibration.schema import load_shipped
from simulator.calibration.shipped import calibration_for
from simulator.calibration.weight_dtype import weight_dtype_calibration
from simulator.cli import with_weight_dtype
from simulator.hardware.catalog import get_hardware
from simulator.model_spec import ModelSpec
from simulator.resolve import resolve_calibration_for, resolve_pool
from simulator.scenario import ModelChoice
from simulator.simulation import build_cluster

SMALL_FP8 = "llama-2-7b@H100-80GB-tp1-aic-trtllm"
H100_FP8 = "llama-2-70b@H100-80GB-tp2-aic-trtllm"  # MLPerf v4.1's H100 layout


def _scenario(gpu="H100-80GB", tp=2, model="llama-2-70b", weight_dtype="fp8", **extra):
    return Scenario.model_validate(
        {
            "model": {"name": model, "dtype": "float16", "weight_dtype": weight_dtype},
            "hardware": {"gpu": gpu, "tensor_parallel": tp},
            "traffic": {"duration_s": 5.0},
            **extra,
        }
    )


def test_the_setting_is_defined_once_bounded_and_defaults_to_auto():
    field = ModelChoice.model_fields["weight_dtype"]
    assert field.description == WeightConfig.model_fields["weight_dtype"].description
    assert ModelChoice().weight_dtype == "auto" == WeightConfig().weight_dtype
    with pytest.raises(ValidationError, match="weight_dtype"):
        Scenario.model_validate({"model": {"weight_dtype": "int4"}})
    with pytest.raises(ValueError, match="weight_dtype"):
        with_weight_dtype(Scenario(), "nvfp4")  # the CLI's --weight-dtype, validated the same way
    assert with_weight_dtype(Scenario(), "fp8").model.weight_dtype == "fp8"
    with pytest.raises(ValueError, match="weight_dtype is 'int4'"):
        ModelSpec.from_preset("llama-2-7b", weight_dtype="int4")


def test_fp8_weights_halve_the_linear_layers_bytes_and_give_more_kv_blocks():
    assert weight_bytes(1000, 10, "auto", 2) == 2020
    assert weight_bytes(1000, 10, "fp8", 2) == 1020  # embeddings, LM head, norms stay in float16
    fp16 = ModelSpec.from_preset("llama-2-70b", dtype="float16")
    fp8 = ModelSpec.from_preset("llama-2-70b", dtype="float16", weight_dtype="fp8")
    assert fp16.weight_bytes == fp16.num_params * 2  # auto: as before
    linear = fp16.num_layers * fp16.linear_params_per_layer
    assert fp8.weight_bytes == linear + (fp16.num_params - linear) * 2
    for tp in (4, 8):
        assert fp16.weight_bytes_per_gpu(tp) / 2 < fp8.weight_bytes_per_gpu(tp)
        assert fp8.weight_bytes_per_gpu(tp) < 0.51 * fp16.weight_bytes_per_gpu(tp)
    # the simulator's pool: the one formula with the fp8 weight bytes
    scenario = _scenario(tp=8)
    gpu = get_hardware("H100-80GB")
    settings = scenario.scheduler
    expected = kv_pool_blocks(
        gpu.memory_bytes,
        settings.gpu_memory_utilization,
        fp8.weight_bytes_per_gpu(8),
        fp8.activation_bytes_per_gpu(
            settings.max_num_batched_tokens, settings.max_num_seqs, tensor_parallel=8
        ),
        fp8.kv_block_bytes_per_gpu(8, settings.block_size),
    )
    assert resolve_pool(scenario, scenario.model.spec()) == expected
    auto = _scenario(tp=8, weight_dtype="auto")
    saved = fp16.weight_bytes_per_gpu(8) - fp8.weight_bytes_per_gpu(8)  # 8.6 GB per GPU
    more = expected - resolve_pool(auto, auto.model.spec())
    assert more == pytest.approx(saved / fp8.kv_block_bytes_per_gpu(8, settings.block_size), abs=1)
    assert more > 10_000


def test_fp8_linear_terms_are_the_fitted_ones_and_differ_from_fp16():
    calibration = load_shipped(H100_FP8)
    variant = calibration.cost_model.weight_dtype_terms["fp8"]
    fp8 = weight_dtype_calibration(calibration, "fp8")
    names = {term.name for term in fp8.cost_model.terms}
    assert not names & set(variant.replaces)  # the bf16 linear terms are gone ...
    assert fp8.cost_model.terms[: len(variant.terms)] == variant.terms  # ... the fitted fp8 ones in
    assert all(term.label == "fitted" for term in variant.terms)
    assert all("gemm/trtllm/1.3.0rc20" in term.note for term in variant.terms)
    assert variant.fit_errors[0].target == "per-layer GEMM time (qkv+o+gate_up+down, fp8)"
    assert variant.fit_errors[0].mape_cross_validated < 0.05
    assert (fp8.cost_model.knee_tokens, fp8.cost_model.tile_tokens) == (
        variant.knee_tokens,
        variant.tile_tokens,
    )
    # every other term is the calibration's own
    kept = [t for t in calibration.cost_model.terms if t.name not in variant.replaces]
    assert fp8.cost_model.terms[len(variant.terms) :] == kept
    bf16_model, fp8_model = CostModel.from_calibration(calibration), CostModel.from_calibration(fp8)
    for shape in (
        StepShape(decode_context_lens=(512,) * 64),
        StepShape(prefill_chunks=((4096, 0),)),
    ):
        linear = {
            dtype: sum(s for n, s in model.explain(shape).items() if n.startswith("linear layers"))
            for dtype, model in (("bf16", bf16_model), ("fp8", fp8_model))
        }
        assert 0.4 < linear["fp8"] / linear["bf16"] < 0.95, (shape, linear)
        rest = {
            dtype: sum(
                s for n, s in model.explain(shape).items() if not n.startswith("linear layers")
            )
            for dtype, model in (("bf16", bf16_model), ("fp8", fp8_model))
        }
        assert rest["fp8"] == pytest.approx(rest["bf16"], rel=1e-12)
    assert weight_dtype_calibration(calibration, "auto") is calibration


def test_fp8_terms_are_fitted_like_the_bf16_ones_on_the_tables(fixture_db):  # noqa: F811
    """The fixture's fp8 GEMMs take half the bf16 time: the fp8 terms must give that back."""
    calibration = aic_calibration("llama-3-8b", "H200-141GB", 1, "vllm", root=fixture_db)
    fp8 = CostModel.from_calibration(weight_dtype_calibration(calibration, "fp8"))
    model, layers = calibration.model, calibration.model.num_layers
    for tokens in (1, 4096):
        parts = fp8.explain(StepShape(prefill_chunks=((tokens, 0),)))
        linear = sum(s for name, s in parts.items() if name.startswith("linear layers"))
        truth = 0.5 * layers * sum(gemm_s(tokens, n, k) for _, n, k in layer_gemms(model, 1))
        assert linear == pytest.approx(truth, rel=1e-6), tokens


def test_the_simulator_and_planner_time_fp8_weights_with_the_fp8_terms():
    scenario = _scenario(engine_profile="trtllm")
    calibration = resolve_calibration_for(scenario)
    assert calibration.name == H100_FP8
    cluster, facts = build_cluster(scenario, _trace())
    assert facts["weight_dtype"] == "fp8" and facts["calibration"]["name"].endswith("weights=fp8")
    # among candidates, one with fp8 terms is taken for fp8 weights, even over a better-ranked one
    candidates = [load_shipped("llama-2-7b@H100-80GB-tp1"), load_shipped(SMALL_FP8)]
    assert calibration_for("llama-2-7b", "H100-80GB", 1, candidates).name == candidates[0].name
    chosen = calibration_for("llama-2-7b", "H100-80GB", 1, candidates, weight_dtype="fp8")
    assert chosen.name == SMALL_FP8


def _trace():
    from simulator.simulation import load_traffic

    return load_traffic(_scenario())


def test_a_gpu_without_fp8_measurements_refuses_by_name():
    for gpu, model, tp in (("A100-80GB", "llama-3-8b", 1), ("L4", "llama-2-7b", 1)):
        scenario = _scenario(gpu=gpu, tp=tp, model=model)
        with pytest.raises(ValueError, match=f"weight_dtype='fp8'.*{gpu}.*no fp8 GEMM terms"):
            build_cluster(scenario, _trace())
    # a named calibration without them refuses too, naming it
    scenario = _scenario(tp=8)
    scenario = scenario.model_copy(
        update={
            "hardware": scenario.hardware.model_copy(
                update={"calibration": "llama-2-70b@H100-80GB-tp8"}
            )
        }
    )
    with pytest.raises(ValueError, match="'llama-2-70b@H100-80GB-tp8'.*no fp8 GEMM terms"):
        build_cluster(scenario, _trace())


def test_show_lists_the_fp8_terms():
    result = CliRunner().invoke(app, ["show", H100_FP8], env={"COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    assert "weight_dtype=fp8" in result.output and "linear layers (fp8)" in result.output
    assert "GPU, fp8 weights" in result.output


def test_the_planner_refuses_a_candidate_gpu_without_fp8_measurements():
    from simulator.planner.recommend import plan
    from simulator.planner.spec import PlanError, load_plan

    scenario, settings = load_plan(
        Path(__file__).resolve().parents[1]
        / "examples"
        / "scenarios"
        / "plan-spike-llama-2-7b.yaml"
    )
    scenario = with_weight_dtype(scenario, "fp8")
    settings = settings.model_validate(
        settings.model_dump() | {"candidates": [{"gpu": "A100-80GB", "tensor_parallel": 1}]}
    )
    with pytest.raises(PlanError, match="A100-80GB.*no fp8 GEMM terms"):
        plan(scenario, settings, workers=1, progress=False)
