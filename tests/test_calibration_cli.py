"""`surgeplan calibrations ...` through typer's runner, on shipped files and a synthetic measurement."""

import numpy as np
from typer.testing import CliRunner

from engine.core.step_shape import StepShape
from simulator.calibration.cli import app
from simulator.calibration.cost_model import PROFILE_TERMS, CostModel
from simulator.calibration.plausibility import linear_peak_shares
from simulator.calibration.schema import (
    Calibration,
    CostModelFit,
    CostTerm,
    DeviceInfo,
    ProfilePoint,
    Provenance,
    ShapeRecord,
    StepSample,
    load_shipped,
)
from simulator.calibration.vidur_import import VIDUR_DIR
from simulator.model_spec import ModelSpec

runner = CliRunner(env={"COLUMNS": "250"})


def _synthetic_measurement(rng) -> Calibration:
    """Points timed by a known physical model plus 1% noise, shaped like a profile's output."""
    values = {
        "step": 0.012,
        "gemm_step": 3e-3,
        "gemv_extra_token": 0.0,
        "token_above_spill": 0.0,
        "sequence": 4e-4,
        "token": 6e-5,
        "token_above_knee": 3e-4,
        "prefill_attention_pair": 2e-8,
        "decode_context_token": 3e-6,
        "decode_step": 2e-3,
        "prefill_step": 1e-3,
    }
    truth = CostModel(
        CostModelFit(
            knee_tokens=40,
            knee_label="derived",
            terms=[
                CostTerm(
                    name=name,
                    feature=feature,
                    seconds_per_unit=values[feature],
                    bound=bound,
                    label="derived",
                )
                for feature, (name, bound) in PROFILE_TERMS.items()
            ],
        )
    )
    points = []
    for _ in range(30):
        shape = StepShape(
            prefill_chunks=((int(rng.integers(1, 512)), int(rng.integers(0, 3)) * 128),),
            decode_context_lens=tuple(
                int(c) for c in rng.integers(16, 1024, size=int(rng.integers(0, 16)))
            ),
        )
        record = ShapeRecord.of(shape)
        samples = [
            StepSample(
                shape=record,
                total_s=truth.step_time(shape) * (1 + float(rng.normal(0, 0.01))),
                schedule_s=1e-4,
                prepare_s=1e-4,
                forward_s=truth.step_time(shape) * 0.9,
                sample_s=1e-4,
            )
            for _ in range(3)
        ]
        points.append(
            ProfilePoint(
                kind="mixed" if shape.decode_context_lens else "prefill",
                shape=record,
                samples=samples,
            )
        )
    return Calibration(
        name="cpu-small@synthetic",
        label="measured",
        model=ModelSpec.from_preset("cpu-small"),
        dtype="float32",
        device=DeviceInfo(name="cpu", kind="cpu", memory_bytes=8e9),
        points=points,
        provenance=Provenance(source="test", method="planted model + noise"),
    )


def test_list_shows_every_shipped_calibration_with_its_label():
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 0, result.output
    assert (
        "llama-2-70b_on_h100-80gb-tp8" in result.output
        and "fitted" in result.output
        and "derived" in result.output
    )


def test_show_prints_terms_labels_and_example_times():
    result = runner.invoke(app, ["show", "llama-2-7b@A100-80GB-tp1"])
    assert result.exit_code == 0, result.output
    for text in (
        "weight-read floor",
        "decode attention",
        "fitted",
        "derived",
        "prefill 2048 tokens",
        " ms",
    ):
        assert text in result.output
    # how near the A100's peaks the model runs (`plausibility`), as computed
    read, compute = linear_peak_shares(load_shipped("llama-2-7b@A100-80GB-tp1"))
    assert "against the A100-80GB's peaks (2039 GB/s HBM)" in " ".join(result.output.split())
    assert f"one sequence {read:.0%}, a 4,096-token prefill {compute:.0%}" in " ".join(
        result.output.split()
    )


def test_fit_refits_a_measurement_and_writes_a_plot(tmp_path):
    measured = _synthetic_measurement(np.random.default_rng(8)).save(tmp_path / "measured.json")
    plot = tmp_path / "fit.html"
    result = runner.invoke(app, ["fit", str(measured), "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    refitted = Calibration.load(measured)
    assert refitted.cost_model.fit_errors[0].mape_cross_validated < 0.05
    assert plot.stat().st_size > 1000 and "predicted vs measured" in plot.read_text()
    png = tmp_path / "fit.png"
    result = runner.invoke(app, ["fit", str(measured), "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    result = runner.invoke(app, ["fit", str(measured), "--plot", str(tmp_path / "fit.svg")])
    assert result.exit_code != 0 and "expected .html or .png" in result.output


def test_fit_refuses_a_file_without_points(tmp_path):
    empty = (
        _synthetic_measurement(np.random.default_rng(1))
        .model_copy(update={"points": []})
        .save(tmp_path / "e.json")
    )
    result = runner.invoke(app, ["fit", str(empty)])
    assert result.exit_code != 0 and "no measured points" in result.output


def test_roofline_and_build_write_calibrations(tmp_path):
    out = tmp_path / "l4.json"
    result = runner.invoke(app, ["roofline", "llama-3-8b", "L4", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert Calibration.load(out).provenance.method == "roofline"
    if VIDUR_DIR.exists():
        result = runner.invoke(app, ["build", "--out-dir", str(tmp_path / "built")])
        assert result.exit_code == 0, result.output
        assert len(list((tmp_path / "built").glob("*.json"))) >= 20
