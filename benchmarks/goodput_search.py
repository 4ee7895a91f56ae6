"""The goodput benchmarks' shared parts (`benchmarks/disaggregation.py`, `benchmarks/splitwise_anchor.py`):
a workload's scenario at one Poisson rate, and the search for the highest rate that holds an SLO."""

from pathlib import Path

from simulator import Scenario

# the engine profile for calibrations built from a published system's whole-step times (DistServe's
# artifact, Splitwise's characterization): they already hold that engine's host time, so it adds nothing
WHOLE_STEP_PROFILE = Path(__file__).resolve().parent / "data" / "whole_step_profile.json"


def scenario_for(workload: dict, rate: float, duration_s: float, changes: dict) -> Scenario:
    """The workload at `rate`: its scheduler settings (key `scheduler`, when it has one) over the
    defaults here, then the layout's `changes`."""
    return Scenario.model_validate(
        {
            "name": "goodput",
            "seed": 0,
            "traffic": {
                "arrivals": {"kind": "poisson", "rate_per_s": rate},
                "duration_s": duration_s,
                "prompt": workload["prompt"],
                "output": workload["output"],
                "too_long": "clip",
            },
            "model": {"name": workload["model"]},
            "hardware": {"gpu": workload["gpu"]},
            "scheduler": {
                "max_num_seqs": 256,
                "max_num_batched_tokens": 8192,
                "max_model_len": 4096,
                **workload.get("scheduler", {}),
                **changes,
            },
            "slo": {"ttft_p99_s": workload["ttft_s"], "tpot_p99_s": workload["tpot_s"]},
        }
    )


def highest_rate(holds, start_rps: float, steps: int) -> float:
    """The highest rate that `holds`: doubled from `start_rps` to a miss, then `steps` bisections."""
    low, high = 0.0, start_rps
    while holds(high):
        low, high = high, 2 * high
    for _ in range(steps):
        mid = (low + high) / 2
        low, high = (mid, high) if holds(mid) else (low, mid)
    return low
