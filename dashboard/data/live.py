"""A short live-vs-simulated validation on this machine for the Validate page (minutes on the CPU),
with the progress messages it sends."""

from __future__ import annotations

LIVE_REPEATS = 2  # live runs per load level: two, for the noise floor


def live_validation_steps(load_levels: tuple[float, ...]) -> int:
    """Progress messages a live validation sends: the capacity run, the batch ladder, then each live run."""
    return 2 + LIVE_REPEATS * len(load_levels)


def live_validation(
    trace: str, num_requests: int, load_levels: tuple[float, ...], progress=None
) -> tuple[dict | None, str | None]:
    """A short live-vs-simulated validation on this machine (the live engine on `cpu-small`): minutes.
    `progress(message)` is called before each live run; an exception it raises ends the validation."""
    from simulator.validation.validate import validate

    try:
        return validate(
            "cpu-small",
            trace,
            num_requests=num_requests,
            load_levels=load_levels,
            profile="none",
            repeats=LIVE_REPEATS,
            progress=progress,
        ), None
    except ValueError as error:
        return None, str(error)
