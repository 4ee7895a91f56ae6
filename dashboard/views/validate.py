"""Validate: how far the simulator is from the live engine on the same requests. Per load level and
metric, measured vs simulated, the simulator's relative error, and the live engine's own noise floor
(two live runs of the same requests) beside it, and the error left once each run is simulated at the
host speed measured during it (this shared CPU's speed drifts between runs); measured and simulated latency distributions side by
side. Reads `benchmarks/results/validate.json` (written by `surgeplan validate`), and runs a short live
validation on this machine on request, in a background process (`dashboard.jobs`): progress shown,
cancellable at any moment. The published measurements of real GPUs are the page's last section
(`validate_published`)."""

from __future__ import annotations

import json

import streamlit as st

from dashboard import jobs
from dashboard.charts.validation import validation_distributions, validation_errors
from dashboard.data import live, saved_files, trace_files
from dashboard.views.validate_published import render_published_section

KEY = "validate_"
SHOWN = (
    "throughput_rps",
    "output_tokens_per_s",
    "ttft_mean_s",
    "ttft_p99_s",
    "tpot_mean_s",
    "tpot_p99_s",
    "e2e_mean_s",
    "e2e_p99_s",
    "queue_mean_s",
    "preemptions",
    "kv_utilization",
)
LIVE_REQUESTS = 16
LIVE_LEVELS = (0.5, 0.9)
POLL_S = 1.0
COMMAND = (
    "surgeplan validate --trace ../shared/traces/AzureLLMInferenceTrace_conv.csv "
    "--out benchmarks/results/validate.json"
)


def _value(key: str, value) -> str:
    if value is None:
        return "n/a"
    if key.endswith("_s") and not key.endswith("_per_s"):
        return f"{value * 1e3:,.1f} ms"
    return f"{value:.1%}" if key == "kv_utilization" else f"{value:,.3g}"


def _calibrations(result: dict, level: dict) -> str:
    """'workload: cpu-small@cpu-steps (measured, fit error 3.1%)' for the calibration the level used."""
    known = result.get("calibration") or {}
    if "name" in known:  # one calibration, not keyed by role
        known = {"used": known}
    used = level.get("used_calibration") or next(iter(known), None)
    info = known.get(used) or {}
    error = info.get("fit_error")
    error = (
        error.get("mape_cross_validated") or error.get("mape_train")
        if isinstance(error, dict)
        else error
    )
    fit = f", fit error {error:.1%}" if isinstance(error, (int, float)) else ""
    return f"{used}: {info.get('name', '?')} ({info.get('label', 'label unknown')}{fit})"


def _median(values: list[float]) -> float | None:
    return sorted(values)[len(values) // 2] if values else None


def _level_table(level: dict) -> list[dict]:
    measured, simulated = level.get("measured") or {}, level.get("simulated") or {}
    errors, floor = level.get("relative_error") or {}, level.get("noise_floor") or {}
    verdict = level.get("verdict") or {}
    at_speed = (level.get("at_run_speed") or {}).get("relative_error") or {}
    return [
        {
            "metric": key,
            "measured": _value(key, measured.get(key)),
            "simulated": _value(key, simulated.get(key)),
            "error": "n/a" if errors.get(key) is None else f"{errors[key]:+.1%}",
            "error at run speed": "n/a" if at_speed.get(key) is None else f"{at_speed[key]:+.1%}",
            "live noise floor": "n/a" if floor.get(key) is None else f"±{floor[key]:.1%}",
            "verdict": verdict.get(key, ""),
        }
        for key in SHOWN
        if key in measured or key in simulated
    ]


def _show(result: dict, source: str, key: str) -> None:
    levels = result.get("levels") or []
    if not levels:
        st.warning(f"{source} holds no load levels.")
        return
    trace, engine, machine = (
        result.get("trace") or {},
        result.get("engine") or {},
        result.get("machine") or {},
    )
    st.caption(
        f"{source}: trace **{trace.get('name', '?')}** ({trace.get('requests', '?')} requests); engine "
        f"{engine.get('model', '?')} on {engine.get('device', '?')} via {engine.get('via', 'engine')}; "
        f"{machine.get('processor', '')} {machine.get('date', '')}".strip()
    )
    columns = st.columns(len(levels))
    for column, level in zip(columns, levels):
        errors = [
            abs(v)
            for k, v in (level.get("relative_error") or {}).items()
            if k in SHOWN and v is not None
        ]
        quiet = sum(
            1 for k, v in (level.get("verdict") or {}).items() if k in SHOWN and v == "below noise"
        )
        median = _median(errors)
        at_speed = _median(
            [
                abs(v)
                for k, v in ((level.get("at_run_speed") or {}).get("relative_error") or {}).items()
                if k in SHOWN and v is not None
            ]
        )
        speed_text = "" if at_speed is None else f"; {at_speed:.1%} at run speed"
        column.metric(
            f"{level['load']:.0%} load, median |error|",
            "n/a" if median is None else f"{median:.1%}",
            f"{quiet} of {len(errors)} metrics within the live noise{speed_text}",
            delta_color="off",
            delta_arrow="off",
            border=True,
            help=f"calibration {_calibrations(result, level)}",
        )
    st.subheader("Error per metric against the live noise floor")
    st.plotly_chart(validation_errors(levels, list(SHOWN)), key=f"{KEY}{key}_errors")
    st.subheader("Measured and simulated distributions")
    tabs = st.tabs(
        [f"{level['load']:.0%} load ({level['rate_rps']:.2f} req/s)" for level in levels]
    )
    for i, (tab, level) in enumerate(zip(tabs, levels)):
        with tab:
            st.caption(
                f"Simulated with calibration {_calibrations(result, level)}. Each distribution drawn by the "
                "P50, mean and P99 the validation keeps of it."
            )
            st.plotly_chart(validation_distributions(level), key=f"{KEY}{key}_distributions_{i}")
            st.dataframe(_level_table(level), hide_index=True, height="content")


def _start(trace: str) -> jobs.Job:
    return jobs.Job(
        live.live_validation,
        (trace, LIVE_REQUESTS, LIVE_LEVELS),
        steps=live.live_validation_steps(LIVE_LEVELS),
    )


def _watch() -> None:
    """The running job's progress and its Cancel button; reruns the page once the job has ended."""
    job: jobs.Job = st.session_state[KEY + "job"]
    if job.state not in (jobs.RUNNING, jobs.CANCELLING):
        st.rerun()
    last = job.messages[-1] if job.messages else "starting the live engine"
    st.progress(job.fraction or 0.0, text=f"{last} ({job.elapsed_s:.0f} s so far)")
    with st.status(
        "Validating: live engine and simulator on the same requests…",
        expanded=True,
        state="running",
    ):
        for message in job.messages:
            st.write(message)
    if job.state == jobs.RUNNING and st.button(
        "Cancel", key=KEY + "cancel", icon=":material/stop_circle:"
    ):
        job.cancel()
    if job.state == jobs.CANCELLING:
        st.caption("Cancelling…")


def _live_section() -> None:
    st.subheader("A short live validation on this machine")
    st.caption(
        f"The live engine (`cpu-small`, dummy weights, on the CPU) serves the first {LIVE_REQUESTS} requests "
        f"of the trace at {' and '.join(f'{x:.0%}' for x in LIVE_LEVELS)} of its measured capacity, in real "
        "time and twice each for the noise floor; the simulator runs the same requests with a calibration "
        "fitted on the engine's own steps. It takes a few minutes and can be cancelled."
    )
    traces = [
        p for p in trace_files.shared_traces() if "conv" in p.name
    ] or trace_files.shared_traces()
    if not traces:
        st.warning(f"No trace found in {trace_files.SHARED_TRACES} to validate on.")
        return
    job: jobs.Job | None = st.session_state.get(KEY + "job")
    if job is not None and job.state in (jobs.RUNNING, jobs.CANCELLING):
        st.fragment(_watch, run_every=POLL_S)()
        return
    if st.button("Run a short live validation", key=KEY + "run", type="primary"):
        st.session_state[KEY + "job"] = _start(str(traces[0]))
        st.rerun()
    if job is None:
        return
    if job.state == jobs.CANCELLED:
        st.info(
            f"Live validation cancelled after {job.elapsed_s:.0f} s, during: "
            f"{job.messages[-1] if job.messages else 'start-up'}."
        )
    elif job.state == jobs.FAILED:
        st.error(f"Live validation failed: {job.error}")
    else:
        st.success(f"Live validation done in {job.elapsed_s:.0f} s.")
        _show(job.result, "live run from this page", "live")
        st.download_button(
            "Download the results JSON",
            json.dumps(job.result, indent=1),
            file_name="validate.json",
            mime="application/json",
            key=KEY + "download",
        )


def render() -> None:
    st.title("Validate: simulator vs live engine")
    st.caption(
        "Same requests, same engine settings and KV pool: the live engine measured, the simulator predicted. An "
        "error inside the live noise floor (grey bars) is as small as the engine's own run-to-run difference."
    )
    runs = saved_files.saved_validations()
    if not runs:
        st.info(
            f"No validation results yet: `{saved_files.VALIDATE_JSON.relative_to(saved_files.ROOT)}` is absent. "
            f"Write them with `{COMMAND}`."
        )
    else:
        names = [str(path.relative_to(saved_files.ROOT)) for path in runs]
        chosen = st.selectbox(
            "saved run (the CPU's validate.json; the code trace, HTTP and the H200 lease beside it)",
            names,
            key=KEY + "saved_run",
        )
        saved, error = saved_files.read_json(saved_files.ROOT / chosen)
        if error:
            st.error(error)
        elif saved is not None:
            _show(saved, f"`{chosen}`", "saved")
    render_published_section()
    _live_section()
