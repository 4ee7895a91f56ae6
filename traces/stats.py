"""Statistics that describe a trace: rates over time, burstiness, lengths, prefix reuse."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict

from traces.trace import Trace

PERCENTILES = (50, 90, 99)


class LengthStats(BaseModel):
    model_config = ConfigDict(frozen=True)

    mean: float
    min: int
    p50: float
    p90: float
    p99: float
    max: int

    @classmethod
    def of(cls, values: np.ndarray) -> LengthStats:
        if len(values) == 0:
            return cls(mean=0.0, min=0, p50=0.0, p90=0.0, p99=0.0, max=0)
        p50, p90, p99 = (float(v) for v in np.percentile(values, PERCENTILES))
        return cls(
            mean=float(values.mean()),
            min=int(values.min()),
            p50=p50,
            p90=p90,
            p99=p99,
            max=int(values.max()),
        )


class TraceStats(BaseModel):
    """The summary `surgeplan traces info` prints; `model_dump_json()` is its `--json` form."""

    model_config = ConfigDict(frozen=True)

    name: str
    requests: int
    duration_s: float
    mean_rate_per_s: float
    window_s: float
    rate_per_window: list[float]
    peak_rate_per_s: float
    peak_to_mean: float
    empty_windows: int
    interarrival_cv: float | None
    prompt_tokens: LengthStats
    output_tokens: LengthStats
    failed_requests: int
    hash_block_size: int | None
    prefix_block_repeat_share: float | None
    tenants: dict[str, int]
    provenance: list[str]


def rate_per_window(trace: Trace, window_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(window start times, requests/s in each window), windows of `window_s` from the first arrival.

    The last window may be cut short by the end of the trace, so its rate can read low, never high.
    """
    if not window_s > 0:
        raise ValueError(f"window_s is {window_s}; expected > 0")
    if len(trace) == 0:
        return np.zeros(0), np.zeros(0)
    start = float(trace.arrival_s[0])
    windows = max(1, int(np.floor(trace.duration_s / window_s)) + 1)
    index = np.minimum(((trace.arrival_s - start) // window_s).astype(np.int64), windows - 1)
    counts = np.bincount(index, minlength=windows)
    return start + window_s * np.arange(windows), counts / window_s


def interarrival_cv(arrival_s: np.ndarray) -> float | None:
    """Coefficient of variation of the gaps: 0 for clockwork, 1 for Poisson, > 1 for bursty."""
    gaps = np.diff(arrival_s)
    if len(gaps) < 2 or gaps.mean() == 0:
        return None
    return float(gaps.std() / gaps.mean())


def prefix_block_repeat_share(trace: Trace) -> float | None:
    """Share of prompt blocks whose hash id already appeared earlier in the trace (cacheable)."""
    if trace.hash_ids is None:
        return None
    flat, _offsets = trace.flat_hash_ids()
    if len(flat) == 0:
        return 0.0
    return float(1.0 - len(np.unique(flat)) / len(flat))


def compute_stats(trace: Trace, window_s: float = 60.0) -> TraceStats:
    _starts, rates = rate_per_window(trace, window_s)
    mean_rate = len(trace) / trace.duration_s if trace.duration_s > 0 else 0.0
    peak = float(rates.max()) if len(rates) else 0.0
    tenants, counts = np.unique(trace.tenant, return_counts=True)
    return TraceStats(
        name=trace.name,
        requests=len(trace),
        duration_s=trace.duration_s,
        mean_rate_per_s=mean_rate,
        window_s=window_s,
        rate_per_window=[float(r) for r in rates],
        peak_rate_per_s=peak,
        peak_to_mean=peak / mean_rate if mean_rate > 0 else 0.0,
        empty_windows=int(np.sum(rates == 0)),
        interarrival_cv=interarrival_cv(trace.arrival_s),
        prompt_tokens=LengthStats.of(trace.prompt_tokens),
        output_tokens=LengthStats.of(trace.output_tokens),
        failed_requests=int(trace.failed.sum()),
        hash_block_size=trace.hash_block_size,
        prefix_block_repeat_share=prefix_block_repeat_share(trace),
        tenants={str(t): int(c) for t, c in zip(tenants, counts)},
        provenance=list(trace.provenance),
    )
