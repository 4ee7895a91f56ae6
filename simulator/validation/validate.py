"""`validate(...)`: the live engine and the simulator on the same trace, at several loads, with the
simulator's error and the live engine's noise floor side by side.

1. Requests from any trace `traces` reads; lengths clipped (or scaled) to fit the small model.
2. Capacity first: the requests all at once through the live engine; its request rate is 100%.
   Then a batch ladder (`workload.LADDER`): groups of 1 to 5, 8 and 16 requests, each all at once,
   so that every batch size has steps (the capacity run is a full batch and its drain; fitted on it
   alone, the model over-predicted small-batch decode steps by 15-30%), each count up to 5 among
   them (without a 3-request step the fit could misplace BLAS's matrix-vector / matrix-matrix
   switch: `cost_fit.FEW_TOKEN_COUNTS`). The steps of both fit the workload calibration
   (`from_steps`), on workloads other than the ones validated.
3. Per load level: arrivals rescaled to that share of capacity; the live engine serves them in real
   time (repeated for the noise floor); the simulator runs the same requests on one replica with the
   live engine's exact settings and KV block count, under each calibration: `given` (--calibration,
   made elsewhere: the honest test) or `grid` (profiled now), and `workload` (fitted on step 2's
   steps); summaries, relative errors against the mean of the repeats, absolute errors under 50 ms.
4. The dominant error source modelled: this shared CPU runs identical runs minutes apart at speeds
   10-20% apart (`error_sources`), and queueing near capacity amplifies that. Each repeat is simulated
   again with every step scaled by the host speed measured in that repeat (its busy time over the
   model's time for its own steps: one number per run) and compared with that repeat: the error "at
   run speed", what remains of the simulator's own error (scheduling, queueing, how step time depends
   on the shape) once the machine's speed of the moment is known.
"""

from __future__ import annotations

import datetime as dt
import platform
import tempfile
from pathlib import Path

import numpy as np

from simulator.calibration.cost_model import CostModel
from simulator.calibration.engine_profile import load_profile
from simulator.calibration.from_steps import calibration_from_steps
from simulator.calibration.live_run import LiveEngine, LiveRequests, StepLog
from simulator.calibration.schema import Calibration, EngineSettings, resolve_calibration
from simulator.validation.compare import (
    absolute_errors_ms,
    latencies,
    mean_by_key,
    noise_floor,
    relative_errors,
    summary_of,
    verdicts,
)
from simulator.validation.error_sources import error_sources
from simulator.validation.live_gap import measure_gap, own_profile
from simulator.validation.simulated_run import at_run_speed, simulate_like
from simulator.validation.workload import LADDER, at_load, ladder_requests, prepare_requests


def validate(
    model: str = "cpu-small",
    trace: str | Path = "",
    num_requests: int = 64,
    max_prompt_tokens: int = 256,
    max_output_tokens: int = 64,
    length_scale: float | None = None,
    load_levels: tuple[float, ...] = (0.5, 0.8, 1.1),
    calibration: str | Path | None = None,
    profile: str = "quick",
    repeats: int = 2,
    seed: int = 0,
    settings: EngineSettings | None = None,
    num_kv_blocks: int = 512,
    save_steps: str | Path | None = None,
    via: str = "engine",
    progress=None,
    own: str = "shipped",
) -> dict:
    """Runs everything and returns the JSON-ready result (see the module docstring). `own`: our engine's
    profile on top of the calibration: `shipped` (profiles/surgeplan.json, measured on a quiet machine),
    `probe` (measured now on a live run at 65% load over the next requests of the trace, disjoint from
    the validated ones, before them) or `none`."""
    if own not in ("shipped", "probe", "none"):
        raise ValueError(f"--own-profile {own!r}; expected shipped, probe or none")
    settings = settings or EngineSettings(
        block_size=16,
        max_num_seqs=32,
        max_num_batched_tokens=512,
        max_model_len=512,
        enable_prefix_caching=False,
    )
    if repeats < 1:
        raise ValueError(f"--repeats {repeats}; expected ≥ 1")
    for load in load_levels:
        at_load(np.zeros(2), 1.0, load)  # a bad level fails now, not after the live runs
    arrival, prompt, output, trace_name = prepare_requests(
        trace,
        num_requests * (2 if own == "probe" else 1),
        max_prompt_tokens,
        max_output_tokens,
        length_scale,
        settings.max_model_len,
    )
    probe = None
    if own == "probe":  # the second half probes the gap; the first half is validated
        half = len(arrival) // 2
        probe = (arrival[half:] - arrival[half], prompt[half:], output[half:])
        arrival, prompt, output = arrival[:half], prompt[:half], output[:half]
    if via not in ("engine", "http"):
        raise ValueError(f"--via {via!r}; expected engine or http")
    grid = grid_calibration(model, calibration, profile, seed, settings)
    say = progress or (lambda message: None)
    if via == "http":
        from simulator.validation.http_run import HttpEngine

        live = HttpEngine(model, settings, num_kv_blocks, seed=seed)
    else:
        live = LiveEngine(model, settings, num_kv_blocks, seed=seed)
    try:
        return _validate_with(
            live,
            arrival,
            prompt,
            output,
            trace,
            trace_name,
            load_levels,
            grid,
            calibration,
            repeats,
            seed,
            save_steps,
            say,
            via,
            own,
            probe,
        )
    finally:
        if via == "http":
            live.close()


def _validate_with(
    live,
    arrival,
    prompt,
    output,
    trace,
    trace_name,
    load_levels,
    grid,
    calibration,
    repeats,
    seed,
    save_steps,
    say,
    via,
    own="none",
    probe=None,
) -> dict:
    settings, model, num_kv_blocks = live.settings, live.model, live.num_kv_blocks
    say("capacity: all requests at once")
    offline = live.run(LiveRequests(np.zeros(len(arrival)), prompt, output), seed=seed)
    capacity_rps = len(arrival) / offline.duration_s
    calibrations = {}
    say(f"calibration steps: groups of {', '.join(map(str, LADDER))} requests at once")
    ladder = [live.run(group, seed=seed) for group in ladder_requests(prompt, output)]
    steps_path = (
        Path(save_steps)
        if save_steps
        else Path(tempfile.mkdtemp(prefix="surgeplan-steps-")) / "steps.json"
    )
    StepLog.joined([offline.steps] + [run.steps for run in ladder]).save(
        steps_path, model, settings, num_kv_blocks, live.device
    )
    calibrations["workload"] = calibration_from_steps(steps_path)
    if grid is not None:
        calibrations["given" if calibration is not None else "grid"] = grid
    used = "given" if "given" in calibrations else "workload"
    profile, gap = None, None
    if own == "shipped":
        shipped = load_profile("surgeplan")
        measured = shipped.kernel_scale != 1.0 or any(
            term.seconds_per_unit for term in shipped.terms
        )
        profile = shipped if measured else None  # nothing measured yet: the calibration alone
    elif own == "probe":
        offsets, rate = at_load(probe[0], capacity_rps, 0.65)
        say(f"gap probe: {len(offsets)} other requests at 65% load ({rate:.2f} requests/s)")
        probe_run = live.run(LiveRequests(offsets, probe[1], probe[2]), seed=seed)
        gap = measure_gap(
            [probe_run.steps], CostModel.from_calibration(calibrations[used]), used == "workload"
        )
        profile = own_profile(gap, f"probe run at 65% load before validation on {live.device}")
    levels = []
    for load in load_levels:
        offsets, rate = at_load(arrival, capacity_rps, load)
        requests = LiveRequests(offsets, prompt, output)
        runs = []
        for repeat in range(repeats):
            say(f"load {load:.0%}: live run {repeat + 1} of {repeats} at {rate:.2f} requests/s")
            runs.append(live.run(requests, seed=seed))
        summaries = [summary_of(run.records, run.duration_s, run.kv_utilization) for run in runs]
        measured = mean_by_key(summaries)
        floor = noise_floor(summaries[0], summaries[1]) if repeats > 1 else None
        level = {
            "load": load,
            "rate_rps": rate,
            "measured": measured,
            "measured_repeats": summaries,
            "noise_floor": floor,
            "by_calibration": {},
        }
        simulated_records = {}
        variants = [(name, chosen, None) for name, chosen in calibrations.items()]
        if profile is not None:
            variants.append((f"{used}+surgeplan", calibrations[used], profile))
        for name, chosen, with_profile in variants:
            records, end, kv = simulate_like(live, chosen, requests, with_profile)
            simulated_records[name] = records
            simulated = summary_of(records, end, kv)
            errors = relative_errors(measured, simulated)
            level["by_calibration"][name] = {
                "simulated": simulated,
                "relative_error": errors,
                "absolute_error_ms": absolute_errors_ms(measured, simulated),
                "verdict": verdicts(errors, floor),
            }
        shown = f"{used}+surgeplan" if profile is not None else used
        pooled = [record for run in runs for record in run.records]
        level["distributions"] = {
            "measured": latencies(pooled),
            "simulated": latencies(simulated_records[shown]),
        }
        level["error_sources"] = error_sources(runs, CostModel.from_calibration(calibrations[used]))
        level["at_run_speed"] = at_run_speed(
            live, calibrations[used], requests, summaries, level["error_sources"], floor
        )
        level.update(
            used_calibration=shown,
            **{
                key: level["by_calibration"][shown][key]
                for key in ("simulated", "relative_error", "absolute_error_ms", "verdict")
            },
        )
        levels.append(level)
    if profile is not None:
        calibrations[f"{used}+surgeplan"] = calibrations[used]
    return {
        "levels": levels,
        "capacity_rps": capacity_rps,
        "own_profile": None
        if profile is None
        else {"mode": own, "gap": gap.as_dict() if gap else None, "profile": profile.model_dump()},
        "calibration": {
            name: {
                "name": c.name,
                "label": c.label,
                "method": c.provenance.method,
                "fit_error": c.cost_model.fit_errors[0].model_dump()
                if c.cost_model.fit_errors
                else None,
            }
            for name, c in calibrations.items()
        },
        "trace": {
            "path": str(trace),
            "name": trace_name,
            "requests": len(arrival),
            "mean_prompt_tokens": float(prompt.mean()),
            "mean_output_tokens": float(output.mean()),
        },
        "engine": {
            **settings.model_dump(),
            "num_kv_blocks": num_kv_blocks,
            "model": model,
            "device": live.device,
            "via": via,
        },
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "date": dt.date.today().isoformat(),
        },
    }


def grid_calibration(
    model: str, calibration: str | Path | None, profile: str, seed: int, settings: EngineSettings
) -> Calibration | None:
    """--calibration as given; or a grid profiled now: `quick` (the CI grid, batches to 16, contexts to
    128) or `full` (sized to the validated engine: batches, token budget and contexts to its limits)."""
    if calibration is not None:
        chosen = resolve_calibration(calibration)
        if chosen.model.name != model:
            raise ValueError(
                f"--calibration {calibration}: made for model {chosen.model.name!r}, not {model!r}; "
                "expected a calibration of the validated model"
            )
        return chosen
    if profile in ("quick", "full"):
        from simulator.calibration.profile import profile as run_profile
        from simulator.calibration.profile_grid import ProfileGrid

        grid = (
            ProfileGrid.quick()
            if profile == "quick"
            else ProfileGrid.full(
                settings.max_num_seqs, settings.max_num_batched_tokens, settings.max_model_len
            )
        )
        return run_profile(model, seed=seed, progress=False, grid=grid)
    if profile != "none":
        raise ValueError(f"--profile {profile!r}; expected quick, full or none")
    return None
