"""What one page hands another within a session: traffic chosen on the Traces page, a calibration
uploaded on the Calibrations page, the What-if page's scenario (which the Plan page plans for).

An offer is a plain session-state entry with a serial number; a receiving page takes each offer once
(`take`) and presets its own widgets from it before drawing them, so a user's later changes there are
not overwritten on the next rerun.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

TRACE, SPIKE, CALIBRATION = "trace", "spike", "calibration"
KINDS = (TRACE, SPIKE, CALIBRATION)
SCENARIO = "whatif_scenario"  # the What-if page's last valid scenario, as JSON


def offer(kind: str, value: dict[str, Any]) -> None:
    """Offer `value` (a trace file, spike parameters, a calibration file) to the pages that take `kind`."""
    if kind not in KINDS:
        raise KeyError(f"handoff kind {kind!r}; expected one of {', '.join(KINDS)}")
    previous = st.session_state.get(f"handoff_{kind}") or {}
    st.session_state[f"handoff_{kind}"] = {**value, "serial": previous.get("serial", 0) + 1}


def offered(kind: str) -> dict[str, Any] | None:
    """The latest offer of `kind`, taken or not."""
    return st.session_state.get(f"handoff_{kind}")


def take(kind: str, receiver: str) -> dict[str, Any] | None:
    """The latest offer of `kind` if `receiver` has not taken it yet (then it has)."""
    current = offered(kind)
    seen = f"handoff_{kind}_taken_by_{receiver}"
    if current is None or st.session_state.get(seen) == current["serial"]:
        return None
    st.session_state[seen] = current["serial"]
    return current
