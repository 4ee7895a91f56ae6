"""The requests the splitwise-sim cross-check (`benchmarks/splitwise_crosscheck.py`) sends: made as
splitwise-sim's `generate_trace.py` makes its rate sweeps (Poisson arrivals, lengths drawn with
replacement from the Azure 2023 trace, no clipping), or the very requests our Splitwise anchor gives our
simulator (`benchmarks/splitwise_anchor.py`); and the trace CSV splitwise-sim reads."""

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks import splitwise_anchor as anchor

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces"
AZURE = {"conv": "AzureLLMInferenceTrace_conv.csv", "code": "AzureLLMInferenceTrace_code.csv"}
WORKLOAD_NAMES = {
    "conv": "Splitwise conversation (Azure conv)",
    "code": "Splitwise coding (Azure code)",
}


@dataclass(frozen=True)
class Requests:
    """One trace: arrival times (s), prompt and output lengths (tokens), one entry per request."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray


def splitwise_requests(kind: str, rate: float, duration_s: float, seed: int) -> Requests:
    """Poisson arrivals at `rate` for `duration_s`, lengths drawn with replacement from the Azure 2023
    trace of `kind`, as splitwise-sim's `generate_trace.py` makes its rate sweeps."""
    path = TRACES / AZURE[kind]
    with path.open() as f:
        rows = list(csv.DictReader(f))
    prompts = np.array([int(row["ContextTokens"]) for row in rows])
    outputs = np.array([int(row["GeneratedTokens"]) for row in rows])
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate, size=int(rate * duration_s * 2) + 100)
    arrival = np.cumsum(gaps)
    arrival = arrival[arrival < duration_s]
    picks = rng.integers(0, len(rows), size=len(arrival))
    return Requests(arrival, prompts[picks], outputs[picks])


def anchor_requests(kind: str, rate: float, duration_s: float) -> Requests:
    """The requests our anchor's scenario gives our simulator at `rate` (seed 0)."""
    from benchmarks.goodput_search import scenario_for
    from simulator.simulation import load_traffic

    workload = anchor.WORKLOADS[WORKLOAD_NAMES[kind]]
    trace = load_traffic(scenario_for(workload, rate, duration_s, {}))
    return Requests(
        np.asarray(trace.arrival_s, dtype=float),
        np.asarray(trace.prompt_tokens),
        np.asarray(trace.output_tokens),
    )


def write_trace(path: Path, requests: Requests) -> None:
    """splitwise-sim's trace CSV (its README, "Request Traces"): type 2 is LLM inference."""
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(
            [
                "request_id",
                "request_type",
                "application_id",
                "arrival_timestamp",
                "batch_size",
                "prompt_size",
                "token_size",
            ]
        )
        for i, (arrival, prompt, output) in enumerate(
            zip(requests.arrival_s, requests.prompt_tokens, requests.output_tokens)
        ):
            out.writerow([i, 2, 0, f"{arrival:.6f}", 1, int(prompt), int(output)])
