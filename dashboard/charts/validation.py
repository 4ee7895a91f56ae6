"""Figures of a validation run (the Validate page): the simulator's relative error per metric and
load level, and the measured vs simulated latency distributions."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.charts.style import COLORS, styled


def validation_errors(levels: list[dict], metrics: list[str], height: int = 440) -> go.Figure:
    """The simulator's relative error per metric, one panel per load level: a bar per metric (grey when
    inside the live engine's own noise floor, so it cannot be told from a repeat), the floor as ± ticks,
    and the error at the run's measured host speed as a diamond where the results hold it."""
    figure = make_subplots(
        rows=1,
        cols=max(1, len(levels)),
        shared_yaxes=True,
        horizontal_spacing=0.03,
        subplot_titles=[
            f"{level['load']:.0%} load ({level['rate_rps']:.2f} req/s)" for level in levels
        ],
    )
    for col, level in enumerate(levels, start=1):
        errors, floor = level.get("relative_error") or {}, level.get("noise_floor") or {}
        keys = [k for k in metrics if errors.get(k) is not None]
        inside = [floor.get(k) is not None and abs(errors[k]) <= floor[k] for k in keys]
        for quiet, name, color in (
            (False, "simulated vs measured", COLORS["simulated"]),
            (True, "… within the live noise", "#cbd5e1"),
        ):
            figure.add_bar(
                x=keys,
                y=[100 * errors[k] if q == quiet else None for k, q in zip(keys, inside)],
                name=name,
                marker_color=color,
                showlegend=col == 1,
                legendgroup=name,
                hovertemplate="%{x}: %{y:+.1f}%<extra></extra>",
                row=1,
                col=col,
            )
        shown = [k for k in keys if floor.get(k) is not None]
        for sign in (1, -1):
            figure.add_scatter(
                x=shown,
                y=[sign * 100 * floor[k] for k in shown],
                mode="markers",
                name="live noise floor (±)",
                showlegend=col == 1 and sign == 1,
                legendgroup="floor",
                marker={
                    "symbol": "line-ew-open",
                    "size": 16,
                    "color": COLORS["measured"],
                    "line": {"width": 2.5},
                },
                hoverinfo="skip",
                row=1,
                col=col,
            )
        at_speed = (level.get("at_run_speed") or {}).get("relative_error") or {}
        sped = [k for k in keys if at_speed.get(k) is not None]
        if sped:
            figure.add_scatter(
                x=sped,
                y=[100 * at_speed[k] for k in sped],
                mode="markers",
                name="at run speed",
                showlegend=col == 1,
                legendgroup="speed",
                marker={"symbol": "diamond", "size": 9, "color": COLORS["starting"]},
                hovertemplate="%{x} at run speed: %{y:+.1f}%<extra></extra>",
                row=1,
                col=col,
            )
        figure.add_hline(y=0, line={"color": COLORS["slo"], "width": 1}, row=1, col=col)
    # the range follows the errors: a noise floor far beyond them (a noisy metric) runs off the chart
    # rather than squash every bar; the table beside the chart gives each floor
    errors = [
        abs(v)
        for level in levels
        for k, v in (level.get("relative_error") or {}).items()
        if k in metrics and v is not None
    ]
    floors = [
        v
        for level in levels
        for k, v in (level.get("noise_floor") or {}).items()
        if k in metrics and v is not None
    ]
    top = max(errors, default=0.05)
    top = 100 * 1.2 * max(top, min(max(floors, default=0.0), 2 * top), 0.05)
    figure.update_yaxes(
        ticksuffix="%", range=[-top, top], title_text="simulated vs measured", row=1, col=1
    )
    figure.update_xaxes(tickangle=-40)
    figure = styled(figure, height)
    figure.update_layout(hovermode="closest", barmode="overlay")
    return figure


DISTRIBUTION_PANELS = (
    ("time to first token", "ttft"),
    ("time per output token", "tpot"),
    ("end-to-end latency", "e2e"),
)
QUANTILES = (("P50", "p50"), ("mean", "mean"), ("P99", "p99"))


def validation_distributions(level: dict, height: int = 360) -> go.Figure:
    """Measured and simulated latency distributions of one load level, one panel per metric, in
    milliseconds: overlaid cumulative distributions of every request's value when the results hold them
    (`distributions`), else each distribution's P50, mean and P99 side by side."""
    measured, simulated = level.get("measured") or {}, level.get("simulated") or {}
    figure = make_subplots(
        rows=1,
        cols=len(DISTRIBUTION_PANELS),
        horizontal_spacing=0.07,
        subplot_titles=[f"{title} (ms)" for title, _ in DISTRIBUTION_PANELS],
    )
    per_request = level.get("distributions")
    for col, (_, metric) in enumerate(DISTRIBUTION_PANELS, start=1):
        if per_request:
            for side in ("measured", "simulated"):
                values = (
                    np.sort(np.asarray(per_request[side].get(f"{metric}_s", []), dtype=float)) * 1e3
                )
                figure.add_scatter(
                    x=values,
                    y=np.arange(1, len(values) + 1) / max(len(values), 1),
                    mode="lines",
                    line={"shape": "hv", "color": COLORS[side], "width": 2},
                    legendgroup=side,
                    name=f"{side} (live engine)"
                    if side == "measured"
                    else f"{side} (same requests)",
                    showlegend=col == 1,
                    hovertemplate=f"{side}: %{{x:,.1f}} ms, share %{{y:.0%}}<extra></extra>",
                    row=1,
                    col=col,
                )
            figure.update_yaxes(range=[0, 1.02], tickformat=".0%", row=1, col=col)
            continue
        keys = [
            (label, f"{metric}_{stat}_s")
            for label, stat in QUANTILES
            if measured.get(f"{metric}_{stat}_s") is not None
            or simulated.get(f"{metric}_{stat}_s") is not None
        ]
        for side, values in (("measured", measured), ("simulated", simulated)):
            figure.add_bar(
                x=[label for label, _ in keys],
                y=[None if values.get(key) is None else values[key] * 1e3 for _, key in keys],
                name=f"{side} (live engine)" if side == "measured" else f"{side} (same requests)",
                marker_color=COLORS[side],
                legendgroup=side,
                showlegend=col == 1,
                hovertemplate=f"{side} %{{x}}: %{{y:,.1f}} ms<extra></extra>",
                row=1,
                col=col,
            )
        figure.update_yaxes(rangemode="tozero", row=1, col=col)
    figure = styled(figure, height)
    figure.update_layout(hovermode="closest", barmode="group", bargap=0.25)
    return figure
