"""The planner's search as one figure: cost per hour against P99 TTFT, the Pareto front and the
recommendation (the Plan page)."""

from __future__ import annotations

import plotly.graph_objects as go

from dashboard.charts.style import COLORS, SERIES, styled
from simulator.planner.report import Recommendation


def pareto(
    points: list[dict],
    front: list[dict],
    recommendation: Recommendation,
    slo_ttft_s: float,
    height: int = 440,
) -> go.Figure:
    """Every full-fleet simulation the planner ran: cost per hour against P99 TTFT, filled where the
    fleet held the SLO, the Pareto front dotted, the recommendation starred."""
    figure = go.Figure()
    for i, gpu in enumerate(dict.fromkeys(p["gpu"] for p in points)):
        for meets in (True, False):
            chosen = [p for p in points if p["gpu"] == gpu and (p["status"] == "meets") == meets]
            if chosen:
                figure.add_scatter(
                    x=[p["cost_per_hour_usd"] for p in chosen],
                    y=[p["ttft_p99_s"] for p in chosen],
                    mode="markers",
                    name=f"{gpu}, {'meets the SLO' if meets else 'misses'}",
                    legendgroup=gpu,
                    marker={
                        "symbol": "circle" if meets else "circle-open",
                        "size": 10,
                        "color": SERIES[i % len(SERIES)],
                        "line": {"width": 1.5, "color": SERIES[i % len(SERIES)]},
                    },
                    text=[
                        f"{p['replicas']} × TP{p['tensor_parallel']}, max_num_seqs {p['max_num_seqs']}, "
                        f"{p['max_num_batched_tokens']} tokens, {p['policy']}"
                        for p in chosen
                    ],
                    hovertemplate="%{text}<br>$%{x:.2f}/hour, P99 TTFT %{y:.3f} s<extra></extra>",
                )
    if front:
        figure.add_scatter(
            x=[p["cost_per_hour_usd"] for p in front],
            y=[p["ttft_p99_s"] for p in front],
            mode="lines",
            name="Pareto front",
            line={"dash": "dot", "color": COLORS["offered"]},
        )
    if recommendation.ttft_p99_s is not None:
        figure.add_scatter(
            x=[recommendation.cost_per_hour_usd],
            y=[recommendation.ttft_p99_s],
            mode="markers+text",
            name="recommendation",
            textposition="top center",
            text=[f"{recommendation.replicas} × {recommendation.gpu}"],
            marker={
                "symbol": "star",
                "size": 20,
                "color": "#facc15",
                "line": {"width": 1, "color": "#111"},
            },
        )
    figure.add_hline(
        y=slo_ttft_s,
        line={"dash": "dash", "color": COLORS["ttft"]},
        annotation_text=f"SLO {slo_ttft_s:g} s",
        annotation_position="top left",
    )
    figure.update_xaxes(title_text="fleet cost (USD per hour)")
    figure.update_yaxes(title_text="P99 time to first token (s)", type="log")
    figure = styled(figure, height)
    figure.update_layout(hovermode="closest")
    return figure
