"""Traditional vs paged: the same replica under the same Poisson load, once with continuous batching
over a paged KV cache and once with static batching that reserves each request's longest possible
sequence up front. Latency-vs-load curves, KV utilisation, throughput at saturation and the fleet each
needs, beside the claims that motivated the project and what our own engine measured on a CPU."""

from __future__ import annotations

import streamlit as st

from dashboard import widgets as w
from dashboard.charts.load import latency_vs_load
from dashboard.charts.style import POLICY_NAMES
from dashboard.data import catalogs, saved_files, scenarios
from dashboard.data.scenarios import LoadPoint
from simulator.scenario import (
    SLO,
    HardwareChoice,
    ModelChoice,
    SchedulerSettings,
    TrafficSpec,
)
from simulator.summary import SimSummary
from traces.arrivals import PoissonArrivals

KEY = "paged_"
LEVELS = 6  # load levels per curve, evenly spaced up to the highest load


def _inputs(base: dict) -> tuple[dict, float, float]:
    side = st.sidebar
    catalog = catalogs.gpus()
    side.subheader("One replica")
    base["model"]["name"] = w.select(
        ModelChoice,
        "name",
        base["model"]["name"],
        KEY + "model",
        "model",
        where=side,
        options=catalogs.model_names(),
    )
    base["hardware"]["gpu"] = w.select(
        HardwareChoice,
        "gpu",
        base["hardware"]["gpu"],
        KEY + "gpu",
        "GPU",
        where=side,
        options=list(catalog),
    )
    base["scheduler"]["max_num_seqs"] = w.number(
        SchedulerSettings,
        "max_num_seqs",
        base["scheduler"]["max_num_seqs"],
        KEY + "max_num_seqs",
        "max running requests",
        where=side,
    )
    side.subheader("Load sweep")
    highest = w.number(
        PoissonArrivals,
        "rate_per_s",
        6.0,
        KEY + "highest",
        "highest load (requests / s)",
        where=side,
        step=0.5,
        fmt="%.1f",
        help_extra=f"({LEVELS} evenly spaced Poisson loads up to this one)",
    )
    base["traffic"]["duration_s"] = w.number(
        TrafficSpec,
        "duration_s",
        base["traffic"]["duration_s"],
        KEY + "duration",
        "traffic per point (s)",
        where=side,
        step=30.0,
        fmt="%.0f",
    )
    base["slo"]["ttft_p99_s"] = w.number(
        SLO,
        "ttft_p99_s",
        base["slo"]["ttft_p99_s"],
        KEY + "slo",
        "SLO: P99 TTFT (s)",
        where=side,
        step=0.5,
        fmt="%.2f",
    )
    side.subheader("Fleet")
    fleet = w.number(
        PoissonArrivals,
        "rate_per_s",
        250.0,
        KEY + "fleet",
        "fleet traffic (requests / s)",
        where=side,
        step=10.0,
        fmt="%.0f",
        help_extra="(the whole service's rate, for the GPU count)",
    )
    return base, highest, fleet


def _sweep(base, loads: list[float]) -> tuple[list[LoadPoint], dict | None, str | None]:
    points = [(policy, load) for policy in ("continuous", "static") for load in loads]
    bar = st.progress(0.0, text="Simulating the load sweep…")
    rows, facts = [], None
    for i, (policy, load) in enumerate(points):
        result, error = scenarios.run(scenarios.policy_point(base, policy, load))
        if error:
            bar.empty()
            return [], None, error
        facts = result.facts
        rows.append(LoadPoint(policy, load, result.summary))
        bar.progress((i + 1) / len(points), text=f"Simulated {policy} at {load:g} requests/s")
    bar.empty()
    return rows, facts, None


def _at(rows: list[LoadPoint], policy: str, load: float) -> SimSummary:
    return next(row for row in rows if row.policy == policy and row.load_rps == load).summary


def _engine_measured() -> dict | None:
    """The live engine's own CPU benchmark (benchmarks/engine_cpu.py), when its results are present."""
    bench, _ = saved_files.read_json(saved_files.ENGINE_BENCH_JSON)
    if not bench:
        return None
    offline = {row["label"]: row for row in bench.get("offline", [])}
    cont, static = offline.get("continuous (paged)"), offline.get("static (reserve max_model_len)")
    online = {row["label"]: row for row in bench.get("online", [])}
    latency = [
        (
            label.split(", ")[1],
            online[label]["mean_latency_s"]
            / online[label.replace("continuous", "static")]["mean_latency_s"],
        )
        for label in online
        if label.startswith("continuous") and label.replace("continuous", "static") in online
    ]
    if not cont or not static:
        return None
    return {
        "machine": bench.get("machine", ""),
        "kv": (cont["kv_utilization"], static["kv_utilization"]),
        "throughput": cont["output_tokens_per_s"] / static["output_tokens_per_s"],
        "latency": latency,
    }


def _spread(summary: SimSummary) -> float | None:
    """TTFT variability: P99 over P50 time to first token."""
    return (
        summary.ttft_p99_s / summary.ttft_p50_s
        if summary.ttft_p50_s and summary.ttft_p99_s
        else None
    )


def _claims(
    cont: SimSummary,
    static: SimSummary,
    compare_load: float,
    throughput_ratio: float,
    per_100: int,
    fleet: dict,
    facts: dict,
    measured: dict | None,
) -> str:
    """The decision table: each row's claim, our simulated figure and what our own engine measured."""
    calibration = f"{facts['calibration']['name']}, {facts['calibration']['label']}"
    m = measured or {}
    kv_m = f"{m['kv'][0]:.0%} vs {m['kv'][1]:.0%}" if m else "—"
    lat_m = ", ".join(f"{ratio:.2f}x at {load}" for load, ratio in m.get("latency", [])) or "—"
    thr_m = f"{m['throughput']:.2f}x output tokens/s" if m else "—"
    spread_text = "; ".join(
        f"{name} {row.ttft_p50_s:.2f}–{row.ttft_p99_s:.2f} s ({_spread(row):.1f}x)"
        if _spread(row)
        else f"{name} n/a"
        for name, row in (("continuous", cont), ("static", static))
    )
    at = f"at {compare_load:g} req/s"
    cost = " vs ".join(
        "n/a" if fleet[p]["cost"] is None else f"${fleet[p]['cost']:,.0f}/h"
        for p in ("continuous", "static")
    )
    return "\n".join(
        [
            f"| | claimed | simulated here ({calibration}) | measured on our engine (CPU) |",
            "| --- | --- | --- | --- |",
            (
                f"| KV cache holding tokens, paged vs reserved | near-full vs mostly wasted (vLLM paper: under 4% waste; "
                f"20–38% used by earlier servers) | {cont.kv_utilization:.0%} vs {static.kv_utilization:.0%} "
                f"| {kv_m} |"
            ),
            (
                f"| mean latency, continuous / static | about 50% lower | {cont.e2e_mean_s / static.e2e_mean_s:.2f}x "
                f"{at} | {lat_m} |"
            ),
            (
                f"| P99 latency, continuous / static | lower: no request waits for a whole batch | "
                f"{cont.e2e_p99_s / static.e2e_p99_s:.2f}x {at} | — |"
            ),
            f"| throughput, continuous / static | 2–4x | {throughput_ratio:.2f}x requests/s at saturation | {thr_m} |",
            (
                f"| TTFT variability, P50–P99 (P99 / P50) | steady first tokens vs a wait for the batch "
                f"| {spread_text}, {at} | — |"
            ),
            f"| GPUs for the same traffic | 100 → 40–50 A100s | 100 → {per_100} | — |",
            f"| cost of the fleet for {fleet['rate']:g} req/s, continuous vs static | less than half | {cost} | — |",
        ]
    )


def render() -> None:
    st.title("Traditional vs paged")
    st.caption(
        "One replica, the same Poisson traffic: **continuous batching over a paged KV cache** (vLLM's rule) "
        "against **static batching** that admits a batch together and reserves KV for each request's longest "
        "possible sequence. Both run the engine's own scheduler and block manager."
    )
    values, highest, fleet = _inputs(scenarios.default_policy_base().model_dump(mode="json"))
    base, error = scenarios.build_scenario(values)
    if error:
        st.error(f"These inputs do not make a valid scenario: {error}")
        return
    loads = [round(highest * (i + 1) / LEVELS, 3) for i in range(LEVELS)]
    rows, facts, error = _sweep(base, loads)
    if error:
        st.error(error)
        return
    by_policy = {p: [row for row in rows if row.policy == p] for p in ("continuous", "static")}
    keeping_up = [load for load in loads if _at(rows, "static", load).throughput_rps >= 0.9 * load]
    compare = max(keeping_up) if keeping_up else loads[0]
    cont, static = _at(rows, "continuous", compare), _at(rows, "static", compare)
    saturation = {p: scenarios.capacity_rps(by_policy[p], slo_bound=False) for p in by_policy}
    within_slo = {p: scenarios.capacity_rps(by_policy[p], slo_bound=True) for p in by_policy}
    if not all(saturation.values()):
        st.error(
            "A policy completed no request in the sweep; raise the traffic per point or the highest load."
        )
        return
    throughput_ratio = saturation["continuous"] / saturation["static"]
    per_100 = int(-(-100 * saturation["static"] // saturation["continuous"]))
    kv = (cont.kv_utilization, static.kv_utilization)
    latency_ratio = cont.e2e_mean_s / static.e2e_mean_s
    columns = st.columns(4)
    columns[0].metric(
        "KV cache holding tokens",
        f"{kv[0]:.0%} vs {kv[1]:.0%}",
        "continuous vs static",
        delta_color="off",
        delta_arrow="off",
        border=True,
        help=f"tokens stored / slots reserved, at {compare:g} req/s",
    )
    columns[1].metric(
        "Mean latency ratio",
        f"{latency_ratio:.2f}x",
        f"continuous / static at {compare:g} req/s",
        delta_color="off",
        delta_arrow="off",
        border=True,
        help="mean end-to-end latency, continuous over static, at the highest swept load static "
        "batching keeps up with",
    )
    columns[2].metric(
        "Throughput at saturation",
        f"{throughput_ratio:.2f}x",
        f"{saturation['continuous']:.2f} vs {saturation['static']:.2f} req/s per replica",
        delta_color="off",
        delta_arrow="off",
        border=True,
    )
    columns[3].metric(
        "100 static GPUs become",
        f"{per_100} GPUs",
        "with continuous batching",
        delta_color="off",
        delta_arrow="off",
        border=True,
        help="the same traffic at each policy's saturation throughput",
    )
    calibration = facts["calibration"]
    st.caption(
        f"Every simulated number on this page: calibration **{calibration['name']}** ({calibration['label']}), "
        f"{facts['kv_blocks_per_replica']:,} KV blocks × {facts['block_size']} tokens, max_model_len "
        f"{facts['max_model_len']:,} (what static batching reserves per request)."
    )
    st.plotly_chart(latency_vs_load(rows, base.slo.ttft_p99_s), key="paged_curves")
    tp, price = base.hardware.tensor_parallel, facts["price_usd_per_gpu_hour"]
    fleet_rows, fleet_cost = [], {"rate": fleet}
    for bound, capacity in (
        ("throughput at saturation", saturation),
        (f"within the SLO (P99 TTFT ≤ {base.slo.ttft_p99_s:g} s)", within_slo),
    ):
        for p in by_policy:
            gpus = scenarios.gpus_needed(fleet, capacity[p], tp)
            fleet_rows.append(
                {
                    "policy": POLICY_NAMES[p],
                    "sized by": bound,
                    "req/s per replica": capacity[p],
                    "GPUs": gpus,
                    "$ / hour": None if gpus is None else gpus * price,
                }
            )
            if capacity is saturation:  # the decision table compares fleets sized by throughput
                fleet_cost[p] = {"cost": fleet_rows[-1]["$ / hour"]}
    st.subheader(f"Fleet for {fleet:g} requests/s")
    st.dataframe(
        fleet_rows,
        hide_index=True,
        column_config={
            "req/s per replica": st.column_config.NumberColumn(format="%.2f"),
            "$ / hour": st.column_config.NumberColumn(format="dollar"),
        },
    )
    st.caption(
        f"At ${price:.2f} per GPU-hour (the catalog's {base.hardware.gpu} price); empty where no swept load "
        "met the bound."
    )
    if within_slo["static"] is None:
        st.caption(
            f"Static batching met the {base.slo.ttft_p99_s:g} s P99 TTFT SLO at no swept load: a request that "
            "arrives during a batch waits for the whole batch to finish."
        )
    st.subheader("The decision table: claims beside our numbers")
    measured = _engine_measured()
    st.markdown(
        _claims(cont, static, compare, throughput_ratio, per_100, fleet_cost, facts, measured)
    )
    if measured:
        st.caption(f"Engine column: `benchmarks/engine_cpu.py` (cpu-small, {measured['machine']}).")
