"""The What-if page's sidebar: traffic (a synthetic spike or a trace file), the fleet
(`whatif_fleet`), the engine's scheduler settings and the SLO, each widget bound to its `Scenario`
field (the scheduler's listed by name and drawn from their own definitions), preset from what other
pages handed over."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard import handoff
from dashboard import widgets as w
from dashboard.data import catalogs, trace_files
from dashboard.views.whatif_fleet import fleet_inputs
from simulator.scenario import (
    SLO,
    ClientSpec,
    Prices,
    SchedulerSettings,
    TrafficSpec,
)
from traces.arrivals import PoissonArrivals, SpikeArrivals

KEY = "whatif_"
SOURCES = ("synthetic spike", "trace file")
TRACE_REQUESTS = 3000  # a trace's first requests, by default: a re-render stays within seconds
# the engine's scheduler settings shown, by field name (each widget built from the field's definition)
SCHEDULER = (
    ("policy", "batching policy"),
    ("max_num_seqs", "max running requests per replica"),
    ("max_num_batched_tokens", "token budget per step"),
    ("batch_controller", "batch size controller"),
    ("batch_target_tpot_s", "controller's target TPOT (s)"),
    ("block_size", "KV block (tokens)"),
    ("gpu_memory_utilization", "GPU memory share"),
    ("kv_cache_dtype", "KV cache dtype"),
    ("batch_wait_steps", "hold new prompts up to (steps)"),
    ("batch_wait_max_tokens_ratio", "…or until step tokens reach (share of budget)"),
)
# a setting that only means something beside another: shown greyed out until that one is set
DEPENDS = {
    "batch_target_tpot_s": lambda engine: engine["batch_controller"] == "slo",
    "batch_wait_max_tokens_ratio": lambda engine: engine["batch_wait_steps"] > 0,
}


def _take_offers() -> None:
    """Preset the widgets from what the Traces and Calibrations pages handed over ("use it here")."""
    offer = handoff.take(handoff.TRACE, "whatif")
    if offer:
        st.session_state[KEY + "source"], st.session_state[KEY + "trace"] = (
            SOURCES[1],
            offer["path"],
        )
    offer = handoff.take(handoff.SPIKE, "whatif")
    if offer:
        st.session_state[KEY + "source"] = SOURCES[0]
        for name in ("rate", "multiplier", "start", "hold", "ramp", "duration"):
            st.session_state[KEY + name] = float(offer[name])
    offer = handoff.take(handoff.CALIBRATION, "whatif")
    if offer:
        st.session_state[KEY + "calibration"] = offer["path"]
        if offer["model"] in catalogs.model_names():
            st.session_state[KEY + "model"] = offer["model"]
        if offer.get("gpu") in catalogs.gpus():
            st.session_state[KEY + "gpu"] = offer["gpu"]
        st.session_state[KEY + "tp"] = int(offer.get("tensor_parallel") or 1)


def _traffic(side, traffic: dict) -> None:
    side.subheader("Traffic")
    source = side.radio(
        "traffic from",
        SOURCES,
        key=KEY + "source",
        horizontal=True,
        persist_state=w.PERSIST,
        help="a synthetic spike over Poisson arrivals, or a trace file (the Traces page can send one)",
    )
    spike = traffic["arrivals"]
    if source == SOURCES[1]:
        offered = handoff.offered(handoff.TRACE)
        files = [str(p) for p in trace_files.shared_traces()] + (
            [offered["path"]] if offered else []
        )
        if not files:
            side.warning(
                f"No trace in {trace_files.SHARED_TRACES}: upload one on the Traces page and use it here."
            )
            return
        traffic["trace"] = w.select(
            TrafficSpec,
            "trace",
            files[-1] if offered else files[0],
            KEY + "trace",
            "trace file",
            where=side,
            options=list(dict.fromkeys(files)),
            format_func=lambda p: Path(p).name,
        )
        left, right = side.columns(2)
        traffic["rate_scale"] = w.number(
            TrafficSpec,
            "rate_scale",
            1.0,
            KEY + "rate_scale",
            "rate × (speed-up)",
            where=left,
            step=0.5,
            fmt="%.2f",
        )
        traffic["max_requests"] = w.number(
            TrafficSpec,
            "max_requests",
            TRACE_REQUESTS,
            KEY + "max_requests",
            "first N requests",
            where=right,
            step=500,
            placeholder="all",
        )
        del traffic["arrivals"]
        return
    spike["base"]["rate_per_s"] = w.number(
        PoissonArrivals,
        "rate_per_s",
        spike["base"]["rate_per_s"],
        KEY + "rate",
        "baseline requests / s",
        where=side,
        step=0.1,
        fmt="%.2f",
        help_extra="(Poisson arrivals before and after the spike)",
    )
    spike["multiplier"] = w.number(
        SpikeArrivals,
        "multiplier",
        spike["multiplier"],
        KEY + "multiplier",
        "spike multiplier (x baseline)",
        where=side,
        step=1.0,
        fmt="%.1f",
        help_extra="The rate at the top of the spike is baseline × multiplier.",
    )
    left, right = side.columns(2)
    spike["start_s"] = w.number(
        SpikeArrivals,
        "start_s",
        spike["start_s"],
        KEY + "start",
        "spike starts at (s)",
        where=left,
        step=10.0,
        fmt="%.0f",
    )
    spike["hold_s"] = w.number(
        SpikeArrivals,
        "hold_s",
        spike["hold_s"],
        KEY + "hold",
        "spike holds for (s)",
        where=right,
        step=10.0,
        fmt="%.0f",
    )
    ramp = w.number(
        SpikeArrivals,
        "ramp_up_s",
        spike["ramp_up_s"],
        KEY + "ramp",
        "ramp (s)",
        where=left,
        step=5.0,
        fmt="%.0f",
        help_extra="(up, and the same down)",
    )
    spike["ramp_up_s"] = spike["ramp_down_s"] = ramp
    traffic["duration_s"] = w.number(
        TrafficSpec,
        "duration_s",
        traffic["duration_s"],
        KEY + "duration",
        "traffic lasts (s)",
        where=right,
        step=60.0,
        fmt="%.0f",
    )


def _engine_and_slo(side, base: dict) -> None:
    engine = base["scheduler"]
    with side.expander("Scheduler settings"):
        for name, label in SCHEDULER:
            options = {"disabled": not DEPENDS[name](engine)} if name in DEPENDS else {}
            engine[name] = w.field(
                SchedulerSettings, name, engine[name], KEY + name, label, **options
            )
    with side.expander("Clients, SLO and price"):
        base["clients"]["ttft_timeout_s"] = w.number(
            ClientSpec,
            "ttft_timeout_s",
            base["clients"]["ttft_timeout_s"],
            KEY + "timeout",
            "client gives up after (s)",
            fmt="%.1f",
            placeholder="never",
        )
        left, right = st.columns(2)
        base["slo"]["ttft_p99_s"] = w.number(
            SLO,
            "ttft_p99_s",
            base["slo"]["ttft_p99_s"],
            KEY + "slo",
            "SLO P99 TTFT (s)",
            where=left,
            step=0.5,
            fmt="%.2f",
        )
        base["slo"]["tpot_p99_s"] = w.number(
            SLO,
            "tpot_p99_s",
            base["slo"]["tpot_p99_s"],
            KEY + "slo_tpot",
            "SLO P99 TPOT (s)",
            where=right,
            step=0.01,
            fmt="%.3f",
        )
        gpu = catalogs.gpus().get(base["hardware"]["gpu"])
        base["prices"]["gpu_usd_per_hour"] = w.number(
            Prices,
            "gpu_usd_per_hour",
            base["prices"]["gpu_usd_per_hour"],
            KEY + "price",
            "price per GPU-hour ($)",
            fmt="%.2f",
            step=0.1,
            placeholder=f"catalog: {gpu.price_usd_per_hour:.2f}" if gpu else "catalog",
            help_extra=f"Empty: the catalog's {gpu.price_usd_per_hour:.2f} $/h ({gpu.price_source}, {gpu.price_date})."
            if gpu
            else "",
        )


def inputs(base: dict) -> dict:
    """Sidebar widgets, each bound to its scenario field; returns the scenario as nested data."""
    _take_offers()
    side = st.sidebar
    _traffic(side, base["traffic"])
    fleet_inputs(side, base, KEY)
    _engine_and_slo(side, base)
    return base
