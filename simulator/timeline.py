"""The plotly HTML timeline of a simulation: offered vs served load, waiting requests, P99 TTFT per
window, KV usage, and replicas serving or starting, with cold starts shaded."""

from __future__ import annotations

from pathlib import Path

from simulator.result import SimResult


def timeline_figure(result: SimResult):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    rows = result.timeseries
    t = [row["time_s"] for row in rows]
    figure = make_subplots(
        rows=5,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.04,
        subplot_titles=(
            "load (requests/s)",
            "waiting requests",
            "P99 TTFT per window (s)",
            "KV usage",
            "replicas",
        ),
    )
    figure.add_trace(
        go.Scatter(x=t, y=[row["offered_rps"] for row in rows], name="offered"), row=1, col=1
    )
    figure.add_trace(
        go.Scatter(x=t, y=[row["served_rps"] for row in rows], name="served"), row=1, col=1
    )
    figure.add_trace(
        go.Scatter(x=t, y=[row["waiting"] for row in rows], name="waiting"), row=2, col=1
    )
    figure.add_trace(
        go.Scatter(x=t, y=[row["ttft_p99_s"] for row in rows], name="P99 TTFT"), row=3, col=1
    )
    figure.add_hline(
        y=result.scenario.slo.ttft_p99_s, line_dash="dot", annotation_text="SLO", row=3, col=1
    )
    figure.add_trace(
        go.Scatter(x=t, y=[row["kv_usage"] for row in rows], name="KV usage"), row=4, col=1
    )
    figure.add_trace(
        go.Scatter(
            x=t, y=[row["replicas_serving"] for row in rows], name="serving", line_shape="hv"
        ),
        row=5,
        col=1,
    )
    figure.add_trace(
        go.Scatter(
            x=t,
            y=[row["replicas_starting"] for row in rows],
            name="starting (cold)",
            line_shape="hv",
        ),
        row=5,
        col=1,
    )
    for replica in result.replicas:
        if replica["ready_at_s"] > replica["requested_at_s"]:
            figure.add_vrect(
                x0=replica["requested_at_s"],
                x1=replica["ready_at_s"],
                fillcolor="orange",
                opacity=0.12,
                line_width=0,
            )
    summary = result.summary
    figure.update_layout(
        height=1100,
        title=f"{result.scenario.name}: P99 TTFT {summary.ttft_p99_s or 0:.2f} s, "
        f"{summary.completed} completed, {summary.timed_out} timed out, "
        f"${summary.cost_usd:.2f} ({result.facts['calibration']['name']}, "
        f"{result.facts['calibration']['label']})",
    )
    figure.update_xaxes(title_text="simulated time (s)", row=5, col=1)
    return figure


def write_timeline(result: SimResult, path: str | Path) -> Path:
    path = Path(path)
    timeline_figure(result).write_html(path, include_plotlyjs=True)
    return path
