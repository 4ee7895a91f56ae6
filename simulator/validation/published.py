"""`surgeplan validate --published`: replay public measurements through the simulator.

A published set (`simulator/validation/published/*.json`, figures only, each run with its source file,
commit and date) holds runs of a real serving stack on a real GPU: bursts of requests with their
prompt and output lengths (or a fixed-length batch: `batch_size` requests of the same lengths), sent
at once, and the measured makespan, mean TTFT and/or mean E2E latency.
Each run is replayed on one simulated replica with the GPU's best shipped calibration and the set's
engine profile, and every (run, metric) pair becomes a row: simulated vs measured. Runs are split
into `fit` (what `fit_profile` tunes the profile's host terms on) and `held_out` (never fitted on);
the statistics are reported for each part and GPU separately: median |error|, bias (geometric mean of
simulated / measured) and the share of rows within 10%.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
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
from traces import Trace

PUBLISHED_DIR = Path(__file__).parent / "published"
METRICS = ("makespan_s", "ttft_mean_s", "e2e_mean_s")


@dataclass(frozen=True)
class Row:
    source: str
    run: str
    gpu: str
    split: str
    metric: str
    profile: str
    measured: float
    simulated: float

    @property
    def ratio(self) -> float:
        return self.simulated / self.measured

    @property
    def error(self) -> float:
        return self.ratio - 1.0


@dataclass(frozen=True)
class Stats:
    rows: int
    median_abs_error: float
    bias: float
    within_10pct: float


def published_names() -> list[str]:
    return sorted(path.stem for path in PUBLISHED_DIR.glob("*.json"))


def load_published(name_or_path: str | Path) -> dict:
    path = Path(name_or_path)
    if not (path.suffix == ".json" and path.exists()):
        path = PUBLISHED_DIR / f"{name_or_path}.json"
    if not path.exists():
        raise ValueError(
            f"published set {str(name_or_path)!r} is unknown; expected one of {published_names()} "
            "or a path to a JSON file"
        )
    data = json.loads(path.read_text())
    for index, run in enumerate(data.get("runs", [])):
        if "batch_size" in run:  # a fixed-length batch: B requests of the same lengths
            for key in ("prompt_tokens", "output_tokens"):
                if isinstance(run[key], int):
                    run[key] = [run[key]] * int(run["batch_size"])
        if len(run["prompt_tokens"]) != len(run["output_tokens"]) or not run["prompt_tokens"]:
            raise ValueError(
                f"{path}: runs[{index}] ({run.get('id')}) has {len(run['prompt_tokens'])} prompt "
                f"and {len(run['output_tokens'])} output lengths; expected equal, non-zero counts"
            )
        if any(not 0 <= i < len(run["prompt_tokens"]) for i in run.get("ttft_unrecorded", ())):
            raise ValueError(
                f"{path}: runs[{index}].ttft_unrecorded has an index outside the run's "
                f"{len(run['prompt_tokens'])} requests; expected request indices"
            )
        if run["split"] not in ("fit", "held_out"):
            raise ValueError(
                f"{path}: runs[{index}].split is {run['split']!r}; expected 'fit' or 'held_out'"
            )
        if data.get("held_out_only") and run["split"] != "held_out":
            raise ValueError(
                f"{path}: runs[{index}] ({run.get('id')}) is split {run['split']!r} in a held-out-only "
                "set; expected 'held_out' (an independent check is never fitted on)"
            )
    return data


def replay_run(
    data: dict, run: dict, profile: EngineProfile | str | None = None
) -> dict[str, float]:
    """Simulated makespan, mean TTFT and mean E2E of one published run (all requests at t=0)."""
    from simulator.scenario import Scenario
    from simulator.simulation import simulate

    settings = data.get("engine_settings", {}) | run.get("engine_settings", {})
    profile = profile if profile is not None else data["engine_profile"]
    n = len(run["prompt_tokens"])
    scenario = Scenario.model_validate(
        {
            "name": f"{data['name']}/{run['id']}",
            "model": {"name": run["model"], "dtype": run.get("dtype", "float16")},
            "hardware": {"gpu": run["gpu"], "tensor_parallel": run.get("tensor_parallel", 1)},
            "engine_profile": profile if isinstance(profile, str) else None,
            "scheduler": settings,
            "cluster": {"replicas": 1},
        }
    )
    trace = Trace(
        np.zeros(n),
        np.asarray(run["prompt_tokens"]),
        np.asarray(run["output_tokens"]),
        name=run["id"],
    )
    result = simulate(
        scenario, trace=trace, profile=profile if isinstance(profile, EngineProfile) else None
    )
    records = [record for record in result.records if record.ok]
    if len(records) != n:
        raise ValueError(
            f"{run['id']}: {n - len(records)} of {n} requests did not complete in the simulation"
        )
    # requests whose TTFT the benchmark did not record (no text came back) are left out of the mean
    unrecorded = set(run.get("ttft_unrecorded", ()))
    return {
        "makespan_s": max(r.arrival_s + r.e2e_s for r in records),
        "ttft_mean_s": float(np.mean([r.ttft_s for r in records if r.index not in unrecorded])),
        "e2e_mean_s": float(np.mean([r.e2e_s for r in records])),
    }


def source_profile(data: dict, profile: EngineProfile | str | None = None) -> EngineProfile:
    """The profile (the set's own unless named) as this set's source ran it: its kernel era
    (`EngineProfile.source_eras`, chosen on the set's fit runs) applied."""
    chosen = (
        profile
        if isinstance(profile, EngineProfile)
        else load_profile(profile or data["engine_profile"])
    )
    return chosen.for_source(data["name"])


def replay(data: dict, profile: EngineProfile | str | None = None) -> list[Row]:
    rows = []
    profile = source_profile(data, profile)
    name = profile.name
    for run in data["runs"]:
        simulated = replay_run(data, run, profile)
        for metric in METRICS:
            if metric in run["measured"]:
                rows.append(
                    Row(
                        data["name"],
                        run["id"],
                        run["gpu"],
                        run["split"],
                        metric,
                        name,
                        float(run["measured"][metric]),
                        simulated[metric],
                    )
                )
    return rows


def stats(rows: list[Row]) -> Stats | None:
    if not rows:
        return None
    errors = np.array([abs(row.error) for row in rows])
    log_ratios = np.array([math.log(row.ratio) for row in rows])
    return Stats(
        len(rows),
        float(np.median(errors)),
        float(math.exp(log_ratios.mean())),
        float(np.mean(errors <= 0.10)),
    )


def grouped_stats(rows: list[Row]) -> list[dict]:
    """Statistics per (profile, GPU, split), plus each split over all GPUs."""
    out = []
    keys = sorted({(row.profile, row.gpu, row.split) for row in rows}) + sorted(
        {(row.profile, "all", row.split) for row in rows}
    )
    for profile, gpu, split in keys:
        part = [
            row
            for row in rows
            if row.profile == profile and row.split == split and gpu in ("all", row.gpu)
        ]
        out.append({"profile": profile, "gpu": gpu, "split": split, **asdict(stats(part))})
    return out


def validate_published(name_or_path: str | Path, profile: str | None = None) -> dict:
    data = load_published(name_or_path)
    rows = replay(data, profile)
    return {
        "source": {
            key: data.get(key)
            for key in (
                "name",
                "description",
                "url",
                "licence",
                "retrieved",
                "engine_profile",
                "engine_version",
            )
        },
        "rows": [asdict(row) | {"error": row.error} for row in rows],
        "stats": grouped_stats(rows),
    }


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


def format_table(result: dict) -> str:
    lines = [
        f"{'run':<12} {'GPU':<10} {'split':<8} {'metric':<12} {'measured':>10} {'simulated':>10} {'error':>8}"
    ]
    for row in result["rows"]:
        lines.append(
            f"{row['run']:<12} {row['gpu']:<10} {row['split']:<8} {row['metric']:<12} "
            f"{row['measured']:>10.3f} {row['simulated']:>10.3f} {row['error']:>+8.1%}"
        )
    lines.append("")
    lines.append(
        f"{'profile':<10} {'GPU':<10} {'split':<8} {'rows':>4} {'median |err|':>12} {'bias':>7} {'≤10%':>6}"
    )
    for entry in result["stats"]:
        lines.append(
            f"{entry['profile']:<10} {entry['gpu']:<10} {entry['split']:<8} {entry['rows']:>4} "
            f"{entry['median_abs_error']:>12.1%} {entry['bias']:>7.3f} {entry['within_10pct']:>6.0%}"
        )
    return "\n".join(lines)


__all__ = [
    "METRICS",
    "Row",
    "Stats",
    "fit_profile",
    "format_table",
    "grouped_stats",
    "load_published",
    "published_names",
    "record_errors",
    "replay",
    "stats",
    "validate_published",
]
