"""A serving stack's host terms: what each one's seconds multiply, and which are paid per step.

An engine profile (`engine_profile.EngineProfile.terms`) adds the stack's own work around the GPU's
kernels as terms, each a number of seconds per unit, with its label and source. Per step: the step
itself, each scheduled sequence, each prefill token, each output token (`host_s` sums them and the
profile's overlap hides part of it under the GPU). Not per step: `wake`, once on the first step after
the engine was idle (thread wake-up, cold caches; the replica adds it), and `request`, once per
request before the scheduler sees it (the stack's API server: HTTP parsing, tokenisation, hand-off
to the engine process; the cluster hands the request over that late, a latency on that request's
path only, paid by requests served over HTTP, not by offline runs). Apart from the profile so that
the list of terms and their units is one short table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.core.step_shape import StepShape
from simulator.calibration.schema import Label

HostFeature = Literal["step", "sequence", "prefill_token", "output_token", "wake", "request"]
HOST_FEATURES: dict[str, str] = {
    "step": "per step (scheduling, input preparation, launch, synchronisation)",
    "sequence": "per scheduled sequence (block tables, sampling, output handling)",
    "prefill_token": "per prefill token (token ids in, position and slot mapping)",
    "output_token": "per output token (sampling, detokenisation, streaming)",
    "wake": "first step after idleness (thread wake-up, cold caches), serial",
    "request": "per request before the scheduler (API server: parsing, tokenisation, hand-off)",
}
# the terms not paid per step: `wake` after idleness, `request` on each request's way in
NOT_PER_STEP = ("wake", "request")


class HostTerm(BaseModel):
    model_config = ConfigDict(extra="forbid")

    feature: HostFeature
    seconds_per_unit: float = Field(ge=0)
    label: Label
    source: str = Field(description="where the number comes from (measurement, fit, derivation)")


# host feature -> its units in a step (0 for the terms not paid per step)
_HOST_UNITS: dict[str, Callable[[StepShape], float]] = {
    "step": lambda shape: 1.0,
    "sequence": lambda shape: float(shape.num_seqs),
    "prefill_token": lambda shape: float(shape.num_prefill_tokens),
    "output_token": lambda shape: float(shape.num_decode_seqs),  # each decoding sequence emits one
    "wake": lambda shape: 0.0,
    "request": lambda shape: 0.0,
}


def units_of(feature: str) -> Callable[[StepShape], float]:
    """How many units of host feature `feature` a step has, as a function of its shape."""
    units = _HOST_UNITS.get(feature)
    if units is None:
        raise ValueError(
            f"host feature {feature!r} is unknown; expected one of {list(HOST_FEATURES)}"
        )
    return units
