"""Validate: how far the simulator is from the live engine on the same requests. Per load level and
metric, measured vs simulated, the simulator's relative error, and the live engine's own noise floor
(two live runs of the same requests) beside it. Reads `benchmarks/results/validate.json` (written by
`surgeplan validate`); a short live run can be started here when the validation module is present."""
from __future__ import annotations

import json

import streamlit as st

from dashboard import charts, data

KEY = "validate_"
SHOWN = ("throughput_rps", "output_tokens_per_s", "ttft_mean_s", "ttft_p99_s", "tpot_mean_s", "tpot_p99_s",
         "e2e_mean_s", "e2e_p99_s", "queue_mean_s", "preemptions", "kv_utilization")
LIVE_REQUESTS = 16
COMMAND = ("surgeplan validate --trace ../shared/traces/AzureLLMInferenceTrace_conv.csv "
           "--out benchmarks/results/validate.json")


def _value(key: str, value) -> str:
    if value is None:
        return "n/a"
    if key.endswith("_s") and not key.endswith("_per_s"):
        return f"{value * 1e3:,.1f} ms"
    return f"{value:.1%}" if key == "kv_utilization" else f"{value:,.3g}"


def _calibrations(result: dict, level: dict) -> str:
    """'workload: cpu-small@cpu-steps (measured, fit error 3.1%)' for the calibration the level used."""
    known = result.get("calibration") or {}
    if "name" in known:                              # one calibration, not keyed by role
        known = {"used": known}
    used = level.get("used_calibration") or next(iter(known), None)
    info = known.get(used) or {}
    error = info.get("fit_error")
    error = error.get("mape_cross_validated") or error.get("mape_train") if isinstance(error, dict) else error
    fit = f", fit error {error:.1%}" if isinstance(error, (int, float)) else ""
    return f"{used}: {info.get('name', '?')} ({info.get('label', 'label unknown')}{fit})"


def _level_table(level: dict) -> list[dict]:
    measured, simulated = level.get("measured") or {}, level.get("simulated") or {}
    errors, floor = level.get("relative_error") or {}, level.get("noise_floor") or {}
    verdict = level.get("verdict") or {}
    return [{"metric": key, "measured": _value(key, measured.get(key)), "simulated": _value(key, simulated.get(key)),
             "error": "n/a" if errors.get(key) is None else f"{errors[key]:+.1%}",
             "live noise floor": "n/a" if floor.get(key) is None else f"±{floor[key]:.1%}",
             "verdict": verdict.get(key, "")} for key in SHOWN if key in measured or key in simulated]


def _show(result: dict, source: str) -> None:
    levels = result.get("levels") or []
    if not levels:
        st.warning(f"{source} holds no load levels.")
        return
    trace, engine, machine = result.get("trace") or {}, result.get("engine") or {}, result.get("machine") or {}
    st.caption(f"{source}: trace **{trace.get('name', '?')}** ({trace.get('requests', '?')} requests); engine "
               f"{engine.get('model', '?')} on {engine.get('device', '?')} via {engine.get('via', 'engine')}; "
               f"{machine.get('processor', '')} {machine.get('date', '')}".strip())
    columns = st.columns(len(levels))
    for column, level in zip(columns, levels):
        errors = [abs(v) for k, v in (level.get("relative_error") or {}).items() if k in SHOWN and v is not None]
        quiet = sum(1 for v in (level.get("verdict") or {}).values() if v == "below noise")
        errors.sort()
        median = errors[len(errors) // 2] if errors else None
        column.metric(f"{level['load']:.0%} load, median |error|", "n/a" if median is None else f"{median:.1%}",
                      f"{quiet} of {len(errors)} metrics within the live noise", delta_color="off",
                      delta_arrow="off", border=True, help=f"calibration {_calibrations(result, level)}")
    st.plotly_chart(charts.validation_errors(levels, list(SHOWN)), key=f"{KEY}chart_{source[:12]}")
    tabs = st.tabs([f"{level['load']:.0%} load" for level in levels])
    for tab, level in zip(tabs, levels):
        with tab:
            st.caption(f"{level['rate_rps']:.2f} requests/s; simulated with calibration {_calibrations(result, level)}")
            st.dataframe(_level_table(level), hide_index=True)


def _live_button() -> None:
    if not data.live_validation_available():
        st.caption(f"Validation results come from `{COMMAND}`.")
        return
    traces = [p for p in data.shared_traces() if "conv" in p.name] or data.shared_traces()
    st.subheader("A short live validation on this machine")
    st.caption(f"The live engine (`cpu-small`, dummy weights, on the CPU) serves the first {LIVE_REQUESTS} requests "
               "of the trace at 50% and 90% of its measured capacity, in real time and twice each for the noise "
               "floor; the simulator runs the same requests with a calibration fitted on the engine's own steps. "
               "It takes a few minutes.")
    if not traces:
        st.warning(f"No trace found in {data.SHARED_TRACES} to validate on.")
        return
    if st.button("Run a short live validation", key=KEY + "run", type="primary"):
        with st.status("Validating: live engine and simulator on the same requests…", expanded=True) as status:
            result, error = data.live_validation(str(traces[0]), LIVE_REQUESTS, (0.5, 0.9), progress=status.write)
            status.update(label="Validation failed" if error else "Validation done",
                          state="error" if error else "complete")
        if error:
            st.error(error)
        else:
            st.session_state[KEY + "live"] = result
    if KEY + "live" in st.session_state:
        result = st.session_state[KEY + "live"]
        _show(result, "live run from this page")
        st.download_button("Download the results JSON", json.dumps(result, indent=1), file_name="validate.json",
                           mime="application/json", key=KEY + "download")


def render() -> None:
    st.title("Validate: simulator vs live engine")
    st.caption("Same requests, same engine settings and KV pool: the live engine measured, the simulator predicted. An "
               "error inside the live noise floor (grey bars) is as small as the engine's own run-to-run difference.")
    saved, error = data.read_json(data.VALIDATE_JSON)
    if error:
        st.error(error)
    elif saved is None:
        st.info(f"No validation results yet: `{data.VALIDATE_JSON.relative_to(data.ROOT)}` is absent. "
                f"Write them with `{COMMAND}`.")
    else:
        _show(saved, f"`{data.VALIDATE_JSON.relative_to(data.ROOT)}`")
    _live_button()
