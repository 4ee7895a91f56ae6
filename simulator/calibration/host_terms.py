"""A serving stack's host terms: what each one's seconds multiply, and which are paid per step.

An engine profile (`engine_profile.EngineProfile.terms`) adds the stack's own work around the GPU's
kernels as terms, each a number of seconds per unit, with its label and source. Per step: the step
itself, each scheduled sequence, each prefill token and each output token; `host_s` sums them and
the profile's overlap hides part of it under the GPU (all of it overlapped: a floor under the GPU's
time). Each model layer of a step the stack runs without a CUDA graph (`eager_layer`: the host
launching that layer's kernels one by one; which steps those are is the profile's, `eager_units`)
is a floor under the step whatever the overlap: the GPU runs each kernel as it is launched. Not per
step: `wake`, once on the first step after the engine was idle (thread wake-up, cold caches; the
replica adds it), and `request`, once per request before the scheduler sees it (the stack's API
server: HTTP parsing, tokenisation, hand-off to the engine process; the cluster hands the request
over that late, a latency on that request's path only, paid by requests served over HTTP, not by
offline runs). Apart from the profile so that the list of terms and their units is one short
table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.core.step_shape import StepShape
from simulator.calibration.schema import Label

HostFeature = Literal[
    "step", "sequence", "prefill_token", "output_token", "eager_layer", "wake", "request"
]
HOST_FEATURES: dict[str, str] = {
    "step": "per step (scheduling, input preparation, launch, synchronisation)",
    "sequence": "per scheduled sequence (block tables, sampling, output handling)",
    "prefill_token": "per prefill token (token ids in, position and slot mapping)",
    "output_token": "per output token (sampling, detokenisation, streaming)",
    "eager_layer": "per model layer of a step run without a CUDA graph (kernels launched singly)",
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
    """How many units of host feature `feature` a step has, as a function of its shape (`eager_layer`
    needs the profile's graphs and the model's layers: `eager_units`)."""
    if feature == "eager_layer":
        raise ValueError(
            "host feature 'eager_layer' counts the model's layers in the steps the stack runs "
            "without a CUDA graph; expected it read through EngineProfile.host_terms(num_layers)"
        )
    units = _HOST_UNITS.get(feature)
    if units is None:
        raise ValueError(
            f"host feature {feature!r} is unknown; expected one of {list(HOST_FEATURES)}"
        )
    return units


def eager_units(
    graph_steps: str, graph_max_tokens: int | None, num_layers: int
) -> Callable[[StepShape], float]:
    """Units of `eager_layer` in a step: the model's `num_layers` where the stack runs the step
    without a CUDA graph, else 0. Eager are a step with a prompt in it where the stack graphs
    decode-only steps (`graph_steps` "decode_only": SGLang's and TensorRT-LLM's graph runners, vLLM's
    `cudagraph_mode FULL_DECODE_ONLY`) and a step of more scheduled tokens than its largest captured
    graph (`graph_max_tokens`, a decode batch's tokens being its sequences: SGLang 0.4's 160, vLLM's
    capture list; None: no such limit)."""
    if num_layers <= 0:
        raise ValueError(f"num_layers={num_layers}; expected the model's layer count (≥ 1)")
    prompts_eager = graph_steps == "decode_only"
    largest = graph_max_tokens if graph_max_tokens is not None else -1
    layers = float(num_layers)

    def units(shape: StepShape) -> float:
        if (prompts_eager and shape.num_prefill_seqs > 0) or (
            0 <= largest < shape.num_batched_tokens
        ):
            return layers
        return 0.0

    return units
