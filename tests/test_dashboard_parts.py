"""The dashboard's parts without a page: widgets take bounds, help and choices from the pydantic fields;
chart builders are pure and draw what they are given; the fleet arithmetic; the `surgeplan dashboard`
command line."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from dashboard import charts, data
from dashboard.cli import streamlit_command
from engine.core.config import bounds
from simulator.scenario import ClusterSpec, SchedulerSettings


def test_widgets_take_bounds_help_and_choices_from_the_fields():
    def script() -> None:
        from dashboard import widgets as w
        from simulator.scenario import ClusterSpec, SchedulerSettings
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


def test_timeline_shades_each_cold_start_and_the_spike():
    result, error = data.run(data.default_whatif())
    assert error is None
    figure = charts.timeline(result)
    names = {trace.name for trace in figure.data}
    assert {"offered", "served", "P99 TTFT", "waiting", "KV usage %", "serving", "starting (cold)"} <= names
    cold = [r for r in result.replicas if r["ready_at_s"] > r["requested_at_s"]]
    shaded = [shape for shape in figure.layout.shapes if shape.type == "rect"]
    assert len(cold) >= 1                               # the default spike makes the autoscaler scale out
    assert len(shaded) >= len(cold) + 1                 # each cold start in every row, plus the spike window
    assert not result.records                           # per-request records are dropped from the cache


def test_fleet_arithmetic():
    rows = [{"load_rps": 1.0, "throughput_rps": 0.98, "meets_slo": True},
            {"load_rps": 2.0, "throughput_rps": 1.9, "meets_slo": True},
            {"load_rps": 3.0, "throughput_rps": 2.4, "meets_slo": False}]
    assert data.capacity_rps(rows, slo_bound=True) == 1.9
    assert data.capacity_rps(rows, slo_bound=False) == 2.4
    assert data.capacity_rps(rows[2:], slo_bound=True) is None
    assert data.gpus_needed(100.0, 2.5, 2) == 80 and data.gpus_needed(100.0, None, 1) is None


def test_other_builders_draw_what_they_are_given():
    rows = [{"policy": p, "load_rps": x, "e2e_mean_s": 1.0 + x, "ttft_p99_s": 0.1 * x, "throughput_rps": x}
            for p in ("continuous", "static") for x in (1.0, 2.0)]
    assert len(charts.latency_vs_load(rows, 2.0).data) == 7                     # 3 panels x 2 policies + diagonal
    assert len(charts.rate([0, 60], [1.0, 2.0], 60, 1.5, "t").data) == 1
    assert len(charts.lengths([10, 100, 1000], [5, 50], {"prompt": (100.0, 1.0)}).data) == 3
    curves = data.step_curves(["llama-2-7b@A100-80GB-tp1"], 1024, [1, 8], [128, 512])
    assert curves["llama-2-7b@A100-80GB-tp1"]["label"] == "fitted"
    assert curves["llama-2-7b@A100-80GB-tp1"]["decode"][1] > curves["llama-2-7b@A100-80GB-tp1"]["decode"][0]
    assert len(charts.step_curves(curves, [1, 8], [128, 512], 1024).data) == 2


def test_dashboard_command_is_headless_on_loopback():
    command = streamlit_command("127.0.0.1", 8765)
    assert command[1:4] == ["-m", "streamlit", "run"] and command[4].endswith("dashboard/app.py")
    assert "--server.headless" in command and command[command.index("--server.address") + 1] == "127.0.0.1"
    assert command[command.index("--server.port") + 1] == "8765"
    from surgeplan_cli import app
    result = CliRunner().invoke(app, ["dashboard", "--help"])
    assert result.exit_code == 0 and "--host" in result.output and "--port" in result.output
