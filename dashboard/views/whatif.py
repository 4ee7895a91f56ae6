"""What-if spike: the planner's nightmare on one screen — traffic jumps N-fold (or a real trace arrives),
what happens to P99 latency, how many GPUs does the autoscaler bring (and how late, behind its cold
starts), and what does a request cost? Every input is a `Scenario` field (the scheduler's are listed by
name and drawn from their own definitions); every number is simulated with a named calibration."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
import yaml

from dashboard import handoff
from dashboard.charts.timeline import timeline
from dashboard.data import scenarios
from dashboard.views.whatif_inputs import inputs


def _metrics(result) -> None:
    summary, scenario = result.summary, result.scenario
    slo, tp = scenario.slo, scenario.hardware.tensor_parallel
    ttft, tpot = summary.ttft_p99_s, summary.tpot_p99_s
    start_gpus = scenario.cluster.replicas * tp
    peak_gpus = summary.replicas_peak * tp
    cost = summary.cost_per_request_usd
    info = {"delta_color": "off", "delta_arrow": "off", "border": True}
    columns = st.columns(6)
    columns[0].metric(
        "P99 TTFT",
        "n/a" if ttft is None else f"{ttft:.2f} s",
        None if ttft is None else f"{ttft - slo.ttft_p99_s:+.2f} s vs SLO",
        delta_color="inverse",
        border=True,
        help="P99 time to first token: 99th percentile of arrival → first token over "
        f"completed requests; SLO {slo.ttft_p99_s:g} s",
    )
    columns[1].metric(
        "P99 TPOT",
        "n/a" if tpot is None else f"{tpot * 1e3:.0f} ms",
        None if tpot is None else f"{(tpot - slo.tpot_p99_s) * 1e3:+.0f} ms vs SLO",
        delta_color="inverse",
        border=True,
        help="P99 time per output token: 99th percentile of the time between output tokens after "
        f"the first; SLO {slo.tpot_p99_s * 1e3:g} ms",
    )
    columns[2].metric(
        "GPUs at peak",
        f"{peak_gpus}",
        f"+{peak_gpus - start_gpus} by autoscaling" if peak_gpus > start_gpus else "no scale-out",
        **info,
        help="replicas serving or starting at the busiest window, times GPUs per replica",
    )
    columns[3].metric(
        "Cost / 1k req",
        "n/a" if cost is None else f"${cost * 1000:.3f}",
        f"${summary.cost_usd:.2f} in all",
        **info,
        help="cost per 1,000 completed requests: GPU-hours × "
        f"${result.facts['price_usd_per_gpu_hour']:.2f} per GPU-hour, over completed requests",
    )
    columns[4].metric(
        "Timed out",
        f"{summary.abandon_rate:.1%}",
        f"{summary.timed_out:,} gave up"
        + (f", {summary.rejected:,} rejected" if summary.rejected else ""),
        **info,
        help="requests whose clients gave up (no first token in time) or were turned away",
    )
    columns[5].metric(
        "SLO",
        "met" if summary.meets_slo else "missed",
        f"{summary.slo_attainment:.1%} within",
        border=True,
        delta_arrow="off",
        delta_color="normal" if summary.meets_slo else "inverse",
        help="P99 TTFT and TPOT within bounds and abandonment under the SLO's limit; the delta is "
        "the share of requests that met both latency targets",
    )


def _facts(result) -> str:
    facts = result.facts
    calibration = facts["calibration"]
    error = calibration["fit_error"]
    fit = f", fit error {error:.1%}" if error is not None else ""
    held_out = calibration.get("held_out_error")
    stack = f" plus the **{calibration.get('engine_profile')}** serving stack" + (
        f" (held-out error {held_out:.1%} on published measurements: "
        f"{calibration['held_out_rows']})"
        if held_out is not None
        else ""
    )
    return (
        f"Every latency and cost above is simulated with step times from calibration **{calibration['name']}** "
        f"({calibration['label']}{fit}){stack}; {facts['kv_blocks_per_replica']:,} KV blocks × {facts['block_size']} "
        f"tokens per replica; cold start {facts['cold_start_s']:.0f} s; ${facts['price_usd_per_gpu_hour']:.2f} per "
        f"GPU-hour; {result.summary.requests:,} requests simulated in {result.run.get('cpu_s', 0):.1f} s of CPU."
    )


def _describe(scenario, values: dict) -> tuple[str, str]:
    """(the page title, a one-line description of the scenario)."""
    scaler, fleet = (
        scenario.cluster.autoscaler,
        (
            f"{scenario.model.name} on {scenario.hardware.gpu} × "
            f"{scenario.hardware.tensor_parallel}, {scenario.cluster.replicas} "
            "replicas"
        ),
    )
    fleet += f", autoscaler up to {scaler.max_replicas}" if scaler.enabled else ", no autoscaler"
    engine = scenario.scheduler
    fleet += f"; {engine.policy} batching, {engine.batch_controller} batch size" + (
        f" (target TPOT {engine.batch_target_tpot_s:g} s)"
        if engine.batch_controller == "slo"
        else ""
    )
    if engine.batch_wait_steps:
        fleet += (
            f", new prompts held up to {engine.batch_wait_steps} steps while others decode "
            f"(or until {engine.batch_wait_max_tokens_ratio:g} of the token budget)"
        )
    traffic = scenario.traffic
    if traffic.trace:
        first = f"first {traffic.max_requests:,}" if traffic.max_requests else "all"
        faster = f", {traffic.rate_scale:g}× faster" if traffic.rate_scale != 1 else ""
        return (
            f"What does {Path(traffic.trace).name} do to the fleet?",
            f"{fleet}; the trace's {first} requests{faster}.",
        )
    spike = values["traffic"]["arrivals"]
    rate = spike["base"]["rate_per_s"]
    return (
        f"What if traffic spikes {spike['multiplier']:g}x?",
        f"{fleet}; {rate:g} requests/s rising to {rate * spike['multiplier']:g} for {spike['hold_s']:g} s.",
    )


def render() -> None:
    values = inputs(scenarios.default_whatif().model_dump(mode="json"))
    scenario, error = scenarios.build_scenario(values)
    if error:
        st.title("What if traffic spikes?")
        st.error(f"These inputs do not make a valid scenario: {error}")
        return
    title, line = _describe(scenario, values)
    st.title(title)
    st.session_state[handoff.SCENARIO] = (
        scenario.model_dump_json()
    )  # the Plan page plans for this traffic
    st.caption(line)
    with st.spinner("Simulating the cluster…"):
        result, error = scenarios.run(scenario)
    if error:
        st.error(error)
        return
    _metrics(result)
    st.caption(_facts(result))
    st.plotly_chart(timeline(result), key="whatif_timeline")
    with st.expander("This scenario as YAML (run it with `surgeplan simulate`)"):
        text = yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)
        st.code(text, language="yaml")
        st.download_button(
            "Download scenario.yaml", text, file_name="whatif.yaml", mime="text/yaml"
        )
