"""Cost vs P99 TTFT of every full-fleet simulation the planner ran, as a self-contained plotly HTML page:
one colour per GPU type, filled markers for fleets that hold the SLO, the cost/latency Pareto front,
the TTFT target as a line, and the recommendation marked with a star."""

from __future__ import annotations

from pathlib import Path

from simulator.planner.report import PlanReport


def pareto_points(rows: list[dict]) -> list[dict]:
    """Ledger rows of full-fleet, fixed-fleet simulations that ran to the end (they have a P99 TTFT)."""
    return [
        row
        for row in rows
        if row["share"] is None
        and row["ttft_p99_s"] is not None
        and row["cost_per_hour_usd"] is not None
    ]


def pareto_front(points: list[dict]) -> list[dict]:
    """Points no other point beats on both cost per hour and P99 TTFT, by cost."""
    front, best_ttft = [], float("inf")
    for point in sorted(points, key=lambda p: (p["cost_per_hour_usd"], p["ttft_p99_s"])):
        if point["ttft_p99_s"] < best_ttft:
            front.append(point)
            best_ttft = point["ttft_p99_s"]
    return front


def write_pareto(rows: list[dict], report: PlanReport, path: str | Path) -> Path:
    import plotly.graph_objects as go

    points = pareto_points(rows)
    figure = go.Figure()
    for gpu in dict.fromkeys(point["gpu"] for point in points):
        for meets in (True, False):
            chosen = [p for p in points if p["gpu"] == gpu and (p["status"] == "meets") == meets]
            if not chosen:
                continue
            figure.add_trace(
                go.Scatter(
                    x=[p["cost_per_hour_usd"] for p in chosen],
                    y=[p["ttft_p99_s"] for p in chosen],
                    mode="markers",
                    name=f"{gpu} ({'meets SLO' if meets else 'misses'})",
                    legendgroup=gpu,
                    marker={"symbol": "circle" if meets else "circle-open", "size": 9},
                    text=[
                        f"{p['phase']}: {p['replicas']} x TP{p['tensor_parallel']}, seqs {p['max_num_seqs']}, "
                        f"tokens {p['max_num_batched_tokens']}, {p['policy']}/{p['batch_controller']}, "
                        f"step x{p['step_scale']:g}"
                        + (f"; misses {p['reasons']}" if not meets else "")
                        for p in chosen
                    ],
                    hovertemplate="%{text}<br>$%{x:.2f}/hour, P99 TTFT %{y:.3f} s<extra></extra>",
                )
            )
    front = pareto_front(points)
    if front:
        figure.add_trace(
            go.Scatter(
                x=[p["cost_per_hour_usd"] for p in front],
                y=[p["ttft_p99_s"] for p in front],
                mode="lines",
                name="Pareto front",
                line={"dash": "dot", "color": "grey"},
            )
        )
    recommendation = report.recommendation
    if recommendation.ttft_p99_s is not None:
        figure.add_trace(
            go.Scatter(
                x=[recommendation.cost_per_hour_usd],
                y=[recommendation.ttft_p99_s],
                mode="markers+text",
                name="recommendation",
                marker={
                    "symbol": "star",
                    "size": 18,
                    "color": "gold",
                    "line": {"width": 1, "color": "black"},
                },
                text=[f"{recommendation.replicas} x {recommendation.gpu}"],
                textposition="top center",
            )
        )
    target = report.slo.ttft_p99_s
    if target is not None:
        figure.add_hline(
            y=target,
            line_dash="dash",
            line_color="red",
            annotation_text=f"SLO: P99 TTFT {target:g} s",
        )
    figure.update_layout(
        title="Fleet cost vs P99 time to first token (full-fleet simulations)",
        xaxis_title="fleet cost, USD per hour",
        yaxis_title="P99 TTFT, s",
        yaxis_type="log",
        template="plotly_white",
    )
    path = Path(path)
    figure.write_html(path, include_plotlyjs=True, full_html=True)
    return path
