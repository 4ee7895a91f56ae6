"""`surgeplan profile`: the command's options, and its `--from-steps` path that fits on a live
workload's step log instead of timing constructed batches. Apart from `profile.py` (the profiler
itself) so the profiler reads as one concept and the command as another."""

from pathlib import Path

import typer

from engine.config import EngineConfig, cli_option
from simulator.calibration.profile import profile
from simulator.calibration.profile_grid import ProfileGrid


def profile_command(
    model: str = typer.Option(None, "--model", help="model preset or local model directory"),
    load_format: str = typer.Option("dummy", help="dummy (random weights), auto or safetensors"),
    device: str = typer.Option(None, help="cpu or cuda (default: cuda when available)"),
    dtype: str = typer.Option("auto"),
    out: Path = typer.Option(None, help="calibration JSON to write"),
    quick: bool = typer.Option(False, help="a small grid that fits in CI"),
    seed: int = typer.Option(0),
    threads: int = typer.Option(None, help="torch CPU threads while profiling (default: torch's)"),
    statistic: str = typer.Option(
        "median", help="fit on: median or min wall time, or cpu (CPU time)"
    ),
    max_num_seqs: int = typer.Option(64, help="full grid: largest decode batch"),
    max_num_batched_tokens: int = typer.Option(1024, help="full grid: largest prefill chunk"),
    max_model_len: int = typer.Option(2048, help="full grid: decode contexts reach half of this"),
    passes: int = typer.Option(
        None, help="grid sweeps (default: 3 quick, 1 full); more resist noisy hosts"
    ),
    enforce_eager: bool = cli_option(EngineConfig, "enforce_eager"),
    from_steps: Path = typer.Option(
        None,
        "--from-steps",
        help="fit on a live workload's step log instead "
        "(written by `surgeplan validate --save-steps`)",
    ),
) -> None:
    """Time the engine's real step() over prefill, prefix-cached, decode and mixed batches; fit the cost model."""
    if from_steps is not None:
        from simulator.calibration.from_steps import calibration_from_steps

        try:
            calibration = calibration_from_steps(from_steps)
        except ValueError as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(code=2) from None
        out = calibration.save(out or Path(f"calibration-{calibration.model.name}-steps.json"))
        error = calibration.cost_model.fit_errors[0]
        typer.echo(f"{calibration.provenance.notes[0]} of {from_steps} -> {out}")
        typer.echo(
            f"cost model: MAPE {100 * error.mape_train:.1f}% on its steps, "
            f"{100 * error.mape_cross_validated:.1f}% held out ({error.folds}-fold)"
        )
        return
    if model is None:
        typer.echo("error: --model is needed (or --from-steps FILE)", err=True)
        raise typer.Exit(code=2)
    out = out or Path(f"calibration-{Path(model).name}.json")
    grid = (
        ProfileGrid.quick()
        if quick
        else ProfileGrid.full(max_num_seqs, max_num_batched_tokens, max_model_len)
    )
    grid = grid.model_copy(update={"passes": passes or grid.passes})
    calibration = profile(
        model,
        load_format=load_format,
        device=device,
        dtype=dtype,
        out=out,
        seed=seed,
        grid=grid,
        threads=threads,
        statistic=statistic,
        enforce_eager=enforce_eager,
    )
    error = calibration.cost_model.fit_errors[0]
    typer.echo(f"{len(calibration.points)} points on {calibration.device.name} -> {out}")
    typer.echo(
        f"cost model: MAPE {100 * error.mape_train:.1f}% on its points, "
        f"{100 * error.mape_cross_validated:.1f}% held out ({error.folds}-fold)"
    )
