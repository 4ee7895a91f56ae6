"""Plan: the cheapest fleet and batch settings that hold the SLO through the What-if page's traffic,
per GPU type and overall — cost per hour and per request, the binding constraint, the fleet with one
replica fewer, error bars from the calibration, and the baselines it beats (static batching, an
autoscaled fleet, the SLO-aware batch controller). All from `simulator.planner.plan`."""
from __future__ import annotations

import json

import streamlit as st
import yaml

from dashboard import charts, data
from dashboard import widgets as w
from simulator.scenario import SLO, Scenario

KEY = "plan_"
SCENARIO_KEY = "whatif_scenario"     # written by the What-if page: the traffic this page plans for
TERMS = {"slo_ttft": "P99 TTFT", "slo_tpot": "P99 TPOT", "timeouts": "abandon rate", "goodput": "goodput share",
         "kv_capacity": "KV capacity", "does_not_fit": "does not fit"}


def _inputs(scenario: Scenario):
    from simulator.planner.spec import BatchGrid, Candidate, PlanSettings
    side = st.sidebar
    catalog = data.gpus()
    defaults = PlanSettings()
    side.subheader("Search")
    st.session_state.setdefault(KEY + "gpus", [scenario.hardware.gpu] if scenario.hardware.gpu in catalog else [])
    st.session_state.setdefault(KEY + "seqs", list(defaults.batch.max_num_seqs))
    st.session_state.setdefault(KEY + "tokens", list(defaults.batch.max_num_batched_tokens))
    gpus = side.multiselect("candidate GPUs", list(catalog), key=KEY + "gpus",
                            help=w.field_help(Candidate, "gpu"),
                            format_func=lambda n: f"{n} (${catalog[n].price_usd_per_hour:.2f}/h)")
    settings = {"candidates": [{"gpu": gpu} for gpu in gpus]}
    settings["max_replicas"] = w.number(PlanSettings, "max_replicas", 16, KEY + "max_replicas",
                                        "largest fleet searched", where=side)
    seqs = side.multiselect("max_num_seqs values", sorted({32, 64, 128, 256, 512, *defaults.batch.max_num_seqs}),
                            key=KEY + "seqs", help=w.field_help(BatchGrid, "max_num_seqs"))
    tokens = side.multiselect("max_num_batched_tokens values",
                              sorted({1024, 2048, 4096, 8192, 16384, *defaults.batch.max_num_batched_tokens}),
                              key=KEY + "tokens",
                              help=w.field_help(BatchGrid, "max_num_batched_tokens"))
    settings["batch"] = {"max_num_seqs": seqs, "max_num_batched_tokens": tokens}
    side.subheader("SLO")
    slo = scenario.slo.model_dump()
    slo["ttft_p99_s"] = w.number(SLO, "ttft_p99_s", slo["ttft_p99_s"], KEY + "ttft", "P99 TTFT (s)", where=side,
                                 step=0.5, fmt="%.2f")
    slo["tpot_p99_s"] = w.number(SLO, "tpot_p99_s", slo["tpot_p99_s"], KEY + "tpot", "P99 TPOT (s)", where=side,
                                 step=0.01, fmt="%.3f")
    with side.expander("Comparisons"):
        for name, label in (("static_baseline", "traditional server"), ("autoscaled", "autoscaled fleet"),
                            ("dynamic_batch", "SLO-aware batch size"), ("uncertainty", "± calibration error")):
            settings[name] = w.toggle(PlanSettings, name, getattr(defaults, name), KEY + name, label)
    return settings, slo


def _recommendation(answer: dict) -> None:
    r = answer["recommendation"]
    st.success(r["sentence"])
    cols = st.columns(5)
    plural = "s" if r["replicas"] != 1 else ""
    cols[0].metric("Fleet", f"{r['gpus']} GPUs",
                   f"{r['replicas']} replica{plural} × {r['gpu']} (TP {r['tensor_parallel']})",
                   delta_color="off", delta_arrow="off", border=True)
    cols[1].metric("Cost per hour", f"${r['cost_per_hour_usd']:,.2f}", border=True)
    cost = r.get("cost_per_request_usd")
    cols[2].metric("Cost / 1k requests", "n/a" if cost is None else f"${cost * 1000:.3f}", border=True)
    binding = r["binding_constraint"] or "—"
    cols[3].metric("Binding constraint", TERMS.get(binding, binding.split(":")[0]),
                   "−1 replica misses it" if r.get("one_fewer_misses") else binding.partition(": ")[2] or None,
                   delta_color="off", delta_arrow="off", border=True,
                   help="the SLO term that a fleet one replica smaller misses")
    cols[4].metric("P99 TTFT", "n/a" if r.get("ttft_p99_s") is None else f"{r['ttft_p99_s']:.2f} s",
                   f"{r['headroom']:.0%} headroom" if r.get("headroom") is not None else None, delta_color="off",
                   delta_arrow="off", border=True,
                   help=f"headroom on {TERMS.get(r.get('headroom_term'), r.get('headroom_term'))}: how far the "
                   "tightest SLO term is from its limit")
    calibration = r.get("calibration") or {}
    error = calibration.get("fit_error")
    st.caption(f"Simulated with calibration **{calibration.get('name')}** ({calibration.get('label')}"
               + (f", fit error {error:.1%}" if error is not None else "") + ")."
               + (f" {answer['uncertainty']['text']}." if answer.get("uncertainty") else ""))


def _comparisons(answer: dict) -> None:
    rows = []
    for key, label in (("static_baseline", "traditional server (static batching)"),
                       ("dynamic_batch", "SLO-aware batch size")):
        other = answer.get(key)
        if other:
            rows.append({"fleet": label, "GPUs": other["gpus"], "cost per hour": other["cost_per_hour_usd"],
                         "cost per 1,000 requests": (other["cost_per_request_usd"] or 0) * 1000 or None,
                         "status": other["status"] if other["replicas"] else f"misses up to {other['searched_up_to']}"})
    scaled = answer.get("autoscaled")
    if scaled:
        rows.append({"fleet": f"autoscaled: warm pool {scaled['warm_pool']} of up to {scaled['max_replicas']}",
                     "GPUs": scaled.get("replicas_peak"), "cost per hour": scaled.get("cost_per_hour_usd"),
                     "cost per 1,000 requests": (scaled.get("cost_per_request_usd") or 0) * 1000 or None,
                     "status": "meets" if scaled["meets"] else "misses"})
    if rows:
        st.subheader("Against the alternatives")
        st.dataframe(rows, hide_index=True, column_config={
            "cost per hour": st.column_config.NumberColumn(format="$%.2f"),
            "cost per 1,000 requests": st.column_config.NumberColumn(format="$%.3f")})


def render() -> None:
    st.title("Plan the fleet")
    if not data.planner_available():
        st.info("The capacity planner (`simulator.planner.plan`) is not part of this installation yet.")
        return
    stored = st.session_state.get(SCENARIO_KEY)
    scenario = Scenario.model_validate_json(stored) if stored else data.default_whatif()
    st.caption(f"Traffic from the What-if page{'' if stored else ' (its default)'}: **{scenario.name}**, "
               f"{scenario.model.name}, {scenario.traffic.duration_s:g} s"
               + (" with a spike" if getattr(scenario.traffic.arrivals, "kind", "") == "spike" else "")
               + ". Change it there; search settings and the SLO are here.")
    settings, slo = _inputs(scenario)
    batch = settings["batch"]
    if not settings["candidates"] or not batch["max_num_seqs"] or not batch["max_num_batched_tokens"]:
        st.error("Pick at least one candidate GPU, one max_num_seqs and one max_num_batched_tokens value.")
        return
    if None in slo.values() or settings["max_replicas"] is None:
        st.error("The SLO and the largest fleet need values.")
        return
    scenario = scenario.model_copy(update={"slo": SLO.model_validate(slo)})
    request = json.dumps([scenario.model_dump_json(), settings], sort_keys=True)
    if st.button("Plan", type="primary", key=KEY + "run"):
        st.session_state[KEY + "request"] = request
    if st.session_state.get(KEY + "request") != request:
        st.info("Press **Plan** to search: each candidate fleet is simulated through the whole traffic; a search "
                "takes from seconds to a few minutes.")
        return
    with st.spinner("Searching fleets and batch settings…"):
        answer, error = data.plan(scenario.model_dump_json(), settings)
    if error:
        st.error(error)
        return
    _recommendation(answer)
    st.plotly_chart(charts.pareto(answer["pareto_points"], answer["pareto_front"], answer["recommendation"],
                                  scenario.slo.ttft_p99_s), key=KEY + "pareto")
    st.subheader("Per GPU type")
    st.dataframe([{"GPU": row["gpu"], "TP": row["tensor_parallel"], "replicas": row["replicas"],
                   "GPUs": row.get("gpus"), "max_num_seqs": row.get("max_num_seqs"),
                   "max_num_batched_tokens": row.get("max_num_batched_tokens"),
                   "cost per hour": row.get("cost_per_hour_usd"), "status": row["status"],
                   "calibration": f"{row['calibration']['name']} ({row['calibration']['label']})"
                   if row.get("calibration") else "—", "why": row.get("reason") or ""}
                  for row in answer["per_gpu_type"]], hide_index=True,
                 column_config={"cost per hour": st.column_config.NumberColumn(format="$%.2f")})
    _comparisons(answer)
    simulations = answer.get("simulations", {})
    st.caption(f"{simulations.get('evaluated', '?')} candidate fleets evaluated ({simulations.get('simulated', '?')} "
               f"simulated) in {answer.get('elapsed_s', 0):.0f} s.")
    left, right = st.columns(2)
    plain = {key: value for key, value in answer.items() if not key.startswith("pareto")}
    left.download_button("Download plan.json", json.dumps(plain, indent=1, default=str), file_name="plan.json",
                         key=KEY + "json")
    right.download_button("Download the recommended scenario",
                          yaml.safe_dump(answer["recommended_scenario"], sort_keys=False), file_name="recommended.yaml",
                          key=KEY + "yaml")
