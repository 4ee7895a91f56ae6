"""Honest error bars: every answer carries its calibration's provenance and error, and the planner
re-checks the answer with every step time shifted by ± that error.

The error is the held-out error of the calibration and engine profile in use: the median |error| of
`surgeplan validate --published` on public measurements the profile was not fitted on, of the plan's
own tensor-parallel degree on this GPU when it has enough such rows, else of its class (one GPU, or a
group) on this GPU when it has such rows, else on every GPU, else every row of this GPU
(`EngineProfile.held_out_error`, `held_out_error` in the simulation's facts).
Without published rows it falls back to the calibration's own cross-validated fit error of its step
times (`fit_error`), and a calibration with neither (a roofline estimate from datasheets) gets
`PlanSettings.assumed_error`, labelled `assumed`.
The re-check scales every whole step, GPU and serving stack, by (1 ± error)
(`ProfiledCostModel.scale`); nothing else changes.
"""

from __future__ import annotations


def error_of(calibration_facts: dict, assumed_error: float) -> tuple[float, str]:
    """(relative step-time error, where it comes from) for the calibration named in a simulation's facts."""
    held_out = calibration_facts.get("held_out_error")
    if held_out is not None and held_out > 0:
        rows = calibration_facts.get("held_out_rows")
        return float(held_out), (
            f"held-out error of the {calibration_facts.get('engine_profile')} profile on "
            f"published measurements{f' ({rows})' if rows else ''} (surgeplan validate --published)"
        )
    error = calibration_facts.get("fit_error")
    if error is not None and error > 0:
        return float(error), f"{calibration_facts['label']} calibration's held-out fit error"
    return assumed_error, (
        f"assumed: the {calibration_facts.get('label', 'derived')} "
        f"({calibration_facts.get('method', 'unknown')}) calibration has no measured error"
    )


def describe_recheck(
    replicas: int, error: float, slower: int | None, faster: int | None, high: int
) -> str:
    """'12 replicas; 13 if step times are 4.0% slower than calibrated, 12 if 4.0% faster' (None: no fleet
    up to `high` replicas holds the SLO)."""

    def count(value: int | None) -> str:
        return str(value) if value is not None else f"more than {high}"

    noun = "replica" if replicas == 1 else "replicas"
    return (
        f"{replicas} {noun}; {count(slower)} if step times are {error:.1%} slower than calibrated, "
        f"{count(faster)} if {error:.1%} faster"
    )
