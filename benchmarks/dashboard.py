"""Dashboard speed target: on the default What-if scenario, a change re-renders in ≤ 2 s.

Drives the What-if page through Streamlit's AppTest (the page's own script, no browser): the first
render (cold caches), then a series of input changes, each a scenario not simulated before (spike
multiplier, GPU price, max_num_seqs, batch controller), and one change back to a scenario already
simulated (answered from the cache). Each re-render is timed from the input change to the end of the
script run, median of `--repeats` passes with fresh caches.

Run: .venv/bin/python benchmarks/dashboard.py [--repeats 3]
Prints a table with the hardware and date; the figure goes in docs/measured/planner-claims-dashboard.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import describe_machine  # noqa: E402

TARGET_S = 2.0
# (what changes, widget kind, key, new value); applied in order, each on top of the last
CHANGES = [
    ("spike multiplier 10 -> 12", "number_input", "whatif_multiplier", 12.0),
    ("GPU price -> $3.00/h", "number_input", "whatif_price", 3.0),
    ("max_num_seqs 256 -> 128", "number_input", "whatif_max_num_seqs", 128),
    ("batch controller -> slo", "selectbox", "whatif_batch_controller", "slo"),
    ("spike multiplier back to 10 (cached)", "number_input", "whatif_multiplier", 10.0),
]


def _page():
    from streamlit.testing.v1 import AppTest

    def script() -> None:
        from dashboard.views import whatif

        whatif.render()

    return AppTest.from_function(script, default_timeout=120)


def one_pass() -> dict[str, float]:
    import streamlit as st

    st.cache_data.clear()
    at = _page()
    timings = {}
    started = time.perf_counter()
    at.run()
    timings["first render (cold caches)"] = time.perf_counter() - started
    for label, kind, key, value in CHANGES:
        getattr(at, kind)(key=key).set_value(value)
        started = time.perf_counter()
        at.run()
        timings[label] = time.perf_counter() - started
        if at.exception or at.error:
            raise SystemExit(
                f"{label}: the page failed: {[e.value for e in [*at.exception, *at.error]]}"
            )
    requests = next(c.value for c in at.caption if "requests simulated" in c.value)
    timings["_requests"] = requests
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    passes = [one_pass() for _ in range(args.repeats)]
    print(
        f"What-if page re-render (AppTest, median of {args.repeats} passes); {describe_machine()}"
    )
    print(passes[0]["_requests"].split("; ")[-1])
    print(f"{'change':<42}{'median s':>10}{'max s':>10}  target ≤ {TARGET_S:g} s")
    print("-" * 80)
    worst = 0.0
    for label in passes[0]:
        if label.startswith("_"):
            continue
        values = [p[label] for p in passes]
        if not label.startswith("first"):
            worst = max(worst, statistics.median(values))
        print(f"{label:<42}{statistics.median(values):>10.2f}{max(values):>10.2f}")
    print(
        f"slowest re-render (median): {worst:.2f} s -> {'met' if worst <= TARGET_S else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
