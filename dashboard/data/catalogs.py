"""What the dashboard offers to choose from: the catalog's GPUs, the model presets, the engine
profiles, the shipped calibrations (their fit errors, predicted step curves and measured points)
and the published validation sets; each read once per app (`st.cache_data`)."""

from __future__ import annotations

import streamlit as st
from pydantic import ValidationError

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel, predicted_vs_measured
from simulator.calibration.schema import Calibration, shipped_calibration_paths
from simulator.hardware.catalog import load_catalog
from simulator.hardware.spec import HardwareSpec


@st.cache_data(show_spinner=False)
def gpus() -> dict[str, HardwareSpec]:
    """The catalog's GPUs (prices come only from here)."""
    return {name: spec for name, spec in load_catalog().items() if spec.kind == "gpu"}


@st.cache_data(show_spinner=False)
def model_names() -> list[str]:
    from engine.model.presets import preset_names  # pure Python: the shapes, no torch

    return [name for name in preset_names() if name not in ("tiny", "cpu-small")]


@st.cache_data(show_spinner=False)
def engine_profiles() -> dict[str, str]:
    """Engine profile name -> one line: engine, versions, held-out error on published measurements."""
    from simulator.calibration.engine_profile import load_profile, profile_names

    out = {}
    for name in profile_names():
        profile = load_profile(name)
        error = profile.held_out_error()
        out[name] = f"{name}: {profile.engine} {profile.versions}; " + (
            f"held-out error {error:.1%}"
            if error is not None
            else "not validated on published data"
        )
    return out


@st.cache_data(show_spinner=False)
def published_validation(name: str) -> dict:
    """`surgeplan validate --published NAME`: one published set replayed with its own profile."""
    from simulator.validation.published_report import validate_published

    return validate_published(name)


def _saved_published() -> tuple[list[dict] | None, str | None]:
    """(every set as `surgeplan validate --published all --out
    benchmarks/results/published_validation.json` saved it, None), or (None, why not)."""
    from dashboard.data import saved_files

    results, problem = saved_files.read_json(saved_files.PUBLISHED_JSON)
    if results is None:
        return None, problem or f"{saved_files.PUBLISHED_JSON.name} is not saved yet"
    return results, None


@st.cache_data(show_spinner=False)
def published_summary() -> tuple[list[dict], str | None]:
    """(every set's held-out rows pooled per profile, GPU and tensor-parallel class, each judged
    against the targets; a line when the saved replay is missing or broken), from the saved replay."""
    from simulator.validation.published_report import pooled_summary

    results, problem = _saved_published()
    return ([], problem) if results is None else (pooled_summary(results), None)


@st.cache_data(show_spinner=False)
def published_saved(name: str) -> tuple[dict | None, str | None]:
    """(one published set as the saved replay has it: source, rows and stats, as
    `validate_published(name)` returns them, None), or (None, why the saved replay lacks it). Shown
    at once; a replay of the largest set takes about a minute."""
    results, problem = _saved_published()
    if results is None:
        return None, problem
    for result in results:
        if result["source"]["name"] == name:
            return result, None
    return None, f"{name} is not in the saved replay (a set added since it was written)"


def published_set_names() -> list[str]:
    from simulator.validation.published_sets import published_names

    return published_names()


def profile_errors() -> list[dict]:
    """Every shipped profile's stored error on each published set, per GPU and split (what
    `surgeplan validate --published all --refit` wrote): the table docs/measured/real-gpus.md shows."""
    from simulator.calibration.engine_profile import load_profile, profile_names

    rows = []
    for name in profile_names():
        for error in load_profile(name).errors:
            rows.append({"profile": name, **error.model_dump()})
    return rows


def planner_bands() -> list[dict]:
    """What a plan's band reads (`EngineProfile.held_out`) for every profile at every GPU and degree
    with held-out published rows: the figure, and which rows it comes from."""
    from simulator.calibration.engine_profile import load_profile, profile_names

    rows = []
    for name in profile_names():
        profile = load_profile(name)
        places = sorted(
            {
                (e.gpu, e.tensor_parallel)
                for e in profile.errors
                if e.split == "held_out" and e.tensor_parallel is not None
            }
        )
        for gpu, tensor_parallel in places:
            figure, read = profile.held_out(gpu, tensor_parallel)
            rows.append(
                {"profile": name, "gpu": gpu, "tensor_parallel": tensor_parallel}
                | {"band": figure, "rows_read": read}
            )
    return rows


@st.cache_data(show_spinner=False)
def shipped_calibrations() -> dict[str, Calibration]:
    return {(c := Calibration.load(path)).name: c for path in shipped_calibration_paths()}


def calibration_rows() -> list[dict]:
    rows = []
    for calibration in shipped_calibrations().values():
        fit = calibration.cost_model
        error = fit.fit_errors[0] if fit and fit.fit_errors else None
        rows.append(
            {
                "calibration": calibration.name,
                "label": calibration.label,
                "GPU": calibration.device.hardware or calibration.device.name,
                "TP": calibration.device.tensor_parallel,
                "fit error, held out (%)": _percent(error.mape_cross_validated) if error else None,
                "fit error, train (%)": _percent(error.mape_train) if error else None,
                "knee (tokens)": round(fit.knee_tokens) if fit else None,
                "method": calibration.provenance.method,
                "backend": " ".join(
                    filter(
                        None,
                        (calibration.provenance.backend, calibration.provenance.backend_version),
                    )
                )
                or None,
            }
        )
    return rows


def _percent(fraction: float | None) -> float | None:
    return None if fraction is None else round(100 * fraction, 1)


def step_curves(
    names: list[str],
    context_tokens: int,
    batches: list[int],
    prefill_tokens: list[int],
    extra: Calibration | None = None,
) -> dict[str, dict]:
    """Predicted decode step time per batch size (each sequence at `context_tokens`) and prefill time
    per prompt length, for each named calibration, with its label."""
    chosen = [shipped_calibrations()[name] for name in names] + (
        [extra] if extra is not None else []
    )
    curves = {}
    for calibration in chosen:
        model = CostModel.from_calibration(calibration)
        curves[calibration.name] = {
            "label": calibration.label,
            "decode": [model.step_time(StepShape((), (context_tokens,) * b)) for b in batches],
            "prefill": [model.step_time(StepShape(((n, 0),), ())) for n in prefill_tokens],
        }
    return curves


def read_calibration(data: bytes, filename: str) -> tuple[Calibration | None, str | None]:
    try:
        calibration = Calibration.model_validate_json(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(map(str, first["loc"])) or "the top level"
        return None, (
            f"{filename}: not a surgeplan calibration ({error.error_count()} problems, first: "
            f"{first['msg']} at {where})"
        )
    if calibration.cost_model is None:
        return (
            None,
            f"{filename}: has no fitted cost model; run `surgeplan calibrations fit` on it first",
        )
    return calibration, None


def measured_points(calibration: Calibration) -> list[dict]:
    """Each measured point beside the cost model's prediction (empty for fitted/derived files)."""
    return [
        {
            "kind": point.kind,
            "tokens": point.shape.to_shape().num_batched_tokens,
            "measured_s": point.median_total_s,
            "predicted_s": predicted,
        }
        for point, predicted in predicted_vs_measured(calibration)
    ]
