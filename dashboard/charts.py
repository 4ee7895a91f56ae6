"""Plotly figures for the dashboard: pure functions from results (or plain numbers) to figures.

No Streamlit and no simulation here: a builder takes what `dashboard.data` returned and draws it, so
each can be tested, exported or reused alone. One palette and one layout keep the pages consistent.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from simulator.result import SimResult

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


def _style(figure: go.Figure, height: int, title: str | None = None) -> go.Figure:
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


def timeline(result: SimResult, height: int = 900) -> go.Figure:
    """Load, P99 TTFT against the SLO, queue and preemptions, KV usage, replicas; cold starts shaded
    orange, the spike's window shaded grey."""
    rows = result.timeseries
    t = [row["time_s"] for row in rows]
    figure = make_subplots(
        rows=5,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.055,
        row_heights=[0.24, 0.22, 0.2, 0.16, 0.18],
        subplot_titles=(
            "requests / s",
            "P99 time to first token per window (s, log scale)",
            "waiting requests, and preemptions per window",
            "KV cache usage (share of blocks in use)",
            "replicas",
        ),
    )
    figure.add_scatter(
        x=t,
        y=[r["offered_rps"] for r in rows],
        name="offered",
        fill="tozeroy",
        line={"color": COLORS["offered"], "shape": "hv"},
        row=1,
        col=1,
    )
    figure.add_scatter(
        x=t,
        y=[r["served_rps"] for r in rows],
        name="served",
        line={"color": COLORS["served"], "width": 2.5, "shape": "hv"},
        row=1,
        col=1,
    )
    figure.add_scatter(
        x=t,
        y=[r["ttft_p99_s"] for r in rows],
        name="P99 TTFT",
        connectgaps=False,
        line={"color": COLORS["ttft"], "width": 2.5},
        mode="lines+markers",
        marker={"size": 4},
        row=2,
        col=1,
    )
    figure.add_hline(
        y=result.scenario.slo.ttft_p99_s,
        line={"dash": "dash", "color": COLORS["slo"], "width": 1.5},
        annotation_text=f"SLO {result.scenario.slo.ttft_p99_s:g} s",
        annotation_position="top left",
        row=2,
        col=1,
    )
    figure.update_yaxes(type="log", row=2, col=1)
    figure.add_scatter(
        x=t,
        y=[r["waiting"] for r in rows],
        name="waiting",
        fill="tozeroy",
        line={"color": COLORS["waiting"]},
        row=3,
        col=1,
    )
    figure.add_bar(
        x=t,
        y=[r["preemptions"] for r in rows],
        name="preemptions",
        marker_color=COLORS["ttft"],
        opacity=0.8,
        row=3,
        col=1,
    )
    figure.update_yaxes(rangemode="tozero", row=3, col=1)
    figure.add_scatter(
        x=t,
        y=[100 * r["kv_usage"] for r in rows],
        name="KV usage %",
        fill="tozeroy",
        line={"color": COLORS["kv"], "width": 2},
        row=4,
        col=1,
    )
    figure.update_yaxes(range=[0, 100], dtick=50, ticksuffix="%", row=4, col=1)
    figure.add_scatter(
        x=t,
        y=[r["replicas_serving"] for r in rows],
        name="serving",
        stackgroup="replicas",
        line={"color": COLORS["serving"], "shape": "hv"},
        row=5,
        col=1,
    )
    figure.add_scatter(
        x=t,
        y=[r["replicas_starting"] for r in rows],
        name="starting (cold)",
        stackgroup="replicas",
        line={"color": COLORS["starting"], "shape": "hv"},
        row=5,
        col=1,
    )
    figure.update_yaxes(rangemode="tozero", row=5, col=1)
    cold = [r for r in result.replicas if r["ready_at_s"] > r["requested_at_s"]]
    for replica in cold:
        figure.add_vrect(
            x0=replica["requested_at_s"],
            x1=replica["ready_at_s"],
            fillcolor=COLORS["starting"],
            opacity=0.08,
            line_width=0,
            row="all",
            col=1,
        )
    if cold:
        figure.add_annotation(
            x=cold[0]["requested_at_s"],
            y=0.97,
            xref="x",
            yref="y5 domain",
            xanchor="left",
            yanchor="top",
            showarrow=False,
            font={"size": 12, "color": "#7c2d12"},
            text=f"cold start {cold[0]['ready_at_s'] - cold[0]['requested_at_s']:.0f} s",
        )
    arrivals = result.scenario.traffic.arrivals
    if result.scenario.traffic.trace is None and getattr(arrivals, "kind", "") == "spike":
        figure.add_vrect(
            x0=arrivals.start_s,
            x1=arrivals.end_s,
            fillcolor="#64748b",
            opacity=0.08,
            line_width=0,
            annotation_text=f"{arrivals.multiplier:g}x spike",
            annotation_position="top left",
            row=1,
            col=1,
        )
    figure.update_xaxes(title_text="simulated time (s)", row=5, col=1)
    figure = _style(figure, height)
    figure.update_layout(bargap=0.1)
    return figure


def latency_vs_load(rows: list[dict], slo_ttft_s: float, height: int = 420) -> go.Figure:
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
        points = sorted(
            (row for row in rows if row["policy"] == policy), key=lambda row: row["load_rps"]
        )
        if not points:
            continue
        x = [row["load_rps"] for row in points]
        style = {"color": COLORS[policy], "width": 2.5}
        for col, key in enumerate(("e2e_mean_s", "ttft_p99_s", "throughput_rps"), start=1):
            figure.add_scatter(
                x=x,
                y=[row[key] for row in points],
                name=POLICY_NAMES[policy],
                line=style,
                mode="lines+markers",
                legendgroup=policy,
                showlegend=col == 1,
                row=1,
                col=col,
            )
    top = max((row["load_rps"] for row in rows), default=1.0)
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
    figure = _style(figure, height)
    figure.update_layout(hovermode="closest")
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
    figure = _style(figure, height, title)
    figure.update_layout(hovermode="closest", showlegend=False)
    return figure


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
    figure = _style(figure, height, title)
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
    figure = _style(figure, height)
    figure.update_layout(hovermode="closest", bargap=0)
    return figure


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
    figure = _style(figure, height)
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
    return _style(figure, height, "published measurements: simulated vs measured")


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
    figure = _style(figure, height, title)
    figure.update_layout(hovermode="closest")
    return figure


def pareto(
    points: list[dict],
    front: list[dict],
    recommendation: dict,
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
    if recommendation.get("ttft_p99_s") is not None:
        figure.add_scatter(
            x=[recommendation["cost_per_hour_usd"]],
            y=[recommendation["ttft_p99_s"]],
            mode="markers+text",
            name="recommendation",
            textposition="top center",
            text=[f"{recommendation['replicas']} × {recommendation['gpu']}"],
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
    figure = _style(figure, height)
    figure.update_layout(hovermode="closest")
    return figure


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
    figure = _style(figure, height)
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
    figure = _style(figure, height)
    figure.update_layout(hovermode="closest", barmode="group", bargap=0.25)
    return figure


def split_lines(colocated: SimResult, split: SimResult, height: int = 520) -> go.Figure:
    """Co-located vs disaggregated through the run: windowed P99 TTFT and the requests waiting, the
    disaggregated fleet's per pool."""
    figure = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=("P99 TTFT per window (s)", "requests waiting"),
    )
    series = [("co-located", colocated.timeseries), ("disaggregated", split.timeseries)]
    for i, (name, rows) in enumerate(series):
        times = [row["time_s"] for row in rows]
        figure.add_trace(
            go.Scatter(
                x=times,
                y=[row["ttft_p99_s"] for row in rows],
                name=f"{name}: P99 TTFT",
                line_color=SERIES[i],
            ),
            row=1,
            col=1,
        )
        if name == "co-located":
            figure.add_trace(
                go.Scatter(
                    x=times,
                    y=[row["waiting"] for row in rows],
                    name="co-located: waiting",
                    line_color=SERIES[i],
                ),
                row=2,
                col=1,
            )
    for j, (pool, rows) in enumerate(split.pools.items()):
        figure.add_trace(
            go.Scatter(
                x=[row["time_s"] for row in rows],
                y=[row["waiting"] for row in rows],
                name=f"{pool} pool: waiting",
                line_color=SERIES[(j + 2) % len(SERIES)],
            ),
            row=2,
            col=1,
        )
    figure.update_xaxes(title_text="time (s)", row=2, col=1)
    return _style(figure, height)
