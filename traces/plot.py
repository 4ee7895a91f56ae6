"""Arrival-rate plot of a trace: interactive HTML with plotly; PNG where an image backend exists."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from traces.stats import rate_per_window
from traces.trace import Trace

PNG_UNAVAILABLE = (
    "PNG export needs kaleido (plotly's image engine, plus a browser) or matplotlib, and "
    "neither is installed; write the plot as .html instead"
)


def rate_figure(trace: Trace, window_s: float):
    import plotly.graph_objects as go

    starts, rates = rate_per_window(trace, window_s)
    mean_rate = len(trace) / trace.duration_s if trace.duration_s > 0 else 0.0
    figure = go.Figure(
        go.Scatter(
            x=starts, y=rates, mode="lines", line_shape="hv", name=f"requests/s per {window_s:g} s"
        )
    )
    figure.add_hline(y=mean_rate, line_dash="dot", annotation_text=f"mean {mean_rate:.2f}/s")
    figure.update_layout(
        title=f"{trace.name}: {len(trace)} requests over {trace.duration_s:.1f} s",
        xaxis_title="time since trace start (s)",
        yaxis_title="requests / s",
        template="plotly_white",
    )
    return figure


def _png_with_matplotlib(trace: Trace, window_s: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    starts, rates = rate_per_window(trace, window_s)
    fig, axes = plt.subplots(figsize=(10, 4))
    axes.step(starts, rates, where="post")
    axes.set(xlabel="time since trace start (s)", ylabel="requests / s", title=trace.name)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def check_plot_path(path: str | Path) -> str:
    """The backend that will write `path` ('html', 'kaleido' or 'matplotlib'), or why none can."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".html", ".png"):
        raise ValueError(f"plot path {path} ends in {suffix!r}; expected .html or .png")
    if suffix == ".html":
        return "html"
    for backend in ("kaleido", "matplotlib"):
        if importlib.util.find_spec(backend) is not None:
            return backend
    raise RuntimeError(f"{path}: {PNG_UNAVAILABLE}")


def write_rate_plot(trace: Trace, path: str | Path, window_s: float = 60.0) -> Path:
    """Write the plot; the suffix picks the kind (.html always works offline, plotly.js inlined)."""
    path = Path(path)
    backend = check_plot_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if backend == "html":
        rate_figure(trace, window_s).write_html(path, include_plotlyjs=True)
    elif backend == "kaleido":
        rate_figure(trace, window_s).write_image(path)
    else:
        _png_with_matplotlib(trace, window_s, path)
    return path
