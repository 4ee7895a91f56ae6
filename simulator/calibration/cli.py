"""`surgeplan calibrations list|show|profiles|fit|build|roofline`: inspect, refit and rebuild calibrations
and list the engine profiles (the serving stack's host time added on top of a calibration)."""

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from engine.core.step_shape import StepShape
from simulator.calibration.cost_model import CostModel, fit_calibration, predicted_vs_measured
from simulator.calibration.engine_profile import (
    HOST_FEATURES,
    EngineProfile,
    ProfiledCostModel,
    default_profile_name,
    load_profile,
    profile_names,
)
from simulator.calibration.schema import Calibration, resolve_calibration, shipped_calibration_paths

app = typer.Typer(
    help="Calibrations: measured, fitted and derived step-cost models.", no_args_is_help=True
)


def _out(*items) -> None:
    """Print through a console made now, so the terminal width (or COLUMNS) is read at call time."""
    Console().print(*items)


EXAMPLE_SHAPES = {
    "decode, batch 1, context 512": StepShape(decode_context_lens=(512,)),
    "decode, batch 32, context 1024": StepShape(decode_context_lens=(1024,) * 32),
    "prefill 512 tokens": StepShape(prefill_chunks=((512, 0),)),
    "prefill 2048 tokens": StepShape(prefill_chunks=((2048, 0),)),
    "mixed: 16 decodes + 256 prefill": StepShape(
        prefill_chunks=((256, 0),), decode_context_lens=(512,) * 16
    ),
}


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


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
    _out(table)


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
    }


def _error_cell(calibration: Calibration, error) -> str:
    if error is None:
        return "none"
    cell = f"{_percent(error.mape_cross_validated)} / {_percent(error.mape_train)}"
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
    _out(f"[bold]{loaded.name}[/bold]  label={loaded.label}  created {loaded.created_at}")
    _out(
        f"model {loaded.model.name} ({loaded.dtype}), device {loaded.device.name} × TP {loaded.device.tensor_parallel}"
    )
    _out(f"source: {loaded.provenance.source}\nmethod: {loaded.provenance.method}")
    if loaded.provenance.backend:
        _out(
            f"backend: {loaded.provenance.backend} {loaded.provenance.backend_version} "
            f"(database mode {loaded.provenance.database_mode})"
        )
    for note in loaded.provenance.notes:
        _out(f"  - {note}")
    if loaded.points:
        _print_points(loaded)
    if loaded.cost_model is None:
        _out(f"{len(loaded.points)} measured points; no cost model yet (run `calibrations fit`)")
        return
    _print_terms(loaded)
    _print_errors(loaded)
    model = CostModel.from_calibration(loaded)
    try:
        profile = load_profile(engine_profile or default_profile_name(loaded))
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    _print_profile(profile, loaded.device.hardware)
    total = ProfiledCostModel.of_calibration(loaded, profile, gpu=model)
    examples = Table("example step", "GPU (calibration)", f"with {profile.name}")
    for name, shape in EXAMPLE_SHAPES.items():
        examples.add_row(
            name, f"{model.step_time(shape) * 1e3:.2f} ms", f"{total.step_time(shape) * 1e3:.2f} ms"
        )
    _out(examples)


def _print_profile(profile: EngineProfile, gpu: str | None = None) -> None:
    _out(
        f"[bold]engine profile {profile.name}[/bold]: {profile.engine} {profile.versions}. {profile.description}"
    )
    table = Table("host term", "value", "label", "source")
    for term in profile.terms:
        table.add_row(
            HOST_FEATURES[term.feature], f"{term.seconds_per_unit:.4g} s", term.label, term.source
        )
    table.add_row(
        "overlap with the GPU",
        f"{profile.overlap:.0%}",
        profile.overlap_label,
        profile.overlap_source,
    )
    by_bound = ", ".join(f"{k} x{v:.2f}" for k, v in profile.kernel_scale_by_bound.items())
    fitted = profile.kernel_scale != 1.0 or profile.kernel_scale_by_bound
    table.add_row(
        f"kernel time vs the calibration's (stack's kernels: {profile.kernel_backend or 'any'}; "
        "applied only on another backend's calibration)",
        f"x{profile.kernel_scale:.2f}" + (f"; {by_bound}" if by_bound else ""),
        "fitted" if fitted else "derived",
        profile.kernel_scale_source,
    )
    if profile.kernel_era_scales:
        era = profile.kernel_era_scales.get(gpu or "")
        table.add_row(
            "linear layers vs its own backend's kernel tables (an older stack's GEMMs)",
            f"x{era:.3f} on {gpu}"
            if era
            else ", ".join(f"{name} x{v:.3f}" for name, v in profile.kernel_era_scales.items()),
            "derived",
            profile.kernel_era_source,
        )
    for name, era in profile.source_eras.items():
        table.add_row(
            f"published source {name}: ran the kernel tables' own GEMMs (era scale x1)",
            ", ".join(era.tables_gpus),
            "fitted",
            era.source,
        )
    if profile.kv_memory is not None:
        memory = profile.kv_memory
        table.add_row(
            "KV cache: gpu_memory_utilization of the memory free after weights and reserves",
            f"activations {memory.max_num_tokens} tokens x hidden x "
            + "/".join(f"{v:g}" for v in memory.activation_bytes_per_token_hidden.values())
            + f" B (TP {'/'.join(map(str, memory.activation_bytes_per_token_hidden))}); other "
            f"{memory.other_bytes / 2**20:.0f} MiB",
            "derived",
            memory.source,
        )
    _out(table)
    if profile.errors:
        errors = Table(
            "published set", "GPU", "split", "rows", "median |error|", "bias", "within 10%"
        )
        for e in profile.errors:
            errors.add_row(
                e.source,
                e.gpu,
                e.split,
                str(e.num_rows),
                _percent(e.median_abs_error),
                f"{e.bias:.3f}",
                f"{e.within_10pct:.0%}",
            )
        _out(errors)
    held_out = profile.held_out_error(gpu)
    _out(
        f"held-out error used by the planner's band: {_percent(held_out) if held_out is not None else 'none'}"
    )


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
            _percent(held_out) if held_out is not None else "not validated",
        )
    _out(table)


def _print_points(calibration: Calibration) -> None:
    """Each measured point: its shape, median and spread of repeats, and the host/device split."""
    table = Table(
        "kind",
        "prefill tokens",
        "decode seqs",
        "context tokens",
        "median",
        "spread",
        "forward",
        "host",
    )
    for point in calibration.points:
        shape = point.shape.to_shape()
        table.add_row(
            point.kind,
            str(shape.num_prefill_tokens),
            str(shape.num_decode_seqs),
            str(shape.decode_context_tokens),
            f"{point.median_total_s * 1e3:.2f} ms",
            _percent(point.spread),
            f"{point.median_forward_s * 1e3:.2f} ms",
            f"{point.median_host_s * 1e3:.2f} ms",
        )
    _out(table)


def _print_terms(calibration: Calibration) -> None:
    fit = calibration.cost_model
    table = Table("term", "per", "value", "bound", "label", "note")
    for term in fit.terms:
        table.add_row(
            term.name,
            term.feature,
            f"{term.seconds_per_unit:.4g} s",
            term.bound,
            term.label,
            term.note[:70],
        )
    table.add_row(
        "knee (tokens)",
        "—",
        f"{fit.knee_tokens:.0f}",
        "—",
        fit.knee_label,
        "weight-read floor below it",
    )
    table.add_row(
        "GEMM tile (tokens)",
        "—",
        str(fit.tile_tokens),
        "—",
        fit.knee_label,
        "tokens count in whole tiles",
    )
    table.add_row(
        "GEMM switch (tokens)",
        "—",
        str(fit.gemm_switch_tokens),
        "—",
        fit.knee_label,
        "matrix-matrix kernels from here on",
    )
    if fit.spill_tokens is not None:
        table.add_row(
            "cache spill (tokens)", "—", f"{fit.spill_tokens:.0f}", "—", fit.knee_label, ""
        )
    _out(table)


def _print_errors(calibration: Calibration) -> None:
    table = Table("fit target", "points", "MAPE train", "MAPE held-out", "max error")
    for error in calibration.cost_model.fit_errors:
        table.add_row(
            error.target,
            str(error.num_points),
            _percent(error.mape_train),
            _percent(error.mape_cross_validated),
            _percent(error.max_ape),
        )
    _out(table)


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
    _print_terms(refitted)
    _print_errors(refitted)
    if plot:
        _out(f"plot written to {write_plot(refitted, plot)}")


def write_plot(calibration: Calibration, path: Path) -> Path:
    """Scatter of predicted against measured step time per point, one colour per point kind:
    interactive HTML with plotly, or a PNG with matplotlib."""
    path = Path(path)
    if path.suffix not in (".html", ".png"):
        raise typer.BadParameter(
            f"plot path {path} ends in {path.suffix!r}; expected .html or .png"
        )
    pairs = predicted_vs_measured(calibration)
    series = {}
    for kind in sorted({point.kind for point, _ in pairs}):
        chosen = [(point, predicted) for point, predicted in pairs if point.kind == kind]
        series[kind] = (
            [point.median_total_s * 1e3 for point, _ in chosen],
            [p * 1e3 for _, p in chosen],
            [f"{point.shape.to_shape().num_batched_tokens} tokens" for point, _ in chosen],
        )
    top = max(max(point.median_total_s, predicted) for point, predicted in pairs) * 1e3
    title = f"{calibration.name}: predicted vs measured step time"
    labels = ("measured (ms, median of repeats)", "predicted (ms)")
    (_html_plot if path.suffix == ".html" else _png_plot)(series, top, title, labels, path)
    return path


def _html_plot(series: dict, top: float, title: str, labels: tuple[str, str], path: Path) -> None:
    import plotly.graph_objects as go

    figure = go.Figure()
    for kind, (measured, predicted, text) in series.items():
        figure.add_scatter(x=measured, y=predicted, mode="markers", name=kind, text=text)
    figure.add_scatter(
        x=[0, top], y=[0, top], mode="lines", name="predicted = measured", line={"dash": "dash"}
    )
    figure.update_layout(title=title, xaxis_title=labels[0], yaxis_title=labels[1])
    figure.write_html(path)


def _png_plot(series: dict, top: float, title: str, labels: tuple[str, str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display: render straight to the file
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 6))
    for kind, (measured, predicted, _) in series.items():
        axes.scatter(measured, predicted, label=kind, s=18)
    axes.plot([0, top], [0, top], linestyle="--", color="grey", label="predicted = measured")
    axes.set(title=title, xlabel=labels[0], ylabel=labels[1])
    axes.legend()
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)


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
    _out(f"wrote {len(paths)} calibrations to {(out_dir or SHIPPED_DIR)}")


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
    _print_terms(calibration)
