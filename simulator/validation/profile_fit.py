"""Fitting an engine profile on published sets: `fit_profile` tunes a set's profile (host terms,
kernel scale, the source's kernel era) on the `fit` runs of every set fitted for that profile
(one fit per profile, on all its public fit data); `record_errors` stores a held-out-only set's
errors in its profile. Apart from `published_sets`, `published_replay` and `published_report`
(loading and replaying the sets, their statistics) because fitting writes profiles while replaying
only reads them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simulator.calibration.engine_profile import PROFILES_DIR, EngineProfile, load_profile
from simulator.calibration.fp8_small_batch import Fp8Reference
from simulator.calibration.profile_errors import ProfileError
from simulator.validation.fit_coordinates import (
    DEFAULT_TERMS,
    FIT_TERMS,
    FP8_LARGE_TERM,
    FP8_RANGES,
    FP8_TERM,
    SCALE_FINE_STEP,
    SCALE_KEYS,
    SCALE_RANGE,
    TERM_METRICS,
    fp8_coordinates,
    fp8_references,
    objective,
    on_its_gpu,
    scale_trials,
    scoring_sets,
)
from simulator.validation.profile_eras import with_era_scales, with_older_eras, with_source_era
from simulator.validation.published_report import Row, grouped_stats, replay
from simulator.validation.published_sets import fit_metrics, load_published, published_names
from simulator.validation.published_sets import fits as fit_targets


def scored_rows(
    sets: list[dict], profile: EngineProfile, metrics: tuple[str, ...] | None = None
) -> list[Row]:
    """The rows that score a fit trial: each set's runs replayed with `profile`, the rows of its
    `fit_metrics` kept (of `metrics` instead where given: a term's own, `TERM_METRICS`)."""
    return [
        row
        for each in sets
        for row in replay(each, profile)
        if row.metric in (metrics if metrics is not None else fit_metrics(each))
    ]


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


def fit_profile(
    name_or_path: str | Path, steps: int = 2, write: bool = True
) -> tuple[EngineProfile, list[Row]]:
    """Fit the set's profile on the `fit` runs of this set and of every other set fitted for the same
    profile (`fitted_together`): per-step, per-sequence and per-prefill-token host terms and the
    stack's kernel scale (its kernels' time over the calibration's: TensorRT-LLM's kernels are not
    vLLM's), overall or per memory- / compute-bound term, and per GPU the fp8 linear layers (up to the
    knee, and beyond it where a set names `fp8_large_batch`), by
    coordinate search on grids, least squares on log(simulated / measured), each term over the fit
    rows of the sets that name it (`fit_coordinates.scoring_sets`). The terms searched are those the
    sets name (`fit_terms`, default step, sequence, prefill token and kernel scale). Per output token
    stays as it is (in decode steps it is not separable from per sequence). The source's kernel era
    is chosen for this set. Writes the profile with its errors on every such set's fit and held-out
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
        # each layer of a step run without a CUDA graph (the host launching its kernels): only where
        # a set names it; 0.1-2 ms a layer, ~12% apart
        "eager_layer": [0.0] + list(np.geomspace(1e-4, 2e-3, 27)),
        # once per request started from idleness: only where a set names it (single-request latency)
        "wake": [0.0] + list(np.geomspace(1e-4, 2e-2, 16)),
        # each request's time in the API server: only where a set served over HTTP names it
        "request": [0.0] + list(np.geomspace(1e-3, 5e-2, 18)),
        "kernel_scale": scales,
        # per kind of kernel term (`kernel_scale_by_bound`): only where a set names them
        "memory_scale": scales,
        "compute_scale": scales,
    }
    # every name a set may give has a grid (the fp8 ones per GPU, below)
    assert set(grids) == set(FIT_TERMS) - {FP8_TERM, FP8_LARGE_TERM}
    # few fit rows: a set names fewer terms; fitted together, the terms any of the sets names
    chosen = {key for each in sets for key in each.get("fit_terms", DEFAULT_TERMS)}
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
    fp8 = (
        fp8_coordinates(fit_sets, tuple(term for term in FP8_RANGES if term in chosen))
        if FP8_TERM in chosen
        else {}
    )
    fitted = {FP8_TERM: base.fp8_linear_scales, FP8_LARGE_TERM: base.fp8_large_batch_scales}
    fp8_reference = {  # the shape each fitted scale is at (read only where `fp8` has coordinates)
        gpu: Fp8Reference(model=model, tensor_parallel=degree)
        for gpu, (model, degree) in fp8_references(fit_sets).items()
    }
    for key, gpu in fp8.items():
        grids[key] = list(FP8_RANGES[key.split(":")[0]])  # searched coarse to fine
        values[key] = fitted[key.split(":")[0]].get(gpu, 1.0)

    def source(*features: str) -> str:
        """Where the fitted `features` come from: the sets whose fit rows score them."""
        scoring = [
            each
            for each in fit_sets
            if any(each in scoring_sets(feature, fit_sets, older, fp8) for feature in features)
        ] or fit_sets
        named = ", ".join(f"{each['name']} ({each.get('url', '')})" for each in scoring)
        return f"fitted on the fit runs of published set{'s' if len(scoring) > 1 else ''} {named}"

    base_terms = {term.feature: term for term in base.terms}

    scale_keys = SCALE_KEYS
    fits_scales = any(key in grids for key in scale_keys)

    def build(
        candidate: dict, base: EngineProfile = base, why: dict[str, str] | None = None
    ) -> EngineProfile:
        terms = {
            key: value
            for key, value in candidate.items()
            if key not in scale_keys and key not in older and key not in fp8
        }
        bound = dict(base.kernel_scale_by_bound)
        for kind in ("memory", "compute"):
            if f"{kind}_scale" in grids:
                bound[kind] = candidate[f"{kind}_scale"]
                if bound[kind] == 1.0:
                    del bound[kind]
        for key, value in terms.items():
            rows = " (their first-token rows)" if TERM_METRICS.get(key) == ("ttft_mean_s",) else ""
            base = base.with_terms({key: value}, "fitted", source(key) + rows)
        built = base.model_copy(
            update={
                "kernel_scale": candidate["kernel_scale"],
                "kernel_scale_by_bound": bound,
                "kernel_scale_source": (
                    f"{source(*(key for key in scale_keys if key in grids))}: this stack's kernel "
                    "time over the calibration's"
                    if fits_scales
                    else base.kernel_scale_source
                ),
            }
        )
        if fp8:
            small, large = (
                {key: gpu for key, gpu in fp8.items() if key.startswith(term + ":")}
                for term in (FP8_TERM, FP8_LARGE_TERM)
            )
            scales = dict(base.fp8_linear_scales) | {
                gpu: candidate[key] for key, gpu in small.items()
            }
            # a GPU fitted at 1.0 keeps its entry: without one it would take the scale of a GPU
            # of the same kernel build target (`EngineProfile.fp8_linear_scale`), not its fit
            built = built.model_copy(
                update={
                    "fp8_linear_scales": scales,
                    "fp8_linear_source": f"{source(*small)} (their fp8 runs' rows)",
                    "fp8_linear_reference": dict(base.fp8_linear_reference) | fp8_reference,
                }
            )
            if large:
                built = built.model_copy(
                    update={
                        "fp8_large_batch_scales": dict(base.fp8_large_batch_scales)
                        | {gpu: candidate[key] for key, gpu in large.items()},
                        "fp8_large_batch_source": f"{source(*large)} (their fp8 runs' rows)",
                    }
                )
        older_gpus = {name: [] for name, _ in older.values()}
        for key, (name, gpu) in older.items():
            if candidate[key]:
                older_gpus[name].append(gpu)
        return with_older_eras(built, older_gpus, why or {})

    def search(base: EngineProfile) -> tuple[float, dict]:
        start = values

        def trial(
            candidate: dict,
            scoring: list[dict] = fit_sets,
            metrics: tuple[str, ...] | None = None,
        ) -> float:
            profile = build(candidate, base)
            return objective(scored_rows(scoring, profile, metrics))

        for _ in range(steps):
            for feature, grid in grids.items():
                scoring = on_its_gpu(feature, scoring_sets(feature, fit_sets, older, fp8), fp8)
                metrics = TERM_METRICS.get(feature)
                best = trial(start, scoring, metrics)
                # a kernel scale: coarse, then fine around the best of the coarse pass
                swept = feature in scale_keys or feature in fp8
                bounds = FP8_RANGES[feature.split(":")[0]] if feature in fp8 else SCALE_RANGE
                for sweep in [0, 1] if swept else [None]:
                    trials = grid if sweep is None else scale_trials(start[feature], bounds)[sweep]
                    for value in trials:
                        candidate = start | {feature: float(value)}
                        if candidate == start:
                            continue
                        score = trial(candidate, scoring, metrics)
                        if score < best:
                            best, start = score, candidate
        return trial(start), start

    # the kernel era this source's stack ran on each GPU (`EngineProfile.source_eras`): every choice
    # of the GPUs that ran the tables' own GEMMs is fitted on the fit runs, the best one kept
    era_gpus = sorted({run["gpu"] for run in fit_runs["runs"]} & set(base.kernel_era_scales))
    choices = [
        tuple(gpu for bit, gpu in enumerate(era_gpus) if mask >> bit & 1)
        for mask in range(2 ** len(era_gpus))
    ]
    fits = {gpus: search(with_source_era(base, data["name"], gpus, "")) for gpus in choices}
    tables_gpus = min(fits, key=lambda gpus: fits[gpus][0])
    best, values = fits[tables_gpus]
    if len(choices) > 1:
        scores = "; ".join(
            f"tables on {', '.join(gpus) or 'none'}: {fits[gpus][0]:.4f}" for gpus in choices
        )
        base = with_source_era(
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
            return objective(scored_rows(fit_sets, profile))

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


def _with_errors(profile: EngineProfile, source: str, rows: list[Row]) -> EngineProfile:
    """The profile with its errors on one published set replaced by those of `rows`: per GPU and
    split, every tensor-parallel degree pooled, and per degree as well (the planner's band for a
    plan at that degree, `EngineProfile.held_out_error`)."""
    errors = [
        ProfileError(
            source=source,
            gpu=entry["gpu"],
            split=entry["split"],
            num_rows=entry["rows"],
            median_abs_error=entry["median_abs_error"],
            bias=entry["bias"],
            within_10pct=entry["within_10pct"],
            tensor_parallel=entry.get("tensor_parallel"),
        )
        for entry in grouped_stats(rows) + grouped_stats(rows, by_tensor_parallel=True)
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
