"""The calibration file: JSON round trip, errors that name the file, and the shipped set."""

import json

import numpy as np
import pytest

from simulator.calibration.schema import (
    Calibration,
    CostModelFit,
    CostTerm,
    DeviceInfo,
    EngineSettings,
    FitError,
    ProfilePoint,
    Provenance,
    ShapeRecord,
    SoftwareInfo,
    StepSample,
    load_shipped,
    resolve_calibration,
    shipped_calibration_paths,
)
from simulator.model_spec import ModelSpec


def _random_calibration(rng) -> Calibration:
    points = []
    for _ in range(int(rng.integers(3, 8))):
        shape = ShapeRecord(
            prefill_chunks=[(int(rng.integers(1, 512)), int(rng.integers(0, 512)))],
            decode_context_lens=[
                int(c) for c in rng.integers(1, 2048, size=int(rng.integers(0, 9)))
            ],
        )
        samples = [
            StepSample(
                shape=shape,
                total_s=float(t),
                schedule_s=float(t) * 0.01,
                prepare_s=float(t) * 0.02,
                forward_s=float(t) * 0.9,
                sample_s=float(t) * 0.03,
                cpu_s=float(t) * 1.5,
            )
            for t in rng.uniform(1e-3, 1e-1, size=3)
        ]
        points.append(
            ProfilePoint(
                kind="mixed" if shape.decode_context_lens else "prefill",
                shape=shape,
                samples=samples,
            )
        )
    term = CostTerm(
        name="per step",
        feature="step",
        seconds_per_unit=float(rng.uniform(0, 1e-2)),
        bound="host",
        label="fitted",
        note="ünïcode note",
    )
    return Calibration(
        name="cpu-small@test",
        label="measured",
        device=DeviceInfo(name="cpu", kind="cpu", memory_bytes=8e9),
        software=SoftwareInfo.current(),
        model=ModelSpec.from_preset("cpu-small"),
        dtype="float32",
        engine=EngineSettings(
            block_size=16, max_num_seqs=8, max_num_batched_tokens=256, max_model_len=512
        ),
        points=points,
        cost_model=CostModelFit(
            knee_tokens=float(rng.uniform(1, 64)),
            knee_label="fitted",
            terms=[term],
            fit_errors=[FitError(target="t", num_points=5, mape_train=0.02, max_ape=0.1)],
        ),
        provenance=Provenance(source="test", method="random", notes=["seeded"]),
    )


def test_json_round_trip_is_exact(tmp_path):
    rng = np.random.default_rng(3)
    for index in range(5):
        calibration = _random_calibration(rng)
        loaded = Calibration.load(calibration.save(tmp_path / f"c{index}.json"))
        assert loaded == calibration
        assert loaded.points[0].shape.to_shape() == calibration.points[0].shape.to_shape()
        assert loaded.points[0].median_total_s == calibration.points[0].median_total_s


def test_point_statistics():
    rng = np.random.default_rng(4)
    point = _random_calibration(rng).points[0]
    totals = sorted(point.totals)
    assert point.median_total_s == totals[1] and point.statistic_s("min") == totals[0]
    assert point.spread == pytest.approx((totals[-1] - totals[0]) / totals[1])
    with pytest.raises(ValueError, match="expected 'median', 'min' or 'cpu'"):
        point.statistic_s("mean")


def test_load_errors_name_the_file(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="broken.json: cannot read"):
        Calibration.load(broken)
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema_version": 0}))
    with pytest.raises(ValueError, match="old.json: schema_version is 0; expected 1"):
        Calibration.load(old)
    invalid = tmp_path / "invalid.json"
    data = json.loads(_random_calibration(np.random.default_rng(1)).model_dump_json())
    data["label"] = "guessed"
    invalid.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="invalid.json: not a valid calibration"):
        Calibration.load(invalid)


REQUIRED_SHIPPED = [
    "llama-2-7b@A100-80GB-tp1",
    "llama-2-7b@H100-80GB-tp1",
    "codellama-34b@A100-80GB-tp2",
    "codellama-34b@H100-80GB-tp2",
    "llama-2-70b@A100-80GB-tp4",
    "llama-2-70b@A100-80GB-tp8",
    "llama-2-70b@H100-80GB-tp4",
    "llama-2-70b@H100-80GB-tp8",
    "llama-3-8b@A100-80GB-tp1",
    "llama-3-70b@A100-80GB-tp4",
    "llama-2-7b@H200-141GB-tp1",
    "llama-2-70b@H200-141GB-tp8",
    "codellama-34b@H200-141GB-tp2",
]


def test_shipped_calibrations_are_complete_and_labelled():
    shipped = {c.name: c for c in map(Calibration.load, shipped_calibration_paths())}
    assert set(REQUIRED_SHIPPED) <= set(shipped)
    for calibration in shipped.values():
        assert (
            calibration.cost_model is not None
            and calibration.provenance.source
            and not calibration.points
        )
        labels = {term.label for term in calibration.cost_model.terms}
        if calibration.label == "fitted":
            assert "fitted" in labels and calibration.cost_model.fit_errors
            first = calibration.cost_model.fit_errors[0]
            # one table's fit within 5%; a whole step of measured kernels (aiconfigurator) within 10%
            assert first.mape_train <= (
                0.10 if first.target.startswith("step kernel time") else 0.05
            )
        else:
            assert labels == {"derived"}
    assert any(c.provenance.method == "roofline" for c in shipped.values())


def test_shipped_calibrations_are_found_by_name_or_file():
    assert load_shipped("llama-2-7b@A100-80GB-tp1") == load_shipped("llama-2-7b_on_a100-80gb-tp1")
    assert resolve_calibration(shipped_calibration_paths()[0]).name
    with pytest.raises(ValueError, match="is not shipped; expected one of"):
        load_shipped("gpt-5@TPU")
