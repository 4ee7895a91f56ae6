"""Fitting how long a closed-loop benchmark stays bunched: `fit_bunched_turns` sets a published set's
`bunched_turns` B from its own fit runs (a set whose `fits` name it), with the engine profile as it
is; a set that also fits the profile alternates the two (`surgeplan validate --published --refit`:
B, then the profile with that B, then B again).

Why a figure of the load generator and not of the stack: aiperf's concurrency mode sends its first N
requests at once into an idle engine (`burst_start_turns`), so their prefills share steps and their
successors come back together; in the simulator such groups never break up (a request's life is
counted in steps), in the real loop they dissolve over the next turns by a mechanism the rows do not
show. The replay therefore mixes the bunched replay (the burst) and the desynchronised one (the
staggered steady state), B of the T turns the first (`published_replay.replay_run`); B = 1 is the
lower bound (the burst turn alone). B is chosen on a grid from 1 to T by the least squares of
log(simulated / measured) over the fit rows, the objective `profile_fit` uses; each run is simulated
twice (burst, steady state) whatever the grid (`closed_loop_parts`). Apart from `profile_fit`
because it writes the set, not a profile.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from simulator.validation.published_replay import (
    MIXED_METRICS,
    closed_loop_parts,
    mix_turns,
    source_profile,
)
from simulator.validation.published_sets import PUBLISHED_DIR, fit_metrics, fits, load_published

# B is searched every tenth of a turn: finer than the rows can tell apart
BUNCHED_STEP_TURNS = 0.1


def _log_ratios(
    parts: list[tuple[dict, dict, dict]], share: float, metrics: tuple[str, ...]
) -> list[float]:
    """log(simulated / measured) of every measured mean of the runs (`parts`: (run, burst, steady))
    among `metrics` (the set's `fit_metrics`) with `share` of the requests replayed bunched."""
    out = []
    for run, burst, steady in parts:
        simulated = mix_turns(burst, steady, share)
        out += [
            math.log(simulated[key] / run["measured"][key])
            for key in MIXED_METRICS
            if key in run["measured"] and key in metrics
        ]
    return out


def fit_bunched_turns(name_or_path: str | Path, write: bool = True) -> tuple[float, dict]:
    """(B, the set with B, its label and source) fitted on the set's fit runs (see the module's
    docstring); writes the set back to its file when `write`."""
    data = load_published(name_or_path)
    if "bunched_turns" not in fits(data):
        raise ValueError(
            f"published set {data['name']!r} fits {fits(data)}; expected a set whose fits name "
            "'bunched_turns' (a closed loop measured from a synchronised start)"
        )
    profile = source_profile(data)
    parts = []
    for run in data["runs"]:
        if run["split"] != "fit":
            continue
        pair = closed_loop_parts(data, run, profile)
        if pair is None:
            raise ValueError(
                f"{data['name']}: fit run {run['id']!r} is not a staggered closed-loop run; expected "
                "staggered_warmup: true (only closed-loop runs tell how long the loop stays bunched)"
            )
        parts.append((run, *pair))
    if not parts:
        raise ValueError(
            f"published set {data['name']!r} has no fit runs; expected runs split 'fit' to fit "
            "bunched_turns on"
        )
    turns = int(data["burst_start_turns"])
    grid = np.round(np.arange(1.0, turns + 1e-9, BUNCHED_STEP_TURNS), 1)
    metrics = fit_metrics(data)
    scores = [float(np.mean(np.square(_log_ratios(parts, b / turns, metrics)))) for b in grid]
    best = float(grid[int(np.argmin(scores))])
    path = Path(name_or_path)
    if not (path.suffix == ".json" and path.exists()):
        path = PUBLISHED_DIR / f"{data['name']}.json"
    # the file as written (loading expands a closed loop's lengths into lists), with B set
    fitted = json.loads(path.read_text()) | {
        "bunched_turns": best,
        "bunched_turns_label": "fitted",
        "bunched_turns_source": (
            f"fitted on the set's {len(parts)} fit runs (least squares of log(simulated / "
            f"measured) over their {len(_log_ratios(parts, 1.0, metrics))} measured "
            f"means, B from 1 to {turns} every {BUNCHED_STEP_TURNS} turn) with profile "
            f"{profile.name} as it stood: `surgeplan validate --published {data['name']} --refit`"
        ),
    }
    if write:
        path.write_text(json.dumps(fitted, indent=1) + "\n")
    return best, fitted


__all__ = ["BUNCHED_STEP_TURNS", "fit_bunched_turns"]
