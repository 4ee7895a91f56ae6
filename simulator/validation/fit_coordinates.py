"""The coordinates of a profile fit (`profile_fit.fit_profile`): which figures are searched, on
which grids, and which published sets' fit rows score each. Apart from the search itself so that the
rules (a set's rows score only the terms it names; fp8 linear layers per GPU; kernel scales coarse
to fine) are on one screen and testable without replaying anything."""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from simulator.validation.published_report import Row

SCALE_KEYS = ("kernel_scale", "memory_scale", "compute_scale")
SCALE_RANGE = (0.60, 1.40)
# the terms a set fits when it names none (`fit_terms`)
DEFAULT_TERMS = ("step", "sequence", "prefill_token", "kernel_scale")
# a set naming it in `fit_terms` fits, per GPU of its fp8 fit runs, the stack's fp8 linear-layer
# time up to the knee over its own backend's fp8 GEMM tables (`EngineProfile.fp8_linear_scales`,
# `fp8_small_batch`); searched like a
# kernel scale, on a range reaching well below it (the tables' small-batch fp8 GEMMs run at half
# the bandwidth the served steps imply)
FP8_TERM, FP8_RANGE = "fp8_linear", (0.30, 1.20)
# a set naming it fits, per GPU of its fp8 fit runs, the fp8 linear-layer time per token beyond the
# knee over the tables (`EngineProfile.fp8_large_batch_scales`): only a set with first-token rows
# pins it (decode steps below the knee never reach it); at its floor an 8,192-token prefill's
# served fp8 GEMMs stay under ~90% of the dense fp8 peak (vLLM's tables: 47-63% of it), and the
# fitted scales are checked under 80% (`tests/test_fp8_large_batch.py`)
FP8_LARGE_TERM, FP8_LARGE_RANGE = "fp8_large_batch", (0.70, 1.40)
FP8_RANGES = {
    FP8_TERM: FP8_RANGE,
    FP8_LARGE_TERM: FP8_LARGE_RANGE,
}  # per fp8 term: its search range
# every figure a set may name in `fit_terms`: host terms, kernel scales, the fp8 linear layers
FIT_TERMS = (
    "step",
    "sequence",
    "prefill_token",
    "eager_layer",
    "wake",
    "request",
    *SCALE_KEYS,
    FP8_TERM,
    FP8_LARGE_TERM,
)
# a term scored on rows of one metric whatever the set's `fit_metrics`: the API server's time per
# request moves only first tokens (and E2E by as much), so its fit reads the first-token rows
TERM_METRICS = {"request": ("ttft_mean_s",)}
# kernel scales are searched coarse to fine: every 0.1 over the range, then every 0.02 within
# 0.08 of the best (18 trials where the fine grid alone takes 41: each trial replays every fit run)
SCALE_COARSE_STEP, SCALE_FINE_STEP = 0.1, 0.02


def objective(rows: list[Row]) -> float:
    """Mean squared log(simulated / measured) over `rows`."""
    return float(np.mean([math.log(row.ratio) ** 2 for row in rows]))


def fp8_coordinates(fit_sets: list[dict], terms: tuple[str, ...] = (FP8_TERM,)) -> dict[str, str]:
    """`<term>:<GPU>` -> GPU for each of `terms` (keys of `FP8_RANGES`) and every GPU of the
    fp8-weight fit runs of the sets naming `FP8_TERM` and that term in their `fit_terms`."""
    return {
        f"{term}:{gpu}": gpu
        for term in terms
        for gpu in fp8_references([e for e in fit_sets if term in e.get("fit_terms", ())])
    }


def fp8_references(fit_sets: list[dict]) -> dict[str, tuple[str, int]]:
    """GPU -> (model, TP degree) its fp8 scale is fitted at (`EngineProfile.fp8_linear_reference`):
    the most frequent among the fp8-weight fit runs on it of the sets naming `FP8_TERM`, the lower
    degree on a tie; the scale reaches the other shapes by `fp8_small_batch.carried_fp8_shape`."""
    counts: dict[str, Counter] = {}
    for each in fit_sets:
        if FP8_TERM not in each.get("fit_terms", ()):
            continue
        for run in each["runs"]:
            if run.get("weight_dtype") == "fp8":
                shape = (run["model"], int(run.get("tensor_parallel", 1)))
                counts.setdefault(run["gpu"], Counter())[shape] += 1
    return {
        gpu: min(shapes, key=lambda shape: (-shapes[shape], shape[1], shape[0]))
        for gpu, shapes in sorted(counts.items())
    }


def scoring_sets(
    feature: str,
    fit_sets: list[dict],
    older: dict[str, tuple[str, str]],
    fp8: dict[str, str],
) -> list[dict]:
    """The fit sets whose rows score `feature`: each set's rows score only the terms it names
    (`fit_terms`, `DEFAULT_TERMS` where it names none); an older-era choice (`older`: key -> (set,
    GPU)) its own set's rows, an fp8 linear-layer scale (`fp8`) the rows of the sets naming
    `FP8_TERM`. So a set fitting one figure cannot pull the terms the other sets fit."""
    if feature in older:
        return [each for each in fit_sets if each["name"] == older[feature][0]]
    named = feature.split(":")[0] if feature in fp8 else feature
    return [each for each in fit_sets if named in each.get("fit_terms", DEFAULT_TERMS)]


def on_its_gpu(feature: str, scoring: list[dict], fp8: dict[str, str]) -> list[dict]:
    """The runs a trial of `feature` replays: for an fp8 scale (`fp8`: key -> GPU) only the scoring
    sets' runs on its GPU, since the scale moves no row on another GPU (each fitted GPU holds its
    own entry), so the best value is the one over every scoring row at a fraction of the replays;
    any other feature, every run of `scoring`."""
    if feature not in fp8:
        return scoring
    mine = [
        {**each, "runs": [run for run in each["runs"] if run["gpu"] == fp8[feature]]}
        for each in scoring
    ]
    return [each for each in mine if each["runs"]]  # a set with no run there adds no row


def scale_trials(
    current: float, bounds: tuple[float, float] = SCALE_RANGE
) -> tuple[list[float], list[float]]:
    """A scale's trials: the coarse pass over `bounds`, then the fine pass around `current`."""
    low, high = bounds
    coarse = list(np.round(np.arange(low, high + 1e-9, SCALE_COARSE_STEP), 2))
    fine = [
        value
        for value in np.round(current + np.arange(-4, 5) * SCALE_FINE_STEP, 2)
        if low - 1e-9 <= value <= high + 1e-9
    ]
    return coarse, fine


__all__ = [
    "DEFAULT_TERMS",
    "FP8_LARGE_RANGE",
    "FP8_LARGE_TERM",
    "FP8_RANGE",
    "FP8_RANGES",
    "FIT_TERMS",
    "FP8_TERM",
    "SCALE_FINE_STEP",
    "SCALE_KEYS",
    "SCALE_RANGE",
    "fp8_coordinates",
    "objective",
    "on_its_gpu",
    "scale_trials",
    "scoring_sets",
]
