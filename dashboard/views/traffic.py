"""Traces: look at traffic before simulating it — a public production trace, a file of your own (any
format `traces` reads, detected from its first line), or a synthetic spike: request rate over time,
burstiness, and prompt/output length distributions with their lognormal fits; then "use it" sends the
traffic to the What-if page (and through it to the Plan page)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard import handoff, views
from dashboard import widgets as w
from dashboard.charts.traffic import lengths, rate
from dashboard.data import trace_files
from simulator.scenario import Scenario, TrafficSpec
from traces.arrivals import PoissonArrivals, SpikeArrivals

KEY = "traces_"
SOURCES = ("public trace", "your file", "synthetic spike")


def _spike_inputs(side) -> dict:
    """The synthetic spike's parameters, under the names the What-if page takes them by."""
    return {
        "rate": w.number(
            PoissonArrivals,
            "rate_per_s",
            2.0,
            KEY + "rate",
            "baseline requests / s",
            where=side,
            step=0.5,
            fmt="%.2f",
        ),
        "multiplier": w.number(
            SpikeArrivals,
            "multiplier",
            10.0,
            KEY + "multiplier",
            "spike multiplier",
            where=side,
            step=1.0,
            fmt="%.1f",
        ),
        "duration": w.number(
            TrafficSpec,
            "duration_s",
            1200.0,
            KEY + "duration",
            "duration (s)",
            where=side,
            step=60.0,
            fmt="%.0f",
        ),
        "start": w.number(
            SpikeArrivals,
            "start_s",
            300.0,
            KEY + "start",
            "spike starts at (s)",
            where=side,
            step=30.0,
            fmt="%.0f",
        ),
        "hold": w.number(
            SpikeArrivals,
            "hold_s",
            300.0,
            KEY + "hold",
            "spike holds for (s)",
            where=side,
            step=30.0,
            fmt="%.0f",
        ),
        "ramp": w.number(
            SpikeArrivals,
            "ramp_up_s",
            60.0,
            KEY + "ramp",
            "ramp up / down (s)",
            where=side,
            step=10.0,
            fmt="%.0f",
        ),
    }


def _describe_source() -> tuple[dict | None, str | None]:
    side = st.sidebar
    w.start(KEY + "source", SOURCES[0])
    source = side.radio(
        "traffic from",
        SOURCES,
        key=KEY + "source",
        help=w.field_help(TrafficSpec, "trace"),
        persist_state=w.PERSIST,
    )
    window = w.number(
        Scenario,
        "window_s",
        60.0,
        KEY + "window",
        "rate window (s)",
        where=side,
        step=10.0,
        fmt="%.0f",
    )
    if source == SOURCES[0]:
        files = trace_files.shared_traces()
        if not files:
            return (
                None,
                f"No public traces found in {trace_files.SHARED_TRACES}; upload one instead.",
            )
        default = next(
            (p for p in files if "conv" in p.name), files[0]
        )  # the chat trace, the article's case
        path = w.select(
            TrafficSpec,
            "trace",
            str(default),
            KEY + "file",
            "trace file",
            where=side,
            options=[str(p) for p in files],
            format_func=lambda p: Path(p).name,
        )
        with st.spinner(f"Reading {Path(path).name}…"):
            return trace_files.trace_file(path, Path(path).stat().st_mtime, window)
    if source == SOURCES[1]:
        upload = side.file_uploader(
            "trace file",
            key=KEY + "upload",
            help=w.field_help(TrafficSpec, "trace"),
            type=["csv", "jsonl", "json", "gz"],
        )
        if upload is None:
            return None, None
        return trace_files.trace_upload(upload.getvalue(), upload.name, window)
    spike = _spike_inputs(side)
    if None in (*spike.values(), window):
        return None, "Every synthetic-spike input needs a value."
    described, error = trace_files.trace_spike(
        spike["rate"],
        spike["multiplier"],
        spike["duration"],
        spike["start"],
        spike["ramp"],
        spike["hold"],
        window,
    )
    return (None, error) if error else ({**described, "spike": spike}, None)


def _use_it(described: dict) -> None:
    """Send this traffic to the What-if page (which the Plan page plans for)."""
    name = described["stats"]["name"]
    if st.button(
        "Use this traffic on the What-if and Plan pages", key=KEY + "use", icon=":material/send:"
    ):
        if "spike" in described:
            handoff.offer(handoff.SPIKE, described["spike"])
        else:
            handoff.offer(handoff.TRACE, {"path": described["path"], "name": name})
        st.session_state[KEY + "sent"] = name
    if st.session_state.get(KEY + "sent") == name:
        st.success(f"The What-if page now simulates **{name}**.")
        views.link("whatif", "Open the What-if page")


def render() -> None:
    st.title("Traces")
    described, error = _describe_source()
    if error:
        st.error(error)
        return
    if described is None:
        st.info(
            "Upload a trace: Azure (2023/2024), BurstGPT, Mooncake, Vidur, or surgeplan JSONL/CSV — the format "
            "is detected from the first line. Plain or gzip-compressed."
        )
        return
    stats = described["stats"]
    st.caption(
        f"**{stats['name']}** — format `{described['format']}`; "
        + "; ".join(stats["provenance"][:3])
    )
    _use_it(described)
    columns = st.columns(5)
    columns[0].metric("Requests", f"{stats['requests']:,}", border=True)
    columns[1].metric("Duration", f"{stats['duration_s'] / 60:.1f} min", border=True)
    columns[2].metric("Mean rate", f"{stats['mean_rate_per_s']:.2f} req/s", border=True)
    columns[3].metric(
        "Peak / mean",
        f"{stats['peak_to_mean']:.1f}x",
        f"peak {stats['peak_rate_per_s']:.1f} req/s",
        delta_color="off",
        delta_arrow="off",
        border=True,
        help=f"the busiest {stats['window_s']:g} s window against the mean rate",
    )
    cv = stats["interarrival_cv"]
    columns[4].metric(
        "Burstiness (gap CV)",
        "n/a" if cv is None else f"{cv:.2f}",
        "Poisson: 1",
        delta_color="off",
        delta_arrow="off",
        border=True,
        help="coefficient of variation of the gaps between arrivals: 1 for Poisson, above 1 bursty",
    )
    if stats["requests"] == 0:
        st.warning("This trace has no requests.")
        return
    st.plotly_chart(
        rate(
            described["starts"],
            described["rates"],
            stats["window_s"],
            stats["mean_rate_per_s"],
            "Request rate over time",
        ),
        key="traces_chart_rate",
    )
    st.plotly_chart(
        lengths(described["prompt"], described["output"], described["lognormal"]),
        key="traces_chart_lengths",
    )
    rows = [
        {
            "tokens": column,
            **{
                k: stats[f"{column}_tokens"][k] for k in ("mean", "min", "p50", "p90", "p99", "max")
            },
        }
        for column in ("prompt", "output")
    ]
    st.dataframe(
        rows,
        hide_index=True,
        column_config={
            k: st.column_config.NumberColumn(format="%.0f") for k in ("mean", "p50", "p90", "p99")
        },
    )
    extra = []
    if stats["failed_requests"]:
        extra.append(f"{stats['failed_requests']:,} requests flagged failed")
    if stats["prefix_block_repeat_share"] is not None:
        extra.append(
            f"{stats['prefix_block_repeat_share']:.0%} of prompt blocks repeat an earlier block (cacheable)"
        )
    if len(stats["tenants"]) > 1:
        extra.append("tenants: " + ", ".join(f"{k} {v:,}" for k, v in stats["tenants"].items()))
    if extra:
        st.caption("; ".join(extra))
