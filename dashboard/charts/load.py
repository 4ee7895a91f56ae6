"""Latency and throughput against offered load, one line per batching policy (the paged page)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.charts.style import COLORS, POLICY_NAMES, styled

if TYPE_CHECKING:
    from dashboard.data.scenarios import LoadPoint


def latency_vs_load(rows: list[LoadPoint], slo_ttft_s: float, height: int = 420) -> go.Figure:
    """Mean latency, P99 TTFT and throughput against offered load, one line per policy."""
    figure = make_subplots(
        rows=1,
        cols=3,
        horizontal_spacing=0.08,
        subplot_titles=(
            "mean end-to-end latency (s)",
            "P99 time to first token (s, log)",
            "served requests / s",
        ),
    )
    for policy in ("continuous", "static"):
        points = sorted((row for row in rows if row.policy == policy), key=lambda row: row.load_rps)
        if not points:
            continue
        x = [row.load_rps for row in points]
        style = {"color": COLORS[policy], "width": 2.5}
        for col, key in enumerate(("e2e_mean_s", "ttft_p99_s", "throughput_rps"), start=1):
            figure.add_scatter(
                x=x,
                y=[getattr(row.summary, key) for row in points],
                name=POLICY_NAMES[policy],
                line=style,
                mode="lines+markers",
                legendgroup=policy,
                showlegend=col == 1,
                row=1,
                col=col,
            )
    top = max((row.load_rps for row in rows), default=1.0)
    figure.add_scatter(
        x=[0, top],
        y=[0, top],
        name="served = offered",
        mode="lines",
        line={"dash": "dot", "color": COLORS["offered"]},
        row=1,
        col=3,
    )
    figure.add_hline(
        y=slo_ttft_s,
        line={"dash": "dash", "color": COLORS["slo"]},
        annotation_text=f"SLO {slo_ttft_s:g} s",
        annotation_position="top left",
        row=1,
        col=2,
    )
    figure.update_yaxes(type="log", row=1, col=2)
    figure.update_xaxes(title_text="offered load (requests / s per replica)")
    figure = styled(figure, height)
    figure.update_layout(hovermode="closest")
    return figure
