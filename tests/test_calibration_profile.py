"""The quick CPU profile of `cpu-small` through `surgeplan profile`, and its fit on held-out points.

Profiling uses one torch thread and fits each point's fastest repeat: on a shared 2-core CI host
other jobs add time to some repeats (never remove it), and a two-thread step stalls whenever
either core is taken, so the minimum of single-threaded repeats is the reproducible measurement."""

import statistics

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from simulator.calibration.cost_fit import fit_calibration, fit_cost_model, points_for_fit
from simulator.calibration.cost_model import CostModel
from simulator.calibration.profile_command import profile_command
from simulator.calibration.profile_grid import ProfileGrid
from simulator.calibration.schema import Calibration

ERROR_TARGET = 0.05


def min_statistic_noise(calibration: Calibration, grid: ProfileGrid) -> float:
    """How reproducible each point's fastest repeat is on this host: the mean, over points, of how far
    the median pass's fastest repeat lies above the fastest of all passes. A fit on these minima cannot
    be judged more finely than this."""
    gaps = []
    for point in calibration.points:
        totals = point.totals
        minima = [
            min(totals[start : start + grid.repeats])
            for start in range(0, len(totals), grid.repeats)
        ]
        gaps.append(statistics.median(minima) / min(minima) - 1)
    return statistics.mean(gaps)


@pytest.fixture(scope="module")
def quick_profile(tmp_path_factory) -> Calibration:
    out = tmp_path_factory.mktemp("profile") / "cpu-small.json"
    app = typer.Typer()
    app.command()(profile_command)
    result = CliRunner().invoke(
        app,
        [
            "--model",
            "cpu-small",
            "--quick",
            "--device",
            "cpu",
            "--dtype",
            "float32",
            "--threads",
            "1",
            "--statistic",
            "min",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "held out" in result.output
    return Calibration.load(out)


def test_quick_profile_covers_every_kind_of_step(quick_profile):
    grid = ProfileGrid.quick()
    assert len(quick_profile.points) == grid.num_points
    by_kind = {}
    for point in quick_profile.points:
        by_kind.setdefault(point.kind, []).append(point.shape.to_shape())
        assert len(point.samples) == grid.repeats * grid.passes and all(
            s.total_s >= s.forward_s > 0 for s in point.samples
        )
    batches = sorted(shape.num_decode_seqs for shape in by_kind["decode"])
    assert batches == sorted(grid.decode_batches * len(grid.decode_contexts))
    assert sorted(shape.num_prefill_tokens for shape in by_kind["prefill"]) == sorted(
        grid.prefill_chunks
    )
    # the prefix cache served the prefix: only the new chunk was computed
    prefix = max(grid.cached_prefixes)
    cached_chunks = sorted(shape.prefill_chunks[0] for shape in by_kind["prefill_cached"])
    assert cached_chunks == [(chunk, prefix) for chunk in grid.prefill_chunks]
    assert all(
        shape.num_decode_seqs == 4 and shape.num_prefill_tokens in grid.mixed_chunks
        for shape in by_kind["mixed"]
    )
    for context in grid.decode_contexts:  # every decode batch was timed at (about) its grid context
        limit = context + grid.decode_tokens_needed(context)
        near = [
            shape
            for shape in by_kind["decode"]
            if context <= min(shape.decode_context_lens) and max(shape.decode_context_lens) <= limit
        ]
        assert sorted(shape.num_decode_seqs for shape in near) == sorted(grid.decode_batches)


def test_calibration_records_device_software_and_settings(quick_profile):
    assert quick_profile.label == "measured" and quick_profile.device.kind == "cpu"
    assert (
        quick_profile.software.torch
        and quick_profile.model.name == "cpu-small"
        and quick_profile.dtype == "float32"
    )
    assert quick_profile.engine.enable_prefix_caching
    assert quick_profile.engine.max_num_seqs == max(ProfileGrid.quick().decode_batches) + 1
    assert all(term.label == "fitted" for term in quick_profile.cost_model.terms)


@pytest.mark.parametrize("enforce_eager", [True, False])
def test_enforce_eager_reaches_the_profiled_engine(enforce_eager):
    """`profile --enforce-eager` times the engine as `serve --enforce-eager` runs it; a CPU has no
    CUDA graphs either way."""
    from simulator.calibration.profile import Profiler

    profiler = Profiler(
        "cpu-small", ProfileGrid.quick(), device="cpu", dtype="float32", enforce_eager=enforce_eager
    )
    assert profiler.engine.config.enforce_eager is enforce_eager
    assert profiler.engine.model_runner.decode_graphs is None


def test_quick_profile_fit_meets_the_error_target_on_held_out_points(quick_profile):
    """The 5% target holds up to this host's own noise on the same points, measured in this run
    (on a quiet host about 4% held out against 5-7% noise; a busy 2-core CI host adds both)."""
    error = quick_profile.cost_model.fit_errors[0]
    assert error.folds == 5 and error.num_points == len(quick_profile.points)
    noise = min_statistic_noise(quick_profile, ProfileGrid.quick())
    assert error.mape_cross_validated <= ERROR_TARGET + noise, (error, noise)
    model = CostModel.from_calibration(quick_profile)
    for point in quick_profile.points:  # bigger steps cost more, as measured
        assert model.step_time(point.shape.to_shape()) > 0


def test_fit_recovers_step_times_the_model_can_express_on_the_profiled_shapes(quick_profile):
    """Free of host noise: times the fitted model itself predicts, with ±3% multiplicative noise,
    are refitted to within the 5% target on held-out points."""
    shapes, _ = points_for_fit(quick_profile.points, "min")
    exact = CostModel.from_calibration(quick_profile).step_times(shapes)
    noisy = exact * (1 + np.random.default_rng(0).uniform(-0.03, 0.03, size=len(exact)))
    assert fit_cost_model(shapes, exact).fit_errors[0].mape_train <= 0.01
    assert fit_cost_model(shapes, noisy).fit_errors[0].mape_cross_validated <= ERROR_TARGET


def test_wall_time_fit_is_reported_alongside(quick_profile):
    wall = fit_calibration(quick_profile, statistic="median").cost_model.fit_errors[0]
    assert "median" in wall.target and wall.mape_cross_validated is not None


def test_full_grids_give_the_engine_room_for_every_point():
    for limits in ((8, 128, 512), (64, 1024, 2048), (256, 4096, 8192)):
        grid = ProfileGrid.full(*limits)
        settings = grid.engine_settings()
        assert settings.max_num_seqs > max(
            grid.decode_batches
        )  # a mixed step's prompt is never left waiting
        assert settings.max_num_batched_tokens >= max(grid.mixed_batches) + max(grid.mixed_chunks)
        assert settings.max_num_batched_tokens >= max(grid.prefill_chunks) == limits[1]
        for context in grid.decode_contexts:
            assert context + grid.decode_tokens_needed(context) <= settings.max_model_len
        assert (
            grid.num_kv_blocks() * grid.block_size
            >= max(grid.decode_batches) * settings.max_model_len
        )
