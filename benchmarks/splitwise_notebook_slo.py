"""Splitwise's SLO judged as its artifact's notebooks judge a run (`notebooks/plots.ipynb` `get_data`,
`get_slo`; `notebooks/perf_model.py` `add_baseline_perf`; github.com/Mutinifni/splitwise-sim, MIT),
re-implemented, not copied: the judge `benchmarks/splitwise_crosscheck.py` applies to both simulators.

A request's reference prompt and token times are the characterization's DGX-A100 TP8 medians per
*batch-token* count (prompt size x batch size), interpolated linearly at its prompt size (extrapolated
from the end segments, as scipy's `interp1d(..., fill_value="extrapolate")`); its slowdowns are TTFT over
the reference prompt time, time between tokens ((E2E - TTFT) / output tokens, splitwise-sim's
`tbt_times`) over the reference token time, and E2E over prompt + token x (tokens - 1); the limits at
P50 / P90 / P99 are `splitwise_anchor.SLO`. Throughput is the highest rate on a grid that holds.
"""

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.splitwise_anchor import SLO

REFERENCE = ("llama2-70b", "a100-80gb", "8")  # model, hardware, TP of `add_baseline_perf`


@dataclass(frozen=True)
class Served:
    """What a simulator reports per completed request (seconds, tokens)."""

    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    ttft_s: np.ndarray
    e2e_s: np.ndarray
    offered: int  # requests sent; fewer served is a miss

    @property
    def tbt_s(self) -> np.ndarray:
        """Splitwise's time between tokens: (E2E - TTFT) / output tokens (its `tbt_times`)."""
        return (self.e2e_s - self.ttft_s) / self.output_tokens


def median_line(groups: dict[int, list[float]]) -> tuple[np.ndarray, np.ndarray]:
    """splitwise-sim's interpolator's points (its `DatabasePerformanceModel.init_predictor`, the
    notebooks' `PerfModel`): the batch-token counts in order and the median time at each."""
    xs = sorted(groups)
    return np.array(xs, dtype=float), np.array([float(np.median(groups[x])) for x in xs])


def on_line(xs: np.ndarray, ys: np.ndarray, at) -> np.ndarray:
    """The line through (`xs`, `ys`) at `at`, its end segments extended beyond the ends (scipy's
    `interp1d(..., fill_value="extrapolate")`, which splitwise-sim builds)."""
    at = np.asarray(at, dtype=float)
    low = ys[0] + (at - xs[0]) * (ys[1] - ys[0]) / (xs[1] - xs[0])
    high = ys[-1] + (at - xs[-1]) * (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
    return np.where(at < xs[0], low, np.where(at > xs[-1], high, np.interp(at, xs, ys)))


class NotebookReference:
    """Each request's reference prompt and token times as Splitwise's `add_baseline_perf` gives them:
    the DGX-A100 TP8 rows of the characterization, the median time per batch-token count (prompt size x
    batch size), interpolated linearly (and extrapolated from the end segments) at the prompt size."""

    def __init__(self, perf_model_csv: Path):
        groups: dict[int, tuple[list[float], list[float]]] = {}
        with perf_model_csv.open() as f:
            for line, row in enumerate(csv.DictReader(f), start=2):
                key = (row["model"], row["hardware"], row["tensor_parallel"])
                if key != REFERENCE:
                    continue
                tokens = int(row["prompt_size"]) * int(row["batch_size"])
                prompt_ms, token_ms = float(row["prompt_time"]), float(row["token_time"])
                if prompt_ms <= 0 or token_ms <= 0:
                    raise ValueError(
                        f"{perf_model_csv}:{line}: prompt_time {prompt_ms}, token_time {token_ms}; "
                        "expected times > 0 ms"
                    )
                groups.setdefault(tokens, ([], []))
                groups[tokens][0].append(prompt_ms / 1e3)
                groups[tokens][1].append(token_ms / 1e3)
        if len(groups) < 2:
            raise ValueError(
                f"{perf_model_csv}: {len(groups)} batch-token counts for {REFERENCE}; expected at "
                "least 2 (a splitwise-sim data/perf_model.csv)"
            )
        self.tokens, self.prompt_s = median_line({t: pair[0] for t, pair in groups.items()})
        _, self.token_s = median_line({t: pair[1] for t, pair in groups.items()})

    def times(self, prompt_tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        tokens = np.asarray(prompt_tokens, dtype=float)
        return on_line(self.tokens, self.prompt_s, tokens), on_line(
            self.tokens, self.token_s, tokens
        )


def slo_margins(served: Served, reference: NotebookReference) -> dict[str, float]:
    """Each percentile's slowdown over its limit (< 1 holds), keyed like `ttft_p99`; a run that served
    fewer requests than it was sent misses every limit."""
    if len(served.ttft_s) < served.offered:
        return {f"{m}_p{q}": float("inf") for m, qs in SLO.items() for q in qs}
    prompt_s, token_s = reference.times(served.prompt_tokens)
    slowdown = {
        "ttft": served.ttft_s / prompt_s,
        "tbt": served.tbt_s / token_s,
        "e2e": served.e2e_s / (prompt_s + token_s * (served.output_tokens - 1)),
    }
    # pandas' quantile, which the notebooks call, is numpy's linear percentile
    return {
        f"{metric}_p{q}": float(np.percentile(slowdown[metric], q)) / limit
        for metric, limits in SLO.items()
        for q, limit in limits.items()
    }


def highest_grid_rate(holds, coarse: int, fine: int, top: int) -> tuple[int, dict]:
    """The notebooks' throughput: the highest grid rate that holds (coarse steps to the first miss,
    then fine steps above the last hold); also every rate tried."""
    tried: dict[int, dict] = {}

    def ok(rate: int) -> bool:
        if rate not in tried:
            tried[rate] = holds(rate)
        return max(tried[rate].values()) < 1

    low, high = 0, top + coarse
    for rate in range(coarse, top + 1, coarse):
        if not ok(rate):
            high = rate
            break
        low = rate
    for rate in range(low + fine, high, fine):
        if not ok(rate):
            break
        low = rate
    return low, tried
