"""The Validate page's published section: the simulator against public measurements of real serving
stacks on real GPUs (`surgeplan validate --published`). Every set's held-out rows pooled per engine
profile, GPU and tensor-parallel class against the targets (from the saved replay of all sets), each
profile's stored error per set, and one chosen set replayed with its scatter (the ±10% band drawn)."""

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
    small = "lambdalabs-vllm"  # replays in a second; the Argonne checks take longer
    chosen = st.selectbox(
        "published set to replay",
        names,
        index=names.index(small) if small in names else 0,
        key=KEY + "published_set",
    )
    for result in [catalogs.published_validation(chosen)] if chosen else []:
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
        st.plotly_chart(
            published_scatter(result["rows"]), key=f"validate_published_{source['name']}"
        )
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
