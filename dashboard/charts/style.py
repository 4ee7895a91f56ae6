"""The dashboard's one look: the palette, the policy names, the shared layout (`styled`) every
figure goes through, and the plain horizontal bars."""

from __future__ import annotations

import plotly.graph_objects as go

COLORS = {
    "offered": "#94a3b8",
    "served": "#2563eb",
    "ttft": "#dc2626",
    "slo": "#111827",
    "waiting": "#f59e0b",
    "kv": "#7c3aed",
    "serving": "#16a34a",
    "starting": "#f97316",
    "continuous": "#2563eb",
    "static": "#ea580c",
    "measured": "#0f766e",
    "simulated": "#6366f1",
}
SERIES = ("#2563eb", "#ea580c", "#16a34a", "#7c3aed", "#dc2626", "#0891b2", "#ca8a04", "#db2777")
POLICY_NAMES = {"continuous": "continuous + paged KV", "static": "static (traditional)"}


def styled(figure: go.Figure, height: int, title: str | None = None) -> go.Figure:
    """The shared look: white template, the legend in a row above the plots (and above any subplot
    titles), decades only on log axes."""
    top = 110 if title else 80
    plot_height = max(height - top - 50, 100)
    figure.update_layout(
        template="plotly_white",
        height=height,
        margin={"l": 60, "r": 30, "t": top, "b": 50},
        title={"text": title, "x": 0.01, "y": 0.98, "yanchor": "top", "font": {"size": 16}}
        if title
        else None,
        legend={
            "orientation": "h",
            "yanchor": "bottom",
            "y": 1 + 34 / plot_height,
            "x": 0.0,
            "traceorder": "normal",
        },
        hovermode="x unified",
        font={"size": 13},
    )
    figure.update_annotations(font_size=13)
    figure.for_each_yaxis(lambda axis: axis.update(dtick=1) if axis.type == "log" else None)
    figure.for_each_xaxis(
        lambda axis: axis.update(dtick=1) if axis.type == "log" and axis.tickvals is None else None
    )
    return figure


def bars(
    values: dict[str, float | None],
    title: str,
    suffix: str = "",
    height: int = 260,
    colors: dict[str, str] | None = None,
) -> go.Figure:
    """Horizontal bars, one per label; a missing value is drawn as an empty bar labelled 'n/a'."""
    labels = list(values)
    numbers = [values[label] if values[label] is not None else 0 for label in labels]
    text = [
        f"{values[label]:,.{0 if suffix == ' GPUs' else 1}f}{suffix}"
        if values[label] is not None
        else "n/a"
        for label in labels
    ]
    figure = go.Figure(
        go.Bar(
            x=numbers,
            y=labels,
            orientation="h",
            text=text,
            textposition="auto",
            marker_color=[
                (colors or {}).get(label, SERIES[i % len(SERIES)]) for i, label in enumerate(labels)
            ],
        )
    )
    figure.update_yaxes(autorange="reversed")
    figure = styled(figure, height, title)
    figure.update_layout(hovermode="closest", showlegend=False)
    return figure
