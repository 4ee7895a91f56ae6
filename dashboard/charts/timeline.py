"""Figures of one simulated run through time: the What-if page's five-panel timeline and the Split
page's co-located vs disaggregated lines."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.charts.style import COLORS, SERIES, styled
from simulator.result import SimResult


def timeline(result: SimResult, height: int = 900) -> go.Figure:
    """Load, P99 TTFT against the SLO, queue and preemptions, KV usage, replicas; cold starts shaded
    orange, the spike's window shaded grey."""
    rows = result.timeseries
    t = [row["time_s"] for row in rows]
    figure = make_subplots(
        rows=5,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.055,
        row_heights=[0.24, 0.22, 0.2, 0.16, 0.18],
        subplot_titles=(
            "requests / s",
            "P99 time to first token per window (s, log scale)",
            "waiting requests, and preemptions per window",
            "KV cache usage (share of blocks in use)",
            "replicas",
        ),
    )
    figure.add_scatter(
        x=t,
        y=[r["offered_rps"] for r in rows],
        name="offered",
        fill="tozeroy",
        line={"color": COLORS["offered"], "shape": "hv"},
        row=1,
        col=1,
    )
    figure.add_scatter(
        x=t,
        y=[r["served_rps"] for r in rows],
        name="served",
        line={"color": COLORS["served"], "width": 2.5, "shape": "hv"},
        row=1,
        col=1,
    )
    figure.add_scatter(
        x=t,
        y=[r["ttft_p99_s"] for r in rows],
        name="P99 TTFT",
        connectgaps=False,
        line={"color": COLORS["ttft"], "width": 2.5},
        mode="lines+markers",
        marker={"size": 4},
        row=2,
        col=1,
    )
    figure.add_hline(
        y=result.scenario.slo.ttft_p99_s,
        line={"dash": "dash", "color": COLORS["slo"], "width": 1.5},
        annotation_text=f"SLO {result.scenario.slo.ttft_p99_s:g} s",
        annotation_position="top left",
        row=2,
        col=1,
    )
    figure.update_yaxes(type="log", row=2, col=1)
    figure.add_scatter(
        x=t,
        y=[r["waiting"] for r in rows],
        name="waiting",
        fill="tozeroy",
        line={"color": COLORS["waiting"]},
        row=3,
        col=1,
    )
    figure.add_bar(
        x=t,
        y=[r["preemptions"] for r in rows],
        name="preemptions",
        marker_color=COLORS["ttft"],
        opacity=0.8,
        row=3,
        col=1,
    )
    figure.update_yaxes(rangemode="tozero", row=3, col=1)
    figure.add_scatter(
        x=t,
        y=[100 * r["kv_usage"] for r in rows],
        name="KV usage %",
        fill="tozeroy",
        line={"color": COLORS["kv"], "width": 2},
        row=4,
        col=1,
    )
    figure.update_yaxes(range=[0, 100], dtick=50, ticksuffix="%", row=4, col=1)
    figure.add_scatter(
        x=t,
        y=[r["replicas_serving"] for r in rows],
        name="serving",
        stackgroup="replicas",
        line={"color": COLORS["serving"], "shape": "hv"},
        row=5,
        col=1,
    )
    figure.add_scatter(
        x=t,
        y=[r["replicas_starting"] for r in rows],
        name="starting (cold)",
        stackgroup="replicas",
        line={"color": COLORS["starting"], "shape": "hv"},
        row=5,
        col=1,
    )
    figure.update_yaxes(rangemode="tozero", row=5, col=1)
    cold = [r for r in result.replicas if r["ready_at_s"] > r["requested_at_s"]]
    for replica in cold:
        figure.add_vrect(
            x0=replica["requested_at_s"],
            x1=replica["ready_at_s"],
            fillcolor=COLORS["starting"],
            opacity=0.08,
            line_width=0,
            row="all",
            col=1,
        )
    if cold:
        figure.add_annotation(
            x=cold[0]["requested_at_s"],
            y=0.97,
            xref="x",
            yref="y5 domain",
            xanchor="left",
            yanchor="top",
            showarrow=False,
            font={"size": 12, "color": "#7c2d12"},
            text=f"cold start {cold[0]['ready_at_s'] - cold[0]['requested_at_s']:.0f} s",
        )
    arrivals = result.scenario.traffic.arrivals
    if result.scenario.traffic.trace is None and getattr(arrivals, "kind", "") == "spike":
        figure.add_vrect(
            x0=arrivals.start_s,
            x1=arrivals.end_s,
            fillcolor="#64748b",
            opacity=0.08,
            line_width=0,
            annotation_text=f"{arrivals.multiplier:g}x spike",
            annotation_position="top left",
            row=1,
            col=1,
        )
    figure.update_xaxes(title_text="simulated time (s)", row=5, col=1)
    figure = styled(figure, height)
    figure.update_layout(bargap=0.1)
    return figure


def split_lines(colocated: SimResult, split: SimResult, height: int = 520) -> go.Figure:
    """Co-located vs disaggregated through the run: windowed P99 TTFT and the requests waiting, the
    disaggregated fleet's per pool."""
    figure = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=("P99 TTFT per window (s)", "requests waiting"),
    )
    series = [("co-located", colocated.timeseries), ("disaggregated", split.timeseries)]
    for i, (name, rows) in enumerate(series):
        times = [row["time_s"] for row in rows]
        figure.add_trace(
            go.Scatter(
                x=times,
                y=[row["ttft_p99_s"] for row in rows],
                name=f"{name}: P99 TTFT",
                line_color=SERIES[i],
            ),
            row=1,
            col=1,
        )
        if name == "co-located":
            figure.add_trace(
                go.Scatter(
                    x=times,
                    y=[row["waiting"] for row in rows],
                    name="co-located: waiting",
                    line_color=SERIES[i],
                ),
                row=2,
                col=1,
            )
    for j, (pool, rows) in enumerate(split.pools.items()):
        figure.add_trace(
            go.Scatter(
                x=[row["time_s"] for row in rows],
                y=[row["waiting"] for row in rows],
                name=f"{pool} pool: waiting",
                line_color=SERIES[(j + 2) % len(SERIES)],
            ),
            row=2,
            col=1,
        )
    figure.update_xaxes(title_text="time (s)", row=2, col=1)
    return styled(figure, height)
