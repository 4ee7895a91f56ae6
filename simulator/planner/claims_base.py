"""What every row of the claims report shares: the scenario it starts from (Llama-2-7B on one
A100-80GB replica, Azure-conversation-like lengths, the SLO), the 95% Student-t interval of a mean over
seeds or repeats, the verdict against the article's band, and how a claim's simulations are asked of the
planner's runner (searches that yield jobs, as `search.drive` runs them)."""

from __future__ import annotations

import math
import statistics

from simulator.planner.evaluate import make_job
from simulator.scenario import Scenario

_T95 = {
    1: 12.71,
    2: 4.30,
    3: 3.18,
    4: 2.78,
    5: 2.57,
    6: 2.45,
    7: 2.36,
    8: 2.31,
    9: 2.26,
}  # df -> t(0.975)


def base(policy: str, seed: int, traffic: dict, name: str) -> Scenario:
    return Scenario.model_validate(
        {
            "name": name,
            "seed": seed,
            "model": {"name": "llama-2-7b"},
            "hardware": {"gpu": "A100-80GB"},
            "traffic": {"too_long": "clip", **traffic},
            "cluster": {"replicas": 1},
            "scheduler": {"policy": policy, "max_num_seqs": 256, "max_num_batched_tokens": 4096},
            "slo": {"ttft_p99_s": 2.0, "tpot_p99_s": 0.15, "max_abandon_rate": 0.01},
        }
    )


def interval(values: list[float]) -> tuple[float, float, float]:
    """(mean, low, high): 95% Student-t interval of the mean."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, mean, mean
    half = _T95.get(len(values) - 1, 1.96) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def verdict(
    low: float, high: float, band: tuple[float, float], higher_is_better: bool = True
) -> str:
    """Where the 95% interval [low, high] lies against the article's band [band[0], band[1]]: `confirms`
    only when the whole interval lies within the band; `below` / `above` when it lies wholly under / over
    it; `inconclusive` when it straddles an edge of the band (part inside, part outside).
    `higher_is_better` is kept for callers; whether below is good or bad is said by `reason`."""
    if band[0] <= low and high <= band[1]:
        return "confirms"
    if high < band[0]:
        return "below"
    if low > band[1]:
        return "above"
    return "inconclusive"


def reason(
    low: float, high: float, band: tuple[float, float], higher_is_better: bool = True
) -> str:
    """One sentence: why the verdict is what it is."""
    span = f"95% interval {low:.3g}–{high:.3g}" if low != high else f"value {low:.3g}"
    claim = f"the claim's {band[0]:.3g}–{band[1]:.3g}"
    kind = verdict(low, high, band)
    if kind == "confirms":
        return f"{span} lies within {claim}"
    if kind in ("below", "above"):
        good = (kind == "above") == higher_is_better
        return f"{span} lies wholly {kind} {claim} ({'better' if good else 'worse'} than claimed)"
    return (
        f"{span} straddles an edge of {claim}: part of it lies outside; more repeats or seeds, or a "
        "workload closer to the claim's, would decide"
    )


def job(scenario: Scenario, context: dict) -> tuple[dict, dict]:
    """A full simulation to the end (no early stop: the claims read its figures, not only its verdict)."""
    return make_job(scenario, early_stop=False), context


def all_at_once(pairs):
    """A search that asks for all its jobs in one round and returns their outcomes."""
    return (yield pairs)
