"""Honest error bars: every answer carries its calibration's provenance and error, and the planner
re-checks the answer with every step time shifted by ± that error.

The error is the calibration's own held-out fit error (mean absolute percentage error of its step
times, `fit_error` in the simulation's facts). A calibration with no measured error (a roofline
estimate from datasheets) gets `PlanSettings.assumed_error`, labelled `assumed`. Shifting the step
cost scales every cost-model term by the same factor (`calibration.cost_model.scaled_calibration`), so a
simulated step takes exactly (1 ± error) times as long; nothing else about the calibration changes.
"""
from __future__ import annotations



def error_of(calibration_facts: dict, assumed_error: float) -> tuple[float, str]:
    """(relative step-time error, where it comes from) for the calibration named in a simulation's facts."""
    error = calibration_facts.get("fit_error")
    if error is not None and error > 0:
        return float(error), f"{calibration_facts['label']} calibration's held-out fit error"
    return assumed_error, (f"assumed: the {calibration_facts.get('label', 'derived')} "
                           f"({calibration_facts.get('method', 'unknown')}) calibration has no measured error")


def describe_recheck(replicas: int, error: float, slower: int | None, faster: int | None, high: int) -> str:
    """'12 replicas; 13 if step times are 4.0% slower than calibrated, 12 if 4.0% faster' (None: no fleet
    up to `high` replicas holds the SLO)."""
    def count(value: int | None) -> str:
        return str(value) if value is not None else f"more than {high}"
    noun = "replica" if replicas == 1 else "replicas"
    return (f"{replicas} {noun}; {count(slower)} if step times are {error:.1%} slower than calibrated, "
            f"{count(faster)} if {error:.1%} faster")
