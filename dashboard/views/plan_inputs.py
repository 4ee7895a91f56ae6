"""The Plan page's sidebar: the search (candidate GPUs, the largest fleet, the batch settings
grid, the comparisons asked for, the KV cache dtypes compared) and the SLO, each widget bound to its
`PlanSettings` or `SLO` field; returns the settings as nested data and the SLO's values."""

from __future__ import annotations

import streamlit as st

from dashboard import widgets as w
from dashboard.data import catalogs
from simulator.scenario import SLO, Scenario, SchedulerSettings

KEY = "plan_"


def inputs(scenario: Scenario):
    from simulator.planner.spec import BatchGrid, Candidate, PlanSettings

    side = st.sidebar
    catalog = catalogs.gpus()
    defaults = PlanSettings()
    side.subheader("Search")
    w.start(KEY + "gpus", [scenario.hardware.gpu] if scenario.hardware.gpu in catalog else [])
    w.start(KEY + "seqs", list(defaults.batch.max_num_seqs))
    w.start(KEY + "tokens", list(defaults.batch.max_num_batched_tokens))
    gpus = side.multiselect(
        "candidate GPUs",
        list(catalog),
        key=KEY + "gpus",
        persist_state=w.PERSIST,
        help=w.field_help(Candidate, "gpu"),
        format_func=lambda n: f"{n} (${catalog[n].price_usd_per_hour:.2f}/h)",
    )
    settings = {"candidates": [{"gpu": gpu} for gpu in gpus]}
    settings["max_replicas"] = w.number(
        PlanSettings, "max_replicas", 16, KEY + "max_replicas", "largest fleet searched", where=side
    )
    seqs = side.multiselect(
        "max_num_seqs values",
        sorted({32, 64, 128, 256, 512, *defaults.batch.max_num_seqs}),
        key=KEY + "seqs",
        help=w.field_help(BatchGrid, "max_num_seqs"),
        persist_state=w.PERSIST,
    )
    tokens = side.multiselect(
        "max_num_batched_tokens values",
        sorted({1024, 2048, 4096, 8192, 16384, *defaults.batch.max_num_batched_tokens}),
        key=KEY + "tokens",
        persist_state=w.PERSIST,
        help=w.field_help(BatchGrid, "max_num_batched_tokens"),
    )
    settings["batch"] = {"max_num_seqs": seqs, "max_num_batched_tokens": tokens}
    side.subheader("SLO")
    slo = scenario.slo.model_dump()
    slo["ttft_p99_s"] = w.number(
        SLO,
        "ttft_p99_s",
        slo["ttft_p99_s"],
        KEY + "ttft",
        "P99 TTFT (s)",
        where=side,
        step=0.5,
        fmt="%.2f",
    )
    slo["tpot_p99_s"] = w.number(
        SLO,
        "tpot_p99_s",
        slo["tpot_p99_s"],
        KEY + "tpot",
        "P99 TPOT (s)",
        where=side,
        step=0.01,
        fmt="%.3f",
    )
    with side.expander("Comparisons"):
        for name, label in (
            ("static_baseline", "traditional server"),
            ("autoscaled", "autoscaled fleet"),
            ("dynamic_batch", "SLO-aware batch size"),
            ("uncertainty", "± calibration error"),
        ):
            settings[name] = w.toggle(
                PlanSettings, name, getattr(defaults, name), KEY + name, label
            )
        w.start(KEY + "kv", [])
        settings["kv_cache_dtypes"] = st.multiselect(
            "KV cache dtypes (does FP8 KV help?)",
            w.choices(SchedulerSettings, "kv_cache_dtype"),
            key=KEY + "kv",
            help=w.field_help(
                PlanSettings, "kv_cache_dtypes", w.field_help(SchedulerSettings, "kv_cache_dtype")
            ),
            persist_state=w.PERSIST,
        )
    return settings, slo
