"""The aiconfigurator importer on a small database of our own in the same layout and columns (times
from known kernel models, so the fit must give them back): the terms, the all-reduce a tensor-parallel
engine runs, what it refuses, the build, and measured or derived fp8 KV caches. The shipped
calibrations it produced are tested in `test_calibration_aic_shipped.py`."""

import numpy as np
import pytest
from aic_fixture import DECODE, DECODE_FP8, PREFILL, gemm_s, write_fixture_db
from typer.testing import CliRunner

from engine.core.step_shape import StepShape
from simulator.calibration import aic_tables
from simulator.calibration.aic_fit import layer_gemms
from simulator.calibration.aic_import import aic_calibration
from simulator.calibration.cli import app
from simulator.calibration.cost_model import CostModel
from simulator.calibration.shipped import (
    build_aic,
)


@pytest.fixture(scope="module")
def fixture_db(tmp_path_factory):
    return write_fixture_db(tmp_path_factory.mktemp("aic") / "data")


def _terms(calibration) -> dict[str, float]:
    return {f"{t.feature}:{t.name}": t.seconds_per_unit for t in calibration.cost_model.terms}


def test_fit_gives_back_the_kernel_times_it_was_built_from(fixture_db):
    calibration = aic_calibration("llama-3-8b", "H200-141GB", 1, "vllm", root=fixture_db)
    model, layers = calibration.model, calibration.model.num_layers
    assert (
        calibration.label == "fitted" and calibration.name == "llama-3-8b@H200-141GB-tp1-aic-vllm"
    )
    assert (calibration.provenance.backend, calibration.provenance.backend_version) == (
        "vllm",
        "0.24.0",
    )
    assert calibration.provenance.database_mode == "SILICON"
    terms = _terms(calibration)
    assert terms["decode_step:decode attention: per-layer floor"] == pytest.approx(
        DECODE[0] * layers, rel=1e-6
    )
    assert terms["decode_sequence:decode attention: per sequence"] == pytest.approx(
        DECODE[1] * layers, rel=1e-6
    )
    assert terms["decode_context_token:decode attention (KV read)"] == pytest.approx(
        DECODE[2] * layers, rel=1e-6
    )
    assert terms["prefill_step:prefill attention: per-layer floor"] == pytest.approx(
        PREFILL[0] * layers, rel=1e-6
    )
    assert terms["prefill_attention_pair:prefill attention (FLOPs)"] == pytest.approx(
        PREFILL[2] * layers, rel=1e-6
    )
    # every table's fit is exact on data that follow its form; the LM head's affine fit cannot follow
    # max(m, knee) exactly, and the whole-step check carries that small error
    step, *tables_, head = calibration.cost_model.fit_errors
    assert step.target.startswith("step kernel time") and step.mape_cross_validated < 0.02
    assert head.target.startswith("LM-head") and head.mape_train < 0.2
    assert all(error.mape_train < 1e-6 for error in tables_)
    # the linear-layer terms reproduce every layer's four GEMMs (bilinear in (n, k) is exact here)
    model_ = CostModel.from_calibration(calibration)
    for tokens in (1, 48, 700, 4096):
        parts = model_.explain(StepShape(prefill_chunks=((tokens, 0),)))
        linear = sum(seconds for name, seconds in parts.items() if name.startswith("linear layers"))
        truth = layers * sum(gemm_s(tokens, n, k) for _, n, k in layer_gemms(model, 1))
        assert linear == pytest.approx(truth, rel=2e-3 if tokens in (48, 700) else 1e-6), tokens
    # the LM head (128k vocabulary: wider than the sweep) scales the widest measured GEMM
    truth = gemm_s(8, 32768, 4096) * model.vocab_size / 32768
    gemm = aic_tables.read_gemm(fixture_db, "h200_sxm", "vllm")
    assert gemm.time_s(8, model.vocab_size, 4096) == pytest.approx(truth, rel=1e-9)
    head = model_.explain(StepShape(decode_context_lens=(100,) * 8))["LM head"]
    assert head == pytest.approx(truth, rel=0.2)  # an affine fit of a max(m, knee) curve


def test_tensor_parallel_takes_the_graph_all_reduce_and_multi_head_kv_is_scaled(fixture_db):
    with pytest.raises(
        ValueError, match="16 heads"
    ):  # the fixture has no TP2 (16-head) attention rows
        aic_calibration("llama-3-8b", "H200-141GB", 2, "vllm", root=fixture_db)
    reduce = aic_tables.read_all_reduce(fixture_db, "h200_sxm", "vllm", 4)
    assert reduce.kernel == "vLLM_custom_graph" and reduce.version == "0.24.0"
    # Llama-2-7B has 32 KV heads, the table only 8: its KV read is the 8-head fit × 4, derived
    mha = aic_calibration("llama-2-7b", "H200-141GB", 1, "vllm", root=fixture_db)
    kv = [t for t in mha.cost_model.terms if t.feature == "decode_context_token"][0]
    assert kv.seconds_per_unit == pytest.approx(DECODE[2] * 4 * mha.model.num_layers, rel=1e-6)
    assert kv.label == "derived" and "× 4" in kv.note


def test_importer_names_what_is_missing(fixture_db, tmp_path):
    with pytest.raises(ValueError, match="no aiconfigurator tables"):
        aic_calibration("llama-3-8b", "A10G", 1, root=fixture_db)
    with pytest.raises(ValueError, match="backend 'tgi'"):
        aic_calibration("llama-3-8b", "H200-141GB", 1, "tgi", root=fixture_db)
    with pytest.raises(ValueError, match="no version folder holds gemm_perf.parquet"):
        aic_calibration("llama-3-8b", "H200-141GB", 1, "sglang", root=fixture_db)
    # the newest version wins (0.24.0 after 0.9.0)
    assert aic_tables.read_gemm(fixture_db, "h200_sxm", "vllm").version == "0.24.0"
    result = CliRunner().invoke(
        app,
        [
            "build",
            "--source",
            "aiconfigurator",
            "--aic-dir",
            str(tmp_path),
            "--out-dir",
            str(tmp_path / "out"),
        ],
    )
    assert result.exit_code != 0 and "no version folder" in result.output


def test_build_writes_calibrations_from_the_database(fixture_db, tmp_path):
    paths = build_aic(tmp_path, fixture_db, combos=(("llama-3-8b", "H200-141GB", 1, "vllm"),))
    assert [path.name for path in paths] == ["llama-3-8b_on_h200-141gb-tp1-aic-vllm.json"]


def test_a_measured_fp8_cache_replaces_decode_attention_and_an_unmeasured_one_is_derived(
    fixture_db,
):
    """The decode sweep's fp8-KV rows give their own three terms (an fp8 kernel's work per sequence
    differs from the bf16 one's, not only its bytes), which `kv_cache_dtype` fp8 (or fp8_e4m3)
    selects; a dtype the sweep did not measure (int8), or a calibration without the rows, has only
    its KV read scaled by the bytes stored, labelled derived."""
    from simulator.calibration.kv_cache import kv_cache_calibration

    calibration = aic_calibration("llama-3-8b", "H200-141GB", 1, "vllm", root=fixture_db)
    layers = calibration.model.num_layers
    measured = calibration.cost_model.kv_cache_dtype_terms["fp8"]
    bf16 = [t for t in calibration.cost_model.terms if t.name.startswith("decode attention")]
    assert measured.replaces == [t.name for t in bf16]
    fitted = {t.feature: t.seconds_per_unit for t in measured.terms}
    for feature, value in zip(
        ("decode_step", "decode_sequence", "decode_context_token"), DECODE_FP8
    ):
        assert fitted[feature] == pytest.approx(value * layers, rel=1e-6)
    assert {t.label for t in measured.terms} == {"fitted"}
    rng = np.random.default_rng()  # fresh decode batches each run
    shape = StepShape(
        decode_context_lens=tuple(int(c) for c in rng.integers(1, 16384, int(rng.integers(1, 512))))
    )
    expected_s = layers * (
        DECODE_FP8[0]
        + DECODE_FP8[1] * shape.num_decode_seqs
        + DECODE_FP8[2] * sum(shape.decode_context_lens)
    )
    for name in ("fp8", "fp8_e4m3"):
        parts = CostModel.from_calibration(kv_cache_calibration(calibration, name)).explain(shape)
        decode_s = sum(s for term, s in parts.items() if term.startswith("decode attention"))
        assert decode_s == pytest.approx(expected_s, rel=1e-5)
    without = calibration.model_copy(
        update={
            "cost_model": calibration.cost_model.model_copy(update={"kv_cache_dtype_terms": {}})
        }
    )
    for source, name in ((calibration, "int8"), (without, "fp8")):
        derived = kv_cache_calibration(source, name).cost_model.terms
        read = [t for t in derived if t.feature == "decode_context_token"]
        assert len(read) == 1 and read[0].label == "derived" and "× 0.5 (KV bytes" in read[0].name
        assert read[0].seconds_per_unit == pytest.approx(DECODE[2] * layers * 0.5, rel=1e-6)
        per_sequence = [t for t in derived if t.feature == "decode_sequence"]
        assert per_sequence[0].seconds_per_unit == pytest.approx(DECODE[1] * layers, rel=1e-6)
    # the swap refuses variant terms that name a term the calibration does not have
    stray = measured.model_copy(update={"replaces": [*measured.replaces, "no such term"]})
    with pytest.raises(ValueError, match="no such term"):
        stray.swapped_into(calibration.cost_model.terms, "test")
