"""Physical bounds on kernel models (`plausibility`): every shipped GPU calibration within its GPU's
peaks; a term planted past them flagged and one below not (fresh random factors each run); the
aiconfigurator importer refusing a decode table that reads faster than the GPU's HBM, and dropping
an fp8-KV decode table that does, so that dtype's decode is derived by its bytes."""

import numpy as np
import pytest
from aic_fixture import DECODE, write_fixture_db

from simulator.calibration import shipped
from simulator.calibration.aic_import import aic_calibration
from simulator.calibration.kv_cache import kv_cache_calibration
from simulator.calibration.plausibility import (
    KV_READ_LIMIT,
    implausible_terms,
    kv_read_rates,
    linear_peak_shares,
    prefill_attention_shares,
)
from simulator.calibration.shipped import load_all_shipped
from simulator.calibration.vidur_import import VIDUR_DIR
from simulator.hardware.catalog import get_hardware

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

DECODE_TABLE = "h200_sxm/attention/vllm/0.24.0/generation_attention_perf.parquet"


def _gpu_calibrations():
    return [c for c in load_all_shipped() if c.cost_model is not None and c.device.kind == "gpu"]


def test_every_shipped_gpu_calibration_is_within_its_gpus_peaks():
    calibrations = _gpu_calibrations()
    assert len(calibrations) >= 80
    for calibration in calibrations:
        assert implausible_terms(calibration) == [], calibration.name
        assert kv_read_rates(calibration), calibration.name  # every one has a KV read to check
        read, compute = linear_peak_shares(calibration)
        assert 0 < read <= 1 and 0 < compute <= 1, calibration.name


def _scaled(calibration, picked, factor: float):
    """`calibration` with the terms `picked(term)` selects `factor` times as long."""
    fit = calibration.cost_model
    terms = [
        t.model_copy(update={"seconds_per_unit": t.seconds_per_unit * factor}) if picked(t) else t
        for t in fit.terms
    ]
    return calibration.model_copy(update={"cost_model": fit.model_copy(update={"terms": terms})})


def test_a_term_faster_than_the_gpu_is_flagged_and_one_slower_is_not():
    rng = np.random.default_rng()  # a fresh calibration and factors each run
    calibrations = [c for c in _gpu_calibrations() if c.provenance.backend]
    calibration = calibrations[int(rng.integers(len(calibrations)))]
    peak = get_hardware(calibration.device.hardware).memory_bandwidth_bytes_per_s
    term, rate = next(
        (t, r) for t, r in kv_read_rates(calibration) if t in calibration.cost_model.terms
    )

    def kv_read(t):
        return t.name == term.name

    for share, flagged in ((rng.uniform(1.2, 3.0), True), (rng.uniform(0.5, 1.1), False)):
        planted = _scaled(calibration, kv_read, rate / (share * peak))
        found = implausible_terms(planted)
        assert bool(found) == flagged, (calibration.name, share, found)
        if flagged:
            assert f"{share:.0%} of the" in found[0] and "HBM peak" in found[0]
    read, _ = linear_peak_shares(calibration)
    share = rng.uniform(1.1, 2.0)
    planted = _scaled(calibration, lambda t: t.name.startswith("linear layers"), read / share)
    assert linear_peak_shares(planted)[0] == pytest.approx(share, rel=1e-9)
    assert any("read their weights" in f for f in implausible_terms(planted))
    attention = prefill_attention_shares(calibration)
    assert attention and all(0 < share <= 1 for _, share in attention)
    share = rng.uniform(1.1, 3.0)
    planted = _scaled(
        calibration, lambda t: t.feature == "prefill_attention_pair", attention[0][1] / share
    )
    assert prefill_attention_shares(planted)[0][1] == pytest.approx(share, rel=1e-9)
    assert any("computes at" in f for f in implausible_terms(planted))


def _speed_up_decode_rows(root, kv_cache_dtype: str, factor: float) -> None:
    path = root / DECODE_TABLE
    rows = pq.read_table(path).to_pylist()
    for row in rows:
        if row["kv_cache_dtype"] == kv_cache_dtype:
            row["latency"] /= factor
    pq.write_table(pa.Table.from_pylist(rows), path)


def test_the_importer_refuses_a_decode_table_faster_than_the_hbm(tmp_path):
    rng = np.random.default_rng()
    root = write_fixture_db(tmp_path / "data")
    # the fixture's decode reads at 85% of the H200's peak; sped up past the limit
    factor = rng.uniform(1.5, 4.0)
    _speed_up_decode_rows(root, "bfloat16", factor)
    with pytest.raises(ValueError, match="HBM peak") as refused:
        aic_calibration("llama-3-8b", "H200-141GB", 1, "vllm", root=root)
    assert DECODE_TABLE.split("/0.24.0/")[0] in str(refused.value)
    assert f"at most {KV_READ_LIMIT:.0%}" in str(refused.value)


def test_an_fp8_decode_table_faster_than_the_hbm_is_dropped_and_fp8_derived(tmp_path):
    rng = np.random.default_rng()
    root = write_fixture_db(tmp_path / "data")
    _speed_up_decode_rows(root, "fp8", rng.uniform(1.5, 4.0))
    calibration = aic_calibration("llama-3-8b", "H200-141GB", 1, "vllm", root=root)
    assert "fp8" not in calibration.cost_model.kv_cache_dtype_terms
    assert any("fp8 KV decode table not used" in n for n in calibration.provenance.notes)
    derived = kv_cache_calibration(calibration, "fp8").cost_model.terms
    read = [t for t in derived if t.feature == "decode_context_token"]
    layers = calibration.model.num_layers
    assert len(read) == 1 and read[0].label == "derived"
    assert read[0].seconds_per_unit == pytest.approx(DECODE[2] * layers * 0.5, rel=1e-6)
    # the untouched fixture keeps its measured fp8 table
    kept = aic_calibration(
        "llama-3-8b", "H200-141GB", 1, "vllm", root=write_fixture_db(tmp_path / "b")
    )
    assert "fp8" in kept.cost_model.kv_cache_dtype_terms


@pytest.mark.skipif(not VIDUR_DIR.is_dir(), reason="Vidur's public tables (../shared) not present")
def test_the_public_table_build_refuses_a_calibration_faster_than_its_gpu(tmp_path, monkeypatch):
    """`build_shipped` holds what it writes to the same bounds: one Vidur fit (a random one after
    the first) whose KV read is planted 2-5x faster than the derived 82% of bandwidth is refused,
    and nothing is half-written."""
    rng = np.random.default_rng()
    factor = rng.uniform(2.0, 5.0)
    planted = shipped.FITTED[int(rng.integers(1, len(shipped.FITTED)))]
    real = shipped.vidur_calibration

    def too_fast(model, gpu, tensor_parallel, *rest):
        fitted = real(model, gpu, tensor_parallel, *rest)
        if (model, gpu, tensor_parallel) != planted:
            return fitted
        return _scaled(fitted, lambda t: t.feature == "decode_context_token", 1 / factor)

    monkeypatch.setattr(shipped, "vidur_calibration", too_fast)
    with pytest.raises(ValueError, match="HBM peak"):
        shipped.build_shipped(tmp_path)
    assert not list(tmp_path.glob("*.json"))
