"""The claims report as a self-contained HTML page: the table and the latency-vs-load chart."""

from __future__ import annotations

from pathlib import Path


def write_claims(report: dict, path: str | Path) -> Path:
    """A self-contained HTML page: the table and the latency-vs-load chart (plotly)."""
    import html

    import plotly.graph_objects as go

    series = report["series"]
    figure = go.Figure()
    means = [r[0] for r in series["latency_ratio"]]
    figure.add_trace(
        go.Scatter(
            x=[f"{load:.0%}" for load in series["loads"]],
            y=means,
            mode="lines+markers",
            name="mean latency, continuous / static",
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [r[2] - r[0] for r in series["latency_ratio"]],
                "arrayminus": [r[0] - r[1] for r in series["latency_ratio"]],
            },
        )
    )
    figure.add_hrect(
        y0=0.4,
        y1=0.6,
        fillcolor="green",
        opacity=0.1,
        line_width=0,
        annotation_text="article: about 0.5x",
    )
    figure.update_layout(
        title="Mean latency ratio vs load (share of the static server's capacity), 95% CI",
        xaxis_title="load",
        yaxis_title="continuous / static",
        template="plotly_white",
    )
    cells = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(row[key]))}</td>"
            for key in ("claim", "article", "ours", "verdict", "label")
        )
        + "</tr>"
        for row in report["rows"]
    )
    page = (
        f"<html><head><meta charset='utf-8'><title>surgeplan: the article's claims</title></head><body>"
        f"<h1>The article's claims, measured</h1><table border=1 cellpadding=4><tr><th>claim</th><th>article</th>"
        f"<th>ours</th><th>verdict</th><th>label</th></tr>{cells}</table>"
        + figure.to_html(full_html=False, include_plotlyjs=True)
        + "</body></html>"
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)
    return path
