"""What makes the live engine's steps slower than the calibration says, measured on a live run, and the
`surgeplan` engine profile that models its systematic part.

From a run's step log (every step's shape, its `step()` wall time, and the time to the next step while
busy) and the calibration's prediction for the same shapes:
- between steps: the engine loop's time from one `step()` to the next while busy (adding arrivals from
  the arrival thread, building outputs, KV statistics, Python between steps), per step;
- wake-up: the first step after the engine was idle against the same shape's steady-state time (torch's
  worker threads asleep, caches cold, allocator refilling), per wake-up;
- in-step slowdown: live `step()` time over the calibrated time for the other steps (the arrival
  thread and the event loop competing for the cores, allocation, the machine's own speed).

The first two are host terms (`step`, `wake`), the third the profile's `kernel_scale`. On a shared
machine the third mixes the engine's systematic cost with other jobs' load: measure it on a quiet
machine (`benchmarks/live_gap.py`), or on a probe run just before the runs it predicts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from simulator.calibration.engine_profile import OWN_ENGINE_PROFILE, EngineProfile, load_profile


@dataclass(frozen=True)
class LiveGap:
    steps: int
    wake_ups: int
    between_steps_s: float  # mean engine-loop time between steps while busy, per step
    wake_s: float  # mean extra time of a first step after idleness
    kernel_scale: float  # live step() time / calibrated, steady-state steps
    busy_share_between: float  # between-step time as a share of busy time

    def as_dict(self) -> dict:
        return asdict(self)


def measure_gap(step_logs, cost_model, calibration_times_busy: bool) -> LiveGap:
    """The gap over the runs' step logs. `calibration_times_busy`: the calibration was fitted on busy
    time (the workload calibration: between-step time is already in it) rather than on `step()` time
    (a profiled grid)."""
    wake, steady, between, wake_extra = [], [], [], []
    live_steady, model_steady, busy_total = 0.0, 0.0, 0.0
    for log in step_logs:
        predicted = cost_model.step_times([shape.to_shape() for shape in log.shapes])
        for i, (step_s, busy_s) in enumerate(zip(log.step_s, log.busy_s)):
            after_idle = i == 0 or log.busy_s[i - 1] is None
            own_s = busy_s if (calibration_times_busy and busy_s is not None) else step_s
            if busy_s is not None:
                between.append(busy_s - step_s)
                busy_total += busy_s
            if after_idle:
                wake.append((own_s, float(predicted[i])))
            else:
                steady.append(i)
                live_steady += own_s
                model_steady += float(predicted[i])
    kernel_scale = live_steady / model_steady if model_steady > 0 else 1.0
    for own_s, predicted_s in wake:
        wake_extra.append(own_s - kernel_scale * predicted_s)
    between_s = float(np.mean(between)) if between and not calibration_times_busy else 0.0
    return LiveGap(
        steps=len(steady) + len(wake),
        wake_ups=len(wake),
        between_steps_s=between_s,
        wake_s=max(float(np.median(wake_extra)), 0.0) if wake_extra else 0.0,
        kernel_scale=kernel_scale,
        busy_share_between=float(np.sum(between)) / busy_total if busy_total else 0.0,
    )


def own_profile(gap: LiveGap, where: str) -> EngineProfile:
    """The `surgeplan` profile with the measured gap: `where` says on what run and machine."""
    base = load_profile(OWN_ENGINE_PROFILE)
    source = f"measured: {where}"
    profile = base.with_terms({"step": gap.between_steps_s, "wake": gap.wake_s}, "measured", source)
    return profile.model_copy(
        update={
            "kernel_scale": gap.kernel_scale,
            "kernel_scale_source": f"{source} (live step() time / calibrated, "
            f"{gap.steps - gap.wake_ups} steady steps)",
        }
    )
