"""The Validate page's published section: the simulator against public measurements of real serving
stacks on real GPUs (`surgeplan validate --published`). Every set's held-out rows pooled per engine
profile, GPU and tensor-parallel class against the targets (from the saved replay of all sets), each
profile's stored error per set, and one chosen set with its scatter (the ±10% band drawn): as the
saved replay has it, at once, or replayed with this code on request (the largest takes a minute)."""

from __future__ import annotations

import streamlit as st

from dashboard.charts.calibration import published_scatter
from dashboard.data import catalogs
from simulator.calibration.profile_errors import DEGREE_MIN_ROWS

KEY = "validate_"


def render_published_section() -> None:
    """Simulator vs public measurements of real stacks on real GPUs (`surgeplan validate --published`)."""
    st.subheader("Published measurements: simulator vs real GPUs")
    st.caption(
        "Each published run replayed through the simulator with its GPU's calibration and its serving "
        "stack's engine profile; the profile's host terms were fitted on the fit rows only, so the "
        "held-out rows are the honest error. `surgeplan validate --published all` prints the same."
    )
    summary, problem = catalogs.published_summary()
    st.markdown(
        "**Held out, every set pooled, per engine profile and GPU** (all tensor-parallel degrees, "
        "one GPU, and a tensor-parallel group; targets: median |error| ≤ 5%, bias within ±3%, "
        "≥ 80% within 10%; from `benchmarks/results/published_validation.json`, written by "
        "`surgeplan validate --published all --out`)"
    )
    if problem:
        st.caption(problem)
    st.dataframe(
        [
            {
                "profile": e["profile"],
                "GPU": e["gpu"],
                "degree": e["degree"],
                "rows": e["rows"],
                "median |error|": f"{e['median_abs_error']:.1%}",
                "bias (geo. mean ratio)": f"{e['bias']:.3f}",
                "within 10%": f"{e['within_10pct']:.0%}",
                "targets": "met" if e["meets_targets"] else "missed",
            }
            for e in summary
        ],
        hide_index=True,
    )
    held = [e for e in catalogs.profile_errors() if e["split"] == "held_out"]
    for title, chosen, degree in (
        (
            "**Held-out error per engine profile and GPU** (rows the profile was not fitted on)",
            [e for e in held if e["tensor_parallel"] is None],
            {},
        ),
        (
            "**The same per tensor-parallel degree** (a plan's band reads its own degree's rows "
            f"on its GPU from {DEGREE_MIN_ROWS} rows on, else its degree's class: one GPU, or a "
            "tensor-parallel group; the next table)",
            [e for e in held if e["tensor_parallel"] is not None],
            {"TP": None},
        ),
    ):
        st.markdown(title)
        st.dataframe(
            [
                {
                    "profile": e["profile"],
                    "GPU": e["gpu"],
                    "published set": e["source"],
                    **{key: e["tensor_parallel"] for key in degree},
                    "rows": e["num_rows"],
                    "median |error|": f"{e['median_abs_error']:.1%}",
                    "bias (geo. mean ratio)": f"{e['bias']:.3f}",
                    "within 10%": f"{e['within_10pct']:.0%}",
                }
                for e in chosen
            ],
            hide_index=True,
        )
    st.markdown(
        "**The planner's band** (a plan re-checks its answer with every step this much slower and "
        "faster: the held-out rows it reads, per engine profile, GPU and degree)"
    )
    st.dataframe(
        [
            {
                "profile": e["profile"],
                "GPU": e["gpu"],
                "TP": e["tensor_parallel"],
                "band": f"±{e['band']:.1%}",
                "rows read": e["rows_read"],
            }
            for e in catalogs.planner_bands()
        ],
        hide_index=True,
    )
    names = catalogs.published_set_names()
    chosen = st.selectbox("published set", names, key=KEY + "published_set")
    if not chosen:
        return
    saved, problem = catalogs.published_saved(chosen)
    replay = st.checkbox(
        "replay it now with this code (seconds for most sets; up to a minute for the largest, "
        "TensorRT-LLM 0.17's overview, on a 2-core machine)",
        key=KEY + "published_replay_" + chosen,  # one box a set: another set does not replay itself
    )
    if replay:
        with st.spinner(f"replaying {chosen}"):
            fresh = catalogs.published_validation(chosen)
        st.caption(f"replayed now; {_against_saved(fresh, saved)}")
        _render_set(fresh)
    elif saved is not None:
        st.caption(
            "as the saved replay has it (`benchmarks/results/published_validation.json`); tick the "
            "box above to replay it with this code"
        )
        _render_set(saved)
    else:
        st.caption(f"{problem}; tick the box above to replay it")


def _against_saved(fresh: dict, saved: dict | None) -> str:
    """How a fresh replay compares with the saved one, row by row (same run, metric and GPU)."""
    if saved is None:
        return "the saved replay does not have this set"

    def key(row: dict) -> tuple[str, str, str]:
        return row["run"], row["metric"], row["gpu"]

    before = {key(r): r["simulated"] for r in saved["rows"]}
    moved = sum(
        1
        for r in fresh["rows"]
        if key(r) not in before or abs(r["simulated"] - before[key(r)]) > 1e-9 * abs(r["simulated"])
    )
    gone = len(set(before) - {key(r) for r in fresh["rows"]})
    if not moved and not gone:
        return f"all {len(fresh['rows'])} rows as saved"
    return (
        f"{moved} of {len(fresh['rows'])} rows differ from the saved replay"
        + (f", {gone} saved rows gone" if gone else "")
        + " (the code or the set changed since it was written)"
    )


def _render_set(result: dict) -> None:
    """One set: where it comes from, its errors per profile, GPU and split, the scatter, every row."""
    source = result["source"]
    st.markdown(
        f"**{source['name']}**: {source['engine_version']}, profile `{source['engine_profile']}`; "
        f"[source]({source['url']}), retrieved {source['retrieved']}"
        + (f"; {source['closed_loop']}" if source.get("closed_loop") else "")
    )
    st.dataframe(
        [
            {
                "profile": e["profile"],
                "GPU": e["gpu"],
                "split": e["split"],
                "rows": e["rows"],
                "median |error|": f"{e['median_abs_error']:.1%}",
                "bias (geo. mean ratio)": f"{e['bias']:.3f}",
                "within 10%": f"{e['within_10pct']:.0%}",
            }
            for e in result["stats"]
        ],
        hide_index=True,
    )
    st.plotly_chart(published_scatter(result["rows"]), key=f"validate_published_{source['name']}")
    with st.expander("every row"):
        st.dataframe(
            [
                {
                    "run": r["run"],
                    "GPU": r["gpu"],
                    "split": r["split"],
                    "metric": r["metric"],
                    "measured (s)": round(r["measured"], 4),
                    "simulated (s)": round(r["simulated"], 4),
                    "error": f"{r['error']:+.1%}",
                }
                for r in result["rows"]
            ],
            hide_index=True,
        )
