"""Measured vs simulated, metric by metric: the summary both sides share, the simulator's relative
error, and the live engine's own noise floor (live vs live) beside it.

Relative error = (simulated − measured) / measured. Where the measured value is under 50 ms the
absolute error in milliseconds is given beside it, since a few milliseconds of a tiny value make a
large percentage. An error below the noise floor is reported as such: the live engine could not tell
it apart from its own repeat.
"""

from __future__ import annotations

from traces.replay import RequestRecord
from traces.replay_summary import flat_summary

# The metrics validation compares (keys of the shared summary).
METRICS = (
    "throughput_rps",
    "output_tokens_per_s",
    "ttft_mean_s",
    "ttft_p50_s",
    "ttft_p99_s",
    "tpot_mean_s",
    "tpot_p99_s",
    "e2e_mean_s",
    "e2e_p50_s",
    "e2e_p99_s",
    "queue_mean_s",
    "preemptions",
    "kv_utilization",
)
SMALL_S = 0.050  # below this, show the absolute error too


def summary_of(
    records: list[RequestRecord], duration_s: float, kv_utilization: float | None
) -> dict:
    summary = flat_summary(records, duration_s)
    summary["kv_utilization"] = kv_utilization
    return {key: summary[key] for key in ("completed", *METRICS)}


def mean_by_key(dicts: list[dict]) -> dict:
    """Key by key, the mean of several runs' summaries or errors (None where any run has None)."""
    return {
        key: None if any(d[key] is None for d in dicts) else sum(d[key] for d in dicts) / len(dicts)
        for key in dicts[0]
    }


def relative_errors(measured: dict, simulated: dict) -> dict:
    errors = {}
    for key in METRICS:
        m, s = measured.get(key), simulated.get(key)
        errors[key] = None if m is None or s is None or m == 0 else (s - m) / abs(m)
    return errors


def absolute_errors_ms(measured: dict, simulated: dict) -> dict:
    """Milliseconds, for time metrics whose measured value is under 50 ms."""
    return {
        key: (simulated[key] - measured[key]) * 1e3
        for key in METRICS
        if key.endswith("_s")
        and measured.get(key) is not None
        and simulated.get(key) is not None
        and abs(measured[key]) < SMALL_S
    }


def noise_floor(first: dict, second: dict) -> dict:
    """|live₂ − live₁| / |live₁| per metric: how far the engine disagrees with itself."""
    return {
        key: None if value is None else abs(value)
        for key, value in relative_errors(first, second).items()
    }


def verdicts(errors: dict, floor: dict | None) -> dict:
    """Per metric: 'below noise' when the error is within the live-vs-live difference."""
    out = {}
    for key, error in errors.items():
        if error is None:
            out[key] = "n/a"
        elif floor and floor.get(key) is not None and abs(error) <= floor[key]:
            out[key] = "below noise"
        else:
            out[key] = f"{error:+.1%}"
    return out


def latencies(records: list[RequestRecord]) -> dict:
    """Per completed request, in seconds: the distributions behind the summary (for overlaid plots)."""
    ok = [r for r in records if r.ok]
    return {
        "ttft_s": [r.ttft_s for r in ok if r.ttft_s is not None],
        "tpot_s": [r.tpot_s for r in ok if r.tpot_s is not None],
        "e2e_s": [r.e2e_s for r in ok if r.e2e_s is not None],
    }
