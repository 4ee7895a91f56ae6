"""`surgeplan calibrations list|show|profiles|fit|build|roofline`: inspect, refit and rebuild calibrations
and list the engine profiles (the serving stack's host time added on top of a calibration)."""

import json
from pathlib import Path

import typer
from rich.table import Table

from engine.core.step_shape import StepShape
from simulator.calibration.cli_tables import (
    console_print,
    percent,
    print_errors,
    print_peak_shares,
    print_points,
    print_profile,
    print_terms,
)
from simulator.calibration.cost_fit import fit_calibration
from simulator.calibration.cost_model import CostModel
from simulator.calibration.engine_profile import (
    default_profile_name,
    load_profile,
    profile_names,
)
from simulator.calibration.fit_plot import write_plot
from simulator.calibration.profiled_cost_model import ProfiledCostModel
from simulator.calibration.schema import Calibration, resolve_calibration, shipped_calibration_paths
from simulator.calibration.weight_dtype import weight_dtype_calibration

app = typer.Typer(
    help="Calibrations: measured, fitted and derived step-cost models.", no_args_is_help=True
)


EXAMPLE_SHAPES = {
    "decode, batch 1, context 512": StepShape(decode_context_lens=(512,)),
    "decode, batch 32, context 1024": StepShape(decode_context_lens=(1024,) * 32),
    "prefill 512 tokens": StepShape(prefill_chunks=((512, 0),)),
    "prefill 2048 tokens": StepShape(prefill_chunks=((2048, 0),)),
    "mixed: 16 decodes + 256 prefill": StepShape(
        prefill_chunks=((256, 0),), decode_context_lens=(512,) * 16
    ),
}


@app.command("list")
def list_calibrations(
    directory: Path = typer.Option(None, help="list this folder instead of the shipped ones"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object per calibration"),
) -> None:
    """Every calibration with its label, device, TP degree, source, backend and fit error."""
    paths = sorted(directory.glob("*.json")) if directory else shipped_calibration_paths()
    loaded = [(path, Calibration.load(path)) for path in paths]
    if as_json:
        typer.echo(
            json.dumps(
                [calibration_summary(path, calibration) for path, calibration in loaded], indent=1
            )
        )
        return
    table = Table(
        "file", "label", "model", "device", "TP", "backend", "knee", "fit error (CV / train)"
    )
    for path, calibration in loaded:
        errors = calibration.cost_model.fit_errors if calibration.cost_model else []
        first = errors[0] if errors else None
        backend = calibration.provenance.backend
        table.add_row(
            path.stem,
            calibration.label,
            calibration.model.name,
            calibration.device.name,
            str(calibration.device.tensor_parallel),
            f"{backend} {calibration.provenance.backend_version}" if backend else "—",
            f"{calibration.cost_model.knee_tokens:.0f}" if calibration.cost_model else "—",
            _error_cell(calibration, first),
        )
    console_print(table)


def calibration_summary(path: Path, calibration: Calibration) -> dict:
    """What `list --json` prints for one calibration: identity, label, source, backend, fit errors."""
    errors = calibration.cost_model.fit_errors if calibration.cost_model else []
    return {
        "name": calibration.name,
        "file": path.stem,
        "model": calibration.model.name,
        "device": calibration.device.name,
        "tensor_parallel": calibration.device.tensor_parallel,
        "label": calibration.label,
        "method": calibration.provenance.method,
        "source": calibration.provenance.source,
        "backend": calibration.provenance.backend,
        "backend_version": calibration.provenance.backend_version,
        "database_mode": calibration.provenance.database_mode,
        "fit_error": errors[0].model_dump() if errors else None,
        "fit_errors": [error.model_dump() for error in errors],
        "weight_dtypes": [
            "auto",
            *(calibration.cost_model.weight_dtype_terms if calibration.cost_model else {}),
        ],
        "kv_cache_dtypes_measured": [
            "auto",
            *(calibration.cost_model.kv_cache_dtype_terms if calibration.cost_model else {}),
        ],
    }


def _error_cell(calibration: Calibration, error) -> str:
    if error is None:
        return "none"
    cell = f"{percent(error.mape_cross_validated)} / {percent(error.mape_train)}"
    return cell + " (of its source)" if calibration.label == "derived" else cell


@app.command()
def show(
    calibration: str = typer.Argument(..., help="shipped name (see `list`) or a JSON path"),
    engine_profile: str = typer.Option(
        None,
        "--engine-profile",
        help="serving stack added on top "
        "(default: surgeplan for our own measurements, else vllm-v1)",
    ),
) -> None:
    """Provenance, every term with its label, fit errors, the engine profile's host terms, and example step
    times with and without the serving stack."""
    loaded = resolve_calibration(calibration)
    console_print(f"[bold]{loaded.name}[/bold]  label={loaded.label}  created {loaded.created_at}")
    console_print(
        f"model {loaded.model.name} ({loaded.dtype}), device {loaded.device.name} × TP {loaded.device.tensor_parallel}"
    )
    console_print(f"source: {loaded.provenance.source}\nmethod: {loaded.provenance.method}")
    if loaded.provenance.backend:
        console_print(
            f"backend: {loaded.provenance.backend} {loaded.provenance.backend_version} "
            f"(database mode {loaded.provenance.database_mode})"
        )
    for note in loaded.provenance.notes:
        console_print(f"  - {note}")
    if loaded.points:
        print_points(loaded)
    if loaded.cost_model is None:
        console_print(
            f"{len(loaded.points)} measured points; no cost model yet (run `calibrations fit`)"
        )
        return
    print_terms(loaded)
    print_errors(loaded)
    print_peak_shares(loaded)
    model = CostModel.from_calibration(loaded)
    try:
        profile = load_profile(engine_profile or default_profile_name(loaded))
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    print_profile(profile, loaded.device.hardware, loaded.device.tensor_parallel, loaded)
    total = ProfiledCostModel.of_calibration(loaded, profile, gpu=model)
    variants = {
        weight_dtype: CostModel.from_calibration(weight_dtype_calibration(loaded, weight_dtype))
        for weight_dtype in loaded.cost_model.weight_dtype_terms
    }
    examples = Table(
        "example step",
        "GPU (calibration)",
        f"with {profile.name}",
        *(f"GPU, {weight_dtype} weights" for weight_dtype in variants),
    )
    for name, shape in EXAMPLE_SHAPES.items():
        examples.add_row(
            name,
            f"{model.step_time(shape) * 1e3:.2f} ms",
            f"{total.step_time(shape) * 1e3:.2f} ms",
            *(f"{variant.step_time(shape) * 1e3:.2f} ms" for variant in variants.values()),
        )
    console_print(examples)


@app.command()
def profiles() -> None:
    """The engine profiles (serving stacks) a scenario can pick with `engine_profile`."""
    table = Table(
        "name", "engine", "versions", "overlap", "host terms", "held-out error (published)"
    )
    for name in profile_names():
        profile = load_profile(name)
        terms = ", ".join(
            f"{term.feature} {term.seconds_per_unit:.3g} s ({term.label})"
            for term in profile.terms
            if term.seconds_per_unit
        )
        held_out = profile.held_out_error()
        table.add_row(
            name,
            profile.engine,
            profile.versions,
            f"{profile.overlap:.0%} ({profile.overlap_label})",
            terms or "none",
            percent(held_out) if held_out is not None else "not validated",
        )
    console_print(table)


@app.command()
def fit(
    calibration: Path = typer.Argument(..., exists=True, help="a measured calibration JSON"),
    out: Path = typer.Option(None, help="write the refitted calibration here (default: in place)"),
    plot: Path = typer.Option(
        None, help="predicted vs measured plot: .html (plotly) or .png (matplotlib)"
    ),
    statistic: str = typer.Option("median", help="summary of each point's repeats: median or min"),
    folds: int = typer.Option(5, help="cross-validation folds"),
    seed: int = typer.Option(0),
) -> None:
    """Fit the cost model on a calibration's measured points and report its held-out error."""
    loaded = Calibration.load(calibration)
    if not loaded.points:
        raise typer.BadParameter(
            f"{calibration} has no measured points; expected a file from `surgeplan profile`"
        )
    refitted = fit_calibration(loaded, folds=folds, seed=seed, statistic=statistic)
    refitted.save(out or calibration)
    print_terms(refitted)
    print_errors(refitted)
    if plot:
        console_print(f"plot written to {write_plot(refitted, plot)}")


@app.command()
def build(
    out_dir: Path = typer.Option(None, help="default: simulator/calibration/calibrations"),
    source: str = typer.Option(
        "vidur",
        help="vidur: the public Vidur tables (plus derived and roofline "
        "calibrations); aiconfigurator: its installed measured kernel database "
        "(pip install 'surgeplan[aic]')",
    ),
    vidur_dir: Path = typer.Option(None, help="default: ../shared/calibration/vidur"),
    aic_dir: Path = typer.Option(
        None, help="aiconfigurator's systems/data folder (default: the installed one)"
    ),
) -> None:
    """Rebuild the shipped fitted, derived and roofline calibrations from public measured tables."""
    from simulator.calibration.schema import SHIPPED_DIR
    from simulator.calibration.shipped import build_aic, build_shipped
    from simulator.calibration.vidur_import import VIDUR_DIR

    if source == "vidur":
        paths = build_shipped(out_dir or SHIPPED_DIR, vidur_dir or VIDUR_DIR)
    elif source in ("aiconfigurator", "aic"):
        try:
            paths = build_aic(out_dir or SHIPPED_DIR, aic_dir)
        except ValueError as error:
            raise typer.BadParameter(
                str(error), param_hint="--source aiconfigurator / --aic-dir"
            ) from error
    else:
        raise typer.BadParameter(
            f"source {source!r}; expected vidur or aiconfigurator", param_hint="--source"
        )
    console_print(f"wrote {len(paths)} calibrations to {(out_dir or SHIPPED_DIR)}")


@app.command()
def roofline(
    model: str = typer.Argument(..., help="model preset"),
    hardware: str = typer.Argument(..., help="catalog GPU"),
    tensor_parallel: int = typer.Option(1, "--tp"),
    out: Path = typer.Option(None),
) -> None:
    """A `derived` roofline calibration for any catalog GPU and preset."""
    from simulator.calibration.roofline import roofline_calibration
    from simulator.hardware.catalog import get_hardware
    from simulator.model_spec import ModelSpec

    calibration = roofline_calibration(
        ModelSpec.from_preset(model), get_hardware(hardware), tensor_parallel
    )
    if out:
        calibration.save(out)
    print_terms(calibration)
