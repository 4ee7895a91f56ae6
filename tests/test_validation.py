"""`surgeplan validate`: end to end on a small trace, the error arithmetic on hand-made records, and
one clear error per bad input."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simulator.validation.compare import (
    absolute_errors_ms,
    noise_floor,
    relative_errors,
    summary_of,
    verdicts,
)
from simulator.validation.workload import LADDER, at_load, ladder_requests
from traces import Trace
from traces.replay import RequestRecord

ROOT = Path(__file__).resolve().parents[1]


def _record(i, ttft, e2e, output=11):
    return RequestRecord(
        index=i,
        tenant="t",
        arrival_s=float(i),
        prompt_tokens=10,
        expected_output_tokens=output,
        status="ok",
        output_tokens=output,
        ttft_s=ttft,
        e2e_s=e2e,
        queue_s=ttft / 2,
    )


def test_error_arithmetic_on_hand_made_records():
    measured = summary_of(
        [_record(0, 0.10, 1.10), _record(1, 0.30, 1.30)], duration_s=2.0, kv_utilization=0.9
    )
    simulated = summary_of(
        [_record(0, 0.11, 1.21), _record(1, 0.33, 1.43)], duration_s=2.0, kv_utilization=0.9
    )
    assert measured["ttft_mean_s"] == pytest.approx(0.2) and measured[
        "tpot_mean_s"
    ] == pytest.approx(0.1)
    errors = relative_errors(measured, simulated)
    assert errors["ttft_mean_s"] == pytest.approx(0.1)  # every TTFT 10% longer
    assert errors["tpot_mean_s"] == pytest.approx(0.1)  # (e2e − ttft) 10% longer too
    assert errors["throughput_rps"] == 0.0 and errors["kv_utilization"] == 0.0
    assert errors["preemptions"] is None  # measured 0: no relative error
    small = absolute_errors_ms(measured, simulated)
    assert (
        set(small) == {"queue_mean_s"}
        or "queue_mean_s" not in small
        or small["queue_mean_s"] == pytest.approx(10.0)
    )
    floor = noise_floor(measured, simulated)
    assert verdicts(errors, floor)["ttft_mean_s"] == "below noise"
    assert verdicts(errors, {key: 0.01 for key in floor})["ttft_mean_s"] == "+10.0%"


def test_load_levels_rescale_the_arrivals():
    arrival = np.arange(11, dtype=float)  # 1 request/s
    offsets, rate = at_load(arrival, capacity_rps=4.0, load=0.5)
    assert rate == 2.0 and offsets[-1] == pytest.approx(5.0)
    with pytest.raises(ValueError, match="load level 0"):
        at_load(arrival, 4.0, 0.0)


def _trace(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    n = 16
    return Trace(
        np.sort(rng.uniform(0, 5, n)), rng.integers(8, 40, n), rng.integers(6, 14, n)
    ).save(tmp_path / "t.jsonl")


def _validate(*args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "surgeplan_cli", "validate", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_validate_runs_end_to_end_and_writes_its_json(tmp_path):
    out = tmp_path / "v.json"
    done = _validate(
        "--trace",
        str(_trace(tmp_path)),
        "--num-requests",
        "16",
        "--max-prompt-tokens",
        "32",
        "--max-output-tokens",
        "12",
        "--load-levels",
        "0.5",
        "--profile",
        "none",
        "--repeats",
        "2",
        "--num-kv-blocks",
        "64",
        "--save-steps",
        str(tmp_path / "steps.json"),
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    level = result["levels"][0]
    assert (
        level["load"] == 0.5
        and level["measured"]["completed"] == level["simulated"]["completed"] == 16
    )
    assert (
        set(level["relative_error"]) == set(level["noise_floor"])
        and "ttft_p99_s" in level["relative_error"]
    )
    assert result["calibration"]["workload"]["label"] == "measured" and result["machine"]["python"]
    assert "load 50%" in done.stdout
    assert len(level["measured_repeats"]) == 2 and level["measured"][
        "ttft_mean_s"
    ] == pytest.approx(sum(repeat["ttft_mean_s"] for repeat in level["measured_repeats"]) / 2)
    # both repeats pooled against one simulated run
    assert (
        len(level["distributions"]["measured"]["e2e_s"])
        == 2 * len(level["distributions"]["simulated"]["e2e_s"])
        == 32
    )
    assert (
        len(level["error_sources"]["live_over_model_step_time"]) == 2
        and "error sources:" in done.stdout
    )
    speed = level["at_run_speed"]
    assert speed["speed_factors"] == level["error_sources"]["live_over_model_step_time"]
    assert (
        set(speed["relative_error"]) == set(level["relative_error"]) and "at speed" in done.stdout
    )
    steps = json.loads((tmp_path / "steps.json").read_text())[
        "steps"
    ]  # a first prefill-only step per run:
    assert sum(1 for step in steps if not step["shape"]["decode_context_lens"]) >= 1 + len(
        LADDER
    )  # capacity + ladder
    fitted = subprocess.run(
        [
            sys.executable,
            "-m",
            "surgeplan_cli",
            "profile",
            "--from-steps",
            str(tmp_path / "steps.json"),
            "--out",
            str(tmp_path / "c.json"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert fitted.returncode == 0, fitted.stderr
    assert json.loads((tmp_path / "c.json").read_text())["cost_model"]["terms"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--trace", "/nonexistent/trace.csv"], "cannot read it as a trace"),
        (["--load-levels", "0.5,0"], "load level 0"),
        (
            [
                "--calibration",
                str(ROOT / "simulator/calibration/calibrations/llama-2-7b_on_a100-80gb-tp1.json"),
            ],
            "made for model 'llama-2-7b'",
        ),
    ],
)
def test_bad_inputs_get_clear_errors(tmp_path, args, message):
    base = [
        "--trace",
        str(_trace(tmp_path)),
        "--num-requests",
        "4",
        "--max-prompt-tokens",
        "16",
        "--max-output-tokens",
        "2",
        "--profile",
        "none",
        "--repeats",
        "1",
        "--num-kv-blocks",
        "32",
    ]
    done = _validate(*base, *args)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_error_sources_are_measured_from_the_step_log():
    from sim_helpers import cost_model

    from engine.core.step_shape import StepShape
    from simulator.calibration.live_run import LiveRun, StepLog
    from simulator.calibration.schema import ShapeRecord
    from simulator.validation.error_sources import describe, error_sources

    model = cost_model(0.010)  # every step: 10 ms
    shape = ShapeRecord.of(StepShape(decode_context_lens=(5, 9)))

    def run(busy, step, gc_s):
        log = StepLog(shapes=[shape] * len(step), step_s=step, busy_s=busy)
        return LiveRun([], log, 1.0, 0.9, 0, gc_s=gc_s)

    fast = run([0.012, 0.010, None], [0.011, 0.009, 0.010], gc_s=0.0016)  # busy 32 ms, step() 30 ms
    slow = run([0.015, 0.012, None], [0.014, 0.011, 0.009], gc_s=0.0)  # busy 36 ms
    sources = error_sources([fast, slow], model)
    assert sources["host_overhead_share"][0] == pytest.approx(2 / 32)
    assert sources["gc_share"] == [pytest.approx(0.05), 0.0]
    assert sources["live_over_model_step_time"] == [pytest.approx(32 / 30), pytest.approx(36 / 30)]
    assert sources["cpu_variance"] == pytest.approx(36 / 32 - 1)
    assert "repeats differ by 12.5%" in describe(sources)
    assert error_sources([run([], [], 0.0)], model) is None and "not measured" in describe(None)


def test_batch_ladder_sends_groups_of_growing_size_all_at_once_wrapping_around_the_trace():
    prompt, output = np.arange(10, 15), np.arange(1, 6)
    groups = ladder_requests(prompt, output, (1, 2, 4))
    assert [len(group.arrival_s) for group in groups] == [1, 2, 4]
    assert all(not any(group.arrival_s) for group in groups)
    assert list(groups[2].prompt_tokens) == [13, 14, 10, 11] and list(groups[2].output_tokens) == [
        4,
        5,
        1,
        2,
    ]
    assert LADDER == tuple(sorted(LADDER))


def test_mean_by_key_averages_repeats_and_keeps_unknowns_unknown():
    from simulator.validation.compare import mean_by_key

    assert mean_by_key([{"a": 1.0, "b": None}, {"a": 3.0, "b": 2.0}]) == {"a": 2.0, "b": None}


def test_at_run_speed_removes_a_uniform_host_slowdown_exactly():
    """A 'live' run that is the simulator at 1.15x step times: plain error large, error at run speed zero."""
    from types import SimpleNamespace

    from simulator.calibration.cost_model import scaled_calibration
    from simulator.calibration.live_run import LiveRequests
    from simulator.calibration.schema import EngineSettings, resolve_calibration
    from simulator.validation.simulated_run import at_run_speed, simulate_like

    calibration = resolve_calibration("llama-2-7b@A100-80GB-tp1")
    live = SimpleNamespace(
        settings=EngineSettings(
            block_size=16,
            max_num_seqs=8,
            max_num_batched_tokens=256,
            max_model_len=512,
            enable_prefix_caching=False,
        ),
        num_kv_blocks=64,
    )
    rng = np.random.default_rng(3)
    requests = LiveRequests(
        np.sort(rng.uniform(0, 0.3, 24)), rng.integers(20, 200, 24), rng.integers(5, 60, 24)
    )
    slow = summary_of(*simulate_like(live, scaled_calibration(calibration, 1.15), requests))
    plain = relative_errors(slow, summary_of(*simulate_like(live, calibration, requests)))
    speed = at_run_speed(
        live, calibration, requests, [slow], {"live_over_model_step_time": [1.15]}, None
    )
    assert plain["e2e_mean_s"] < -0.1
    assert all(error is None or abs(error) < 1e-9 for error in speed["relative_error"].values())
    assert (
        at_run_speed(live, calibration, requests, [slow], None, None) is None
    )  # the HTTP path: no step log


def test_speed_range_within_a_run_comes_from_time_windows():
    from simulator.validation.error_sources import MIN_WINDOW_STEPS, WINDOW_S, window_speed_range

    n = MIN_WINDOW_STEPS
    starts = [i * WINDOW_S / n for i in range(3 * n)]  # three windows of n steps
    busy = [0.010] * n + [0.015] * n + [0.012] * n
    assert window_speed_range(starts, busy, [0.010] * (3 * n)) == [
        pytest.approx(1.0),
        pytest.approx(1.5),
    ]
    assert window_speed_range(starts[:n], busy[:n], [0.010] * n) is None  # one window: no range
    assert (
        window_speed_range(starts[: n + 3], busy[: n + 3], [0.010] * (n + 3)) is None
    )  # a 3-step window is ignored
    assert window_speed_range([], busy, busy) is None  # a log without start times
    from simulator.validation.error_sources import describe

    sources = {
        "host_overhead_share": [0.0],
        "gc_share": [0.0],
        "live_over_model_step_time": [1.2],
        "cpu_variance": None,
        "window_speed_range": [window_speed_range(starts, busy, [0.010] * (3 * n))],
    }
    assert "10-s windows within a run ranged 1.00x to 1.50x" in describe(sources)


def test_validate_over_http_measures_the_servers_steps(tmp_path):
    """`--via http`: surgeplan serve + the replay client; the server's step window gives the workload
    fit, the error sources (its engine thread's time between steps) and the error at run speed."""
    out = tmp_path / "h.json"
    done = _validate(
        "--trace",
        str(_trace(tmp_path)),
        "--num-requests",
        "8",
        "--max-prompt-tokens",
        "24",
        "--max-output-tokens",
        "6",
        "--load-levels",
        "0.6",
        "--profile",
        "none",
        "--repeats",
        "2",
        "--num-kv-blocks",
        "64",
        "--via",
        "http",
        "--out",
        str(out),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    level = result["levels"][0]
    assert result["engine"]["via"] == "http" and level["used_calibration"] == "workload"
    assert level["measured"]["completed"] == level["simulated"]["completed"] == 8
    sources = level["error_sources"]
    assert len(sources["live_over_model_step_time"]) == 2 and all(
        sources["live_over_model_step_time"]
    )
    assert all(0 <= share < 1 for share in sources["host_overhead_share"]) and level["at_run_speed"]


def test_full_profile_is_sized_to_the_validated_engine():
    from simulator.calibration.schema import EngineSettings
    from simulator.validation.validate import grid_calibration

    settings = EngineSettings(
        block_size=16,
        max_num_seqs=4,
        max_num_batched_tokens=64,
        max_model_len=128,
        enable_prefix_caching=False,
    )
    grid = grid_calibration("cpu-small", None, "full", 0, settings)
    shapes = [point.shape.to_shape() for point in grid.points]
    assert max(shape.num_decode_seqs for shape in shapes) == settings.max_num_seqs
    assert max(shape.num_prefill_tokens for shape in shapes) == settings.max_num_batched_tokens
    assert grid.cost_model.fit_errors and grid.label == "measured"
    with pytest.raises(ValueError, match="expected quick, full or none"):
        grid_calibration("cpu-small", None, "huge", 0, settings)
