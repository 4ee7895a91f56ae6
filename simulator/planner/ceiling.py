"""Throughput ceilings from the cost model: the fewest replicas that could possibly serve the traffic's
busiest minute, a floor for the planner's bisection (it starts there instead of at the bottom of the
range, and never probes below it).

A replica's ceiling is optimistic on every count, so the floor is never above the true answer: every
request costs its mean prompt at the prefill rate of a full token budget (`max_num_batched_tokens` in
one chunk, the cheapest per token) plus its mean output at the decode rate of the largest batch the KV
pool could hold (`max_num_seqs`, or fewer when the pool holds fewer mean-sized sequences; the static
policy reserves `max_model_len` per request), contexts at their mean. The demand is the highest
arrival rate over any `window_s` of the trace, times `margin` (< 1: the SLO tolerates some queueing and
a share of misses). The search still checks one replica below its answer in full (`_confirm`), so a
floor that were too high would show as a miss that the answer does not explain.
"""

from __future__ import annotations

import math

import numpy as np

from engine.core.step_shape import StepShape
from simulator.scenario import Scenario


def replica_ceiling_rps(scenario: Scenario, trace, step_scale: float = 1.0) -> float:
    """The most requests per second one replica of `scenario` could serve (optimistic: see above), its
    steps `step_scale` times as long."""
    from simulator.calibration.profiled_cost_model import ProfiledCostModel
    from simulator.resolve import (
        graphed_profile,
        resolve_calibration_for,
        resolve_pool,
        resolve_profile,
        scenario_calibration,
    )

    settings = scenario.scheduler
    calibration = resolve_calibration_for(scenario)
    profile = graphed_profile(scenario, resolve_profile(scenario, calibration))
    cost = ProfiledCostModel.of_calibration(
        scenario_calibration(scenario, calibration), profile, step_scale
    )
    model = scenario.model.spec()
    slots = resolve_pool(scenario, model) * settings.block_size
    prompt = max(float(np.mean(trace.prompt_tokens)), 1.0) if len(trace) else 1.0
    output = max(float(np.mean(trace.output_tokens)), 1.0) if len(trace) else 1.0
    context = int(prompt + output / 2)
    max_model_len = settings.max_model_len or model.max_position_embeddings
    per_sequence = max_model_len if settings.policy == "static" else max(context, 1)
    batch = max(1, min(settings.max_num_seqs, slots // per_sequence))
    decode_s = cost.step_time(StepShape((), (context,) * batch)) / batch  # per output token
    chunk = settings.max_num_batched_tokens
    prefill_s = cost.step_time(StepShape(((chunk, 0),), ())) / chunk  # per prompt token
    return 1.0 / (prompt * prefill_s + output * decode_s)


def peak_rate_per_s(arrival_s, window_s: float = 60.0) -> float:
    """The highest number of arrivals in any `window_s` (sliding), per second."""
    arrivals = np.sort(np.asarray(arrival_s, dtype=float))
    if len(arrivals) == 0:
        return 0.0
    ends = np.searchsorted(arrivals, arrivals + window_s, side="left")
    span = min(window_s, max(float(arrivals[-1] - arrivals[0]), 1e-9))
    return float((ends - np.arange(len(arrivals))).max()) / span


def replica_floor(scenario: Scenario, trace, step_scale: float = 1.0, margin: float = 0.8) -> int:
    """The fewest replicas whose ceilings cover `margin` x the busiest minute's arrival rate (≥ 1)."""
    demand = peak_rate_per_s(trace.arrival_s) * margin
    return max(1, math.floor(demand / replica_ceiling_rps(scenario, trace, step_scale)))
