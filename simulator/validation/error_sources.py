"""Where the simulator's error comes from, measured on each live run instead of guessed.

- host overhead: the engine loop's time between one `step()` and the next while busy (adding arrivals,
  building outputs, KV statistics), as a share of the busy time. The workload calibration fits busy
  time, so this is in the model; a large share would say the grid calibration (which times `step()`)
  misses it.
- garbage collection: wall time in Python's collector during the run, as a share of the busy time.
- the CPU's own variance: the live busy time over the cost model's prediction for the very steps the
  live engine took (same shapes, so the scheduler's choices are out of it). 1.00 means the model's
  step times are exact for this run; repeats of one load disagreeing (1.10 then 0.95) is the machine
  running at another speed, which no model of the engine can predict, and which the noise floor shows.
  It dominates near capacity, where queueing amplifies it; `simulated_run.at_run_speed` models it (each
  repeat simulated at its measured speed) and reports the error with and without it. Within a run the
  speed drifts too: the same ratio over successive windows of `WINDOW_S` seconds gives its range, which
  a single speed per run cannot capture.
"""

from __future__ import annotations

from simulator.calibration.cost_model import CostModel
from simulator.calibration.live_run import LiveRun

WINDOW_S = 10.0  # wall-time windows for the speed's range within a run
MIN_WINDOW_STEPS = 20  # windows with fewer steps say little


def error_sources(runs: list[LiveRun], cost_model: CostModel) -> dict | None:
    """Per repeat: host overhead share, GC share, live / modelled step time; None without a step log
    (the HTTP server keeps one only with `--record-steps`)."""
    if not runs or not all(run.steps.shapes for run in runs):
        return None
    host, collector, speed, ranges = [], [], [], []
    for run in runs:
        steps = run.steps
        busy = [b if b is not None else s for b, s in zip(steps.busy_s, steps.step_s)]
        busy_s = sum(busy)
        predicted = cost_model.step_times([shape.to_shape() for shape in steps.shapes])
        predicted_s = float(predicted.sum())
        host.append((busy_s - sum(steps.step_s)) / busy_s if busy_s else 0.0)
        collector.append(run.gc_s / busy_s if busy_s else 0.0)
        speed.append(busy_s / predicted_s if predicted_s else None)
        ranges.append(window_speed_range(steps.start_s, busy, predicted))
    known = [value for value in speed if value]
    return {
        "host_overhead_share": host,
        "gc_share": collector,
        "live_over_model_step_time": speed,
        "cpu_variance": max(known) / min(known) - 1 if len(known) > 1 else None,
        "window_speed_range": ranges,
    }


def window_speed_range(
    start_s: list[float], busy_s: list[float], predicted_s
) -> list[float] | None:
    """[slowest-window low, high] of live over modelled time in `WINDOW_S` windows of a run (windows with
    at least `MIN_WINDOW_STEPS` steps); None when the run has fewer than two such windows."""
    if len(start_s) != len(busy_s):
        return None
    sums: dict[int, list[float]] = {}
    for start, busy, predicted in zip(start_s, busy_s, predicted_s):
        entry = sums.setdefault(int(start // WINDOW_S), [0.0, 0.0, 0])
        entry[0], entry[1], entry[2] = entry[0] + busy, entry[1] + float(predicted), entry[2] + 1
    ratios = [
        live / model
        for live, model, count in sums.values()
        if count >= MIN_WINDOW_STEPS and model > 0
    ]
    return [min(ratios), max(ratios)] if len(ratios) > 1 else None


def describe(sources: dict | None) -> str:
    """One line for the terminal table."""
    if not sources:
        return "error sources: not measured (no step log for this run)"
    ratios = " / ".join(f"{value:.2f}x" for value in sources["live_over_model_step_time"] if value)
    variance = sources["cpu_variance"]
    ranges = [r for r in sources.get("window_speed_range") or [] if r]
    within = (
        f"; {WINDOW_S:.0f}-s windows within a run ranged {min(r[0] for r in ranges):.2f}x to "
        f"{max(r[1] for r in ranges):.2f}x"
        if ranges
        else ""
    )
    return (
        f"error sources: host overhead {max(sources['host_overhead_share']):.1%} of busy time, garbage "
        f"collection {max(sources['gc_share']):.1%}; live steps took {ratios} the model's time for the same "
        "shapes"
        + (
            f" (repeats differ by {variance:.1%}: the CPU's own variance)"
            if variance is not None
            else ""
        )
        + within
    )
