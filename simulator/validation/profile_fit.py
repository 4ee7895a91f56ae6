"""Fitting an engine profile on published sets: `fit_profile` tunes a set's profile (host terms,
kernel scale, the source's kernel era) on the `fit` runs of every set fitted for that profile
(one fit per profile, on all its public fit data); `record_errors` stores a held-out-only set's
errors in its profile. Apart from `published_sets`, `published_replay` and `published_report`
(loading and replaying the sets, their statistics) because fitting writes profiles while replaying
only reads them."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from simulator.calibration.engine_profile import (
    PROFILES_DIR,
    EngineProfile,
    ProfileError,
    SourceEra,
    load_profile,
)
from simulator.calibration.kernel_era import era_factor, era_source
from simulator.calibration.shipped import load_all_shipped
from simulator.validation.published_report import Row, grouped_stats, replay
from simulator.validation.published_sets import fits as fit_targets
from simulator.validation.published_sets import load_published, published_names

SCALE_KEYS = ("kernel_scale", "memory_scale", "compute_scale")
SCALE_RANGE = (0.60, 1.40)
# kernel scales are searched coarse to fine: every 0.1 over the range, then every 0.02 within
# 0.08 of the best (18 trials where the fine grid alone takes 41: each trial replays every fit run)
SCALE_COARSE_STEP, SCALE_FINE_STEP = 0.1, 0.02


def _objective(rows: list[Row]) -> float:
    return float(np.mean([math.log(row.ratio) ** 2 for row in rows]))


def fitted_together(data: dict) -> list[dict]:
    """The sets a profile is fitted on with `data`: `data` first, then every other stored set naming
    the same profile that has fit runs and fits it (held-out-only sets never)."""
    others = [load_published(name) for name in published_names()]
    return [data] + [
        other
        for other in others
        if other["name"] != data["name"]
        and other["engine_profile"] == data["engine_profile"]
        and not other.get("held_out_only")
        and "profile" in fit_targets(other)
        and any(run["split"] == "fit" for run in other["runs"])
    ]


def _scale_trials(current: float) -> tuple[list[float], list[float]]:
    low, high = SCALE_RANGE
    coarse = list(np.round(np.arange(low, high + 1e-9, SCALE_COARSE_STEP), 2))
    fine = [
        value
        for value in np.round(current + np.arange(-4, 5) * SCALE_FINE_STEP, 2)
        if low - 1e-9 <= value <= high + 1e-9
    ]
    return coarse, fine


def fit_profile(
    name_or_path: str | Path, steps: int = 2, write: bool = True
) -> tuple[EngineProfile, list[Row]]:
    """Fit the set's profile on the `fit` runs of this set and of every other set fitted for the same
    profile (`fitted_together`): per-step, per-sequence and per-prefill-token host terms and the
    stack's kernel scale (its kernels' time over the calibration's: TensorRT-LLM's kernels are not
    vLLM's), overall or per memory- / compute-bound term, by coordinate search on grids, least
    squares on log(simulated / measured) over all those rows. The terms searched are those the sets
    name (`fit_terms`, default step, sequence, prefill token and kernel scale). Per output token stays
    as it is (in decode steps it is not separable from per sequence). The source's kernel era is
    chosen for this set. Writes the profile with its errors on every such set's fit and held-out
    rows when `write`."""
    data = load_published(name_or_path)
    if "profile" not in fit_targets(data):
        raise ValueError(
            f"published set {data['name']!r} fits {fit_targets(data)}: its fit runs never fit the "
            "profile; expected a set whose fits name 'profile'"
        )
    if not any(run["split"] == "fit" for run in data["runs"]):
        raise ValueError(
            f"published set {data['name']!r} has no fit runs (held out only: an independent check); "
            "expected a set with runs split 'fit' to fit a profile on"
        )
    base = with_era_scales(load_profile(data["engine_profile"]))
    sets = fitted_together(data)
    fit_sets = [
        {**each, "runs": [run for run in each["runs"] if run["split"] == "fit"]} for each in sets
    ]
    fit_runs = fit_sets[0]
    by_bound = base.kernel_scale_by_bound
    values = {term.feature: term.seconds_per_unit for term in base.terms} | {
        "kernel_scale": base.kernel_scale,
        "memory_scale": by_bound.get("memory", 1.0),
        "compute_scale": by_bound.get("compute", 1.0),
    }
    scales = list(np.round(np.arange(SCALE_RANGE[0], SCALE_RANGE[1] + 1e-9, SCALE_FINE_STEP), 2))
    grids = {
        "step": [0.0] + list(np.geomspace(1e-4, 2e-2, 16)),
        "sequence": [0.0] + list(np.geomspace(1e-6, 1e-3, 16)),
        "prefill_token": [0.0] + list(np.geomspace(1e-7, 1e-4, 13)),
        # once per request started from idleness: only where a set names it (single-request latency)
        "wake": [0.0] + list(np.geomspace(1e-4, 2e-2, 16)),
        "kernel_scale": scales,
        # per kind of kernel term (`kernel_scale_by_bound`): only where a set names them
        "memory_scale": scales,
        "compute_scale": scales,
    }
    default_terms = ["step", "sequence", "prefill_token", "kernel_scale"]
    # few fit rows: a set names fewer terms; fitted together, the terms any of the sets names
    chosen = {key for each in sets for key in each.get("fit_terms", default_terms)}
    grids = {key: grid for key, grid in grids.items() if key in chosen}
    # per set and GPU where the profile has an older kernel era than its tables (`older_era_scales`):
    # whether that set's stack ran it, a yes/no coordinate of the search, chosen on the fit runs
    older = {
        f"older_era:{each['name']}:{gpu}": (each["name"], gpu)
        for each in fit_sets
        for gpu in sorted({run["gpu"] for run in each["runs"]} & set(base.older_era_scales))
    }
    for key, (name, gpu) in older.items():
        grids[key] = [0.0, 1.0]
        kept = base.source_eras.get(name)
        values[key] = float(kept is not None and gpu in kept.older_gpus)
    named = ", ".join(f"{each['name']} ({each.get('url', '')})" for each in sets)
    source = f"fitted on the fit runs of published set{'s' if len(sets) > 1 else ''} {named}"

    base_terms = {term.feature: term for term in base.terms}

    scale_keys = SCALE_KEYS
    fits_scales = any(key in grids for key in scale_keys)

    def build(
        candidate: dict, base: EngineProfile = base, why: dict[str, str] | None = None
    ) -> EngineProfile:
        terms = {
            key: value
            for key, value in candidate.items()
            if key not in scale_keys and key not in older
        }
        bound = dict(base.kernel_scale_by_bound)
        for kind in ("memory", "compute"):
            if f"{kind}_scale" in grids:
                bound[kind] = candidate[f"{kind}_scale"]
                if bound[kind] == 1.0:
                    del bound[kind]
        built = base.with_terms(terms, "fitted", source).model_copy(
            update={
                "kernel_scale": candidate["kernel_scale"],
                "kernel_scale_by_bound": bound,
                "kernel_scale_source": (
                    f"{source}: this stack's kernel time over the calibration's"
                    if fits_scales
                    else base.kernel_scale_source
                ),
            }
        )
        older_gpus = {name: [] for name, _ in older.values()}
        for key, (name, gpu) in older.items():
            if candidate[key]:
                older_gpus[name].append(gpu)
        return _with_older_eras(built, older_gpus, why or {})

    def search(base: EngineProfile) -> tuple[float, dict]:
        start = values

        def trial(candidate: dict) -> float:
            profile = build(candidate, base)
            return _objective([row for each in fit_sets for row in replay(each, profile)])

        best = trial(start)
        for _ in range(steps):
            for feature, grid in grids.items():
                # a kernel scale: coarse, then fine around the best of the coarse pass
                sweeps = [0, 1] if feature in scale_keys else [None]
                for sweep in sweeps:
                    trials = grid if sweep is None else _scale_trials(start[feature])[sweep]
                    for value in trials:
                        candidate = start | {feature: float(value)}
                        if candidate == start:
                            continue
                        score = trial(candidate)
                        if score < best:
                            best, start = score, candidate
        return best, start

    # the kernel era this source's stack ran on each GPU (`EngineProfile.source_eras`): every choice
    # of the GPUs that ran the tables' own GEMMs is fitted on the fit runs, the best one kept
    era_gpus = sorted({run["gpu"] for run in fit_runs["runs"]} & set(base.kernel_era_scales))
    choices = [
        tuple(gpu for bit, gpu in enumerate(era_gpus) if mask >> bit & 1)
        for mask in range(2 ** len(era_gpus))
    ]
    fits = {gpus: search(_with_source_era(base, data["name"], gpus, "")) for gpus in choices}
    tables_gpus = min(fits, key=lambda gpus: fits[gpus][0])
    best, values = fits[tables_gpus]
    if len(choices) > 1:
        scores = "; ".join(
            f"tables on {', '.join(gpus) or 'none'}: {fits[gpus][0]:.4f}" for gpus in choices
        )
        base = _with_source_era(
            base,
            data["name"],
            tables_gpus,
            f"chosen on the fit runs of {data['name']} (mean squared log error of each choice's "
            f"best fit: {scores}; elsewhere the profile's kernel_era_scales); never chosen on "
            "held-out runs",
        )
    if older:
        # what each older-era choice scored against the other, kept with the choice
        def score(candidate: dict) -> float:
            profile = build(candidate, base)
            return _objective([row for each in fit_sets for row in replay(each, profile)])

        why = {}
        for key, (name, gpu) in older.items():
            flipped = score(values | {key: 1.0 - values[key]})
            ran = "ran" if values[key] else "did not run"
            why[name] = (
                why.get(name, f"chosen on the fit runs of {name}, never on held-out runs: ")
                + f"on {gpu} it {ran} the older era (a yes/no term of the coordinate search with "
                f"the host terms and kernel scales; mean squared log error over every fit run "
                f"{best:.4f}, {flipped:.4f} with the other choice); "
            )
        fitted = build(values, base, why)
    else:
        fitted = build(values, base)
    fitted = fitted.model_copy(
        update={
            "terms": [
                term if term.feature in grids else base_terms[term.feature] for term in fitted.terms
            ]
        }
    )
    for each in sets[1:]:
        fitted = _with_errors(fitted, each["name"], replay(each, fitted))
    rows = replay(data, fitted)
    fitted = _with_errors(fitted, data["name"], rows)
    if write:
        fitted.save(PROFILES_DIR / f"{fitted.name}.json")
    return fitted, rows


def _with_source_era(
    profile: EngineProfile, name: str, tables_gpus: tuple[str, ...], why: str
) -> EngineProfile:
    eras = {key: value for key, value in profile.source_eras.items() if key != name}
    kept = profile.source_eras.get(name)
    older = kept.older_gpus if kept else []
    if tables_gpus or older:
        eras[name] = SourceEra(
            tables_gpus=list(tables_gpus),
            older_gpus=older,
            source=why or (kept.source if kept else ""),
        )
    return profile.model_copy(update={"source_eras": eras})


def _with_older_eras(
    profile: EngineProfile, older_gpus: dict[str, list[str]], why: dict[str, str]
) -> EngineProfile:
    """The profile with, per set, the GPUs on which its stack ran the older era (`older_gpus`)."""
    eras = dict(profile.source_eras)
    for name, gpus in older_gpus.items():
        kept = eras.get(name)
        tables = kept.tables_gpus if kept else []
        if gpus or tables:
            source = why.get(name, "").rstrip("; ") or (kept.source if kept else "")
            eras[name] = SourceEra(tables_gpus=tables, older_gpus=gpus, source=source)
        else:
            eras.pop(name, None)
    return profile.model_copy(update={"source_eras": eras})


def with_era_scales(profile: EngineProfile) -> EngineProfile:
    """The profile with its per-GPU era scales (`kernel_era`: the era it stands for and an older
    one) derived afresh from the shipped calibrations, for the GPUs it already names (a profile
    naming none is left as it is)."""
    if not (profile.kernel_era_scales or profile.older_era_scales):
        return profile
    calibrations = load_all_shipped()
    backend = profile.kernel_backend or "vllm"
    update = {}
    for field in ("kernel_era", "older_era"):
        gpus = getattr(profile, f"{field}_scales")
        if gpus:
            scales = {gpu: era_factor(calibrations, gpu, backend) for gpu in gpus}
            update[f"{field}_scales"] = {gpu: round(s, 4) for gpu, s in scales.items() if s}
            update[f"{field}_source"] = "; ".join(
                f"{gpu}: {era_source(calibrations, gpu, backend)}" for gpu in scales
            )
    return profile.model_copy(update=update)


def _with_errors(profile: EngineProfile, source: str, rows: list[Row]) -> EngineProfile:
    """The profile with its errors on one published set replaced by those of `rows`."""
    errors = [
        ProfileError(
            source=source,
            gpu=entry["gpu"],
            split=entry["split"],
            num_rows=entry["rows"],
            median_abs_error=entry["median_abs_error"],
            bias=entry["bias"],
            within_10pct=entry["within_10pct"],
        )
        for entry in grouped_stats(rows)
        if entry["gpu"] != "all"
    ]
    kept = [error for error in profile.errors if error.source != source]
    return profile.model_copy(update={"errors": kept + errors})


def record_errors(name_or_path: str | Path, write: bool = True) -> tuple[EngineProfile, list[Row]]:
    """Replay a set with its profile as it is (nothing fitted) and store the errors in the profile:
    how a held-out-only set (an independent check) or a set whose fit runs fit only its own
    `bunched_turns` reaches the planner's band and the README."""
    data = load_published(name_or_path)
    profile = load_profile(data["engine_profile"])
    rows = replay(data, profile)
    profile = _with_errors(profile, data["name"], rows)
    if write:
        profile.save(PROFILES_DIR / f"{profile.name}.json")
    return profile, rows
