"""Figures of a trace (the Traces page): request rate per window and the prompt/output length
histograms with their lognormal fits."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.charts.style import COLORS, SERIES, styled


def rate(
    starts: list[float],
    rates: list[float],
    window_s: float,
    mean_rps: float,
    title: str,
    height: int = 340,
) -> go.Figure:
    figure = go.Figure(
        go.Scatter(
            x=starts,
            y=rates,
            mode="lines",
            line={"shape": "hv", "color": COLORS["served"]},
            fill="tozeroy",
            name=f"requests / s per {window_s:g} s window",
        )
    )
    figure.add_hline(
        y=mean_rps,
        line={"dash": "dash", "color": COLORS["slo"]},
        annotation_text=f"mean {mean_rps:.2f}/s",
        annotation_position="top left",
    )
    figure.update_xaxes(title_text="time since the first request (s)")
    figure.update_yaxes(title_text="requests / s", rangemode="tozero")
    figure = styled(figure, height, title)
    figure.update_layout(
        showlegend=False, margin={"t": 60}
    )  # one series: the title says what it is
    return figure


def _log_histogram(values: np.ndarray, bins: int = 50) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    low, high = max(values.min(), 1), max(values.max(), 2)
    edges = np.logspace(np.log10(low), np.log10(high + 1), bins + 1)
    counts, edges = np.histogram(values, bins=edges)
    return counts, edges, np.sqrt(edges[:-1] * edges[1:])


def lengths(
    prompt: list[int],
    output: list[int],
    lognormal: dict[str, tuple[float, float]],
    height: int = 340,
) -> go.Figure:
    """Prompt and output token histograms on log axes, with the fitted lognormal drawn over each."""
    figure = make_subplots(
        rows=1, cols=2, subplot_titles=("prompt tokens", "output tokens"), horizontal_spacing=0.08
    )
    for col, (name, values) in enumerate((("prompt", prompt), ("output", output)), start=1):
        values = np.asarray(values, dtype=float)
        if len(values) == 0:
            continue
        counts, edges, centres = _log_histogram(values)
        figure.add_bar(
            x=centres,
            y=counts,
            width=np.diff(edges),
            name=f"{name} (sample)",
            showlegend=False,
            marker_color=SERIES[col - 1],
            opacity=0.75,
            row=1,
            col=col,
        )
        if name in lognormal:
            median, sigma = lognormal[name]
            density = np.exp(-((np.log(centres / median)) ** 2) / (2 * sigma**2)) / (
                centres * sigma * np.sqrt(2 * np.pi)
            )
            figure.add_scatter(
                x=centres,
                y=density * np.diff(edges) * len(values),
                mode="lines",
                name=f"{name} lognormal fit: median {median:.0f}, σ {sigma:.2f}",
                line={"color": COLORS["slo"], "dash": "dash"},
                row=1,
                col=col,
            )
        figure.update_xaxes(type="log", title_text="tokens (log scale)", row=1, col=col)
    figure = styled(figure, height)
    figure.update_layout(hovermode="closest", bargap=0)
    return figure
