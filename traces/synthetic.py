"""Synthetic traces: an arrival process and two length distributions, seeded and vectorised."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from traces.arrivals import ArrivalSpec, PoissonArrivals, SpikeArrivals
from traces.lengths import LengthSpec, PresetLength
from traces.request import DEFAULT_TENANT
from traces.trace import Trace


class SyntheticTraceSpec(BaseModel):
    """Everything that defines a synthetic trace; the same spec and seed give the same trace."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    arrivals: ArrivalSpec
    prompt: LengthSpec = PresetLength(name="azure-conv-prompt")
    output: LengthSpec = PresetLength(name="azure-conv-output")
    duration_s: PositiveFloat
    seed: int = 0
    name: str = "synthetic"
    tenant: str = DEFAULT_TENANT
    max_requests: PositiveInt | None = Field(
        default=None, description="keep only the first N arrivals"
    )

    @model_validator(mode="after")
    def _prompts_not_empty(self) -> SyntheticTraceSpec:
        if self.prompt.minimum_tokens < 1:
            raise ValueError(
                f"prompt lengths can be {self.prompt.minimum_tokens}; expected every prompt "
                f"to have ≥ 1 token (raise the distribution's lowest value)"
            )
        return self


def synthesize(spec: SyntheticTraceSpec) -> Trace:
    """Draw the trace. Arrivals and the two length columns use independent streams spawned from
    the seed, so changing a length distribution leaves the arrival times unchanged."""
    arrival_rng, prompt_rng, output_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(spec.seed).spawn(3)
    )
    arrival_s = spec.arrivals.sample(arrival_rng, spec.duration_s)
    if spec.max_requests is not None:
        arrival_s = arrival_s[: spec.max_requests]
    n = len(arrival_s)
    return Trace(
        arrival_s,
        spec.prompt.sample(prompt_rng, n),
        spec.output.sample(output_rng, n),
        tenant=np.full(n, spec.tenant),
        name=spec.name,
        provenance=(f"synthetic {spec.model_dump_json()}",),
    )


def spike_trace(
    baseline_rate_per_s: float,
    multiplier: float,
    duration_s: float,
    *,
    start_s: float,
    ramp_up_s: float = 0.0,
    hold_s: float = 60.0,
    ramp_down_s: float = 0.0,
    seed: int = 0,
    prompt: LengthSpec | None = None,
    output: LengthSpec | None = None,
    name: str = "spike",
) -> Trace:
    """The planners' question in one call: Poisson traffic with a `multiplier`x surge."""
    arrivals = SpikeArrivals(
        base=PoissonArrivals(rate_per_s=baseline_rate_per_s),
        multiplier=multiplier,
        start_s=start_s,
        ramp_up_s=ramp_up_s,
        hold_s=hold_s,
        ramp_down_s=ramp_down_s,
    )
    lengths = {k: v for k, v in (("prompt", prompt), ("output", output)) if v is not None}
    return synthesize(
        SyntheticTraceSpec(
            arrivals=arrivals, duration_s=duration_s, seed=seed, name=name, **lengths
        )
    )
