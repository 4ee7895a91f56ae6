"""The predicted-vs-measured step-time plot `surgeplan calibrations fit --plot` writes: interactive
HTML with plotly or a PNG with matplotlib. Apart from the commands because it is the only part that
draws (and imports a plotting library lazily)."""

from pathlib import Path

import typer

from simulator.calibration.cost_model import predicted_vs_measured
from simulator.calibration.schema import Calibration


def write_plot(calibration: Calibration, path: Path) -> Path:
    """Scatter of predicted against measured step time per point, one colour per point kind:
    interactive HTML with plotly, or a PNG with matplotlib."""
    path = Path(path)
    if path.suffix not in (".html", ".png"):
        raise typer.BadParameter(
            f"plot path {path} ends in {path.suffix!r}; expected .html or .png"
        )
    pairs = predicted_vs_measured(calibration)
    series = {}
    for kind in sorted({point.kind for point, _ in pairs}):
        chosen = [(point, predicted) for point, predicted in pairs if point.kind == kind]
        series[kind] = (
            [point.median_total_s * 1e3 for point, _ in chosen],
            [p * 1e3 for _, p in chosen],
            [f"{point.shape.to_shape().num_batched_tokens} tokens" for point, _ in chosen],
        )
    top = max(max(point.median_total_s, predicted) for point, predicted in pairs) * 1e3
    title = f"{calibration.name}: predicted vs measured step time"
    labels = ("measured (ms, median of repeats)", "predicted (ms)")
    (_html_plot if path.suffix == ".html" else _png_plot)(series, top, title, labels, path)
    return path


def _html_plot(series: dict, top: float, title: str, labels: tuple[str, str], path: Path) -> None:
    import plotly.graph_objects as go

    figure = go.Figure()
    for kind, (measured, predicted, text) in series.items():
        figure.add_scatter(x=measured, y=predicted, mode="markers", name=kind, text=text)
    figure.add_scatter(
        x=[0, top], y=[0, top], mode="lines", name="predicted = measured", line={"dash": "dash"}
    )
    figure.update_layout(title=title, xaxis_title=labels[0], yaxis_title=labels[1])
    figure.write_html(path)


def _png_plot(series: dict, top: float, title: str, labels: tuple[str, str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display: render straight to the file
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 6))
    for kind, (measured, predicted, _) in series.items():
        axes.scatter(measured, predicted, label=kind, s=18)
    axes.plot([0, top], [0, top], linestyle="--", color="grey", label="predicted = measured")
    axes.set(title=title, xlabel=labels[0], ylabel=labels[1])
    axes.legend()
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
