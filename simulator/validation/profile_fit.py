"""Fitting an engine profile on published sets: `fit_profile` tunes a set's profile (host terms,
kernel scale, the source's kernel era) on its `fit` runs; `record_errors` stores a held-out-only
set's errors in its profile. Apart from `published.py` (loading and replaying the sets, their
statistics) because fitting writes profiles while replaying only reads them."""

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
from simulator.validation.published import Row, grouped_stats, load_published, replay


def _objective(rows: list[Row]) -> float:
    return float(np.mean([math.log(row.ratio) ** 2 for row in rows]))


def fit_profile(
    name_or_path: str | Path, steps: int = 2, write: bool = True
) -> tuple[EngineProfile, list[Row]]:
    """Fit the set's profile on its `fit` runs: per-step, per-sequence and per-prefill-token host terms
    and the stack's kernel scale (its kernels' time over the calibration's: TensorRT-LLM's kernels are
    not vLLM's), by coordinate search on grids, least squares on log(simulated / measured). Per output
    token stays as it is (in decode steps it is not separable from per sequence). Writes the profile
    with its errors on fit and held-out rows when `write`."""
    data = load_published(name_or_path)
    if not any(run["split"] == "fit" for run in data["runs"]):
        raise ValueError(
            f"published set {data['name']!r} has no fit runs (held out only: an independent check); "
            "expected a set with runs split 'fit' to fit a profile on"
        )
    base = with_era_scales(load_profile(data["engine_profile"]))
    fit_runs = {**data, "runs": [run for run in data["runs"] if run["split"] == "fit"]}
    by_bound = base.kernel_scale_by_bound
    values = {term.feature: term.seconds_per_unit for term in base.terms} | {
        "kernel_scale": base.kernel_scale,
        "memory_scale": by_bound.get("memory", 1.0),
        "compute_scale": by_bound.get("compute", 1.0),
    }
    scales = list(np.round(np.arange(0.60, 1.41, 0.02), 2))
    grids = {
        "step": [0.0] + list(np.geomspace(1e-4, 2e-2, 16)),
        "sequence": [0.0] + list(np.geomspace(1e-6, 1e-3, 16)),
        "prefill_token": [0.0] + list(np.geomspace(1e-7, 1e-4, 13)),
        "kernel_scale": scales,
        # per kind of kernel term (`kernel_scale_by_bound`): only where a set names them
        "memory_scale": scales,
        "compute_scale": scales,
    }
    default_terms = ["step", "sequence", "prefill_token", "kernel_scale"]
    chosen = data.get("fit_terms", default_terms)  # few fit rows: fit fewer terms
    grids = {key: grids[key] for key in chosen}
    source = f"fitted on the fit runs of published set {data['name']} ({data.get('url', '')})"

    base_terms = {term.feature: term for term in base.terms}

    scale_keys = ("kernel_scale", "memory_scale", "compute_scale")
    fits_scales = any(key in grids for key in scale_keys)

    def build(candidate: dict, base: EngineProfile = base) -> EngineProfile:
        terms = {key: value for key, value in candidate.items() if key not in scale_keys}
        bound = dict(base.kernel_scale_by_bound)
        for kind in ("memory", "compute"):
            if f"{kind}_scale" in grids:
                bound[kind] = candidate[f"{kind}_scale"]
                if bound[kind] == 1.0:
                    del bound[kind]
        return base.with_terms(terms, "fitted", source).model_copy(
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

    def search(base: EngineProfile) -> tuple[float, dict]:
        start = values

        def trial(candidate: dict) -> float:
            return _objective(replay(fit_runs, build(candidate, base)))

        best = trial(start)
        for _ in range(steps):
            for feature, grid in grids.items():
                for value in grid:
                    candidate = start | {feature: float(value)}
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
    fitted = build(values, base)
    fitted = fitted.model_copy(
        update={
            "terms": [
                term if term.feature in grids else base_terms[term.feature] for term in fitted.terms
            ]
        }
    )
    rows = replay(data, fitted)
    fitted = _with_errors(fitted, data["name"], rows)
    if write:
        fitted.save(PROFILES_DIR / f"{fitted.name}.json")
    return fitted, rows


def _with_source_era(
    profile: EngineProfile, name: str, tables_gpus: tuple[str, ...], why: str
) -> EngineProfile:
    eras = {key: value for key, value in profile.source_eras.items() if key != name}
    if tables_gpus:
        eras[name] = SourceEra(tables_gpus=list(tables_gpus), source=why)
    return profile.model_copy(update={"source_eras": eras})


def with_era_scales(profile: EngineProfile) -> EngineProfile:
    """The profile with its per-GPU era scales (`kernel_era`) derived afresh from the shipped
    calibrations, for the GPUs it already names (a profile naming none is left as it is)."""
    if not profile.kernel_era_scales:
        return profile
    calibrations = load_all_shipped()
    backend = profile.kernel_backend or "vllm"
    scales = {gpu: era_factor(calibrations, gpu, backend) for gpu in profile.kernel_era_scales}
    sources = [f"{gpu}: {era_source(calibrations, gpu, backend)}" for gpu in scales]
    return profile.model_copy(
        update={
            "kernel_era_scales": {gpu: round(s, 4) for gpu, s in scales.items() if s},
            "kernel_era_source": "; ".join(sources),
        }
    )


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
    how a held-out-only set (an independent check) reaches the planner's band and the README."""
    data = load_published(name_or_path)
    profile = load_profile(data["engine_profile"])
    rows = replay(data, profile)
    profile = _with_errors(profile, data["name"], rows)
    if write:
        profile.save(PROFILES_DIR / f"{profile.name}.json")
    return profile, rows
