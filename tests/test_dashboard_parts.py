"""The dashboard's parts without a page: widgets take bounds, help and choices from the pydantic fields
(and their kind from the field's type); chart builders are pure and draw what they are given; the
fleet arithmetic; the background job behind the live validation (progress, result, failure, cancel);
the page table; the `surgeplan dashboard` command line."""

from __future__ import annotations

import dataclasses
import time

import pytest
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from dashboard import jobs, views
from dashboard.charts.calibration import step_curves
from dashboard.charts.load import latency_vs_load
from dashboard.charts.timeline import timeline
from dashboard.charts.traffic import lengths, rate
from dashboard.charts.validation import validation_distributions
from dashboard.cli import streamlit_command
from dashboard.data import catalogs, scenarios
from dashboard.data.scenarios import LoadPoint
from engine.core.config import bounds
from simulator.fleet_spec import ClusterSpec
from simulator.scenario import SchedulerSettings
from simulator.summary import SimSummary


def test_widgets_take_bounds_help_and_choices_from_the_fields():
    def script() -> None:
        from dashboard import widgets as w
        from simulator.fleet_spec import ClusterSpec
        from simulator.scenario import SchedulerSettings

        w.number(ClusterSpec, "replicas", 3, "replicas", "replicas")
        w.number(SchedulerSettings, "max_num_seqs", 256, "seqs", "seqs")
        w.select(SchedulerSettings, "policy", "static", "policy", "policy")

    at = AppTest.from_function(script, default_timeout=60).run()
    assert not at.exception
    replicas, seqs = at.number_input(key="replicas"), at.number_input(key="seqs")
    assert (replicas.min, replicas.max, replicas.value) == (*bounds(ClusterSpec, "replicas"), 3)
    assert (seqs.min, seqs.max) == bounds(SchedulerSettings, "max_num_seqs")
    assert replicas.help == ClusterSpec.model_fields["replicas"].description
    policy = at.selectbox(key="policy")
    assert policy.options == ["continuous", "static"] and policy.value == "static"
    assert policy.help == SchedulerSettings.model_fields["policy"].description


def test_field_picks_the_widget_from_the_field_type():
    def script() -> None:
        from dashboard import widgets as w
        from simulator.scenario import SchedulerSettings

        for name in (
            "batch_controller",
            "enable_prefix_caching",
            "batch_target_tpot_s",
            "max_num_batched_tokens",
        ):
            w.field(SchedulerSettings, name, getattr(SchedulerSettings(), name), name, name)

    at = AppTest.from_function(script, default_timeout=60).run()
    assert not at.exception
    assert at.selectbox(key="batch_controller").options == ["fixed", "slo"]
    assert at.toggle(key="enable_prefix_caching").value is True
    assert (
        at.number_input(key="batch_target_tpot_s").value == SchedulerSettings().batch_target_tpot_s
    )
    assert (
        at.number_input(key="max_num_batched_tokens").max
        == bounds(SchedulerSettings, "max_num_batched_tokens")[1]
    )


def test_timeline_shades_each_cold_start_and_the_spike():
    scenario = scenarios.default_whatif()
    result, error = scenarios.run(scenario)
    assert error is None
    figure = timeline(result)
    names = {trace.name for trace in figure.data}
    assert {
        "offered",
        "served",
        "P99 TTFT",
        "waiting",
        "preemptions",
        "KV usage %",
        "serving",
        "starting (cold)",
    } <= names
    preemptions = next(trace for trace in figure.data if trace.name == "preemptions")
    assert list(preemptions.y) == [row["preemptions"] for row in result.timeseries]
    cold = [r for r in result.replicas if r["ready_at_s"] > r["requested_at_s"]]
    shaded = [shape for shape in figure.layout.shapes if shape.type == "rect"]
    assert len(cold) >= 1  # the default spike makes the autoscaler scale out
    assert len(shaded) >= len(cold) + 1  # each cold start in every row, plus the spike window
    assert not result.records  # per-request records are dropped from the cache


def _summary(**figures) -> SimSummary:
    """A simulation summary holding `figures` (every other figure 0)."""
    required = {
        f.name: 0 for f in dataclasses.fields(SimSummary) if f.default is dataclasses.MISSING
    }
    return SimSummary(**(required | figures))


def test_fleet_arithmetic():
    rows = [
        LoadPoint("continuous", 1.0, _summary(throughput_rps=0.98, meets_slo=True)),
        LoadPoint("continuous", 2.0, _summary(throughput_rps=1.9, meets_slo=True)),
        LoadPoint("continuous", 3.0, _summary(throughput_rps=2.4, meets_slo=False)),
    ]
    assert scenarios.capacity_rps(rows, slo_bound=True) == 1.9
    assert scenarios.capacity_rps(rows, slo_bound=False) == 2.4
    assert scenarios.capacity_rps(rows[2:], slo_bound=True) is None
    assert (
        scenarios.gpus_needed(100.0, 2.5, 2) == 80 and scenarios.gpus_needed(100.0, None, 1) is None
    )


def test_other_builders_draw_what_they_are_given():
    rows = [
        LoadPoint(p, x, _summary(e2e_mean_s=1.0 + x, ttft_p99_s=0.1 * x, throughput_rps=x))
        for p in ("continuous", "static")
        for x in (1.0, 2.0)
    ]
    assert len(latency_vs_load(rows, 2.0).data) == 7  # 3 panels x 2 policies + diagonal
    assert len(rate([0, 60], [1.0, 2.0], 60, 1.5, "t").data) == 1
    assert len(lengths([10, 100, 1000], [5, 50], {"prompt": (100.0, 1.0)}).data) == 3
    curves = catalogs.step_curves(["llama-2-7b@A100-80GB-tp1"], 1024, [1, 8], [128, 512])
    assert curves["llama-2-7b@A100-80GB-tp1"]["label"] == "fitted"
    assert (
        curves["llama-2-7b@A100-80GB-tp1"]["decode"][1]
        > curves["llama-2-7b@A100-80GB-tp1"]["decode"][0]
    )
    assert len(step_curves(curves, [1, 8], [128, 512], 1024).data) == 2
    level = {
        "measured": {
            "ttft_p50_s": 0.1,
            "ttft_mean_s": 0.12,
            "ttft_p99_s": 0.4,
            "tpot_mean_s": 0.02,
        },
        "simulated": {
            "ttft_p50_s": 0.11,
            "ttft_mean_s": 0.13,
            "ttft_p99_s": 0.5,
            "tpot_mean_s": 0.021,
        },
    }
    figure = validation_distributions(level)
    bars = {(trace.name.split()[0], trace.xaxis): list(trace.y) for trace in figure.data}
    assert bars[("measured", "x")] == [100.0, 120.0, 400.0] and bars[("simulated", "x2")] == [21.0]
    assert bars[("measured", "x3")] == []  # no E2E figures given
    level["distributions"] = {
        "measured": {"ttft_s": [0.3, 0.1, 0.2]},
        "simulated": {"ttft_s": [0.25, 0.15]},
    }
    curves = {
        (trace.name.split()[0], trace.xaxis): trace
        for trace in validation_distributions(level).data
    }
    assert list(curves[("measured", "x")].x) == pytest.approx(
        [100.0, 200.0, 300.0]
    )  # sorted, in ms
    assert list(curves[("measured", "x")].y) == pytest.approx(
        [1 / 3, 2 / 3, 1.0]
    )  # cumulative share
    assert (
        list(curves[("simulated", "x")].y) == pytest.approx([0.5, 1.0])
        and len(curves[("simulated", "x2")].x) == 0
    )


def _counting(steps: int, progress):
    """A task for the job: reports each step, then answers."""
    for step in range(steps):
        progress(f"step {step + 1}")
    return {"steps": steps}, None


def _endless(progress):
    """A task for the job that never ends on its own."""
    while True:
        progress("working")
        time.sleep(0.01)


def _refusing(path: str, progress):
    return None, f"{path}: no such file"


def _crashing(progress):
    return 1 / 0


def test_job_reports_progress_and_its_result():
    job = jobs.Job(_counting, (3,), steps=3)
    assert job.wait(60) and job.state == jobs.DONE
    assert (
        job.messages == ["step 1", "step 2", "step 3"]
        and job.fraction == 1.0
        and job.result == {"steps": 3}
    )


def test_job_cancel_stops_the_task_at_once():
    job = jobs.Job(_endless)
    deadline = time.monotonic() + 60
    while not job.messages and time.monotonic() < deadline:
        time.sleep(0.05)
    assert job.messages and job.state == jobs.RUNNING
    cancelled_at = time.monotonic()
    job.cancel()
    assert job.wait(10) and job.state == jobs.CANCELLED and job.result is None
    assert time.monotonic() - cancelled_at < 5 and job._process.poll() is not None


@pytest.mark.parametrize(
    "task, args, message",
    [(_refusing, ("trace.csv",), "trace.csv: no such file"), (_crashing, (), "ZeroDivisionError")],
)
def test_job_failure_is_a_message_not_an_exception(task, args, message):
    job = jobs.Job(task, args)
    assert (
        job.wait(60) and job.state == jobs.FAILED and message in job.error and job.fraction is None
    )


def test_job_task_must_be_importable_by_name():
    with pytest.raises(ValueError, match="expected a module-level function"):
        jobs.Job(lambda progress: (None, None))


def test_every_page_is_in_the_table_with_its_own_url():
    def script() -> None:
        import streamlit as st

        from dashboard import views

        for module in views.PAGES:
            st.write(f"{module}={views.page(module).url_path}")

    assert len({url for _, _, url in views.PAGES.values()}) == len(views.PAGES)
    at = AppTest.from_function(script, default_timeout=60).run()
    assert not at.exception
    urls = dict(m.value.split("=") for m in at.markdown)
    assert urls == {
        module: "" if module == "whatif" else url for module, (_, _, url) in views.PAGES.items()
    }
    with pytest.raises(KeyError, match="expected one of whatif"):
        views.page("pages")


def test_dashboard_command_is_headless_on_loopback():
    command = streamlit_command("127.0.0.1", 8765)
    assert command[1:4] == ["-m", "streamlit", "run"] and command[4].endswith("dashboard/app.py")
    assert (
        "--server.headless" in command
        and command[command.index("--server.address") + 1] == "127.0.0.1"
    )
    assert command[command.index("--server.port") + 1] == "8765"
    from surgeplan_cli import app

    result = CliRunner().invoke(app, ["dashboard", "--help"])
    assert result.exit_code == 0 and "--host" in result.output and "--port" in result.output
