"""Calibrations: where the simulator's step times come from. Every shipped calibration with its label
(`measured`, `fitted`, `derived`) and fit error, predicted step times side by side, the terms of one
calibration, and — for a measured file from `surgeplan profile` — its prediction against each point,
with a button that puts it to use on the What-if page at once."""

from __future__ import annotations

import streamlit as st

from dashboard import handoff, views
from dashboard import widgets as w
from dashboard.charts.calibration import predicted_vs_measured, step_curves
from dashboard.data import catalogs, trace_files
from simulator.scenario import HardwareChoice

KEY = "calibrations_"
CONTEXT_TOKENS = 1024
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
PREFILL_TOKENS = [128, 256, 512, 1024, 2048, 4096]
DEFAULT_COMPARE = [
    "llama-2-7b@A100-80GB-tp1",
    "llama-2-7b@H100-80GB-tp1",
    "llama-2-7b@H200-141GB-tp1",
]


def _table() -> None:
    rows = catalogs.calibration_rows()
    st.dataframe(
        rows,
        hide_index=True,
        column_config={
            "fit error, held out (%)": st.column_config.NumberColumn(
                format="%.1f",
                help="mean absolute percentage error "
                "on points left out of the fit (cross-validated)",
            ),
            "fit error, train (%)": st.column_config.NumberColumn(format="%.1f"),
            "label": st.column_config.TextColumn(
                help="measured: timed on the device; fitted: fitted on public measured "
                "tables; derived: carried from another device or a roofline estimate"
            ),
        },
    )
    st.caption(
        "A derived calibration repeats the fit error of the one it came from; a roofline estimate has none."
    )


def _detail(name: str) -> None:
    calibration = catalogs.shipped_calibrations()[name]
    fit = calibration.cost_model
    st.markdown(
        f"**{calibration.name}** — `{calibration.label}`; {calibration.model.name} ({calibration.dtype}) on "
        f"{calibration.device.name} × TP {calibration.device.tensor_parallel}  \nsource: "
        f"{calibration.provenance.source}  \nmethod: {calibration.provenance.method}"
    )
    for note in calibration.provenance.notes[:4]:
        st.caption(f"• {note}")
    st.dataframe(
        [
            {
                "term": t.name,
                "per": t.feature,
                "seconds per unit": t.seconds_per_unit,
                "bound": t.bound,
                "label": t.label,
                "note": t.note,
            }
            for t in fit.terms
        ],
        hide_index=True,
        column_config={"seconds per unit": st.column_config.NumberColumn(format="%.3e")},
    )
    if fit.all_reduce_curve is not None:
        curve = fit.all_reduce_curve
        st.caption(
            f"tensor-parallel all-reduce: the measured table itself ({len(curve.tokens)} sizes, "
            f"{curve.tokens[0]:.3g}-{curve.tokens[-1]:.0f} tokens, log-log between them); its "
            "'seconds per unit' is a scale of it, 1 as measured"
        )
    if fit.fit_errors:
        st.dataframe(
            [
                {
                    "fit target": e.target,
                    "points": e.num_points,
                    "train": e.mape_train,
                    "held out": e.mape_cross_validated,
                    "max": e.max_ape,
                }
                for e in fit.fit_errors
            ],
            hide_index=True,
            column_config={
                k: st.column_config.NumberColumn(format="percent")
                for k in ("train", "held out", "max")
            },
        )


def _uploaded():
    upload = st.file_uploader(
        "A calibration JSON of your own (e.g. from `surgeplan profile`)",
        type=["json"],
        key=KEY + "upload",
        help=w.field_help(HardwareChoice, "calibration"),
    )
    if upload is None:
        return None
    calibration, error = catalogs.read_calibration(upload.getvalue(), upload.name)
    if error:
        st.error(error)
        return None
    points = catalogs.measured_points(calibration)
    fit_error = calibration.cost_model.fit_errors[0] if calibration.cost_model.fit_errors else None
    summary = f"{calibration.name} ({calibration.label}): {len(points)} measured points" + (
        f", fit error {fit_error.mape_train:.1%} train / "
        f"{fit_error.mape_cross_validated:.1%} held out"
        if fit_error and fit_error.mape_cross_validated is not None
        else ""
    )
    if points:
        st.plotly_chart(
            predicted_vs_measured(points, f"{calibration.name}: predicted vs measured step time"),
            key="calibrations_pvm",
        )
    st.caption(summary)
    _use_it(calibration, upload.getvalue(), upload.name)
    return calibration


def _use_it(calibration, content: bytes, filename: str) -> None:
    """Send the uploaded calibration to the What-if page, with its model and GPU when they are known there."""
    if st.button(
        "Use this calibration on the What-if page", key=KEY + "use", icon=":material/send:"
    ):
        path = trace_files.keep_upload(content, filename)
        handoff.offer(
            handoff.CALIBRATION,
            {
                "path": str(path),
                "name": calibration.name,
                "label": calibration.label,
                "model": calibration.model.name,
                "gpu": calibration.device.hardware,
                "tensor_parallel": calibration.device.tensor_parallel,
            },
        )
        st.session_state[KEY + "sent"] = calibration.name
    if st.session_state.get(KEY + "sent") == calibration.name:
        known = calibration.model.name in catalogs.model_names()
        st.success(
            f"The What-if page now simulates with **{calibration.name}** ({calibration.label})"
            + (
                "."
                if known
                else f", but it was made for {calibration.model.name!r}, which is not one of "
                "that page's models: the page will say it cannot use it."
            )
        )
        views.link("whatif", "Open the What-if page")


def render() -> None:
    st.title("Calibrations")
    st.caption(
        "The simulator times each engine step with a cost model fitted on measured step or operator timings. "
        "`measured`: timed here with `surgeplan profile`; `fitted`: fitted on public measured operator tables "
        "(Vidur, A100/H100); `derived`: carried to other hardware by datasheet ratios, or a roofline estimate."
    )
    _table()
    names = list(catalogs.shipped_calibrations())
    chosen = st.multiselect(
        "Compare predicted step times",
        names,
        default=[n for n in DEFAULT_COMPARE if n in names],
        key=KEY + "compare",
        help=w.field_help(HardwareChoice, "calibration"),
    )
    with st.expander("Your own calibration file"):
        extra = _uploaded()
    if chosen or extra is not None:
        curves = catalogs.step_curves(chosen, CONTEXT_TOKENS, BATCHES, PREFILL_TOKENS, extra)
        st.plotly_chart(
            step_curves(curves, BATCHES, PREFILL_TOKENS, CONTEXT_TOKENS),
            key="calibrations_curves",
        )
        st.caption("Each line names its calibration and label; dashed lines are `derived`.")
    else:
        st.info("Pick one or more calibrations to compare their predicted step times.")
    if names:
        st.subheader("Terms of one calibration")
        detail = st.selectbox(
            "calibration",
            names,
            index=names.index(chosen[0]) if chosen else 0,
            key=KEY + "detail",
            help=w.field_help(HardwareChoice, "calibration"),
        )
        _detail(detail)
