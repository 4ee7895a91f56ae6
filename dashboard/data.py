"""The dashboard's only door to the simulator and the traces: every call, every file read, every cache.

Pages build a `Scenario` from widgets and ask here for results; each simulation is cached by the
scenario's JSON (`st.cache_data`), so moving a slider back, switching pages or sweeping a curve point
by point never simulates the same scenario twice. Errors a user can cause (a model that does not fit
the GPU, a bad trace file) come back as one-line messages for `st.error`, never as exceptions.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import tempfile
from pathlib import Path

import numpy as np
import streamlit as st
from pydantic import ValidationError

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel, predicted_vs_measured
from simulator.calibration.schema import Calibration, shipped_calibration_paths
from simulator.hardware import HardwareSpec, load_catalog
from simulator.result import SimResult
from simulator.scenario import Scenario
from simulator.simulation import simulate
from traces import compute_stats, detect_format, load_trace, spike_trace
from traces.lengths import fit_trace_lengths
from traces.stats import rate_per_window

ROOT = Path(__file__).resolve().parent.parent
SHARED_TRACES = ROOT.parent / "shared" / "traces"
UPLOADS = Path(tempfile.gettempdir()) / "surgeplan-dashboard-uploads"
VALIDATE_JSON = ROOT / "benchmarks" / "results" / "validate.json"
ENGINE_BENCH_JSON = ROOT / "benchmarks" / "results" / "engine_cpu.json"

# The What-if page's opening scenario: the article's 10x spike on a small chat fleet, sized so that a
# re-render (one simulation of ~1,500 requests) stays within about a second of CPU.
DEFAULT_WHATIF = {
    "name": "what-if: 10x spike",
    "traffic": {
        "arrivals": {
            "kind": "spike",
            "base": {"kind": "poisson", "rate_per_s": 1.2},
            "multiplier": 10.0,
            "start_s": 60.0,
            "ramp_up_s": 20.0,
            "hold_s": 90.0,
            "ramp_down_s": 20.0,
        },
        "duration_s": 300.0,
        "too_long": "clip",
    },
    "model": {"name": "llama-2-7b"},
    "hardware": {"gpu": "A100-80GB", "tensor_parallel": 1},
    "cluster": {
        "replicas": 2,
        "autoscaler": {"enabled": True, "min_replicas": 2, "max_replicas": 8},
    },
    "scheduler": {"max_num_batched_tokens": 4096},
    "clients": {"ttft_timeout_s": 10.0, "max_retries": 1, "retry_backoff_s": 2.0},
    "slo": {"ttft_p99_s": 2.0, "tpot_p99_s": 0.15},
}
# Traditional vs paged: one replica under steady Poisson load, the load swept.
DEFAULT_POLICY_BASE = {
    "name": "policy sweep",
    "traffic": {
        "arrivals": {"kind": "poisson", "rate_per_s": 1.0},
        "duration_s": 90.0,
        "too_long": "clip",
    },
    "model": {"name": "llama-2-7b"},
    "hardware": {"gpu": "A100-80GB"},
    "scheduler": {"max_num_batched_tokens": 4096},
    "slo": {"ttft_p99_s": 2.0, "tpot_p99_s": 0.15},
}


def default_whatif() -> Scenario:
    return Scenario.model_validate(DEFAULT_WHATIF)


def default_policy_base() -> Scenario:
    return Scenario.model_validate(DEFAULT_POLICY_BASE)


def explain(error: ValidationError) -> str:
    """One clause per bad field, `cluster.replicas: ... (got 0)`; a whole sub-model's value is not repeated."""
    clauses = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "scenario"
        value = item.get("input")
        got = "" if isinstance(value, (dict, list)) else f" (got {value!r})"
        clauses.append(f"{where}: {item['msg'].removeprefix('Value error, ')}{got}")
    return "; ".join(clauses)


def build_scenario(data: dict) -> tuple[Scenario | None, str | None]:
    """A validated scenario from nested widget values, or the bad fields named in one message."""
    try:
        return Scenario.model_validate(data), None
    except ValidationError as error:
        return None, explain(error)


# ---- simulation -----------------------------------------------------------------------------------
@st.cache_data(max_entries=256, show_spinner=False)
def _simulate_json(scenario_json: str) -> tuple[SimResult | None, str | None]:
    scenario = Scenario.model_validate_json(scenario_json)
    try:
        result = simulate(scenario)
    except (ValueError, KeyError) as error:
        return None, str(error).strip("'\"")
    return dataclasses.replace(
        result, records=[]
    ), None  # per-request records: large, and no page shows them


def run(scenario: Scenario) -> tuple[SimResult | None, str | None]:
    """(result without per-request records, None) or (None, a message naming what is wrong)."""
    return _simulate_json(scenario.model_dump_json())


def policy_point(base: Scenario, policy: str, rate_per_s: float) -> Scenario:
    """`base` on one replica (no autoscaler) under Poisson traffic at `rate_per_s`, with `policy`."""
    data = base.model_dump(mode="json")
    data["traffic"]["arrivals"] = {"kind": "poisson", "rate_per_s": rate_per_s}
    data["cluster"]["replicas"] = 1
    data["cluster"]["autoscaler"]["enabled"] = False
    data["scheduler"]["policy"] = policy
    data["name"] = f"{policy} at {rate_per_s:g} req/s"
    return Scenario.model_validate(data)


def capacity_rps(rows: list[dict], slo_bound: bool) -> float | None:
    """A replica's capacity from a load sweep (requests completed per second): at the highest offered
    load that met the SLO (`slo_bound`), or the most it completed at any load (saturation)."""
    if slo_bound:
        met = [row for row in rows if row["meets_slo"]]
        return max(met, key=lambda row: row["load_rps"])["throughput_rps"] or None if met else None
    return max((row["throughput_rps"] for row in rows), default=None) or None


def gpus_needed(target_rps: float, capacity: float | None, tensor_parallel: int) -> int | None:
    return None if not capacity else int(np.ceil(target_rps / capacity - 1e-9)) * tensor_parallel


# ---- catalog, models, calibrations -----------------------------------------------------------------
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
    from simulator.validation.published import validate_published

    return validate_published(name)


def published_set_names() -> list[str]:
    from simulator.validation.published import published_names

    return published_names()


def profile_errors() -> list[dict]:
    """Every shipped profile's stored error on each published set, per GPU and split (what
    `surgeplan validate --published all --refit` wrote): the table the README shows."""
    from simulator.calibration.engine_profile import load_profile, profile_names

    rows = []
    for name in profile_names():
        for error in load_profile(name).errors:
            rows.append({"profile": name, **error.model_dump()})
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


# ---- traces --------------------------------------------------------------------------------------
def shared_traces() -> list[Path]:
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(
        p for p in SHARED_TRACES.iterdir() if p.suffix in (".csv", ".jsonl", ".gz") and p.is_file()
    )


def _describe(trace, format_name: str, window_s: float, path: str | None = None) -> dict:
    stats = compute_stats(trace, window_s)
    starts, rates = rate_per_window(trace, window_s)
    fits = fit_trace_lengths(trace) if len(trace) else {}
    rng = np.random.default_rng(0)
    keep = rng.choice(len(trace), size=min(len(trace), 20000), replace=False) if len(trace) else []
    return {
        "format": format_name,
        "path": path,
        "stats": stats.model_dump(),
        "starts": starts.tolist(),
        "rates": rates.tolist(),
        "prompt": trace.prompt_tokens[keep].tolist(),
        "output": trace.output_tokens[keep].tolist(),
        "lognormal": {k: v["lognormal_median_sigma"] for k, v in fits.items()},
    }


def _load_and_describe(path: str, window_s: float) -> tuple[dict | None, str | None]:
    try:
        return _describe(load_trace(path), detect_format(path), window_s, path), None
    except (ValueError, OSError) as error:  # TraceFormatError is a ValueError
        return None, str(error)


@st.cache_data(max_entries=16, show_spinner=False)
def trace_file(path: str, mtime: float, window_s: float) -> tuple[dict | None, str | None]:
    """A trace file described (`mtime` keys the cache to the file's version)."""
    return _load_and_describe(path, window_s)


def keep_upload(data: bytes, filename: str) -> Path:
    """An uploaded file written where later runs and other pages can read it: a folder named by the
    content's hash, so one content is written once and a scenario naming it always means the same bytes."""
    name = Path(filename).name or "upload"
    folder = UPLOADS / hashlib.sha256(data).hexdigest()[:16]
    path = folder / name
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return path


@st.cache_data(max_entries=8, show_spinner=False)
def trace_upload(data: bytes, filename: str, window_s: float) -> tuple[dict | None, str | None]:
    """An uploaded trace described (with the `path` it was kept at), or why it cannot be read."""
    path = keep_upload(data, filename)
    described, error = _load_and_describe(str(path), window_s)
    return described, error and error.replace(str(path), filename)


@st.cache_data(max_entries=16, show_spinner=False)
def trace_spike(
    baseline_rps: float,
    multiplier: float,
    duration_s: float,
    start_s: float,
    ramp_s: float,
    hold_s: float,
    window_s: float,
    seed: int = 0,
) -> tuple[dict | None, str | None]:
    try:
        trace = spike_trace(
            baseline_rps,
            multiplier,
            duration_s,
            start_s=start_s,
            ramp_up_s=ramp_s,
            hold_s=hold_s,
            ramp_down_s=ramp_s,
            seed=seed,
            name=f"{multiplier:g}x spike",
        )
    except ValueError as error:
        return None, str(error)
    return _describe(trace, "synthetic", window_s), None


# ---- result files ----------------------------------------------------------------------------------
def read_json(path: Path) -> tuple[dict | None, str | None]:
    """(contents, None), (None, None) when the file is absent, or (None, why it cannot be read)."""
    if not path.is_file():
        return None, None
    try:
        return json.loads(path.read_text()), None
    except (OSError, json.JSONDecodeError) as error:
        return (
            None,
            f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: cannot be read ({error})",
        )


# ---- planner and live validation -------------------------------------------------------------------
@st.cache_resource(show_spinner=False)
def _plan_outcomes():
    """One planner outcome cache for the app's life: re-planning re-simulates only what changed."""
    from simulator.planner.cache import OutcomeCache

    return OutcomeCache()


@st.cache_data(max_entries=32, show_spinner=False)
def plan(scenario_json: str, settings: dict) -> tuple[dict | None, str | None]:
    """(the planner's JSON answer with its Pareto points and the ledger as CSV, None) or (None, the
    planner's explanation: no fleet in range meets the SLO, the model fits no GPU, ...)."""
    from simulator.planner import PlanSettings
    from simulator.planner import plan as run_plan
    from simulator.planner.ledger import COLUMNS
    from simulator.planner.pareto import pareto_front, pareto_points

    try:
        checked = PlanSettings.model_validate(settings)
        result = run_plan(
            Scenario.model_validate_json(scenario_json),
            checked,
            progress=False,
            cache=_plan_outcomes(),
        )
    except ValidationError as error:
        return None, explain(error)
    except ValueError as error:  # PlanError is a ValueError: a user error, explained
        return None, str(error)
    points = pareto_points(result.ledger.rows)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(COLUMNS), extrasaction="ignore")
    writer.writeheader()
    writer.writerows(result.ledger.rows)
    return {
        **result.data,
        "pareto_points": points,
        "pareto_front": pareto_front(points),
        "ledger_csv": text.getvalue(),
        "ledger_rows": len(result.ledger.rows),
    }, None


LIVE_REPEATS = 2  # live runs per load level: two, for the noise floor


def live_validation_steps(load_levels: tuple[float, ...]) -> int:
    """Progress messages a live validation sends: the capacity run, the batch ladder, then each live run."""
    return 2 + LIVE_REPEATS * len(load_levels)


def live_validation(
    trace: str, num_requests: int, load_levels: tuple[float, ...], progress=None
) -> tuple[dict | None, str | None]:
    """A short live-vs-simulated validation on this machine (the live engine on `cpu-small`): minutes.
    `progress(message)` is called before each live run; an exception it raises ends the validation."""
    from simulator.validation.validate import validate

    try:
        return validate(
            "cpu-small",
            trace,
            num_requests=num_requests,
            load_levels=load_levels,
            profile="none",
            repeats=LIVE_REPEATS,
            progress=progress,
        ), None
    except ValueError as error:
        return None, str(error)


# ---- co-located vs disaggregated (the Split page) ----------------------------------------------------
SPLIT_EXAMPLE = (
    Path(__file__).resolve().parents[1]
    / "examples"
    / "scenarios"
    / "disaggregated-llama-3-70b-h100.yaml"
)


def default_split() -> Scenario:
    return Scenario.load(SPLIT_EXAMPLE)


def split_pair(
    base: Scenario,
    prefill_replicas: int,
    decode_replicas: int,
    colocated_replicas: int,
    long_rate_per_s: float,
    cpu_kv_gb: float,
    duration_s: float,
):
    """(co-located result, disaggregated result, error) for the Split page: the same traffic, long-context
    surge at `long_rate_per_s`, fixed fleets (autoscalers off)."""
    from simulator.planner.split import Layout, layout_scenario

    parts = (
        [
            part.model_copy(
                update={
                    "arrivals": part.arrivals.model_copy(update={"rate_per_s": long_rate_per_s})
                }
            )
            for part in base.traffic.parts
        ]
        if long_rate_per_s > 0
        else []
    )
    traffic = base.traffic.model_copy(update={"parts": parts, "duration_s": duration_s})
    scenario = base.model_copy(update={"traffic": traffic})
    spec = base.cluster.disaggregation
    tp_p = spec.prefill_tensor_parallel or base.hardware.tensor_parallel
    tp_d = spec.decode_tensor_parallel or base.hardware.tensor_parallel
    colocated, error = run(
        layout_scenario(
            scenario,
            Layout(
                "colocated",
                cpu_kv_gb,
                replicas=colocated_replicas,
                tensor_parallel=base.hardware.tensor_parallel,
            ),
        )
    )
    if error:
        return None, None, error
    split, error = run(
        layout_scenario(
            scenario,
            Layout(
                "disaggregated",
                cpu_kv_gb,
                prefill_replicas=prefill_replicas,
                decode_replicas=decode_replicas,
                prefill_tensor_parallel=tp_p,
                decode_tensor_parallel=tp_d,
            ),
        )
    )
    return colocated, split, error
