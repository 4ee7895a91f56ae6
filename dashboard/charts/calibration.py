"""Figures of the step-cost calibrations (the Calibrations and Validate pages): predicted step-time
curves, predicted vs measured steps, simulated vs published measurements."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.charts.style import COLORS, SERIES, styled


def step_curves(
    curves: dict[str, dict],
    batches: list[int],
    prefill_tokens: list[int],
    context_tokens: int,
    height: int = 400,
) -> go.Figure:
    """Predicted step time: decode against batch size, prefill against prompt length; one colour per
    calibration, dashed where the calibration is `derived`."""
    figure = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.08,
        subplot_titles=(
            f"decode step (ms), each sequence at {context_tokens:,} tokens of context",
            "prefill step (ms), one prompt",
        ),
    )
    for i, (name, curve) in enumerate(curves.items()):
        style = {
            "color": SERIES[i % len(SERIES)],
            "width": 2.2,
            "dash": "dash" if curve["label"] == "derived" else None,
        }
        legend = f"{name} ({curve['label']})"
        figure.add_scatter(
            x=batches,
            y=[s * 1e3 for s in curve["decode"]],
            name=legend,
            line=style,
            mode="lines+markers",
            legendgroup=name,
            row=1,
            col=1,
        )
        figure.add_scatter(
            x=prefill_tokens,
            y=[s * 1e3 for s in curve["prefill"]],
            name=legend,
            line=style,
            mode="lines+markers",
            legendgroup=name,
            showlegend=False,
            row=1,
            col=2,
        )
    figure.update_xaxes(
        title_text="sequences in the batch", type="log", tickvals=batches, row=1, col=1
    )
    figure.update_xaxes(
        title_text="prompt tokens", type="log", tickvals=prefill_tokens, row=1, col=2
    )
    figure = styled(figure, height)
    figure.update_layout(
        hovermode="closest", legend={"y": -0.25, "yanchor": "top"}, margin={"b": 110}
    )
    return figure


def published_scatter(rows: list[dict], height: int = 420) -> go.Figure:
    """Simulated vs measured, one point per published row (log-log), fit and held-out apart, the ±10% band."""
    figure = go.Figure()
    values = [v for row in rows for v in (row["measured"], row["simulated"])]
    low, high = min(values) * 0.8, max(values) * 1.25
    line = [low, high]
    figure.add_scatter(
        x=line + line[::-1],
        y=[v * 1.1 for v in line] + [v * 0.9 for v in line[::-1]],
        fill="toself",
        fillcolor="rgba(120,120,120,0.15)",
        line={"width": 0},
        name="±10%",
        hoverinfo="skip",
    )
    figure.add_scatter(
        x=line,
        y=line,
        mode="lines",
        line={"dash": "dot", "color": "grey"},
        name="simulated = measured",
    )
    for split, symbol in (("fit", "circle-open"), ("held_out", "circle")):
        part = [row for row in rows if row["split"] == split]
        if part:
            figure.add_scatter(
                x=[r["measured"] for r in part],
                y=[r["simulated"] for r in part],
                mode="markers",
                marker={"symbol": symbol, "size": 9},
                name=split.replace("_", "-"),
                text=[f"{r['run']} {r['gpu']} {r['metric']}: {r['error']:+.1%}" for r in part],
                hoverinfo="text",
            )
    figure.update_xaxes(type="log", title="measured (s)")
    figure.update_yaxes(type="log", title="simulated (s)")
    return styled(figure, height, "published measurements: simulated vs measured")


def predicted_vs_measured(points: list[dict], title: str, height: int = 420) -> go.Figure:
    figure = go.Figure()
    for i, kind in enumerate(sorted({p["kind"] for p in points})):
        chosen = [p for p in points if p["kind"] == kind]
        figure.add_scatter(
            x=[p["measured_s"] * 1e3 for p in chosen],
            y=[p["predicted_s"] * 1e3 for p in chosen],
            mode="markers",
            name=kind,
            marker={"size": 9, "color": SERIES[i % len(SERIES)]},
            text=[f"{p['tokens']} tokens" for p in chosen],
        )
    top = max((max(p["measured_s"], p["predicted_s"]) for p in points), default=1.0) * 1e3 * 1.05
    figure.add_scatter(
        x=[0, top],
        y=[0, top],
        mode="lines",
        name="predicted = measured",
        line={"dash": "dash", "color": COLORS["offered"]},
    )
    figure.update_xaxes(title_text="measured step time (ms, median of repeats)")
    figure.update_yaxes(title_text="predicted (ms)")
    figure = styled(figure, height, title)
    figure.update_layout(hovermode="closest")
    return figure
