"""The requests `validate` runs, from a trace: the first requests with output, lengths clipped (or
scaled) to the small model; arrivals rescaled to a share of the engine's capacity; and the batch
ladder of calibration groups. Apart from `validate.py` (the run itself) because it only shapes
inputs and touches neither the live engine nor the simulator."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simulator.calibration.cost_fit import FEW_TOKEN_COUNTS
from simulator.calibration.live_run import LiveRequests
from traces import load_trace

# group sizes of the calibration runs after the capacity run: every decode batch the fit needs to
# place the matrix-vector / matrix-matrix switch (1-5), then 8 and 16
LADDER = FEW_TOKEN_COUNTS + (8, 16)


def prepare_requests(
    trace_path: str | Path,
    num_requests: int,
    max_prompt_tokens: int,
    max_output_tokens: int,
    length_scale: float | None,
    max_model_len: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """(arrival offsets, prompt lengths, output lengths, trace name) of the first requests with output."""
    try:
        trace = load_trace(trace_path)
    except (OSError, ValueError) as error:
        raise ValueError(f"--trace {trace_path}: cannot read it as a trace ({error})") from None
    keep = np.flatnonzero(trace.output_tokens >= 1)[:num_requests]
    if len(keep) == 0:
        raise ValueError(
            f"--trace {trace_path}: no request with output tokens; expected a trace of served requests"
        )
    arrival = trace.arrival_s[keep] - trace.arrival_s[keep[0]]
    prompt, output = (
        trace.prompt_tokens[keep].astype(float),
        trace.output_tokens[keep].astype(float),
    )
    if length_scale is not None:
        prompt, output = prompt * length_scale, output * length_scale
    prompt = np.clip(np.rint(prompt), 1, max_prompt_tokens).astype(int)
    output = np.clip(np.rint(output), 1, max_output_tokens).astype(int)
    prompt = np.minimum(prompt, max_model_len - output)
    return arrival, prompt, output, trace.name


def at_load(arrival: np.ndarray, capacity_rps: float, load: float) -> tuple[np.ndarray, float]:
    """Arrival offsets compressed or stretched so the mean rate is `load` × capacity."""
    if load <= 0:
        raise ValueError(f"load level {load}; expected a share of capacity > 0 (0.5 is half)")
    n = len(arrival)
    rate = load * capacity_rps
    span = arrival[-1] if n > 1 and arrival[-1] > 0 else 1.0
    natural_rate = (n - 1) / span if n > 1 else rate
    return arrival * (natural_rate / rate), rate


def ladder_requests(prompt: np.ndarray, output: np.ndarray, sizes=LADDER) -> list[LiveRequests]:
    """Successive groups of the trace's requests (wrapping around), each group sent all at once."""
    groups, start = [], 0
    for size in sizes:
        chosen = [(start + i) % len(prompt) for i in range(size)]
        groups.append(LiveRequests(np.zeros(size), prompt[chosen], output[chosen]))
        start += size
    return groups
