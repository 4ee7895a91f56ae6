"""Plan: the cheapest fleet and batch settings that hold the SLO through the What-if page's traffic,
per GPU type and overall — cost per hour, per request and per 1M output tokens, the binding constraint
(what the fleet with one replica fewer misses), the error band from the calibration, the fixed fleet
against an autoscaled one and the other baselines it beats (static batching, the SLO-aware batch
controller), the cost vs P99 Pareto chart, and every simulation behind it (the ledger, as CSV). All
from `simulator.planner.plan`; a plan with no answer (an SLO no fleet in range meets) is explained."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import streamlit as st
import yaml

from dashboard import handoff, views
from dashboard.charts.pareto import pareto
from dashboard.data import plans, scenarios
from dashboard.views.plan_inputs import KEY, inputs
from simulator.planner.report import PlanReport
from simulator.scenario import SLO, Scenario

HIGHLIGHT = "background-color: #fef9c3; font-weight: 600"
TERMS = {
    "slo_ttft": "P99 TTFT",
    "slo_tpot": "P99 TPOT",
    "timeouts": "abandon rate",
    "goodput": "goodput share",
    "kv_capacity": "KV capacity",
    "does_not_fit": "does not fit",
}


def _kv_cache(report: PlanReport) -> None:
    """What each KV cache dtype buys (simulated) beside what it costs (measured quality)."""
    rows = []
    for row in report.kv_cache_dtypes:
        quality = row.quality or {}
        rows.append(
            {
                "KV cache dtype": row.kv_cache_dtype,
                "KV blocks / replica": row.kv_blocks_per_replica,
                "replicas": row.replicas,
                "GPUs": row.gpus,
                "$ / 1k requests": None
                if row.cost_per_request_usd is None
                else row.cost_per_request_usd * 1000,
                "P99 TTFT (s)": row.ttft_p99_s,
                "P99 TPOT (s)": row.tpot_p99_s,
                "KL divergence (measured)": quality.get("kl_divergence"),
                "top-1 agreement (measured)": quality.get("top1_agreement"),
                "perplexity (measured)": quality.get("perplexity"),
            }
        )
    if rows:
        st.subheader("Does FP8 KV help? What each KV cache dtype buys, and what it costs")
        st.dataframe(
            rows,
            hide_index=True,
            column_config={
                "$ / 1k requests": st.column_config.NumberColumn(format="$%.3f"),
                "top-1 agreement (measured)": st.column_config.NumberColumn(format="%.3f"),
            },
        )
        st.caption(
            "Buys: simulated (KV blocks from the one memory formula; decode attention from the KV bytes "
            "read, labelled derived). Costs: measured by benchmarks/kv_cache_quality.py on a small model "
            "trained locally, against the unquantised cache."
        )


def _recommendation(report: PlanReport) -> None:
    r = report.recommendation
    st.success(r.sentence)
    cols = st.columns(5)
    plural = "s" if r.replicas != 1 else ""
    cols[0].metric(
        "Fleet",
        f"{r.gpus} GPU{'s' if r.gpus != 1 else ''}",
        f"{r.replicas} × {r.gpu}",
        delta_color="off",
        delta_arrow="off",
        border=True,
        help=f"{r.replicas} replica{plural} of {r.tensor_parallel} × {r.gpu} (tensor parallel)",
    )
    cols[1].metric("Cost per hour", f"${r.cost_per_hour_usd:,.2f}", border=True)
    cost = r.cost_per_request_usd
    cols[2].metric(
        "Cost / 1k requests", "n/a" if cost is None else f"${cost * 1000:.3f}", border=True
    )
    binding = r.binding_constraint or "—"
    cols[3].metric(
        "Binding constraint",
        TERMS.get(binding, binding.split(":")[0]),
        "−1 replica misses it"
        if r.one_fewer_misses
        else "smallest fleet searched"
        if binding.startswith("none")
        else None,
        delta_color="off",
        delta_arrow="off",
        border=True,
        help="the SLO term that a fleet one replica smaller misses"
        + (f" ({binding})" if ":" in binding else ""),
    )
    cols[4].metric(
        "P99 TTFT",
        "n/a" if r.ttft_p99_s is None else f"{r.ttft_p99_s:.2f} s",
        f"{r.headroom:.0%} headroom" if r.headroom is not None else None,
        delta_color="off",
        delta_arrow="off",
        border=True,
        help=f"headroom on {TERMS.get(r.headroom_term, r.headroom_term)}: how far the "
        "tightest SLO term is from its limit",
    )
    calibration = r.calibration or {}
    error = calibration.get("fit_error")
    st.caption(
        f"Every figure on this page is simulated with calibration **{calibration.get('name')}** "
        f"({calibration.get('label')}"
        + (f", fit error {error:.1%}" if error is not None else "")
        + ")."
    )
    band = report.uncertainty
    if band:
        st.info(f"**Error band** ({band.source}): {band.text}.", icon=":material/error_med:")


def _comparisons(report: PlanReport) -> None:
    r = report.recommendation
    rows = [
        {
            "fleet": f"fixed: the recommendation ({r.replicas} × {r.gpu})",
            "GPUs": r.gpus,
            "cost per hour": r.cost_per_hour_usd,
            "cost per 1,000 requests": (r.cost_per_request_usd or 0) * 1000 or None,
            "status": "meets",
        }
    ]
    for other, label in (
        (report.static_baseline, "traditional server (static batching)"),
        (report.dynamic_batch, "SLO-aware batch size"),
    ):
        if other:
            rows.append(
                {
                    "fleet": label,
                    "GPUs": other.gpus,
                    "cost per hour": other.cost_per_hour_usd,
                    "cost per 1,000 requests": (other.cost_per_request_usd or 0) * 1000 or None,
                    "status": other.status
                    if other.replicas
                    else f"misses up to {other.searched_up_to}",
                }
            )
    scaled = report.autoscaled
    if scaled:
        rows.append(
            {
                "fleet": f"autoscaled: warm pool {scaled.warm_pool} of up to {scaled.max_replicas}",
                "GPUs": scaled.replicas_peak,
                "cost per hour": scaled.cost_per_hour_usd,
                "cost per 1,000 requests": (scaled.cost_per_request_usd or 0) * 1000 or None,
                "status": "meets" if scaled.meets else "misses",
            }
        )
    if len(rows) > 1:
        st.subheader("Fixed fleet against the alternatives")
        st.dataframe(
            rows,
            hide_index=True,
            column_config={
                "cost per hour": st.column_config.NumberColumn(format="$%.2f"),
                "cost per 1,000 requests": st.column_config.NumberColumn(format="$%.3f"),
            },
        )


def _per_gpu(report: PlanReport) -> None:
    """One row per candidate GPU type, the recommendation highlighted."""
    r = report.recommendation
    rows = [
        {
            "": "★" if (row.gpu, row.tensor_parallel) == (r.gpu, r.tensor_parallel) else "",
            "GPU (TP)": f"{row.gpu} ({row.tensor_parallel})",
            "replicas": row.replicas,
            "GPUs": row.gpus,
            "batch (seqs / tokens)": f"{row.max_num_seqs} / {row.max_num_batched_tokens}",
            "$ / hour": row.cost_per_hour_usd,
            "$ / 1k requests": None
            if row.cost_per_request_usd is None
            else row.cost_per_request_usd * 1000,
            "$ / 1M output tokens": row.cost_per_million_output_tokens_usd,
            "P99 TTFT (s)": row.ttft_p99_s,
            "binding": TERMS.get(
                row.binding_constraint, (row.binding_constraint or "").split(":")[0]
            ),
            "calibration": f"{row.calibration['name']} ({row.calibration['label']})"
            if row.calibration
            else "—",
            "status": row.status,
            "why": row.reason or "",
        }
        for row in report.per_gpu_type
    ]
    table = pd.DataFrame(rows)
    if not table["why"].any():  # every candidate met the SLO: no reason to give
        table = table.drop(columns="why")
    styled = table.style.apply(lambda row: [HIGHLIGHT if row[""] else ""] * len(row), axis=1)
    st.dataframe(
        styled,
        hide_index=True,
        column_config={
            "": st.column_config.TextColumn(
                width="small", help="the recommendation: the cheapest per hour"
            ),
            "$ / hour": st.column_config.NumberColumn(format="$%.2f"),
            "$ / 1k requests": st.column_config.NumberColumn(format="$%.3f"),
            "$ / 1M output tokens": st.column_config.NumberColumn(format="$%.2f"),
            "P99 TTFT (s)": st.column_config.NumberColumn(format="%.2f"),
        },
    )


def render() -> None:
    st.title("Plan the fleet")
    stored = st.session_state.get(handoff.SCENARIO)
    scenario = Scenario.model_validate_json(stored) if stored else scenarios.default_whatif()
    traffic = scenario.traffic
    what = (
        f"the trace {Path(traffic.trace).name}"
        if traffic.trace
        else f"{traffic.duration_s:g} s of synthetic "
        "traffic" + (" with a spike" if getattr(traffic.arrivals, "kind", "") == "spike" else "")
    )
    st.caption(
        f"Traffic from the What-if page{'' if stored else ' (its default)'}: {what}, for "
        f"{scenario.model.name}. Change it there; search settings and the SLO are here."
    )
    views.link("whatif", "Change the traffic on the What-if page")
    settings, slo = inputs(scenario)
    batch = settings["batch"]
    if (
        not settings["candidates"]
        or not batch["max_num_seqs"]
        or not batch["max_num_batched_tokens"]
    ):
        st.error(
            "Pick at least one candidate GPU, one max_num_seqs and one max_num_batched_tokens value."
        )
        return
    if None in slo.values() or settings["max_replicas"] is None:
        st.error("The SLO and the largest fleet need values.")
        return
    scenario = scenario.model_copy(update={"slo": SLO.model_validate(slo)})
    request = json.dumps([scenario.model_dump_json(), settings], sort_keys=True)
    if st.button("Plan", type="primary", key=KEY + "run"):
        st.session_state[KEY + "request"] = request
    if st.session_state.get(KEY + "request") != request:
        st.info(
            "Press **Plan** to search: each candidate fleet is simulated through the whole traffic; a search "
            "takes from seconds to a few minutes."
        )
        return
    with st.spinner("Searching fleets and batch settings…"):
        answer, error = plans.plan(scenario.model_dump_json(), settings)
    if error:
        st.error(error)
        return
    report = answer.report
    _recommendation(report)
    st.plotly_chart(
        pareto(
            answer.pareto_points,
            answer.pareto_front,
            report.recommendation,
            scenario.slo.ttft_p99_s,
        ),
        key=KEY + "pareto",
    )
    st.subheader("Per GPU type")
    _per_gpu(report)
    _comparisons(report)
    _kv_cache(report)
    simulations = report.simulations
    st.caption(
        f"{simulations.evaluated} candidate fleets evaluated ({simulations.simulated} "
        f"simulated) in {report.elapsed_s or 0:.0f} s."
    )
    left, middle, right = st.columns(3)
    left.download_button(
        f"Download the ledger ({answer.ledger_rows} rows, CSV)",
        answer.ledger_csv,
        file_name="ledger.csv",
        mime="text/csv",
        key=KEY + "ledger",
    )
    middle.download_button(
        "Download plan.json",
        json.dumps(report.to_json(), indent=1, default=str),
        file_name="plan.json",
        key=KEY + "json",
    )
    right.download_button(
        "Download the recommended scenario",
        yaml.safe_dump(report.recommended_scenario, sort_keys=False),
        file_name="recommended.yaml",
        key=KEY + "yaml",
    )
