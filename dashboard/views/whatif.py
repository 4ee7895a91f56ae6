"""What-if spike: the planner's nightmare on one screen — traffic jumps N-fold, what happens to P99
latency, how many GPUs does the autoscaler bring (and how late, behind its cold starts), and what does a
request cost? Every input is a `Scenario` field; every number is simulated with a named calibration."""
from __future__ import annotations

import streamlit as st
import yaml

from dashboard import charts, data
from dashboard import widgets as w
from simulator.scenario import (
    SLO,
    AutoscalerSpec,
    ClientSpec,
    ClusterSpec,
    ColdStart,
    HardwareChoice,
    ModelChoice,
    Prices,
    SchedulerSettings,
    TrafficSpec,
)
from traces.arrivals import PoissonArrivals, SpikeArrivals

KEY = "whatif_"


def _inputs(base: dict) -> dict:
    """Sidebar widgets, each bound to its scenario field; returns the scenario as nested data."""
    side = st.sidebar
    spike, cluster, scaler = base["traffic"]["arrivals"], base["cluster"], base["cluster"]["autoscaler"]
    side.subheader("Traffic")
    spike["base"]["rate_per_s"] = w.number(PoissonArrivals, "rate_per_s", spike["base"]["rate_per_s"], KEY + "rate",
                                           "baseline requests / s", where=side, step=0.1, fmt="%.2f",
                                           help_extra="(Poisson arrivals before and after the spike)")
    spike["multiplier"] = w.number(SpikeArrivals, "multiplier", spike["multiplier"], KEY + "multiplier",
                                   "spike multiplier (x baseline)", where=side, step=1.0, fmt="%.1f",
                                   help_extra="The rate at the top of the spike is baseline × multiplier.")
    left, right = side.columns(2)
    spike["start_s"] = w.number(SpikeArrivals, "start_s", spike["start_s"], KEY + "start", "spike starts at (s)",
                                where=left, step=10.0, fmt="%.0f")
    spike["hold_s"] = w.number(SpikeArrivals, "hold_s", spike["hold_s"], KEY + "hold", "spike holds for (s)",
                               where=right, step=10.0, fmt="%.0f")
    ramp = w.number(SpikeArrivals, "ramp_up_s", spike["ramp_up_s"], KEY + "ramp", "ramp up / down (s)", where=left,
                    step=5.0, fmt="%.0f", help_extra="(the same ramp is used on the way down)")
    spike["ramp_up_s"] = spike["ramp_down_s"] = ramp
    base["traffic"]["duration_s"] = w.number(TrafficSpec, "duration_s", base["traffic"]["duration_s"],
                                             KEY + "duration", "traffic lasts (s)", where=right, step=60.0, fmt="%.0f")
    side.subheader("Fleet")
    catalog = data.gpus()
    base["hardware"]["gpu"] = w.select(HardwareChoice, "gpu", base["hardware"]["gpu"], KEY + "gpu", "GPU", where=side,
                                       options=list(catalog),
                                       format_func=lambda n: f"{n}  (${catalog[n].price_usd_per_hour:.2f}/h)")
    base["model"]["name"] = w.select(ModelChoice, "name", base["model"]["name"], KEY + "model", "model", where=side,
                                     options=data.model_names())
    left, right = side.columns(2)
    cluster["replicas"] = w.number(ClusterSpec, "replicas", cluster["replicas"], KEY + "replicas", "replicas at start",
                                   where=left)
    base["hardware"]["tensor_parallel"] = w.number(HardwareChoice, "tensor_parallel",
                                                   base["hardware"]["tensor_parallel"], KEY + "tp", "GPUs per replica",
                                                   where=right)
    scaler["enabled"] = w.toggle(AutoscalerSpec, "enabled", scaler["enabled"], KEY + "autoscale", "autoscaler",
                                 where=side, help_extra="Scale out at KV usage ≥ 0.8 or ≥ 5 waiting per replica, "
                                 "after a cold start.")
    scaler["min_replicas"] = cluster["replicas"]
    left, right = side.columns(2)
    scaler["max_replicas"] = w.number(AutoscalerSpec, "max_replicas", scaler["max_replicas"], KEY + "max_replicas",
                                      "max replicas", where=left)
    cold = scaler["cold_start"]
    cold["provisioning_s"] = w.number(ColdStart, "provisioning_s", cold["provisioning_s"], KEY + "provisioning",
                                      "provisioning (s)", where=right, step=10.0, fmt="%.0f")
    with side.expander("Engine, clients, SLO and price"):
        base["scheduler"]["policy"] = w.select(SchedulerSettings, "policy", base["scheduler"]["policy"], KEY + "policy",
                                               "batching policy")
        engine = base["scheduler"]
        engine["max_num_seqs"] = w.number(SchedulerSettings, "max_num_seqs", engine["max_num_seqs"],
                                          KEY + "max_num_seqs", "max running requests per replica")
        base["clients"]["ttft_timeout_s"] = w.number(ClientSpec, "ttft_timeout_s", base["clients"]["ttft_timeout_s"],
                                                     KEY + "timeout", "client gives up after (s)", fmt="%.1f",
                                                     placeholder="never")
        base["slo"]["ttft_p99_s"] = w.number(SLO, "ttft_p99_s", base["slo"]["ttft_p99_s"], KEY + "slo",
                                             "SLO: P99 TTFT (s)", step=0.5, fmt="%.2f")
        gpu = catalog.get(base["hardware"]["gpu"])
        base["prices"]["gpu_usd_per_hour"] = w.number(
            Prices, "gpu_usd_per_hour", base["prices"]["gpu_usd_per_hour"], KEY + "price", "price per GPU-hour ($)",
            fmt="%.2f", step=0.1, placeholder=f"catalog: {gpu.price_usd_per_hour:.2f}" if gpu else "catalog",
            help_extra=f"Empty: the catalog's {gpu.price_usd_per_hour:.2f} $/h ({gpu.price_source}, {gpu.price_date})."
            if gpu else "")
    return base


def _metrics(result) -> None:
    summary, scenario = result.summary, result.scenario
    slo, tp = scenario.slo.ttft_p99_s, scenario.hardware.tensor_parallel
    p99 = summary["ttft_p99_s"]
    start_gpus = scenario.cluster.replicas * tp
    peak_gpus = summary["replicas_peak"] * tp
    cost = summary["cost_per_request_usd"]
    info = {"delta_color": "off", "delta_arrow": "off", "border": True}
    columns = st.columns(5)
    columns[0].metric("P99 time to first token", "n/a" if p99 is None else f"{p99:.2f} s",
                      None if p99 is None else f"{p99 - slo:+.2f} s vs SLO", delta_color="inverse", border=True,
                      help=f"99th percentile of arrival → first token over completed requests; SLO {slo:g} s")
    columns[1].metric("GPUs at peak", f"{peak_gpus}", f"+{peak_gpus - start_gpus} by autoscaling"
                      if peak_gpus > start_gpus else "no scale-out", **info,
                      help="replicas serving or starting at the busiest window, times GPUs per replica")
    columns[2].metric("Cost / 1k requests", "n/a" if cost is None else f"${cost * 1000:.3f}",
                      f"${summary['cost_usd']:.2f} in all", **info,
                      help=f"GPU-hours × ${result.facts['price_usd_per_gpu_hour']:.2f} per GPU-hour, over completed "
                      "requests")
    columns[3].metric("Abandoned", f"{summary['abandon_rate']:.1%}",
                      f"{summary['timed_out']:,} timed out" + (f", {summary['rejected']:,} rejected"
                                                              if summary["rejected"] else ""), **info,
                      help="requests whose clients gave up (no first token in time) or were turned away")
    columns[4].metric("SLO", "met" if summary["meets_slo"] else "missed",
                      f"{summary['slo_attainment']:.1%} within", border=True, delta_arrow="off",
                      delta_color="normal" if summary["meets_slo"] else "inverse",
                      help="P99 TTFT and TPOT within bounds and abandonment under the SLO's limit; the delta is "
                      "the share of requests that met both latency targets")


def _facts(result) -> str:
    facts = result.facts
    calibration = facts["calibration"]
    error = calibration["fit_error"]
    fit = f", fit error {error:.1%}" if error is not None else ""
    return (f"Step times from calibration **{calibration['name']}** ({calibration['label']}{fit}); "
            f"{facts['kv_blocks_per_replica']:,} KV blocks × {facts['block_size']} tokens per replica; "
            f"cold start {facts['cold_start_s']:.0f} s; ${facts['price_usd_per_gpu_hour']:.2f} per GPU-hour; "
            f"{result.summary['requests']:,} requests simulated in {facts.get('cpu_s', 0):.1f} s of CPU.")


def render() -> None:
    default = data.default_whatif()
    values = _inputs(default.model_dump(mode="json"))
    scenario, error = data.build_scenario(values)
    spike = values["traffic"]["arrivals"]
    st.title(f"What if traffic spikes {spike['multiplier']:g}x?")
    if error:
        st.error(f"These inputs do not make a valid scenario: {error}")
        return
    st.session_state["whatif_scenario"] = scenario.model_dump_json()     # the Plan page plans for this traffic
    scaler, rate = scenario.cluster.autoscaler, spike["base"]["rate_per_s"]
    st.caption(f"{scenario.model.name} on {scenario.hardware.gpu} × {scenario.hardware.tensor_parallel}, "
               f"{scenario.cluster.replicas} replicas"
               + (f", autoscaler up to {scaler.max_replicas}" if scaler.enabled else ", no autoscaler")
               + f"; {rate:g} requests/s rising to {rate * spike['multiplier']:g} for {spike['hold_s']:g} s; "
               f"{scenario.scheduler.policy} batching.")
    with st.spinner("Simulating the cluster…"):
        result, error = data.run(scenario)
    if error:
        st.error(error)
        return
    _metrics(result)
    st.plotly_chart(charts.timeline(result), key="whatif_timeline")
    st.caption(_facts(result))
    with st.expander("This scenario as YAML (run it with `surgeplan simulate`)"):
        text = yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)
        st.code(text, language="yaml")
        st.download_button("Download scenario.yaml", text, file_name="whatif.yaml", mime="text/yaml")
